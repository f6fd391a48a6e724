#!/usr/bin/env bash
# Puts the study's packed runs (results/study/, made by scripts/study_archive.sh) back under the
# study folder, for a machine that lacks them: a fresh clone, or one whose reports/ was lost. Only
# the run folders (L<L>/runs/<recipe>/seed<s>) and drift folders (drift/seed<s>) that the study
# folder does not have are unpacked; a folder that exists is never touched, whatever it holds.
# `ufp4 compare` then finds the unpacked runs finished (their run.json, config.json and
# metrics.jsonl are packed; checkpoints are not, and a finished run needs none) and skips them.
# Nothing is read or printed but file names: the study stays blinded (docs/STUDY.md, section 6).
#
#   scripts/study_restore.sh [OUT [SRC]]
#       OUT   the study folder (default reports/study)
#       SRC   the folder of the archives (default results/study; a follow-up's, e.g. results/fos
#             into reports/fos, for its runs: scripts/study_pipeline.sh)
# A run folder may sit one level down (e.g. eval-q/L16/runs/...: the schedule's evaluations, which
# scripts/study_archive.sh packs with their runs). Each folder is unpacked into a temporary folder
# and renamed into place, so a folder that exists is whole.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/study}
src=${2:-results/study}
made=0
mkdir -p "$out"
for f in "$src"/L*-seed*.tar.xz "$src"/drift-seed*.tar.xz; do
  [[ -f $f ]] || continue
  missing=()
  while read -r d; do
    [[ -e "$out/$d" ]] || missing+=("$d")
  done < <(tar -tJf "$f" | sed -nE 's#^(([A-Za-z0-9._-]+/)?L[0-9]+/runs/[^/]+/seed[0-9]+|drift/seed[0-9]+)(/.*)?$#\1#p' | sort -u)
  ((${#missing[@]})) || continue
  tmp=$(mktemp -d "$out/.restore.XXXXXX")
  tar -C "$tmp" -xJf "$f" "${missing[@]}"
  for d in "${missing[@]}"; do
    mkdir -p "$(dirname "$out/$d")"
    mv "$tmp/$d" "$out/$d"
  done
  rm -rf "$tmp"
  echo "restored ${#missing[@]} folder(s) from $f"
  made=$((made + 1))
done
echo "study_restore: $made archive(s) unpacked into $out"
