#!/usr/bin/env python3
"""python/ufp4's numpy functions against the C library's other doors, bit for bit: `ufp4 quantize`
(dequantized .npy and the --packed file's scales and codes), `ufp4 bias --json` (the measures),
a numpy transcription of the FWHT and of the FP32-scale RNE quantizer, and the grids' textbook
levels; on random and hard tensors (ties, zeros, denormals, huge values, NaN and Inf blocks).
Bad arguments raise before C, and C's errors arrive as UFP4Error with the C message."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, expect, finish  # noqa: E402
from system_python import import_or_skip  # noqa: E402

np = import_or_skip("numpy", "python3-numpy")
import ufp4  # noqa: E402

CLI = os.environ["UFP4_CLI"]
TMP = tempfile.mkdtemp(prefix="ufp4_py_")


def bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def same(a, b):
    return a.shape == b.shape and np.array_equal(bits(a), bits(b))


def cli_flags(spec):
    """`ufp4 quantize` flags of a spec: the same words with dashes (the spec's definition)."""
    out = []
    for item in filter(None, spec.split(",")):
        k, _, v = item.partition("=")
        out += ["--tile2d"] if k == "tile2d" else ["--" + k, v]
    return out


def run(args):
    p = subprocess.run([CLI] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr}")
    return p.stdout


def tensors():
    rng = np.random.default_rng(11)
    yield "gaussian", rng.standard_normal((33, 64)).astype(np.float32)
    yield "heavy", (rng.standard_t(3, (17, 128)) * 100).astype(np.float32)
    hard = np.zeros((32, 64), np.float32)  # row 0 stays all-zero
    g = ufp4.grid("e2m1")["levels"]
    edges = (g[:-1] + g[1:]) / 2  # ties of E2M1 at scale 1 (amax 6 in each block)
    hard[1, :16] = np.concatenate([[6.0], edges, -edges, [0.0, -6.0]])[:16]
    hard[2, :16] = np.concatenate([[1.75], np.arange(1, 8) * 0.125 + 0.125, -np.arange(1, 9) * 0.125])  # E1M2 ties
    hard[3, :16] = np.float32(1e-40) * np.arange(16)  # denormals
    hard[4, :16] = np.finfo(np.float32).max * np.linspace(-1, 1, 16, dtype=np.float32)  # huge
    hard[5, :16] = 1.0
    hard[5, 3] = np.nan
    hard[6, 16:32] = 2.0
    hard[6, 20] = np.inf
    hard[7, 32:48] = -np.inf
    hard[8, :] = 448.0 * 6  # amax at an E4M3 x g_max boundary
    hard[9, :] = rng.standard_normal(64).astype(np.float32) * 2.0 ** -126
    hard[10:] = rng.standard_normal((22, 64)).astype(np.float32)
    yield "hard", hard


SPECS = [""]
SPECS += [f"grid={g}" for g in ufp4.GRIDS[1:]]
SPECS += [f"scale={s}" for s in ufp4.SCALES[1:]]
SPECS += [f"round={r},seed=5,stream=9" for r in ufp4.ROUNDS[1:]]
SPECS += ["block=1", "block=8", "block=32,scale=e8m0-rceil", "block=64,grid=int4", "tile2d", "tile2d,scale=nvfp4",
          "rht=16", "rht=16,rht-signs=nvidia,scale=nvfp4", "rht=64,seed=3,round=sr,grid=e1m2", "rht=2",
          "grid=e1m2,scale=e8m0-even,round=rna", "grid=e2m1-max2,scale=e8m0-floor,block=32,round=rnz",
          "adaptive=4over6", "adaptive=4over6,scale=nvfp4,adaptive-metric=mae", "adaptive=4over6,tile2d,scale=nvfp4",
          "adaptive=4over6,block=32,scale=e8m0-rceil,adaptive-metric=maxabs"]


def test_against_cli():
    for name, x in tensors():
        xp = os.path.join(TMP, name + ".npy")
        np.save(xp, x)
        for spec in SPECS:
            if "rht=64" in spec and x.shape[1] % 64:
                continue
            yp, pp = os.path.join(TMP, "y.npy"), os.path.join(TMP, "p.bin")
            run(["quantize", "--in", xp, "--out", yp, "--packed", pp] + cli_flags(spec))
            want = np.load(yp)
            y = ufp4.quantize(x, spec)
            check(same(y, want), f"quantize {name} '{spec}' equals ufp4 quantize")
            enc = ufp4.encode(x, spec)
            raw = open(pp, "rb").read()
            ns, sb, nb = ufp4.format_info(x.shape, spec)
            head = np.frombuffer(raw[:80], np.uint8)
            ts = head[56:60].view("<f4")[0]
            body = raw[80:]
            check(enc.scales.tobytes() == body[: ns * sb], f"encode {name} '{spec}': scales as --packed stores them")
            check(enc.codes.tobytes() == body[ns * sb:], f"encode {name} '{spec}': codes as --packed stores them")
            check(len(body) == ns * sb + nb, f"format_info {name} '{spec}' sizes the packed file")
            check(np.float32(enc.tensor_scale).view(np.uint32) == ts.view(np.uint32), f"encode {name} '{spec}' S_enc")
            check(same(ufp4.decode(enc), want), f"decode(encode) {name} '{spec}' equals ufp4 quantize")
            u = enc.unpacked_codes()
            check(u.shape == x.shape and u.max() < 16, f"unpacked codes {name} '{spec}'")


def same15(a, want):
    """a is the CLI's number as cJSON prints it: %.15g when that reads back within cJSON's
    approximate check (one DBL_EPSILON), else %.17g, which is exact; NaN as null."""
    if want is None:
        return np.isnan(a)
    return a == want or float(f"{a:.15g}") == want


def test_measures_against_bias():
    for name, x in tensors():
        xp = os.path.join(TMP, name + ".npy")
        np.save(xp, x)
        for spec in ["seed=1", "grid=e1m2,seed=1", "scale=nvfp4,block=16,seed=1", "rht=16,seed=4,round=sr",
                     "rht=16,rht-signs=nvidia,grid=int4,seed=1", "block=32,scale=e8m0-ceil,round=rna,seed=1",
                     "adaptive=4over6,scale=nvfp4,seed=1", "adaptive=4over6,adaptive-metric=mae,seed=1",
                     "round=sr,grid=e1m2,seed=6"]:
            kv = dict(i.partition("=")[::2] for i in spec.split(","))
            flags = ["--grids", kv.get("grid", "e2m1"), "--rht", kv.get("rht", "0"), "--seed", kv["seed"]]
            flags += [f for k in ("block", "scale", "round", "rht-signs", "adaptive", "adaptive-metric") if k in kv
                      for f in ("--" + k, kv[k])]
            rows = json.loads(run(["bias", "--in", xp, "--json"] + flags))["results"]
            want = rows[-1]
            m = ufp4.measures(x, spec)
            for k in ufp4.MEASURES:
                check(same15(m[k], want[k]), f"measures {name} '{spec}' {k}: {m[k]!r} vs ufp4 bias {want[k]!r}")
            nb = len(want["bucket_p"])
            check(all(same15(a, b) for a, b in zip(m["bucket_p"][:nb], want["bucket_p"])) and
                  len(want["bucket_p"]) == ufp4.grid(kv.get("grid", "e2m1"))["levels"].size,
                  f"measures {name} '{spec}' bucket_p")
            check(all(same15(a, b) for a, b in zip(m["bucket_bias"][:nb], want["bucket_bias"])),
                  f"measures {name} '{spec}' bucket_bias")
            if "adaptive" in kv and name != "hard":
                check(0 < m["four_share"] < 1, f"measures {name} '{spec}': some blocks, not all, chose 4")
            if kv.get("round") == "sr":
                check(m["sr_n"] > 0, f"measures {name} '{spec}': the SR test has elements")


def numpy_rne_fp32(x, levels, block=16):
    """E2M1/E1M2/INT4 with FP32 scales, RNE, 1xblock blocks, finite x (quant.h's definition)."""
    r, c = x.shape
    b = x.reshape(r, c // block, block)
    s = (np.abs(b).max(axis=2, keepdims=True) / np.float32(levels[-1])).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(s > 0, b / s, np.float32(0)).astype(np.float32)
    a = np.minimum(np.abs(t), levels[-1])
    i = np.searchsorted(levels, a)  # levels[i-1] < a <= levels[i]
    i = np.clip(i, 1, len(levels) - 1)
    lo, hi = levels[i - 1], levels[i]
    up = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    idx = np.where(a <= 0, 0, np.where(up, i, i - 1))
    v = (np.sign(t) * levels[idx]).astype(np.float32) * s
    return np.where(s > 0, v, np.float32(0)).reshape(r, c).astype(np.float32)


def test_numpy_reference():
    for name, x in tensors():
        x = np.where(np.isfinite(x), x, 0).astype(np.float32)
        x = np.clip(x, -1e30, 1e30).astype(np.float32)
        for g in ("e2m1", "e1m2", "int4"):
            want = numpy_rne_fp32(x, ufp4.grid(g)["levels"])
            if g == "int4":  # two's complement has no -0: a negative that rounds to 0 is +0
                want = want + np.float32(0)
            check(same(ufp4.quantize(x, grid=g), want), f"quantize {name} {g} equals the numpy reference")


def numpy_fwht(x, signs):
    n = signs.size
    y = (x.reshape(-1, n) * signs).astype(np.float32)
    h = 1
    while h < n:
        v = y.reshape(-1, n // (2 * h), 2, h)
        a, b = v[:, :, 0, :].copy(), v[:, :, 1, :].copy()
        v[:, :, 0, :], v[:, :, 1, :] = a + b, a - b
        h *= 2
    return (y * np.float32(1.0 / np.sqrt(n))).reshape(x.shape)


NVIDIA16 = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], np.float32)


def test_rht():
    x = np.random.default_rng(3).standard_normal((9, 256)).astype(np.float32)
    for spec in ("rht=2", "rht=16", "rht=16,rht-signs=nvidia", "rht=64,seed=7", "rht=256,seed=1"):
        s = ufp4.rht_signs(spec)
        check(set(np.unique(s)) <= {-1.0, 1.0} and s.size == int(spec.split(",")[0][4:]), f"rht_signs '{spec}'")
        y = ufp4.rht(x, spec)
        check(same(y, numpy_fwht(x, s)), f"rht '{spec}' equals the numpy FWHT")
        back = ufp4.rht(y, spec, inverse=True)
        check(np.allclose(back, x, atol=1e-5), f"rht '{spec}' inverse undoes it")
        z = x.copy()
        check(ufp4.rht(z, spec, out=z) is z and same(z, y), f"rht '{spec}' in place")
    check(same(ufp4.rht_signs("rht=16,rht-signs=nvidia"), NVIDIA16), "nvidia signs: Transformer Engine's vector")
    check(not np.array_equal(ufp4.rht_signs("rht=64,seed=1"), ufp4.rht_signs("rht=64,seed=2")), "signs follow the seed")


def test_grids():
    want = {"e2m1": [0, .5, 1, 1.5, 2, 3, 4, 6], "e1m2": [i / 4 for i in range(8)], "int4": list(range(8)),
            "e2m1-max2": [0, .5, 1, 1.5, 2], "e2m1-max3": [0, .5, 1, 1.5, 2, 3], "e2m1-max4": [0, .5, 1, 1.5, 2, 3, 4]}
    for g in ufp4.GRIDS:
        d = ufp4.grid(g)
        q = np.asarray(want[g], np.float64)
        check(np.array_equal(d["levels"], q.astype(np.float32)), f"grid {g} levels")
        bias = [((q[i] - q[i - 1]) / 2 - (q[i + 1] - q[i]) / 2) / 2 for i in range(1, len(q) - 1)]
        check(np.isnan(d["bias"][0]) and np.isnan(d["bias"][-1]) and np.allclose(d["bias"][1:-1], bias, rtol=0, atol=0),
              f"grid {g} per-bin bias (l - r) / 2")




def test_bad_arguments():
    x = np.ones((4, 32), np.float32)
    expect(TypeError, lambda: ufp4.quantize(x.astype(np.float64)), "float64 input", "float32")
    expect(TypeError, lambda: ufp4.quantize(x.tolist()), "a list", "numpy.ndarray")
    expect(TypeError, lambda: ufp4.quantize(x.astype(">f4")), "big-endian float32", "got >f4 (byte-swapped)")
    expect(ValueError, lambda: ufp4.quantize(x[0]), "1-D input", "2-D")
    expect(ValueError, lambda: ufp4.quantize(x[:, ::2]), "strided input", "C-contiguous")
    expect(ValueError, lambda: ufp4.quantize(x, out=np.empty((4, 16), np.float32)), "wrong out shape", "shape")
    expect(TypeError, lambda: ufp4.quantize(x, 16), "spec not a str", "str")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "grid=e9m9"), "unknown grid", "e9m9")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "block=12"), "block not a power of two", "power of two")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "rht=64"), "rht not dividing cols", "does not divide")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "rht=32,rht-signs=nvidia"), "nvidia signs need 16", "rht=16")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "colour=blue"), "unknown key", "unknown key 'colour'")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "unrotate"), "unknown bare key", "unknown key 'unrotate'")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "grid"), "a known key without a value", "needs a value")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "grid=e1m2,grid=int4"), "a key twice", "'grid' given twice")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "block= 16"), "a space in a number", "non-negative integer")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "adaptive=4over6,grid=e1m2"), "4/6 on E1M2", "adaptive")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "adaptive=5over7"), "unknown adaptive", "none or 4over6")
    expect(ValueError, lambda: ufp4.quantize(x, "grid=e1m2\0,block=12"), "a NUL in the spec", "NUL")
    expect(ufp4.UFP4Error, lambda: ufp4.quantize(x, "seed=-1"), "negative seed", "seed")
    expect(ufp4.UFP4Error, lambda: ufp4.rht(x, "block=16"), "rht without a size", "rht=N")
    expect(ufp4.UFP4Error, lambda: ufp4.grid("e3m0"), "unknown grid name", "e3m0")
    expect(ufp4.UFP4Error, lambda: ufp4.recipe_canonical("ufp4,rht=sideways"), "bad recipe", "rht")
    enc = ufp4.encode(x)
    enc.codes = enc.codes[:-1]
    expect(ValueError, lambda: ufp4.decode(enc), "truncated codes", "codes")
    y = np.full((4, 32), 7, np.float32)
    expect(ufp4.UFP4Error, lambda: ufp4.rht(x, "rht=64", out=y), "bad rht spec", "does not divide")
    check(np.all(y == 7), "a failed rht leaves out untouched")
    z = x * 3
    check(ufp4.quantize(z, out=z) is z and same(z, ufp4.quantize(x * 3)), "quantize in place (out=x)")
    check(ufp4.quantize(x, grid="e1m2", block=32, tile2d=False) is not None, "keyword options build the spec")


