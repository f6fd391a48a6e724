#!/usr/bin/python3
"""The PyTorch peer of `ufp4 bench train`: the same model and optimizer step in PyTorch on the CPU,
under fp32, bf16 and a straightforward fake-quant of the e2m1 and ufp4 recipes, timed in the same
run as `ufp4 bench train --config small-deep` and printed side by side.

Usage:
  bench/torch_peer.py [--ufp4 build/ufp4] [--configs make-run,4x128,16x64] [--steps 5]
                      [--warmup 1] [--torch-threads 1,2] [--json peer.json]
  bench/torch_peer.py --check-only [--ufp4 build/ufp4]

What it does, in order:
 1. Checks this script's quantizer against the C one (`ufp4 quantize` on .npy tensors) and stops
    with a message naming the failing case if they disagree, so that the timed PyTorch steps do the
    work ufp4 does, not a cheaper approximation of it:
      - round-to-nearest-even operands (E2M1 with the fp32 scale amax/6, the E1M2 grid), without
        and with the 16-point RHT (NVIDIA's fixed signs and the random signs ufp4 draws from a
        seed): dequantized values bit for bit (NaN where the C gives NaN), on a tensor with ties,
        zero, -0, denormal, NaN and Inf blocks and a wide range of magnitudes;
      - stochastic rounding (the dY operands): bit for bit when fed the C's own Philox bits, and,
        with the torch.rand draws used in training, every draw on one of the two neighbouring grid
        points (from an explicit level table) and the mean of many draws within 6 sigma of the
        input;
      - the RHT is orthogonal (H' H'^T = I), and bf16 rounding is round-to-nearest-even.
 2. Runs `ufp4 bench train --config small-deep --recipes fp32,bf16,e2m1,ufp4 --json` (the ufp4
    binary's own thread count: OMP_NUM_THREADS or all cores).
 3. Times the same step in PyTorch: zero grads, forward, backward, global grad-norm clip at 1,
    AdamW (betas 0.9/0.95, eps 1e-8, decay 0.1 on 2-D weights only, ufp4's warmup-cosine learning
    rate), on uniform random tokens; median ms per step over --steps after --warmup, once per
    thread count of --torch-threads (torch.set_num_threads), keeping the best.
 4. Prints config, recipe, ufp4 ms, PyTorch ms, PyTorch/ufp4 (and each side's step relative to its
    own fp32), and writes it all with the raw ufp4 JSON to --json.

The model (src/model/llama.c): tied token embedding, per block RMSNorm -> q, k, v projections ->
rotate-half RoPE -> causal softmax attention -> o projection -> residual, RMSNorm -> SwiGLU MLP
(gate, up, down) -> residual; final RMSNorm, head = embedding^T, mean cross-entropy. No biases. The
seven projections of every block run under the recipe; attention and the head stay fp32, as in ufp4.

The recipes (include/ufp4/recipe.h, docs/NUMERICS.md). A linear layer X [N, in], W [out, in] runs
Fprop Y = X W^T, Dgrad dX = dY W, Wgrad dW = dY^T X, and every operand is quantized along its GEMM's
reduction dimension, in 1x16 blocks with the fp32 scale s = amax/g_max, t = x/s, value = level(t)*s:
  bf16  every operand of the three GEMMs rounded to bfloat16 (RNE), fp32 products
  e2m1  E2M1 grid; the 16-point RHT (random signs) on both Wgrad operands; SR on both dY operands
  ufp4  E1M2 grid; the RHT on all three GEMMs; SR on both dY operands
Each GEMM prepares its own operands (W twice, dY twice), as ufp4 does. The random RHT signs are the
ones ufp4 draws from the bench's seed; SR in training draws torch.rand, not ufp4's Philox bits (the
check shows the rule is the same given the same bits)."""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import torch
except ImportError:
    sys.exit("torch_peer: this python cannot import torch (Debian python3-torch, scripts/setup.sh --test)")

BLOCK = 16  # the papers' 1x16 blocks and 16-point RHT
RHT_N = 16
BENCH_SEED = 1234  # ufp4 bench train's recipe seed (bench/bench_train.c): the RHT signs come from it
RHT_SIGN_STREAM = 0x5248545349474E53  # "RHTSIGNS", src/transforms/rht.c
NVIDIA_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)

