#!/usr/bin/env bash
# Run on a machine with Debian's apt (the development machine): downloads the two packages the
# GPU build needs and the GPU machines lack — nlohmann-json (headers) and GoogleTest (static
# libraries) — into .gpu/debs, to be carried to the GPU machine (which has no package registry)
# and unpacked there by scripts/gpu_build.sh. HDF5, ICU, cairo, GLFW and ImGui are not needed:
# the GPU build is configured with -DLUKA_APP=OFF -DLUKA_GUI=OFF (model, LuKA core, kernels,
# their tests and benchmarks; no captures, CLI or Studio).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu/debs
if ! apt-cache show libgtest-dev >/dev/null 2>&1; then
  apt-get update -qq
fi
cd .gpu/debs
apt-get download -qq nlohmann-json3-dev libgtest-dev
ls -l
