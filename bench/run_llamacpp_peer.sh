#!/usr/bin/env bash
# luka against llama.cpp on the default model (the same GGUF file, threads and prompts), through
# llama-cpp-python, which builds its bundled llama.cpp from source into a bench-only virtualenv
# (bench/.venv-llama; a few minutes the first time). Interleaved runs, medians of ratios, peak
# RSS per process: bench/llamacpp_peer.py. Appends a dated section to bench/results/llamacpp-peer.md.
#
#   bench/run_llamacpp_peer.sh [BUILD_DIR]        (THREADS default 2, REPS default 5,
#                                                   LUKA_OPTIONS: extra luka generate arguments)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=${LUKA:-$build/luka}
model=$(readlink -f "$root/models/default")
venv=$root/bench/.venv-llama
[[ -x $luka ]] || { echo "run_llamacpp_peer: no $luka (build first)" >&2; exit 1; }
[[ -f $model ]] || { echo "run_llamacpp_peer: no default model (scripts/setup.sh)" >&2; exit 1; }
if ! "$venv/bin/python" -c 'import llama_cpp, numpy' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet llama-cpp-python numpy
fi
opts=()
for o in ${LUKA_OPTIONS:-}; do opts+=(--luka-option="$o"); done
table=$("$venv/bin/python" "$root/bench/llamacpp_peer.py" --luka "$luka" --model "$model" --llama-python "$venv/bin/python" \
  --threads "${THREADS:-2}" --reps "${REPS:-5}" "${opts[@]}")
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M') UTC — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Command: \`THREADS=${THREADS:-2} REPS=${REPS:-5} bench/run_llamacpp_peer.sh\` at commit $(git -C "$root" rev-parse --short HEAD);"
  echo "llama-cpp-python $("$venv/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)')."
  echo
  echo "$table"
} | tee -a "$root/bench/results/llamacpp-peer.md"
