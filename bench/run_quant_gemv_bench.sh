#!/usr/bin/env bash
# One-row GEMV on GGUF-quantized weights (kernels/cpu/quant_gemv) against linear_row in bf16 on
# the same weights dequantized, at SmolLM2-135M and Qwen3-0.6B shapes: GB/s of weight bytes and
# the speed-up, medians of interleaved repetitions in one run. Appends a dated table to
# bench/results/cpu-quant-gemv.md.
#
#   bench/run_quant_gemv_bench.sh [BUILD_DIR] [REPS=11] [THREADS=2] [STREAM_MB=128]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
reps=${2:-11}
threads=${3:-2}
stream_mb=${4:-128}
cmake --build "$build" --target bench_quant_gemv -j "$(nproc)" > /dev/null
mkdir -p "$root/bench/results"
out=$root/bench/results/cpu-quant-gemv.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg) at start"
  echo
  echo "Command: \`bench/run_quant_gemv_bench.sh $build $reps $threads $stream_mb\`. $threads threads; each matrix copied"
  echo "to fill ${stream_mb} MB and the calls cycle through the copies (weights from memory, not cache). Medians of $reps"
  echo "interleaved repetitions; speed-up = bf16 time ÷ quantized time (the quantized call includes quantizing its input)."
  echo
  "$build/bench/bench_quant_gemv" "$reps" "$threads" "$stream_mb"
} | tee -a "$out"
