#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A cached Python virtual environment for the tests that run real
# trainers (PyPI's torch 2.x, f5-tts, coqui-tts, transformers, accelerate).
#
#   bash tests/real/pyenv.sh NAME      -> prints the environment's python
#
# NAME.requirements.txt beside this script pins every version.  The
# environment lives in $AB_TEST_CACHE (default ~/.cache/autobatch-tests),
# named after a hash of the requirements, so a second run reuses it and a
# changed pin builds a new one.  Concurrent callers wait on a lock.
set -euo pipefail
name=${1:?usage: pyenv.sh NAME}
here=$(cd "$(dirname "$0")" && pwd)
req="$here/$name.requirements.txt"
[ -r "$req" ] || { echo "pyenv: no $req" >&2; exit 2; }
cache=${AB_TEST_CACHE:-$HOME/.cache/autobatch-tests}
mkdir -p "$cache"
base=${AB_TEST_BASE_PYTHON:-/usr/bin/python3}
sum=$( (cat "$req"; "$base" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-12)
venv="$cache/venv-$name-$sum"
exec 9>"$cache/.lock-$name"
flock 9
if [ ! -f "$venv/.complete" ]; then
  rm -rf "$venv"
  echo "pyenv: building $venv (first run only; several GB from PyPI)" >&2
  "$base" -m venv "$venv" >&2
  # --no-deps: the file pins every package (see its header for why the
  # resolver is not used); nothing else is installed.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input --no-deps \
    -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
