"""Finding and loading libufp4 with ctypes, and turning its failures into Python exceptions.

The library is looked for, in order:
  1. $UFP4_LIBRARY, the path of the shared library itself;
  2. $UFP4_PREFIX/lib/libufp4.so (an install prefix);
  3. libufp4.so in lib/ next to the package when it is installed (PREFIX/lib/pythonX/site-packages/
     ufp4 -> PREFIX/lib), found by walking up from this file;
  4. the build tree of a source checkout: $UFP4_BINARY_DIR, then build/ next to python/.
Only functions declared in include/ufp4/*.h are called (the library exports nothing else)."""
import ctypes
import os

_NAME = "libufp4.so"


class UFP4Error(RuntimeError):
    """A failure reported by the C library: `status` is the ufp4_status code (negative) and the
    message is the library's ufp4_last_error() text."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


UFP4Error.__module__ = "ufp4"  # shown as ufp4.UFP4Error, the name users import it by


def _candidates():
    env = os.environ.get("UFP4_LIBRARY")
    if env:
        return [env]  # an explicit path is the only one tried: a wrong one must not be papered over
    out = []
    prefix = os.environ.get("UFP4_PREFIX")
    if prefix:
        out += [os.path.join(prefix, d, _NAME) for d in ("lib", "lib64")]
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.dirname(here)
    for _ in range(4):  # site-packages, pythonX.Y, lib, PREFIX
        out += [os.path.join(d, _NAME), os.path.join(d, "lib", _NAME)]
        d = os.path.dirname(d)
    if os.environ.get("UFP4_BINARY_DIR"):
        out.append(os.path.join(os.environ["UFP4_BINARY_DIR"], _NAME))
    out.append(os.path.join(os.path.dirname(os.path.dirname(here)), "build", _NAME))
    return out


def _pin_blas():
    """The `ufp4` command's OpenBLAS rule (src/cli/blas_pin.h): on x86-64 with AVX2 and FMA the
    Haswell kernel set, which fixes each SGEMM's summation order and so the bits of the linear
    layer, unless OPENBLAS_CORETYPE is set or UFP4_BLAS_CORE=native. It takes effect only when
    OpenBLAS is not loaded yet (import ufp4 before numpy or torch, or set OPENBLAS_CORETYPE)."""
    if "OPENBLAS_CORETYPE" in os.environ or os.environ.get("UFP4_BLAS_CORE") == "native":
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if os.uname().machine in ("x86_64", "AMD64") and "avx2" in flags and "fma" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


def _load():
    _pin_blas()
    tried = _candidates()
    for path in tried:
        if os.path.isfile(path):
            return ctypes.CDLL(path), path
    raise OSError(
        "ufp4: libufp4.so not found; set UFP4_LIBRARY to its path or UFP4_PREFIX to the install prefix "
        "(tried: " + ", ".join(tried) + ")"
    )


lib, library_path = _load()

_p = ctypes.c_void_p
_s = ctypes.c_size_t
_c = ctypes.c_char_p
_i = ctypes.c_int
_SIGS = {
    "ufp4_last_error": (_c, []),
    "ufp4_capi_format_check": (_i, [_c, _s, _s, _p, _p, _p]),
    "ufp4_capi_quantize": (_i, [_c, _p, _p, _s, _s]),
    "ufp4_capi_encode": (_i, [_c, _p, _s, _s, _p, _p, _p]),
    "ufp4_capi_decode": (_i, [_c, _p, _p, ctypes.c_float, _s, _s, _p]),
    "ufp4_capi_measures": (_i, [_c, _p, _s, _s, _p]),
    "ufp4_capi_n_measures": (_i, []),
    "ufp4_capi_rht": (_i, [_c, _p, _s, _s, _i]),
    "ufp4_capi_rht_signs": (_i, [_c, _p, _p]),
    "ufp4_capi_grid": (_i, [_c, _p, _p, _p]),
    "ufp4_capi_recipe_canonical": (_i, [_c, _p, _s]),
    "ufp4_capi_linear_check": (_i, [_c, _s, _s, _s, _i, _i]),
    "ufp4_capi_linear_forward": (_i, [_c, _p, _p, _p, _p, _s, _s, _s]),
    "ufp4_capi_linear_backward": (_i, [_c, _p, _p, _p, _p, _p, _p, _s, _s, _s]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name, None)
    if _f is None:
        raise ImportError(f"ufp4: {library_path} has no {_name}: a library of another version than this package "
                          "(rebuild it, or point UFP4_LIBRARY at the matching one)")
    _f.restype = _res
    _f.argtypes = _args


def call(name, *args):
    """Calls ufp4_<name>; raises UFP4Error with the C message when it returns non-zero. ctypes
    runs the call on this thread, so the thread-local ufp4_last_error() is this call's."""
    rc = getattr(lib, "ufp4_" + name)(*args)
    if rc != 0:
        raise UFP4Error(rc, lib.ufp4_last_error().decode("utf-8", "replace"))
    return rc


def cstr(s, what):
    if not isinstance(s, str):
        raise TypeError(f"ufp4: {what} must be a str, got {type(s).__name__}")
    if "\0" in s:  # C would read only up to it
        raise ValueError(f"ufp4: {what} {s!r} holds a NUL character")
    return s.encode("utf-8")
