#!/usr/bin/env bash
# Prefill/decode tokens/s of SmolLM2-135M-Instruct (the default model, Q4_1 GGUF dequantized at
# load) in fp32 and bf16, next to the memory-bandwidth bound measured in the same run. llama.cpp
# is not packaged in Debian 12 (no llama.cpp or ggml package), so the bound is the comparison.
# Appends a dated table to bench/results/smollm2-cpu.md.
#
#   bench/run_smollm2_bench.sh [BUILD_DIR]     (after scripts/setup.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
model=$root/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
[[ -f $model ]] || { echo "no $model: run scripts/setup.sh first" >&2; exit 1; }
cmake --build "$build" --target bench_decode -j "$(nproc)" > /dev/null
mkdir -p "$root/bench/results"
out=$root/bench/results/smollm2-cpu.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo
  echo "Command: \`bench/run_smollm2_bench.sh\`. Model: \`$(basename "$model")\`. Prompt 512 tokens, 128 decode"
  echo "tokens after 4 warm-up steps. Bound: weights read per token (dequantized, compute dtype) ÷ copy bandwidth."
  echo
  echo "| dtype | threads | prefill tok/s | decode tok/s | weight bytes/token | copy bandwidth | bound tok/s | decode / bound | load |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for dtype in fp32 bf16; do "$build/bench/bench_decode" "$model" "$dtype" 512 128; done
} | tee -a "$out"
