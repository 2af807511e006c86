#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine and builds LuKA Studio. Idempotent: a second run checks,
# finds nothing to do and only rebuilds what changed.
#
#   scripts/setup.sh            Debian packages, .venv (torch, transformers), build/ (Release)
#
# Environment: LUKA_BUILD_DIR (default build), LUKA_CMAKE_ARGS (extra configure arguments),
# LUKA_JOBS (parallel build jobs, default: all cores).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LUKA_BUILD_DIR:-$root/build}
jobs=${LUKA_JOBS:-$(nproc)}
say() { printf '[setup] %s\n' "$*"; }

# --- Debian packages -----------------------------------------------------------
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  python3 python3-venv python3-pip
  libicu-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
  libhdf5-dev libdeflate-dev libimgui-dev libglfw3-dev libgl-dev libgl1-mesa-dri libstb-dev
  libcairo2-dev xvfb xauth fonts-dejavu-core fonts-wqy-microhei fonts-noto-core fonts-symbola
  clang-14 libclang-rt-14-dev
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "Debian packages: all present"
fi

# --- Python virtualenv (LibTorch and the reference implementation) ------------------
venv=$root/.venv
req=$root/scripts/requirements.txt
stamp=$venv/.luka-requirements
want=$(sha256sum "$req" | cut -d' ' -f1)
if [[ ! -x $venv/bin/python ]]; then
  say "creating $venv"
  python3 -m venv "$venv"
fi
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  say "installing Python packages from scripts/requirements.txt (torch is large: a few minutes)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --progress-bar off -r "$req"
  echo "$want" > "$stamp"
else
  say "Python packages: up to date"
fi

# --- build ---------------------------------------------------------------------------
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${LUKA_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log" >&2; echo "setup: cmake configure failed (log above)" >&2; exit 1; }
rm -f "$build.configure.log"
say "building in $build ($jobs jobs)"
cmake --build "$build" -j "$jobs"

# --- default model -----------------------------------------------------------------
"$root/scripts/fetch_default_model.sh"
say "done: $build/luka --help"
