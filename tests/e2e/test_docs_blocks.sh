#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every command block of docs/*.md either runs here or says why not: each
# ```console block is run as written on a terminal 80 columns wide after
# `bash examples/demo.sh` and must print, in order, the lines it shows
# (timings and speeds read as "a number", the promised sizes exact, or
# within the tolerance a `<!-- run: sizes within N -->` line allows where
# a size sits at a memory edge); every other command block must follow a
# `<!-- not run: WHY -->` line (it needs a GPU, Slurm, the user's own
# train.py).  The real PyTorch examples (docs/pytorch.md, docs/replay.md)
# run on Debian's CPU torch, shrunk to a few steps a trial: about three
# minutes on 2 cores (tests/e2e/readme_blocks.py).
#   AB_README_UPDATE=1 ... test_docs_blocks.sh   rewrites the blocks' output from the run
source "$(dirname "$0")/lib.sh"
command -v script >/dev/null || skip "script(1) missing: apt-get install bsdutils"
/usr/bin/python3 -c "import torch" 2>/dev/null \
  || fail "/usr/bin/python3 cannot import torch: apt-get install python3-torch"
BLOCKS="$AB_SOURCE_DIR/tests/e2e/readme_blocks.py"

# The rule's check can fail: a planted page with a bare command block is
# refused, and passes once the block says why it is not run.
printf 'Run it:\n\n    autobatch -- python3 train.py\n' >"$WORK/planted.md"
python3 "$BLOCKS" lint "$WORK" "$WORK/planted.md" >"$WORK/lint.out" \
  && fail "an unmarked command block passed: $(cat "$WORK/lint.out")"
grep -q "planted.md:3: a command block" "$WORK/lint.out" || fail "lint: $(cat "$WORK/lint.out")"
printf 'Run it:\n\n<!-- not run: your own train.py -->\n    autobatch -- python3 train.py\n' >"$WORK/planted.md"
python3 "$BLOCKS" lint "$WORK" "$WORK/planted.md" >"$WORK/lint.out" \
  || fail "a marked block refused: $(cat "$WORK/lint.out")"

rc=0
mapfile -t pages < <(cd "$AB_SOURCE_DIR" && printf '%s\n' docs/*.md)
doc_blocks "${pages[@]}" || rc=$?
[ "$rc" = 0 ] || fail "a docs/ block no longer runs as shown, or a command block is neither run nor marked (above)"
n=$(cd "$AB_SOURCE_DIR" && cat docs/*.md | grep -c '^\$ ')
[ "$n" -ge 8 ] || fail "only $n commands in the console blocks of docs/"
assert_no_leftovers
pass "$n commands of docs/ ran as shown; every other command block says why not"
