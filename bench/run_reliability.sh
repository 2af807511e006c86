#!/usr/bin/env bash
# Faults measured for real (docs/reliability.md): `luka capture` of the demo prompt on a disk that
# fills at five points of the run (a tmpfs of the capture's size, filled beforehand to leave 10%,
# 50%, 90%, 95% and 98% of it free), each run's exit code, last error line and what `luka inspect`
# reads of the .partial file left; two concurrent captures to one path; the time a 100,000-segment
# prompt file takes to be refused for its length. Needs root (mount). Appends a dated section to
# bench/results/reliability.md.
#
#   sudo bench/run_reliability.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=$build/luka
[[ -x $luka ]] || { echo "no $luka: build first" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "run_reliability.sh mounts a tmpfs: run it as root" >&2; exit 1; }
work=$root/bench/out/reliability
mnt=$work/full
mkdir -p "$work" "$mnt" "$root/bench/results"
out=$root/bench/results/reliability.md
# Rows and covers only: the decode steps, not the prefill maps, are most of the file, so the fill
# points land between steps.
args=(capture --prompt-file "$root/assets/prompts/demo.json" --max-new-tokens 48 --record "parts=rows,covers" --quiet --device cpu --threads 2)

# The whole capture's size, on a normal disk.
rm -f "$work/whole.h5"
"$luka" "${args[@]}" --out "$work/whole.h5" > /dev/null 2> "$work/whole.err"
size=$(stat -c %s "$work/whole.h5")
fs_size=$(( (size + size / 4) / 1048576 + 4 ))  # MiB: room for HDF5's free-space slack

{
  echo
  echo "## $(date -u +%Y-%m-%d) — faults (commit $(git -C "$root" rev-parse --short HEAD))"
  echo
  echo "Command: \`sudo bench/run_reliability.sh\`. Machine: $(nproc) cores, $(uname -sr)."
  echo
  echo "### A disk that fills during \`luka capture\`"
  echo
  echo "The demo prompt, 48 new tokens, rows and covers of every layer and head: $((size / 1024)) KiB when the disk has room."
  echo "A ${fs_size} MiB tmpfs is filled beforehand so that the given share of the capture's size is free."
  echo
  echo "| free space | exit code | last line on standard error | luka inspect of the .partial file |"
  echo "|---|---|---|---|"
} >> "$out"

for pct in 10 50 90 95 98; do
  mountpoint -q "$mnt" && umount "$mnt"
  mount -t tmpfs -o size=${fs_size}m tmpfs "$mnt"
  free=$(( size * pct / 100 ))
  avail=$(( $(stat -f -c '%a*%S' "$mnt") ))
  fallocate -l $(( avail - free )) "$mnt/filler"
  set +e
  "$luka" "${args[@]}" --out "$mnt/cut.h5" > /dev/null 2> "$work/cut-$pct.err"
  code=$?
  set -e
  last=$(tail -1 "$work/cut-$pct.err" | sed "s|$mnt/||g")
  if [[ -f $mnt/cut.h5.partial ]]; then
    read_back=$("$luka" inspect "$mnt/cut.h5.partial" 2>&1 | grep -m1 -E 'steps|error' | sed "s|$mnt/||g" || true)
  elif [[ -f $mnt/cut.h5 ]]; then
    read_back="(the run finished: cut.h5 written)"
  else
    read_back="(no file)"
  fi
  echo "| ${pct}% of the capture | $code | \`$last\` | $read_back |" >> "$out"
  umount "$mnt"
done

# Two captures to one path at once.
rm -f "$work/shared.h5"
"$luka" capture --prompt "Once upon a time" --max-new-tokens 200 --quiet --device cpu --threads 1 --out "$work/shared.h5" \
  > /dev/null 2> "$work/first.err" &
first=$!
for _ in $(seq 600); do [[ -f $work/shared.h5.lock && -f $work/shared.h5.partial ]] && break; sleep 0.05; done
set +e
"$luka" capture --prompt "Hello" --max-new-tokens 4 --quiet --device cpu --out "$work/shared.h5" > /dev/null 2> "$work/second.err"
second=$?
wait $first
first_code=$?
set -e
first_steps=$("$luka" inspect "$work/shared.h5" 2>&1 | grep -m1 steps || true)
{
  echo
  echo "### Two captures to one path"
  echo
  echo "The second, started while the first writes: exit $second, \`$(tail -1 "$work/second.err" | sed "s|$work/||g")\`."
  echo "The first: exit $first_code; its file: $first_steps."
} >> "$out"

# A prompt file of 100,000 segments: refused for its length, after how long.
"$root/.venv/bin/python" - "$work/many.json" <<'EOF'
import json, sys
segments = [{"topic": "ABC"[i % 3], "text": f"Segment {i} says one short thing."} for i in range(100000)]
json.dump({"title": "many", "pattern": "".join(s["topic"] for s in segments), "separator": "\n\n",
           "topics": {t: {"label": t, "colour": c} for t, c in zip("ABC", ["#1f77b4", "#ff7f0e", "#2ca02c"])},
           "segments": segments}, open(sys.argv[1], "w"))
EOF
start=$(date +%s.%N)
set +e
"$luka" capture --prompt-file "$work/many.json" --max-new-tokens 4 --quiet --device cpu --out "$work/many.h5" > /dev/null 2> "$work/many.err"
many=$?
set -e
seconds=$(echo "$(date +%s.%N) - $start" | bc)
{
  echo
  echo "### A prompt file of 100,000 segments"
  echo
  printf 'Exit %s after %.2f s: `%s`\n' "$many" "$seconds" "$(tail -1 "$work/many.err" | sed "s|$work/||g")"
} >> "$out"
echo "appended to $out"
