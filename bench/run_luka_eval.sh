#!/usr/bin/env bash
# WikiSalad QA exact match (the paper's Table 1 layout) on the default model through
# `luka eval wikisalad`: presets x difficulty over the four WikiSalad files, EXAMPLES examples each
# (default 10, as the paper's Table 1: 360 questions per preset). `auto` is the layers config
# chosen at paper's budget from bench/run_luka_defaults.sh's calibration (its `calibrate` part runs
# first when bench/out/defaults/presets has none); the config is written as
# bench/out/defaults/presets/auto-config.json and copied beside the results. A stopped run resumes,
# from bench/out/em-N or, on a fresh clone, from the answers kept in bench/results/luka-eval-N/.
# Appends a dated section with the table to bench/results/luka-eval.md.
#
#   bench/run_luka_eval.sh [BUILD_DIR]
# Environment: EXAMPLES (default 10), PRESETS (default dense,lined,clustered,mixed(8,8),paper,
# authors_eval and auto), LUKA (the binary, default BUILD_DIR/luka: give a copy for a long run
# while the tree rebuilds), THREADS (default all cores).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=${LUKA:-$build/luka}
data=$root/../shared/data/wikisalad
examples=${EXAMPLES:-10}
threads=()
[[ -z ${THREADS:-} ]] || threads=(--threads "$THREADS")
[[ -x $luka ]] || { echo "run_luka_eval: no $luka (build first)" >&2; exit 1; }
[[ -d $data ]] || { echo "run_luka_eval: no WikiSalad data at $data (../shared/data)" >&2; exit 1; }
defaults=$root/bench/out/defaults/presets
auto=$defaults/auto-config.json
if [[ ! -f $auto && ( ! -f $defaults/calibration.json || ! -f $defaults/budget.txt ) && -z ${PRESETS:-} ]]; then
  LUKA=$luka "$root/bench/run_luka_defaults.sh" calibrate
fi
if [[ ! -f $auto && -f $defaults/calibration.json && -f $defaults/budget.txt ]]; then
  budget=$(sed 's/.*: \([0-9.]*\) of.*/\1/' "$defaults/budget.txt")
  "$luka" info --preset "auto:$defaults/calibration.json,budget=$budget" --config |
    python3 -c 'import json, sys; t = sys.stdin.read(); json.dump(json.loads(t[t.index("\n{") + 1:]), open(sys.argv[1], "w"), indent=1)' "$auto"
fi
presets=${PRESETS:-dense,lined,clustered,mixed(8,8),paper,authors_eval,$auto}
[[ -f $auto || -n ${PRESETS:-} ]] || { echo "run_luka_eval: no auto config at $auto (bench/run_luka_defaults.sh calibrate)" >&2; exit 1; }
out=$root/bench/out/em-$examples
kept=$root/bench/results/luka-eval-$examples  # a run's answers so far, committed: a later run resumes from them
mkdir -p "$out"
if [[ ! -f $out/results.jsonl && -f $kept/results.jsonl ]]; then
  cp "$kept/results.jsonl" "$kept/run.json" "$out/"
  [[ -f $auto || ! -f $kept/auto-config.json ]] || { mkdir -p "$defaults"; cp "$kept/auto-config.json" "$auto"; }
fi
[[ -f $auto ]] && cp "$auto" "$out/auto-config.json"
"$luka" eval wikisalad --data "$data" --examples "$examples" --presets "$presets" --out "$out" "${threads[@]}" > "$out.table.txt"
{
  echo
  echo "## $(date -u +%Y-%m-%d) — WikiSalad exact match, $examples example(s) per file (commit $(git -C "$root" rev-parse --short HEAD))"
  echo
  echo "Command: \`EXAMPLES=$examples bench/run_luka_eval.sh\`, that is \`luka eval wikisalad --data wikisalad/ --examples $examples"
  echo "--presets \"${presets//$root\//}\"\`: the default model, greedy, at most 100 new tokens, the authors' prompt and"
  echo "lenient exact match (docs/evaluation.md). auto-config.json is \`auto\` at paper's budget from"
  echo "bench/results/luka-defaults.md. Per-question answers: bench/out/em-$examples/results.jsonl."
  echo
  echo '```'
  cat "$out.table.txt"
  echo '```'
} >> "$root/bench/results/luka-eval.md"
mkdir -p "$kept"
cp "$out/results.jsonl" "$out/run.json" "$kept/"
[[ -f $out/auto-config.json ]] && cp "$out/auto-config.json" "$kept/"
echo "appended to bench/results/luka-eval.md; answers kept in ${kept#$root/}"
