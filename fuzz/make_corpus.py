#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/seed-* : a few small valid inputs per parser and
near-valid variants (one field wrong) so the fuzzer starts next to the interesting branches.
Standard library only; the output is deterministic. Regression inputs (crash-*) found by the
fuzzers live beside the seeds and are not touched."""
import json, os, struct, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ------------------------------------------------------------------ .npy
def npy(shape, n_values=None, descr="<f4", fortran=False, major=1, shape_text=None):
    st = shape_text if shape_text is not None else (
        "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")")
    h = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, st)
    pre = 10 if major == 1 else 12
    h += " " * ((64 - (pre + len(h) + 1) % 64) % 64) + "\n"
    n = 1
    for s in shape:
        n *= s
    if n_values is None:
        n_values = n
    lenf = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + lenf + h.encode() + struct.pack("<%df" % n_values, *[i * 0.5 for i in range(n_values)])


put("npy", "vec3", npy([3]))
put("npy", "mat2x3", npy([2, 3]))
put("npy", "scalar", npy([]))
put("npy", "empty", npy([0, 4]))
put("npy", "v2", npy([2, 2], major=2))
put("npy", "fortran1d", npy([2], fortran=True))
put("npy", "bad-dtype", npy([2], descr="<f8"))
put("npy", "truncated", npy([4], n_values=3))
put("npy", "not-tuple", npy([3], shape_text="(3)"))
put("npy", "huge-dim", npy([3], n_values=0, shape_text="(18446744073709551615, 2)"))


# ------------------------------------------------------------------ safetensors
def st(tensors, meta=None, header=None, tail=b""):
    """tensors: list of (name, dtype, shape, raw bytes); laid out in order."""
    h, data = {}, b""
    if meta is not None:
        h["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = header if header is not None else json.dumps(h, separators=(",", ":"))
    text = text.encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data + tail


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
put("safetensors", "one-f32", st([("w", "F32", [2, 2], f32(1, 2, 3, 4))], {"format": "pt"}))
put("safetensors", "mixed", st([("a", "F32", [2], f32(1, -2)), ("b", "BF16", [2], b"\x80\x3f\x00\xc0"),
                                ("c", "F16", [1], b"\x00\x3c"), ("d", "U8", [3], b"abc")]))
put("safetensors", "scalar-empty", st([("s", "F64", [], struct.pack("<d", 2.5)), ("z", "F32", [0], b"")]))
put("safetensors", "f4", st([("q", "F4", [4], b"\x12\x34")]))
put("safetensors", "overlap", st([], header='{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                                 '"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}', tail=b"\0" * 8))
put("safetensors", "gap", st([], header='{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', tail=b"\0" * 8))
put("safetensors", "dup", st([], header='{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                             '"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', tail=b"\0" * 4))
put("safetensors", "bad-meta", st([("w", "F32", [1], f32(1))], {"format": 3}))
put("safetensors", "big-shape", st([], header='{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}',
                                  tail=b"\0" * 8))
put("safetensors", "short", b"\x10\0\0\0\0\0\0\0{}")


# ------------------------------------------------------------------ token shards
def fnv1a64(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard(tokens, vocab=256, tid=0, width=None, count=None, thash=0, docs=1, reserved=0, corrupt=False):
    width = width or (2 if vocab <= 65536 else 4)
    count = len(tokens) if count is None else count
    h = b"UFP4TOK\0" + struct.pack("<IIII", 1, tid, vocab, width) + struct.pack("<QQQQ", count, thash, docs, reserved)
    h += struct.pack("<Q", fnv1a64(h) ^ (1 if corrupt else 0))
    return h + b"".join(t.to_bytes(width, "little") for t in tokens)


put("shard", "bytes", shard([72, 105, 33, 10]))
put("shard", "bpe32", shard([0, 70000, 99999], vocab=100000, tid=2, thash=0x1234))
put("shard", "empty", shard([]))
put("shard", "oov", shard([1, 300]))
put("shard", "bad-checksum", shard([1, 2], corrupt=True))
put("shard", "count-overflow", shard([1], count=1 << 63))
put("shard", "bad-width", shard([1, 2], width=4))


# ------------------------------------------------------------------ BPE tokenizer files
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U = lambda s: "".join(B2U[b] for b in s.encode())


def tokenizer(merges, text, extra_vocab=(), drop=None):
    vocab = [B2U[b] for b in range(256)]
    for a, b in merges:
        vocab.append(U(a) + U(b))
    vocab += [U(t) for t in extra_vocab]
    vocab.append("<|endoftext|>")
    vocab = [t for i, t in enumerate(vocab) if t not in vocab[:i] and t != drop]
    enc = {t: i for i, t in enumerate(vocab)}
    bpe = "#version: 0.2\n" + "".join("%s %s\n" % (U(a), U(b)) for a, b in merges)
    return json.dumps(enc, ensure_ascii=False).encode() + b"\0" + bpe.encode() + b"\0" + text.encode()


merges = [(" ", "t"), ("h", "e"), (" t", "he"), ("i", "n")]
put("tokenizer", "small", tokenizer(merges, "the thin cat, then the end.\n"))
put("tokenizer", "unicode", tokenizer(merges, "Größe ünd 東京 123's ok"))
put("tokenizer", "alias", tokenizer([(",", '"'), ('"', ","), ('"', ',"'), ('",', '"')], 'a","b",",c'))
put("tokenizer", "missing-byte", tokenizer(merges, "x", drop=B2U[0x41]))
enc, bpe, _ = tokenizer(merges, "").split(b"\0")
put("tokenizer", "merge-unknown", enc + b"\0" + bpe + (U("q") + " " + U("z")).encode() + b"\n\0x")


# ------------------------------------------------------------------ JSON configs
train = {
    "model": {"n_layers": 2, "d_model": 64, "n_heads": 4, "n_kv_heads": 4, "ffn_dim": 128, "seq_len": 32,
              "vocab": 256, "rms_eps": 1e-5, "rope_theta": 10000, "init_std": 0.02, "tie_embeddings": 1},
    "recipe": "ufp4", "optim": {"lr": 0.001, "min_lr": 0.0001, "warmup_steps": 10, "total_steps": 100,
                                "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 1},
    "batch": 4, "grad_accum": 1, "steps": 100, "seed": 1, "log_every": 1, "eval_every": 50, "eval_batches": 4,
    "ckpt_every": 0, "diag_every": 0, "keep_ckpts": 2, "nan_policy": "skip", "threads": 0, "data": "synthetic"}
put("train_config", "full", json.dumps(train, indent=1))
put("train_config", "partial", '{"steps": 10, "recipe": "e2m1"}')
put("train_config", "bad-type", '{"model": [1, 2], "steps": "ten"}')
put("train_config", "bad-nan", '{"nan_policy": "explode", "seed": 1e300}')
put("train_config", "not-object", "[1, 2, 3]")

hf = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
      "head_dim": 16, "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
      "rope_scaling": None, "initializer_range": 0.02, "tie_word_embeddings": True, "hidden_act": "silu",
      "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32"}
put("hf_config", "llama", json.dumps(hf, indent=2))
put("hf_config", "minimal", json.dumps({k: hf[k] for k in ("model_type", "vocab_size", "hidden_size", "intermediate_size",
                                                          "num_hidden_layers", "num_attention_heads",
                                                          "max_position_embeddings")}))
put("hf_config", "bad-headdim", json.dumps(dict(hf, head_dim=15)))
put("hf_config", "bias", json.dumps(dict(hf, attention_bias=True)))
put("hf_config", "gqa-bad", json.dumps(dict(hf, num_key_value_heads=3, rms_norm_eps="x")))
# The Qwen2-MoE form that MoE checkpoints write (docs/MOE.md), and variants the reader must refuse.
moe = dict(hf, architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", moe_intermediate_size=32,
           shared_expert_intermediate_size=16, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True,
           decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=0.01, output_router_logits=False,
           use_sliding_window=False, sliding_window=32, max_window_layers=2, ufp4_moe_capacity_factor=1.25,
           ufp4_moe_z_loss_coef=0.001)
put("hf_config", "qwen2-moe", json.dumps(moe, indent=2))
put("hf_config", "qwen2-moe-bad", json.dumps(dict(moe, num_experts_per_tok=3, mlp_only_layers=[0], norm_topk_prob=False)))
train_moe = json.loads(json.dumps(train))
train_moe["model"].update(moe_experts=4, moe_top_k=2, moe_ffn=32, moe_shared_ffn=16, moe_every=1, moe_capacity=1.25,
                          moe_aux_coef=0.01, moe_z_coef=0.001)
put("train_config", "moe", json.dumps(train_moe, indent=1))
print("seed corpora written under", ROOT, file=sys.stderr)
