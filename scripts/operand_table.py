#!/usr/bin/env python3
"""One quantizer measure of training's diagnostics, per run and operand, as a table over seeds
(docs/RESULTS.md section 5: "per run: the four_share of each operand from diagnostics.jsonl
(gradients under SR included)", and the training side of its alpha, SQNR and shrink-bias
comparison).

    scripts/operand_table.py FOLDER... [--quantity Q] [--json OUT]
        FOLDER      a compare folder (reports/fos/L2 ...)
        --quantity  a measure of the trainer's operand lines (docs/TRAINING.md, diagnostics):
                    four_share (default; the 4/6 choice, which the trainer writes for the 4/6
                    recipes only), alpha, sqnr_db, shrink_bias, mean_rel_err, b_eff, underflow,
                    clipped

Each finished run (run.json state "finished") of each FOLDER/runs/<recipe>/seed<N> whose
diagnostics.jsonl has the quantity on its operand lines gives, per operand (fprop.x, fprop.w,
dgrad.dy, dgrad.w, wgrad.dy, wgrad.x), the mean of the quantity over its lines: every diagnostics
step, block and projection, each line one (block, projection) pair, so each projection counts alike
whatever its size; and the same at the run's last diagnostics step. A null (the trainer's JSON for a
value that is not finite, as the SQNR of an operand quantized without error) is left out of the
means and counted. The table gives, per folder, recipe and operand, the mean of the runs' values
over seeds with their range. Descriptive: no test. A line that is not JSON, or a value that is not
a number (a share outside [0, 1]), is an error naming the file and line; a run not finished is left
out and named. Exit 0, or 2 on an error or when no run has the quantity."""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common  # noqa: E402
from study_common import read_json_object  # noqa: E402

OPERANDS = ("fprop.x", "fprop.w", "dgrad.dy", "dgrad.w", "wgrad.dy", "wgrad.x")
# The operand lines' measures (include/ufp4/measures.h, written by src/analysis/diagnostics.c), each with its
# caption; the shares lie in [0, 1].
QUANTITIES = {
    "four_share": "Share of blocks that kept the 4-scale",
    "alpha": "alpha = <Q(A), A> / ||A||^2 (signal attenuation)",
    "sqnr_db": "SQNR = -10 log10 (||Q(A) - A||^2 / ||A||^2), dB",
    "shrink_bias": "Shrink bias E[rho(t) - t] over the elements, grid units",
    "mean_rel_err": "Mean of (|Q(a)| - |a|) / s over the nonzero elements, grid units",
    "b_eff": "Effective levels exp(entropy) / levels",
    "underflow": "Share of nonzero elements quantized to 0",
    "clipped": "Share of elements saturated at the grid's largest level",
}
SHARES = ("four_share", "underflow", "clipped")


def fail(msg):
    study_common.fail("operand_table", msg)


def run_values(path, quantity):
    """({operand: {mean, last_step, mean_last_step, lines, nulls}}, null lines) of one diagnostics.jsonl:
    the operands with a value (an operand with nulls only is counted in the second); ({}, n) when no
    operand line has a value."""
    lines, nulls = [], {}  # (step, operand, value); operand -> lines with null
    try:
        with open(path) as f:
            for no, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    d = json.loads(text)
                except ValueError as e:
                    fail("%s:%d: not a JSON line (%s)" % (path, no, e))
                if not isinstance(d, dict) or quantity not in d:
                    continue
                v, op, step = d[quantity], d.get("operand"), d.get("step")
                if op not in OPERANDS or not isinstance(step, int):
                    fail("%s:%d: a %s line without a known operand and a step" % (path, no, quantity))
                if v is None:
                    nulls[op] = nulls.get(op, 0) + 1
                    continue
                if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                        or (quantity in SHARES and not 0 <= v <= 1)):
                    fail("%s:%d: %s %r is not a %s" % (path, no, quantity, v,
                                                      "share in [0, 1]" if quantity in SHARES else "finite number"))
                lines.append((step, op, float(v)))
    except OSError as e:
        fail("%s: cannot be read (%s)" % (path, e))
    out = {}
    for op in OPERANDS:
        vals = [(s, v) for s, o, v in lines if o == op]
        if not vals:
            continue
        last = max(s for s, _ in vals)
        at_last = [v for s, v in vals if s == last]
        out[op] = {"mean": sum(v for _, v in vals) / len(vals), "last_step": last,
                   "mean_last_step": sum(at_last) / len(at_last), "lines": len(vals), "nulls": nulls.get(op, 0)}
    return out, sum(nulls.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--quantity", default="four_share", choices=sorted(QUANTITIES))
    ap.add_argument("--json")
    args = ap.parse_args()
    q = args.quantity
    result, table, skipped, nulls = [], {}, [], 0
    for folder in args.folders:
        runs = os.path.join(folder, "runs")
        if not os.path.isdir(runs):
            fail("%s: no runs/ folder (not a compare folder?)" % folder)
        for recipe in sorted(os.listdir(runs)):
            rdir = os.path.join(runs, recipe)
            seeds = sorted((int(m.group(1)), name) for name in os.listdir(rdir) if os.path.isdir(os.path.join(rdir, name))
                           for m in [re.fullmatch(r"seed(\d+)", name)] if m)
            for seed, name in seeds:
                run = os.path.join(rdir, name)
                diag = os.path.join(run, "diagnostics.jsonl")
                if not os.path.exists(diag):
                    continue
                values, run_nulls = run_values(diag, q)
                if not values and not run_nulls:
                    continue
                state = read_json_object("operand_table", os.path.join(run, "run.json"))
                if state.get("state") != "finished":
                    skipped.append(run)
                    continue
                nulls += run_nulls
                if not values:
                    continue
                result.append({"folder": folder, "recipe": recipe, "seed": seed, "commit": state.get("commit"),
                               "operands": values, "nulls": run_nulls})
                for op, s in values.items():
                    table.setdefault((folder, recipe), {}).setdefault(op, []).append(s["mean"])
    if not result:
        fail("no finished run with %s in %s" % (q, ", ".join(args.folders)))
    print("%s (%s; mean over each run's diagnostics lines; mean over seeds, range in brackets)\n" % (QUANTITIES[q], q))
    print("| folder | recipe | seeds | " + " | ".join(OPERANDS) + " |")
    print("|---|---|---:|" + "---|" * len(OPERANDS))
    for (folder, recipe), ops in table.items():
        n = max(len(v) for v in ops.values())
        cells = []
        for op in OPERANDS:
            v = ops.get(op)
            cells.append("-" if not v else "%.3f [%.3f, %.3f]" % (sum(v) / len(v), min(v), max(v)))
        print("| %s | %s | %d | %s |" % (folder, recipe, n, " | ".join(cells)))
    if nulls:
        print("\nnull values left out of the means: %d lines (finished runs)" % nulls)
    if skipped:
        print("\nleft out (not finished): " + ", ".join(skipped))
    if args.json:
        try:
            with open(args.json + ".tmp", "w") as f:
                json.dump({"quantity": q, "runs": result, "left_out": skipped, "nulls": nulls}, f, indent=1)
                f.write("\n")
            os.replace(args.json + ".tmp", args.json)
        except OSError as e:
            fail("%s: cannot be written (%s)" % (args.json, e))


if __name__ == "__main__":
    main()
