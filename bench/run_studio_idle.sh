#!/usr/bin/env bash
# The Studio's CPU use when nothing happens: a capture open (the 2K-token synthetic map of
# run_studio_bench.sh) under Xvfb at 1280x800, no input, for SECONDS (default 20), against the same
# window drawing every frame as it did before it waited for events (a script of frames: scripts
# always draw, their frames are their clock). CPU seconds of the luka process from /proc, both in
# one run; appends a dated section to bench/results/studio-cpu.md.
#
#   bench/run_studio_idle.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
seconds=${2:-20}
luka=$build/luka
work=$root/bench/out/studio-idle
mkdir -p "$work"
[ -f "$work/map2k.h5" ] || "$build/bench/bench_capture_reader" "$work/map2k.h5" 2048 1 1 1 0 > /dev/null
printf 'frames 100000000\n' > "$work/draw.script"
# An X server of its own, so that $! is the Studio itself.
display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp > /dev/null 2>&1 &
xvfb=$!
trap 'kill "$xvfb" 2>/dev/null || true' EXIT
sleep 1
# CPU seconds (user + system) luka used in `seconds` of wall time after a 3 s start-up.
cpu_of() {  # cpu_of EXTRA_ARGS...
  HOME=$work DISPLAY=$display "$luka" studio --size 1280x800 --fresh --no-save --capture "$work/map2k.h5" "$@" > /dev/null 2>&1 &
  local pid=$! tick a b
  sleep 3
  kill -0 "$pid" 2>/dev/null || { echo "run_studio_idle: the Studio did not start" >&2; return 1; }
  tick=$(getconf CLK_TCK)
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep "$seconds"
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  python3 -c "print('%.2f' % (($b - $a) / $tick))"
}
idle=$(cpu_of)
drawing=$(cpu_of --script "$work/draw.script")
{
  printf '\n## %s — idle CPU, %s, Xvfb + llvmpipe, 1280x800\n\n' "$(date -u +%F)" "$(nproc) cores"
  printf 'Command: `bench/run_studio_idle.sh %s %s`. CPU seconds of the luka process over %s s of wall time with\n' "${1:-build}" "$seconds" "$seconds"
  printf 'a 2K-token capture open and no input, after a 3 s start-up (load average before: %s).\n\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
  printf '| loop | CPU s in %s s | share of one core |\n|---|---:|---:|\n' "$seconds"
  printf '| waits for events when idle (the product) | %s | %s%% |\n' "$idle" "$(python3 -c "print('%.1f' % (100 * $idle / $seconds))")"
  printf '| draws every frame (as before; a script of frames) | %s | %s%% |\n' "$drawing" "$(python3 -c "print('%.1f' % (100 * $drawing / $seconds))")"
} | tee -a "$root/bench/results/studio-cpu.md"
