#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench from the llama.cpp that llama-cpp-python vendors (its source
# distribution from PyPI), CPU only, Release, with the best flags for this CPU: -march=native,
# which on a CPU with AMX (amx_tile/amx_int8/amx_bf16 in /proc/cpuinfo) compiles ggml's AMX
# kernels in as well. Kept under bench/out/llamacpp (git-ignored): a second run reuses the build.
#
#   bench/build_llama_bench.sh            prints the path of llama-bench on its last line
#   LLAMA_CPP_PYTHON_VERSION=0.3.36 (default)   NOAMX=1: a second build with AMX switched off
#
# The llama.cpp commit is the one llama-cpp-python's CHANGELOG names for that release (the source
# distribution carries no git metadata); it is written to build-info.txt beside the binary.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=$root/bench/out/llamacpp
src=$cache/llama_cpp_python-$version
variant=native
flags=(-DGGML_NATIVE=ON)
if [[ ${NOAMX:-0} == 1 ]]; then
  variant=native-noamx
  # -march=native, then AMX taken out again: ggml's AMX kernels are not compiled.
  flags=(-DGGML_NATIVE=OFF -DCMAKE_C_FLAGS="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
         -DCMAKE_CXX_FLAGS="-march=native -mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
build=$cache/build-$version-$variant
mkdir -p "$cache"
if [[ ! -d $src/vendor/llama.cpp ]]; then
  python=${PYTHON:-$root/.venv/bin/python}
  [[ -x $python ]] || python=python3
  "$python" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$cache" >&2
  tar -xzf "$cache/llama_cpp_python-$version.tar.gz" -C "$cache"
fi
if [[ ! -x $build/bin/llama-bench ]]; then
  cmake -S "$src/vendor/llama.cpp" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DGGML_OPENMP=ON "${flags[@]}" >&2
  nice -n 19 cmake --build "$build" -j "${JOBS:-2}" --target llama-bench >&2
fi
commit=$(sed -n 's/.*update llama.cpp to ggml-org\/llama.cpp@\([0-9a-f]*\).*/\1/p' "$src/CHANGELOG.md" | head -1)
amx=$(grep -o 'amx_[a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')
{
  echo "llama-cpp-python $version, llama.cpp ggml-org/llama.cpp@${commit:-unknown}"
  echo "variant $variant: ${flags[*]} -DCMAKE_BUILD_TYPE=Release (CPU backend only); CPU AMX flags: ${amx:-none}"
} >"$build/build-info.txt"
echo "$build/bin/llama-bench"
