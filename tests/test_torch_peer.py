#!/usr/bin/python3
"""The quantizer agreement check of bench/torch_peer.py (the PyTorch peer of `ufp4 bench train`):
its fake-quant must agree with `ufp4 quantize` (bit for bit under RNE with and without the RHT, and
under SR given the C's random bits; statistically under training's torch.rand SR), and the check
must be able to fail: each of five wrong quantizers has to be caught by the cases that concern it.

Usage: test_torch_peer.py PATH/ufp4. Exit 77 (skip) when torch is missing, but 1 when CI is set:
CI installs it (Debian python3-torch, scripts/setup.sh --test)."""
import importlib.util
import os
import sys
from unittest import mock

from system_python import import_or_skip

torch = import_or_skip("torch", "python3-torch")

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("torch_peer", os.path.join(HERE, "..", "bench", "torch_peer.py"))
peer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peer)


def failed(cases):
    return {name for name, err in cases if err}


def ties_away(v):
    """Round half away from zero (v >= 0 here): RNA instead of RNE."""
    return torch.floor(v + 0.5)


def hadamard_matmul(v):
    """The 16-point RHT as one product with the Hadamard matrix: the same transform in exact
    arithmetic, summed in another order."""
    h = torch.ones(1, 1)
    for _ in range(4):
        h = torch.cat((torch.cat((h, h), 1), torch.cat((h, -h), 1)), 0)
    return v @ (h * 0.25).to(v.dtype)


def biased_sr(x, grid, signs=None, sr=False, u=None):
    """SR that rounds up too rarely: P(up) = p / 1.25."""
    if sr:
        u = (u if u is not None else torch.rand(x.shape)) * 1.25
    return peer.fake_quant(x, grid, signs, sr=sr, u=u)


def truncate_bf16(x):
    return (x.view(torch.int32) & -65536).view(torch.float32)


def main():
    ufp4 = sys.argv[1]
    problems = []
    ok = peer.check_quantizer(ufp4)
    if failed(ok):
        problems.append(f"the script's own quantizer fails: {[(n, e) for n, e in ok if e]}")
    names = [n for n, _ in ok]
    if len(names) < 19:
        problems.append(f"only {len(names)} cases run: {names}")

    def expect(label, cases, must):
        """Every case whose name contains a word of `must` fails, and only such cases."""
        bad = failed(cases)
        want = {n for n in names if any(w in n for w in must)}
        if not bad:
            problems.append(f"{label}: not caught by any case")
        elif not bad <= want:
            problems.append(f"{label}: unrelated cases fail: {sorted(bad - want)}")
        print(f"{label}: caught by {len(bad)} cases: {sorted(bad)}")

    with mock.patch.object(peer, "round_nearest", ties_away):
        cases = peer.check_quantizer(ufp4)
    expect("ties away from zero", cases, ["rne"])
    for grid in peer.GRIDS:
        if f"{grid} rne rht=none" not in failed(cases):
            problems.append(f"ties away from zero: the tie rows of {grid} do not catch it")
    with mock.patch.object(peer, "fwht16", hadamard_matmul):
        cases = peer.check_quantizer(ufp4)
    expect("RHT as a matrix product", cases, ["rht=nvidia", "rht=random"])
    cases = peer.check_quantizer(ufp4, fq=biased_sr)
    expect("biased SR", cases, ["sr (C bits)", "statistics"])
    if not any("statistics" in n for n in failed(cases)):
        problems.append("biased SR: the statistics with torch.rand do not catch it")
    with mock.patch.object(peer, "round_bf16", truncate_bf16):
        cases = peer.check_quantizer(ufp4)
    expect("bf16 by truncation", cases, ["bf16"])
    with mock.patch.object(peer, "round_nearest", ties_away):
        try:
            peer.require_agreement(ufp4)
            problems.append("require_agreement returned with a wrong quantizer")
        except SystemExit as e:
            if not str(e.code).startswith("torch_peer: the script's fake-quant disagrees"):
                problems.append(f"require_agreement's message: {e.code}")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"torch_peer quantizer check: {len(names)} cases agree with {ufp4} quantize; 5 wrong quantizers caught")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
