"""The numpy side of ufp4: the library's quantizer, packed storage, measures, RHT and grids.

A quantizer format is a spec string of `ufp4 quantize`'s flags without their dashes
("grid=e1m2,block=32,scale=e8m0-rceil,round=sr,rht=16,seed=7"; include/ufp4/capi.h lists the
keys), parsed and checked by the C library; keyword arguments are appended to it, so
quantize(x, grid="e1m2", block=32) is quantize(x, "grid=e1m2,block=32"). Tensors are 2-D float32,
C-contiguous numpy arrays with blocks along the last axis; anything else raises TypeError or
ValueError before the library is called (convert with np.ascontiguousarray(x, np.float32)). Inputs
are passed to C without a copy and results are numpy arrays the library fills in place."""
import ctypes

import numpy as np

from . import _lib

GRIDS = ("e2m1", "e1m2", "int4", "e2m1-max2", "e2m1-max3", "e2m1-max4")
SCALES = ("fp32", "nvfp4", "e8m0-floor", "e8m0-ceil", "e8m0-even", "e8m0-rceil")
ROUNDS = ("rne", "rna", "rnz", "sr", "sr8")
MEASURES = ("alpha", "nmse", "sqnr_db", "shrink_bias", "mean_rel_err", "bucket_entropy", "b_eff", "underflow",
            "clipped", "n", "n_nonfinite", "four_share", "sr_n", "sr_bias", "sr_z_mag", "sr_z_val")
_N_MEASURES = len(MEASURES) + 16  # then bucket_p[8] and bucket_bias[8]
if _lib.lib.ufp4_capi_n_measures() != _N_MEASURES:  # out[] below is sized by this package's count
    raise ImportError(f"ufp4: {_lib.library_path} writes {_lib.lib.ufp4_capi_n_measures()} measures, this package "
                      f"reads {_N_MEASURES}: a library of another version (rebuild it, or set UFP4_LIBRARY)")


