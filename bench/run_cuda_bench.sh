#!/usr/bin/env bash
# Attention-only decode step on the GPU (issue 7): our split-K dense, dense with LuKA's
# accumulators, lined and clustered (bench_cuda_decode), beside PyTorch's
# scaled_dot_product_attention (bench_sdpa_decode.py), for Qwen3-0.6B and Qwen3-4B shapes at 4K,
# 32K and 128K tokens. Appends a dated section to bench/results/cuda-decode.md.
#
#   bench/run_cuda_bench.sh [BUILD_DIR]      (default build-gpu, made by scripts/gpu_build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
exe="$build/bench/bench_cuda_decode"
[ -x "$exe" ] || { echo "run_cuda_bench: $exe not built (scripts/gpu_build.sh)" >&2; exit 1; }
out=bench/results/cuda-decode.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — \`bench/run_cuda_bench.sh $build\` at $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo
  echo "### LuKA kernels (bench_cuda_decode)"
  echo
  "$exe"
  echo
  echo "### PyTorch's decode attention (bench_sdpa_decode.py)"
  echo
  "${PYTHON:-python3}" bench/bench_sdpa_decode.py
} | tee -a "$out"
