#!/usr/bin/env python3
"""Evaluates finished runs again from their final checkpoints under one fixed recipe, and writes
the losses in a compare folder's layout, so that `ufp4 study` makes its paired tests on them.

    scripts/eval_runs.py FOLDER OUT --runs NAME,NAME,... --seeds N --step S
                         [--ckpt-from DIR] [--recipe bf16] [--binary B] [--data D]
                         [--batches 32] [--batch 8]

For each run FOLDER/runs/NAME/seed<s> (NAME the folder name compare gives a recipe entry, s in
1..N) whose run.json says finished, the checkpoint ckpt/step_<S> (8 digits) of that run, or of
DIR/runs/NAME/seed<s> when the run has none (the copies that scripts/copy_runs.py makes leave
checkpoints out), is evaluated with

    B eval --checkpoint CKPT --data D --batches 32 --batch 8 --recipe RECIPE

and OUT/runs/NAME/seed<s> gets metrics.jsonl (the run's own training lines, then one evaluation
line {"step": S, "val_loss": LOSS}: the run's own evaluations are left out), the run's own
run.json (the binary that trained it), and eval.json (what evaluated it: the checkpoint, recipe,
batches, data, and the commit that `B version` names; a "-dirty" build is refused, and OUT's
evaluations must all be one binary's), written through a temporary folder and
renamed, so a folder that exists is complete. Such a folder is never evaluated again or overwritten: a
second call goes on where the first stopped. Each evaluation is logged, with its command and commit, in
OUT/evaluated_runs.txt as it ends. No loss is printed (a blinded comparison stays blinded).

This is the fixed-precision evaluation of docs/RESULTS.md section 4: a run's own validation loss
is computed under the recipe active at its last step, so a run that switched to bf16 is
evaluated in bf16 and a 4-bit run in 4-bit; evaluating every final checkpoint under one recipe
separates what the training did from the precision of the evaluation.

Exit 0 when every asked run was evaluated (now or before), 3 when some run is not finished or
has no checkpoint (named; the others are done), 2 on bad arguments or a file that cannot be read,
1 when an evaluation fails."""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

COMMIT_RE = re.compile(r"\bcommit (\S+)")  # `ufp4 version`: "ufp4 X.Y.Z commit NAME (...)", NAME as git describes
LOSS_RE = re.compile(r"  loss (\S+)  perplexity")  # `ufp4 eval`'s line: "...  loss %.9g  perplexity %.4f"


def fail(msg, code=2):
    print("eval_runs: " + msg, file=sys.stderr)
    sys.exit(code)


def read_state(run):
    path = os.path.join(run, "run.json")
    if not os.path.exists(path):
        return None, None
    try:
        with open(path) as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: cannot be read as a run record (%s)" % (path, e))
    if not isinstance(rec, dict):
        fail("%s: not a run record (a JSON object)" % path)
    return rec.get("state"), path


def checkpoint(run, alt, step):
    name = "step_%08d" % step
    for top in (run, alt):  # complete: the trainer writes optimizer.safetensors last
        d = os.path.join(top, "ckpt", name) if top else None
        if d and all(os.path.isfile(os.path.join(d, f)) for f in ("model.safetensors", "optimizer.safetensors")):
            return d
    return None


def binary_commit(binary):
    """The commit `binary version` names: recorded beside every loss it computes. A build of a
    tree with uncommitted changes ("-dirty" in the name) is refused: its code is nowhere."""
    try:
        p = subprocess.run([binary, "version"], capture_output=True, text=True)
    except OSError as e:
        fail("%s: cannot be run (%s)" % (binary, e))
    m = COMMIT_RE.search(p.stdout) if p.returncode == 0 else None
    if not m:
        fail("%s: `version` names no commit (exit %d: %s)" % (binary, p.returncode, (p.stdout + p.stderr).strip()))
    if "dirty" in m.group(1):
        fail("%s: built from a tree with uncommitted changes (%s); commit, rebuild, then evaluate" % (binary, m.group(1)))
    return m.group(1)


