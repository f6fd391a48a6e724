#!/usr/bin/python3
"""Independent PyTorch (float64) implementation of the Llama decoder for test_model_torch.

Usage: torch_llama_ref.py MODEL.safetensors CONFIG.json TOKENS.npy TARGETS.npy OUT_DIR

Reads a safetensors checkpoint, the config.json beside it, and tokens/targets from .npy files;
writes logits, loss and the gradient of every parameter as float32 .npy files into OUT_DIR
(torch_ref_common.py). Written from the Hugging Face LlamaForCausalLM semantics: RMSNorm
(normalize then scale), rotate-half RoPE, repeat_kv for grouped-query attention, causal softmax
attention with scale 1/sqrt(head_dim) and no q/k/v biases, SiLU-gated MLP, mean cross-entropy.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ref_common import Attention, head_and_loss, load_inputs, rms_norm, swiglu_mlp, write_outputs  # noqa: E402


def main():
    cfg, W, tokens, targets, out_dir = load_inputs()
    eps = cfg["rms_norm_eps"]
    attention = Attention(cfg, tokens.shape[1], bias=False)
    h = W["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = h + attention(rms_norm(h, W[p + "input_layernorm.weight"], eps), W, p)
        n2 = rms_norm(h, W[p + "post_attention_layernorm.weight"], eps)
        h = h + swiglu_mlp(n2, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"], W[p + "mlp.down_proj.weight"])
    logits, loss = head_and_loss(h, W, cfg, targets)
    loss.backward()
    write_outputs(out_dir, logits, loss, W)


if __name__ == "__main__":
    main()
