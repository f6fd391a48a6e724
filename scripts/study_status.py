#!/usr/bin/env python3
"""Where the depth study stands (docs/STUDY.md), without showing a result.

    scripts/study_status.py [OUT] [--seeds N] [--ranks R]
        OUT     the study folder (default reports/study)
        --seeds the number of seeds (default: the n of the stage-2 look, OUT/stage2/stage2.json's
                stage2.n_needed, once it exists; before it, 12, stage 1)
        --ranks processes the study runs at once (default 2, scripts/study.sh's STUDY_NP)

For each depth: the runs finished, running (with the step of their newest checkpoint, where a
resumed run goes on from) and not yet started, out of 7 recipes x N seeds; the training time left
at the speed the finished runs of that depth had (their run.json tokens_per_s, the median), in CPU
hours and in wall hours over R ranks; which seeds' drift measurements exist; and the training CPU
time the finished runs took (their steps x tokens per step / tokens_per_s; a run resumed across
sittings is timed by its record's speed), for the CPU time the report must give. The time left
counts training steps only: a run also evaluates (32 batches every 125 steps in the study, about a
tenth more), and a depth with no finished run has no speed yet, so its time is not counted (the
line says so).

Blinding (docs/STUDY.md section 6): it reads run.json's state, steps and tokens_per_s, config.json's
steps, batch and sequence length, and checkpoint folder names; never a loss, and it prints none.
"""
import argparse
import json
import os
import statistics
import sys

DEPTHS = (2, 4, 8, 16)
RECIPES = ("fp32", "bf16", "e2m1", "ufp4", "nvfp4", "e2m1_scale_nvfp4", "e2m1_tile2d_1")
STEPS, BATCH, SEQ = 2000, 8, 128  # the registered design (docs/STUDY.md section 3)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        sys.exit("study_status: %s: cannot read it as JSON (%s)" % (path, e))


def newest_checkpoint_step(run_dir):
    """Step of the newest step_NNNNNNNN checkpoint folder, 0 without one."""
    try:
        names = os.listdir(os.path.join(run_dir, "ckpt"))
    except OSError:
        return 0
    steps = [int(n[5:]) for n in names if n.startswith("step_") and n[5:].isdigit()]
    return max(steps, default=0)


def run_shape(run_dir):
    """(steps, tokens per step) from the run's config.json, or the registered design."""
    cfg = read_json(os.path.join(run_dir, "config.json")) or {}
    model = cfg.get("model", {})
    steps = cfg.get("steps", STEPS)
    return steps, cfg.get("batch", BATCH) * model.get("seq_len", SEQ)


def depth_status(out, depth, seeds):
    finished, running, waiting, speeds, left_tokens, spent_s = 0, [], 0, [], 0, 0.0
    for recipe in RECIPES:
        for seed in range(1, seeds + 1):
            d = os.path.join(out, "L%d" % depth, "runs", recipe, "seed%d" % seed)
            run = read_json(os.path.join(d, "run.json"))
            steps, per_step = run_shape(d)
            if run and run.get("state") == "finished":
                finished += 1
                if run.get("tokens_per_s"):
                    speeds.append(float(run["tokens_per_s"]))
                    spent_s += run.get("steps_done", steps) * per_step / float(run["tokens_per_s"])
                continue
            done = newest_checkpoint_step(d) if run else 0
            if run:
                running.append("%s seed %d at step %d" % (recipe, seed, done))
            else:
                waiting += 1
            left_tokens += (steps - done) * per_step
    speed = statistics.median(speeds) if speeds else None
    return finished, running, waiting, speed, left_tokens, spent_s


def look_seeds(out):
    """The n the stage-2 look asked for (OUT/stage2/stage2.json), or 12 before the look."""
    path = os.path.join(out, "stage2", "stage2.json")
    if not os.path.exists(path):
        return 12
    try:
        with open(path) as f:
            n = json.load(f)["stage2"]["n_needed"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit("study_status: %s: no stage2.n_needed (%s); give --seeds" % (path, e))
    if not isinstance(n, int) or isinstance(n, bool):
        sys.exit("study_status: %s: stage2.n_needed %r is not an integer; give --seeds" % (path, n))
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default="reports/study")
    ap.add_argument("--seeds", type=int)
    ap.add_argument("--ranks", type=int, default=2)
    a = ap.parse_args()
    if a.seeds is None:
        a.seeds = look_seeds(a.out)
    if not 1 <= a.seeds <= 24 or a.ranks < 1:
        sys.exit("study_status: --seeds must be 1..24 and --ranks at least 1")
    if not os.path.isdir(a.out):
        sys.exit("study_status: %s: no study folder (scripts/study_restore.sh brings back the packed runs)" % a.out)
    total = len(RECIPES) * a.seeds
    print("study %s: %d seeds x %d recipes = %d runs per depth" % (a.out, a.seeds, len(RECIPES), total))
    print("%-6s %9s %8s %7s %14s %10s" % ("depth", "finished", "running", "to run", "tokens/s", "CPU h left"))
    all_done, cpu_left, cpu_spent, unknown = 0, 0.0, 0.0, []
    for depth in DEPTHS:
        finished, running, waiting, speed, left_tokens, spent_s = depth_status(a.out, depth, a.seeds)
        all_done += finished
        cpu_spent += spent_s / 3600
        if left_tokens and speed is None:
            unknown.append(depth)
        hours = left_tokens / speed / 3600 if speed else 0.0
        cpu_left += hours
        print("L=%-4d %9d %8d %7d %14s %10s" % (depth, finished, len(running), waiting,
                                                "%.0f" % speed if speed else "-",
                                                "%.1f" % hours if speed or not left_tokens else "?"))
        for r in running:
            print("         running: %s" % r)
    drift = sorted(int(n[4:]) for n in os.listdir(os.path.join(a.out, "drift"))
                   if n.startswith("seed") and n[4:].isdigit()
                   and os.path.isfile(os.path.join(a.out, "drift", n, "drift.json"))) \
        if os.path.isdir(os.path.join(a.out, "drift")) else []
    print("drift measured for seeds: %s" % (", ".join(map(str, drift)) or "none"))
    print("total: %d of %d runs finished; about %.1f CPU hours of training left, %.1f hours on %d ranks"
          " (evaluation adds about a tenth%s)"
          % (all_done, total * len(DEPTHS), cpu_left, cpu_left / a.ranks, a.ranks,
             "; not counted: L=%s, no finished run to time yet" % ",".join(map(str, unknown)) if unknown else ""))
    print("spent: about %.1f CPU hours of training in the finished runs (steps x tokens per step / their"
          " tokens_per_s; evaluation not included)" % cpu_spent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
