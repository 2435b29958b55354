#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what autobatch needs (Debian packages, only when missing) and
# build it.  Used by the README's two commands and by .ci/run.
#   bash .ci/setup.sh BUILD_DIR [extra cmake args...]         everything, for the tests
#   bash .ci/setup.sh --demo BUILD_DIR [extra cmake args...]  the demo: autobatch and
#       simtrain, from the build packages only
set -euo pipefail
cd "$(dirname "$0")/.."
demo=
[ "${1:-}" = --demo ] && { demo=1; shift; }
build=${1:-build}
shift || true

pkgs=(gcc make cmake pkg-config libyaml-dev libjansson-dev libcurl4-openssl-dev libssl-dev)
[ -n "$demo" ] ||
  pkgs+=(libcmocka-dev jq procps diffutils patch clang libclang-rt-dev python3-torch python3-yaml
         python3 chromium man-db)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: error: run as root (or install: ${missing[*]})" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ -n "$demo" ]; then
  cmake -S . -B "$build" -DAUTOBATCH_WERROR=ON -DAUTOBATCH_TESTS=OFF "$@" >/dev/null
  cmake --build "$build" -j"$(nproc)" --target autobatch simtrain
else
  cmake -S . -B "$build" -DAUTOBATCH_WERROR=ON "$@" >/dev/null
  cmake --build "$build" -j"$(nproc)"
fi
