#!/usr/bin/python3
"""Independent safetensors reference for tests/test_safetensors.c (test-only).

  st_ref.py write OUT   writes the fixed test set with struct+json, following the spec and the
                        layout rules of include/ufp4/safetensors.h
  st_ref.py check FILE  parses FILE with struct+json and checks every value of the test set
  st_ref.py torch FILE  loads FILE with torch.frombuffer and checks values; exit 77 without torch

The test set must match make_set() in tests/test_safetensors.c.
"""
import json
import struct
import sys

import numpy as np

SPECIAL = [0x3F808000, 0x3F818000, 0x3F808001, 0x7F7FFFFF, 0xFF800000, 0x7FC00001, 0x7F800001,
           0x80000000, 0x00000001, 0x00008000, 0x00018000, 0x477FF000, 0x477FE000, 0x477FEFFF,
           0x33800000, 0x33000000, 0x33400000, 0x38800000, 0x387FE000, 0x387FF000, 0xC0490FDB,
           0x3F800000]
BITS = {"F64": 64, "I64": 64, "F32": 32, "F16": 16, "BF16": 16, "U8": 8}
META = {"format": "pt", "note": "say \"hi\"\n\x01\u00e9"}


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def value(k, i):
    return f32(((i * 37 + k * 11) % 97 - 48) / 3.0)


def bits_to_f32(u):
    return struct.unpack("<f", struct.pack("<I", u))[0]


def bf16_bits(x):
    """Nearest bfloat16, ties to even, chosen by comparing exact distances (not the +0x7FFF trick)."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u >> 16) | 0x0040
    lo = u >> 16
    hi = lo + 1
    if (u & 0xFFFF) == 0:
        return lo

    def mag(h):  # magnitude of a bf16 pattern, reading 0x7F80 as 2^128 (the next binade)
        h &= 0x7FFF
        return 2.0 ** 128 if h == 0x7F80 else abs(float(bits_to_f32(h << 16)))

    a = abs(float(x))
    dl, dh = a - mag(lo), mag(hi) - a
    if dl < dh or (dl == dh and lo % 2 == 0):
        return lo
    return hi


def f16_bits(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:  # the header's policy: quiet NaN, sign and top payload kept
        return ((u >> 16) & 0x8000) | 0x7E00 | ((u >> 13) & 0x1FF)
    with np.errstate(over="ignore"):  # overflow to Inf is the intended result
        return int(np.array([x], dtype=np.float32).astype(np.float16).view(np.uint16)[0])


def make_set():
    """(name, dtype, shape, bytes) in the C test's order."""
    t = []
    v = [value(0, i) for i in range(12)]
    t.append(("model.embed_tokens.weight", "F32", [4, 3], struct.pack("<12f", *v)))
    v = [value(1, i) for i in range(12)]
    t.append(("lm_head.weight", "BF16", [3, 4], struct.pack("<12H", *map(bf16_bits, v))))
    v = [value(2, i) for i in range(5)]
    t.append(("b.bias", "F16", [5], struct.pack("<5H", *map(f16_bits, v))))
    sp = [bits_to_f32(u) for u in SPECIAL]
    t.append(("bf16.special", "BF16", [len(sp)], struct.pack("<%dH" % len(sp), *map(bf16_bits, sp))))
    t.append(("f16.special", "F16", [len(sp)], struct.pack("<%dH" % len(sp), *map(f16_bits, sp))))
    t.append(("step", "I64", [], struct.pack("<q", 12345)))
    t.append(("mask", "U8", [3], bytes([1, 0, 1])))
    t.append(("empty", "F32", [0, 4], b""))
    t.append(("name \"q\" \u00e9", "F32", [1], struct.pack("<f", value(8, 0))))
    t.append(("adam.exp_avg", "F64", [2], struct.pack("<2d", 0.1, -2.5)))
    return t


def write(out):
    tensors = make_set()
    layout = sorted(tensors, key=lambda t: (-BITS[t[1]], t[0].encode()))
    offsets, pos = {}, 0
    for name, _, _, data in layout:
        offsets[name] = (pos, pos + len(data))
        pos += len(data)
    header = {"__metadata__": dict(sorted(META.items()))}
    for name, dtype, shape, _ in sorted(tensors, key=lambda t: t[0].encode()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": list(offsets[name])}
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in layout))


def parse(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    assert n % 8 == 0, "header not padded to 8"
    raw = blob[8:8 + n]
    header = json.loads(raw.decode())
    meta = header.pop("__metadata__", {})
    names = list(header.keys())
    assert names == sorted(names, key=lambda s: s.encode()), "tensor names not sorted"
    return meta, header, blob[8 + n:]


def check(path):
    meta, header, data = parse(path)
    assert meta == META, meta
    want = {t[0]: t for t in make_set()}
    assert set(header) == set(want), sorted(header)
    spans = sorted(tuple(h["data_offsets"]) for h in header.values())
    pos = 0
    for b, e in spans:
        assert b == pos, "gap or overlap at %d" % b
        pos = e
    assert pos == len(data), "data section not covered"
    for name, (_, dtype, shape, raw) in want.items():
        h = header[name]
        assert h["dtype"] == dtype and h["shape"] == shape, name
        b, e = h["data_offsets"]
        assert data[b:e] == raw, "values of %s differ" % name
        if BITS[dtype] >= 8:
            assert b % (BITS[dtype] // 8) == 0, "%s misaligned" % name
    print("st_ref check: ok")


def check_torch(path):
    try:
        import torch
    except ImportError:
        print("st_ref torch: torch is not installed")
        sys.exit(77)
    meta, header, data = parse(path)
    buf = bytearray(data)
    dt = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    for k, name in ((0, "model.embed_tokens.weight"), (1, "lm_head.weight"), (2, "b.bias")):
        h = header[name]
        b, e = h["data_offsets"]
        got = torch.frombuffer(buf, dtype=dt[h["dtype"]], count=(e - b) * 8 // BITS[h["dtype"]],
                               offset=b).reshape(h["shape"])
        n = got.numel()
        ref = torch.tensor([value(k, i) for i in range(n)], dtype=torch.float32).to(dt[h["dtype"]])
        assert torch.equal(got.reshape(-1), ref), name
    print("st_ref torch: ok")


if __name__ == "__main__":
    cmd, path = sys.argv[1], sys.argv[2]
    {"write": write, "check": check, "torch": check_torch}[cmd](path)
