#!/usr/bin/python3
"""Independent PyTorch (float64) implementation of the Llama decoder for test_model_torch.

Reads a safetensors checkpoint (parsed here with struct + json, following the public format), the
config.json beside it, and tokens/targets from .npy files; writes logits, loss and the gradient of
every parameter as float32 .npy files into OUT_DIR. Written from the Hugging Face LlamaForCausalLM
semantics: RMSNorm (normalize then scale), rotate-half RoPE, repeat_kv for grouped-query attention,
causal softmax attention with scale 1/sqrt(head_dim), SiLU-gated MLP, mean cross-entropy.
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "BF16": None, "F16": np.float16}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[b:e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]])
        out[name] = torch.tensor(arr.reshape(info["shape"]).astype(np.float64), requires_grad=True)
    return out


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def main():
    ckpt, config_path, tokens_path, targets_path, out_dir = sys.argv[1:6]
    cfg = json.load(open(config_path))
    W = read_safetensors(ckpt)
    L, C = cfg["num_hidden_layers"], cfg["hidden_size"]
    H, KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = C // H
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    tokens = torch.tensor(np.load(tokens_path).astype(np.int64))
    targets = torch.tensor(np.load(targets_path).astype(np.int64))
    B, T = tokens.shape

    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    h = W["model.embed_tokens.weight"][tokens]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        p = f"model.layers.{l}."
        n1 = rms_norm(h, W[p + "input_layernorm.weight"], eps)
        q = (n1 @ W[p + "self_attn.q_proj.weight"].T).view(B, T, H, D).transpose(1, 2)
        k = (n1 @ W[p + "self_attn.k_proj.weight"].T).view(B, T, KVH, D).transpose(1, 2)
        v = (n1 @ W[p + "self_attn.v_proj.weight"].T).view(B, T, KVH, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-1, -2) / np.sqrt(D) + mask
        a = torch.softmax(s, dim=-1) @ v
        a = a.transpose(1, 2).reshape(B, T, H * D)
        h = h + a @ W[p + "self_attn.o_proj.weight"].T
        n2 = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        g = n2 @ W[p + "mlp.gate_proj.weight"].T
        u = n2 @ W[p + "mlp.up_proj.weight"].T
        h = h + (torch.nn.functional.silu(g) * u) @ W[p + "mlp.down_proj.weight"].T
    hn = rms_norm(h, W["model.norm.weight"], eps)
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    logits = hn @ head.T
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
    loss.backward()
    np.save(f"{out_dir}/logits.npy", logits.detach().numpy().reshape(B * T, -1).astype(np.float32))
    np.save(f"{out_dir}/loss.npy", np.array([loss.item()], dtype=np.float32))
    with open(f"{out_dir}/loss.txt", "w") as f:
        f.write(repr(loss.item()))
    for name, t in W.items():
        np.save(f"{out_dir}/grad.{name}.npy", t.grad.numpy().astype(np.float32))


if __name__ == "__main__":
    main()
