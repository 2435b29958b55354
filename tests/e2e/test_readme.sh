#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's `console` blocks (the tour), run as written on a terminal 80
# columns wide after `bash examples/demo.sh`: each command must exit 0 and
# print, in order, the lines the block shows, with timings and speeds read
# as "a number" and the promised figures (largest fit, first failure)
# exact; every other command block of the README must say why it is not
# run (tests/e2e/readme_blocks.py; docs/ is test_docs_blocks.sh's).
#   AB_README_UPDATE=1 ... test_readme.sh   rewrites the blocks' output from the run
source "$(dirname "$0")/lib.sh"
command -v script >/dev/null || skip "script(1) missing: apt-get install bsdutils"
rc=0
doc_blocks README.md || rc=$?
[ "$rc" = 0 ] || fail "a README block no longer runs as shown, or a command block is neither run nor marked (above)"
n=$(grep -c '^```console' "$AB_SOURCE_DIR/README.md")
[ "$n" -ge 3 ] || fail "only $n console blocks in README.md"
assert_no_leftovers
pass "$n console blocks of README.md ran as shown"
