#!/usr/bin/env bash
# Long prompts in the Studio: the peak resident memory of the whole process (VmHWM) when the
# Studio's session layer (no window) runs the first N tokens of Emma on the default model on the
# CPU, with what the live capture holds in memory and in its spill file, the prefill time, and
# the time of 512 x 512 map windows at every level. Appends a dated section to
# bench/results/studio-cpu.md.
#
#   bench/run_studio_long_prompt.sh [BUILD_DIR] [TOKENS ...]     (default: 4096)
#
# LUKA_BENCH_NO_BUILD=1 runs the driver already built (in a tree shared with other builds).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
shift || true
sizes=("${@:-4096}")
[ "${LUKA_BENCH_NO_BUILD:-0}" = 1 ] || cmake --build "$build" --target bench_studio_long_prompt -j "$(nproc)" > /dev/null
model=$root/models/default
text=$root/../shared/data/texts/emma.txt
[ -f "$text" ] || { echo "no $text (long public-domain texts live in ../shared/data/texts)" >&2; exit 1; }
out=$root/bench/results/studio-cpu.md
work=$root/bench/out/studio-long
mkdir -p "$work" "$root/bench/results"
for n in "${sizes[@]}"; do
  "$build/bench/bench_studio_long_prompt" "$model" "$text" "$n" 4 cpu > "$work/$n.txt"
done
val() { sed -n "s/^$2 //p" "$work/$1.txt"; }
{
  echo
  echo "## $(date -u +%Y-%m-%d) — Long prompts: peak RSS ($(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores)"
  echo
  echo "Command: \`bench/run_studio_long_prompt.sh build ${sizes[*]}\`. The Studio's session layer without a window"
  echo "(app/studio/data/run_controller.h) runs the first N tokens of *Emma* as a free-text prompt on the default model"
  echo "(SmolLM2-135M, 30 layers x 9 heads, all recorded, map cap 4096) on the CPU, 4 new tokens; peak RSS is"
  echo "the process's VmHWM after the run (model load included); first map = run start to the first data in the map the"
  echo "Studio opens on (the first layer and head, fitted)."
  echo
  echo "| prompt tokens | first map s | prefill s | run CPU s | map encoding CPU s | peak RSS MiB | RSS after load MiB | live capture in memory MiB | maps in memory MiB | maps spilled MiB |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  for n in "${sizes[@]}"; do
    echo "| $(val "$n" prompt_tokens) | $(val "$n" first_map_s) | $(val "$n" prefill_s) | $(val "$n" run_cpu_s) | $(val "$n" encode_cpu_s_all_layers) | $(val "$n" peak_rss_mib) | $(val "$n" rss_after_load_mib) | $(val "$n" live_memory_mib) | $(val "$n" live_map_memory_mib) | $(val "$n" live_spilled_mib) |"
  done
  echo
  echo "Map encoding CPU s: one layer's stored levels encoded again on one thread, times 30 layers (the session"
  echo "does this work on the model's threads during the prefill; it is part of run CPU s)."
  last=${sizes[${#sizes[@]}-1]}
  echo
  echo "Map windows of the $(val "$last" prompt_tokens)-token run (a middle layer, 512 x 512 at three places, 10 reads each):"
  sed -n '/^| level/,/^$/p' "$work/$last.txt" | sed '/^$/d'
  echo
  echo "Reading a whole layer's stored levels (every head) back: $(val "$last" read_whole_layer_s) s, $(val "$last" read_mb_per_s) MB/s of"
  echo "decoded halves; encoding them: $(val "$last" encode_mb_per_s) MB/s on one thread."
} | tee -a "$out"
