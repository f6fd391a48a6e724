#!/usr/bin/env python3
"""Copies finished runs of one `ufp4 compare` folder into another, so that a second comparison
made by the same binary with the same training flags keeps them instead of training them again.

    scripts/copy_runs.py FROM TO --runs bf16,fp32,e2m1 --seeds N [--seed S]

FROM and TO are compare output folders (the REPORT of `ufp4 compare --out REPORT`); --runs names
run folders under FROM/runs (a recipe's folder name as compare writes it: `e2m1`,
`e2m1_scale_nvfp4`); the seeds are S .. S+N-1 (S defaults to 1).

- A finished run (run.json's state is "finished") that TO lacks is copied without its
  checkpoints (ckpt/): first into a temporary folder beside its place, then renamed, so TO never
  holds half a run. Each copy is recorded in TO/copied_runs.txt (time, source, destination).
- A run TO already holds is left as it is: nothing in TO is ever overwritten.
- A run FROM has not finished (or lacks) is named on stderr and not copied; the exit status is
  then 3, since the second comparison would train that run itself.
- Bad arguments or an unreadable run.json: exit 2, naming the file.

Why it is safe: `ufp4 compare` keeps a run it finds only when the run's binary (or one named by
--same-bits-as) and its configuration match its own, as for any run in its folder; any other run
is moved to TO/stale and trained again. A copy cannot slip another computation into a comparison;
at worst it is redone. docs/RESULTS.md (sections 4 and 5) reuses the depth study's runs this way.

Blinding (docs/STUDY.md section 6): it reads run.json's state only, and prints no loss.
"""
import argparse
import json
import os
import shutil
import sys
import time


def die(msg):
    print("copy_runs: " + msg, file=sys.stderr)
    sys.exit(2)


def run_state(run_dir):
    """run.json's state ("" when it has none), None when the run has no run.json."""
    path = os.path.join(run_dir, "run.json")
    try:
        with open(path) as f:
            state = json.load(f).get("state", "")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, AttributeError) as e:
        die("%s: cannot read it as a JSON object (%s)" % (path, e))
    return state


def copy_run(src, dst):
    """src to dst without ckpt/, through a temporary folder renamed into place."""
    tmp = dst + ".copying"  # a copy killed part way leaves this, removed by the next call
    if os.path.isdir(tmp) and not os.path.islink(tmp):
        shutil.rmtree(tmp)
    elif os.path.lexists(tmp):
        os.remove(tmp)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        shutil.copytree(src, tmp, ignore=lambda d, names: ["ckpt"] if d == src else [])
        os.rename(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main():
    ap = argparse.ArgumentParser(description="Copy finished compare runs into another compare folder.")
    ap.add_argument("src", metavar="FROM")
    ap.add_argument("dst", metavar="TO")
    ap.add_argument("--runs", required=True, help="comma-separated run folder names under FROM/runs")
    ap.add_argument("--seeds", type=int, required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    names = [n for n in a.runs.split(",") if n]
    if not names or any(n in (".", "..") or "/" in n for n in names):
        die("--runs must name run folders (no '/'): '%s'" % a.runs)
    if a.seeds < 1 or a.seed < 0:
        die("--seeds must be >= 1 and --seed >= 0")
    if not os.path.isdir(os.path.join(a.src, "runs")):
        die("%s: no runs/ folder (not a compare output folder)" % a.src)
    if os.path.realpath(a.src) == os.path.realpath(a.dst):
        die("FROM and TO are the same folder: %s" % a.src)

    copied = present = 0
    missing = []
    log_path = os.path.join(a.dst, "copied_runs.txt")
    for name in names:
        for seed in range(a.seed, a.seed + a.seeds):
            rel = os.path.join("runs", name, "seed%d" % seed)
            src, dst = os.path.join(a.src, rel), os.path.join(a.dst, rel)
            if os.path.lexists(dst):
                present += 1
                continue
            state = run_state(src)
            if state != "finished":
                missing.append("%s (%s)" % (src, "no run.json" if state is None else "state %s" % (state or "missing")))
                continue
            copy_run(src, dst)
            copied += 1
            # Recorded at once, so a call stopped later (an error, Ctrl-C) leaves no copy unlisted.
            with open(log_path, "a") as f:
                f.write("%s %s -> %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                           os.path.realpath(src), os.path.realpath(dst)))
    print("copy_runs: %d copied, %d already in %s, %d not finished in %s"
          % (copied, present, a.dst, len(missing), a.src))
    for m in missing:
        print("copy_runs: not copied, not finished: " + m, file=sys.stderr)
    return 3 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