def folder_commit(out):
    """The commit of the evaluations OUT already holds (None when none): one folder, one binary."""
    seen = set()
    runs = os.path.join(out, "runs")
    for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        for seed in sorted(os.listdir(os.path.join(runs, name))):
            path = os.path.join(runs, name, seed, "eval.json")
            if not os.path.exists(path):
                continue  # a copied run, evaluated by its own training
            try:
                with open(path) as f:
                    seen.add(json.load(f)["commit"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                fail("%s: cannot be read as an evaluation record (%s)" % (path, e))
    if len(seen) > 1:
        fail("%s holds evaluations by %d binaries (%s)" % (out, len(seen), ", ".join(sorted(seen))))
    return seen.pop() if seen else None


def evaluate(args, ckpt):
    cmd = [args.binary, "eval", "--checkpoint", ckpt, "--data", args.data, "--batches", str(args.batches),
           "--batch", str(args.batch), "--recipe", args.recipe]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        fail("%s failed (exit %d): %s" % (" ".join(cmd), p.returncode, (p.stderr or p.stdout).strip()), 1)
    m = LOSS_RE.search(p.stdout)
    if not m:
        fail("%s printed no loss: %s" % (" ".join(cmd), p.stdout.strip()), 1)
    try:
        loss = float(m.group(1))
    except ValueError:
        loss = float("nan")
    if not math.isfinite(loss):
        fail("%s: the loss is %s" % (ckpt, m.group(1)), 1)
    return loss, cmd


def train_lines(run):
    """The training lines of the run's metrics.jsonl (no evaluation, no event)."""
    path = os.path.join(run, "metrics.jsonl")
    out = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                try:
                    rec = json.loads(line)
                except ValueError:
                    fail("%s:%d: not JSON" % (path, i))
                if isinstance(rec, dict) and "loss" in rec and "val_loss" not in rec and "event" not in rec:
                    out.append(line if line.endswith("\n") else line + "\n")
    except OSError as e:
        fail("%s: cannot be read (%s)" % (path, e))
    return out


def write_run(dest, step, loss, record, lines, how):
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".partial-", dir=parent)
    with open(os.path.join(tmp, "metrics.jsonl"), "w") as f:
        f.writelines(lines)
        f.write(json.dumps({"step": step, "val_loss": loss}) + "\n")
    shutil.copyfile(record, os.path.join(tmp, "run.json"))
    with open(os.path.join(tmp, "eval.json"), "w") as f:
        json.dump(how, f, indent=1)
        f.write("\n")
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
    os.rename(tmp, dest)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("out")
    ap.add_argument("--runs", required=True, help="run folder names, comma-separated")
    ap.add_argument("--seeds", type=int, required=True)
    ap.add_argument("--step", type=int, required=True, help="the final checkpoint's step")
    ap.add_argument("--ckpt-from", default=None)
    ap.add_argument("--recipe", default="bf16")
    ap.add_argument("--binary", default="build/ufp4")
    ap.add_argument("--data", default="data/shards/sotu-bpe2048")
    ap.add_argument("--batches", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(2 if e.code else 0)
    names = [n for n in args.runs.split(",") if n]
    if not names or any("/" in n or n.startswith(".") for n in names):
        fail("--runs: folder names, comma-separated, not '%s'" % args.runs)
    if args.seeds < 1 or args.step < 1 or args.batches < 1 or args.batch < 1:
        fail("--seeds, --step, --batches and --batch must be positive")
    if not os.path.isdir(os.path.join(args.folder, "runs")):
        fail("%s: no runs/ folder (not a compare folder)" % args.folder)
    if not os.access(args.binary, os.X_OK):
        fail("%s: not an executable ufp4" % args.binary)
    commit = binary_commit(args.binary)
    earlier = folder_commit(args.out)
    if earlier and earlier != commit:
        fail("%s holds evaluations by %s; %s is %s: one folder, one binary" % (args.out, earlier, args.binary, commit))
    log_path = os.path.join(args.out, "evaluated_runs.txt")
    os.makedirs(args.out, exist_ok=True)
    missing = []
    for name in names:
        for seed in range(1, args.seeds + 1):
            rel = os.path.join("runs", name, "seed%d" % seed)
            dest = os.path.join(args.out, rel)
            if os.path.isdir(dest):
                continue  # evaluated by an earlier call: never again
            run = os.path.join(args.folder, rel)
            state, record = read_state(run)
            if state != "finished":
                missing.append("%s (%s)" % (rel, "no run.json" if state is None else state))
                continue
            alt = os.path.join(args.ckpt_from, rel) if args.ckpt_from else None
            ckpt = checkpoint(run, alt, args.step)
            if not ckpt:
                missing.append("%s (no checkpoint step_%08d%s)" % (rel, args.step, " here or in " + alt if alt else ""))
                continue
            lines = train_lines(run)
            loss, cmd = evaluate(args, ckpt)
            how = {"checkpoint": ckpt, "recipe": args.recipe, "batches": args.batches, "batch": args.batch,
                   "data": args.data, "binary": args.binary, "commit": commit}
            write_run(dest, args.step, loss, record, lines, how)
            with open(log_path, "a") as f:
                f.write("%s <- %s (commit %s)\n" % (rel, " ".join(cmd), commit))
            print("evaluated %s" % rel)
    if missing:
        print("not evaluated: " + "; ".join(missing), file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    try:
        main()
    except OSError as e:  # a folder that cannot be made or written
        fail(str(e))