# name, layers, d_model, heads, ffn, vocab, batch, seq_len: the small-deep rows of bench/bench_train.c
# (all tie the embeddings; the key is the first word of the name ufp4 prints).
CONFIGS = {
    "make-run": (2, 128, 4, 384, 2048, 8, 128),
    "4x128": (4, 128, 4, 352, 256, 16, 128),
    "16x64": (16, 64, 4, 192, 2048, 8, 128),
}
RECIPES = ("fp32", "bf16", "e2m1", "ufp4")

# Operand slots, in ufp4_operand's order; the GEMM of slot op is op // 2.
FPROP_X, FPROP_W, DGRAD_DY, DGRAD_W, WGRAD_DY, WGRAD_X = range(6)
FPROP, DGRAD, WGRAD = range(3)
SR_DY = (DGRAD_DY, WGRAD_DY)
FP4_RECIPES = {  # grid, GEMMs with the RHT, operands under SR
    "e2m1": ("e2m1", (WGRAD,), SR_DY),
    "ufp4": ("e1m2", (FPROP, DGRAD, WGRAD), SR_DY),
}

# ufp4's AdamW defaults (src/training/adamw.c).
LR, MIN_LR, LR_WARMUP, BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = 1e-3, 1e-4, 20, (0.9, 0.95), 1e-8, 0.1, 1.0
INIT_STD, RMS_EPS, ROPE_THETA = 0.02, 1e-5, 10000.0


# ---------------------------------------------------------------------------------------------
# The fake quantizer used in training.

class Grid:
    """An element grid as levels 0..g_max. Rounding works on |t| / step, where step is the level
    spacing around |t| (E2M1: 0.5 below 2, 1 below 4, 2 above; E1M2: 0.25); rounding half to even
    there gives the even code of an RNE tie on both grids (docs/NUMERICS.md)."""

    def __init__(self, name, g_max, levels):
        self.name, self.g_max, self.levels = name, g_max, levels

    def step(self, a):
        if self.name == "e1m2":
            return 0.25
        return torch.where(a < 2, 0.5, torch.where(a < 4, 1.0, 2.0))


GRIDS = {
    "e2m1": Grid("e2m1", 6.0, (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)),
    "e1m2": Grid("e1m2", 1.75, (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)),
}


def round_nearest(v):
    """Round half to even (torch.round's rule), the RNE of both grids' codes."""
    return torch.round(v)


