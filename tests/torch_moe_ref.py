#!/usr/bin/python3
"""Independent PyTorch (float64) implementation of the Qwen2-MoE decoder for test_moe_model_torch.

Usage: torch_moe_ref.py MODEL.safetensors CONFIG.json TOKENS.npy TARGETS.npy OUT_DIR

Reads a safetensors checkpoint (parsed here with struct + json, following the public format) and
its Qwen2MoeForCausalLM config.json, computes the forward pass, the mean cross-entropy, the MoE
objective and the gradient of CE + objective, and writes into OUT_DIR: logits.npy, loss.txt,
objective.txt (sum over MoE layers of router_aux_loss_coef * aux + ufp4_moe_z_loss_coef * z),
min_gap.txt (the smallest float64 gap, over MoE layers and tokens, between the last routed and the
first unrouted probability: routing in float32 can only differ from this one when it is tiny) and
grad.NAME.npy for every tensor of the file.

Written from the published semantics, not from ufp4's code:
- Qwen2 attention: q/k/v projections WITH biases (read from the file), rotate-half RoPE,
  repeat_kv, causal softmax attention scaled by 1/sqrt(head_dim), o_proj without bias.
- Layer l is sparse when num_experts > 0 and (l + 1) % decoder_sparse_step == 0 (mlp_only_layers
  is empty); dense layers use a SiLU-gated MLP of intermediate_size.
- Sparse block (Qwen2MoeSparseMoeBlock): router logits = x Wr^T, p = softmax, top-k with the
  selected probabilities renormalized (norm_topk_prob true), each expert a SiLU-gated MLP of
  moe_intermediate_size, plus sigmoid(x w_sg^T) * shared_expert(x) (a zero-width shared expert
  contributes exactly 0).
- Capacity (ufp4's extension "ufp4_moe_capacity_factor", 0 = dropless): cap = ceil(cf * k * N / E)
  per expert; assignments admitted in token order, slot order within a token; the rest dropped
  (their gate is not renormalized away).
- Aux loss per layer (Switch Transformer): f_e = assignments to e before capacity / N,
  P_e = mean_t p_te, aux = E * sum_e f_e P_e (f carries no gradient); z-loss (ST-MoE):
  mean_t logsumexp(z_t)^2.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16}


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
        arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.tensor(arr.astype(np.float64), requires_grad=True)
    return out


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def swiglu_mlp(x, wg, wu, wd):
    return (torch.nn.functional.silu(x @ wg.T) * (x @ wu.T)) @ wd.T


def moe_block(x, W, p, cfg, gaps):
    """x [N, C]; returns (out [N, C], objective term)."""
    N = x.shape[0]
    E, k = cfg["num_experts"], cfg["num_experts_per_tok"]
    logits = x @ W[p + "mlp.gate.weight"].T
    probs = torch.softmax(logits, dim=-1)
    top_p, top_e = torch.topk(probs, k, dim=-1)  # descending
    sorted_p = torch.sort(probs.detach(), dim=-1, descending=True).values
    if E > k:
        gaps.append(float((sorted_p[:, k - 1] - sorted_p[:, k]).min()))
    gates = top_p / top_p.sum(-1, keepdim=True)
    cf = cfg.get("ufp4_moe_capacity_factor", 0.0)
    cap = math.ceil(cf * k * N / E) if cf > 0 else None
    used = [0] * E
    out = torch.zeros_like(x)
    shared = W[p + "mlp.shared_expert_gate.weight"]
    out = out + torch.sigmoid(x @ shared.T) * swiglu_mlp(
        x, W[p + "mlp.shared_expert.gate_proj.weight"], W[p + "mlp.shared_expert.up_proj.weight"],
        W[p + "mlp.shared_expert.down_proj.weight"])
    rows = []
    for t in range(N):
        terms = []
        for j in range(k):
            e = int(top_e[t, j])
            if cap is not None and used[e] >= cap:
                continue
            used[e] += 1
            q = f"{p}mlp.experts.{e}."
            y = swiglu_mlp(x[t:t + 1], W[q + "gate_proj.weight"], W[q + "up_proj.weight"], W[q + "down_proj.weight"])
            terms.append(gates[t, j] * y[0])
        rows.append(sum(terms) if terms else torch.zeros_like(x[t]))
    out = out + torch.stack(rows)
    counts = torch.zeros(E, dtype=torch.float64)
    for e in top_e.reshape(-1).tolist():
        counts[e] += 1
    aux = E * torch.sum((counts / N) * probs.mean(0))
    z = torch.logsumexp(logits, dim=-1).pow(2).mean()
    obj = cfg["router_aux_loss_coef"] * aux + cfg.get("ufp4_moe_z_loss_coef", 0.0) * z
    return out, obj


def main():
    ckpt, config_path, tokens_path, targets_path, out_dir = sys.argv[1:6]
    cfg = json.load(open(config_path))
    assert cfg["model_type"] == "qwen2_moe" and cfg["norm_topk_prob"] is True and cfg["mlp_only_layers"] == []
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
    objective = torch.zeros((), dtype=torch.float64)
    gaps = []
    for l in range(L):
        p = f"model.layers.{l}."
        n1 = rms_norm(h, W[p + "input_layernorm.weight"], eps)
        q = (n1 @ W[p + "self_attn.q_proj.weight"].T + W[p + "self_attn.q_proj.bias"]).view(B, T, H, D).transpose(1, 2)
        k = (n1 @ W[p + "self_attn.k_proj.weight"].T + W[p + "self_attn.k_proj.bias"]).view(B, T, KVH, D).transpose(1, 2)
        v = (n1 @ W[p + "self_attn.v_proj.weight"].T + W[p + "self_attn.v_proj.bias"]).view(B, T, KVH, D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        s = q @ k.transpose(-1, -2) / np.sqrt(D) + mask
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, H * D)
        h = h + a @ W[p + "self_attn.o_proj.weight"].T
        n2 = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        if cfg["num_experts"] > 0 and (l + 1) % cfg["decoder_sparse_step"] == 0:
            y, obj = moe_block(n2.reshape(B * T, C), W, p, cfg, gaps)
            h = h + y.view(B, T, C)
            objective = objective + obj
        else:
            h = h + swiglu_mlp(n2, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                               W[p + "mlp.down_proj.weight"])
    hn = rms_norm(h, W["model.norm.weight"], eps)
    head = W["lm_head.weight"] if "lm_head.weight" in W else W["model.embed_tokens.weight"]
    logits = hn @ head.T
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1), ignore_index=-1)
    (loss + objective).backward()
    np.save(f"{out_dir}/logits.npy", logits.detach().numpy().reshape(B * T, -1).astype(np.float32))
    with open(f"{out_dir}/loss.txt", "w") as f:
        f.write(repr(loss.item()))
    with open(f"{out_dir}/objective.txt", "w") as f:
        f.write(repr(objective.item()))
    with open(f"{out_dir}/min_gap.txt", "w") as f:
        f.write(repr(min(gaps) if gaps else 1.0))
    for name, t in W.items():
        g = t.grad if t.grad is not None else torch.zeros_like(t)
        np.save(f"{out_dir}/grad.{name}.npy", g.numpy().astype(np.float32))


if __name__ == "__main__":
    main()
