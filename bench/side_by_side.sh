#!/usr/bin/env bash
# Two ufp4 binaries timed side by side, as the study runs them: both at once, one process per core
# at one thread each (taskset), then with the cores swapped, so that both see the same machine and
# the same neighbours. Prints, per recipe, each binary's median step and the median of the per-pair
# ratios NEW / OLD with their range.
#
#   bench/side_by_side.sh OLD NEW [CONFIG] [RECIPES] [ROUNDS]
#       CONFIG   a `ufp4 bench train --config` name (default 16x64)
#       RECIPES  default fp32,bf16,e2m1,nvfp4,ufp4
#       ROUNDS   rounds of two pairs each (default 2)
# Needs 2 cores; quiet otherwise (pause any long run: kill -STOP, kill -CONT).
set -euo pipefail
old=${1:?usage: bench/side_by_side.sh OLD NEW [CONFIG] [RECIPES] [ROUNDS]}
new=${2:?usage: bench/side_by_side.sh OLD NEW [CONFIG] [RECIPES] [ROUNDS]}
cfg=${3:-16x64}
recipes=${4:-fp32,bf16,e2m1,nvfp4,ufp4}
rounds=${5:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # binary core label file
  OMP_NUM_THREADS=1 taskset -c "$2" "$1" bench train --config "$cfg" --recipes "$recipes" --steps 10 \
    --warmup 2 --no-rss 2>/dev/null | awk -v who="$3" '$1 ~ /^(fp32|bf16|e2m1|nvfp4|ufp4|mxfp4)/ && $3 ~ /^[0-9.]+$/ {print who, $1, $3}' > "$4"
}
for ((r = 0; r < rounds; r++)); do
  for swap in 0 1; do
    run "$old" "$swap" old "$tmp/o.$r.$swap" &
    run "$new" "$((1 - swap))" new "$tmp/n.$r.$swap" &
    wait
  done
done
cat "$tmp"/o.* "$tmp"/n.* | python3 -c '
import collections, statistics, sys
d = collections.defaultdict(list)
order = []
for line in sys.stdin:
    who, rec, ms = line.split()
    d[(who, rec)].append(float(ms))
    if rec not in order: order.append(rec)
print("%-8s %10s %10s %10s  %s" % ("recipe", "old ms", "new ms", "new/old", "range of the pairs"))
for rec in order:
    o, n = d[("old", rec)], d[("new", rec)]
    r = [b / a for a, b in zip(o, n)]
    print("%-8s %10.1f %10.1f %10.3f  %.2f-%.2f" % (rec, statistics.median(o), statistics.median(n),
          statistics.median(r), min(r), max(r)))
'
echo "config $cfg; $((2 * rounds)) pairs; old $("$old" version | head -1); new $("$new" version | head -1)"
