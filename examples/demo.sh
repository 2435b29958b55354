#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The demo: build autobatch, then let it find the largest micro-batch of
# the bundled simulated trainer (examples/simtrain), a stand-in for a
# Hugging Face job on a 24 GiB GPU that runs out of memory at realistic
# points.  Prints each trial and the choice; writes demo-results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh --demo build -DCMAKE_BUILD_TYPE=Release
exec build/autobatch --preset hf --batch 1:512 --json build/demo-results.json -- \
  build/simtrain --capacity 24G --long-step 4 --output_dir /tmp/simtrain-out
