#!/usr/bin/env bash
# Puts the study's packed runs (results/study/, made by scripts/study_archive.sh) back under the
# study folder, for a machine that lacks them: a fresh clone, or one whose reports/ was lost. Only
# the run folders (L<L>/runs/<recipe>/seed<s>) and drift folders (drift/seed<s>) that the study
# folder does not have are unpacked; a folder that exists is never touched, whatever it holds.
# `ufp4 compare` then finds the unpacked runs finished (their run.json, config.json and
# metrics.jsonl are packed; checkpoints are not, and a finished run needs none) and skips them.
# Nothing is read or printed but file names: the study stays blinded (docs/STUDY.md, section 6).
#
#   scripts/study_restore.sh [OUT]     OUT = the study folder (default reports/study)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/study}
src=results/study
mkdir -p "$out"
made=0
for f in "$src"/L*-seed*.tar.xz "$src"/drift-seed*.tar.xz; do
  [[ -f $f ]] || continue
  missing=()
  while read -r d; do
    [[ -e "$out/$d" ]] || missing+=("$d")
  done < <(tar -tJf "$f" | sed -nE 's#^(L[0-9]+/runs/[^/]+/seed[0-9]+|drift/seed[0-9]+)(/.*)?$#\1#p' | sort -u)
  ((${#missing[@]})) || continue
  tar -C "$out" -xJf "$f" "${missing[@]}"
  echo "restored ${#missing[@]} folder(s) from $f"
  made=$((made + 1))
done
echo "study_restore: $made archive(s) unpacked into $out"