def test_finding_the_library():
    """UFP4_PREFIX/lib is searched; an explicit UFP4_LIBRARY that does not exist is an error naming it."""
    prefix = os.path.join(TMP, "prefix")
    os.makedirs(os.path.join(prefix, "lib"), exist_ok=True)
    link = os.path.join(prefix, "lib", "libufp4.so")
    if not os.path.exists(link):
        os.symlink(ufp4.library_path, link)
    code = "import ufp4; print(ufp4.library_path)"
    env = {k: v for k, v in os.environ.items() if k not in ("UFP4_LIBRARY", "UFP4_BINARY_DIR")}
    p = subprocess.run([sys.executable, "-c", code], env=dict(env, UFP4_PREFIX=prefix), capture_output=True, text=True)
    check(p.stdout.strip() == link, f"UFP4_PREFIX finds {link}: {p.stdout} {p.stderr}")
    site = os.path.join(prefix, "lib", "python3", "dist-packages")  # where `make install` puts the package
    if not os.path.isdir(os.path.join(site, "ufp4")):
        shutil.copytree(os.path.dirname(ufp4.__file__), os.path.join(site, "ufp4"))
    p = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=site), capture_output=True, text=True)
    check(p.stdout.strip() == link, f"an installed package finds PREFIX/lib/libufp4.so: {p.stdout} {p.stderr}")
    bad = os.path.join(TMP, "nowhere", "libufp4.so")
    p = subprocess.run([sys.executable, "-c", code], env=dict(env, UFP4_LIBRARY=bad), capture_output=True, text=True)
    check(p.returncode != 0 and bad in p.stderr, "a wrong UFP4_LIBRARY fails naming the path")


print("library:", ufp4.library_path)
finish("python_numpy", test_against_cli, test_measures_against_bias, test_numpy_reference, test_rht, test_grids,
       test_bad_arguments, test_finding_the_library)