def fwht16(v):
    """The orthonormal 16-point Walsh-Hadamard transform of the last axis, in ufp4's order (the
    butterflies x[j] = a + b, x[j+h] = a - b for h = 1, 2, 4, 8, then one multiply by 1/4), so
    that it gives ufp4's bits."""
    shape = v.shape
    for h in (1, 2, 4, 8):
        v = v.reshape(*shape[:-1], RHT_N // (2 * h), 2, h)
        a, b = v[..., 0, :], v[..., 1, :]
        v = torch.stack((a + b, a - b), dim=-2)
    return v.reshape(shape) * 0.25


def fake_quant(x, grid, signs=None, sr=False, u=None):
    """x [rows, cols] (cols a multiple of 16) quantized in 1x16 blocks along its rows and
    dequantized: rotated by x S H first when `signs` is given (the result stays rotated, as the GEMM
    consumes it); round to nearest even, or stochastically when `sr`, up with probability
    (|t| - lo)/step from the uniforms `u` (torch.rand when None; float64 for exact draws)."""
    rows, cols = x.shape
    xb = x.reshape(rows, cols // BLOCK, BLOCK)
    if signs is not None:
        xb = fwht16(xb * signs)
    s = xb.abs().amax(-1, keepdim=True) / grid.g_max
    t = xb / s
    a = t.abs()
    step = grid.step(a)
    if sr:
        lo = torch.floor(a / step) * step
        if u is None:
            u = torch.rand(a.shape)
        q = lo + step * (u.reshape(a.shape) < ((a - lo) / step).to(u.dtype))
    else:
        q = round_nearest(a / step) * step
    y = torch.copysign(torch.clamp(q, max=grid.g_max), t) * s  # saturate at g_max
    y = torch.where(s == 0, 0.0, y)  # an all-zero block, or one whose scale underflows: +0
    return y.reshape(rows, cols)


def round_bf16(x):
    return x.to(torch.bfloat16).to(torch.float32)


class Recipe:
    """How the three GEMMs of a projection prepare their operands under one recipe."""

    def __init__(self, name, rht_signs):
        self.name = name
        self.grid = self.rht = None
        self.sr = ()
        if name in FP4_RECIPES:
            grid, self.rht, self.sr = FP4_RECIPES[name]
            self.grid = GRIDS[grid]
        self.signs = rht_signs

    def prep(self, op, x):
        """Operand slot `op`, x [rows, reduction dim]."""
        if self.name == "bf16":
            return round_bf16(x)
        signs = self.signs if op // 2 in self.rht else None
        return fake_quant(x.contiguous(), self.grid, signs, sr=op in self.sr)


class QLinear(torch.autograd.Function):
    """Y = X W^T with each operand of Fprop, Dgrad and Wgrad prepared by the recipe."""

    @staticmethod
    def forward(ctx, x, w, recipe):
        ctx.save_for_backward(x, w)
        ctx.recipe = recipe
        return recipe.prep(FPROP_X, x) @ recipe.prep(FPROP_W, w).t()

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        r = ctx.recipe
        dx = r.prep(DGRAD_DY, dy) @ r.prep(DGRAD_W, w.t()).t()  # reduction over out
        dw = r.prep(WGRAD_DY, dy.t()) @ r.prep(WGRAD_X, x.t()).t()  # reduction over tokens
        return dx, dw, None


# ---------------------------------------------------------------------------------------------
# The model and the step.

def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * w


class Peer(torch.nn.Module):
    def __init__(self, cfg, recipe):
        super().__init__()
        L, C, H, F, V, _, T = cfg
        self.H, self.D, self.recipe = H, C // H, recipe

        def weight(*shape):
            return torch.nn.Parameter(torch.randn(*shape) * INIT_STD)

        def gain():
            return torch.nn.Parameter(torch.ones(C))

        self.embed = weight(V, C)
        self.blocks = torch.nn.ModuleList()
        for _ in range(L):
            b = torch.nn.Module()
            b.ln1, b.wq, b.wk, b.wv, b.wo = gain(), weight(C, C), weight(C, C), weight(C, C), weight(C, C)
            b.ln2, b.wg, b.wu, b.wd = gain(), weight(F, C), weight(F, C), weight(C, F)
            self.blocks.append(b)
        self.norm = gain()
        h = self.D // 2
        inv_freq = ROPE_THETA ** (-2.0 * torch.arange(h, dtype=torch.float64) / self.D)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.cos, self.sin = ang.cos().float()[:, None, :], ang.sin().float()[:, None, :]  # [T, 1, h]
        self.mask = torch.full((T, T), float("-inf")).triu(1)

    def linear(self, x, w):
        if self.recipe.name == "fp32":
            return x @ w.t()
        return QLinear.apply(x, w, self.recipe)

    def rope(self, x):  # x [B, T, heads, D], rotate-half
        h = self.D // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat((x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin), dim=-1)

    def forward(self, tokens, targets):
        B, T = tokens.shape
        H, D = self.H, self.D
        x = torch.nn.functional.embedding(tokens.reshape(-1), self.embed)
        for b in self.blocks:
            h = rms_norm(x, b.ln1)
            q = self.rope(self.linear(h, b.wq).view(B, T, H, D)).transpose(1, 2)
            k = self.rope(self.linear(h, b.wk).view(B, T, H, D)).transpose(1, 2)
            v = self.linear(h, b.wv).view(B, T, H, D).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + self.mask, dim=-1)
            x = x + self.linear((att @ v).transpose(1, 2).reshape(B * T, H * D), b.wo)
            h = rms_norm(x, b.ln2)
            x = x + self.linear(torch.nn.functional.silu(self.linear(h, b.wg)) * self.linear(h, b.wu), b.wd)
        logits = rms_norm(x, self.norm) @ self.embed.t()
        return torch.nn.functional.cross_entropy(logits, targets.reshape(-1))


def lr_at(step, total):
    """ufp4_lr_at: linear warmup, then cosine to MIN_LR at the run's last step."""
    if step < LR_WARMUP:
        return LR * (step + 1) / LR_WARMUP
    if total <= LR_WARMUP:
        return LR
    progress = min(1.0, (step - LR_WARMUP) / (total - LR_WARMUP))
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1 + math.cos(math.pi * progress))


