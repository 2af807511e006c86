#!/usr/bin/env bash
# The related methods (docs/methods.md) next to LuKA's presets on the default model: perplexity of
# emma.txt (the first 1024 tokens prefilled, the next 1024 scored through the decode path) with the
# entries each attends per decode step as a fraction of dense's (`attended_fraction`). Each part
# writes a `luka sweep` folder under bench/out/methods/ (a stopped part resumes); `report` writes
# bench/results/methods.md and copies the figures to bench/results/figures/.
#
#   bench/run_methods.sh [PART...]      (default: every part, then report)
# Parts:
#   kascade-calibrate  luka calibrate --kascade 5 on the second text: bench/out/methods/kascade.json
#   kascade            the `kascade` preset (the paper's anchor depths) at top-k 5, 10, 25, 50% (4 runs)
#   kascade-calibrated the calibrated anchors and head maps at the same top-k (4 runs)
#   presets            dense, lined, clustered, mixed(8,8) and paper (5 runs)
#   lined              lined with window and heavy hitters each 2.5 or 12.5% of the context (4 runs)
#   clustered          clustered refining 0, 1/16, 1/8, 1/4 or 1/2 of its pages (top_frac, 5 runs)
#   dar-calibrate      luka calibrate --dar on the second text: bench/out/methods/dar.npy
#   dar                the DAR probe: keys and values beyond a window of 128 or 512 tokens projected
#                      onto 16 or 32 of the 64 principal directions, keys before or after RoPE (8 runs)
#   dar-sink           the DAR probe as in `dar` (keys before RoPE) with the first 4 positions whole (4 runs)
#   dar-fidelity       the DAR probe's fidelity against dense (luka perplexity --fidelity) at window 128
#                      rank 16 and window 512 rank 32, keys before RoPE (2 runs)
#   semanticache       the semanticache preset (delimiter chunks, GSC, proportional attention) at
#                      gsc_tau 0.3, 0.5, 0.7, 0.9, and at 0.7 refining 1 or 3 clusters per step (6 runs)
#   budgets            every method at matched budgets of 10, 25 and 50% of dense's attended entries
#                      (the DAR probe, which attends every entry, at those fractions of KV bytes kept);
#                      knob values from the sweeps above, the attended fraction reached is reported
#                      (needs kascade-calibrate, dar-calibrate and bench/run_luka_defaults.sh calibrate)
#   budgets-eval       WikiSalad exact match of the budgets' configs (EXAMPLES per file, default 1;
#                      BUDGETS: the levels, default "0.10 0.25 0.50", for this part and budgets)
#   presses            kvpress's methods, Quest and TOVA's eviction at 10, 25 and 50% of the prompt's
#                      1,024 entries (30 runs; the outputs are kept in bench/results/methods-presses/,
#                      so a fresh clone resumes), then their section of bench/results/methods.md
#   presses-report     that section alone, from bench/results/methods-presses/
#   report             write bench/results/methods.md from what has run
# Environment: LUKA (the binary, default build/luka), TEXT (default ../shared/data/texts/emma.txt),
# HELDOUT (default ../shared/data/texts/prideprejudice.txt).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
luka=${LUKA:-$root/build/luka}
text=${TEXT:-$root/../shared/data/texts/emma.txt}
heldout=${HELDOUT:-$root/../shared/data/texts/prideprejudice.txt}
out=$root/bench/out/methods
python=$root/.venv/bin/python
[[ -x $python ]] || python=python3
for f in "$text" "$heldout"; do [[ -f $f ]] || { echo "run_methods: no text at $f (../shared/data)" >&2; exit 1; }; done
[[ -x $luka ]] || { echo "run_methods: no luka at $luka (build first)" >&2; exit 1; }
mkdir -p "$out"
scoring=(--text-file "$text" --max-tokens 2048 --prompt-tokens 1024 --weights dequantized)
fractions="0.05,0.1,0.25,0.5"