def format_spec(spec="", **kw):
    """The spec string with keyword options appended (tile2d=True -> "tile2d=1", rht_signs -> rht-signs)."""
    if not isinstance(spec, str):
        raise TypeError(f"ufp4: spec must be a str, got {type(spec).__name__}")
    parts = [spec] if spec else []
    for k, v in kw.items():
        if isinstance(v, bool):
            v = int(v)
        parts.append(f"{k.replace('_', '-')}={v}")
    return ",".join(parts)


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def _matrix(x, what, dtype=np.float32):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"ufp4: {what} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype != dtype:
        got = x.dtype.name if x.dtype.name != np.dtype(dtype).name else f"{x.dtype.str} (byte-swapped)"
        raise TypeError(f"ufp4: {what} must have dtype {np.dtype(dtype).name} in native byte order, got {got}")
    if x.ndim != 2:
        raise ValueError(f"ufp4: {what} must be 2-D (rows x cols, blocks along cols), got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"ufp4: {what} must be C-contiguous (np.ascontiguousarray); no hidden copies are made")
    return x


def _out(out, shape, what):
    if out is None:
        return np.empty(shape, np.float32)
    _matrix(out, what)
    if out.shape != shape:
        raise ValueError(f"ufp4: {what} has shape {out.shape}, expected {shape}")
    if not out.flags.writeable:
        raise ValueError(f"ufp4: {what} is read-only")
    return out


def format_info(shape, spec="", **kw):
    """(n_scales, scale_bytes, packed_bytes) that encode stores for a tensor of this shape."""
    s = _lib.cstr(format_spec(spec, **kw), "spec")
    rows, cols = _shape2(shape)
    v = (ctypes.c_size_t * 3)()
    _lib.call("capi_format_check", s, rows, cols, ctypes.byref(v, 0), ctypes.byref(v, 8), ctypes.byref(v, 16))
    return int(v[0]), int(v[1]), int(v[2])


def _shape2(shape):
    if len(shape) != 2 or any((not isinstance(d, (int, np.integer))) or d < 0 for d in shape):
        raise ValueError(f"ufp4: shape must be two non-negative integers, got {shape}")
    return int(shape[0]), int(shape[1])


def quantize(x, spec="", *, out=None, **kw):
    """Quantize-dequantize x (the training path, ufp4_fake_quant): a float32 array of x's shape
    holding decode(code) * scale. With rht=N the result stays in the rotated basis (apply
    rht(y, spec, inverse=True) to rotate back). `out` (may be x itself) receives the result."""
    _matrix(x, "x")
    y = _out(out, x.shape, "out")
    _lib.call("capi_quantize", _lib.cstr(format_spec(spec, **kw), "spec"), _ptr(x), _ptr(y), *x.shape)
    return y


class Encoded:
    """Codes and scales exactly as `ufp4 quantize --packed` stores them after its header:
    codes   uint8 [ceil(rows*cols/2)], two 4-bit codes per byte, element 2i in the low nibble
    scales  float32 [n_scales] of dequantization factors (fp32 scale), or uint8 [n_scales] of E4M3
            (nvfp4) or E8M0 codes, one per block, row-major over blocks
    tensor_scale  NVFP4's S_enc (1.0 otherwise); shape, spec: what was encoded, and how."""

    def __init__(self, codes, scales, tensor_scale, shape, spec):
        self.codes, self.scales, self.tensor_scale, self.shape, self.spec = codes, scales, tensor_scale, shape, spec

    def unpacked_codes(self):
        """One code per element, uint8 of self.shape."""
        n = self.shape[0] * self.shape[1]
        u = np.empty(2 * self.codes.size, np.uint8)
        u[0::2] = self.codes & 0x0F
        u[1::2] = self.codes >> 4
        return u[:n].reshape(self.shape)

    def __repr__(self):
        return (f"Encoded(shape={self.shape}, spec={self.spec!r}, {self.codes.size} code bytes, "
                f"{self.scales.size} scales {self.scales.dtype}, tensor_scale={self.tensor_scale!r})")


def encode(x, spec="", **kw):
    """Block-quantize x (ufp4_quantize) into an Encoded."""
    _matrix(x, "x")
    s = format_spec(spec, **kw)
    ns, sb, nb = format_info(x.shape, s)
    codes = np.empty(nb, np.uint8)
    scales = np.empty(ns, np.dtype("<f4") if sb == 4 else np.uint8)
    ts = ctypes.c_float(1.0)
    _lib.call("capi_encode", _lib.cstr(s, "spec"), _ptr(x), *x.shape, _ptr(codes), _ptr(scales), ctypes.byref(ts))
    return Encoded(codes, scales, float(ts.value), tuple(x.shape), s)


def decode(enc, *, out=None):
    """The dequantized float32 tensor of an Encoded (equal, bit for bit, to quantize's result)."""
    if not isinstance(enc, Encoded):
        raise TypeError(f"ufp4: decode takes an Encoded, got {type(enc).__name__}")
    rows, cols = _shape2(enc.shape)
    ns, sb, nb = format_info(enc.shape, enc.spec)
    want = np.dtype("<f4") if sb == 4 else np.dtype(np.uint8)
    for a, dt, n, what in ((enc.codes, np.dtype(np.uint8), nb, "codes"), (enc.scales, want, ns, "scales")):
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1 or a.size != n or not a.flags.c_contiguous:
            raise ValueError(f"ufp4: Encoded.{what} must be a contiguous 1-D {dt.name} array of {n} entries")
    y = _out(out, (rows, cols), "out")
    _lib.call("capi_decode", _lib.cstr(enc.spec, "spec"), _ptr(enc.codes), _ptr(enc.scales),
              ctypes.c_float(enc.tensor_scale), rows, cols, _ptr(y))
    return y


def measures(x, spec="", **kw):
    """The paper's measures of the quantizer on x (ufp4_measure_tensor; with rht=N, of the rotated
    tensor): a dict of MEASURES (include/ufp4/measures.h) plus bucket_p, the fraction of elements
    per magnitude index, and bucket_bias, the mean rho - t per magnitude index (8 each; a grid
    with fewer levels leaves the rest 0)."""
    _matrix(x, "x")
    v = np.empty(_N_MEASURES, np.float64)
    _lib.call("capi_measures", _lib.cstr(format_spec(spec, **kw), "spec"), _ptr(x), *x.shape, _ptr(v))
    d = {k: float(v[i]) for i, k in enumerate(MEASURES)}
    d["n"], d["n_nonfinite"], d["sr_n"] = int(d["n"]), int(d["n_nonfinite"]), int(d["sr_n"])
    d["bucket_p"] = v[len(MEASURES):len(MEASURES) + 8].copy()
    d["bucket_bias"] = v[len(MEASURES) + 8:].copy()
    return d


def rht(x, spec, *, inverse=False, out=None, **kw):
    """x S H on every rht-chunk of each row (ufp4_rht_rows), or the inverse, with the spec's rht
    size, signs and seed ("rht=16", "rht=16,rht-signs=nvidia", "rht=64,seed=3"). out=x rotates
    in place."""
    _matrix(x, "x")
    y = _out(out, x.shape, "out")
    s = _lib.cstr(format_spec(spec, **kw), "spec")
    _lib.call("capi_format_check", s, *x.shape, None, None, None)  # a bad spec leaves out untouched
    if y is not x:
        np.copyto(y, x)
    _lib.call("capi_rht", s, _ptr(y), *x.shape, int(bool(inverse)))
    return y


def rht_signs(spec, **kw):
    """The sign vector (float32 of +-1, rht entries) the spec's RHT uses."""
    v = np.empty(256, np.float32)
    n = ctypes.c_int(0)
    _lib.call("capi_rht_signs", _lib.cstr(format_spec(spec, **kw), "spec"), _ptr(v), ctypes.byref(n))
    return v[: n.value].copy()


def grid(name):
    """Grid `name`: {"levels": ascending magnitudes (float32), "bias": the geometric bias of each
    level's bin (paper's Eq. 2, ufp4_bin_bias; NaN for the zero and top bins)}."""
    lv = np.empty(8, np.float32)
    bias = np.empty(8, np.float64)
    n = ctypes.c_int(0)
    _lib.call("capi_grid", _lib.cstr(name, "grid name"), _ptr(lv), _ptr(bias), ctypes.byref(n))
    return {"levels": lv[: n.value].copy(), "bias": bias[: n.value].copy()}


def recipe_canonical(recipe):
    """The fully resolved spec of a training recipe ("ufp4,rht=wgrad" -> "ufp4,grid=e1m2,...")."""
    buf = ctypes.create_string_buffer(1024)
    _lib.call("capi_recipe_canonical", _lib.cstr(recipe, "recipe"), buf, len(buf))
    return buf.value.decode()
