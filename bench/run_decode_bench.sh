#!/usr/bin/env bash
# Prefill/decode tokens/s on a Qwen3-0.6B-shaped checkpoint, fp32 and bf16, next to the
# memory-bandwidth bound measured in the same run. Appends a dated table to bench/results/decode-cpu.md.
#
#   bench/run_decode_bench.sh [BUILD_DIR]     (after scripts/setup.sh)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
ckpt=$root/bench/out/qwen3-0.6b-shape
mkdir -p "$root/bench/out" "$root/bench/results"
"$root/.venv/bin/python" "$root/bench/make_qwen3_0p6b_shape.py" "$ckpt"
cmake --build "$build" --target bench_decode -j "$(nproc)" > /dev/null
out=$root/bench/results/decode-cpu.md
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo
  echo "Command: \`bench/run_decode_bench.sh\`. Prompt 512 tokens, 64 decode tokens after 4 warm-up steps."
  echo
  echo "| dtype | threads | prefill tok/s | decode tok/s | weight bytes/token | copy bandwidth | bound tok/s | decode / bound | load |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for dtype in fp32 bf16; do "$build/bench/bench_decode" "$ckpt" "$dtype" 512 64; done
} | tee -a "$out"
