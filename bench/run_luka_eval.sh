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
# while the tree rebuilds), THREADS (default all cores), JOBS (default 1: with N > 1 the presets
# are shared out among N `luka eval` processes, e.g. JOBS=2 THREADS=1 on a 2-core machine).
#
# To keep a stopped run's answers for a fresh clone before it finishes: bench/run_luka_eval.sh keep
set -euo pipefail
mode=run
if [[ ${1:-} == keep ]]; then mode=keep; shift; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=${LUKA:-$build/luka}
data=$root/../shared/data/wikisalad
examples=${EXAMPLES:-10}
threads=()
[[ -z ${THREADS:-} ]] || threads=(--threads "$THREADS")
defaults=$root/bench/out/defaults/presets
auto=$defaults/auto-config.json
out=$root/bench/out/em-$examples
kept=$root/bench/results/luka-eval-$examples  # a run's answers so far, committed: a later run resumes from them
mkdir -p "$out"
# A fresh clone resumes from the kept answers, with the auto config they were made with.
if [[ ! -f $out/results.jsonl && -f $kept/results.jsonl ]]; then
  cp "$kept/results.jsonl" "$kept/run.json" "$out/"
  [[ -f $auto || ! -f $kept/auto-config.json ]] || { mkdir -p "$defaults"; cp "$kept/auto-config.json" "$auto"; }
fi
# The answers of part folders (JOBS > 1) merged into $out: every valid line once per question
# (preset, file, example, question), the first one kept; run.json's presets joined. A part
# stopped mid-line loses that line only. The part folders are then removed.
merge_parts() {
  local parts=() d
  for d in "$out".part*; do [[ ! -d $d ]] || parts+=("$d"); done  # the folders, not their logs
  (( ${#parts[@]} )) || return 0
  python3 - "$out" "${parts[@]}" <<'EOF'
import json, os, sys
out, parts = sys.argv[1], sys.argv[2:]
seen, lines, run = set(), [], {}
for d in [out] + parts:
    path = os.path.join(d, "results.jsonl")
    if os.path.exists(path):
        for raw in open(path, "rb").read().split(b"\n"):  # JSONL: lines end at \n only
            try:
                r = json.loads(raw)
            except ValueError:
                continue
            key = (r["preset"], r["file"], r["example"], r["question"])
            if key not in seen:
                seen.add(key)
                lines.append(raw)
    path = os.path.join(d, "run.json")
    if os.path.exists(path):
        info = json.load(open(path))
        if not run:
            run = info
        run.setdefault("presets", {}).update(info.get("presets", {}))
if run:
    json.dump(run, open(os.path.join(out, "run.json.tmp"), "w"), indent=2)
    os.replace(os.path.join(out, "run.json.tmp"), os.path.join(out, "run.json"))
open(os.path.join(out, "results.jsonl.tmp"), "wb").write(b"".join(l + b"\n" for l in lines))
os.replace(os.path.join(out, "results.jsonl.tmp"), os.path.join(out, "results.jsonl"))
print(f"run_luka_eval: merged {len(parts)} part folder(s): {len(lines)} answers in {out}", file=sys.stderr)
EOF
  rm -rf "${parts[@]}"
}
keep() {
  mkdir -p "$kept"
  cp "$out/results.jsonl" "$out/run.json" "$kept/"
  [[ ! -f $auto ]] || cp "$auto" "$kept/auto-config.json"
  echo "answers kept in ${kept#$root/}"
}
merge_parts
if [[ $mode == keep ]]; then keep; exit 0; fi
[[ -x $luka ]] || { echo "run_luka_eval: no $luka (build first)" >&2; exit 1; }
[[ -d $data ]] || { echo "run_luka_eval: no WikiSalad data at $data (../shared/data)" >&2; exit 1; }
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
[[ ! -f $auto ]] || cp "$auto" "$out/auto-config.json"

jobs=${JOBS:-1}
if (( jobs > 1 )); then
  # The preset list split at its top-level commas (mixed(8,8) is one preset), dealt round-robin.
  mapfile -t list < <(python3 -c 'import sys
depth, cur = 0, ""
for ch in sys.argv[1]:
    depth += ch == "("; depth -= ch == ")"
    if ch == "," and depth == 0:
        print(cur); cur = ""
    else:
        cur += ch
print(cur)' "$presets")
  pids=()
  for ((j = 0; j < jobs; ++j)); do
    part=()
    for ((i = j; i < ${#list[@]}; i += jobs)); do part+=("${list[i]}"); done
    (( ${#part[@]} )) || continue
    dir=$out.part$j
    mkdir -p "$dir"
    [[ ! -f $out/results.jsonl ]] || cp "$out/results.jsonl" "$out/run.json" "$dir/"
    joined=$(IFS=,; echo "${part[*]}")
    "$luka" eval wikisalad --data "$data" --examples "$examples" --presets "$joined" --out "$dir" "${threads[@]}" \
      > "$dir.table.txt" 2> "$dir.log" &
    pids+=($!)
    echo "run_luka_eval: part $j: $joined (progress in ${dir#$root/}.log)" >&2
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  merge_parts
  (( status == 0 )) || { echo "run_luka_eval: a part failed (logs above); its answers so far are merged into $out" >&2; exit 1; }
fi
"$luka" eval wikisalad --data "$data" --examples "$examples" --presets "$presets" --out "$out" "${threads[@]}" > "$out.table.txt"
{
  echo
  echo "## $(date -u +%Y-%m-%d) — WikiSalad exact match, $examples example(s) per file (commit $(git -C "$root" rev-parse --short HEAD))"
  echo
  echo "Command: \`EXAMPLES=$examples bench/run_luka_eval.sh\`, that is \`luka eval wikisalad --data wikisalad/ --examples $examples"
  echo "--presets \"${presets//$root\//}\"\`: the default model, greedy, at most 100 new tokens, the authors' prompt and"
  echo "lenient exact match (docs/evaluation.md). auto-config.json is \`auto\` at paper's budget from"
  echo "bench/results/luka-defaults.md. Per-question answers: bench/results/luka-eval-$examples/results.jsonl."
  echo
  echo '```'
  cat "$out.table.txt"
  echo '```'
} >> "$root/bench/results/luka-eval.md"
keep
echo "appended to bench/results/luka-eval.md"
