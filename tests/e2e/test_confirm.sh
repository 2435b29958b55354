#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The choice's confirmation run (issue 24, item 5) as a user drives it:
# --confirm STEPS runs that many measured steps; a soak longer than
# --trial-timeout leaves the choice unconfirmed and says so (a timeout is
# no evidence about memory); --no-confirm skips it; bad values are refused
# before the first trial.  (test_tune has the choice moving down when the
# confirmation runs out of memory.)
source "$(dirname "$0")/lib.sh"

"$AUTOBATCH" --quiet --no-cache --batch 1:64 --confirm 7 --json "$WORK/s.json" -- \
  "$SIMTRAIN" --capacity 8G >"$WORK/s.out" 2>&1 || fail "steps: exit $? $(tail -3 "$WORK/s.out")"
assert_eq 1 "$(jqr '.confirm | length' "$WORK/s.json")" "steps: confirmation runs"
assert_eq "$(jqr '.best.micro_batch' "$WORK/s.json")" "$(jqr '.confirm[0].micro_batch' "$WORK/s.json")" "steps: the choice ran"
[ "$(jqr '.confirm[0].steps_measured' "$WORK/s.json")" -ge 7 ] || fail "steps: fewer than 7 measured"
assert_eq true "$(jqr '.summary.confirmed' "$WORK/s.json")" "steps: confirmed"
grep -q '^autobatch: confirmed: micro_batch=' "$WORK/s.out" || fail "steps: no 'confirmed:' line"
# The cells' trial counts are the search's: the confirmation run is kept apart.
assert_eq "$(jqr '.summary.trials' "$WORK/s.json")" "$(jqr '[.max_fit[].trials] | add' "$WORK/s.json")" \
  "steps: the cells' trials vs the summary's"
pass "--confirm 7: the choice trained $(jqr '.confirm[0].steps_measured' "$WORK/s.json") more steps"

rc=0
"$AUTOBATCH" --quiet --no-cache --batch 1:64 --trial-timeout 2s --confirm 30s --json "$WORK/t.json" -- \
  "$SIMTRAIN" --capacity 8G >"$WORK/t.out" 2>&1 || rc=$?
assert_eq 0 "$rc" "timeout: exit status"
assert_eq false "$(jqr '.summary.confirmed' "$WORK/t.json")" "timeout: not confirmed"
assert_eq 1 "$(jqr '.confirm | length' "$WORK/t.json")" "timeout: one confirmation run, the choice kept"
grep -q "ran past --trial-timeout; the choice stays, unconfirmed" "$WORK/t.out" || fail "timeout: not said: $(cat "$WORK/t.out")"
grep -q '^autobatch: not confirmed' "$WORK/t.out" || fail "timeout: the answer does not say it is unconfirmed"
pass "a soak past --trial-timeout: the choice stays, unconfirmed, and says so"

"$AUTOBATCH" --quiet --no-cache --batch 1:64 --no-confirm --json "$WORK/n.json" -- \
  "$SIMTRAIN" --capacity 8G >"$WORK/n.out" 2>&1 || fail "no-confirm: exit $?"
assert_eq 0 "$(jqr '.confirm | length' "$WORK/n.json")" "no-confirm: runs"
grep -q 'not confirmed (--no-confirm)' "$WORK/n.out" || fail "no-confirm: not said"
pass "--no-confirm"

: >"$WORK/trials.log"
for v in 0 abc -5s; do
  assert_refused "--confirm $v" "--confirm '$v'" "$WORK/trials.log" --confirm "$v" -- \
    bash -c "echo x >> $WORK/trials.log"
done
assert_refused "--worst-case bad" "--worst-case 'sometimes'" "$WORK/trials.log" --worst-case sometimes -- \
  bash -c "echo x >> $WORK/trials.log"
pass "bad --confirm and --worst-case values refused before any trial"
assert_no_leftovers
