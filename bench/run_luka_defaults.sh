#!/usr/bin/env bash
# The measurements behind the LuKA presets' defaults (docs/luka-config.md) and the structure of the
# paper's Figs. 4-5, all perplexity of the default model through `luka sweep` and
# `luka perplexity`: the first 1024 tokens of a text prefilled, the next 1024 scored through the
# decode path. Each part writes a sweep folder under bench/out/defaults/ (results.csv,
# results.json, plot.png/svg/pdf; a stopped part resumes); `report` turns them into
# bench/results/luka-defaults.md and copies the figures to bench/results/figures/.
#
#   bench/run_luka_defaults.sh [PART...]      (default: every part, then report)
# Parts:
#   options   clustered at pages 16 / top_k 3: compressor x bias x refine_math at tau 1 (13 runs)
#   tau       attention-weighted + exact: tau x bias (13 runs)
#   heldout   old and new clustered defaults on a second text (5 runs)
#   calibrate the calibration auto reads (luka calibrate on the second text) and paper's budget
#             from it: presets/calibration.json and presets/budget.txt
#   presets   dense, lined, clustered, mixed(8,8), paper, authors_eval and auto (output error and
#             KL) at paper's budget, auto calibrated on the second text (8 runs, after calibrate)
#   fig4      perplexity against the refinement fraction per compressor (13 runs)
#   fig5      refinement rule x mixed layers (9 runs)
#   report    write bench/results/luka-defaults.md from what has run
# Environment: LUKA (the binary, default build/luka), TEXT (default ../shared/data/texts/emma.txt),
# HELDOUT (default ../shared/data/texts/prideprejudice.txt).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
luka=${LUKA:-$root/build/luka}
text=${TEXT:-$root/../shared/data/texts/emma.txt}
heldout=${HELDOUT:-$root/../shared/data/texts/prideprejudice.txt}
out=$root/bench/out/defaults
python=$root/.venv/bin/python
[[ -x $python ]] || python=python3
for f in "$text" "$heldout"; do [[ -f $f ]] || { echo "run_luka_defaults: no text at $f (../shared/data)" >&2; exit 1; }; done
[[ -x $luka ]] || { echo "run_luka_defaults: no luka at $luka (build first)" >&2; exit 1; }
mkdir -p "$out"
scoring=(--max-tokens 2048 --prompt-tokens 1024)

sweep() {  # sweep NAME TEXT SWEEP_OPTIONS...
  local name=$1 file=$2
  shift 2
  "$luka" sweep --metric perplexity --out "$out/$name" "$@" -- --text-file "$file" "${scoring[@]}"
}

part_options() {
  sweep options "$text" --baseline preset=dense --title "clustered, pages 16, top_k 3, tau 1" \
    --grid "preset=clustered;top_k=3;tau=1;bias=none,fixed,adaptive;refine_math=mass_preserving,exact;compressor=mean,attention_weighted"
}
part_tau() {
  sweep tau "$text" --baseline preset=dense --title "attention-weighted summaries, exact refinement" \
    --grid "preset=clustered;compressor=attention_weighted;refine_math=exact;bias=none,adaptive;tau=0.03,0.1,0.25,0.5,1,2"
}
part_heldout() {
  sweep heldout "$heldout" --baseline preset=dense --title "clustered on a second text (tau 0.1)" \
    --grid "preset=clustered;tau=0.1;bias=none;refine_math=mass_preserving,exact;compressor=mean,attention_weighted"
}
part_calibrate() {
  local dir=$out/presets calib=$out/presets/calibration.json
  mkdir -p "$dir"
  # The calibration uses the second text, so auto is not tuned on the text it is scored on; its
  # candidates include paper's two layer settings, whose measured entries give paper's budget.
  if [[ ! -f $calib ]]; then
    # 256 decode steps at 1,536-1,791 tokens of context, inside the scored range (calibration
    # runs every candidate with the dense shadow: far slower than a perplexity run).
    "$luka" calibrate --prompt-file "$heldout" --max-tokens 1792 --prompt-tokens 1536 --out "$calib.tmp" \
      --candidates "lined:rho=0.0625;lined:rho=0.125;lined:rho=0.25;clustered:top_k=1;clustered:top_k=3;clustered:top_k=8;clustered:tau=1,refine_math=mass_preserving"
    mv "$calib.tmp" "$calib"
  fi
  local budget
  budget=$("$python" - "$calib" "$luka" <<'EOF'
import json, math, sys
calib = json.load(open(sys.argv[1]))
# paper: the first and last 8 layers lined (rho 1/8, W 128), the rest clustered at tau 1 with
# mass-preserving refinement; its budget is their entries per step over dense's, summed over layers.
layers = calib["layers"]
n = len(layers)
def entries(layer, spec):
    for c in layer["candidates"]:
        if c["name"] == spec:
            return int(c["entries"] + 0.5)  # the costs auto rounds to (llround)
    raise SystemExit("calibration has no candidate " + spec)
paper = sum(entries(l, "lined:rho=0.125" if (i < 8 or i >= n - 8) else "clustered:tau=1,refine_math=mass_preserving")
            for i, l in enumerate(layers))
dense = sum(int(l["dense_entries"] + 0.5) for l in layers)
print("%.6f" % (math.ceil(paper / dense * 1e6) / 1e6))  # rounded up: paper's own choice fits
EOF
)
  echo "paper's budget: $budget of dense's attended entries" | tee "$dir/budget.txt"
}
part_presets() {
  local dir=$out/presets calib=$out/presets/calibration.json budget
  [[ -f $dir/budget.txt && -f $calib ]] || part_calibrate
  budget=$(sed 's/.*: \([0-9.]*\) of.*/\1/' "$dir/budget.txt")
  local entry name preset
  for entry in dense lined clustered "mixed(8,8)" paper authors_eval "auto=auto:$calib,budget=$budget" \
    "auto-kl=auto:$calib,budget=$budget,loss=kl"; do
    name=${entry%%=*} preset=${entry#*=}
    [[ -f $dir/$name.json ]] && continue
    "$luka" perplexity --text-file "$text" "${scoring[@]}" --preset "$preset" --json > "$dir/$name.json.tmp"
    mv "$dir/$name.json.tmp" "$dir/$name.json"
    echo "$name: $(grep -o '"perplexity": *[0-9.]*' "$dir/$name.json")"
  done
}
part_fig4() {
  sweep fig4 "$text" --baseline preset=dense --x top_frac --title "perplexity against the refined fraction of pages" \
    --grid "preset=clustered;rule=top_frac;compressor=mean,attention_weighted,random;top_frac=0,0.0625,0.25,1"
}
part_fig5() {
  sweep fig5 "$text" --baseline preset=dense --x rule --title "refinement rule and mixed layers" \
    --grid "preset=clustered,mixed(8,8);rule=threshold,top_k,top_frac,top_p"
}
part_report() {
  "$python" "$root/bench/luka_defaults_report.py" "$out" "$root/bench/results" "$(git -C "$root" rev-parse --short HEAD)"
}

parts=("$@")
((${#parts[@]})) || parts=(options tau heldout presets fig4 fig5 report)
for p in "${parts[@]}"; do
  case $p in
    options|tau|heldout|calibrate|presets|fig4|fig5|report) echo "== $p"; "part_$p" ;;
    *) echo "run_luka_defaults: unknown part '$p' (see the script's header)" >&2; exit 2 ;;
  esac
done
