#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Teardown: a multi-rank trial where rank 1 runs out of memory and rank 0
# hangs ignoring SIGTERM is gone within seconds of the OOM line; a
# SIGTERM-ignoring trainer is killed after the grace period; an escaped
# setsid() grandchild is killed and reaped.  Checked through /proc.
source "$(dirname "$0")/lib.sh"

# --- 2 ranks, rank 1 OOMs, rank 0 hangs in all_reduce ignoring SIGTERM
start=$(date +%s.%N)
"$AUTOBATCH" --quiet --batch 1:64 --kill-grace 1s --hang-timeout 60s --json "$WORK/ranks.json" -- \
  "$SIMTRAIN" --nproc 2 --oom-rank 1 --capacity 8G >"$WORK/ranks.out" 2>&1 || fail "ranks: exit $?"
end=$(date +%s.%N)
want=$("$SIMTRAIN" --capacity 8G --max_steps 7 --print-max)
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/ranks.json")" "ranks: max micro-batch"
# Each OOM trial ends within grace + a second of its OOM line.
worst=$(jqr '[.trials[] | select(.outcome == "oom") | .teardown_s] | max' "$WORK/ranks.json")
awk -v t="$worst" 'BEGIN { exit !(t < 2.5) }' || fail "ranks: teardown took ${worst}s"
grep -q '\[rank1\]: torch.OutOfMemoryError' <(jqr '.trials[].evidence' "$WORK/ranks.json") \
  || fail "ranks: rank 1's OOM line is not the evidence"
assert_no_leftovers
pass "2 ranks: worst teardown ${worst}s after the OOM line, total $(echo "$end - $start" | bc 2>/dev/null || echo ?)s"

# --- a trainer that ignores SIGTERM is killed after --kill-grace
# (env preset, AUTOBATCH_MAX_STEPS emptied: simtrain reads the batch from
# the environment but has no step limit, so it never stops by itself)
"$AUTOBATCH" --quiet --preset env --batch 1:16 --kill-grace 1s --json "$WORK/term.json" -- \
  env AUTOBATCH_MAX_STEPS= "$SIMTRAIN" --ignore-sigterm --knobs-from-env --capacity 8G \
  >"$WORK/term.out" 2>&1 || fail "term: exit $?"
sig=$(jqr '[.trials[] | select(.outcome == "fit") | .signal] | unique | join(",")' "$WORK/term.json")
assert_eq 9 "$sig" "term: fits ended by SIGKILL"
td=$(jqr '[.trials[] | select(.outcome == "fit") | .teardown_s] | min' "$WORK/term.json")
awk -v t="$td" 'BEGIN { exit !(t >= 1.0 && t < 3) }' || fail "term: teardown ${td}s, want grace 1s"
assert_no_leftovers
pass "SIGTERM ignored: SIGKILL after ${td}s"

# --- an escaped grandchild (setsid, keeps stdout open) is killed and reaped
"$AUTOBATCH" --quiet --batch 1:4 --json "$WORK/esc.json" -- \
  "$SIMTRAIN" --escape "$WORK/escaped.pid" --capacity 8G >"$WORK/esc.out" 2>&1 || fail "escape: exit $?"
[ -s "$WORK/escaped.pid" ] || fail "escape: the grandchild never started"
# (the pid it wrote is its own view: in a PID namespace it is not ours;
# the leftover check below finds every process of the test by its mark)
[ "$(jqr '.summary.trials' "$WORK/esc.json")" -ge 3 ] || fail "escape: too few trials"
assert_no_leftovers
pass "escaped grandchild killed ($(jqr '.teardown' "$WORK/esc.json"))"
