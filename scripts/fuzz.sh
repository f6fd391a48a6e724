#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz and runs each for FUZZ_SECONDS
# (default 60), two at a time. The committed seeds in fuzz/corpus/<target>/ are read only; new
# inputs go to build-fuzz/corpus/<target>/ so the repository is not touched. Any crash, leak,
# sanitizer report or timeout fails the script; the input is kept in build-fuzz/artifacts/ (add it
# to fuzz/corpus/<target>/ as crash-<what> once fixed). The final libFuzzer stats of each target
# are collected in build-fuzz/fuzz-stats.txt (executions per second for docs/RELIABILITY.md).
#
# FUZZ_RUNS=N (with FUZZ_SEED, default 1) runs N inputs per target from the committed seeds alone,
# with a fixed mutation seed, instead of a time budget: the same commit then explores the same
# inputs on every machine, so a CI verdict depends on the code and not on the machine's speed or
# on luck. Exploration (finding new bugs) is the time-budgeted mode, run by developers.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-2}
RUNS=${FUZZ_RUNS:-}
SEED=${FUZZ_SEED:-1}
B=build-fuzz
CC=clang cmake -S . -B $B -DUFP4_FUZZ=ON -DUFP4_MPI=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $B -j "$(nproc)" --target fuzz_all
targets=()
for f in fuzz/fuzz_*.c; do f=${f#fuzz/}; targets+=("${f%.c}"); done
for t in "${targets[@]}"; do [ -d "fuzz/corpus/${t#fuzz_}" ] || { python3 fuzz/make_corpus.py; break; }; done
mkdir -p $B/artifacts $B/logs
# shellcheck disable=SC2317 # run_one is called through xargs (bash -c 'run_one ...'), not here
run_one() {
  local t=$1 name=${1#fuzz_} corpus limit
  if [ -n "$RUNS" ]; then
    corpus="$B/corpus-fixed/$name" # fresh each time: only the committed seeds may steer the run
    rm -rf "$corpus"
    # Two sources of run-to-run variation go: -reload=0 (by default libFuzzer re-reads its corpus
    # folder once a second, so the inputs explored depend on the machine's speed) and -use_cmp=0
    # (comparison tracing feeds compared operands into the mutator; without it the shard and
    # tokenizer runs repeat).
    # The time cap only guards CI's budget on a machine far slower than expected.
    limit=(-runs="$RUNS" -seed="$SEED" -reload=0 -use_cmp=0 -max_total_time=600)
  else
    corpus="$B/corpus/$name"
    limit=(-max_total_time="$SECONDS_EACH")
  fi
  mkdir -p "$corpus"
  # One thread per fuzzer: OpenMP/OpenBLAS pools would only compete with the other job.
  if OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$B/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
      -max_len=16384 -print_final_stats=1 -artifact_prefix="$B/artifacts/$name-" \
      "$corpus" "fuzz/corpus/$name" >"$B/logs/$name.log" 2>&1; then
    echo "fuzz: $t ok ($(grep -m1 -o 'average_exec_per_sec: *[0-9]*' "$B/logs/$name.log" | grep -o '[0-9]*$') exec/s)"
  else
    echo "fuzz: $t FAILED; log $B/logs/$name.log, inputs in $B/artifacts/" >&2
    tail -40 "$B/logs/$name.log" >&2
    return 1
  fi
}
export -f run_one
export B SECONDS_EACH RUNS SEED
if [ -n "$RUNS" ]; then echo "fuzz: $RUNS inputs per target, seed $SEED"; else echo "fuzz: ${SECONDS_EACH} s per target"; fi
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}' || status=1
: >"$B/fuzz-stats.txt"
for t in "${targets[@]}"; do
  n=${t#fuzz_}
  echo "$t $(grep -E 'stat::(number_of_executed_units|average_exec_per_sec|new_units_added)' "$B/logs/$n.log" | awk '{printf "%s ", $0}')" >>"$B/fuzz-stats.txt"
done
cat "$B/fuzz-stats.txt"
exit $status
