"""The check helpers of tests/test_python_*.py: every failed check is printed and counted, and
finish() exits 1 when any failed, so one run reports all of them."""
import os
import sys

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def expect(exc, fn, what, contains=None):
    """fn() must raise exc, with `contains` in its message."""
    try:
        fn()
    except exc as e:
        check(not contains or contains in str(e), f"{what}: message '{e}' lacks '{contains}'")
        return
    except Exception as e:  # noqa: BLE001 - any other exception is a failure of this check
        check(False, f"{what}: raised {type(e).__name__} {e}, not {exc.__name__}")
        return
    check(False, f"{what}: did not raise")


def finish(name, *tests):
    for t in tests:
        t()
    print(f"{name}: {len(failures)} failures")
    sys.exit(1 if failures else 0)


def this_python_first(env, folder):
    """env with `folder` made to hold python3 -> this interpreter, first on PATH: the scripts that a
    test starts by their `#!/usr/bin/env python3` line then run under the test's interpreter. A
    version manager's shim found first on PATH (pyenv's is a shell script) costs about half a second
    a start; tests/test_study_pipeline.py starts some 600."""
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "python3")
    if not os.path.lexists(link):
        os.symlink(sys.executable, link)
    return dict(env, PATH=folder + os.pathsep + env.get("PATH", os.defpath))
