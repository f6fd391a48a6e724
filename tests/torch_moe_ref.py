#!/usr/bin/python3
"""Independent PyTorch (float64) implementation of the Qwen2-MoE decoder for test_moe_model_torch.

Usage: torch_moe_ref.py MODEL.safetensors CONFIG.json TOKENS.npy TARGETS.npy OUT_DIR

Reads a safetensors checkpoint and its Qwen2MoeForCausalLM config.json (torch_ref_common.py),
computes the forward pass, the mean cross-entropy, the MoE objective and the gradient of CE + objective, and writes into OUT_DIR: logits.npy, loss.txt,
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
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref_common import (Attention, head_and_loss, load_inputs, rms_norm, swiglu_mlp,  # noqa: E402
                              write_number, write_outputs)


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
    cfg, W, tokens, targets, out_dir = load_inputs()
    assert cfg["model_type"] == "qwen2_moe" and cfg["norm_topk_prob"] is True and cfg["mlp_only_layers"] == []
    C, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
    B, T = tokens.shape
    attention = Attention(cfg, T, bias=True)
    h = W["model.embed_tokens.weight"][tokens]
    objective = torch.zeros((), dtype=torch.float64)
    gaps = []
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = h + attention(rms_norm(h, W[p + "input_layernorm.weight"], eps), W, p)
        n2 = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        if cfg["num_experts"] > 0 and (l + 1) % cfg["decoder_sparse_step"] == 0:
            y, obj = moe_block(n2.reshape(B * T, C), W, p, cfg, gaps)
            h = h + y.view(B, T, C)
            objective = objective + obj
        else:
            h = h + swiglu_mlp(n2, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"],
                               W[p + "mlp.down_proj.weight"])
    logits, loss = head_and_loss(h, W, cfg, targets)
    (loss + objective).backward()
    write_outputs(out_dir, logits, loss, W)
    write_number(f"{out_dir}/objective.txt", objective.item())
    write_number(f"{out_dir}/min_gap.txt", min(gaps) if gaps else 1.0)


if __name__ == "__main__":
    main()
