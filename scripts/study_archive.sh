#!/usr/bin/env bash
# Packs the study's finished runs into results/study/ for git, so that they survive the machine:
# one archive per depth and seed pair, made once, when every run of that pair at that depth has
# finished (run.json "finished"), and never rewritten:
#
#   results/study/L<L>-seeds<a>-<b>.tar.xz    the run folders L<L>/runs/<recipe>/seed<a|b>
#                                             without their checkpoints
#   results/study/drift-seed<s>.tar.xz        drift/seed<s> once its drift.json exists
#
# Unpacking them under reports/study (tar -C reports/study -xJf ...) gives back the folders that
# `ufp4 study` reads. Nothing is read or printed but file names: the study stays blinded
# (docs/STUDY.md, section 6). The interim reports are not packed.
#
#   scripts/study_archive.sh [OUT]     OUT = the study folder (default reports/study)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/study}
dest=results/study
recipes=(fp32 bf16 e2m1 ufp4 nvfp4 e2m1_scale_nvfp4 e2m1_tile2d_1)
mkdir -p "$dest"
finished() { [[ -f $1/run.json ]] && grep -q '"state":[[:space:]]*"finished"' "$1/run.json"; }
made=0
for L in 2 4 8 16; do
  for ((a = 1; a <= 24; a += 2)); do
    b=$((a + 1))
    file=$dest/L$L-seeds$a-$b.tar.xz
    [[ -f $file ]] && continue
    dirs=()
    for r in "${recipes[@]}"; do
      for s in $a $b; do
        d=L$L/runs/$r/seed$s
        finished "$out/$d" || continue 3
        dirs+=("$d")
      done
    done
    tar -C "$out" --exclude=ckpt --sort=name --owner=0 --group=0 --mtime='2026-01-01 00:00Z' \
      -cf - "${dirs[@]}" | xz -9 > "$file.tmp"
    mv "$file.tmp" "$file"
    echo "packed $file"
    made=$((made + 1))
  done
done
for d in "$out"/drift/seed*; do
  [[ -f $d/drift.json ]] || continue
  s=${d##*/seed}
  file=$dest/drift-seed$s.tar.xz
  [[ -f $file ]] && continue
  tar -C "$out" --sort=name --owner=0 --group=0 --mtime='2026-01-01 00:00Z' -cf - "drift/seed$s" | xz -9 > "$file.tmp"
  mv "$file.tmp" "$file"
  echo "packed $file"
  made=$((made + 1))
done
echo "study_archive: $made new archive(s) in $dest"
