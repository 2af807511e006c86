#!/usr/bin/env bash
# Decode step time per LuKA mode and preset (dense, lined, clustered, kascade, paper,
# semanticache) at 1K, 4K and 8K context on a Qwen3-0.6B-shaped model, next to the plain dense
# decoder. Appends a dated table to bench/results/luka-decode-cpu.md.
#
#   bench/run_luka_bench.sh [BUILD_DIR] [CONTEXTS=1024,4096,8192] [STEPS=16]
# WEIGHTS=bf16 (default): the random bf16 checkpoint of bench/make_qwen3_0p6b_shape.py.
# WEIGHTS=q4k: a GGUF file of the same shapes with Q4_K linear weights and a Q6_K embedding
# (bench/make_qwen3_q4k_gguf.py), kept quantized in memory, computing in bf16.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
contexts=${2:-1024,4096,8192}
steps=${3:-16}
weights=${WEIGHTS:-bf16}
case $weights in
  bf16) model=$root/bench/out/qwen3-0.6b-shape
        "$root/.venv/bin/python" "$root/bench/make_qwen3_0p6b_shape.py" "$model" ;;
  q4k) model=$root/bench/out/qwen3-0.6b-q4k/model.gguf
       "$root/.venv/bin/python" "$root/bench/make_qwen3_q4k_gguf.py" "$model" ;;
  *) echo "run_luka_bench: WEIGHTS is bf16 or q4k" >&2; exit 2 ;;
esac
cmake --build "$build" --target bench_luka -j "$(nproc)" > /dev/null
out=$root/bench/results/luka-decode-cpu.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $weights weights, bf16 compute, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Command: \`WEIGHTS=$weights bench/run_luka_bench.sh $build $contexts $steps\`. Default layer settings (lined: W 128,"
  echo "ρ 1/8; clustered: pages of 16, tail 128, attention-weighted, top_k 3, exact); kascade and paper: their"
  echo "presets. ms per decode step, mean of $steps steps; speed-up = baseline ms / mode ms."
  echo
  echo "| context | attention | ms/step | speed-up vs dense | |"
  echo "|---|---|---|---|---|"
  "$build/bench/bench_luka" "$model" bf16 "$contexts" "$steps"
} | tee -a "$out"
