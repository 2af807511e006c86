#!/usr/bin/env bash
# Perplexity of the default model (SmolLM2-135M-Instruct) on a long public-domain text under the
# LuKA modes, and perplexity against the refinement fraction for the mean, attention-weighted and
# random compressors (the paper's Fig. 4-6 experiments). Appends a dated section to
# bench/results/luka-perplexity.md.
#
#   bench/run_luka_perplexity.sh [BUILD_DIR] [TEXT] [TOKENS] [PROMPT_TOKENS]
# SECTIONS (environment) picks what runs: any of "modes mass_preserving exact adaptive"; all by
# default. COMPRESSORS (environment) limits the curves to some compressors (default: mean
# attention_weighted random).
# Defaults: build/, ../shared/data/texts/emma.txt, 2048 tokens, of which the first 1024 are
# prefilled (exact attention) and the other 1024 scored through the decode path.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
text=${2:-$root/../shared/data/texts/emma.txt}
tokens=${3:-2048}
prompt=${4:-1024}
[[ -f $text ]] || { echo "no text at $text" >&2; exit 1; }
sections=${SECTIONS:-modes mass_preserving exact adaptive}
compressors=${COMPRESSORS:-mean attention_weighted random}
out=$root/bench/results/luka-perplexity.md
mkdir -p "$root/bench/results"
ppl() {  # args: label, LuKA flags...
  local label=$1; shift
  "$build/luka" perplexity --text-file "$text" --max-tokens "$tokens" --prompt-tokens "$prompt" --json "$@" |
    "$root/.venv/bin/python" -c 'import json,sys; d=json.load(sys.stdin); print("| %s | %.3f | %.4f | %d |" % (sys.argv[1], d["perplexity"], d["mean_nll"], d["scored_tokens"]))' "$label"
}
has() { [[ " $sections " == *" $1 "* ]]; }
curve() {  # args: refinement math
  echo
  echo "Perplexity against the fraction of pages refined per head and step (all layers clustered,"
  echo "rule top_frac, \`$1\` refinement; 0 = no refinement):"
  echo
  echo "| compressor | refined fraction | perplexity | mean NLL | scored tokens |"
  echo "|---|---|---|---|---|"
  for comp in $compressors; do
    for frac in 0 0.0625 0.125 0.25 0.5 1; do
      if [[ $frac == 0 ]]; then rule="rule=top_k,top_k=0"; else rule="rule=top_frac,top_frac=$frac"; fi
      ppl "$comp | $frac" --preset clustered --set "compressor=$comp,refine_math=$1,$rule"
    done
  done
}
{
  echo
  echo "## $(date -u +%Y-%m-%d) — $(basename "$text"), $tokens tokens ($prompt prefilled, the rest scored through decode)"
  echo
  echo "Command: \`SECTIONS=\"$sections\" COMPRESSORS=\"$compressors\" bench/run_luka_perplexity.sh\` at $(git -C "$root" rev-parse --short HEAD). Model: the default (SmolLM2-135M-Instruct, Q4_1 GGUF), fp32."
  echo "Clustered layers: pages of 16, raw tail 128, a page every 16 steps."
  if has modes; then
    echo
    echo "| configuration | perplexity | mean NLL | scored tokens |"
    echo "|---|---|---|---|"
    ppl "dense" --preset dense
    ppl "lined (ρ 1/8, W 128)" --preset lined
    ppl "clustered (mean, top_k 3)" --preset clustered
    ppl "mixed(8,8) (mean, top_k 3)" --preset "mixed(8,8)"
    ppl "paper (mixed 8+8, attention-weighted, top_k 3)" --preset paper
    ppl "authors_eval" --preset authors_eval
  fi
  if has mass_preserving; then curve mass_preserving; fi
  if has exact; then curve exact; fi
  if has adaptive; then
    echo
    echo "All layers clustered, attention-weighted summaries with the adaptive bias and \`exact\` refinement (top_k 3):"
    echo
    echo "| --set | perplexity | mean NLL | scored tokens |"
    echo "|---|---|---|---|"
    for tau in 1 7; do
      ppl "compressor=attention_weighted,bias=adaptive,refine_math=exact,tau=$tau" --preset clustered \
        --set "compressor=attention_weighted,bias=adaptive,refine_math=exact,tau=$tau"
    done
  fi
} | tee -a "$out"
