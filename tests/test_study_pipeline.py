#!/usr/bin/env python3
"""scripts/study_pipeline.sh end to end in a scratch tree, with stand-ins for the study's binary
(compare, drift: run folders with a checkpoint, as the real one leaves them) and for the analysis
binary (study: stage2.json and analysis.json; eval: a loss line), and the real scripts it calls.

Checked: an analysis binary built from a dirty tree is refused first; the steps run in the
registered order and with their registered arguments (stage 1 in seed pairs to 12, the look, stage 2
to the n the look asks for, the final analysis with the drift and the three secondaries, Four Over
Six in pairs to 12, its analysis and scripts/operand_table.py's six tables (the 4/6 choice of its
two presets; alpha and the others of all five recipes), the schedule at the L and N that
scripts/schedule_design.py gives, its three analyses and scripts/schedule_recovery.py on them);
every scheduled run is evaluated under its own 4-bit recipe by the evaluating binary pinned to
EVAL_COMMIT (.eval/build/ufp4), not by the analysis binary; an analysis of Four Over Six whose tests
are not over its 12 seeds is refused and made again by the next call; the follow-ups' runs are packed in results/fos and results/schedule (the schedule's with their evaluations, and
without the copies of the study's runs, which its own archives bring back); the decisions are kept
in results/ (stage2.json, final/, design.txt); a machine lost in the middle of the schedule loses no
pair finished and evaluated before it; and on a fresh machine (reports/, .study/ and .eval/ gone) a call
gets everything back from results/, reads the decisions back, and trains and evaluates nothing. The
scratch tree's path holds a space, and each --depth the analyses get must name a folder of runs. The
study's n is odd (13) and the schedule's N (14) exceeds it.

    test_study_pipeline.py LIBUFP4     (schedule_design.py calls ufp4_paired_n through it)"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish, this_python_first  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
LIB = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build", "libufp4.so"))
SCRIPTS = ("study_pipeline.sh", "study.sh", "study_archive.sh", "study_restore.sh", "study_followup.sh",
           "copy_runs.py", "schedule_design.py", "eval_runs.py", "schedule_recovery.py",
           "study_common.py", "operand_table.py", "pinned_build.sh")
STAGE2_N = 13  # what the stand-in's look asks for: one stage-2 seed, an odd n
SCHED_N = 14  # schedule_design.py's N for the stand-in's rows (ufp4_paired_n(0.5, 0.6)): beyond n

# The stand-in for the three binaries (study, analysis, evaluation). Its commit is given at its
# creation: the study's for the study's, so study.sh and study_followup.sh take it as the study's
# binary, and EVAL_COMMIT's for the evaluating one. Every call is logged.
STUB = r'''#!/usr/bin/env python3
import json, os, re, sys
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default
if args[0] == "version":
    print("ufp4 0.1.0 commit %(commit)s (OpenBLAS kernels: Haswell)")
    sys.exit(0)
with open(os.path.join(here, "calls.log"), "a") as f:
    f.write(" ".join(args) + "\n")
if args[0] == "compare":
    out, n = opt("--out"), int(opt("--seeds"))
    if out.startswith("reports/schedule/") and str(n) == os.environ.get("STUB_LOST_AT"):
        sys.exit("stub: the machine is lost")
    names = ["bf16", "fp32"] + [re.sub(r"[^A-Za-z0-9.-]", "_", r) for r in opt("--recipes").split(";")]
    for name in names:
        for s in range(1, n + 1):
            d = os.path.join(out, "runs", name, "seed%%d" %% s)
            rec = os.path.join(d, "run.json")
            if os.path.exists(rec) and '"finished"' in open(rec).read():
                continue
            os.makedirs(os.path.join(d, "ckpt", "step_00002000"), exist_ok=True)
            for f in ("model.safetensors", "optimizer.safetensors"):
                open(os.path.join(d, "ckpt", "step_00002000", f), "w").close()
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                f.write('{"step":2000,"loss":4.5}\n{"step":2000,"val_loss":4.6}\n')
            if name not in ("bf16", "fp32"):  # what scripts/operand_table.py reads: four_share for 4/6 only
                share = ',"four_share":0.25' if "4over6" in name else ""
                with open(os.path.join(d, "diagnostics.jsonl"), "w") as f:
                    f.write('{"step":1500,"layer":0,"proj":"q","operand":"fprop.x","alpha":0.97,"sqnr_db":18.5,'
                            '"shrink_bias":-0.01,"underflow":0.05,"clipped":0.001%%s}\n' %% share)
            with open(rec, "w") as f:
                f.write('{"commit": "%(commit)s", "state": "finished"}')
            with open(os.path.join(here, "trained.log"), "a") as f:
                f.write(d + "\n")
elif args[0] == "drift":
    out = opt("--out")
    with open(os.path.join(out, "drift.json"), "w") as f:
        f.write("{}")
    print(out + "/drift_backward.svg")
elif args[0] == "eval":
    with open(os.path.join(here, "evaluated.log"), "a") as f:
        f.write(" ".join(args) + "\n")
    print("checkpoint %%s  data x  batches 32 x 8 x 128  loss 4.612345  perplexity 100.7" %% opt("--checkpoint"))
elif args[0] == "study":
    out = opt("--out")
    os.makedirs(out, exist_ok=True)
    if "--sd-only" in args:
        with open(os.path.join(out, "stage2.json"), "w") as f:
            json.dump({"stage2": {"n_needed": %(stage2_n)d}}, f)
    else:
        n = int(opt("--seeds"))
        rows = [{"depth": d, "rel_err": {"valid": True, "n": n, "mean": 1.0, "sd": 0.6, "p": p}}
                for d, p in ((2, 0.001), (4, 0.01), (8, 0.02), (16, 0.2))]
        # the secondaries 'X vs Y' as schedule_recovery.py reads them: each seed's value 1.0 against
        # bf16 (the gap), 0.5 against anything else (the recovery), so R = 0.5
        secs = [args[i + 1].split(" vs ") for i, a in enumerate(args) if a == "--secondary"]
        sec = [{"recipe": x[0], "reference": x[-1] if len(x) > 1 else "bf16",
                "d": {"valid": True, "n": n, "p": 0.001, "holm_rejected": True}} for x in secs]
        if os.environ.get("STUB_SHORT") and os.environ["STUB_SHORT"] == out and sec:  # a seed missing
            sec[-1]["d"]["n"] = n - 1                                                # from one test
        per = [[1.0 if e["reference"] == "bf16" else 0.5] * n for e in sec]
        depth_args = [args[i + 1] for i, a in enumerate(args) if a == "--depth"]
        for d in depth_args:  # each one word L=DIR, DIR a folder of runs
            if not re.fullmatch(r"[0-9]+=.+", d) or not os.path.isdir(os.path.join(d.split("=", 1)[1], "runs")):
                sys.exit("stub: --depth %%s is not L=DIR of a folder of runs" %% d)
        depths = [int(d.split("=")[0]) for d in depth_args]
        with open(os.path.join(out, "analysis.json"), "w") as f:
            json.dump({"power": {"n": n}, "series": [{"recipe": "e2m1", "depths": rows}], "seeds": list(range(1, n + 1)),
                       "depths": depths, "secondary": sec, "per_seed": {"secondary": per}}, f)
else:
    sys.exit("stub: unknown command " + args[0])
'''


def lines(path):
    return open(path).read().splitlines() if os.path.exists(path) else []


def test_pipeline():
    with open(os.path.join(SRC, "scripts", "study.sh")) as f:
        commit = re.search(r"^STUDY_COMMIT=\$\{STUDY_COMMIT:-([0-9a-f]+)\}$", f.read(), re.M).group(1)
    # A space in the tree's path: every absolute path the scripts pass on must stay one word.
    with tempfile.TemporaryDirectory(prefix="ufp4 pipeline ") as tmp:
        os.makedirs(os.path.join(tmp, "scripts"))
        for name in SCRIPTS:
            shutil.copy(os.path.join(SRC, "scripts", name), os.path.join(tmp, "scripts", name))
        shards = os.path.join(tmp, "data", "shards", "sotu-bpe2048")
        os.makedirs(shards)
        sums = ""
        for name in ("train.tok", "val.tok"):
            with open(os.path.join(shards, name), "wb") as f:
                f.write(name.encode())
            sums += "%s  %s\n" % (hashlib.sha256(name.encode()).hexdigest(), name)
        with open(os.path.join(tmp, "scripts", "study_data.sha256"), "w") as f:
            f.write(sums)
        stub_dir = os.path.join(tmp, ".study", "build")
        os.makedirs(stub_dir)
        analysis_dir = os.path.join(tmp, "analysis-bin")
        os.makedirs(analysis_dir)
        with open(os.path.join(SRC, "scripts", "study_pipeline.sh")) as f:
            eval_commit = re.search(r"^EVAL_COMMIT=\$\{EVAL_COMMIT:-([0-9a-f]{40})\}$", f.read(), re.M).group(1)
        eval_dir = os.path.join(tmp, ".eval", "build")
        os.makedirs(eval_dir)
        for d, c in ((stub_dir, commit), (analysis_dir, commit), (eval_dir, eval_commit)):
            with open(os.path.join(d, "ufp4"), "w") as f:
                f.write(STUB % {"commit": c[:12], "stage2_n": STAGE2_N})
            os.chmod(os.path.join(d, "ufp4"), 0o755)
        analysis_bin = os.path.join(analysis_dir, "ufp4")
        env = this_python_first(dict(os.environ, STUDY_NP="1", STUDY_ANALYSIS=analysis_bin, UFP4_LIBRARY=LIB),
                                os.path.join(tmp, "python-bin"))
        for k in ("STUDY_COMMIT", "STUDY_OUT", "STUDY_DATA", "SAME_BITS_AS"):
            env.pop(k, None)

        def pipeline_env(**extra):
            p = subprocess.run(["scripts/study_pipeline.sh"], cwd=tmp, capture_output=True, text=True,
                               env=dict(env, **extra))
            return p.returncode, p.stdout + p.stderr

        def pipeline():
            return pipeline_env()

        # An analysis binary built from a dirty tree is refused before anything runs.
        dirty = os.path.join(tmp, "dirty-bin", "ufp4")
        os.makedirs(os.path.dirname(dirty))
        with open(dirty, "w") as f:
            f.write(STUB % {"commit": commit[:12] + "-dirty-0a1b2c3d", "stage2_n": STAGE2_N})
        os.chmod(dirty, 0o755)
        rc, text = pipeline_env(STUDY_ANALYSIS=dirty)
        check(rc == 2 and "uncommitted changes" in text and not os.path.exists(os.path.join(stub_dir, "calls.log")),
              "a dirty analysis binary: exit %d: %s" % (rc, text[-500:]))

        rc, text = pipeline()
        check(rc == 0, "pipeline: exit %d:\n%s" % (rc, text[-3000:]))
        calls = lines(os.path.join(stub_dir, "calls.log"))
        compares = [c for c in calls if c.startswith("compare ")]
        study = [c for c in compares if "--out reports/study/" in c]
        # study.sh 12, then study.sh 13 (each call starts at 2 and finds the finished seeds)
        got = [int(re.search(r"--seeds (\d+)", c).group(1)) for c in study if "--out reports/study/L16 " in c]
        check(got == list(range(2, 13, 2)) * 2 + [13], "study calls at L=16: --seeds %s" % got)
        drifts = [c for c in calls if c.startswith("drift ")]
        check(len(drifts) == STAGE2_N, "%d drift measurements, not %d" % (len(drifts), STAGE2_N))
        acalls = lines(os.path.join(analysis_dir, "calls.log"))
        studies = [c for c in acalls if c.startswith("study ")]
        want_final = ("study --seeds 13 --out reports/study/final --depth 2=reports/study/L2 --depth 4=reports/study/L4 "
                      "--depth 8=reports/study/L8 --depth 16=reports/study/L16 --drift reports/study/drift --secondary "
                      "nvfp4 --secondary e2m1,scale=nvfp4 --secondary e2m1,tile2d=1")
        check(len(studies) == 6 and studies[0].startswith("study --sd-only --seeds 12 --out reports/study/stage2 ")
              and studies[1] == want_final, "analysis calls: %s" % studies[:2])
        fos = [c for c in compares if "--out reports/fos/" in c]
        check([int(re.search(r"--seeds (\d+)", c).group(1)) for c in fos if "reports/fos/L2 " in c] == [2, 4, 6, 8, 10, 12]
              and len(fos) == 24, "fos calls: %d" % len(fos))
        fos_secs = ("--secondary e2m1-4over6 vs e2m1 --secondary nvfp4-4over6 vs nvfp4 "
                    "--secondary e2m1-4over6 vs ufp4 --secondary nvfp4-4over6 vs ufp4")
        check(sum(c.startswith("study --out reports/fos/analysis --seeds 12 ") and "'" not in c
                  and c.endswith(fos_secs) for c in studies) == 1, "fos analysis: %s" % studies)
        # schedule_design: L = 8 (p 0.02; L = 16 has p 0.2), N = SCHED_N
        sched = [c for c in compares if "--out reports/schedule/" in c]
        check([int(re.search(r"--seeds (\d+)", c).group(1)) for c in sched] == list(range(2, SCHED_N + 1, 2))
              and all("--out reports/schedule/L8 " in c for c in sched), "schedule calls: %s" % sched[:2])
        check(sum(c.startswith("study --out reports/schedule/") for c in studies) == 3, "schedule analyses: %s" % studies)
        evals = lines(os.path.join(eval_dir, "evaluated.log"))
        check(not os.path.exists(os.path.join(analysis_dir, "evaluated.log")), "the analysis binary evaluated")
        check(len(evals) == 3 * SCHED_N and all(re.search(r"/runs/(\w+)_0_bf16_0\.9/seed\d+/.* --recipe \1$", e)
                                           for e in evals), "evaluations: %d, %s" % (len(evals), evals[:2]))
        fos_packs = sorted(os.listdir(os.path.join(tmp, "results", "fos")))
        check(len(fos_packs) == 4 * 6, "results/fos: %s" % fos_packs)
        sched_dir = os.path.join(tmp, "results", "schedule")
        sched_packs = sorted(os.listdir(sched_dir)) if os.path.isdir(sched_dir) else []
        check(sched_packs == sorted(["L8-seeds%d-%d.tar.xz" % (a, a + 1) for a in range(1, SCHED_N, 2)] + ["design.txt"]),
              "results/schedule: %s" % sched_packs)
        # copies of the study's runs are left out (seeds 1-13); beyond the study's n (seed 14) all 8
        # are the schedule's own; each run's evaluation (eval-q/, with its copies) is packed with it
        for name, want, want_evals in (("L8-seeds1-2.tar.xz", 6, 6), ("L8-seeds13-14.tar.xz", 11, 11)):
            names = []
            if os.path.exists(os.path.join(sched_dir, name)):
                with tarfile.open(os.path.join(sched_dir, name)) as t:
                    names = t.getnames()
            runs = [n for n in names if n.startswith("L8/runs/") and n.endswith("/run.json")]
            evals = [n for n in names if n.startswith("eval-q/L8/runs/") and n.endswith("/run.json")]
            check(len(runs) == want and len(evals) == want_evals, "%s holds %d runs and %d evaluated, not %d and %d"
                  % (name, len(runs), len(evals), want, want_evals))
        # the 4/6 choice: every 4/6 run of the 12 seeds at the 4 depths; the other measures: all five
        # recipes (the copies of the study's e2m1, nvfp4 and ufp4 runs too)
        for q, runs, value in (("four_share", 2, 0.25), ("alpha", 5, 0.97), ("sqnr_db", 5, 18.5),
                               ("shrink_bias", 5, -0.01), ("underflow", 5, 0.05), ("clipped", 5, 0.001)):
            try:
                with open(os.path.join(tmp, "reports", "fos", q + ".json")) as f:
                    got = json.load(f)["runs"]
                check(len(got) == runs * 12 * 4 and all(r["operands"]["fprop.x"]["mean"] == value for r in got)
                      and os.path.getsize(os.path.join(tmp, "reports", "fos", q + ".md")) > 0,
                      "%s.json: %d runs, not %d" % (q, len(got), runs * 12 * 4))
            except (OSError, ValueError, KeyError) as e:
                check(False, "reports/fos/%s.json: %s" % (q, e))
        try:  # R from the three schedule analyses
            with open(os.path.join(tmp, "reports", "schedule", "recovery.json")) as f:
                rec = json.load(f)["recipes"]
            check(all(rec[q]["R"] == 0.5 and rec[q]["R_prime"] == 0.5 for q in ("e2m1", "ufp4", "nvfp4")),
                  "recovery.json: %s" % rec)
        except (OSError, ValueError, KeyError) as e:
            check(False, "reports/schedule/recovery.json: %s" % e)
        for kept in ("study/stage2.json", "study/final/analysis.json", "schedule/design.txt"):
            check(os.path.isfile(os.path.join(tmp, "results", kept)), "results/%s not kept" % kept)
        check(open(os.path.join(tmp, "results", "schedule", "design.txt")).read().splitlines()[-1]
              == "scripts/study_followup.sh schedule 8 %d" % SCHED_N, "the design kept")

        def fresh_machine():  # only git's files (results/) remain, and new stand-ins of the pinned binaries
            shutil.rmtree(os.path.join(tmp, "reports"))
            for d in (stub_dir, eval_dir):
                shutil.copy(os.path.join(d, "ufp4"), os.path.join(tmp, "ufp4.keep"))
                shutil.rmtree(os.path.dirname(d))
                os.makedirs(d)
                shutil.move(os.path.join(tmp, "ufp4.keep"), os.path.join(d, "ufp4"))

        # A Four Over Six analysis with a test over 11 seeds (a run not there): refused, set aside,
        # and made again by the next call.
        fos_dir = os.path.join(tmp, "reports", "fos", "analysis")
        fos_analysis = os.path.join(fos_dir, "analysis.json")
        os.remove(fos_analysis)
        rc, text = pipeline_env(STUB_SHORT="reports/fos/analysis")
        check(rc == 2 and "tests not over the 12 seeds" in text and "nvfp4-4over6 vs ufp4: n 11" in text
              and not os.path.exists(fos_dir) and os.path.exists(os.path.join(fos_dir + ".short", "analysis.json")),
              "a short analysis: exit %d: %s" % (rc, text[-600:]))
        rc, text = pipeline()
        check(rc == 0 and os.path.exists(fos_analysis), "after the short analysis: exit %d: %s" % (rc, text[-600:]))
        # The same in the schedule's block, whose condition is its last analysis (eval-q's): the
        # gaps analysis refused stops the call before it, and the next call makes all three again.
        sched_out = os.path.join(tmp, "reports", "schedule")
        shutil.rmtree(os.path.join(sched_out, "eval-q", "analysis"))
        rc, text = pipeline_env(STUB_SHORT="reports/schedule/gaps")
        check(rc == 2 and "nvfp4 vs bf16: n %d" % (SCHED_N - 1) in text
              and os.path.isdir(os.path.join(sched_out, "gaps.short"))
              and not os.path.exists(os.path.join(sched_out, "gaps"))
              and not os.path.exists(os.path.join(sched_out, "eval-q", "analysis")),
              "a short schedule analysis: exit %d: %s" % (rc, text[-600:]))
        rc, text = pipeline()
        check(rc == 0 and all(os.path.exists(os.path.join(sched_out, a, "analysis.json"))
                              for a in ("analysis", "gaps", "eval-q/analysis")),
              "after the short schedule analysis: exit %d: %s" % (rc, text[-600:]))

        # A machine lost in the middle of the schedule (its step made again from the design): the
        # pairs finished before are packed with their evaluations, and come back, not retrained.
        for f in os.listdir(sched_dir):
            if f.endswith(".tar.xz"):
                os.remove(os.path.join(sched_dir, f))
        shutil.rmtree(os.path.join(tmp, "reports", "schedule"))
        rc, text = pipeline_env(STUB_LOST_AT="6")
        check(rc != 0 and "the machine is lost" in text, "the lost machine: exit %d" % rc)
        packed = sorted(f for f in os.listdir(sched_dir) if f.endswith(".tar.xz"))
        check(packed == ["L8-seeds1-2.tar.xz", "L8-seeds3-4.tar.xz"], "packed before the loss: %s" % packed)
        fresh_machine()
        n_evals = len(lines(os.path.join(eval_dir, "evaluated.log")))
        rc, text = pipeline()
        check(rc == 0, "after the loss: exit %d\n%s" % (rc, text[-3000:]))
        redone = [t for t in lines(os.path.join(stub_dir, "trained.log")) if "/schedule/" in t and
                  re.search(r"_0_bf16_0\.9/seed[1-4]$", t)]
        check(not redone, "after the loss, finished pairs trained again: %s" % redone[:3])
        check(len(lines(os.path.join(eval_dir, "evaluated.log"))) - n_evals == 3 * (SCHED_N - 4),
              "after the loss: %d evaluations, not %d" % (len(lines(os.path.join(eval_dir, "evaluated.log"))) - n_evals,
                                                           3 * (SCHED_N - 4)))

        # And once more on a fresh machine: everything comes back; nothing is trained or evaluated.
        fresh_machine()
        n_evals = len(lines(os.path.join(eval_dir, "evaluated.log")))
        n_analyses = len([c for c in lines(os.path.join(analysis_dir, "calls.log")) if c.startswith("study ")])
        rc, text = pipeline()
        check(rc == 0, "fresh machine: exit %d\n%s" % (rc, text[-3000:]))
        again = [c for c in lines(os.path.join(analysis_dir, "calls.log")) if c.startswith("study ")][n_analyses:]
        check(not [c for c in again if "reports/study/" in c], "fresh machine: the study's decisions were recomputed: %s" % again)
        check(not lines(os.path.join(stub_dir, "trained.log")), "fresh machine: trained %s"
              % lines(os.path.join(stub_dir, "trained.log"))[:3])
        check(len(lines(os.path.join(eval_dir, "evaluated.log"))) == n_evals, "fresh machine: evaluated again")


if __name__ == "__main__":
    finish("test_study_pipeline", test_pipeline)
