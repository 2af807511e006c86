#!/usr/bin/env bash
# Attention-only decode step on the GPU (issue 7): our split-K dense, dense with LuKA's
# accumulators, lined and clustered (bench_cuda_decode), beside PyTorch's
# scaled_dot_product_attention (bench_sdpa_decode.py), for Qwen3-0.6B and Qwen3-4B shapes at 4K,
# 32K and 128K tokens; then end-to-end decode tokens/s per preset on a Qwen3-0.6B-shaped random
# checkpoint (bench_cuda_model; MODEL_TOKENS, default 4096,32768). Appends a dated section to
# bench/results/cuda-decode.md.
#
#   bench/run_cuda_bench.sh [BUILD_DIR]      (default build-gpu, made by scripts/gpu_build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-gpu}"
exe="$build/bench/bench_cuda_decode"
[ -x "$exe" ] || { echo "run_cuda_bench: $exe not built (scripts/gpu_build.sh)" >&2; exit 1; }
ckpt=bench/out/qwen3-0.6b-shape-128k
"${PYTHON:-python3}" bench/make_qwen3_0p6b_shape.py "$ckpt" 0.6b 131072 >&2
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
  echo
  echo "### End to end, Qwen3-0.6B shapes, bf16 (bench_cuda_model)"
  echo
  "$build/bench/bench_cuda_model" "$ckpt" --tokens "${MODEL_TOKENS:-4096,32768}"
} | tee -a "$out"
