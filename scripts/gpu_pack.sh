#!/usr/bin/env bash
# Run on the development machine (Debian, the CUDA toolkit, the virtualenv's CUDA LibTorch): builds
# the CUDA tests and benchmarks in build-gpu for CUDA_ARCH (default 90: H100 / H200) and copies
# them into .gpubin/ (ignored by git, about 15 MB) beside the LibTorch version they link. A GPU
# machine with the same PyTorch version then runs them without building anything:
#
#   scripts/gpu_pack.sh [CUDA_ARCH]          here
#   scripts/gpu_run.sh [tests|sanitize|bench|all]   there, in the checkout with .gpubin/ carried
set -euo pipefail
cd "$(dirname "$0")/.."
arch="${1:-90}"
py="${PYTHON:-.venv/bin/python}"
version="$("$py" -c 'import torch; print(torch.__version__)')" || { echo "gpu_pack: $py has no torch" >&2; exit 1; }
case "$version" in
  *+cpu) echo "gpu_pack: $py's torch $version has no CUDA" >&2; exit 1 ;;
esac
ls .gpu/debs/*.deb >/dev/null 2>&1 || scripts/gpu_deps.sh
PYTHON="$py" scripts/gpu_build.sh "$arch"
rm -rf .gpubin
mkdir -p .gpubin/tests .gpubin/bench
cp build-gpu/tests/kernels/cuda/test_cuda_{device,decode_attention,luka_decode,model} .gpubin/tests/
cp build-gpu/bench/bench_cuda_{decode,model} .gpubin/bench/
echo "$version" > .gpubin/TORCH_VERSION
echo "sm_$arch" > .gpubin/ARCH
du -sh .gpubin
echo "packed for torch $version, sm_$arch: carry .gpubin and run scripts/gpu_run.sh on the GPU machine"
