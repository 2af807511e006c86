#!/usr/bin/env bash
# Makes models/default (the model `luka` uses without --model or LUKA_MODEL) if it is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
models=$root/models
if [[ -e $models/default ]]; then
  echo "[setup] default model: $(readlink -f "$models/default")"
  exit 0
fi
tokenizer=$root/../shared/data/qwen3-tokenizer
if [[ ! -f $tokenizer/tokenizer.json ]]; then
  echo "[setup] no default model made: the Qwen3 tokenizer ($tokenizer) is absent; pass --model PATH or set LUKA_MODEL"
  exit 0
fi
mkdir -p "$models"
echo "[setup] writing the demo model (random Qwen3-shaped weights, real tokenizer) to $models/qwen3-demo-random"
"$root/.venv/bin/python" "$root/scripts/make_demo_model.py" "$tokenizer" "$models/qwen3-demo-random"
ln -sfn qwen3-demo-random "$models/default"
