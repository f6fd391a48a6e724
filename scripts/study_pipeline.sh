#!/usr/bin/env bash
# Every registered step of the depth study and of its two follow-ups, in order, from wherever the
# last sitting stopped: one command to start again after a machine stops.
#
#   mkdir -p reports && nohup scripts/study_pipeline.sh >> reports/pipeline.log 2>&1 &
#
# Each step is fixed in advance by docs/STUDY.md (sections 5, 6 and 9) or docs/RESULTS.md
# (sections 4 and 5); the script decides nothing that those documents leave open, and a step whose
# output exists is skipped, so calling it again goes on where it stopped:
#   1. stage 1: scripts/study.sh 12 (seeds 1-12 at every depth, and their drift measurements);
#   2. the stage-2 look (`ufp4 study --sd-only --seeds 12`, the sd alone): n = its n_needed, which
#      `ufp4 study` has already bounded to 12..24 (STUDY.md section 5);
#   3. stage 2: scripts/study.sh n, when n > 12;
#   4. the final analysis at n, with the drift measurements and the secondary recipes;
#   5. Four Over Six: scripts/study_followup.sh fos, then its registered analysis (RESULTS.md 5)
#      and, per run and operand, the 4/6 choice and the training side of the alpha, SQNR and
#      shrink-bias comparison (scripts/operand_table.py);
#   6. the final BF16 phase: L and N by scripts/schedule_design.py, scripts/study_followup.sh
#      schedule L N, its two registered analyses, the fixed-precision evaluation of the
#      scheduled runs under their own 4-bit recipe (scripts/eval_runs.py, RESULTS.md 4's
#      amendment) and the recovery analysis on it; then R, R' and the precision effect from the
#      three analyses (scripts/schedule_recovery.py).
# After each seed pair scripts/study_archive.sh packs what has finished, for git (results/study,
# results/fos, results/schedule), and each step first gets back what is packed. The decisions
# are kept beside them and read back, never recomputed on another machine: the stage-2 look
# (results/study/stage2.json), the final analysis (results/study/final/) and the schedule's L and
# N (results/schedule/design.txt). Committing them all is left to the people running it.
# Committing them, and reading and reporting the results, stay with the people running it.
#
# Blinding: no step before 4 shows a result. Stage 1 and 2 write compare's interim tables to files
# that are not read (scripts/study.sh), and the stage-2 look prints only the sd and the seeds it
# asks for. From step 4 on the log shows results: the registered n has been reached. The
# follow-ups' own interim tables go to files too (scripts/study_followup.sh).
#
# The analyses run build/ufp4, built here from the working tree (the analysis code), refused when
# that tree had uncommitted changes. The runs are all made by the study's binary
# (.study/build/ufp4, from STUDY_COMMIT) and the schedule's evaluations by one fixed binary
# (.eval/build/ufp4, from EVAL_COMMIT); each analysis.json and eval.json records its commit. A
# follow-up's analysis whose tests are not over all its registered seeds is refused.
#
# Environment: STUDY_OUT (default reports/study); STUDY_ANALYSIS (the analysis binary, default
# build/ufp4, which is then built first; tests/test_study_pipeline.py gives a stand-in);
# EVAL_COMMIT; and those of scripts/study.sh and scripts/study_followup.sh, which it calls.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${STUDY_OUT:-reports/study}
export STUDY_OUT=$out
ufp4=${STUDY_ANALYSIS:-build/ufp4}

step() { echo "== $(date -u +%FT%TZ) pipeline: $*"; }
depths() { # sets depth_args to --depth L=DIR for L = 2, 4, 8, 16 under folder $1 (any path)
  local L
  depth_args=()
  for L in 2 4 8 16; do depth_args+=(--depth "$L=$1/L$L"); done
}
json_int() { # the integer at a path of keys in a JSON file, or exit 2 naming the file
  python3 - "$@" <<'EOF'
import json, sys
path, keys = sys.argv[1], sys.argv[2:]
try:
    with open(path) as f:
        v = json.load(f)
    for k in keys:
        v = v[k]
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("not an integer")
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit("study_pipeline.sh: %s: no integer at %s (%s)" % (path, "/".join(keys), e))
print(v)
EOF
}

