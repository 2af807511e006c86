#!/usr/bin/env bash
# Capture cost on the default model (SmolLM2-135M-Instruct): a 1,024-token prompt (the start of
# Emma) and 64 decode steps with every layer and head recorded — time with capture / time of the
# same run without recording, bytes written and compression for deflate levels 1, 4 and none —
# and the reader on a ~1 GB capture: 512 x 512 windows at every pyramid level.
# Appends a dated section to bench/results/captures-cpu.md.
#
#   bench/run_capture_bench.sh [BUILD_DIR] [TEXT]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
text=${2:-$root/../shared/data/texts/emma.txt}
[[ -f $text ]] || { echo "no text at $text" >&2; exit 1; }
cmake --build "$build" --target luka bench_capture_reader -j "$(nproc)" > /dev/null
work=$root/bench/out/captures
mkdir -p "$work" "$root/bench/results"
out=$root/bench/results/captures-cpu.md
py=$root/.venv/bin/python

reps=${LUKA_BENCH_REPS:-3}
once() {  # args: label, extra capture flags...; prints the seconds of one run
  local label=$1; shift
  sync  # the previous run's writeback does not overlap this one
  "$build/luka" capture --prompt-file "$text" --max-prompt-tokens 1024 --max-new-tokens 65 --quiet "$@" \
    2> "$work/$label.err" > /dev/null
  sed -n 's/.*, \([0-9.]*\) s$/\1/p' "$work/$label.err" | tail -1
}
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
fastest() { printf '%s\n' "$@" | sort -n | head -1; }
range() { printf '%s\n' "$@" | sort -n | sed -n '1h;${H;x;s/\n/–/;p}'; }  # smallest–largest
parts() {  # file -> "stored_MB uncompressed_MB"
  "$build/luka" inspect "$1" --json | "$py" -c 'import json,sys; p=json.load(sys.stdin)["parts"]; s=sum(v["stored"] for v in p.values()); u=sum(v["uncompressed"] for v in p.values()); print("%.1f %.1f" % (s/1e6, u/1e6))'
}
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo
  echo "Command: \`bench/run_capture_bench.sh\`. Default model, fp32; prompt = the first 1,024 tokens of"
  echo "$(basename "$text"); 65 new tokens = 64 decode steps; all 30 layers x 9 heads recorded (maps: levels"
  echo "0-4 of the 1024 x 1024 prefill map; per step: effective rows, covers, page states, metrics)."
  echo "Time = prefill + decode + draining the writer, median of $reps runs (LUKA_BENCH_REPS); ratio = the median over"
  echo "those repetitions of with / without recording, each pair run back to back; fastest ratio = the fastest run"
  echo "with recording / the fastest without (on a machine whose speed drifts during a run, the least disturbed"
  echo "runs). The model uses every core in both (the \`--threads\` default)."
  echo
  echo "| preset | recording | seconds | ratio | ratio range | fastest ratio | file MB | uncompressed MB | compression |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for preset in dense paper; do
    # Each repetition runs the plain run and then every recording back to back, so that a ratio
    # compares runs made under the same conditions on a machine whose speed drifts.
    base_times=(); declare -A times=() ratios=()
    for ((i = 0; i < reps; i++)); do
      base=$(once "$preset-none" --preset "$preset" --record none)
      base_times+=("$base")
      for level in 1 4 none; do
        f=$work/$preset-$level.h5
        rm -f "$f"
        t=$(once "$preset-$level" --preset "$preset" --deflate "$level" --out "$f")
        times[$level]+=" $t"
        ratios[$level]+=" $("$py" -c "print('%.3f' % ($t / $base))")"
      done
    done
    echo "| $preset | none | $(median "${base_times[@]}") | 1.00 | | | | | |"
    for level in 1 4 none; do
      read -r stored raw <<< "$(parts "$work/$preset-$level.h5")"
      # shellcheck disable=SC2086  # the lists are space-separated numbers
      echo "| $preset | all, deflate $level | $(median ${times[$level]}) | $(median ${ratios[$level]}) | $(range ${ratios[$level]}) | $("$py" -c "print('%.3f' % ($(fastest ${times[$level]}) / $(fastest "${base_times[@]}")))") | $stored | $raw | $("$py" -c "print('%.1fx' % ($raw / $stored))") |"
    done
  done
  echo
  echo "Reader on a large capture (\`bench/bench_capture_reader\`: synthetic maps written through the"
  echo "pyramid builder and writer; 6 layers x 8 heads x 4,096 tokens, no compression):"
  echo
  "$build/bench/bench_capture_reader" "$work/large.h5" 4096 6 8 none 20
  rm -f "$work/large.h5"
} | tee -a "$out"
