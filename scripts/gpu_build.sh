#!/usr/bin/env bash
# Run on a GPU machine (PyTorch with CUDA, nvcc, CMake, no package registry): unpacks the
# packages scripts/gpu_deps.sh fetched into .gpu/root, configures build-gpu against the
# machine's own LibTorch with -DLUKA_APP=OFF -DLUKA_GUI=OFF, and builds the CUDA kernels, their
# tests and the GPU benchmark.
#
#   scripts/gpu_build.sh [CUDA_ARCH]      (default 90: H100 / H200)
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-90}"
if ! ls .gpu/debs/*.deb >/dev/null 2>&1; then
  echo "gpu_build: .gpu/debs is empty; run scripts/gpu_deps.sh on a machine with apt and carry .gpu along" >&2
  exit 1
fi
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "gpu_build: nvcc not found" >&2; exit 1; }
py="${PYTHON:-python3}"
torch_prefix="$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" ||
  { echo "gpu_build: $py has no torch" >&2; exit 1; }
root="$PWD/.gpu/root"
mkdir -p "$root"
for f in .gpu/debs/*.deb; do dpkg -x "$f" "$root"; done
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DLUKA_APP=OFF -DLUKA_GUI=OFF -DLUKA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DTorch_DIR="$torch_prefix/Torch" \
  -DCMAKE_PREFIX_PATH="$root/usr;$root/usr/lib/x86_64-linux-gnu/cmake;$root/usr/share/cmake"
cmake --build build-gpu -j"$(nproc)" --target test_cuda_device test_cuda_decode_attention test_cuda_luka_decode test_cuda_model bench_cuda_decode bench_cuda_model
echo "built: ctest --test-dir build-gpu -R Cuda --output-on-failure; bench/run_cuda_bench.sh build-gpu"
