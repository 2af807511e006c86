#!/usr/bin/env bash
# Decode step time per LuKA mode at 1K, 4K and 8K context on the Qwen3-0.6B-shaped checkpoint
# (bf16), next to the plain dense decoder. Appends a dated table to bench/results/luka-decode-cpu.md.
#
#   bench/run_luka_bench.sh [BUILD_DIR] [CONTEXTS=1024,4096,8192] [STEPS=16]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
contexts=${2:-1024,4096,8192}
steps=${3:-16}
ckpt=$root/bench/out/qwen3-0.6b-shape
"$root/.venv/bin/python" "$root/bench/make_qwen3_0p6b_shape.py" "$ckpt"
cmake --build "$build" --target bench_luka -j "$(nproc)" > /dev/null
out=$root/bench/results/luka-decode-cpu.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, bf16"
  echo
  echo "Command: \`bench/run_luka_bench.sh\`. Default layer settings (lined: W 128, ρ 1/8; clustered: pages of 16,"
  echo "tail 128, mean compressor, top_k 3, mass-preserving). ms per decode step, mean of $steps steps;"
  echo "speed-up = baseline ms / mode ms."
  echo
  echo "| context | attention | ms/step | speed-up vs dense | |"
  echo "|---|---|---|---|---|"
  "$build/bench/bench_luka" "$ckpt" bf16 "$contexts" "$steps"
} | tee -a "$out"
