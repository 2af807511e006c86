#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, AddressSanitizer + UBSan, -O1 -g) into
# build-fuzz/: the parsers' sources only, no LibTorch. Debian 12 packages: clang-14,
# libclang-rt-14-dev (libFuzzer), nlohmann-json3-dev, libicu-dev, libhdf5-dev, cmake, ninja-build.
#
#   scripts/build_fuzz.sh [BUILD_DIR]      (CLANG=clang-15 picks another clang)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build-fuzz}
clang=${CLANG:-clang-14}
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

cmake -S "$root/tests/fuzz" -B "$build" "${generator[@]}" \
  -DCMAKE_C_COMPILER="$clang" -DCMAKE_CXX_COMPILER="${clang/clang/clang++}" >/dev/null
cmake --build "$build" -j "$(nproc)"
