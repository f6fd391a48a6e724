#!/usr/bin/env python3
"""scripts/schedule_recovery.py end to end: compare folders whose final validation losses are made
up per seed (bf16, q, q->bf16 for q = e2m1, ufp4, nvfp4, and q->bf16 evaluated again under q), the
real `ufp4 study` run with the three registered commands of docs/RESULTS.md section 4, then the
script. Its R_s, R, R' and precision effect are checked against the same figures computed here
from the losses themselves (so a sign or a denominator of either `ufp4 study`'s per-seed values or
the script would show), its interval against SciPy's t quantile; R is "not reported" for a recipe
whose gap is not significant; files with other seeds, a missing entry, or no file at all are
errors naming the file.

    test_schedule_recovery.py UFP4 LIBUFP4     (Debian's python3, for python3-scipy)"""
import json
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402
from system_python import import_or_skip  # noqa: E402

import_or_skip("scipy", "python3-scipy")
from scipy import stats  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(SRC, "scripts", "schedule_recovery.py")
UFP4 = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "ufp4"))
LIB = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(SRC, "build", "libufp4.so"))
SEEDS = 6
DEPTH = 4
LAST = 200  # validation every 50 steps; the last at the depth's last step
Q = ("e2m1", "ufp4", "nvfp4")


def dirname(recipe):  # compare's run folder name of a recipe entry
    return "".join(c if c.isalnum() or c in ".-" else "_" for c in recipe)


def losses(s):
    """Per seed s: bf16, fp32, and per q: (L_q, L_q->bf16 own, L_q->bf16 under q). e2m1's and ufp4's
    gaps are large and steady (significant); nvfp4's gap alternates in sign (not significant)."""
    b = 4.0 + 0.05 * s
    out = {"bf16": b, "fp32": b * (1 + 0.0002 * (s % 3))}
    for k, q in enumerate(Q):
        if q == "nvfp4":
            gap = 0.004 * (1 if s % 2 else -1) + 0.0003 * s
        else:
            gap = (0.03 + 0.01 * k) * b * (1 + 0.05 * s)
        lq = b + gap
        sched = lq - gap * (0.4 + 0.03 * s + 0.1 * k)  # recovers 40-70% of the gap
        under_q = sched + 0.002 * (1 + 0.3 * s) * (1 + k)  # the switched model scores worse under q
        out[q] = (lq, sched, under_q)
    return out


def write_run(folder, recipe, seed, loss):
    d = os.path.join(folder, "runs", dirname(recipe), "seed%d" % seed)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        f.write('{"step":1,"loss":7.5}\n')
        for step in range(50, LAST + 1, 50):  # settled: the same loss at every evaluation
            f.write('{"step":%d,"val_loss":%.17g}\n' % (step, loss))
    with open(os.path.join(d, "run.json"), "w") as f:
        f.write('{"commit":"abc","state":"finished","steps_done":%d,"skipped_steps":0}' % LAST)


def make_folders(top):
    primary, fixed = os.path.join(top, "L%d" % DEPTH), os.path.join(top, "eval-q", "L%d" % DEPTH)
    for s in range(1, SEEDS + 1):
        x = losses(s)
        for folder in (primary, fixed):
            for r in ("bf16", "fp32"):
                write_run(folder, r, s, x[r])
        for q in Q:
            lq, sched, under_q = x[q]
            for folder in (primary, fixed):
                write_run(folder, q, s, lq)
            write_run(primary, "%s@0,bf16@0.9" % q, s, sched)
            write_run(fixed, "%s@0,bf16@0.9" % q, s, under_q)
    return primary, fixed


