"""Checks a ufp4 parity kit with numpy and hashlib only (docs/PARITY.md): each file's SHA-256 against
manifest.json, and each case's codes.bin and scales.bin, decoded from the documented byte layout
alone, against its dequant.npy bit for bit (NaN matches NaN). Usage: python3 parity_check.py KIT"""
import hashlib, json, sys
import numpy as np

np.seterr(all="ignore")  # inf products are saturated below, NaN scales propagate on purpose
kit = sys.argv[1]
man = json.load(open(f"{kit}/manifest.json"))
bad = [p for p, h in man["files"].items() if hashlib.sha256(open(f"{kit}/{p}", "rb").read()).hexdigest() != h]
MAG = {"e2m1": [0, .5, 1, 1.5, 2, 3, 4, 6], "e1m2": [i / 4 for i in range(8)], "int4": list(range(8))}
E4M3 = np.float32([np.nan if b & 127 == 127 else (-1.0) ** (b >> 7) * ((b >> 3 & 15 > 0) + (b & 7) / 8)
                   * 2.0 ** (max(b >> 3 & 15, 1) - 7) for b in range(256)])
fmts = {f["name"]: f for f in man["formats"]}
for c in man["cases"]:
    f, d, shape = fmts[c["format"]], f"{kit}/{c['dir']}", (c["rows"], c["cols"])
    lut = np.float32([v - 16 * (v >> 3) if f["grid"] == "int4" else (-1.0) ** (v >> 3) * MAG[f["grid"]][v & 7]
                      for v in range(16)])  # 4-bit code -> element value
    p = np.fromfile(f"{d}/codes.bin", np.uint8)  # element 2i in the low nibble, 2i+1 in the high one
    codes = np.stack([p & 15, p >> 4], 1).ravel()[:shape[0] * shape[1]].reshape(shape)
    s = np.fromfile(f"{d}/scales.bin", "<f4" if c["scale_bytes"] == 4 else np.uint8)
    if f["scale"] == "nvfp4":
        s = E4M3[s] / np.float32(c["tensor_scale"])
    elif f["scale"].startswith("e8m0"):
        s = np.where(s == 255, np.float32(np.nan), np.ldexp(np.float32(1), s.astype(np.int32) - 127))
    r, k = np.indices(shape)
    y = lut[codes] * s.astype(np.float32)[r // c["block_rows"] * -(-shape[1] // c["block_cols"]) + k // c["block_cols"]]
    y = np.where(np.isinf(y), np.copysign(np.finfo(np.float32).max, y), y).astype(np.float32)
    ref = np.load(f"{d}/dequant.npy")
    if not ((y.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(y) & np.isnan(ref))).all():
        bad.append(c["dir"])
print(f"{kit}: kit {man['kit_version']}, {len(man['cases'])} cases, {len(man['files'])} files: "
      + (f"FAILED {len(bad)}: " + " ".join(bad[:10]) if bad else "all match"))
sys.exit(1 if bad else 0)
