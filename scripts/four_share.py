#!/usr/bin/env python3
"""Four Over Six's choice, per run and operand: the share of blocks that kept the scale mapping the
block's amax to 4 (docs/RESULTS.md section 5: "per run: the four_share of each operand from
diagnostics.jsonl (gradients under SR included)").

    scripts/four_share.py FOLDER... [--json OUT]      FOLDER: a compare folder (reports/fos/L2 ...)

Each finished run (run.json state "finished") of each FOLDER/runs/<recipe>/seed<N> whose
diagnostics.jsonl has four_share lines (the 4/6 recipes; the trainer writes it for no other) gives,
per operand (fprop.x, fprop.w, dgrad.dy, dgrad.w, wgrad.dy, wgrad.x), the mean of four_share over
its lines: every diagnostics step, block and projection, each line one (block, projection) pair, so
each projection counts alike whatever its size; and the same at the run's last diagnostics step.
The table gives, per folder, recipe and operand, the mean of the runs' values over seeds with their
range. Descriptive: no test. A line that is not JSON, or a four_share that is not a number, is an
error naming the file and line; a run not finished is left out and named. Exit 0, or 2 on an error
or when no run has four_share."""
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


def fail(msg):
    study_common.fail("four_share", msg)


def run_shares(path):
    """{operand: (mean over all lines, mean at the last step, lines)} of one diagnostics.jsonl; {} when it has no four_share."""
    lines = []  # (step, operand, share)
    try:
        with open(path) as f:
            for no, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    d = json.loads(text)
                except ValueError as e:
                    fail("%s:%d: not a JSON line (%s)" % (path, no, e))
                if not isinstance(d, dict) or "four_share" not in d:
                    continue
                v, op, step = d["four_share"], d.get("operand"), d.get("step")
                if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or not 0 <= v <= 1:
                    fail("%s:%d: four_share %r is not a share in [0, 1]" % (path, no, v))
                if op not in OPERANDS or not isinstance(step, int):
                    fail("%s:%d: a four_share line without a known operand and a step" % (path, no))
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
                   "mean_last_step": sum(at_last) / len(at_last), "lines": len(vals)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--json")
    args = ap.parse_args()
    result, table, skipped = [], {}, []
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
                shares = run_shares(diag)
                if not shares:
                    continue
                state = read_json_object("four_share", os.path.join(run, "run.json"))
                if state.get("state") != "finished":
                    skipped.append(run)
                    continue
                result.append({"folder": folder, "recipe": recipe, "seed": seed, "commit": state.get("commit"),
                               "operands": shares})
                for op, s in shares.items():
                    table.setdefault((folder, recipe), {}).setdefault(op, []).append(s["mean"])
    if not result:
        fail("no finished run with four_share in %s" % ", ".join(args.folders))
    print("Share of blocks that kept the 4-scale (mean over each run's diagnostics lines; mean over seeds, "
          "range in brackets)\n")
    print("| folder | recipe | seeds | " + " | ".join(OPERANDS) + " |")
    print("|---|---|---:|" + "---|" * len(OPERANDS))
    for (folder, recipe), ops in table.items():
        n = max(len(v) for v in ops.values())
        cells = []
        for op in OPERANDS:
            v = ops.get(op)
            cells.append("-" if not v else "%.3f [%.3f, %.3f]" % (sum(v) / len(v), min(v), max(v)))
        print("| %s | %s | %d | %s |" % (folder, recipe, n, " | ".join(cells)))
    if skipped:
        print("\nleft out (not finished): " + ", ".join(skipped))
    if args.json:
        try:
            with open(args.json + ".tmp", "w") as f:
                json.dump({"runs": result, "left_out": skipped}, f, indent=1)
                f.write("\n")
            os.replace(args.json + ".tmp", args.json)
        except OSError as e:
            fail("%s: cannot be written (%s)" % (args.json, e))


if __name__ == "__main__":
    main()
