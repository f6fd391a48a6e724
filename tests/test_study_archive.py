#!/usr/bin/env python3
"""scripts/study_archive.sh and scripts/study_restore.sh, run on copies of the scripts in a scratch
tree. Archive: a seed pair is packed once every run of the pair at a depth has finished, without
checkpoints, and never again; an unfinished run holds its pair back; with an odd SEEDS the last
seed is packed alone; a bad SEEDS is refused with exit 2. Restore: the folders the study folder
lacks come back byte for byte, one that exists is left as it is, and a second call unpacks
nothing. Nothing printed names a loss (the study's blinding)."""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
RECIPES = ["fp32", "bf16", "e2m1", "ufp4", "nvfp4", "e2m1_scale_nvfp4", "e2m1_tile2d_1"]


def make_run(top, depth, recipe, seed, state="finished"):
    d = os.path.join(top, "L%d" % depth, "runs", recipe, "seed%d" % seed)
    os.makedirs(os.path.join(d, "ckpt"))
    with open(os.path.join(d, "run.json"), "w") as f:
        f.write('{"commit": "x", "state": "%s", "final_loss": 3.25}' % state)
    with open(os.path.join(d, "ckpt", "step-2000.ckpt"), "w") as f:
        f.write("weights")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "scripts"))
        script = os.path.join(tmp, "scripts", "study_archive.sh")
        shutil.copy(os.path.join(SRC, "scripts", "study_archive.sh"), script)
        restore = os.path.join(tmp, "scripts", "study_restore.sh")
        shutil.copy(os.path.join(SRC, "scripts", "study_restore.sh"), restore)
        out = os.path.join(tmp, "study")
        for r in RECIPES:
            for s in (1, 2, 3):
                make_run(out, 2, r, s)
            make_run(out, 4, r, 1)
            make_run(out, 4, r, 2, "running" if r == "nvfp4" else "finished")

        def archive(*args):
            p = subprocess.run(["bash", script, out, *args], capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

        dest = os.path.join(tmp, "results", "study")
        rc, text = archive("3")
        check(rc == 0, "SEEDS 3: exit %d: %s" % (rc, text))
        got = sorted(os.listdir(dest)) if os.path.isdir(dest) else []
        check(got == ["L2-seed3.tar.xz", "L2-seeds1-2.tar.xz"],
              "SEEDS 3 packed %s, not L2-seeds1-2 and L2-seed3 (L4 has an unfinished run)" % got)
        check("3.25" not in text, "the output shows a loss: %s" % text)
        if "L2-seeds1-2.tar.xz" in got:
            with tarfile.open(os.path.join(dest, "L2-seeds1-2.tar.xz")) as t:
                names = t.getnames()
            runs = {n for n in names if n.endswith("/run.json")}
            check(len(runs) == 14, "the pair's archive holds %d runs, not 14" % len(runs))
            check(not any("ckpt" in n for n in names),
                  "a checkpoint was packed: %s" % [n for n in names if "ckpt" in n][:3])
            check(not any("seed3" in n for n in names), "seed 3 went into the pair's archive")
        if "L2-seed3.tar.xz" in got:
            with tarfile.open(os.path.join(dest, "L2-seed3.tar.xz")) as t:
                runs = {n for n in t.getnames() if n.endswith("/run.json")}
            check(len(runs) == 7 and all("/seed3/" in n for n in runs),
                  "the odd seed's archive holds %s" % sorted(runs))

        before = {f: os.path.getmtime(os.path.join(dest, f)) for f in os.listdir(dest)}
        rc, text = archive("3")
        check(rc == 0 and "0 new archive" in text, "a second call packed again: %s" % text)
        check(before == {f: os.path.getmtime(os.path.join(dest, f)) for f in os.listdir(dest)},
              "a second call rewrote an archive")

        shutil.rmtree(dest)
        rc, text = archive()  # default: pairs only, so seed 3 waits for seed 4
        got = sorted(os.listdir(dest))
        check(rc == 0 and got == ["L2-seeds1-2.tar.xz"], "no SEEDS packed %s (%s)" % (got, text))

        # An odd SEEDS below the seeds that were run is refused, before anything is packed.
        for r in RECIPES:
            make_run(out, 2, r, 4)
        shutil.rmtree(dest)
        rc, text = archive("3")
        check(rc == 2 and "seed 4" in text, "SEEDS 3 with seed 4 run: exit %d, %s" % (rc, text))
        check(not os.path.exists(dest) or not os.listdir(dest), "SEEDS 3 with seed 4 run packed %s" % (
            os.listdir(dest) if os.path.exists(dest) else []))
        rc, text = archive("04")  # a leading zero is decimal
        check(rc == 0 and sorted(os.listdir(dest)) == ["L2-seeds1-2.tar.xz", "L2-seeds3-4.tar.xz"],
              "SEEDS 04: exit %d, %s, %s" % (rc, sorted(os.listdir(dest)), text))
        shutil.rmtree(dest)
        rc, text = archive("08")  # not an invalid octal number
        check(rc == 0 and "2 new archive" in text and "error" not in text, "SEEDS 08: exit %d, %s" % (rc, text))

        for bad in ("0", "25", "x", "08x", "00"):
            rc, text = archive(bad)
            check(rc == 2 and "SEEDS" in text, "SEEDS %s: exit %d, %s" % (bad, rc, text))

        # Restore into a study folder that lost some runs and holds a different copy of another.
        def files(top):
            got = {}
            for dirpath, _, names in os.walk(top):
                for n in names:
                    path = os.path.join(dirpath, n)
                    with open(path, "rb") as fh:
                        got[os.path.relpath(path, top)] = fh.read()
            return got

        packed = {k: v for k, v in files(out).items() if "/ckpt/" not in k and k.startswith("L2/")
                  and ("/seed1/" in k or "/seed2/" in k)}
        shutil.rmtree(os.path.join(out, "L2", "runs", "e2m1", "seed1"))
        shutil.rmtree(os.path.join(out, "L2", "runs", "ufp4"))
        kept = os.path.join(out, "L2", "runs", "fp32", "seed2", "run.json")
        with open(kept, "w") as fh:
            fh.write('{"state": "running"}')

        def do_restore():
            p = subprocess.run(["bash", restore, out], capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

        rc, text = do_restore()
        check(rc == 0 and "restored 3 folder(s)" in text, "restore: exit %d, %s" % (rc, text))
        now = files(out)
        for k, v in packed.items():
            if k == "L2/runs/fp32/seed2/run.json":
                check(now.get(k) == b'{"state": "running"}', "restore overwrote a folder that exists")
            else:
                check(now.get(k) == v, "restore did not bring back %s" % k)
        check(not os.path.exists(os.path.join(out, "L2", "runs", "ufp4", "seed1", "ckpt")),
              "restore made a checkpoint folder")
        rc, text = do_restore()
        check(rc == 0 and "0 archive(s)" in text, "a second restore unpacked again: %s" % text)
        check("3.25" not in text, "restore printed a loss: %s" % text)


def make_drift(top, seed, log_complete):
    d = os.path.join(top, "drift", "seed%d" % seed)
    os.makedirs(d)
    with open(os.path.join(d, "drift.json"), "w") as f:
        f.write('{"recipes": []}')
    with open(os.path.join(d, "drift.log"), "w") as f:
        f.write("%s/drift.svg\n%s/drift_backward.svg\n" % (d, d) if log_complete else "")


def depth16_waits_for_drift():
    """An L = 16 pair is packed only once both seeds' drift has ended; a drift folder only once
    its log is complete; an odd top seed below SEEDS gets a hint."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "scripts"))
        script = os.path.join(tmp, "scripts", "study_archive.sh")
        shutil.copy(os.path.join(SRC, "scripts", "study_archive.sh"), script)
        out, dest = os.path.join(tmp, "study"), os.path.join(tmp, "results", "study")
        for r in RECIPES:
            for s in (1, 2, 3):
                make_run(out, 16, r, s)
        make_drift(out, 1, True)
        make_drift(out, 2, False)  # drift.json written, ufp4 drift still plotting

        def archive(*args):
            p = subprocess.run(["bash", script, out, *args], capture_output=True, text=True)
            return p.returncode, p.stdout + p.stderr

        rc, text = archive()
        got = sorted(os.listdir(dest))
        check(rc == 0 and got == ["drift-seed1.tar.xz"],
              "seed 2's drift unfinished: packed %s, not drift-seed1 alone (%s)" % (got, text))
        check("seed 3 has no pair" in text and "study_archive.sh %s 3" % out in text,
              "no hint for the odd top seed 3: %s" % text)
        check("seed2 has drift.json but no complete drift.log" in text,
              "no word on seed 2's unfinished drift: %s" % text)
        with open(os.path.join(out, "drift", "seed2", "drift.log"), "w") as f:
            f.write("x/drift.svg\nx/drift_backward.svg\n")
        rc, text = archive()
        got = sorted(os.listdir(dest))
        check(rc == 0 and got == ["L16-seeds1-2.tar.xz", "drift-seed1.tar.xz", "drift-seed2.tar.xz"],
              "both drifts ended: packed %s (%s)" % (got, text))
        rc, text = archive("3")  # seed 3 alone, but its drift has not run
        check(rc == 0 and "L16-seed3.tar.xz" not in os.listdir(dest) and "no pair" not in text,
              "SEEDS 3 packed seed 3 before its drift: %s (%s)" % (sorted(os.listdir(dest)), text))


def followup_with_gate():
    """A follow-up's runs (the schedule's): another archive folder, recipes and depth, no drift;
    a pair waits until its runs are evaluated (ARCHIVE_GATE, a folder inside OUT), then runs and
    evaluations are packed into one archive; restore with SRC brings both back where they were.
    A bad setting (a gate outside OUT among them) is refused with exit 2."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "scripts"))
        for name in ("study_archive.sh", "study_restore.sh"):
            shutil.copy(os.path.join(SRC, "scripts", name), os.path.join(tmp, "scripts", name))
        out, ev, dest = (os.path.join(tmp, *x) for x in (("sched",), ("sched", "eval-q"), ("results", "sched")))
        sched = ["e2m1_0_bf16_0.9", "ufp4_0_bf16_0.9"]
        for r in sched:
            for s in (1, 2):
                make_run(out, 16, r, s)
        os.makedirs(ev)
        env = dict(os.environ, ARCHIVE_DEST=dest, ARCHIVE_RECIPES=" ".join(sched), ARCHIVE_DEPTHS="16",
                   ARCHIVE_DRIFT="0", ARCHIVE_GATE=ev)

        def archive(**over):
            p = subprocess.run(["bash", os.path.join(tmp, "scripts", "study_archive.sh"), out, "2"],
                               capture_output=True, text=True, env=dict(env, **over), cwd=tmp)
            return p.returncode, p.stdout + p.stderr

        rc, text = archive()
        check(rc == 0 and not os.listdir(dest), "packed before the evaluations: %s (%s)" % (os.listdir(dest), text))
        for r in sched:
            for s in (1, 2):
                d = os.path.join(ev, "L16", "runs", r, "seed%d" % s)
                os.makedirs(d)
                with open(os.path.join(d, "eval.json"), "w") as f:
                    f.write('{"commit": "c"}')
        rc, text = archive()
        got = sorted(os.listdir(dest))
        check(rc == 0 and got == ["L16-seeds1-2.tar.xz"], "packed %s (%s)" % (got, text))
        if got:
            with tarfile.open(os.path.join(dest, "L16-seeds1-2.tar.xz")) as t:
                names = t.getnames()
            runs = sorted(n for n in names if n.endswith("/run.json"))
            evals = sorted(n for n in names if n.endswith("/eval.json"))
            check(len(runs) == 4 and all(n.startswith("L16/runs/") for n in runs), "runs packed: %s" % runs)
            check(len(evals) == 4 and all(n.startswith("eval-q/L16/runs/") for n in evals), "evaluations packed: %s" % evals)
        shutil.rmtree(out)
        p = subprocess.run(["bash", os.path.join(tmp, "scripts", "study_restore.sh"), out, dest], capture_output=True,
                           text=True, cwd=tmp)
        check(p.returncode == 0 and "restored 8 folder(s)" in p.stdout, "restore: %s" % (p.stdout + p.stderr))
        check(not [n for n in os.listdir(out) if n.startswith(".restore")], "restore left its temporary folder")
        for r in sched:
            for s in (1, 2):
                check(os.path.isfile(os.path.join(out, "L16", "runs", r, "seed%d" % s, "run.json")), "run %s %d back" % (r, s))
                check(os.path.isfile(os.path.join(ev, "L16", "runs", r, "seed%d" % s, "eval.json")), "eval %s %d back" % (r, s))
        for bad in ({"ARCHIVE_DRIFT": "2"}, {"ARCHIVE_RECIPES": ""}, {"ARCHIVE_GATE": os.path.join(tmp, "none")}):
            rc, text = archive(**bad)
            check(rc == 2 and "ARCHIVE_" in text, "%s: exit %d %s" % (bad, rc, text))


if __name__ == "__main__":
    finish("test_study_archive", main, depth16_waits_for_drift, followup_with_gate)
