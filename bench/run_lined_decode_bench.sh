#!/usr/bin/env bash
# Lined against dense decode steps on the default model at a 2K context, the heavy hitters updated
# step to step and ranked from scratch every step, interleaved (bench_lined_decode). Appends a dated
# table to bench/results/lined-decode-cpu.md.
#
#   bench/run_lined_decode_bench.sh [BUILD_DIR] [CONTEXT=2048] [STEPS=8] [ROUNDS=9] [THREADS=2]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
context=${2:-2048}
steps=${3:-8}
rounds=${4:-9}
threads=${5:-2}
model=$root/models/default
cmake --build "$build" --target bench_lined_decode -j "$(nproc)" > /dev/null
out=$root/bench/results/lined-decode-cpu.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $threads thread(s)"
  echo
  echo "Command: \`bench/run_lined_decode_bench.sh $build $context $steps $rounds $threads\`; default model, \`--preset lined\`"
  echo "(W 128, ρ 1/8, per head). Per round, $steps timed steps of each setting in rotating order; medians"
  echo "over $rounds rounds. ms/step (in brackets: the layers' attention). Ratios: dense ms ÷ lined ms"
  echo "(> 1: lined faster), and from-scratch ms ÷ incremental ms; median (min-max) of the rounds' ratios."
  echo
  echo "| dtype | context | dense ms | lined, from scratch ms | lined, incremental ms | dense ÷ lined (from scratch) | dense ÷ lined (incremental) | from scratch ÷ incremental |"
  echo "|---|---|---|---|---|---|---|---|"
  for dtype in fp32 bf16; do
    "$build/bench/bench_lined_decode" "$model" "$dtype" "$context" "$steps" "$rounds" "$threads"
  done
} | tee -a "$out"
