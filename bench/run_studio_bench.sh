#!/usr/bin/env bash
# Studio frame time under Xvfb (Mesa llvmpipe, a software renderer) at 1280x800 with a 2K-token
# and a 32K-token synthetic map on screen (alone, and with a second capture in the compare canvas
# and the Topics tab open, its segment matrix computed), and the time from launch to the first
# frame showing a map when opening a ~1.2 GB capture. Appends a dated section to
# bench/results/studio-cpu.md, with the load average (the frame times are wall-clock).
#
#   bench/run_studio_bench.sh [BUILD_DIR]
#
# LUKA_BENCH_NO_BUILD=1 runs the binaries already built (in a tree shared with other builds).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
[ "${LUKA_BENCH_NO_BUILD:-0}" = 1 ] || cmake --build "$build" --target luka bench_capture_reader -j "$(nproc)" > /dev/null
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
work=$root/bench/out/studio
mkdir -p "$work" "$root/bench/results"
out=$root/bench/results/studio-cpu.md
# Synthetic captures written through the real pipeline: 2K tokens (levels 0-5); 32K tokens of 8
# segments of two topics, every level stored (level 0 is the 32768² map the Topics tab's segment
# matrix sums: 0.9 GB for its one layer and head) and 8 clustered decode steps with rows and covers
# (the tab's per-step bars, leakage and refined pages by topic); and the ~1.2 GB one of the capture
# bench (4K tokens, 6 layers x 8 heads).
"$build/bench/bench_capture_reader" "$work/map2k.h5" 2048 1 1 1 0 > /dev/null
"$build/bench/bench_capture_reader" "$work/map32k.h5" 32768 1 1 1 0 32768 8 8 > /dev/null
cp "$work/map32k.h5" "$work/map32k-b.h5"
"$build/bench/bench_capture_reader" "$work/large.h5" 4096 6 8 none 0 > /dev/null
printf 'wait_idle 60\nframes 10\nmeasure 300\nprint_first_map\nquit\n' > "$work/measure.script"
# The heaviest steady view: a second capture beside the map (the compare canvas) and the Topics
# tab, measured once its analysis has finished (a screenshot waits for the background work).
printf 'wait_idle 60\ncompare %s\nshow_topics\nframes 10\nscreenshot %s\nframes 10\nmeasure 300\nprint_first_map\nquit\n' "$work/map32k-b.h5" \
  "$work/compare-topics.png" > "$work/compare.script"
# The Topics tab's computation for the 32K capture's layer and head, as `luka inspect` runs it.
topics_start=$(date +%s%N)
"$build/luka" inspect "$work/map32k.h5" --topics --layer 0 --head 0 --json > "$work/topics32k.json"
topics_ms=$((($(date +%s%N) - topics_start) / 1000000))
run() {  # capture [script] -> the studio's timing lines
  xvfb-run -a -s "-screen 0 1280x800x24" "$build/luka" studio --capture "$1" --script "${2:-$work/measure.script}" 2> /dev/null
}
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, Xvfb + llvmpipe, 1280x800"
  echo
  echo "Command: \`bench/run_studio_bench.sh\`. Frame times over 300 frames with the map on screen (vsync off),"
  echo "after 10 warm-up frames; first map frame = launch to the first frame that draws a map. Load average"
  echo "(1, 5, 15 min) before: $load_before."
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
  echo
  echo "map32k: 32,768 prompt tokens + 8 decode steps, every level stored. The Topics tab's analysis of its layer and"
  echo "head (\`luka inspect --topics --layer 0 --head 0\`, the 32768² level 0 summed): $((topics_ms / 1000)).$((topics_ms % 1000 / 100)) s; the compare"
  echo "row was measured after it finished. Load average after: $(cut -d' ' -f1-3 /proc/loadavg)."
} | tee -a "$out"
rm -f "$work/large.h5" "$work/map32k-b.h5"
