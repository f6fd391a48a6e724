"""Shared by the independent PyTorch (float64) decoders torch_llama_ref.py and torch_moe_ref.py:
reading the checkpoint and inputs, the Llama/Qwen2 building blocks they have in common, the head
with its loss, and the outputs the C tests compare against.

Usage of a script built on it: SCRIPT MODEL.safetensors CONFIG.json TOKENS.npy TARGETS.npy OUT_DIR
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path):
    """Every tensor of the file as a float64 leaf that requires grad (parsed with struct + json,
    following the public format; BF16 widened by a 16-bit shift)."""
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
            arr = (np.frombuffer(data[b:e], dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]])
        out[name] = torch.tensor(arr.reshape(info["shape"]).astype(np.float64), requires_grad=True)
    return out


def load_inputs(argv=None):
    """(cfg, W, tokens [B, T], targets [B, T], out_dir) from the command line."""
    ckpt, config_path, tokens_path, targets_path, out_dir = (argv or sys.argv)[1:6]
    with open(config_path) as f:
        cfg = json.load(f)
    W = read_safetensors(ckpt)
    tokens = torch.tensor(np.load(tokens_path).astype(np.int64))
    targets = torch.tensor(np.load(targets_path).astype(np.int64))
    return cfg, W, tokens, targets, out_dir


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def swiglu_mlp(x, wg, wu, wd):
    return (torch.nn.functional.silu(x @ wg.T) * (x @ wu.T)) @ wd.T


class Attention:
    """Causal grouped-query attention with rotate-half RoPE for sequences of T positions; q/k/v
    biases (Qwen2) are read from the file when `bias`, none otherwise (Llama)."""

    def __init__(self, cfg, T, bias):
        self.H, self.KVH = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.D = cfg["hidden_size"] // self.H
        self.bias = bias
        theta, D = cfg["rope_theta"], self.D
        inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        self.cos, self.sin = emb.cos(), emb.sin()
        self.mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)

    def proj(self, x, W, name, heads):
        B, T = x.shape[:2]
        y = x @ W[name + ".weight"].T
        if self.bias:
            y = y + W[name + ".bias"]
        return y.view(B, T, heads, self.D).transpose(1, 2)

    def __call__(self, x, W, p):
        """x [B, T, C] (already normalized); returns the o_proj output [B, T, C]."""
        B, T = x.shape[:2]
        H, KVH, D = self.H, self.KVH, self.D
        q = self.proj(x, W, p + "self_attn.q_proj", H)
        k = self.proj(x, W, p + "self_attn.k_proj", KVH)
        v = self.proj(x, W, p + "self_attn.v_proj", KVH)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        k = k.repeat_interleave(H // KVH, dim=1)
        v = v.repeat_interleave(H // KVH, dim=1)
        s = q @ k.transpose(-1, -2) / np.sqrt(D) + self.mask
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * D)
        return a @ W[p + "self_attn.o_proj.weight"].T


def head_and_loss(h, W, cfg, targets):
    """Final RMSNorm, the LM head (tied to the embedding when the file has no lm_head.weight) and
    mean cross-entropy ignoring targets of -1; returns (logits [B*T, V], loss)."""
    hn = rms_norm(h, W["model.norm.weight"], cfg["rms_norm_eps"])
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    logits = (hn @ head.T).reshape(-1, head.shape[0])
    loss = torch.nn.functional.cross_entropy(logits, targets.reshape(-1), ignore_index=-1)
    return logits, loss


def write_number(path, v):
    with open(path, "w") as f:
        f.write(repr(v))


def write_outputs(out_dir, logits, loss, W):
    """logits.npy, loss.txt and grad.NAME.npy for every tensor of the file, in float32; a tensor the
    objective does not reach (a zero-width shared expert) gets a zero gradient."""
    np.save(f"{out_dir}/logits.npy", logits.detach().numpy().astype(np.float32))
    write_number(f"{out_dir}/loss.txt", loss.item())
    for name, t in W.items():
        g = t.grad if t.grad is not None else torch.zeros_like(t)
        np.save(f"{out_dir}/grad.{name}.npy", g.numpy().astype(np.float32))
