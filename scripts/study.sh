#!/usr/bin/env bash
# The registered depth study (docs/STUDY.md, sections 3 and 5), run in sittings.
#
#   scripts/study.sh [SEEDS]        stage 1: SEEDS = 12 (default); stage 2 passes the final n
#
# Every run of the study is made by one binary: the one built from STUDY_COMMIT (below, fixed when
# the study started) in its own clean worktree (.study/src) and build folder (.study/build). A
# fresh machine rebuilds it from the same commit. `ufp4 compare` records the commit in every run
# folder, keeps finished runs, resumes an interrupted run from its newest checkpoint, and moves a
# run made by another binary aside (OUT/stale/) and redoes it.
#
# Order: seeds two at a time, each pair at every depth (L = 2, 4, 8, 16), so that a study stopped
# at any point has whole seeds done at every depth. Each call is `compare --seed 1 --seeds n`: the
# runs of seeds 1 .. n-2 are found finished and skipped. With MPI (STUDY_NP ranks, default 2, one
# thread each) compare shares the 14 runs of a seed pair over the ranks.
#
# The binary's name is `git describe --always` of its commit, a bare hash while no tag sits on the
# commit's ancestry: tagging one would rename the binary and send finished runs to OUT/stale/.
#
# Blinding: compare ends every call with a report (relative errors, pairwise tests). Section 6 of
# docs/STUDY.md runs no test before the final n, so those interim tables go to OUT/L<L>.interim.txt,
# not to the terminal, and are not read; progress (stderr) still shows.
#
# H3 (docs/STUDY.md section 4): once a seed's L = 16 bf16 run is finished, `ufp4 drift --mode both
# --batches 32` measures e2m1 and ufp4 at its final weights into OUT/drift/seed<N>/ (drift.json for
# `ufp4 study --drift`). Its printed table is a primary result too, so it goes to a log there.
# (From 2026-12-02 a measurement is redone until its log is complete, as scripts/study_archive.sh
# requires before it packs the seed; changed by replacing the file, never editing it in place,
# since a running bash reads its script as it goes.)
#
# A machine without the study folder (a fresh clone) first gets the packed runs of results/study/
# back (scripts/study_restore.sh): compare then finds them finished and goes on from there.
#
# After each depth and each pair's drift, scripts/study_archive.sh OUT SEEDS packs what has
# finished (STUDY_ARCHIVE=0: not). STUDY_BUILD_ONLY=1 builds the binary, restores the packed runs and stops.
#
# Environment: STUDY_NP (ranks; 1 = no mpirun, OpenMP threads instead), STUDY_OUT (default
# reports/study), STUDY_DATA (default data/shards/sotu-bpe2048, which `make run` prepares),
# STUDY_COMMIT (the study's binary; below), SAME_BITS_AS (below; set and empty: no
# --same-bits-as).
set -euo pipefail
cd "$(dirname "$0")/.."

# Amendments 1 and 2 (docs/STUDY.md, section 10): the first runs were made by 9d13365, then by
# 1689742, and from 2026-12-01 21:12 UTC by e218835; each later binary computes the same bits as
# the earlier ones (scripts/same_bits.py on a full rerun of L = 2, seed 1; results/study/), so
# compare keeps and resumes their runs as its own (--same-bits-as), and a run one of them resumed
# records both ("9d13365e3ac8+e218835c8649").
STUDY_COMMIT=${STUDY_COMMIT:-e218835c864984aa5cfd9cf006bf706578f6ff07}
SAME_BITS_AS=${SAME_BITS_AS-9d13365e3ac8,1689742253fe}
seeds=${1:-12}
np=${STUDY_NP:-2}
out=${STUDY_OUT:-reports/study}
data=${STUDY_DATA:-data/shards/sotu-bpe2048}
src=.study/src
bin=.study/build/ufp4