if [[ -z ${STUDY_ANALYSIS:-} ]]; then
  step "building the analysis binary ($ufp4)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DUFP4_SANITIZE=OFF -DUFP4_FUZZ=OFF >/dev/null
  cmake --build build -j"$(nproc)" --target ufp4 ufp4_shared >/dev/null # libufp4.so: schedule_design.py
fi
# The analysis binary must be a build of a commit: its analyses name that commit. Checked here and
# again before each analysis, since build/ may be rebuilt while a sitting runs.
analysis_clean() {
  local version
  version=$("$ufp4" version)
  if [[ $version == *dirty* ]]; then # its analyses would name a commit that holds none of its code
    echo "study_pipeline.sh: $ufp4 was built from a tree with uncommitted changes; commit first" >&2
    exit 2
  fi
  [[ ${1:-} != --say ]] || echo "$version"
}
analysis_clean --say
# Exit 2 unless every secondary test of the analysis in folder $1 is over $2 seeds, moving the
# folder aside (to $1.short) so that the next call makes it again. `ufp4 study` leaves out of a
# secondary a seed whose run of it is missing (docs/STUDY.md section 9); a follow-up's registered
# tests are those secondaries, at their registered seeds.
full_secondaries() {
  if ! python3 - "$1/analysis.json" "$2" <<'EOF2'; then
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
try:
    with open(path) as f:
        sec = json.load(f)["secondary"]
    short = ["%s vs %s: n %s" % (s["recipe"], s["reference"], s["d"]["n"]) for s in sec
             if s["d"]["n"] != n or s["d"]["valid"] is not True]
except (OSError, ValueError, KeyError, TypeError) as e:
    sys.exit("study_pipeline.sh: %s: no secondary tests (%s)" % (path, e))
if not sec or short:
    sys.exit("study_pipeline.sh: %s: tests not over the %d seeds (its folder is moved aside to .short): %s"
             % (path, n, "; ".join(short) or "none"))
EOF2
    if [[ -e $1 ]]; then
      rm -rf "$1.short"
      mv "$1" "$1.short"
    fi
    exit 2
  fi
}

# The study's binary (which study_followup.sh needs too) and the packed runs; then the decisions
# already made and kept in results/study.
step "the study's binary and packed runs"
STUDY_BUILD_ONLY=1 scripts/study.sh
if [[ ! -f $out/stage2/stage2.json && -f results/study/stage2.json ]]; then
  mkdir -p "$out/stage2"
  cp results/study/stage2.json "$out/stage2/stage2.json"
fi
if [[ ! -f $out/final/analysis.json && -f results/study/final/analysis.json ]]; then
  mkdir -p "$out/final"
  cp -R results/study/final/. "$out/final/"
fi

# 1-3. The study's runs: stage 1 (packed pair by pair by study.sh), the look, stage 2.
if [[ ! -f $out/stage2/stage2.json ]]; then
  step "stage 1"
  scripts/study.sh 12
  step "the stage-2 look (the sd of H1's statistic only)"
  depths "$out"
  analysis_clean
  "$ufp4" study --sd-only --seeds 12 --out "$out/stage2" "${depth_args[@]}"
  cp "$out/stage2/stage2.json" results/study/stage2.json
fi
n=$(json_int "$out/stage2/stage2.json" stage2 n_needed)
if ((n < 12 || n > 24)); then
  echo "study_pipeline.sh: $out/stage2/stage2.json asks for $n seeds, outside 12..24" >&2
  exit 2
