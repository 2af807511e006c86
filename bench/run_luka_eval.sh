#!/usr/bin/env bash
# WikiSalad QA exact match (the paper's Table 1 layout) on the default model through
# `luka eval wikisalad`: presets x difficulty over the four WikiSalad files, EXAMPLES examples each
# (default 1; the paper used 10, about 4 hours per preset set on 2 CPU cores at 10). `auto` is the
# layers config bench/run_luka_defaults.sh's presets part chose at paper's budget (written here as
# bench/out/defaults/presets/auto-config.json; run that part first). A stopped run resumes.
# Appends a dated section with the table to bench/results/luka-eval.md.
#
#   bench/run_luka_eval.sh [BUILD_DIR]        (EXAMPLES, PRESETS environment)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=$build/luka
data=$root/../shared/data/wikisalad
examples=${EXAMPLES:-1}
[[ -x $luka ]] || { echo "run_luka_eval: no $luka (build first)" >&2; exit 1; }
[[ -d $data ]] || { echo "run_luka_eval: no WikiSalad data at $data (../shared/data)" >&2; exit 1; }
defaults=$root/bench/out/defaults/presets
auto=$defaults/auto-config.json
if [[ ! -f $auto && -f $defaults/calibration.json && -f $defaults/budget.txt ]]; then
  budget=$(sed 's/.*: \([0-9.]*\) of.*/\1/' "$defaults/budget.txt")
  "$luka" info --preset "auto:$defaults/calibration.json,budget=$budget" --config |
    python3 -c 'import json, sys; t = sys.stdin.read(); json.dump(json.loads(t[t.index("\n{") + 1:]), open(sys.argv[1], "w"), indent=1)' "$auto"
fi
presets=${PRESETS:-dense,clustered,paper,mixed(8,8)${auto:+,$auto}}
[[ -f $auto ]] || presets=${PRESETS:-dense,clustered,paper,mixed(8,8)}
out=$root/bench/out/em-$examples
"$luka" eval wikisalad --data "$data" --examples "$examples" --presets "$presets" --out "$out" > "$out.table.txt"
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
echo "appended to bench/results/luka-eval.md"
