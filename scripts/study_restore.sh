#!/usr/bin/env bash
# Puts the study's packed runs (results/study/, made by scripts/study_archive.sh) back under the
# study folder, for a machine that lacks them: a fresh clone, or one whose reports/ was lost. Only
# the run folders (L<L>/runs/<recipe>/seed<s>) and drift folders (drift/seed<s>) that the study
# folder does not have are unpacked; a folder that exists is never touched, whatever it holds.
# `ufp4 compare` then finds the unpacked runs finished (their run.json, config.json and
# metrics.jsonl are packed; checkpoints are not, and a finished run needs none) and skips them.
# Nothing is read or printed but file names: the study stays blinded (docs/STUDY.md, section 6).
#
#   scripts/study_restore.sh [OUT [SRC [GATE_OUT]]]
#       OUT       the study folder (default reports/study)
#       SRC       the folder of the archives (default results/study; a follow-up's, e.g.
#                 results/fos, for its runs: scripts/study_pipeline.sh)
#       GATE_OUT  where SRC's gate-L<L>-seeds<a>-<b>.tar.xz go (scripts/study_archive.sh's
#                 ARCHIVE_GATE: the schedule's evaluations); without it they are left packed
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/study}
src=${2:-results/study}
gate_out=${3:-}
made=0
# Unpacks the run and drift folders of archive $1 that folder $2 lacks.
unpack() {
  local f=$1 top=$2 d missing=()
  mkdir -p "$top"
  while read -r d; do
    [[ -e "$top/$d" ]] || missing+=("$d")
  done < <(tar -tJf "$f" | sed -nE 's#^(L[0-9]+/runs/[^/]+/seed[0-9]+|drift/seed[0-9]+)(/.*)?$#\1#p' | sort -u)
  ((${#missing[@]})) || return 0
  tar -C "$top" -xJf "$f" "${missing[@]}"
  echo "restored ${#missing[@]} folder(s) from $f"
  made=$((made + 1))
}
mkdir -p "$out"
for f in "$src"/L*-seed*.tar.xz "$src"/drift-seed*.tar.xz; do
  if [[ -f $f ]]; then unpack "$f" "$out"; fi
done
if [[ -n $gate_out ]]; then
  for f in "$src"/gate-L*-seed*.tar.xz; do
    if [[ -f $f ]]; then unpack "$f" "$gate_out"; fi
  done
fi
echo "study_restore: $made archive(s) unpacked into $out${gate_out:+ and $gate_out}"
