"""Independent reference for tests/test_gguf_llama.mjs: the mean next-token cross-entropy of a
ufp4 checkpoint folder (config.json + model.safetensors, read here from the safetensors layout
alone) on the first N windows of a token shard, with a Llama forward written in numpy float64.

With --q8 GLOB..., the input of every block projection whose HF name matches a glob is first
rounded as llama.cpp's CPU backend rounds the activations it multiplies with MXFP4 / NVFP4 weights
(ggml-cpu: vec_dot_type Q8_0 for both types): blocks of 32 consecutive values, d = amax / 127 kept
as float16, codes round-to-nearest-even(x * (127 / amax)) in float32 (x86 quantize_row_q8_0), value
code * float16(d). Weight products are then exact (integer sums times the two scales), so this is
the arithmetic llama.cpp does up to float32 summation.

With --bf16, the model of a gguf-bf16 file as llama.cpp's CPU backend runs it: every matrix rounded
to bfloat16 (round to nearest even) and the input of every matrix product with one (projections and
lm_head; vec_dot_type BF16) rounded too, with the products summed in float.

usage: gguf_llama_ref.py CKPT SHARD N_WINDOWS [--q8 GLOB ... | --bf16]   prints the loss, 9 digits."""
import fnmatch
import json
import struct
import sys

import numpy as np


def load(ckpt):
    cfg = json.load(open(ckpt + "/config.json"))
    raw = open(ckpt + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    base = 8 + n
    w = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        b, e = v["data_offsets"]
        w[k] = np.frombuffer(raw[base + b:base + e], dtype="<f4").reshape(v["shape"]).astype(np.float64)
    return cfg, w


def shard_tokens(path):
    b = open(path, "rb").read()
    assert b[:8] == b"UFP4TOK\0", path
    width = struct.unpack("<I", b[20:24])[0]
    count = struct.unpack("<Q", b[24:32])[0]
    return np.frombuffer(b[64:64 + width * count], dtype="<u2" if width == 2 else "<u4").astype(np.int64)


def q8_0(x):
    """llama.cpp's Q8_0 round trip of the rows of x (length a multiple of 32)."""
    shape = x.shape
    b = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1, keepdims=True)
    d16 = (amax / np.float32(127)).astype(np.float16).astype(np.float64)
    with np.errstate(divide="ignore"):
        inv = np.where(amax > 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
    q = np.rint(b * inv)
    return (q * d16).reshape(shape)


def bf16(x):
    """float32 -> bfloat16 (round to nearest even; no NaN here) -> float64."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def main():
    ckpt, shard, nwin = sys.argv[1], sys.argv[2], int(sys.argv[3])
    globs = sys.argv[5:] if len(sys.argv) > 4 and sys.argv[4] == "--q8" else []
    use_bf16 = sys.argv[4:] == ["--bf16"]
    cfg, W = load(ckpt)
    if use_bf16:
        W = {k: bf16(v) if v.ndim == 2 else v for k, v in W.items()}
    toks = shard_tokens(shard)
    d, H, KV, L = (cfg[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers"))
    T, D, eps = cfg["max_position_embeddings"], d // H, cfg["rms_norm_eps"]
    inv_freq = cfg["rope_theta"] ** (-np.arange(0, D, 2) / D)
    ang = np.arange(T)[:, None] * inv_freq[None]
    cos, sin = np.cos(ang), np.sin(ang)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x):  # rotate-half, as HF and ufp4
        x1, x2 = x[..., :D // 2], x[..., D // 2:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def proj(x, name):
        if any(fnmatch.fnmatchcase(name, g) for g in globs):
            x = q8_0(x)
        if use_bf16:
            x = bf16(x)
        return x @ W[name].T

    total = 0.0
    for w in range(nwin):
        ids = toks[w * T:w * T + T + 1]
        x = W["model.embed_tokens.weight"][ids[:-1]]
        for layer in range(L):
            p = "model.layers.%d." % layer
            h = rms(x, W[p + "input_layernorm.weight"])
            q = proj(h, p + "self_attn.q_proj.weight").reshape(T, H, D).transpose(1, 0, 2)
            k = proj(h, p + "self_attn.k_proj.weight").reshape(T, KV, D).transpose(1, 0, 2)
            v = proj(h, p + "self_attn.v_proj.weight").reshape(T, KV, D).transpose(1, 0, 2)
            q, k = rope(q), rope(k)
            k, v = np.repeat(k, H // KV, 0), np.repeat(v, H // KV, 0)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(D) + np.triu(np.full((T, T), -np.inf), 1)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            x = x + proj((s @ v).transpose(1, 0, 2).reshape(T, d), p + "self_attn.o_proj.weight")
            h = rms(x, W[p + "post_attention_layernorm.weight"])
            g, u = proj(h, p + "mlp.gate_proj.weight"), proj(h, p + "mlp.up_proj.weight")
            x = x + proj(g / (1 + np.exp(-g)) * u, p + "mlp.down_proj.weight")
        x = rms(x, W["model.norm.weight"])
        logits = (bf16(x) if use_bf16 else x) @ W.get("lm_head.weight", W["model.embed_tokens.weight"]).T
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        total -= logp[np.arange(T), ids[1:]].sum()
    print("%.9f" % (total / (nwin * T)))


if __name__ == "__main__":
    main()
