#!/usr/bin/env bash
# Studio frame time under Xvfb (Mesa llvmpipe, a software renderer) at 1280x800 with a 2K-token
# and a 32K-token synthetic map on screen (alone, and with a second capture in the compare canvas
# and the Topics tab open), and the time from launch to the first frame showing a map when opening
# a ~1.2 GB capture. Appends a dated section to bench/results/studio-cpu.md.
#
#   bench/run_studio_bench.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
cmake --build "$build" --target luka bench_capture_reader -j "$(nproc)" > /dev/null
work=$root/bench/out/studio
mkdir -p "$work" "$root/bench/results"
out=$root/bench/results/studio-cpu.md
# Synthetic captures written through the real pipeline: 2K tokens (levels 0-5), 32K tokens (map
# cap 2048: levels 4-9), and the ~1.2 GB one of the capture bench (4K tokens, 6 layers x 8 heads).
"$build/bench/bench_capture_reader" "$work/map2k.h5" 2048 1 1 1 0 > /dev/null
"$build/bench/bench_capture_reader" "$work/map32k.h5" 32768 1 1 1 0 2048 8 > /dev/null
cp "$work/map32k.h5" "$work/map32k-b.h5"
"$build/bench/bench_capture_reader" "$work/large.h5" 4096 6 8 none 0 > /dev/null
printf 'wait_idle 60\nframes 10\nmeasure 300\nprint_first_map\nquit\n' > "$work/measure.script"
# The heaviest steady view: a second capture beside the map (the compare canvas) and the Topics tab.
printf 'wait_idle 60\ncompare %s\nshow_topics\nframes 10\nwait_idle 60\nframes 10\nmeasure 300\nprint_first_map\nquit\n' "$work/map32k-b.h5" \
  > "$work/compare.script"
run() {  # capture [script] -> the studio's timing lines
  xvfb-run -a -s "-screen 0 1280x800x24" "$build/luka" studio --capture "$1" --script "${2:-$work/measure.script}" 2> /dev/null
}
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, Xvfb + llvmpipe, 1280x800"
  echo
  echo "Command: \`bench/run_studio_bench.sh\`. Frame times over 300 frames with the map on screen (vsync off),"
  echo "after 10 warm-up frames; first map frame = launch to the first frame that draws a map."
  echo
  echo "| capture | frame time | first map frame |"
  echo "|---|---|---|"
  for c in map2k map32k large map32k+compare+topics; do
    file=${c%%+*}
    script=$work/measure.script
    [[ $c == *compare* ]] && script=$work/compare.script
    t=$(run "$work/$file.h5" "$script")
    frames=$(echo "$t" | sed -n 's/^frames [0-9]* //p')
    first=$(echo "$t" | sed -n 's/^first map frame \([0-9.]*\) ms.*/\1 ms/p')
    size=$(du -h "$work/$file.h5" | cut -f1)
    echo "| $c ($size) | $frames | $first |"
  done
} | tee -a "$out"
rm -f "$work/large.h5"