if [[ ! "$seeds" =~ ^[0-9]+$ ]] || ((10#$seeds < 1 || 10#$seeds > 24)); then
  echo "study.sh: SEEDS must be 1..24 (docs/STUDY.md caps stage 2 at 24), not '$seeds'" >&2
  exit 2
fi
seeds=$((10#$seeds)) # "08" is 8, not an octal error
if [[ ! -f "$data/train.tok" ]]; then
  echo "study.sh: no token shards at $data (run 'make run' once, or set STUDY_DATA)" >&2
  exit 2
fi
# The shards every run of the study was trained on (docs/STUDY.md section 11): a machine that
# prepares other tokens (another corpus download, a changed tokenizer) stops here, before a run.
if ! (cd "$data" && sha256sum --quiet --strict -c "$OLDPWD/scripts/study_data.sha256") >&2; then
  echo "study.sh: $data/{train,val}.tok are not the study's shards (scripts/study_data.sha256)" >&2
  exit 2
fi

# The study binary: built once per machine from STUDY_COMMIT, never from the working tree.
scripts/pinned_build.sh "$STUDY_COMMIT" "$src" "$(dirname "$bin")"
scripts/study_restore.sh "$out"
if [[ ${STUDY_BUILD_ONLY:-0} == 1 ]]; then # the binary and the restored runs only (study_pipeline.sh)
  exit 0
fi

launch=("$bin")
if ((np > 1)); then
  launch=(mpirun --allow-run-as-root --bind-to none -np "$np" -x OMP_NUM_THREADS=1 "$bin")
fi

recipes='e2m1;ufp4;nvfp4;e2m1,scale=nvfp4;e2m1,tile2d=1'
# Each depth of a pair packed as soon as it ends (results/study, for git), so that a machine lost
# later loses no finished depth: scripts/study_archive.sh packs only what has ended (an L = 16 pair
# once its drift has too, after the drift loop). Its failure is reported, and does not stop the
# training.
pack() {
  if [[ ${STUDY_ARCHIVE:-1} == 1 ]]; then
    scripts/study_archive.sh "$out" "$seeds" || echo "study.sh: packing failed (exit $?)" >&2
  fi
}
mkdir -p "$out"
for ((n = 2; n <= seeds + 1; n += 2)); do
  ((n > seeds)) && n=$seeds
  for L in 2 4 8 16; do
    echo "== $(date -u +%FT%TZ) seeds 1..$n, L=$L"
    "${launch[@]}" compare --data "$data" --out "$out/L$L" --recipes "$recipes" --seed 1 --seeds "$n" \
      ${SAME_BITS_AS:+--same-bits-as "$SAME_BITS_AS"} \
      --steps 2000 --final-steps 400 --layers "$L" --d-model 64 --heads 4 --ffn 192 --seq-len 128 \
      --batch 8 --lr 2e-3 --warmup 50 --eval-every 125 --eval-batches 32 >>"$out/L$L.interim.txt"
    pack
  done
  for ((s = 1; s <= n; s++)); do
    ckpt=$out/L16/runs/bf16/seed$s/ckpt/step_00002000
    # Measured unless it ended: drift.json is written before the plots, and drift.log when ufp4
    # drift exits (it names drift_backward.svg), so a measurement that was cut short is redone.
    if [[ ! -d $ckpt ]] || grep -qs 'drift_backward\.svg' "$out/drift/seed$s/drift.log"; then continue; fi
    echo "== $(date -u +%FT%TZ) drift of seed $s (L=16, bf16, step 2000)"
    mkdir -p "$out/drift/seed$s"
    "$bin" drift --checkpoint "$ckpt" --data "$data" --out "$out/drift/seed$s" --recipes e2m1,ufp4 \
      --mode both --batches 32 >"$out/drift/seed$s/drift.log"
  done
  pack
done
echo "== $(date -u +%FT%TZ) study: seeds 1..$seeds done at every depth"
echo "next: build/ufp4 study --sd-only --seeds $seeds --out $out/stage2 --depth 2=$out/L2 --depth 4=$out/L4 --depth 8=$out/L8 --depth 16=$out/L16"
echo "(stage 1: the seeds stage 2 needs, docs/STUDY.md section 5; the full analysis only at the final n)"
