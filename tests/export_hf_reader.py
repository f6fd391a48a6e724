#!/usr/bin/env python3
"""An independent reader of ufp4's hf-nvfp4 / hf-mxfp4 exports, written from docs/EXPORT.md (Hugging Face formats)
alone: the safetensors header parsed with json, the E2M1, E4M3 and E8M0 codes decoded here, the
scales applied as ModelOpt's and transformers' dequantizers do. Usage:

    export_hf_reader.py EXPORT_DIR REFERENCE_CHECKPOINT_DIR

Every tensor of REFERENCE/model.safetensors (fp32) must equal, bit for bit, the tensor EXPORT decodes
to under the same name. Exit 0 when all match, 1 otherwise, 77 without numpy."""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from system_python import import_or_skip  # noqa: E402

np = import_or_skip("numpy", "python3-numpy")

DTYPES = {"F32": (np.float32, 4), "U8": (np.uint8, 1), "F8_E4M3": (np.uint8, 1), "I8": (np.int8, 1)}


def read_safetensors(path):
    """{name: (dtype string, shape, numpy array of the raw elements)}"""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        np_t, size = DTYPES[e["dtype"]]
        b, end = e["data_offsets"]
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        if end - b != count * size:
            raise ValueError(f"{path}: {name}: {end - b} bytes for shape {e['shape']}")
        arr = np.frombuffer(data[b:end], dtype=np.dtype(np_t).newbyteorder("<")).reshape(e["shape"])
        out[name] = (e["dtype"], e["shape"], arr)
    return out


# E2M1 (OCP MX v1.0, table 5): bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa.
def e2m1(code):
    code = code.astype(np.int32)
    e, m = (code >> 1) & 3, code & 1
    mag = np.where(e == 0, 0.5 * m, (1.0 + 0.5 * m) * np.exp2(e - 1.0))
    return np.where(code & 8, -mag, mag).astype(np.float32)


# E4M3 "fn" (OCP FP8): bit 7 sign, bits 6..3 exponent (bias 7), bits 2..0 mantissa, S.1111.111 NaN.
def e4m3(code):
    code = code.astype(np.int32)
    e, m = (code >> 3) & 15, code & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1.0 + m / 8.0) * np.exp2(e - 7.0))
    mag = np.where((code & 0x7F) == 0x7F, np.nan, mag)
    return np.where(code & 0x80, -mag, mag).astype(np.float32)


def unpack(packed, cols):
    """[rows, cols/2] bytes -> [rows, cols] codes: element 2i in the low nibble, 2i+1 in the high."""
    rows = packed.shape[0]
    p = packed.reshape(rows, cols // 2)
    codes = np.empty((rows, cols), dtype=np.uint8)
    codes[:, 0::2] = p & 0x0F
    codes[:, 1::2] = p >> 4
    return codes


def decode_nvfp4(t, module):
    w = t[module + ".weight"]
    s = t[module + ".weight_scale"]
    s2 = t[module + ".weight_scale_2"]
    assert w[0] == "U8" and s[0] == "F8_E4M3" and s2[0] == "F32", (module, w[0], s[0], s2[0])
    assert t[module + ".input_scale"][0] == "F32"
    rows, half = w[1]
    cols = 2 * half
    assert s[1] == [rows, cols // 16] and s2[1] == [], (s[1], s2[1])
    block_scale = e4m3(s[2]) * np.float32(s2[2].reshape(()))  # fp32 product, as ModelOpt's dequantize
    vals = e2m1(unpack(w[2], cols)).reshape(rows, cols // 16, 16)
    return (vals * block_scale[:, :, None]).reshape(rows, cols)


def decode_mxfp4(t, name):
    b = t[name + "_blocks"]
    s = t[name + "_scales"]
    assert b[0] == "U8" and s[0] == "U8", (name, b[0], s[0])
    rows, nb, sixteen = b[1]
    assert sixteen == 16 and s[1] == [rows, nb]
    assert not np.any(s[2] == 255), f"{name}: NaN scale"
    vals = e2m1(unpack(b[2].reshape(rows, nb * 16), nb * 32)).reshape(rows, nb, 32)
    scale = np.ldexp(np.float32(1.0), s[2].astype(np.int32) - 127).astype(np.float32)  # E8M0, bias 127
    return (vals * scale[:, :, None]).reshape(rows, nb * 32)


def self_check():
    """The decoders against textbook values (OCP MX v1.0 table 5; OCP FP8 E4M3: 0x38 = 1, 0x76 =
    1.75 * 2^7 = 224, 0x7E = 448 the largest, 0x01 = 2^-9 the smallest subnormal, 0x7F NaN)."""
    assert list(e2m1(np.arange(16))) == [0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6]
    v = e4m3(np.array([0x38, 0x76, 0x7E, 0x01, 0x08, 0xB8, 0x00], dtype=np.uint8))
    assert list(v) == [1.0, 224.0, 448.0, 2.0 ** -9, 2.0 ** -6, -1.0, 0.0], v
    assert np.isnan(e4m3(np.array([0x7F, 0xFF], dtype=np.uint8))).all()
    assert list(unpack(np.array([[0xB7]], dtype=np.uint8), 2)[0]) == [0x7, 0xB]


def main():
    self_check()
    export, ref = sys.argv[1], sys.argv[2]
    config = json.load(open(os.path.join(export, "config.json")))
    qc = config["quantization_config"]
    t = read_safetensors(os.path.join(export, "model.safetensors"))
    want = read_safetensors(os.path.join(ref, "model.safetensors"))
    if qc["quant_method"] == "modelopt":
        hq = json.load(open(os.path.join(export, "hf_quant_config.json")))["quantization"]
        assert hq["quant_algo"] == "NVFP4" and hq["group_size"] == 16, hq
        assert qc["quant_algo"] == "NVFP4" and qc["ignore"] == hq["exclude_modules"], qc
        fmt = "nvfp4"
    else:
        assert qc["quant_method"] == "mxfp4" and "modules_to_not_convert" in qc, qc
        fmt = "mxfp4"
    bad = n4 = 0
    for name, (dtype, shape, arr) in want.items():
        if name in t and t[name][0] == "F32":
            got = t[name][2]
        elif fmt == "nvfp4":
            got = decode_nvfp4(t, name[: -len(".weight")])
            n4 += 1
        else:
            got = decode_mxfp4(t, name)
            n4 += 1
        if got.shape != arr.shape or not np.array_equal(got.view(np.uint32), arr.astype(np.float32).view(np.uint32)):
            bad += 1
            print(f"MISMATCH {name}: max |diff| {np.max(np.abs(got - arr)) if got.shape == arr.shape else 'shape'}")
    print(f"{export}: {fmt}, {len(want)} tensors, {n4} decoded from 4 bits, {bad} mismatches")
    return 1 if bad or n4 == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
