#!/usr/bin/env bash
# The two comparisons of docs/RESULTS.md that are made at the depth study's design and reuse its
# runs, run in sittings like scripts/study.sh:
#
#   scripts/study_followup.sh fos [N]        Four Over Six (section 5): at L = 2, 4, 8 and 16, the
#                                            recipes e2m1, e2m1-4over6, nvfp4, nvfp4-4over6 and
#                                            ufp4 over seeds 1-12 (1-N: a sitting's part, N <= 12),
#                                            into reports/fos/L<L>
#   scripts/study_followup.sh schedule L N   a final BF16 phase (section 4): at depth L, e2m1, ufp4
#                                            and nvfp4 each alone and with bf16 for the last 10% of
#                                            the steps, seeds 1-N, into reports/schedule/L<L>
#
# Both use the study's binary (.study/build/ufp4, which scripts/study.sh builds from STUDY_COMMIT)
# and the study's training flags (below; tests/test_copy_runs.py checks that they are
# scripts/study.sh's). Before each compare call, scripts/copy_runs.py copies the study's finished
# runs of bf16, fp32, e2m1, nvfp4 and ufp4 at that depth and those seeds (without checkpoints)
# into the comparison's folder. Made by the same binary from the same flags and seeds, they are
# the runs compare would make again, and compare keeps them (it checks binary and configuration,
# as for any run it finds), so it trains only what is new: the two 4/6 presets, or the three
# scheduled recipes. The copies are listed in the folder's copied_runs.txt.
#
# Blinding: the reports of these comparisons show the study's own runs, which stay unread until
# the study's final analysis (docs/STUDY.md section 6). So the script refuses to start before that
# analysis exists: STUDY_FINAL (default reports/study/final) must hold analysis.json. The
# comparison's own interim report (each call's tables, over the seeds done so far) goes to
# OUT/compare.txt, not to the terminal: nothing in the registered plans (docs/RESULTS.md sections
# 4 and 5) looks at it before the last seed, so a sitting's log shows only progress lines.
#
# Environment: STUDY_NP (ranks, default 2), STUDY_OUT (the study's folder, default reports/study),
# STUDY_DATA (default data/shards/sotu-bpe2048), STUDY_FINAL, SAME_BITS_AS (as scripts/study.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/study_followup.sh fos [N] | schedule L N   (docs/RESULTS.md sections 4 and 5)" >&2
  exit 2
}
mode=${1:-}
np=${STUDY_NP:-2}
study=${STUDY_OUT:-reports/study}
data=${STUDY_DATA:-data/shards/sotu-bpe2048}
final=${STUDY_FINAL:-$study/final}
SAME_BITS_AS=${SAME_BITS_AS-9d13365e3ac8,1689742253fe}
bin=.study/build/ufp4
# The study's training flags (scripts/study.sh; the model's depth is given per call).
flags=(--steps 2000 --d-model 64 --heads 4 --ffn 192 --seq-len 128 --batch 8 --lr 2e-3 --warmup 50
  --eval-every 125 --eval-batches 32)
reused=bf16,fp32,e2m1,nvfp4,ufp4

case "$mode" in
  fos)
    [[ $# -eq 1 || ($# -eq 2 && "$2" =~ ^[0-9]+$) ]] || usage
    depths=(2 4 8 16); seeds=$((10#${2:-12}))
    ((seeds >= 1 && seeds <= 12)) || { echo "study_followup.sh: fos N must be 1..12 (the registered 12 seeds), not $2" >&2; exit 2; }
    ;;
  schedule)
    [[ $# -eq 3 && "$2" =~ ^(2|4|8|16)$ && "$3" =~ ^[0-9]+$ ]] || usage
    depths=("$2"); seeds=$((10#$3))
    ((seeds >= 2 && seeds <= 24)) || { echo "study_followup.sh: N must be 2..24 (the study's seeds), not $3" >&2; exit 2; }
    ;;
  *) usage ;;
esac
if [[ ! -f "$final/analysis.json" ]]; then
  echo "study_followup.sh: no $final/analysis.json: these reports show the study's runs, which stay" >&2
  echo "unread until its final analysis (docs/STUDY.md section 6); run that first" >&2
  exit 2
fi
# shellcheck disable=SC2016 # the sed pattern matches a literal ${STUDY_COMMIT:-...}
study_commit=${STUDY_COMMIT:-$(sed -n 's/^STUDY_COMMIT=\${STUDY_COMMIT:-\([0-9a-f]*\)}$/\1/p' scripts/study.sh)}
if [[ -z "$study_commit" ]] || ! "$bin" version 2>/dev/null | grep -q "commit ${study_commit:0:12}"; then
  echo "study_followup.sh: $bin is not the study's binary (${study_commit:0:12}); scripts/study.sh builds it" >&2
  exit 2
fi

# The study's shards (scripts/study.sh checks them the same way): other tokens, other runs.
if ! (cd "$data" 2>/dev/null && sha256sum --quiet --strict -c "$OLDPWD/scripts/study_data.sha256") >&2; then
  echo "study_followup.sh: $data/{train,val}.tok are not the study's shards (scripts/study_data.sha256)" >&2
  exit 2
fi

launch=("$bin")
((np > 1)) && launch=(mpirun --allow-run-as-root --bind-to none -np "$np" -x OMP_NUM_THREADS=1 "$bin")

for L in "${depths[@]}"; do
  if [[ $mode == fos ]]; then
    out=reports/fos/L$L
    recipes='e2m1;e2m1-4over6;nvfp4;nvfp4-4over6;ufp4'
    window=400
  else
    out=reports/schedule/L$L
    recipes='e2m1;e2m1@0,bf16@0.9;ufp4;ufp4@0,bf16@0.9;nvfp4;nvfp4@0,bf16@0.9'
    window=100
  fi
  mkdir -p "$out"
  # Exit 3 (a study run not finished) only means compare trains that run itself.
  scripts/copy_runs.py "$study/L$L" "$out" --runs "$reused" --seeds "$seeds" || (($? == 3))
  echo "== $(date -u +%FT%TZ) $mode, L=$L, seeds 1..$seeds"
  "${launch[@]}" compare --data "$data" --out "$out" --recipes "$recipes" --seed 1 --seeds "$seeds" \
    ${SAME_BITS_AS:+--same-bits-as "$SAME_BITS_AS"} --final-steps "$window" --layers "$L" "${flags[@]}" \
    >"$out/compare.txt"
done
