"""What the study's Python scripts (schedule_design.py, schedule_recovery.py, operand_table.py) share:
reading a JSON object from a file, and libufp4's statistics through ctypes (the functions `ufp4
study` and `compare` use, so a script's figures are the tool's own; the library is $UFP4_LIBRARY,
else build/libufp4.so beside scripts/). Every error exits 2 with the script's name and the path."""
import ctypes
import json
import math
import os
import sys


def fail(prog, msg):
    print("%s: %s" % (prog, msg), file=sys.stderr)
    sys.exit(2)


def read_json_object(prog, path):
    """The JSON object in the file at path."""
    try:
        with open(path) as f:
            obj = json.load(f)
    except (OSError, ValueError) as e:
        fail(prog, "%s: cannot be read as JSON (%s)" % (path, e))
    if not isinstance(obj, dict):
        fail(prog, "%s: not a JSON object" % path)
    return obj


def library(prog):
    """libufp4 with the signatures of ufp4/power.h declared; exit 2 naming the path when it cannot be loaded."""
    path = os.environ.get("UFP4_LIBRARY") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                          "libufp4.so")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        fail(prog, "%s: cannot load libufp4 (%s); build it with `make build` or set UFP4_LIBRARY" % (path, e))
    lib.ufp4_paired_n.restype = ctypes.c_int
    lib.ufp4_paired_n.argtypes = [ctypes.c_double] * 4 + [ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.ufp4_paired_mdd.restype = ctypes.c_double
    lib.ufp4_paired_mdd.argtypes = [ctypes.c_double, ctypes.c_size_t, ctypes.c_double, ctypes.c_double]
    lib.ufp4_t_quantile.restype = ctypes.c_double
    lib.ufp4_t_quantile.argtypes = [ctypes.c_double, ctypes.c_double]
    return lib


def finite(x):
    """A JSON number that is finite (not a bool, not None)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