fi
step "the study's n is $n"
if [[ ! -f $out/final/analysis.json ]]; then
  if ((n > 12)); then
    step "stage 2: seeds 13..$n"
    scripts/study.sh "$n"
  fi
  scripts/study_archive.sh "$out" "$n"
  # 4. The final analysis (STUDY.md section 9; the secondaries of section 4).
  step "the final analysis"
  depths "$out"
  analysis_clean
  "$ufp4" study --seeds "$n" --out "$out/final" "${depth_args[@]}" --drift "$out/drift" \
    --secondary nvfp4 --secondary 'e2m1,scale=nvfp4' --secondary 'e2m1,tile2d=1'
  rm -rf results/study/final.tmp
  cp -R "$out/final" results/study/final.tmp
  mv results/study/final.tmp results/study/final
fi

# 5. Four Over Six (RESULTS.md section 5), two seeds a call so that a sitting's finished pairs are
#    packed (results/fos) and a fresh machine gets them back.
fos_archive() {
  ARCHIVE_DEST=results/fos ARCHIVE_RECIPES="e2m1-4over6 nvfp4-4over6" ARCHIVE_DRIFT=0 \
    scripts/study_archive.sh reports/fos 12
}
if [[ ! -f reports/fos/analysis/analysis.json ]]; then
  scripts/study_restore.sh reports/fos results/fos
  for k in 2 4 6 8 10 12; do
    step "Four Over Six: seeds 1..$k"
    scripts/study_followup.sh fos "$k"
    fos_archive
  done
  step "Four Over Six: the analysis"
  depths reports/fos
  analysis_clean
  "$ufp4" study --out reports/fos/analysis --seeds 12 "${depth_args[@]}" \
    --secondary 'e2m1-4over6 vs e2m1' --secondary 'nvfp4-4over6 vs nvfp4' \
    --secondary 'e2m1-4over6 vs ufp4' --secondary 'nvfp4-4over6 vs ufp4'
  full_secondaries reports/fos/analysis 12
fi
# The diagnostics per run and operand (descriptive): the 4/6 choice, and alpha, SQNR, shrink bias,
# underflow and clipping of all five recipes in training.
for q in four_share alpha sqnr_db shrink_bias underflow clipped; do
  if [[ ! -f reports/fos/$q.json ]]; then
    step "Four Over Six: $q per run and operand"
    # A descriptive table: its failure (named by the script) does not hold up the schedule; the next call tries again.
    scripts/operand_table.py reports/fos/L{2,4,8,16} --quantity "$q" --json "reports/fos/$q.json" \
      > "reports/fos/$q.md" || echo "study_pipeline.sh: scripts/operand_table.py --quantity $q failed; going on" >&2
  fi
done

# 6. The final BF16 phase (RESULTS.md section 4, with its amendment of 2026-12-02: the scheduled
#    runs evaluated again under their own 4-bit recipe). Two seeds a call; after each, the new
#    runs are evaluated while their checkpoints exist (this machine), and a pair is packed only
#    once evaluated (ARCHIVE_GATE), evaluations included: archives hold no checkpoints.
mkdir -p results/schedule
if [[ ! -f results/schedule/design.txt ]]; then
  scripts/schedule_design.py "$out/final/analysis.json" > results/schedule/design.txt.tmp
  mv results/schedule/design.txt.tmp results/schedule/design.txt
fi
cat results/schedule/design.txt
last=$(tail -n 1 results/schedule/design.txt)
if [[ ! $last =~ ^scripts/study_followup\.sh\ schedule\ ([0-9]+)\ ([0-9]+)$ ]]; then
  echo "study_pipeline.sh: results/schedule/design.txt names no design (last line: $last)" >&2
  exit 2
