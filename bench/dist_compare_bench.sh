#!/usr/bin/env bash
# Runs shared out over ranks: the wall time of one `ufp4 compare` grid in one process with all the
# node's cores as OpenMP threads, against the same grid under `mpirun -np 2` with the cores split
# between the ranks (one thread each on a 2-core node), alternating the two a few times. Prints
# per-run and median seconds, and checks that every np=2 report.json equals np=1's once the keys
# naming the output folder are dropped.
#
#   bench/dist_compare_bench.sh [--ufp4 BIN] [--data DIR] [--repeats N] [-- COMPARE FLAGS]
#
# --data defaults to byte-level shards of the SOTU corpus, prepared under the work folder on first
# use (needs data/raw/sotu; `make test` or scripts/fetch_data.sh fetches it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ufp4=${UFP4:-$root/build/ufp4}
data=""
repeats=3
work=${DIST_BENCH_WORK:-/tmp/ufp4_dist_compare_bench}
grid=(--recipes e2m1,ufp4 --seeds 2 --steps 60 --layers 2 --d-model 128 --heads 4 --ffn 384 --seq-len 128 --batch 8
      --eval-batches 4 --no-progress)
while [ $# -gt 0 ]; do
  case "$1" in
    --ufp4) ufp4=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --) shift; grid=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "dist_compare_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$ufp4" ] || { echo "dist_compare_bench: no ufp4 binary at $ufp4 (build first, or pass --ufp4)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "dist_compare_bench: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
mkdir -p "$work"
if [ -z "$data" ]; then
  data=$work/data
  if [ ! -f "$data/train.tok" ]; then
    [ -d "$root/data/raw/sotu" ] || { echo "dist_compare_bench: no --data and no $root/data/raw/sotu" >&2; exit 1; }
    "$ufp4" prepare --corpus "$root/data/raw/sotu" --tokenizer bytes --out "$data" >/dev/null
  fi
fi
cores=$(nproc)
canon() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j.pop("command",None)
[r.pop("dir",None) for r in j.get("runs",[])]; print(json.dumps(j,sort_keys=True))' "$1"; }

printf "%-4s %-4s %10s\n" np run seconds
declare -A secs
for ((r = 1; r <= repeats; r++)); do
  for np in 1 2; do
    out=$work/np${np}_r$r
    rm -rf "$out"
    if [ "$np" = 1 ]; then
      cmd=(env OMP_NUM_THREADS="$cores" "$ufp4")
    else
      cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "$ufp4")
    fi
    t0=$(date +%s.%N)
    "${cmd[@]}" compare --data "$data" --out "$out" "${grid[@]}" >"$out.log" 2>&1 ||
      { echo "dist_compare_bench: np=$np run $r failed; see $out.log" >&2; tail -5 "$out.log" >&2; exit 1; }
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf "%-4s %-4s %10s\n" "$np" "$r" "$s"
    secs[$np]+="$s "
    if [ "$np" = 2 ] && [ "$(canon "$out/report.json")" != "$(canon "$work/np1_r$r/report.json")" ]; then
      echo "dist_compare_bench: np=2 report of run $r differs from np=1's" >&2
      exit 1
    fi
  done
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
s1=$(echo "${secs[1]}" | med)
s2=$(echo "${secs[2]}" | med)
echo "median over $repeats runs: np=1 ($cores threads) ${s1} s, np=2 (cores split) ${s2} s," \
  "speedup $(awk -v a="$s1" -v b="$s2" 'BEGIN { printf "%.2f", a / b }')x; every np=2 report equal to np=1's"
