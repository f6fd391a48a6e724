#!/usr/bin/env python3
"""scripts/same_bits.py: equal runs (timings aside) are "same", a changed bit anywhere is
"DIFFERENT" with exit 1, a run missing from the reference is exit 2, and no output line shows a
loss value (the study's blinding)."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(SRC, "scripts", "same_bits.py")


def make_run(top, run, loss=3.14159265, ms=12.5, diag_alpha=0.5, final=3.2718281828):
    d = os.path.join(top, run)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"seed": 1}')
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for s in range(1, 4):
            f.write('{"step":%d,"loss":%.9g,"lr":0.002,"grad_norm":1.5,"tokens_per_s":%g,"ms_per_step":%g}\n'
                    % (s, loss + s, 1000.0 / ms, ms * s))
        f.write('{"step":3,"val_loss":%.9g,"val_ppl":20.1}\n' % (loss + 0.5))
    with open(os.path.join(d, "diagnostics.jsonl"), "w") as f:
        f.write('{"step":3,"layer":0,"alpha":%r}\n' % diag_alpha)
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"commit": "x", "state": "finished", "steps_done": 3, "final_loss": final,
                   "final_val_loss": final + 0.1, "tokens_per_s": 1000.0 / ms, "skipped_steps": 0}, f)


def run(ref, new, *runs):
    p = subprocess.run([sys.executable, SCRIPT, ref, new, *runs], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as t:
        ref, new = os.path.join(t, "ref"), os.path.join(t, "new")
        for r in ("runs/e2m1/seed1", "runs/bf16/seed1"):
            make_run(ref, r)
            make_run(new, r, ms=99.0)  # other timings only
        rc, out = run(ref, new)
        check(rc == 0 and "2 of 2 runs the same" in out, f"equal runs: rc {rc}\n{out}")

        for name, kw in (("metrics.jsonl", {"loss": 3.14159266}), ("diagnostics.jsonl", {"diag_alpha": 0.50000001}),
                         ("run.json", {"final": 3.2718281829})):
            bad = os.path.join(t, "bad_" + name)
            make_run(bad, "runs/e2m1/seed1", **kw)
            rc, out = run(ref, bad)
            check(rc == 1 and f"DIFFERENT ({name})" in out, f"a change in {name}: rc {rc}\n{out}")
            check("3.14" not in out and "3.27" not in out, f"a value was printed:\n{out}")

        rc, out = run(ref, new, "runs/ufp4/seed1")
        check(rc == 2, f"a run missing from the reference: rc {rc}\n{out}")
        p = subprocess.run([sys.executable, SCRIPT, ref], capture_output=True, text=True)
        check(p.returncode == 2, f"usage: rc {p.returncode}")

    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
