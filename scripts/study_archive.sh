#!/usr/bin/env bash
# Packs the study's finished runs into results/study/ for git, so that they survive the machine:
# one archive per depth and seed pair, made once, when every run of that pair at that depth has
# finished (run.json "finished"), and never rewritten:
#
#   results/study/L<L>-seeds<a>-<b>.tar.xz    the run folders L<L>/runs/<recipe>/seed<a|b>
#                                             without their checkpoints
#   results/study/L<L>-seed<n>.tar.xz         an odd final n's last seed, alone (its pair
#                                             seed n+1 is never run)
#   results/study/drift-seed<s>.tar.xz        drift/seed<s> once its measurement has ended
#                                             (drift.json, and drift.log complete: it names
#                                             drift_backward.svg, printed last)
#
# At L = 16 a pair is packed only once both seeds' drift has ended: the archives leave out the
# checkpoints, and the drift needs the bf16 run's final one. Were the pair packed first and the
# machine lost before the drift, a restored study would hold that run finished but without the
# checkpoint, and the seed's drift could not be measured; unpacked, the pair is trained again.
#
# Unpacking them under reports/study (scripts/study_restore.sh, which study.sh runs first) gives
# back the folders that `ufp4 study` reads. Nothing is read or printed but file names: the study stays blinded
# (docs/STUDY.md, section 6). The interim reports are not packed.
#
#   scripts/study_archive.sh [OUT] [SEEDS]
#       OUT    the study folder (default reports/study)
#       SEEDS  the study's final number of seeds, as passed to scripts/study.sh (default 24, the
#              cap: seeds are then packed in pairs only); with an odd SEEDS the last seed is
#              packed alone once it is finished at that depth
#
# The follow-ups' runs (scripts/study_followup.sh) are packed the same way into their own folder,
# with the environment naming what differs (scripts/study_pipeline.sh sets them):
#   ARCHIVE_DEST     the folder of the archives (default results/study)
#   ARCHIVE_RECIPES  the run folders a seed pair must have finished (default the study's seven)
#   ARCHIVE_DEPTHS   the depths (default 2 4 8 16)
#   ARCHIVE_DRIFT    1 (default): the study's drift rule above; 0: no drift measurements
#   ARCHIVE_SKIP_COPIES  1: a run that scripts/copy_runs.py copied in (listed in
#                    L<L>/copied_runs.txt) is left out: its own archive brings it back (default 0)
#   ARCHIVE_GATE     a folder inside OUT whose L<L>/runs/<recipe>/seed<s> must also exist for each
#                    run of a pair, and is packed in the same archive (the schedule's runs wait
#                    for their evaluations, OUT/eval-q, since the checkpoint an evaluation reads
#                    is not packed: a run and its evaluation come back together or not at all)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-reports/study}
seeds=${2:-24}
if [[ ! "$seeds" =~ ^[0-9]+$ ]] || ((10#$seeds < 1 || 10#$seeds > 24)); then
  echo "study_archive.sh: SEEDS must be 1..24, not '$seeds'" >&2
  exit 2
fi
seeds=$((10#$seeds)) # "08" is 8, not an octal error
# An odd SEEDS packs its last seed alone; a run of seed SEEDS+1 means SEEDS is not the final n, and
# that seed would end up in two archives once its pair is packed. Checked before anything is packed.
if ((seeds % 2)) && compgen -G "$out/L*/runs/*/seed$((seeds + 1))" >/dev/null; then
  echo "study_archive.sh: SEEDS $seeds is odd, but seed $((seeds + 1)) has runs in $out:" \
    "SEEDS must be the study's final number of seeds" >&2
  exit 2
fi
dest=${ARCHIVE_DEST:-results/study}
read -r -a recipes <<<"${ARCHIVE_RECIPES-fp32 bf16 e2m1 ufp4 nvfp4 e2m1_scale_nvfp4 e2m1_tile2d_1}"
read -r -a depths <<<"${ARCHIVE_DEPTHS-2 4 8 16}"
drift=${ARCHIVE_DRIFT:-1}
gate=${ARCHIVE_GATE:-}
skip_copies=${ARCHIVE_SKIP_COPIES:-0}
abs_out=$(cd "$out" 2>/dev/null && pwd -P) || abs_out=$out # copy_runs.py logs real paths
# Whether run folder $2 (relative to OUT) is a copy listed in OUT/L$1/copied_runs.txt, whose lines
# end " -> DESTINATION" (copy_runs.py writes absolute paths; a path may hold spaces, so the whole
# end of the line is compared, not its last word).
copied() {
  [[ -f $out/L$1/copied_runs.txt ]] &&
    awk -v s=" -> $abs_out/$2" 'substr($0, length($0) - length(s) + 1) == s { f = 1 } END { exit !f }' \
      "$out/L$1/copied_runs.txt"
}
if ((${#recipes[@]} == 0 || ${#depths[@]} == 0)) || [[ $drift != [01] || $skip_copies != [01] ]] ||
  [[ -n $gate && ( ! -d $gate || $gate != "$out"/* ) ]]; then
  echo "study_archive.sh: ARCHIVE_RECIPES and ARCHIVE_DEPTHS must be non-empty, ARCHIVE_DRIFT and" \
    "ARCHIVE_SKIP_COPIES 0 or 1, ARCHIVE_GATE a folder inside OUT ($out)" >&2
  exit 2
fi
mkdir -p "$dest"
finished() { [[ -f $1/run.json ]] && grep -q '"state":[[:space:]]*"finished"' "$1/run.json"; }
# drift.json is written before the plots, and drift.log (stdout) only when ufp4 drift exits.
drift_done() { [[ -f $1/drift.json ]] && grep -q 'drift_backward\.svg' "$1/drift.log" 2>/dev/null; }
made=0
for L in "${depths[@]}"; do
  for ((a = 1; a <= seeds; a += 2)); do
    b=$((a + 1))
    file=$dest/L$L-seeds$a-$b.tar.xz
    pair=("$a" "$b")
    if ((b > seeds)); then # an odd final n: its last seed alone
      file=$dest/L$L-seed$a.tar.xz
      pair=("$a")
    fi
    [[ -f $file ]] && continue
    if ((L == 16 && drift)); then
      for s in "${pair[@]}"; do drift_done "$out/drift/seed$s" || continue 2; done
    fi
    dirs=()
    gated=()
    for r in "${recipes[@]}"; do
      for s in "${pair[@]}"; do
        d=L$L/runs/$r/seed$s
        finished "$out/$d" || continue 3
        ((skip_copies)) && copied "$L" "$d" && continue
        dirs+=("$d")
        if [[ -n $gate ]]; then
          [[ -d $gate/$d ]] || continue 3
          gated+=("${gate#"$out"/}/$d")
        fi
      done
    done
    if ((${#dirs[@]} == 0)); then # every run of the pair is a copy: nothing of its own to keep
      continue
    fi
    tar -C "$out" --exclude=ckpt --sort=name --owner=0 --group=0 --mtime='2026-01-01 00:00Z' \
      -cf - "${dirs[@]}" "${gated[@]}" | xz -9 > "$file.tmp"
    mv "$file.tmp" "$file"
    echo "packed $file"
    made=$((made + 1))
  done
done
for d in "$out"/drift/seed*; do
  if ! drift_done "$d"; then
    if [[ -f $d/drift.json ]]; then
      echo "study_archive: $d has drift.json but no complete drift.log: still running, or cut" \
        "short (scripts/study.sh measures it again)"
    fi
    continue
  fi
  s=${d##*/seed}
  file=$dest/drift-seed$s.tar.xz
  [[ -f $file ]] && continue
  tar -C "$out" --sort=name --owner=0 --group=0 --mtime='2026-01-01 00:00Z' -cf - "drift/seed$s" | xz -9 > "$file.tmp"
  mv "$file.tmp" "$file"
  echo "packed $file"
  made=$((made + 1))
done
echo "study_archive: $made new archive(s) in $dest"
# The highest seed run so far, when odd, below SEEDS and finished at L = 16 (the study's last
# depth), waits for a pair that only comes if the study goes on: if it is the final n, say so.
top=0
for d in "$out"/L*/runs/*/seed*; do
  s=${d##*/seed}
  [[ $s =~ ^[0-9]+$ ]] && ((10#$s > top)) && top=$((10#$s))
done
if ((top % 2 && top < seeds)); then
  for r in "${recipes[@]}"; do finished "$out/L${depths[-1]}/runs/$r/seed$top" || top=0; done
  if ((top)); then
    echo "study_archive: seed $top has no pair; if $top is the study's final n, run: $0 $out $top"
  fi
fi