part_kascade_calibrate() {
  # The calibration reads the second text, so the anchors are not tuned on the scored one.
  [[ -f $out/kascade.json ]] || "$luka" calibrate --prompt-file "$heldout" --max-tokens 1024 --kascade 5 \
    --weights dequantized --out "$out/kascade.json" | tee "$out/kascade.txt"
}
part_kascade() {
  "$luka" sweep --metric perplexity --out "$out/kascade" --baseline preset=dense --title "kascade preset (paper's anchor depths)" \
    --grid "preset=kascade;kascade_top_frac=$fractions" -- "${scoring[@]}"
}
part_kascade_calibrated() {
  [[ -f $out/kascade.json ]] || { echo "run_methods: run the kascade-calibrate part first" >&2; exit 1; }
  # The baseline overrides the layers config's mode (a --preset would replace the file).
  "$luka" sweep --metric perplexity --out "$out/kascade-calibrated" --baseline mode=dense \
    --title "kascade, calibrated anchors and head maps" --grid "kascade_top_frac=$fractions" \
    -- "${scoring[@]}" --layers-config "$out/kascade.json"
}
part_presets() {
  "$luka" sweep --metric perplexity --out "$out/presets" --title "LuKA presets" \
    --grid "preset=dense,lined,clustered,mixed(8,8),paper" -- "${scoring[@]}"
}
part_lined() {
  "$luka" sweep --metric perplexity --out "$out/lined" --title "lined: window and heavy hitters as fractions" \
    --grid "preset=lined;window_frac=0.025,0.125;rho=0.025,0.125" -- "${scoring[@]}"
}
part_clustered() {
  "$luka" sweep --metric perplexity --out "$out/clustered" --title "clustered: pages refined (top_frac)" \
    --grid "preset=clustered;rule=top_frac;top_frac=0,0.0625,0.125,0.25,0.5" -- "${scoring[@]}"
}
part_dar_calibrate() {
  [[ -f $out/dar.npy ]] || "$luka" calibrate --prompt-file "$heldout" --max-tokens 2048 --dar \
    --weights dequantized --out "$out/dar.npy" | tee "$out/dar.txt"
}
part_dar() {
  [[ -f $out/dar.npy ]] || { echo "run_methods: run the dar-calibrate part first" >&2; exit 1; }
  "$luka" sweep --metric perplexity --out "$out/dar" --baseline preset=dense --title "DAR probe: window and rank" \
    --grid "dar_basis=$out/dar.npy;dar_keys=pre_rope,post_rope;dar_window=128,512;dar_rank=16,32" -- "${scoring[@]}"
}
part_dar_sink() {
  [[ -f $out/dar.npy ]] || { echo "run_methods: run the dar-calibrate part first" >&2; exit 1; }
  "$luka" sweep --metric perplexity --out "$out/dar-sink" --baseline preset=dense --title "DAR probe, the first 4 positions whole" \
    --grid "dar_basis=$out/dar.npy;dar_keys=pre_rope;dar_sink=4;dar_window=128,512;dar_rank=16,32" -- "${scoring[@]}"
}
part_dar_fidelity() {
  [[ -f $out/dar.npy ]] || { echo "run_methods: run the dar-calibrate part first" >&2; exit 1; }
  mkdir -p "$out/dar-fidelity"
  for wr in 128:16 512:32; do
    local w=${wr%:*} r=${wr#*:} f="$out/dar-fidelity/w${wr%:*}-r${wr#*:}.json"
    [[ -s $f ]] && continue
    "$luka" perplexity "${scoring[@]}" --fidelity --json --set "dar_basis=$out/dar.npy,dar_window=$w,dar_rank=$r" > "$f.partial"
    mv "$f.partial" "$f"
  done
}
part_semanticache() {
  "$luka" sweep --metric perplexity --out "$out/semanticache" --baseline preset=dense --title "SemantiCache pages: GSC threshold" \
    --grid "preset=semanticache;gsc_tau=0.3,0.5,0.7,0.9" -- "${scoring[@]}"
  "$luka" sweep --metric perplexity --out "$out/semanticache-refined" --title "SemantiCache pages refined as LuKA pages" \
    --grid "preset=semanticache;gsc_tau=0.7;top_k=1,3" -- "${scoring[@]}"
}
# name budget luka-arguments...: one matched-budget run, skipped when its JSON exists.
budget_run() {
  local name=$1 budget=$2 f="$out/budgets/$1-$2.json"
  shift 2
  mkdir -p "$out/budgets"
  [[ -s $f ]] && return 0
  if "$luka" perplexity "${scoring[@]}" --json "$@" > "$f.partial" 2> "$f.err"; then
    mv "$f.partial" "$f"
    rm -f "$f.err"
    echo "$name at $budget: $(grep -o '"perplexity": *[0-9.]*' "$f")"
  else
    rm -f "$f.partial"
    echo "$name at $budget: refused: $(tail -1 "$f.err")"
  fi
}
budget_methods=(lined clustered paper kascade auto semanticache dar)
read -r -a budget_levels <<< "${BUDGETS:-0.10 0.25 0.50}"
# Sets `args` to METHOD's config arguments at BUDGET; false where the method does not reach it.
# Lined: window and heavy hitters each half the budget. Clustered: pages refined by top_frac (the
# sweep's 0.146 + 0.86 top_frac), at 10% pages of 32 with a tail of 64 (0.09 + 0.96 top_frac). Paper: its lined layers as
# lined, its clustered layers as clustered. Kascade: 0.035 + 0.96 top_frac, at 10% with fewer
# than its default 128 keys at least (kascade_min_k 32). auto: the
# calibration's candidates within the budget. SemantiCache reaches no less than 0.39 (its
# delimiters stay raw): 50% only. DAR: KV bytes (sink 4 + window + the rest at rank/64) over the
# scored steps' mean context of 1,536.
budget_args() {
  local calib=$root/bench/out/defaults/presets/calibration.json lined="0-7,22-29" clustered="8-21"
  case "$1-$2" in
    lined-0.10) args=(--preset lined --set window_frac=0.05,rho=0.05) ;;
    lined-0.25) args=(--preset lined --set window_frac=0.125,rho=0.125) ;;
    lined-0.50) args=(--preset lined --set window_frac=0.25,rho=0.25) ;;
    clustered-0.10) args=(--preset clustered --set page_size=32,tail=64,rule=top_frac,top_frac=0.01) ;;
    clustered-0.25) args=(--preset clustered --set rule=top_frac,top_frac=0.117) ;;
    clustered-0.50) args=(--preset clustered --set rule=top_frac,top_frac=0.41) ;;
    paper-0.10) args=(--preset paper --set "layers=$lined,window_frac=0.05,rho=0.05"
                      --set "layers=$clustered,page_size=32,tail=64,rule=top_frac,top_frac=0.01") ;;
    paper-0.25) args=(--preset paper --set "layers=$lined,window_frac=0.125,rho=0.125" --set "layers=$clustered,rule=top_frac,top_frac=0.117") ;;
    paper-0.50) args=(--preset paper --set "layers=$lined,window_frac=0.25,rho=0.25" --set "layers=$clustered,rule=top_frac,top_frac=0.41") ;;
    kascade-0.10) args=(--layers-config "$out/kascade.json" --set kascade_top_frac=0.068,kascade_min_k=32) ;;
    kascade-0.25) args=(--layers-config "$out/kascade.json" --set kascade_top_frac=0.224) ;;
    kascade-0.50) args=(--layers-config "$out/kascade.json" --set kascade_top_frac=0.484) ;;
    auto-*) args=(--preset "auto:$calib,budget=$2") ;;
    semanticache-0.50) args=(--preset semanticache --set gsc_tau=0.72) ;;
    dar-0.10) args=(--set "dar_basis=$out/dar.npy,dar_sink=4,dar_window=64,dar_rank=4") ;;
    dar-0.25) args=(--set "dar_basis=$out/dar.npy,dar_sink=4,dar_window=128,dar_rank=12") ;;
    dar-0.50) args=(--set "dar_basis=$out/dar.npy,dar_sink=4,dar_window=512,dar_rank=16") ;;
    *) return 1 ;;
  esac
}
budget_inputs() {
  local calib=$root/bench/out/defaults/presets/calibration.json f
  for f in "$out/kascade.json" "$out/dar.npy" "$calib"; do
    [[ -f $f ]] || { echo "run_methods: no $f (run kascade-calibrate, dar-calibrate, bench/run_luka_defaults.sh calibrate)" >&2; exit 1; }
  done
}
part_budgets() {
  budget_inputs
  local b m
  for b in "${budget_levels[@]}"; do
    for m in "${budget_methods[@]}"; do
      budget_args "$m" "$b" && budget_run "$m" "$b" "${args[@]}"
    done
  done
}
# WikiSalad exact match of the same configs: each written as a layers config (luka info --config),
# then one `luka eval wikisalad` per budget over them, EXAMPLES (default 1) examples per file, into
# bench/out/methods/budgets-eval-B (resumable). Dense's column is bench/results/luka-eval.md's.
part_budgets_eval() {
  budget_inputs
  local dir=$out/budgets/configs b m presets
  mkdir -p "$dir"
  for b in "${budget_levels[@]}"; do
    presets=""
    for m in "${budget_methods[@]}"; do
      budget_args "$m" "$b" || continue
      if [[ ! -s $dir/$m-$b.json ]]; then
        "$luka" info --config "${args[@]}" |
          "$python" -c 'import json, sys; t = sys.stdin.read(); json.dump(json.loads(t[t.index("\n{") + 1:]), open(sys.argv[1], "w"), indent=1)' \
            "$dir/$m-$b.json" || { echo "run_methods: $m at $b: no config" >&2; rm -f "$dir/$m-$b.json"; continue; }
      fi
      presets+="${presets:+,}$dir/$m-$b.json"
    done
    # Answers are kept in bench/results/ once a level is done, so a fresh clone starts from them.
    local kept=$root/bench/results/methods-budgets-eval/$b
    if [[ ! -f $out/budgets-eval-$b/results.jsonl && -f $kept/results.jsonl ]]; then
      mkdir -p "$out/budgets-eval-$b"
      cp "$kept/results.jsonl" "$kept/run.json" "$out/budgets-eval-$b/"
    fi
    "$luka" eval wikisalad --data "$root/../shared/data/wikisalad" --examples "${EXAMPLES:-1}" --presets "$presets" \
      --out "$out/budgets-eval-$b" | tee "$out/budgets-eval-$b.table.txt"
    mkdir -p "$kept"
    cp "$out/budgets-eval-$b/results.jsonl" "$out/budgets-eval-$b/run.json" "$kept/"
  done
}
# kvpress's methods at matched budgets of the prompt: a press keeps B of the prompt's 1,024 entries
# per KV head (compression_ratio 1 - B) and every token after it; Quest attends to B x 1,024
# positions per step (pages of 16 and its window of 16; its preset leaves layers 0-1 dense); TOVA's
# eviction keeps B x 1,024 positions through decoding (press_target_size).
press_budget_methods=(streaming_llm snapkv tova knorm expected_attention random pyramidkv adakv quest tova_decoding)
press_args() {
  local ratio tokens
  ratio=$("$python" -c "print(round(1 - float('$2'), 4))")
  tokens=$("$python" -c "print(round(float('$2') * 1024))")
  case $1 in
    quest) args=(--preset quest --set "quest_pages=$(( (tokens - 16 + 8) / 16 ))") ;;
    tova_decoding) args=(--preset tova_decoding --set "press_target_size=$tokens") ;;
    *) args=(--preset "$1" --set "compression_ratio=$ratio") ;;
  esac
}
part_presses() {
  local kept=$root/bench/results/methods-presses b m f
  mkdir -p "$kept"
  for b in "${budget_levels[@]}"; do
    for m in "${press_budget_methods[@]}"; do
      f=$kept/$m-$b.json
      [[ -s $f ]] && continue
      press_args "$m" "$b"
      if "$luka" perplexity "${scoring[@]}" --threads "${THREADS:-1}" --json "${args[@]}" > "$f.partial" 2> "$out/presses-$m-$b.err"; then
        mv "$f.partial" "$f"
        echo "$m at $b: $(grep -o '"perplexity": *[0-9.]*' "$f")"
      else
        rm -f "$f.partial"
        echo "$m at $b: failed: $(tail -1 "$out/presses-$m-$b.err")" >&2
      fi
    done
  done
  part_presses_report
}
# Writes the presses' section of bench/results/methods.md (between its markers, added at the end
# the first time) and figures/methods-presses.{png,svg}.
part_presses_report() {
  "$python" -c 'import matplotlib' 2>/dev/null || "$python" -m pip install --quiet matplotlib || true
  "$python" - "$root/bench/results/methods-presses" "$root/bench/results/methods.md" "$root/bench/results/figures" \
    "${press_budget_methods[@]}" <<'PY'
import glob, json, os, sys
kept, dest, figures = sys.argv[1:4]
order = sys.argv[4:]
levels = ["0.10", "0.25", "0.50"]
runs = {}
for path in glob.glob(os.path.join(kept, "*.json")):
    method, budget = os.path.basename(path)[:-5].rsplit("-", 1)
    runs.setdefault(method, {})[budget] = json.load(open(path))
text = open(dest).read() if os.path.exists(dest) else ""
dense = None
for line in text.splitlines():
    if line.startswith("| presets | preset=dense |"):
        dense = float(line.split("|")[4])
begin, end = "<!-- presses: bench/run_methods.sh presses-report writes this section -->", "<!-- /presses -->"
sec = [begin, "", "## kvpress's methods and Quest at matched budgets of the prompt (bench/run_methods.sh presses)", ""]
sec.append("The same perplexity as above (emma.txt, 1,024 tokens prefilled, the next 1,024 scored through the decode")
sec.append("path), each method keeping 10, 25 or 50% of the prompt's 1,024 entries. A press (docs/methods.md) scores")
sec.append("the prompt once at its prefill and keeps that share per KV head (`compression_ratio` 1 − budget), then")
sec.append("every token after the prompt: kvpress's setting. So its decode steps attend to more than the budget")
sec.append("(the `attended` fraction in brackets). Quest attends to the budget's number of positions at every step")
sec.append("(pages of 16, `quest_pages` = (budget − 16) / 16, and its window of 16; the preset leaves layers 0-1 dense,")
sec.append("as the paper does). TOVA's eviction (`tova_decoding`, `press_target_size` = the budget) keeps exactly")
sec.append("that many positions per KV head through decoding. PyramidKV and AdaKV allocate SnapKV's scores.")
sec.append("Cells: perplexity (attended fraction of dense's entries per step)%s." % (" ; dense: %.3f" % dense if dense else ""))
sec.append("")
sec.append("    bench/run_methods.sh presses")
sec.append("")
sec.append("| method | " + " | ".join("%d%%" % round(float(b) * 100) for b in levels) + " |")
sec.append("|---|" + "---:|" * len(levels))
for m in order:
    cells = []
    for b in levels:
        o = runs.get(m, {}).get(b)
        cells.append("-" if o is None else "%.2f (%.3f)" % (o["perplexity"], o.get("attended_fraction", float("nan"))))
    sec.append("| %s | %s |" % (m, " | ".join(cells)))
sec.append("")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for m in order:
        pts = sorted((float(b), o["perplexity"]) for b, o in runs.get(m, {}).items())
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
    if dense:
        ax.axhline(dense, color="black", linewidth=0.8, linestyle=":", label="dense")
    ax.set_xlabel("share of the prompt's entries kept")
    ax.set_ylabel("perplexity, emma.txt tokens 1,024-2,047")
    ax.set_title("kvpress's methods and Quest at matched budgets (default model)")
    ax.set_yscale("log")
    from matplotlib.ticker import FormatStrFormatter, NullFormatter
    ax.set_yticks([25, 30, 35, 40, 50])
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(figures, exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(os.path.join(figures, "methods-presses." + ext))
    sec += ["![presses](figures/methods-presses.png)", ""]
except ImportError:
    print("run_methods: no matplotlib: the presses figure is not drawn", file=sys.stderr)
sec.append(end)
block = "\n".join(sec) + "\n"
if begin in text and end in text:
    text = text[:text.index(begin)] + block + text[text.index(end) + len(end) + 1:]
else:
    text = text.rstrip("\n") + "\n\n" + block
open(dest, "w").write(text)
print("wrote the presses' section of", dest)
PY
}
part_report() {
  # The budgets figure is drawn with matplotlib (bench-only; installed into the venv here).
  "$python" -c 'import matplotlib' 2>/dev/null || "$python" -m pip install --quiet matplotlib || true
  "$python" - "$out" "$root/bench/results/methods.md" "$root/bench/results/figures" <<'PY'
import glob, json, os, shutil, sys
out, dest, figures = sys.argv[1:4]
rows = []  # (sweep, label, output)
for name in ("presets", "kascade", "kascade-calibrated", "lined", "clustered", "dar", "dar-sink", "semanticache", "semanticache-refined"):
    items = []
    for path in glob.glob(os.path.join(out, name, "items", "*.json")):
        r = json.load(open(path))
        label = r["label"].replace(os.path.dirname(os.path.dirname(os.path.dirname(out))) + "/", "")  # paths from the checkout
        items.append((r["index"], label + (" (baseline)" if r.get("baseline") else ""), r["output"]))
    rows += [(name, label, output) for _, label, output in sorted(items, key=lambda x: x[0])]
    for ext in ("png", "svg"):
        plot = os.path.join(out, name, "plot." + ext)
        if os.path.exists(plot):
            os.makedirs(figures, exist_ok=True)
            shutil.copy(plot, os.path.join(figures, "methods-%s.%s" % (name, ext)))
dense = next((o["perplexity"] for _, label, o in rows if label.startswith("preset=dense")), None)
with open(dest, "w") as f:
    f.write("# Related methods next to LuKA (bench/run_methods.sh)\n\n")
    f.write("Perplexity of the default model on emma.txt: 2,048 tokens, the first 1,024 prefilled, the next 1,024 scored\n")
    f.write("through the decode path. `attended` is the entries each decode step attends (raw tokens, summaries,\n")
    f.write("refined children, top-k keys), summed over layers and heads, as a fraction of dense's. Kascade's calibrated\n")
    f.write("anchors come from `luka calibrate --kascade 5` on prideprejudice.txt (bench/out/methods/kascade.txt), and the\n")
    f.write("DAR probe's basis from `luka calibrate --dar` on its first 2,048 tokens (bench/out/methods/dar.txt).\n\n")
    f.write("    bench/run_methods.sh\n\n")
    f.write("| sweep | run | attended | perplexity | × dense | attention |\n|---|---|---:|---:|---:|---|\n")
    for name, label, o in rows:
        frac = o.get("attended_fraction")
        ratio = "%.3f" % (o["perplexity"] / dense) if dense else "-"
        f.write("| %s | %s | %s | %.3f | %s | %s |\n" % (name, label or "(the layers config)", "%.3f" % frac if frac is not None else "-",
                                                     o["perplexity"], ratio, o.get("attention", "").replace("|", "\\|")))
    f.write("\n")
    fid = sorted(glob.glob(os.path.join(out, "dar-fidelity", "*.json")))
    if fid:
        f.write("## The DAR probe's fidelity (bench/run_methods.sh dar-fidelity)\n\n")
        f.write("`luka perplexity --fidelity`: the dense shadow in every layer (per-layer means over the scored steps and\n")
        f.write("heads of KL(dense || effective), top-k overlap and the attention output's relative error), and against a\n")
        f.write("separate dense run the last layer's hidden-state cosine and the next-token KL. Keys projected before RoPE.\n\n")
        f.write("| window | rank | perplexity | next-token KL | mean layer KL | max layer KL | mean output error | max output error | mean top-32 overlap | last hidden cosine |\n")
        f.write("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for path in fid:
            o = json.load(open(path))
            w, r = os.path.basename(path)[:-5].split("-")
            layers = o["fidelity"]
            mean = lambda k: sum(l[k] for l in layers) / len(layers)
            f.write("| %s | %s | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.4f |\n" % (
                w[1:], r[1:], o["perplexity"], o["next_token_kl_vs_dense"], mean("kl"), max(l["kl"] for l in layers),
                mean("output_rel_l2"), max(l["output_rel_l2"] for l in layers), mean("topk_overlap"), layers[-1]["hidden_cosine_vs_dense"]))
        f.write("\n")
    for name in ("kascade", "kascade-calibrated", "dar", "semanticache"):
        if os.path.exists(os.path.join(figures, "methods-%s.png" % name)):
            f.write("![%s](figures/methods-%s.png)\n\n" % (name, name))
    budgets = {}  # method -> budget -> output
    for path in glob.glob(os.path.join(out, "budgets", "*.json")):
        method, budget = os.path.basename(path)[:-5].rsplit("-", 1)
        budgets.setdefault(method, {})[budget] = json.load(open(path))
    refused = {}
    for path in glob.glob(os.path.join(out, "budgets", "*.json.err")):
        method, budget = os.path.basename(path)[:-9].rsplit("-", 1)
        refused.setdefault(method, {})[budget] = open(path).read().strip().splitlines()[-1]
    if budgets:
        order = ["lined", "clustered", "paper", "kascade", "auto", "semanticache", "dar"]
        names = {"kascade": "kascade (calibrated)", "dar": "DAR probe, by KV bytes"}
        levels = ["0.10", "0.25", "0.50"]
        f.write("## At matched budgets (bench/run_methods.sh budgets)\n\n")
        f.write("Each method set to attend 10, 25 and 50% of dense's entries per decode step (summed over layers and\n")
        f.write("heads), from the sweeps above; the cell gives perplexity and, in brackets, the fraction reached. Paper\n")
        f.write("keeps its layout (layers 0-7 and 22-29 lined, 8-21 clustered) with each part set to the budget, and its\n")
        f.write("clustered layers keep the paper's mass-preserving refinement, where the clustered preset refines exactly\n")
        f.write("(bench/results/luka-perplexity.md shows what that costs). `auto`\n")
        f.write("picks per layer among the calibration's candidates (bench/run_luka_defaults.sh calibrate) within the\n")
        f.write("budget. The DAR probe attends every entry; it is matched by the KV bytes it keeps (4 sink and W window\n")
        f.write("tokens whole, the rest at rank r of 64), at the scored steps' mean context of 1,536 tokens: W 64 r 4,\n")
        f.write("W 128 r 12, W 512 r 16. Dense: %.3f.\n\n" % dense if dense else "\n")
        f.write("| method | " + " | ".join("%d%%" % round(float(b) * 100) for b in levels) + " |\n|---|" + "---:|" * len(levels) + "\n")
        for m in order:
            cells = []
            for b in levels:
                o = budgets.get(m, {}).get(b)
                if o is None:
                    why = refused.get(m, {}).get(b)
                    if m == "semanticache" and b != "0.50":
                        cells.append("not reached (≥ 0.39)")
                    else:
                        why = why.split("error: ", 1)[-1].replace("auto config: ", "") if why else None
                        cells.append("refused: " + why.replace("|", "\\|") if why else "-")
                    continue
                frac = o.get("attended_fraction")
                shown = frac if m != "dar" else None
                cells.append("%.2f (%.3f)" % (o["perplexity"], shown) if shown is not None else "%.2f" % o["perplexity"])
            f.write("| %s | %s |\n" % (names.get(m, m), " | ".join(cells)))
        f.write("\n")
        em = {}  # method -> budget -> (matches, questions)
        # The levels that finished: in bench/out those with a summary, else the answers kept in
        # bench/results (copied there only once a level is done).
        done = [os.path.dirname(p) for p in glob.glob(os.path.join(out, "budgets-eval-*", "summary.json"))] or [
            os.path.dirname(p) for p in glob.glob(os.path.join(os.path.dirname(dest), "methods-budgets-eval", "*", "results.jsonl"))]
        finished = {os.path.basename(level).replace("budgets-eval-", "") for level in done}
        for level in done:
            for line in open(os.path.join(level, "results.jsonl")):
                r = json.loads(line)
                method, budget = os.path.basename(r["preset"])[:-5].rsplit("-", 1)
                m, q = em.setdefault(method, {}).get(budget, (0, 0))
                em[method][budget] = (m + bool(r["match"]), q + 1)
        if em:
            f.write("WikiSalad exact match of the same configs (bench/run_methods.sh budgets-eval: `luka eval wikisalad`, the\n")
            f.write("first example of each of the four files, %d questions; dense scores 27.8 on them, bench/results/luka-eval.md;\n"
                    "a dash: not run yet; no config: the method cannot reach that budget; answers in\n"
                    "bench/results/methods-budgets-eval/):\n\n"
                    % max(q for b in em.values() for _, q in b.values()))
            f.write("| method | " + " | ".join("%d%%" % round(float(b) * 100) for b in levels) + " |\n|---|" + "---:|" * len(levels) + "\n")
            for m in order:
                if m not in em:
                    continue
                # A level that ran without this method: the method has no config at that budget
                # (refused or not reached, as the perplexity table says).
                cells = ["%.1f" % (100.0 * em[m][b][0] / em[m][b][1]) if b in em[m] and em[m][b][1]
                         else "no config" if b in finished else "-" for b in levels]
                f.write("| %s | %s |\n" % (names.get(m, m), " | ".join(cells)))
            f.write("\n")
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
            for m in order:
                pts = sorted((float(b) if m == "dar" else o["attended_fraction"], o["perplexity"]) for b, o in budgets.get(m, {}).items())
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="--" if m == "dar" else "-",
                            label=names.get(m, m))
            if dense:
                ax.axhline(dense, color="black", linewidth=0.8, linestyle=":", label="dense")
            ax.set_xlabel("attended entries per step / dense's (DAR: KV bytes kept)")
            ax.set_ylabel("perplexity, emma.txt tokens 1,024-2,047")
            ax.set_title("Methods at matched budgets (default model)")
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
            fig.tight_layout()
            os.makedirs(figures, exist_ok=True)
            for ext in ("png", "svg"):
                fig.savefig(os.path.join(figures, "methods-budgets." + ext))
            f.write("![budgets](figures/methods-budgets.png)\n\n")
        except ImportError:
            print("run_methods: no matplotlib: the budgets figure is not drawn", file=sys.stderr)
print("wrote", dest)
PY
  # The presses' section lives in bench/results/ with its runs; the rewrite above dropped it.
  if compgen -G "$root/bench/results/methods-presses/*.json" > /dev/null; then part_presses_report; fi
}

parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(kascade-calibrate kascade kascade-calibrated presets lined clustered dar-calibrate dar dar-sink dar-fidelity semanticache report)
for p in "${parts[@]}"; do
  case $p in
    kascade-calibrate) part_kascade_calibrate ;;
    kascade) part_kascade ;;
    kascade-calibrated) part_kascade_calibrated ;;
    presets) part_presets ;;
    lined) part_lined ;;
    clustered) part_clustered ;;
    dar-calibrate) part_dar_calibrate ;;
    dar) part_dar ;;
    dar-sink) part_dar_sink ;;
    dar-fidelity) part_dar_fidelity ;;
    semanticache) part_semanticache ;;
    budgets) part_budgets ;;
    budgets-eval) part_budgets_eval ;;
    presses) part_presses ;;
    presses-report) part_presses_report ;;
    report) part_report ;;
    *) echo "run_methods: unknown part '$p'" >&2; exit 2 ;;
  esac
done
