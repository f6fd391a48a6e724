#!/usr/bin/env python3
"""scripts/copy_runs.py and scripts/study_followup.sh.

copy_runs on made-up compare folders: a finished run is copied without its checkpoints, through a
temporary folder; a run the destination holds is never overwritten; an unfinished or missing run is
named and gives exit 3; bad arguments and an unreadable run.json give exit 2 naming the file; no
loss is printed. Then, with the real binary ($UFP4_CLI) on the SOTU corpus as byte-level shards: a
second compare with one more recipe keeps the copied runs ("4 done") and trains only the new one,
and the source folder is not changed by a byte.

study_followup.sh: its training flags are scripts/study.sh's, and it refuses to start before the
study's final analysis exists (the blinding) or with bad arguments; in a scratch tree whose study
binary is a stub that logs its calls, it copies the study's runs and calls compare with the study's
flags, seeds and windows, and tolerates a seed the study has not run. Both study_followup.sh and
study.sh stop with exit 2, naming the file, when the data folder's shards are not the ones
scripts/study_data.sha256 pins."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from py_checks import check, finish  # noqa: E402

SRC = os.environ.get("UFP4_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
COPY = os.path.join(SRC, "scripts", "copy_runs.py")
FOLLOWUP = os.path.join(SRC, "scripts", "study_followup.sh")
LOSS = "3.14159"


def make_run(top, recipe, seed, state="finished"):
    d = os.path.join(top, "runs", recipe, "seed%d" % seed)
    os.makedirs(os.path.join(d, "ckpt", "step_00000010"))
    with open(os.path.join(d, "run.json"), "w") as f:
        json.dump({"state": state, "final_loss": float(LOSS)}, f)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        f.write('{"step":1,"loss":%s}\n' % LOSS)
    with open(os.path.join(d, "ckpt", "step_00000010", "model.safetensors"), "w") as f:
        f.write("weights")
    return d


def copy(*args):
    p = subprocess.run([sys.executable, COPY, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def tree_hash(top):
    h = hashlib.sha256()
    for d, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(d, name)
            h.update(os.path.relpath(p, top).encode())
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def test_copy_made_up():
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "A"), os.path.join(tmp, "B")
        make_run(a, "bf16", 1)
        make_run(a, "bf16", 2)
        make_run(a, "e2m1", 1)
        make_run(a, "e2m1", 2, state="running")
        # B already holds bf16 seed 2, with its own content, which must survive.
        os.makedirs(os.path.join(b, "runs", "bf16", "seed2"))
        with open(os.path.join(b, "runs", "bf16", "seed2", "mine"), "w") as f:
            f.write("keep")
        # A copy killed part way left its temporary folder: the next call replaces it.
        os.makedirs(os.path.join(b, "runs", "bf16", "seed1.copying"))
        with open(os.path.join(b, "runs", "bf16", "seed1.copying", "junk"), "w") as f:
            f.write("x")

        rc, text = copy(a, b, "--runs", "bf16,e2m1,fp32", "--seeds", "2")
        check(rc == 3, "unfinished and missing runs: exit %d, not 3: %s" % (rc, text))
        check("2 copied, 1 already in" in text and "3 not finished" in text, "the summary line: %s" % text)
        check(os.path.join("e2m1", "seed2") in text and "state running" in text,
              "the running run is not named: %s" % text)
        check(os.path.join("fp32", "seed1") in text and "no run.json" in text, "the missing run is not named: %s" % text)
        check(LOSS not in text, "the output shows a loss: %s" % text)
        for r in ("bf16", "e2m1"):
            d = os.path.join(b, "runs", r, "seed1")
            check(os.path.isfile(os.path.join(d, "run.json")) and os.path.isfile(os.path.join(d, "metrics.jsonl")),
                  "%s seed 1 was not copied" % r)
            check(not os.path.exists(os.path.join(d, "ckpt")), "%s seed 1 was copied with its checkpoints" % r)
        check(not os.path.exists(os.path.join(b, "runs", "bf16", "seed1.copying")), "the temporary folder stayed")
        check(not os.path.exists(os.path.join(b, "runs", "e2m1", "seed2")), "the running run was copied")
        check(sorted(os.listdir(os.path.join(b, "runs", "bf16", "seed2"))) == ["mine"],
              "a run the destination held was overwritten")
        with open(os.path.join(b, "copied_runs.txt")) as f:
            log = f.read().splitlines()
        check(len(log) == 2 and all(" -> " in line for line in log), "copied_runs.txt: %s" % log)

        rc, text = copy(a, b, "--runs", "bf16,e2m1", "--seeds", "1")
        check(rc == 0 and "0 copied, 2 already in" in text, "a second call copies nothing: %d %s" % (rc, text))

        rc, text = copy(a, a, "--runs", "bf16", "--seeds", "1")
        check(rc == 2 and "same folder" in text, "FROM = TO: exit %d: %s" % (rc, text))
        rc, text = copy(a, b, "--runs", "../x", "--seeds", "1")
        check(rc == 2 and "--runs" in text, "a path in --runs: exit %d: %s" % (rc, text))
        rc, text = copy(os.path.join(tmp, "nowhere"), b, "--runs", "bf16", "--seeds", "1")
        check(rc == 2 and "nowhere" in text and "runs/" in text, "a FROM that is no compare folder: %d %s" % (rc, text))
        bad = make_run(a, "nvfp4", 1)
        with open(os.path.join(bad, "run.json"), "w") as f:
            f.write('{"state": "fini')
        make_run(a, "fp32", 1)
        b2 = os.path.join(tmp, "B2")
        rc, text = copy(a, b2, "--runs", "fp32,nvfp4", "--seeds", "1")
        check(rc == 2 and os.path.join(bad, "run.json") in text, "a damaged run.json: exit %d: %s" % (rc, text))
        # The copy made before the error is listed all the same.
        try:
            with open(os.path.join(b2, "copied_runs.txt")) as f:
                listed = f.read()
        except OSError:
            listed = ""
        check(os.path.join("fp32", "seed1") in listed, "a copy made before an error is not listed: '%s'" % listed)


def test_copy_with_compare():
    """The copies are kept by a real second compare, which trains only the new recipe."""
    cli = os.environ.get("UFP4_CLI")
    corpus = os.path.join(SRC, "data", "raw", "sotu")
    if not cli or not os.path.exists(corpus):
        print("test_copy_with_compare: skipped (needs UFP4_CLI and %s)" % corpus)
        return
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        p = subprocess.run([cli, "prepare", "--corpus", corpus, "--tokenizer", "bytes", "--out", data],
                           capture_output=True, text=True, env=env)
        check(p.returncode == 0, "prepare: %s" % p.stderr)
        flags = ["--data", data, "--seeds", "2", "--no-control", "--no-progress", "--steps", "6", "--layers", "1",
                 "--d-model", "32", "--heads", "2", "--ffn", "64", "--seq-len", "32", "--batch", "4",
                 "--eval-batches", "2", "--threads", "1"]
        a, b = os.path.join(tmp, "A"), os.path.join(tmp, "B")
        p = subprocess.run([cli, "compare", "--out", a, "--recipes", "e2m1", *flags], capture_output=True,
                           text=True, env=env)
        check(p.returncode == 0, "compare A: %s" % p.stderr)
        before = tree_hash(a)
        rc, text = copy(a, b, "--runs", "bf16,e2m1", "--seeds", "2")
        check(rc == 0 and "4 copied" in text, "copy: exit %d: %s" % (rc, text))
        p = subprocess.run([cli, "compare", "--out", b, "--recipes", "e2m1;ufp4", *flags], capture_output=True,
                           text=True, env=env)
        out = p.stdout + p.stderr
        check(p.returncode == 0, "compare B: %s" % out)
        check("4 done, 0 to resume, 2 to run" in out, "compare B did not keep the 4 copies: %s" % out)
        check(not os.path.exists(os.path.join(b, "stale")), "compare B moved copies to stale/")
        check(tree_hash(a) == before, "the source folder changed")


def test_followup_flags_and_guard():
    with open(os.path.join(SRC, "scripts", "study.sh")) as f:
        study = f.read()
    with open(FOLLOWUP) as f:
        follow = f.read()
    call = study[study.index('compare --data "$data"'):]
    call = call[:call.index(">>")]
    pairs = dict(re.findall(r"(--[a-z-]+) ([^\s\\]+)", call))
    per_call = {"--data", "--out", "--recipes", "--seed", "--seeds", "--same-bits-as", "--layers", "--final-steps"}
    study_flags = {k: v for k, v in pairs.items() if k not in per_call}
    m = re.search(r"^flags=\((.*?)\)", follow, re.S | re.M)
    check(m is not None, "study_followup.sh has no flags=(...) array")
    if m:
        follow_flags = dict(re.findall(r"(--[a-z-]+) (\S+)", m.group(1)))
        check(follow_flags == study_flags, "flags differ: study.sh %s, study_followup.sh %s" % (study_flags, follow_flags))
    check(pairs.get("--final-steps") == "400" and "window=400" in follow,
          "the 4/6 window is not the study's --final-steps 400")
    same = re.search(r"^SAME_BITS_AS=(.*)$", study, re.M).group(1)
    check(("SAME_BITS_AS=" + same) in follow, "SAME_BITS_AS differs from study.sh's (%s)" % same)

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, STUDY_OUT=os.path.join(tmp, "study"), STUDY_FINAL=os.path.join(tmp, "final"))
        for args, what in ((["fos"], "final/analysis.json: these reports"), (["schedule", "16", "12"], "final/analysis.json: these reports"),
                           (["schedule", "3", "12"], "usage"), (["schedule", "16", "1"], "N must be"),
                           (["fos", "13"], "fos N must be"), (["fos", "x"], "usage"),
                           (["nothing"], "usage"), ([], "usage")):
            p = subprocess.run(["bash", FOLLOWUP, *args], capture_output=True, text=True, env=env)
            check(p.returncode == 2 and what in p.stderr, "%s: exit %d, stderr %s" % (args, p.returncode, p.stderr))


STUB = """#!/usr/bin/env bash
# a stand-in for the study's binary: says its commit, and logs each compare call
if [[ $1 == version ]]; then echo "ufp4 0.1.0 commit %s (OpenBLAS kernels: Haswell)"; exit 0; fi
printf '%%s\\n' "$*" >> "$(dirname "$0")/calls.log"
[[ $1 == compare ]] && echo "interim report: e2m1 2.71828"
"""
REPORT = "interim report: e2m1 2.71828"  # what the stub's compare prints, as compare prints its tables


def test_followup_end_to_end():
    """study_followup.sh in a scratch tree whose study binary is a stub that logs its calls: the
    study's finished runs are copied, and compare gets the study's flags, seeds and windows."""
    with open(os.path.join(SRC, "scripts", "study.sh")) as f:
        commit = re.search(r"^STUDY_COMMIT=\$\{STUDY_COMMIT:-([0-9a-f]+)\}$", f.read(), re.M).group(1)
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "scripts"))
        for name in ("study_followup.sh", "copy_runs.py", "study.sh", "pinned_build.sh"):
            shutil.copy(os.path.join(SRC, "scripts", name), os.path.join(tmp, "scripts", name))
        binary = os.path.join(tmp, ".study", "build", "ufp4")
        os.makedirs(os.path.dirname(binary))
        with open(binary, "w") as f:
            f.write(STUB % commit[:12])
        os.chmod(binary, 0o755)
        study = os.path.join(tmp, "reports", "study")
        for depth in (2, 4, 8, 16):
            for r in ("bf16", "fp32", "e2m1", "nvfp4", "ufp4", "e2m1_tile2d_1"):
                for seed in range(1, 13):
                    make_run(os.path.join(study, "L%d" % depth), r, seed)
        os.makedirs(os.path.join(study, "final"))
        with open(os.path.join(study, "final", "analysis.json"), "w") as f:
            f.write("{}")
        env = dict(os.environ, STUDY_NP="1")
        env.pop("STUDY_COMMIT", None)
        # Shards of its own, and their checksums in place of the study's.
        shards = os.path.join(tmp, "data", "shards", "sotu-bpe2048")
        os.makedirs(shards)
        sums = []
        for name, body in (("train.tok", b"train tokens"), ("val.tok", b"val tokens")):
            with open(os.path.join(shards, name), "wb") as f:
                f.write(body)
            sums.append("%s  %s\n" % (hashlib.sha256(body).hexdigest(), name))
        with open(os.path.join(tmp, "scripts", "study_data.sha256"), "w") as f:
            f.writelines(sums)
        with open(os.path.join(shards, "val.tok"), "ab") as f:
            f.write(b"!")
        p = subprocess.run(["bash", "scripts/study_followup.sh", "fos"], cwd=tmp, capture_output=True, text=True,
                           env=env)
        check(p.returncode == 2 and "val.tok" in p.stderr and "not the study's shards" in p.stderr,
              "other shards: exit %d: %s" % (p.returncode, p.stderr))
        p = subprocess.run(["bash", "scripts/study.sh", "2"], cwd=tmp, capture_output=True, text=True, env=env)
        check(p.returncode == 2 and "val.tok" in p.stderr and "not the study's shards" in p.stderr,
              "study.sh, other shards: exit %d: %s" % (p.returncode, p.stderr))
        check(not os.path.exists(os.path.join(tmp, ".study", "build", "calls.log")), "other shards: compare ran")
        with open(os.path.join(shards, "val.tok"), "wb") as f:
            f.write(b"val tokens")
        p = subprocess.run(["bash", "scripts/study_followup.sh", "fos"], cwd=tmp, capture_output=True, text=True,
                           env=env)
        check(p.returncode == 0, "fos: exit %d: %s" % (p.returncode, p.stdout + p.stderr))
        check(LOSS not in p.stdout + p.stderr, "fos printed a loss")
        # The interim report goes to the comparison's compare.txt, never to the sitting's log.
        check(REPORT not in p.stdout + p.stderr, "fos printed compare's interim report")
        for depth in (2, 4, 8, 16):
            txt = os.path.join(tmp, "reports", "fos", "L%d" % depth, "compare.txt")
            kept = open(txt).read() if os.path.exists(txt) else ""
            check(REPORT in kept, "fos L=%d: compare's report is not in compare.txt" % depth)
        log = os.path.join(tmp, ".study", "build", "calls.log")
        calls = open(log).read().splitlines() if os.path.exists(log) else []
        check(len(calls) == 4, "fos: %d compare calls, not 4: %s" % (len(calls), calls))
        for depth, call in zip((2, 4, 8, 16), calls):
            want = ("compare --data data/shards/sotu-bpe2048 --out reports/fos/L%d --recipes "
                    "e2m1;e2m1-4over6;nvfp4;nvfp4-4over6;ufp4 --seed 1 --seeds 12 --same-bits-as "
                    "9d13365e3ac8,1689742253fe --final-steps 400 --layers %d --steps 2000 --d-model 64 --heads 4 "
                    "--ffn 192 --seq-len 128 --batch 8 --lr 2e-3 --warmup 50 --eval-every 125 --eval-batches 32"
                    % (depth, depth))
            check(call == want, "fos call at L=%d:\n %s\nnot\n %s" % (depth, call, want))
            runs = os.path.join(tmp, "reports", "fos", "L%d" % depth, "runs")
            got = sorted(os.listdir(runs)) if os.path.isdir(runs) else []
            check(got == ["bf16", "e2m1", "fp32", "nvfp4", "ufp4"], "fos L=%d copied %s" % (depth, got))
            if got:
                check(len(os.listdir(os.path.join(runs, "e2m1"))) == 12, "fos L=%d: not 12 e2m1 seeds" % depth)
        os.remove(log)
        p = subprocess.run(["bash", "scripts/study_followup.sh", "fos", "2"], cwd=tmp, capture_output=True, text=True,
                           env=env)
        calls = open(log).read().splitlines() if os.path.exists(log) else []
        check(p.returncode == 0 and len(calls) == 4 and all(" --seed 1 --seeds 2 " in c for c in calls),
              "fos 2: exit %d, calls %s" % (p.returncode, calls))
        if os.path.exists(log):
            os.remove(log)
        p = subprocess.run(["bash", "scripts/study_followup.sh", "schedule", "16", "13"], cwd=tmp,
                           capture_output=True, text=True, env=env)
        out = p.stdout + p.stderr
        check(p.returncode == 0, "schedule 16 13 (seed 13 not in the study): exit %d: %s" % (p.returncode, out))
        check("not finished" in out and "seed13" in out, "the missing seed 13 is not named: %s" % out)
        calls = open(log).read().splitlines() if os.path.exists(log) else []
        check(len(calls) == 1 and "--out reports/schedule/L16 " in calls[0] and "--seeds 13 " in calls[0]
              and "e2m1;e2m1@0,bf16@0.9;ufp4;ufp4@0,bf16@0.9;nvfp4;nvfp4@0,bf16@0.9" in calls[0]
              and "--final-steps 100 --layers 16 " in calls[0], "schedule call: %s" % calls)


if __name__ == "__main__":
    finish("test_copy_runs", test_copy_made_up, test_copy_with_compare, test_followup_flags_and_guard,
           test_followup_end_to_end)
