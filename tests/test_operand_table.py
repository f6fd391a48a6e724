#!/usr/bin/env python3
"""scripts/operand_table.py: made-up diagnostics whose shares are known (means over lines and at
the last step, per run; mean and range over seeds in the table), a run without four_share and an
unfinished one, damaged lines; another quantity (alpha, with nulls left out and counted, and the
range rule of a share against a measure); and the file a real `ufp4 train` of a 4/6 recipe
writes, so the format the script reads is the trainer's.

    test_operand_table.py     (UFP4_CLI: the ufp4 binary; the SOTU corpus of make data, as byte-level shards)"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(SRC, "scripts", "operand_table.py")
UFP4 = os.environ.get("UFP4_CLI", os.path.join(SRC, "build", "ufp4"))
CORPUS = os.path.join(SRC, "data", "raw", "sotu")  # make test fetches it (scripts/fetch_data.sh)


def script(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)


def make_run(top, recipe, seed, lines, state="finished", key="four_share"):
    d = os.path.join(top, "runs", recipe, "seed%d" % seed)
    os.makedirs(d)
    with open(os.path.join(d, "diagnostics.jsonl"), "w") as f:
        f.write('{"step":0,"drift":[{"layer":0,"norm_ratio":1,"cosine":1}]}\n')
        for step, op, v in lines:
            line = {"step": step, "layer": 0, "proj": "q", "operand": op, "alpha": 0.99, "sqnr_db": 18.5}
            line[key] = v
            f.write(json.dumps(line) + "\n")
            f.write(json.dumps({"step": step, "layer": 0, "proj": "q", "gemm": "fprop", "out_sqnr_db": 17}) + "\n")
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"commit": "abc", "state": state}, f)
    return d


def test_known_shares():
    with tempfile.TemporaryDirectory() as tmp:
        top = os.path.join(tmp, "L2")
        make_run(top, "e2m1-4over6", 1, [(0, "fprop.x", 0.2), (0, "fprop.x", 0.4), (10, "fprop.x", 0.6),
                                         (10, "dgrad.dy", 0.1)])
        make_run(top, "e2m1-4over6", 2, [(0, "fprop.x", 0.8), (10, "wgrad.x", 0.5)])
        make_run(top, "e2m1-4over6", 3, [(0, "fprop.x", 0.0)], state="running")
        make_run(top, "e2m1", 1, [])  # no four_share: not a 4/6 run, not listed
        out = os.path.join(tmp, "shares.json")
        p = script(top, "--json", out)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
        with open(out) as f:
            got = json.load(f)
        runs = {(r["recipe"], r["seed"]): r["operands"] for r in got["runs"]}
        check(got.get("quantity") == "four_share", "quantity: %s" % got.get("quantity"))
        check(sorted(runs) == [("e2m1-4over6", 1), ("e2m1-4over6", 2)], "runs: %s" % sorted(runs))
        x = runs.get(("e2m1-4over6", 1), {}).get("fprop.x", {})
        check(abs(x.get("mean", -1) - 0.4) < 1e-12 and x.get("mean_last_step") == 0.6 and x.get("last_step") == 10
              and x.get("lines") == 3, "seed 1 fprop.x: %s" % x)
        check(got["left_out"] == [os.path.join(top, "runs", "e2m1-4over6", "seed3")], "left out: %s" % got["left_out"])
        row = [line for line in p.stdout.splitlines() if "| e2m1-4over6 |" in line]
        # fprop.x: seeds 0.4 and 0.8 -> 0.600 [0.400, 0.800]; dgrad.dy seed 1 only; fprop.w none
        check(len(row) == 1 and "| 0.600 [0.400, 0.800] | - | 0.100 [0.100, 0.100] |" in row[0]
              and row[0].endswith("| 0.500 [0.500, 0.500] |"), "table row: %s" % row)
        check("seed3" in p.stdout and "not finished" in p.stdout, "the unfinished run named: %s" % p.stdout)
        check(not [line for line in p.stdout.splitlines() if "| e2m1 |" in line], "a row for e2m1, which has no "
              "four_share: %s" % p.stdout)

        bad = os.path.join(top, "runs", "e2m1-4over6", "seed2", "diagnostics.jsonl")
        with open(bad, "a") as f:
            f.write('{"step":20,"operand":"fprop.x","four_share":1.5}\n')
        p = script(top)
        check(p.returncode == 2 and bad + ":6" in p.stderr, "share 1.5: %d %s" % (p.returncode, p.stderr))
        with open(bad, "a") as f:
            f.write('{"step":20,\n')
        p = script(top)
        check(p.returncode == 2 and bad in p.stderr, "torn line: %d %s" % (p.returncode, p.stderr))
        p = script(os.path.join(tmp, "nothing"))
        check(p.returncode == 2 and "nothing" in p.stderr, "no folder: %d %s" % (p.returncode, p.stderr))
        p = script(top, "--quantity", "loss")
        check(p.returncode == 2 and "loss" in p.stderr, "an unknown quantity: %d %s" % (p.returncode, p.stderr))


def test_other_quantity():
    with tempfile.TemporaryDirectory() as tmp:
        top = os.path.join(tmp, "L4")
        # alpha: seed 1 0.90 and 0.96 at step 0, null at step 10 (left out), 0.93 at step 10;
        # seed 2 1.02 (a measure, not a share: above 1 is allowed); dgrad.dy of seed 1 null only.
        make_run(top, "ufp4", 1, [(0, "fprop.x", 0.90), (0, "fprop.x", 0.96), (10, "fprop.x", None),
                                  (10, "fprop.x", 0.93), (10, "dgrad.dy", None)], key="alpha")
        make_run(top, "ufp4", 2, [(0, "fprop.x", 1.02)], key="alpha")
        out = os.path.join(tmp, "alpha.json")
        p = script(top, "--quantity", "alpha", "--json", out)
        check(p.returncode == 0, "alpha: exit %d: %s" % (p.returncode, p.stderr))
        if p.returncode:
            return
        with open(out) as f:
            got = json.load(f)
        runs = {(r["recipe"], r["seed"]): r["operands"] for r in got["runs"]}
        x = runs.get(("ufp4", 1), {}).get("fprop.x", {})
        check(got["quantity"] == "alpha" and abs(x.get("mean", -1) - 0.93) < 1e-12 and x.get("mean_last_step") == 0.93
              and x.get("lines") == 3 and x.get("nulls") == 1, "alpha, seed 1 fprop.x: %s" % x)
        check("dgrad.dy" not in runs.get(("ufp4", 1), {}), "an operand with nulls only: %s" % runs.get(("ufp4", 1)))
        row = [line for line in p.stdout.splitlines() if "| ufp4 |" in line]
        check(len(row) == 1 and "| 2 | 0.975 [0.930, 1.020] | - |" in row[0], "alpha row: %s" % row)
        check("alpha = <Q(A), A>" in p.stdout and "null values left out of the means: 2 lines" in p.stdout
              and got.get("nulls") == 2,
              "caption or nulls: %s" % p.stdout)
        # sqnr_db of the same lines: 18.5 on every line that has a quantity at all
        p = script(top, "--quantity", "sqnr_db")
        check(p.returncode == 0 and "| 18.500 [18.500, 18.500] |" in p.stdout, "sqnr_db: %s %s" % (p.stdout, p.stderr))
        # no clipped anywhere: an error naming the quantity
        p = script(top, "--quantity", "clipped")
        check(p.returncode == 2 and "no finished run with clipped" in p.stderr, "no clipped: %s" % p.stderr)
        # a share above 1 is an error; a measure must be a finite number
        make_run(top, "e2m1", 1, [(0, "wgrad.x", 1.5)], key="clipped")
        bad = os.path.join(top, "runs", "e2m1", "seed1", "diagnostics.jsonl")
        p = script(top, "--quantity", "clipped")
        check(p.returncode == 2 and bad + ":2" in p.stderr and "share" in p.stderr, "clipped 1.5: %s" % p.stderr)
        with open(bad, "w") as f:
            f.write('{"step":0,"layer":0,"proj":"q","operand":"wgrad.x","alpha":"0.9"}\n')
        p = script(top, "--quantity", "alpha")
        check(p.returncode == 2 and bad + ":1" in p.stderr, "alpha as a string: %s" % p.stderr)


def test_real_run():
    if not os.path.exists(CORPUS):
        check(False, "no corpus at %s (make data)" % CORPUS)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        p = subprocess.run([UFP4, "prepare", "--corpus", CORPUS, "--tokenizer", "bytes", "--out", data],
                           capture_output=True, text=True)
        check(p.returncode == 0, "prepare: %s" % p.stderr)
        top = os.path.join(tmp, "L1")
        run = os.path.join(top, "runs", "e2m1-4over6", "seed1")
        p = subprocess.run([UFP4, "train", "--data", data, "--out", run, "--recipe", "e2m1-4over6", "--steps", "4",
                            "--layers", "1", "--d-model", "32", "--heads", "2", "--ffn", "96", "--seq-len", "32",
                            "--batch", "2", "--eval-every", "2", "--eval-batches", "1", "--threads", "1",
                            "--diag-every", "2"], capture_output=True, text=True)
        check(p.returncode == 0, "ufp4 train: %d %s" % (p.returncode, p.stderr[-500:]))
        out = os.path.join(tmp, "shares.json")
        p = script(top, "--json", out)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
        if p.returncode:
            return
        p = script(top, "--quantity", "alpha", "--json", os.path.join(tmp, "alpha.json"))
        check(p.returncode == 0, "alpha: exit %d: %s" % (p.returncode, p.stderr))
        if p.returncode == 0:
            with open(os.path.join(tmp, "alpha.json")) as f:
                alpha = json.load(f)["runs"][0]["operands"]
            check(len(alpha) == 6 and all(o["lines"] == 14 and 0.5 < o["mean"] < 1.5 for o in alpha.values()),
                  "a real run's alpha: %s" % alpha)
        with open(out) as f:
            ops = json.load(f)["runs"][0]["operands"]
        # every operand of every projection, at each diagnostics step (0 and 2): 7 projections x 2
        check(sorted(ops) == sorted(("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x"))
              and all(o["lines"] == 14 and o["last_step"] == 2 and 0 < o["mean"] < 1 for o in ops.values()),
              "a real run's shares: %s" % ops)


if __name__ == "__main__":
    finish("test_operand_table", test_known_shares, test_other_quantity, test_real_run)
