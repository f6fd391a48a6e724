#!/usr/bin/env bash
# Regenerates the runs behind docs/RESULTS.md: `scripts/results.sh [compare|moe|ablation|sweep|fouroversix]...`
# (all five by default; 40-70 minutes on 2 cores). Each part writes a report folder under
# reports/results/; UFP4 overrides the binary, RESULTS the output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
ufp4="${UFP4:-build/ufp4}"
out="${RESULTS:-reports/results}"
tok=data/tok/bpe2048
shards=data/shards/sotu-bpe2048
[ -f $tok/encoder.json ] || "$ufp4" tokenizer train --vocab 2048 --corpus data/raw/sotu --out $tok
[ -f $shards/train.tok ] || "$ufp4" prepare --corpus data/raw/sotu --tokenizer $tok --out $shards
model=(--layers 2 --d-model 128 --heads 4 --ffn 384 --seq-len 128 --batch 8 --lr 2e-3 --warmup 20 --eval-batches 16)
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(compare moe ablation sweep fouroversix)
# Section 4: each recipe's quantizer as `ufp4 bias` flags.
declare -A fos=([e2m1]="--grids e2m1 --scale fp32" [e2m1-4over6]="--grids e2m1 --scale fp32 --adaptive 4over6"
  [nvfp4]="--grids e2m1 --scale nvfp4" [nvfp4-4over6]="--grids e2m1 --scale nvfp4 --adaptive 4over6"
  [ufp4]="--grids e1m2 --scale fp32")
for part in "${parts[@]}"; do
  case "$part" in
  compare) # The comparison: 3 seeds, bf16 baseline, fp32 control.
    "$ufp4" compare --data $shards --out "$out/compare" --recipes bf16,e2m1,nvfp4,ufp4 --seeds 3 \
      --steps 300 --final-steps 75 "${model[@]}" --no-progress ;;
  moe) # The same model with MoE MLPs: 4 experts, top-2, each half as wide (equal active parameters).
    "$ufp4" compare --data $shards --out "$out/moe" --recipes bf16,e2m1,ufp4 --seeds 3 \
      --steps 300 --final-steps 75 "${model[@]}" --moe-experts 4 --moe-top-k 2 --moe-ffn 192 --no-progress ;;
  ablation) # The paper's Table 2 grid: RHT scope and SR scope, 2 seeds each.
    "$ufp4" compare --data $shards --out "$out/ablation-rht" --recipes e2m1,ufp4 --ablation rht-scope --seeds 2 --no-control \
      --steps 100 --final-steps 25 "${model[@]}" --no-progress
    "$ufp4" compare --data $shards --out "$out/ablation-sr" --recipes ufp4 --ablation sr-scope --seeds 2 --no-control \
      --steps 100 --final-steps 25 "${model[@]}" --no-progress ;;
  sweep) # A scaling sweep over three sizes.
    "$ufp4" sweep --data $shards --out "$out/sweep" --sizes 2x64,2x128,4x128 --recipes bf16,e2m1,ufp4 \
      --steps 150 --seq-len 128 --batch 8 --lr 2e-3 --warmup 20 --eval-batches 16 --no-progress ;;
  fouroversix) # Four Over Six against e2m1, nvfp4 and UFP4 on synthetic tensors, raw and RHT16.
    mkdir -p "$out/fouroversix"
    for d in gaussian laplace student-t; do
      for r in "${!fos[@]}"; do
        # shellcheck disable=SC2086 # the flags are meant to split
        "$ufp4" bias --dist $d --rht 16 --json ${fos[$r]} >"$out/fouroversix/$d-$r.json"
      done
    done ;;
  *) echo "results.sh: unknown part '$part' (compare, moe, ablation, sweep, fouroversix)" >&2; exit 2 ;;
  esac
done