fi
L=${BASH_REMATCH[1]}
N=${BASH_REMATCH[2]}
sched=reports/schedule
ev=$sched/eval-q
# The evaluating binary (RESULTS.md section 4: all evaluations from one binary, b7bd1db or later):
# built from EVAL_COMMIT into .eval/build as the study's binary is from STUDY_COMMIT, never from the
# working tree, whose HEAD moves with every commit of results, so that a sitting on a fresh machine
# evaluates with the binary of the evaluations it restores.
EVAL_COMMIT=${EVAL_COMMIT:-6c505a05b154f7b788333bd2ea656bcbfd0faf91}
evaluator=.eval/build/ufp4
# Packed: the runs trained here, the scheduled ones and, for seeds beyond the study's n, the others
# (ARCHIVE_SKIP_COPIES: a copy of a study run comes back from the study's archives).
packed="bf16 fp32 e2m1 ufp4 nvfp4 e2m1_0_bf16_0.9 ufp4_0_bf16_0.9 nvfp4_0_bf16_0.9"
recovery=(--secondary 'e2m1 vs e2m1@0,bf16@0.9' --secondary 'ufp4 vs ufp4@0,bf16@0.9'
  --secondary 'nvfp4 vs nvfp4@0,bf16@0.9')
gaps=(--secondary 'e2m1 vs bf16' --secondary 'ufp4 vs bf16' --secondary 'nvfp4 vs bf16')
# Evaluates the scheduled runs of seeds 1..$1 that have not been; exit 3 (a run not finished, or
# without a checkpoint) is an error only when $2 says every run must be there.
evaluate() {
  local q rc
  scripts/copy_runs.py "$sched/L$L" "$ev/L$L" --runs bf16,fp32,e2m1,ufp4,nvfp4 --seeds "$1" || (($? == 3 && !$2))
  for q in e2m1 ufp4 nvfp4; do
    rc=0
    scripts/eval_runs.py "$sched/L$L" "$ev/L$L" --step 2000 --seeds "$1" --runs "${q}_0_bf16_0.9" \
      --binary "$evaluator" --recipe "$q" --data "${STUDY_DATA:-data/shards/sotu-bpe2048}" || rc=$?
    ((rc == 0 || (rc == 3 && !$2))) || return "$rc"
  done
}
sched_archive() {
  ARCHIVE_DEST=results/schedule ARCHIVE_RECIPES="$packed" ARCHIVE_DEPTHS=$L ARCHIVE_DRIFT=0 ARCHIVE_SKIP_COPIES=1 \
    ARCHIVE_GATE=$ev scripts/study_archive.sh "$sched" "$N"
}
if [[ ! -f $ev/analysis/analysis.json ]]; then
  scripts/pinned_build.sh "$EVAL_COMMIT" .eval/src "$(dirname "$evaluator")"
  scripts/study_restore.sh "$sched" results/schedule
  mkdir -p "$ev" # the archive's gate, before anything is evaluated
  for ((k = 2; k <= N + 1; k += 2)); do
    ((k > N)) && k=$N
    step "the final BF16 phase: L = $L, seeds 1..$k"
    scripts/study_followup.sh schedule "$L" "$k"
    evaluate "$k" 0
    sched_archive
  done
  evaluate "$N" 1
  sched_archive
  step "the final BF16 phase: the analyses"
  analysis_clean
  # Each checked as it is made, $ev/analysis (this block's condition) last: a refused one stops
  # the call before the block's condition is met, so the next call makes all three again.
  "$ufp4" study --out "$sched/analysis" --seeds "$N" --depth "$L=$sched/L$L" "${recovery[@]}"
  full_secondaries "$sched/analysis" "$N"
  "$ufp4" study --out "$sched/gaps" --seeds "$N" --depth "$L=$sched/L$L" "${gaps[@]}"
  full_secondaries "$sched/gaps" "$N"
  "$ufp4" study --out "$ev/analysis" --seeds "$N" --depth "$L=$ev/L$L" "${recovery[@]}"
  full_secondaries "$ev/analysis" "$N"
fi
if [[ ! -f $sched/recovery.json ]]; then # R, R' and the precision effect from the three analyses
  step "the final BF16 phase: the recovered fractions"
  analysis_clean
  scripts/schedule_recovery.py --dir "$sched"
fi
step "done: $out/final, reports/fos/analysis, reports/fos/*.md, $sched/analysis, $sched/gaps, $ev/analysis, $sched/recovery.json"