def study(out, folder, *secondaries):
    cmd = [UFP4, "study", "--out", out, "--seeds", str(SEEDS), "--depth", "%d=%s" % (DEPTH, folder)]
    for s in secondaries:
        cmd += ["--secondary", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode == 0, "%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))


def recovery(top, *extra):
    return subprocess.run([sys.executable, SCRIPT, "--dir", top] + list(extra), capture_output=True, text=True,
                          env=dict(os.environ, UFP4_LIBRARY=LIB))


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def analyses(top):
    primary, fixed = make_folders(top)
    rec = ["%s vs %s@0,bf16@0.9" % (q, q) for q in Q]
    study(os.path.join(top, "analysis"), primary, *rec)
    study(os.path.join(top, "gaps"), primary, *["%s vs bf16" % q for q in Q])
    study(os.path.join(top, "eval-q", "analysis"), fixed, *rec)


def test_figures():
    with tempfile.TemporaryDirectory() as top:
        analyses(top)
        p = recovery(top)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, p.stderr))
        try:
            with open(os.path.join(top, "recovery.json")) as f:
                got = json.load(f)
        except (OSError, ValueError) as e:
            check(False, "recovery.json: %s" % e)
            return
        check(got["seeds"] == list(range(1, SEEDS + 1)) and got["depth"] == DEPTH, "seeds and depth: %s" % got)
        for q in Q:
            g = got["recipes"][q]
            gap, rec, recq, prec = [], [], [], []
            for s in range(1, SEEDS + 1):
                x = losses(s)
                b, (lq, sched, under_q) = x["bf16"], x[q]
                gap.append(100 * (lq - b) / b)
                rec.append(100 * (lq - sched) / b)
                recq.append(100 * (lq - under_q) / b)
                prec.append(100 * (sched - under_q) / b)  # evaluated in bf16 minus evaluated under q
            for key, want in (("gap", gap), ("recovery", rec), ("recovery_under_q", recq)):
                check(all(close(a, w) for a, w in zip(g["per_seed"][key], want)), "%s %s per seed: %s, not %s" % (
                    q, key, g["per_seed"][key], want))
            m = sum(prec) / SEEDS
            sd = math.sqrt(sum((v - m) ** 2 for v in prec) / (SEEDS - 1))
            half = stats.t.ppf(0.975, SEEDS - 1) * sd / math.sqrt(SEEDS)
            pe = g["precision_effect"]
            check(all(close(a, w) for a, w in zip(pe["per_seed"], prec)), "%s precision per seed %s, not %s" % (
                q, pe["per_seed"], prec))
            check(close(pe["mean"], m) and close(pe["ci_lo"], m - half, 1e-7) and close(pe["ci_hi"], m + half, 1e-7),
                  "%s precision effect %s, not %g [%g, %g]" % (q, pe, m, m - half, m + half))
            check(pe["mean"] < 0, "%s: the switched model scores worse under q, so the effect is negative" % q)
            if q == "nvfp4":
                check(g["gap_significant"] is False and g["R"] is None and g["R_per_seed"] is None,
                      "nvfp4's gap is not significant, so no R: %s" % g)
                check("| nvfp4 |" in p.stdout and "not reported" in p.stdout.split("| nvfp4 |")[1].splitlines()[0],
                      "the table says R is not reported for nvfp4: %s" % p.stdout)
                continue
            check(g["gap_significant"] is True, "%s's gap is significant: %s" % (q, g))
            check(close(g["R"], sum(rec) / sum(gap)), "%s R = %s, not the ratio of means %s" % (
                q, g["R"], sum(rec) / sum(gap)))
            check(close(g["R_prime"], sum(recq) / sum(gap)), "%s R' = %s" % (q, g["R_prime"]))
            check(all(close(a, r / d) for a, r, d in zip(g["R_per_seed"], rec, gap)), "%s R_s %s" % (q, g["R_per_seed"]))
            check(all(close(a, r / d) for a, r, d in zip(g["R_prime_per_seed"], recq, gap)), "%s R'_s %s" % (
                q, g["R_prime_per_seed"]))
            check(all(0.39 < r < 0.71 for r in g["R_per_seed"]), "R_s in the made-up 40-70%%: %s" % g["R_per_seed"])
        check("| e2m1 |" in p.stdout and "%.2f |" % got["recipes"]["e2m1"]["R"] in p.stdout, "the table: %s" % p.stdout)


def test_errors():
    with tempfile.TemporaryDirectory() as top:
        p = recovery(top)
        want = os.path.join(top, "analysis", "analysis.json")
        check(p.returncode == 2 and want in p.stderr, "no files: exit %d, %s" % (p.returncode, p.stderr))
        analyses(top)
        gaps = os.path.join(top, "gaps", "analysis.json")
        with open(gaps) as f:
            a = json.load(f)
        b = json.loads(json.dumps(a))
        b["seeds"] = b["seeds"][:-1] + [99]
        with open(gaps, "w") as f:
            json.dump(b, f)
        p = recovery(top)
        check(p.returncode == 2 and gaps in p.stderr and "seeds" in p.stderr, "other seeds: %d %s" % (p.returncode, p.stderr))
        b = json.loads(json.dumps(a))
        b["secondary"][1]["reference"] = "e2m1"
        with open(gaps, "w") as f:
            json.dump(b, f)
        p = recovery(top)
        check(p.returncode == 2 and gaps in p.stderr and "'ufp4 vs bf16'" in p.stderr, "missing entry: %d %s" % (
            p.returncode, p.stderr))
        with open(gaps, "w") as f:
            f.write("{torn")
        p = recovery(top)
        check(p.returncode == 2 and gaps in p.stderr, "torn file: %d %s" % (p.returncode, p.stderr))
        check(not os.path.exists(os.path.join(top, "recovery.json")), "no output written on an error")


if __name__ == "__main__":
    finish("test_schedule_recovery", test_figures, test_errors)
