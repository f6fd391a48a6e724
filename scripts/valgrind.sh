#!/usr/bin/env bash
# valgrind memcheck over a representative subset of the test programs (already built in BUILD,
# default build): formats, quantization, .npy/safetensors, shards and the loader, the tokenizer,
# the quantized linear layer and the RHT, and a short model/training test. Fails on any invalid access, use of uninitialised memory, or a
# definite/indirect leak. The programs run with 2 OpenMP threads so the parallel paths are checked
# too, with passive waiting: spinning workers make valgrind, which runs one thread at a time,
# about 30 times slower (test_model: 290 s against 9 s). scripts/valgrind.supp explains its entry.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
tests=(test_ties test_quant_special test_quant_scales test_npy test_safetensors test_shard test_loader
       test_tok_errors test_tok_bpe test_linear test_rht test_model test_reliability_train)
export UFP4_SOURCE_DIR=$PWD UFP4_BINARY_DIR=$PWD/$BUILD UFP4_CLI=$PWD/$BUILD/ufp4 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive OPENBLAS_NUM_THREADS=1
mkdir -p "$BUILD/valgrind"
fail=0
for t in "${tests[@]}"; do
  [ -x "$BUILD/$t" ] || { echo "valgrind: $BUILD/$t is missing (build first)" >&2; fail=1; continue; }
  log=$BUILD/valgrind/$t.log
  start=$(date +%s)
  set +e
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --track-origins=no --suppressions=scripts/valgrind.supp \
    --log-file="$log" "$BUILD/$t" >"$BUILD/valgrind/$t.out" 2>&1
  rc=$?
  set -e
  # 77 is the suite's "skipped" code: a test that cannot run here checked nothing, but is no error.
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then
    echo "valgrind: $t ok ($(( $(date +%s) - start )) s$([ $rc -eq 77 ] && echo ', skipped'))"
  else
    echo "valgrind: $t FAILED (exit $rc); see $log" >&2
    grep -E "Invalid|uninitialised|definitely lost|indirectly lost|ERROR SUMMARY" "$log" | head -20 >&2 || true
    tail -20 "$BUILD/valgrind/$t.out" >&2
    fail=1
  fi
done
exit $fail
