#!/usr/bin/env python3
"""Train a small PyTorch model with its linear layers under a ufp4 recipe, next to the same model
in bf16 (autocast), and print both losses.

The model predicts the next byte of State of the Union addresses (data/raw/sotu) from the previous
16: byte embeddings, two hidden layers and an output head. ufp4.torch.convert swaps the two hidden
nn.Linear layers for ufp4.torch.Linear (the head stays in fp32, as the papers keep it); both copies
start from the same weights and see the same batches.

    PYTHONPATH=python UFP4_LIBRARY=build/libufp4.so /usr/bin/python3 examples/torch_train.py --steps 200
"""
import argparse
import copy
import glob
import os
import time

import numpy as np
import torch
from torch import nn

import ufp4.torch

CTX, EMB, HIDDEN = 16, 32, 256


class ByteMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, EMB)
        self.fc1 = nn.Linear(CTX * EMB, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.head = nn.Linear(HIDDEN, 256)

    def forward(self, ctx):
        h = self.emb(ctx).flatten(1)
        h = torch.relu(self.fc1(h))
        h = torch.relu(self.fc2(h))
        return self.head(h)


def load_bytes(data_dir, n_files):
    files = sorted(glob.glob(os.path.join(data_dir, "*.txt")))[-n_files:]
    if not files:
        raise SystemExit(f"torch_train: no .txt files under {data_dir} (--data)")
    return np.frombuffer(b"\n".join(open(f, "rb").read() for f in files), np.uint8)


def batch(data, rng, size):
    start = rng.integers(0, data.size - CTX - 1, size)
    idx = start[:, None] + np.arange(CTX + 1)
    b = torch.from_numpy(data[idx].astype(np.int64))
    return b[:, :CTX], b[:, CTX]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=64, help="a multiple of the recipe's RHT size (16)")
    ap.add_argument("--recipe", default="ufp4")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(here, "..", "data", "raw", "sotu"))
    a = ap.parse_args()

    data = load_bytes(a.data, 8)
    train, val = data[: data.size * 9 // 10], data[data.size * 9 // 10:]
    torch.manual_seed(a.seed)
    ref = ByteMLP()
    q = copy.deepcopy(ref)
    changed = ufp4.torch.convert(q, recipe=a.recipe, exclude=["head"])
    for m in q.modules():
        if isinstance(m, ufp4.torch.Linear):
            m.seed = a.seed
    print(f"recipe {a.recipe}: converted {changed}; the head and embeddings stay fp32")
    opts = [torch.optim.AdamW(m.parameters(), lr=a.lr) for m in (q, ref)]
    rng = np.random.default_rng(a.seed)
    vrng = np.random.default_rng(a.seed + 1)
    vx, vy = batch(val, vrng, 1024)
    times = [0.0, 0.0]
    print(f"{'step':>5} {a.recipe + ' loss':>12} {'bf16 loss':>10}")
    for step in range(a.steps):
        x, y = batch(train, rng, a.batch)
        ufp4.torch.set_step(q, step)  # fresh stochastic-rounding bits every step
        losses = []
        for i, (model, opt) in enumerate(zip((q, ref), opts)):
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=model is ref):
                loss = nn.functional.cross_entropy(model(x).float(), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            times[i] += time.perf_counter() - t0
            losses.append(loss.item())
        if step % max(1, a.steps // 10) == 0 or step == a.steps - 1:
            print(f"{step:5d} {losses[0]:12.4f} {losses[1]:10.4f}")
    with torch.no_grad():
        vq = nn.functional.cross_entropy(q(vx), vy).item()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            vr = nn.functional.cross_entropy(ref(vx).float(), vy).item()
    print(f"val   {vq:12.4f} {vr:10.4f}   (1024 held-out windows; ln 256 = 5.545 is chance)")
    print(f"time  {times[0]:11.1f}s {times[1]:9.1f}s")


if __name__ == "__main__":
    main()
