#!/usr/bin/env python3
"""The cost of ufp4.torch.Linear against torch.nn.Linear: forward + backward of one layer,
x [tokens, in] -> [tokens, out], timed interleaved (plain torch, then each recipe, repeated), and
the median of the repeats reported with its ratio to torch. Both run on all the threads they find
(torch's intra-op pool; ufp4's OpenMP). On a shared machine the absolute times are noisy; the
ratios, taken side by side in one run, are what to quote.

    PYTHONPATH=python UFP4_LIBRARY=build/libufp4.so /usr/bin/python3 bench/torch_linear_cost.py
"""
import argparse
import statistics
import time

import ufp4.torch  # first: it pins OpenBLAS's kernels as the ufp4 command does
import torch


def fwd_bwd(layer, x, dy):
    x.grad = None
    layer.weight.grad = None
    t0 = time.perf_counter()
    layer(x).backward(dy)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--in-features", type=int, default=256)
    ap.add_argument("--out-features", type=int, default=768)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--recipes", default="fp32,bf16,ufp4,nvfp4")
    a = ap.parse_args()
    torch.manual_seed(0)
    ref = torch.nn.Linear(a.in_features, a.out_features, bias=False)
    layers = {"torch.nn.Linear": ref}
    for r in a.recipes.split(","):
        q = ufp4.torch.Linear(a.in_features, a.out_features, recipe=r)
        q.weight = ref.weight
        layers["ufp4 " + r] = q
    x = torch.randn(a.tokens, a.in_features, requires_grad=True)
    dy = torch.randn(a.tokens, a.out_features)
    times = {k: [] for k in layers}
    for rep in range(a.repeats + 2):
        for k, layer in layers.items():
            t = fwd_bwd(layer, x, dy)
            if rep >= 2:  # two warm-up rounds
                times[k].append(t)
    base = statistics.median(times["torch.nn.Linear"])
    print(f"forward+backward, x [{a.tokens}, {a.in_features}] -> {a.out_features}, median of {a.repeats}, "
          f"torch threads {torch.get_num_threads()}")
    for k, ts in times.items():
        m = statistics.median(ts)
        print(f"  {k:18s} {m * 1e3:8.2f} ms   x{m / base:5.2f}")


if __name__ == "__main__":
    main()
