#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Once an OOM line decided a trial, ranks that ignore SIGTERM are killed
# after half a second, not after --kill-grace: rank 1 runs out of memory
# and rank 0 hangs in all_reduce ignoring SIGTERM (simtrain --oom-rank),
# under --kill-grace 10s.  Other outcomes keep the full grace
# (test_teardown.sh).
source "$(dirname "$0")/lib.sh"

start=$(date +%s.%N)
"$AUTOBATCH" --quiet --batch 1:64 --kill-grace 10s --hang-timeout 60s --json "$WORK/r.json" -- \
  "$SIMTRAIN" --nproc 2 --oom-rank 1 --capacity 8G >"$WORK/r.out" 2>&1 || fail "exit $?"
end=$(date +%s.%N)
want=$("$SIMTRAIN" --capacity 8G --max_steps 7 --print-max)
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "max micro-batch"

ooms=$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/r.json")
[ "$ooms" -ge 2 ] || fail "expected OOM trials, got $ooms"
# A hanging rank outlived the SIGTERM (a teardown of at least the short
# grace), and none waited anywhere near --kill-grace.
worst=$(jqr '[.trials[] | select(.outcome == "oom") | .teardown_s] | max' "$WORK/r.json")
awk -v t="$worst" 'BEGIN { exit !(t >= 0.5) }' || fail "no rank outlived SIGTERM (${worst}s)"
awk -v t="$worst" 'BEGIN { exit !(t < 2) }' \
  || fail "teardown after the OOM line took ${worst}s (--kill-grace 10s)"
wall=$(jqr '[.trials[] | select(.outcome == "oom") | .wall_s] | max' "$WORK/r.json")
awk -v t="$wall" 'BEGIN { exit !(t < 5) }' || fail "an OOM trial took ${wall}s"
assert_no_leftovers
pass "$ooms OOM trials: worst teardown ${worst}s under --kill-grace 10s, run $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", e - s }')s"
