#!/usr/bin/env bash
# Data-parallel throughput: trains the same model at np=1 and np=2 (one OpenMP thread per rank,
# the same per-rank batch, so np=2 does twice the work per step), alternating the two a few times,
# and prints per-run and median tokens/s, ms per step, and the share of the step spent in
# communication (the trainer's comm_ms: status agreement, bucketed gradient sum, loss sum).
#
#   bench/dist_bench.sh [--ufp4 BIN] [--data DIR] [--repeats N] [--steps N] [--skip N] [-- TRAIN FLAGS]
#
# --data defaults to byte-level shards of the SOTU corpus, prepared under the work folder on first
# use (needs data/raw/sotu; `make test` or scripts/fetch_data.sh fetches it). The first --skip steps
# of every run (default 5: allocation, page faults) are left out of the medians.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ufp4=${UFP4:-$root/build/ufp4}
data=""
repeats=3
steps=40
skip=5
work=${DIST_BENCH_WORK:-/tmp/ufp4_dist_bench}
model=(--layers 4 --d-model 256 --heads 4 --ffn 768 --seq-len 128 --batch 8 --recipe fp32)
while [ $# -gt 0 ]; do
  case "$1" in
    --ufp4) ufp4=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --skip) skip=$2; shift 2 ;;
    --) shift; model=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "dist_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x "$ufp4" ] || { echo "dist_bench: no ufp4 binary at $ufp4 (build first, or pass --ufp4)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "dist_bench: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
mkdir -p "$work"
if [ -z "$data" ]; then
  data=$work/data
  if [ ! -f "$data/train.tok" ]; then
    [ -d "$root/data/raw/sotu" ] || { echo "dist_bench: no --data and no $root/data/raw/sotu" >&2; exit 1; }
    "$ufp4" prepare --corpus "$root/data/raw/sotu" --tokenizer bytes --out "$data" >/dev/null
  fi
fi
launch=(mpirun --allow-run-as-root --bind-to core -x OMP_NUM_THREADS=1)
export OMP_NUM_THREADS=1

# One run's medians over its steps after --skip: "ms_per_step comm_ms tokens_per_step".
summarize() {
  awk -v skip="$skip" '
    function num(key,   m) { if (match($0, "\"" key "\":[-0-9.eE+]+")) return substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3); return "" }
    /"loss":/ { s = num("step"); if (s + 0 <= skip) next; n++; ms[n] = num("ms_per_step"); c = num("comm_ms"); cm[n] = c == "" ? 0 : c
                tok[n] = num("tokens_per_s") * ms[n] / 1000 }
    function median(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
                                       return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { if (!n) exit 1; printf "%.3f %.3f %.0f\n", median(ms, n), median(cm, n), median(tok, n) }' "$1"
}

printf "%-4s %-4s %12s %12s %10s %8s %12s\n" np run tokens/s ms/step comm_ms comm% min_comm_ms
declare -A all_tps all_comm
for ((r = 1; r <= repeats; r++)); do
  for np in 1 2; do
    out=$work/np${np}_r$r
    rm -rf "$out"
    "${launch[@]}" -np "$np" "$ufp4" train --data "$data" --out "$out" --steps "$steps" --threads 1 --eval-every 0 \
      --eval-batches 1 --log-every 1 --no-progress "${model[@]}" >"$out.log" 2>&1 ||
      { echo "dist_bench: np=$np run $r failed; see $out.log" >&2; tail -5 "$out.log" >&2; exit 1; }
    read -r ms comm tok < <(summarize "$out/metrics.jsonl")
    # The fastest step's comm_ms is the transfer itself; the median also holds waiting for the slower rank.
    cmin=$(grep -o '"comm_ms":[0-9.]*' "$out/metrics.jsonl" | cut -d: -f2 | sort -g | head -1 || true)
    tps=$(awk -v t="$tok" -v m="$ms" 'BEGIN { printf "%.0f", t / m * 1000 }')
    share=$(awk -v c="$comm" -v m="$ms" 'BEGIN { printf "%.1f", 100 * c / m }')
    printf "%-4s %-4s %12s %12s %10s %8s %12s\n" "$np" "$r" "$tps" "$ms" "$comm" "$share" "${cmin:-0}"
    all_tps[$np]+="$tps "
    all_comm[$np]+="$share "
  done
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
t1=$(echo "${all_tps[1]}" | med)
t2=$(echo "${all_tps[2]}" | med)
echo "median over $repeats runs: np=1 $t1 tokens/s, np=2 $t2 tokens/s (speedup $(awk -v a="$t2" -v b="$t1" 'BEGIN { printf "%.2f", a / b }')x), np=2 communication $(echo "${all_comm[2]}" | med)% of the step"
