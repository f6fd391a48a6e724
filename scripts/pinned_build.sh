#!/usr/bin/env bash
# A binary built from a fixed commit, never from the working tree, whose HEAD moves as results are
# committed: the study's runs (scripts/study.sh, STUDY_COMMIT) and the schedule's evaluations
# (scripts/study_pipeline.sh, EVAL_COMMIT) must each come from one binary across sittings and
# machines.
#
#   scripts/pinned_build.sh COMMIT SRC BUILD
#
# Leaves BUILD/ufp4 as it is when its `version` already names COMMIT; else checks COMMIT out
# (detached) in the git worktree SRC, made here the first time, and builds BUILD/ufp4 from it
# (Release). Prints the binary's version line. Exit 2 on a bad COMMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# != 3)) || [[ ! $1 =~ ^[0-9a-f]{12,40}$ ]]; then
  echo "usage: scripts/pinned_build.sh COMMIT SRC BUILD   (COMMIT: 12 to 40 hex digits)" >&2
  exit 2
fi
commit=$1 src=$2 build=$3
bin=$build/ufp4
if [[ ! -x $bin ]] || ! "$bin" version | grep -q "commit ${commit:0:12}"; then
  rm -rf "$build"
  if [[ -e $src/.git ]]; then git -C "$src" checkout -q --detach "$commit"
  else git worktree add -q --detach "$src" "$commit"; fi
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target ufp4 >/dev/null
fi
"$bin" version
