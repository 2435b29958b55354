#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every test: build with AddressSanitizer and UBSan, then run the unit and
# end-to-end tests with ctest.  Installs what is missing first: the
# Debian packages (.ci/setup.sh), python3-venv, xmllint, Slurm and munge for the
# test cluster (tests/slurm/cluster.sh install), and the cached Python
# environment of the real trainers' tests (tests/real/pyenv.sh: PyPI's
# torch 2.x, f5-tts, coqui-tts; several GB the first time, reused after).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh build-test -DAUTOBATCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
if ! command -v xmllint >/dev/null; then
  echo "tests: installing libxml2-utils (xmllint, for the JUnit schema test)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libxml2-utils >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libxml2-utils >/dev/null; }
fi
if ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  echo "tests: installing python3-venv" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
fi
bash tests/slurm/cluster.sh install
AB_REAL_PYTHON=$(bash tests/real/pyenv.sh real)
export AB_REAL_PYTHON
cd build-test
ctest -j"$(nproc)" --output-on-failure --timeout 600
