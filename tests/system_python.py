"""Shared by the Python tests that need a Debian package under /usr/bin/python3."""
import importlib
import os
import sys


def import_or_skip(module, package):
    """The module, or exit 77 (ctest's skip) when it is missing; but exit 1 under CI, which installs
    the test dependencies (scripts/setup.sh --test)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            print(f"FAIL: {module} is missing, and CI must run this test (Debian {package})")
            sys.exit(1)
        print(f"skipped: {module} is not installed (Debian {package}, scripts/setup.sh --test)")
        sys.exit(77)
