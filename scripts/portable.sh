#!/usr/bin/env bash
# Portability check (make portable): ufp4 built without the x86 kernels must build and pass the
# format, quantization, RHT and linear tests on the scalar reference alone.
#
# By default an aarch64 cross build (Debian's gcc-aarch64-linux-gnu and the arm64 multiarch -dev
# packages that scripts/setup.sh --portable installs), its tests run under qemu-user: a build for a
# CPU with no x86 kernels at all, so an AVX2 symbol or an x86-only assumption cannot hide.
# PORTABLE=native instead builds for this machine with -DUFP4_SIMD=OFF (no cross tools needed).
# It then writes the parity kit with that build and compares it with the host build's.
# Exits non-zero when the build or any of the tests fails; a missing tool is a failure too.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${PORTABLE:-cross}
jobs=${JOBS:-$(nproc)}
tests=(test_pack test_ties test_philox test_quant_scales test_quant_special test_quant_threads
       test_quant_simd test_rht test_linear)
# test_quant_simd compares the x86 kernels with the reference; here it must skip (exit 77).
# The exhaustive format tests and the SR statistics each take over 10 minutes under qemu (they
# pass 2^32 floats), so only the native builds run them.
exhaustive=(test_minifloat test_grid_exhaustive test_sr)

case "$mode" in
  cross)
    build=${PORTABLE_BUILD:-build-aarch64}
    for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
      command -v "$tool" >/dev/null || { echo "portable: $tool not found; run scripts/setup.sh --portable as root" >&2; exit 1; }
    done
    # pkg-config must see the arm64 .pc files only, never this machine's.
    export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUFP4_MPI=OFF \
      -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
      -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CROSSCOMPILING_EMULATOR=qemu-aarch64 >/dev/null
    ;;
  native)
    build=${PORTABLE_BUILD:-build-scalar}
    tests+=("${exhaustive[@]}")
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DUFP4_SIMD=OFF -DUFP4_MPI=OFF >/dev/null
    ;;
  *)
    echo "portable: PORTABLE=$mode; expected cross or native" >&2
    exit 2
    ;;
esac
cmake --build "$build" -j "$jobs" --target "${tests[@]}" ufp4
regex=$(IFS='|'; echo "^(${tests[*]})\$")
(cd "$build" && ctest -R "$regex" --no-tests=error --output-on-failure -j "$jobs")

# The parity kit (docs/PARITY.md) must be the same bytes on this build as on the host's: every
# file but the manifest (whose commit may differ) against a kit from $PORTABLE_HOST_UFP4 (default
# build/ufp4, when it exists), then scripts/parity_check.py when numpy is there.
kits=$(mktemp -d)
trap 'rm -rf "$kits"' EXIT
run=()
[ "$mode" = cross ] && run=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
OMP_NUM_THREADS=1 "${run[@]}" "$build/ufp4" golden --out "$kits/target" # one thread: qemu's spin-waits
host=${PORTABLE_HOST_UFP4:-build/ufp4}
if [ -x "$host" ]; then
  "$host" golden --out "$kits/host"
  diff -r -x manifest.json "$kits/host" "$kits/target"
  echo "portable: the parity kit matches the host's ($host) byte for byte"
fi
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then /usr/bin/python3 scripts/parity_check.py "$kits/target"; fi