def time_torch(cfg, recipe_name, threads, warmup, steps, signs):
    """(median seconds per step, last loss, parameter count) of `steps` steps after `warmup` on
    `threads` threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(BENCH_SEED)
    model = Peer(cfg, Recipe(recipe_name, signs))
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": WEIGHT_DECAY},
              {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LR, betas=BETAS, eps=EPS)
    _, _, _, _, V, B, T = cfg
    total = warmup + steps
    tokens = torch.randint(V, (total, B, T + 1))
    times, loss = [], float("nan")
    for s in range(total):
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(tokens[s, :, :-1], tokens[s, :, 1:])
        out.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
        for g in opt.param_groups:
            g["lr"] = lr_at(s, total)
        opt.step()
        t1 = time.perf_counter()
        loss = out.item()
        if s >= warmup:
            times.append(t1 - t0)
    return statistics.median(times), loss, sum(p.numel() for p in params)


# ---------------------------------------------------------------------------------------------
# The agreement check against the C quantizer.

M32 = np.uint64(0xFFFFFFFF)


def philox_u32(seed, stream, index):
    """ufp4_philox_u32 (src/core/philox.c): Philox4x32-10 keyed by the seed, counter
    (index/4, stream), word index%4; index a uint64 array."""
    index = np.asarray(index, dtype=np.uint64)
    c = [index >> np.uint64(2) & M32, index >> np.uint64(34), np.uint64(stream) & M32, np.uint64(stream >> 32)]
    c = [np.broadcast_to(w, index.shape).astype(np.uint64) for w in c]
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64(seed >> 32)
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & M32, (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & M32]
        k0 = (k0 + np.uint64(0x9E3779B9)) & M32
        k1 = (k1 + np.uint64(0xBB67AE85)) & M32
    return np.choose((index & np.uint64(3)).astype(np.int64), c).astype(np.uint32)


def rht_signs(kind, seed=BENCH_SEED):
    """ufp4's RHT sign vectors: NVIDIA's fixed one, or the random one drawn from a seed (sign i is
    -1 when the top bit of Philox word i of stream "RHTSIGNS" is set)."""
    if kind == "nvidia":
        return torch.tensor(NVIDIA_SIGNS, dtype=torch.float32)
    bits = philox_u32(seed, RHT_SIGN_STREAM, np.arange(RHT_N))
    return torch.tensor(np.where(bits >> 31, -1.0, 1.0).astype(np.float32))


def check_tensor(rng):
    """64 x 256 float32 with what a quantizer can get wrong: E2M1 and E1M2 ties on exact scales,
    zero, -0, denormal, underflowing, NaN and Inf blocks, huge values, and rows of normals scaled
    across 2^-20..2^20."""
    rows, cols = 64, 256
    x = (rng.standard_normal((rows, cols)) * np.exp2(rng.uniform(-20, 20, (rows, 1)))).astype(np.float32)
    x[5:10] = rng.standard_t(2, (5, cols)).astype(np.float32)  # heavy tails
    ties = {"e2m1": [6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5],  # amax 6: s = 1, t = x exactly
            "e1m2": [1.75, 0.125, 0.375, 0.625, 0.875, 1.125, 1.375, 1.625]}
    for r, vals in enumerate(ties.values()):
        block = np.array(vals + [-v for v in vals], dtype=np.float32)
        for b in range(cols // BLOCK):
            x[r, b * BLOCK:(b + 1) * BLOCK] = rng.permutation(block) * np.float32(2.0 ** (b - 8))
    special = x[2].reshape(-1, BLOCK)
    special[0] = 0.0
    special[1] = -0.0
    special[2] = rng.standard_normal(BLOCK) * 1e-39  # denormal inputs and scale
    special[3] = 1e-45  # amax / g_max underflows to 0: stored as zeros
    special[4, 3] = np.nan
    special[5, 7] = np.inf
    special[6] = [-np.inf] + [1.0] * (BLOCK - 1)
    special[7] = rng.standard_normal(BLOCK) * 1e-30
    special[7, 0] = 3e38  # huge amax next to tiny values (-0 and +0 outputs)
    special[8] = -special[8] * 1e-8
    special[8, 0] = 1.0
    return x


def same_bits(got, want):
    """Bit-identical, except that any NaN matches any NaN (the C writes its scale's NaN)."""
    g, w = got.view(np.uint32), want.view(np.uint32)
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    bad = (g != w) & ~(nan_g & nan_w)
    return int(bad.sum()), np.argwhere(bad)[:3].tolist()


def run_c_quantize(ufp4, x, work, args):
    src, dst = os.path.join(work, "x.npy"), os.path.join(work, "y.npy")
    np.save(src, x)
    cmd = [ufp4, "quantize", "--in", src, "--out", dst, "--block", str(BLOCK), "--scale", "fp32"] + args
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return np.load(dst)


def sr_uniforms(seed, stream, shape):
    """The C's SR draws of a rows x cols tensor as exact float64 uniforms bits / 2^32."""
    bits = philox_u32(seed, stream, np.arange(shape[0] * shape[1], dtype=np.uint64))
    return torch.tensor(bits.astype(np.float64) / 2.0 ** 32).reshape(shape)


def exact_cases(ufp4, x, work, fq):
    """(name, error or None) for each case compared bit for bit with `ufp4 quantize`."""
    out = []
    xt = torch.from_numpy(x)
    for grid in GRIDS:
        for rht in (None, "nvidia", "random"):
            for sr in (False, True):
                seed, stream = 7 + len(out), 3 + len(out)
                args = ["--grid", grid, "--round", "sr" if sr else "rne", "--seed", str(seed), "--stream", str(stream)]
                signs = None
                if rht:
                    args += ["--rht", str(RHT_N), "--rht-signs", rht]
                    signs = rht_signs(rht, seed)
                want = run_c_quantize(ufp4, x, work, args)
                u = sr_uniforms(seed, stream, x.shape) if sr else None
                got = fq(xt, GRIDS[grid], signs, sr=sr, u=u).numpy()
                n, where = same_bits(got, want)
                name = f"{grid} {'sr (C bits)' if sr else 'rne'} rht={rht or 'none'}"
                out.append((name, None if n == 0 else f"{n} of {x.size} values differ, first at {where}"))
    return out


def neighbours(t, levels):
    """Grid points just below and above |t| from the level table (both g_max above it)."""
    lv = np.array(levels, dtype=np.float32)
    a = np.minimum(np.abs(t), lv[-1])
    lo = lv[np.searchsorted(lv, a, side="right") - 1]
    hi = lv[np.minimum(np.searchsorted(lv, a, side="left"), len(lv) - 1)]
    return lo, hi


def sr_statistics(fq, grid, signs, draws=4000):
    """Training's SR (torch.rand draws) on a 4 x 64 tensor, `draws` times: every value must be on a
    neighbouring grid point of t (scale and t recomputed in numpy), and the mean within 6 sigma of
    the exact expectation, which is the input (rotated when signs) up to the rounding of t."""
    gen = np.random.default_rng(11)
    x = (gen.standard_normal((4, 64)) * np.exp2(gen.uniform(-4, 4, (4, 1)))).astype(np.float32)
    xt = torch.from_numpy(x)
    ref = (fwht16(xt.reshape(4, -1, BLOCK) * signs) if signs is not None else xt.reshape(4, -1, BLOCK)).numpy()
    s = np.abs(ref).max(-1, keepdims=True) / np.float32(grid.g_max)
    t = ref / s
    a = np.minimum(np.abs(t), np.float32(grid.g_max))
    lo, hi = neighbours(t, grid.levels)
    y = fq(xt.repeat(draws, 1), grid, signs, sr=True).numpy().reshape(draws, *ref.shape)
    off = ~((y == np.copysign(lo, t) * s) | (y == np.copysign(hi, t) * s))
    if off.any():
        return f"{int(off.sum())} of {y.size} draws off the two neighbouring grid points"
    p = np.where(hi > lo, (a - lo) / np.where(hi > lo, hi - lo, 1), 0)
    sigma = np.sqrt(p * (1 - p) / draws) * (hi - lo) * s
    expect = np.copysign(a, t) * s  # the input itself, unless saturated
    err = np.abs(y.mean(0, dtype=np.float64) - expect)
    bad = err > 6 * sigma + 1e-6 * np.abs(expect)
    if bad.any():
        i = np.unravel_index(np.argmax(err / (sigma + 1e-30)), err.shape)
        return f"{int(bad.sum())} means beyond 6 sigma (worst {err[i]:.3g} vs sigma {sigma[i]:.3g})"
    return None


def other_cases():
    """Checks with no C command to compare against: orthogonality of the RHT and bf16 rounding
    (round to nearest even on the bits, written out independently)."""
    out = []
    for kind in ("nvidia", "random"):
        h = fwht16(torch.eye(RHT_N, dtype=torch.float64) * rht_signs(kind).double())
        err = (h @ h.t() - torch.eye(RHT_N, dtype=torch.float64)).abs().max().item()
        out.append((f"rht {kind} signs orthogonal", None if err < 1e-12 else f"|H'H'^T - I| = {err:.3g}"))
    x = np.random.default_rng(5).standard_normal(1 << 16).astype(np.float32) * np.float32(1e3)
    x[:4] = [1.00390625, 1.01171875, -1.00390625, 3.0e38]  # bf16 ties both ways, and a carry
    b = x.view(np.uint32).astype(np.uint64)
    want = (((b + np.uint64(0x7FFF) + (b >> np.uint64(16) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16))
    got = round_bf16(torch.from_numpy(x)).numpy().view(np.uint32)
    n = int((got != want.astype(np.uint32)).sum())
    out.append(("bf16 round to nearest even", None if n == 0 else f"{n} values differ"))
    return out


def check_quantizer(ufp4, fq=fake_quant):
    """Every case as (name, error or None); the quantizer under test is `fq`."""
    x = check_tensor(np.random.default_rng(20240607))
    with tempfile.TemporaryDirectory(prefix="ufp4_peer_") as work:
        out = exact_cases(ufp4, x, work, fq)
    for grid in GRIDS.values():
        for kind in (None, "random"):
            torch.manual_seed(3)
            err = sr_statistics(fq, grid, rht_signs(kind) if kind else None)
            out.append((f"{grid.name} sr (torch.rand) rht={kind or 'none'} statistics", err))
    return out + other_cases()


def require_agreement(ufp4):
    try:
        cases = check_quantizer(ufp4)
    except (RuntimeError, OSError) as e:
        sys.exit(f"torch_peer: the quantizer check could not run: {e}")
    failed = [(n, e) for n, e in cases if e]
    for n, e in cases:
        print(f"  {'FAIL' if e else 'ok  '} {n}{': ' + e if e else ''}")
    if failed:
        sys.exit(f"torch_peer: the script's fake-quant disagrees with `{ufp4} quantize` in {len(failed)} "
                 f"of {len(cases)} cases ({failed[0][0]}: {failed[0][1]}); timing it would not compare equal work")
    print(f"quantizer agreement: {len(cases)} cases pass")
    return cases


# ---------------------------------------------------------------------------------------------
# The side-by-side run.

def run_ufp4_bench(ufp4, configs, warmup, steps, work):
    """`ufp4 bench train` on the small-deep configs; {(config key, recipe): its JSON row} and the
    raw JSON. One config runs alone (`--config make-run`, `4x128` or `16x64`); several run as
    small-deep, and the chosen rows are kept."""
    which = configs[0] if len(configs) == 1 else "small-deep"
    out = os.path.join(work, "ufp4-train.json")
    cmd = [ufp4, "bench", "train", "--config", which, "--recipes", ",".join(RECIPES), "--steps", str(steps),
           "--warmup", str(warmup), "--json", out]
    print("$ " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd)
    if res.returncode:
        sys.exit(f"torch_peer: `{' '.join(cmd)}` failed with status {res.returncode}")
    with open(out) as f:
        raw = json.load(f)
    rows = {(r["config"].split()[0], r["recipe"]): r for r in raw["train"]}
    return rows, raw


def write_json_atomic(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="torch_peer.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ufp4", default="build/ufp4", help="the ufp4 binary (default build/ufp4)")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated of {', '.join(CONFIGS)}")
    p.add_argument("--steps", type=int, default=5, help="timed steps per measurement (default 5)")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (default 1)")
    p.add_argument("--torch-threads", default="1,2", help="PyTorch thread counts to try, best kept (default 1,2)")
    p.add_argument("--json", help="write every figure to this file")
    p.add_argument("--check-only", action="store_true", help="only the quantizer agreement check")
    a = p.parse_args(argv)
    a.configs = [c for c in a.configs.split(",") if c]
    unknown = [c for c in a.configs if c not in CONFIGS]
    if unknown or not a.configs:
        p.error(f"--configs: unknown {unknown or 'empty list'}; choose from {', '.join(CONFIGS)}")
    try:
        a.torch_threads = [int(t) for t in a.torch_threads.split(",")]
    except ValueError:
        p.error(f"--torch-threads: '{a.torch_threads}' is not a list of integers")
    if a.steps < 1 or a.warmup < 0 or not a.torch_threads or min(a.torch_threads) < 1:
        p.error("--steps must be >= 1, --warmup >= 0, --torch-threads positive")
    if not os.access(a.ufp4, os.X_OK):
        p.error(f"--ufp4: {a.ufp4} is not an executable (build it: cmake --build build --target ufp4)")
    return a


def print_table(rows):
    print(f"\n{'config':<9} {'recipe':<6} {'ufp4 ms':>8} {'x fp32':>6} | {'PyTorch ms':>10} {'thr':>3} "
          f"{'x fp32':>6} | {'PyTorch/ufp4':>12}")
    for r in rows:
        print(f"{r['config']:<9} {r['recipe']:<6} {r['ufp4_ms']:8.1f} {r['ufp4_vs_fp32']:6.2f} | "
              f"{r['torch_ms']:10.1f} {r['torch_threads']:3d} {r['torch_vs_fp32']:6.2f} | {r['torch_over_ufp4']:12.2f}")


def main(argv=None):
    a = parse_args(argv)
    print(f"checking the script's fake-quant against {a.ufp4} quantize:")
    cases = require_agreement(a.ufp4)
    if a.check_only:
        return 0
    with tempfile.TemporaryDirectory(prefix="ufp4_peer_") as work:
        ufp4_rows, raw = run_ufp4_bench(a.ufp4, a.configs, a.warmup, a.steps, work)
    signs = rht_signs("random", BENCH_SEED)
    rows = []
    for cfg in a.configs:
        for recipe in RECIPES:
            by_threads, losses = {}, {}
            ours = ufp4_rows[(cfg, recipe)]
            for th in a.torch_threads:
                by_threads[th], losses[th], n_params = time_torch(CONFIGS[cfg], recipe, th, a.warmup, a.steps, signs)
                if n_params != ours["params"]:
                    sys.exit(f"torch_peer: the PyTorch model of {cfg} has {n_params} parameters, ufp4's "
                             f"{ours['params']:.0f}: CONFIGS no longer mirrors bench/bench_train.c")
                print(f"PyTorch {cfg} {recipe} {th} thread(s): {1e3 * by_threads[th]:.1f} ms/step, "
                      f"loss {losses[th]:.4f}", flush=True)
            best = min(by_threads, key=by_threads.get)
            rows.append({"config": cfg, "recipe": recipe, "ufp4_ms": 1e3 * ours["step_s"],
                         "torch_ms": 1e3 * by_threads[best], "torch_threads": best,
                         "torch_ms_by_threads": {str(k): 1e3 * v for k, v in by_threads.items()},
                         "torch_last_loss": losses[best]})
    for r in rows:
        base = next(b for b in rows if b["config"] == r["config"] and b["recipe"] == "fp32")
        r["ufp4_vs_fp32"] = r["ufp4_ms"] / base["ufp4_ms"]
        r["torch_vs_fp32"] = r["torch_ms"] / base["torch_ms"]
        r["torch_over_ufp4"] = r["torch_ms"] / r["ufp4_ms"]
    print(f"\nmedian ms per step over {a.steps} steps after {a.warmup} warm-up; ufp4 at {raw['threads']} thread(s), "
          f"PyTorch {torch.__version__} best of {a.torch_threads} thread(s)")
    print_table(rows)
    if a.json:
        write_json_atomic(a.json, {
            "steps": a.steps, "warmup": a.warmup, "ufp4_threads": raw["threads"],
            "torch_version": torch.__version__, "torch_threads_tried": a.torch_threads,
            "machine": {"nproc": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
                        "python": platform.python_version()},
            "check": [{"case": n, "ok": e is None} for n, e in cases],
            "rows": rows, "ufp4_bench": raw})
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
