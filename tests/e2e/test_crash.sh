#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A non-OOM failure stops the search with exit 4 and shows the real error;
# a trial that hangs is ended by --hang-timeout.
source "$(dirname "$0")/lib.sh"

set +e
"$AUTOBATCH" --batch 1:64 --json "$WORK/crash.json" -- \
  "$SIMTRAIN" --crash-at-step 3 >"$WORK/crash.out" 2>"$WORK/crash.err"
rc=$?
set -e
assert_eq 4 "$rc" "crash: exit status"
grep -q "autobatch:   | RuntimeError: Expected all tensors to be on the same device\|  | RuntimeError: Expected all tensors" "$WORK/crash.err" \
  || fail "crash: the real error is not shown: $(tail -5 "$WORK/crash.err")"
assert_eq 1 "$(jqr '.summary.trials' "$WORK/crash.json")" "crash: trials before stopping"
assert_eq crash "$(jqr '.trials[0].outcome' "$WORK/crash.json")" "crash: outcome"
assert_eq 4 "$(jqr '.summary.exit' "$WORK/crash.json")" "crash: summary.exit"
assert_no_leftovers
pass "crash -> exit 4 with the error shown"

# A hang at every size is not a memory limit: exit 4, with the advice.
set +e
"$AUTOBATCH" --quiet --batch 1:4 --hang-timeout 1s --json "$WORK/hang.json" -- \
  "$SIMTRAIN" --hang-at-step 1 >"$WORK/hang.out" 2>"$WORK/hang.err"
rc=$?
set -e
assert_eq 4 "$rc" "hang: exit status"
assert_eq hang "$(jqr '.trials[0].outcome' "$WORK/hang.json")" "hang: outcome"
grep -q "hang-timeout" "$WORK/hang.err" || fail "hang: no advice"
assert_no_leftovers
pass "hang -> exit 4"

# Nothing fits: exit 3.
set +e
"$AUTOBATCH" --quiet --batch 4:64 --json "$WORK/none.json" -- "$SIMTRAIN" --capacity 2G --model-mem 1G \
  >"$WORK/none.out" 2>"$WORK/none.err"
rc=$?
set -e
assert_eq 3 "$rc" "nothing fits: exit status"
assert_eq null "$(jqr '.best' "$WORK/none.json")" "nothing fits: best"
pass "nothing fits -> exit 3"

# --budget: nothing fitted yet -> exit 5 with results; some fitted -> the
# best so far, exit 0, and the search marked unfinished.
set +e
"$AUTOBATCH" --quiet --batch 1:64 --budget 1s --json "$WORK/b5.json" -- \
  "$SIMTRAIN" --startup-time 5s >"$WORK/b5.out" 2>"$WORK/b5.err"
rc=$?
set -e
assert_eq 5 "$rc" "budget, nothing fitted: exit status"
assert_eq 5 "$(jqr '.summary.exit' "$WORK/b5.json")" "budget: summary.exit"
awk -v t="$(jqr '.summary.wall_s' "$WORK/b5.json")" 'BEGIN { exit !(t < 4) }' \
  || fail "budget: ran $(jqr '.summary.wall_s' "$WORK/b5.json")s for a 1s budget"
assert_no_leftovers
"$AUTOBATCH" --quiet --batch 1:256 --budget 2s --json "$WORK/b0.json" -- \
  "$SIMTRAIN" --capacity 1T --step-overhead 60ms >"$WORK/b0.out" 2>"$WORK/b0.err" \
  || fail "budget with fits: exit $?"
grep -q "budget ran out" "$WORK/b0.out" || fail "budget: not said: $(cat "$WORK/b0.out")"
[ "$(jqr '.best.micro_batch' "$WORK/b0.json")" -ge 1 ] || fail "budget: no best so far"
assert_eq null "$(jqr '.max_fit[0].smallest_fail' "$WORK/b0.json")" "budget: no failure seen"
assert_no_leftovers
pass "--budget -> exit 5 / best so far"
