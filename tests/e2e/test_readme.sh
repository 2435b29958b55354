#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's and docs/'s `console` blocks, run as written on a terminal
# 80 columns wide, in a scratch directory where build/ holds this build's
# autobatch and simtrain (what `bash examples/demo.sh` leaves): each
# command must exit 0 and print, in order, the lines the block shows, with
# timings and speeds read as "a number" and the promised figures (largest
# fit, first failure) exact (tests/e2e/readme_blocks.py).
#   AB_README_UPDATE=1 ... test_readme.sh   rewrites the blocks' output from the run
source "$(dirname "$0")/lib.sh"
command -v script >/dev/null || skip "script(1) missing: apt-get install bsdutils"
mkdir -p "$WORK/build"
ln -s "$AUTOBATCH" "$WORK/build/autobatch"
ln -s "$SIMTRAIN" "$WORK/build/simtrain"
ln -s "$AB_SOURCE_DIR/examples" "$WORK/examples"
ln -s "$AB_SOURCE_DIR/configs" "$WORK/configs"
mode=check
[ -n "${AB_README_UPDATE:-}" ] && mode=update
cd "$AB_SOURCE_DIR"
rc=0
python3 "$AB_SOURCE_DIR/tests/e2e/readme_blocks.py" "$mode" "$WORK" README.md docs/*.md || rc=$?
[ "$rc" = 0 ] || fail "a README or docs/ block no longer runs as shown (above)"
n=$(grep -c '^```console' README.md docs/*.md | awk -F: '{s+=$2} END {print s}')
[ "$n" -ge 3 ] || fail "only $n console blocks in README.md and docs/"
assert_no_leftovers
pass "$n console blocks of README.md and docs/ ran as shown"
