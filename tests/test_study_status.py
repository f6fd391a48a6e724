#!/usr/bin/env python3
"""scripts/study_status.py on a made-up study folder: the counts per depth, a running run's
checkpoint step, the training time left at the finished runs' median speed (checked against the
arithmetic done here), a depth with no speed yet marked as not counted, the drift seeds, and no
loss printed anywhere (the study's blinding); without --seeds, 12 before the stage-2 look and its n
after. Bad arguments, a broken stage2.json and a missing folder are refused."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(SRC, "scripts", "study_status.py")
RECIPES = ["fp32", "bf16", "e2m1", "ufp4", "nvfp4", "e2m1_scale_nvfp4", "e2m1_tile2d_1"]


def make_run(top, depth, recipe, seed, state, tokens_per_s=None, ckpt=None, steps=2000):
    d = os.path.join(top, "L%d" % depth, "runs", recipe, "seed%d" % seed)
    os.makedirs(d)
    run = {"commit": "x", "state": state, "steps_done": steps if state == "finished" else 0,
           "final_loss": 9.87654321, "final_val_loss": 8.7654321}
    if tokens_per_s:
        run["tokens_per_s"] = tokens_per_s
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump(run, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model": {"seq_len": 128}, "batch": 8, "steps": steps}, f)
    if ckpt:
        os.makedirs(os.path.join(d, "ckpt", "step_%08d" % ckpt))


def status(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "study")
        # L=2, 2 seeds: 13 finished at 100, 200 or 300 tokens/s (median 200, mean 192), one running.
        speeds = [100, 200, 300]
        i = 0
        for r in RECIPES:
            for s in (1, 2):
                if r == "ufp4" and s == 2:
                    make_run(out, 2, r, s, "running", ckpt=800)
                else:
                    make_run(out, 2, r, s, "finished", tokens_per_s=speeds[i % 3])
                    i += 1
        make_run(out, 4, "bf16", 1, "running", ckpt=0)  # L=4: no speed yet
        os.makedirs(os.path.join(out, "drift", "seed1"))
        with open(os.path.join(out, "drift", "seed1", "drift.json"), "w") as f:
            f.write("{}")
        os.makedirs(os.path.join(out, "drift", "seed2"))  # no drift.json: not measured

        rc, text = status(out, "--seeds", "2", "--ranks", "2")
        check(rc == 0, "exit %d: %s" % (rc, text))
        lines = {l.split()[0]: l.split() for l in text.splitlines() if l.startswith("L=")}
        # L=2: 13 finished, 1 running, 0 to run; left = 1200 steps x 1024 tokens / 200 tokens/s.
        want_h = 1200 * 1024 / 200 / 3600
        check(lines.get("L=2", [])[1:5] == ["13", "1", "0", "200"], "L=2 row: %s" % lines.get("L=2"))
        check(lines.get("L=2", [None] * 6)[5] == "%.1f" % want_h, "L=2 hours: %s, want %.1f" % (lines.get("L=2"), want_h))
        check("ufp4 seed 2 at step 800" in text, "the running run's step is not shown:\n" + text)
        check(lines.get("L=4", [])[1:6] == ["0", "1", "13", "-", "?"], "L=4 row: %s" % lines.get("L=4"))
        check(lines.get("L=8", [])[1:6] == ["0", "0", "14", "-", "?"], "L=8 row: %s" % lines.get("L=8"))
        check("not counted: L=4,8,16" in text, "the depths without a speed are not named:\n" + text)
        check("drift measured for seeds: 1\n" in text, "drift seeds wrong:\n" + text)
        check("13 of 56 runs finished" in text, "total wrong:\n" + text)
        check("%.1f hours on 2 ranks" % (want_h / 2) in text, "wall hours wrong:\n" + text)
        # Spent: 13 finished runs of 2000 x 1024 tokens, 5 at 100, 4 at 200 and 4 at 300 tokens/s.
        spent_h = 2000 * 1024 * (5 / 100 + 4 / 200 + 4 / 300) / 3600
        check("about %.1f CPU hours of training in the finished runs" % spent_h in text,
              "CPU hours spent wrong (want %.1f):\n%s" % (spent_h, text))
        for loss in ("9.87", "8.76"):
            check(loss not in text, "a loss is printed:\n" + text)

        for bad in (["--seeds", "0"], ["--seeds", "25"], ["--ranks", "0"]):
            rc, text = status(out, *bad)
            check(rc != 0 and "study_status" in text, "%s accepted: %s" % (bad, text))
        # Without --seeds: 12 before the stage-2 look, then the look's n; a broken look is named.
        rc, text = status(out)
        check(rc == 0 and "12 seeds x 7 recipes" in text, "default before the look: %d %s" % (rc, text))
        os.makedirs(os.path.join(out, "stage2"))
        look = os.path.join(out, "stage2", "stage2.json")
        with open(look, "w") as f:
            json.dump({"stage2": {"n_needed": 2, "sd_pp": 0.1}}, f)
        rc, text = status(out)
        check(rc == 0 and "2 seeds x 7 recipes" in text and "13 of 56 runs" in text,
              "default after the look: %d %s" % (rc, text))
        for broken in ('{"stage2": {"n_needed": 2.5}}', '{"stage2": {}}', "{"):
            with open(look, "w") as f:
                f.write(broken)
            rc, text = status(out)
            check(rc != 0 and look in text, "stage2.json %s: %d %s" % (broken, rc, text))
        rc, text = status(os.path.join(tmp, "nowhere"))
        check(rc != 0 and "no study folder" in text, "a missing folder: %d %s" % (rc, text))


if __name__ == "__main__":
    finish("test_study_status", main)
