#!/usr/bin/env python3
"""scripts/eval_runs.py, with a stub ufp4 whose `eval` prints the loss stored in the checkpoint
(and logs each call): finished runs are evaluated from their own checkpoint or, for a copy
without one, from --ckpt-from's; the layout is a compare folder's (metrics.jsonl with the loss at
--step, the run's own run.json, eval.json with the checkpoint, recipe and the commit that the
binary's `version` names); a binary that names no commit, one built from a dirty tree, or one other
than the binary of the folder's earlier evaluations is refused (exit 2); a run already evaluated is never evaluated again; an unfinished
run or a missing checkpoint is named with exit 3; bad arguments give exit 2; no loss is printed.
Then the real `ufp4 study` ($UFP4_CLI) reads the result: its per-seed secondary values are the
relative differences of the stored losses, to the bit of the formula."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
EVAL = os.path.join(SRC, "scripts", "eval_runs.py")
STEP = 40
# the loss stored in each checkpoint: bf16 4.0 + 0.1 s, e2m1 + 0.05 s, the scheduled run + 0.02 s
LOSSES = {"bf16": lambda s: 4.0 + 0.1 * s, "e2m1": lambda s: 4.0 + 0.15 * s,
          "e2m1_0_bf16_0.9": lambda s: 4.0 + 0.12 * s, "ufp4": lambda s: 4.0 + 0.13 * s}

STUB = """#!/bin/sh
# a stand-in for ufp4 eval: the loss is the checkpoint's model.safetensors
[ "$1" = version ] && { echo "ufp4 0.1.0 commit 0123456789ab (OpenBLAS kernels: Haswell)"; exit 0; }
echo "$@" >> "$(dirname "$0")/calls.log"
[ "$1" = eval ] || exit 9
[ "$2" = --checkpoint ] || exit 9
[ -f "$3/fail" ] && { echo "cannot read $3" >&2; exit 1; }
printf 'checkpoint %s  data x  batches 32 x 8 x 16  loss %s  perplexity 1.0\\n' "$3" "$(cat "$3/model.safetensors")"
"""


def make_run(top, name, seed, state="finished", ckpt=True):
    d = os.path.join(top, "runs", name, "seed%d" % seed)
    os.makedirs(d)
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"commit": "abc123", "state": state, "steps_done": STEP, "skipped_steps": 0}, f)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        f.write('{"step":%d,"loss":7.5}\n{"step":%d,"val_loss":9.9}\n' % (STEP, STEP))
    if ckpt:
        c = os.path.join(d, "ckpt", "step_%08d" % STEP)
        os.makedirs(c)
        with open(os.path.join(c, "model.safetensors"), "w") as f:
            f.write("%.6f" % LOSSES[name](seed))
        open(os.path.join(c, "optimizer.safetensors"), "w").close()
    return d


def run(*args):
    p = subprocess.run([sys.executable, EVAL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_all():
    tmp = tempfile.mkdtemp(prefix="ufp4_eval_runs_")
    stub = os.path.join(tmp, "ufp4")
    with open(stub, "w") as f:
        f.write(STUB)
    os.chmod(stub, 0o755)
    folder, study, out = (os.path.join(tmp, x) for x in ("schedule", "study", "out"))
    for s in (1, 2, 3):
        make_run(folder, "e2m1_0_bf16_0.9", s)
        for name in ("bf16", "e2m1", "ufp4"):  # copies without checkpoints; the study has them
            make_run(folder, name, s, ckpt=False)
            make_run(study, name, s)
    make_run(folder, "e2m1_0_bf16_0.9", 4, state="running")
    names = "bf16,e2m1,ufp4,e2m1_0_bf16_0.9"
    common = [folder, out, "--runs", names, "--step", str(STEP), "--ckpt-from", study, "--binary", stub]
    rc, text = run(*common, "--seeds", "3")
    check(rc == 0, "first call: exit %d: %s" % (rc, text))
    check("4.15" not in text and "4.3" not in text, "a loss was printed: %s" % text)
    for name in names.split(","):
        for s in (1, 2, 3):
            d = os.path.join(out, "runs", name, "seed%d" % s)
            with open(os.path.join(d, "metrics.jsonl")) as f:
                lines = [json.loads(x) for x in f.read().splitlines()]
            want = [{"step": STEP, "loss": 7.5}, {"step": STEP, "val_loss": round(LOSSES[name](s), 6)}]
            check(lines == want, "%s seed %d: %s" % (name, s, lines))
            with open(os.path.join(d, "run.json")) as f:
                check(json.load(f)["commit"] == "abc123", "run.json is not the run's own")
            with open(os.path.join(d, "eval.json")) as f:
                how = json.load(f)
            top = folder if name == "e2m1_0_bf16_0.9" else study
            want_how = {"checkpoint": os.path.join(top, "runs", name, "seed%d" % s, "ckpt", "step_%08d" % STEP),
                        "recipe": "bf16", "batches": 32, "batch": 8, "data": "data/shards/sotu-bpe2048",
                        "binary": stub, "commit": "0123456789ab"}
            check(how == want_how, "%s seed %d: eval.json %s" % (name, s, how))
    with open(os.path.join(tmp, "calls.log")) as f:
        calls = f.read().splitlines()
    check(len(calls) == 12, "12 evaluations, not %d" % len(calls))
    check(all("--recipe bf16" in c and "--batches 32 --batch 8" in c for c in calls), "eval flags: %s" % calls[0])
    check(any(os.path.join(study, "runs", "bf16", "seed1") in c for c in calls), "the copy's checkpoint not taken from --ckpt-from")
    check(any(os.path.join(folder, "runs", "e2m1_0_bf16_0.9", "seed1") in c for c in calls), "a run's own checkpoint not used")
    with open(os.path.join(out, "evaluated_runs.txt")) as f:
        logged = f.read().splitlines()
    check(len(logged) == 12 and all(x.endswith(" (commit 0123456789ab)") for x in logged),
          "evaluated_runs.txt lists 12, each with the commit: %s" % logged[:1])
    # a second call evaluates nothing again; seed 4 is running: named, exit 3
    rc, text = run(*common, "--seeds", "4")
    check(rc == 3 and "runs/e2m1_0_bf16_0.9/seed4 (running)" in text, "seed 4: exit %d: %s" % (rc, text))
    check("runs/bf16/seed4 (no run.json)" in text, "a missing run is named: %s" % text)
    with open(os.path.join(tmp, "calls.log")) as f:
        check(len(f.read().splitlines()) == 12, "a run was evaluated twice")
    # a finished run with no checkpoint anywhere
    make_run(folder, "e2m1", 5, ckpt=False)
    rc, text = run(folder, out, "--runs", "e2m1", "--step", str(STEP), "--binary", stub, "--seeds", "5")
    check(rc == 3 and "runs/e2m1/seed5 (no checkpoint step_00000040)" in text, "no checkpoint: %d %s" % (rc, text))
    # a failing evaluation: exit 1, and no folder for that run; the runs before it are done
    for s in (6, 7):
        make_run(folder, "e2m1", s)
    with open(os.path.join(folder, "runs", "e2m1", "seed7", "ckpt", "step_%08d" % STEP, "fail"), "w"):
        pass
    rc, text = run(folder, out, "--runs", "e2m1", "--step", str(STEP), "--binary", stub, "--seeds", "7")
    check(rc == 1 and "cannot read" in text, "failing eval: %d %s" % (rc, text))
    check(os.path.isdir(os.path.join(out, "runs", "e2m1", "seed6")), "seed 6, before the failure, is done")
    check(not os.path.exists(os.path.join(out, "runs", "e2m1", "seed7")), "a failed evaluation left a folder")
    # an unreadable run.json: exit 2 naming it (seed 7 now evaluates)
    os.remove(os.path.join(folder, "runs", "e2m1", "seed7", "ckpt", "step_%08d" % STEP, "fail"))
    make_run(folder, "e2m1", 8)
    with open(os.path.join(folder, "runs", "e2m1", "seed8", "run.json"), "w") as f:
        f.write("{not json")
    rc, text = run(folder, out, "--runs", "e2m1", "--step", str(STEP), "--binary", stub, "--seeds", "8")
    check(rc == 2 and "seed8/run.json: cannot be read" in text, "bad run.json: %d %s" % (rc, text))
    # a binary whose `version` names no commit: refused before any evaluation
    nocommit = os.path.join(tmp, "ufp4-nocommit")
    with open(nocommit, "w") as f:
        f.write("#!/bin/sh\necho 'ufp4 0.1.0'\n")
    os.chmod(nocommit, 0o755)
    make_run(folder, "e2m1", 9)
    rc, text = run(folder, out, "--runs", "e2m1", "--step", str(STEP), "--binary", nocommit, "--seeds", "9")
    check(rc == 2 and "names no commit" in text, "no commit: %d %s" % (rc, text))
    check(not os.path.exists(os.path.join(out, "runs", "e2m1", "seed9")), "evaluated by a binary without a commit")
    # a build of a dirty tree is refused; so is another binary on a folder holding evaluations
    for name, version, why in (("ufp4-dirty", "0123456789ab-dirty-fed833f3", "uncommitted changes"),
                               ("ufp4-other", "fedcba987654", "one folder, one binary")):
        other = os.path.join(tmp, name)
        with open(other, "w") as f:
            f.write(STUB.replace("commit 0123456789ab", "commit " + version))
        os.chmod(other, 0o755)
        rc, text = run(folder, out, "--runs", "e2m1", "--step", str(STEP), "--binary", other, "--seeds", "9")
        check(rc == 2 and why in text, "%s: %d %s" % (name, rc, text))
        check(not os.path.exists(os.path.join(out, "runs", "e2m1", "seed9")), "%s evaluated" % name)
    # bad arguments
    for bad in ([folder, out, "--runs", "../x", "--seeds", "1", "--step", "1", "--binary", stub],
                [folder, out, "--runs", "e2m1", "--seeds", "0", "--step", "1", "--binary", stub],
                [tmp + "/nowhere", out, "--runs", "e2m1", "--seeds", "1", "--step", "1", "--binary", stub],
                [folder, out, "--runs", "e2m1", "--seeds", "1", "--step", "1", "--binary", tmp + "/none"],
                [folder, out, "--seeds", "1"]):
        rc, text = run(*bad)
        check(rc == 2, "bad arguments %s: exit %d %s" % (bad[2:], rc, text))
    # ufp4 study reads the layout: its per-seed secondary values are 100 (L_e2m1 - L_sched) / L_bf16
    cli = os.environ.get("UFP4_CLI")
    if cli and os.access(cli, os.X_OK):
        p = subprocess.run([cli, "study", "--out", os.path.join(tmp, "an"), "--depth", "16=" + out, "--seeds", "3",
                            "--control", "none", "--secondary", "e2m1 vs e2m1@0,bf16@0.9"], capture_output=True, text=True)
        check(p.returncode == 0, "ufp4 study: %s" % (p.stdout + p.stderr))
        if p.returncode == 0:
            with open(os.path.join(tmp, "an", "analysis.json")) as f:
                got = json.load(f)["per_seed"]["secondary"][0]
            want = [100 * (round(LOSSES["e2m1"](s), 6) - round(LOSSES["e2m1_0_bf16_0.9"](s), 6)) / round(LOSSES["bf16"](s), 6)
                    for s in (1, 2, 3)]
            check(all(abs(g - w) < 1e-9 for g, w in zip(got, want)), "per-seed values %s, not %s" % (got, want))
    else:
        print("UFP4_CLI not set: the ufp4 study part is skipped")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    finish("test_eval_runs", test_all)
