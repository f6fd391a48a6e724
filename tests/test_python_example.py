#!/usr/bin/env python3
"""examples/torch_train.py runs a few steps: it converts exactly the two hidden layers, and
prints a finite loss for the ufp4 model and for the bf16 one at every printed step and on the
held-out windows, the ufp4 loss falling from its start (learning happens through the library's
gradients)."""
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402
from system_python import import_or_skip  # noqa: E402

import_or_skip("torch", "python3-torch")
SRC = os.environ["UFP4_SOURCE_DIR"]


def test_example():
    sotu = os.path.join(SRC, "data", "raw", "sotu")
    if not os.path.isdir(sotu):
        print(f"skipped: {sotu} is missing (the shared data folder)")
        sys.exit(77)
    p = subprocess.run([sys.executable, os.path.join(SRC, "examples", "torch_train.py"), "--steps", "30",
                        "--data", sotu], capture_output=True, text=True, timeout=300)
    print(p.stdout, p.stderr)
    check(p.returncode == 0, "torch_train.py exits 0")
    lines = p.stdout.splitlines()
    check(any("converted ['fc1', 'fc2']" in l for l in lines), "convert names the two hidden layers")
    rows = [l.split() for l in lines if l.split() and l.split()[0].isdigit()]
    vals = [float(v) for r in rows for v in r[1:3]]
    check(len(rows) >= 2 and all(math.isfinite(v) for v in vals), "finite losses for ufp4 and bf16 at each step")
    check(rows and float(rows[-1][1]) < float(rows[0][1]) - 0.5, "the ufp4 model's loss falls")
    val = [l.split() for l in lines if l.startswith("val")]
    check(len(val) == 1 and all(math.isfinite(float(v)) for v in val[0][1:3]), "a held-out loss for both")


finish("python_example", test_example)
