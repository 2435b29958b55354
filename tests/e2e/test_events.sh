#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --events: one JSON object per line as things happen (start, each trial's
# start, steps and end, the choice, the end), consistent with the results
# file; --dry-run: each cell's first trial shown and nothing run; bad
# input refused before the first trial.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/train.sh" <<SH
#!/bin/sh
echo "\$AUTOBATCH_TRIAL" >>"$WORK/trials.log"
exec "$SIMTRAIN" --capacity 12G --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"

"$AUTOBATCH" --quiet --no-cache --batch 1:128 --steps 3 --checkpointing both \
  --events "$WORK/ev.jsonl" --json "$WORK/r.json" -- "$WORK/train.sh" >"$WORK/run.out" 2>&1 \
  || fail "run: exit $? ($(tail -3 "$WORK/run.out"))"
ev="$WORK/ev.jsonl"
jq -e . "$ev" >/dev/null || fail "a line is not JSON"
assert_eq start "$(head -1 "$ev" | jq -r .event)" "first event"
assert_eq end "$(tail -1 "$ev" | jq -r .event)" "last event"
trials=$(jqr '.summary.trials' "$WORK/r.json")
assert_eq "$trials" "$(jq -s '[.[] | select(.event == "trial_start")] | length' "$ev")" "trial_start events"
assert_eq "$trials" "$(jq -s '[.[] | select(.event == "trial_end")] | length' "$ev")" "trial_end events"
# each trial's end carries what the results file says of it
diff <(jq -c '.trials[] | [.id, .micro_batch, .checkpointing, .outcome]' "$WORK/r.json") \
     <(jq -c 'select(.event == "trial_end") | [.id, .micro_batch, .checkpointing, .outcome]' "$ev") \
  || fail "trial_end events differ from the results file's trials"
# the choice's confirmation run: its own start and end, as the results' "confirm"
assert_eq "$(jqr '.confirm | length' "$WORK/r.json")" \
  "$(jq -s '[.[] | select(.event == "confirm_end")] | length' "$ev")" "confirm_end events"
assert_eq "$(jqr '.confirm[-1].micro_batch' "$WORK/r.json")" \
  "$(jq -s -r '[.[] | select(.event == "confirm_start")][-1].micro_batch' "$ev")" "confirm_start"
assert_eq true "$(jqr '.summary.confirmed' "$WORK/r.json")" "the choice confirmed"
assert_eq "$(jq -c '.best.micro_batch' "$WORK/r.json")" \
  "$(jq -c 'select(.event == "choice") | .best.micro_batch' "$ev")" "the choice"
assert_eq 0 "$(jq -c 'select(.event == "end") | .exit' "$ev")" "end: exit status"
steps=$(jq -s '[.[] | select(.event == "step")] | length' "$ev")
[ "$steps" -ge 1 ] || fail "no step events"
# time never goes back, and each step belongs to the trial started last
jq -s -e '[.[].t] as $t | all(range(1; $t | length); $t[.] >= $t[. - 1])' "$ev" >/dev/null \
  || fail "t goes back"
jq -s -e 'reduce .[] as $e ({cur: null, ok: true};
  if $e.event == "trial_start" or $e.event == "confirm_start" then .cur = $e.trial
  elif $e.event == "step" then .ok = (.ok and $e.trial == .cur) else . end) | .ok' "$ev" >/dev/null \
  || fail "a step event names another trial than the running one"
pass "events: start, $trials trial starts and ends (as in the results), $steps steps, choice, end"

# --dry-run: every cell's first trial, nothing run
: >"$WORK/trials.log"
"$AUTOBATCH" --dry-run --batch 4:64 --grad-accum 1,2 -- "$WORK/train.sh" >"$WORK/dry.out" 2>&1 \
  || fail "dry run: exit $? ($(cat "$WORK/dry.out"))"
[ ! -s "$WORK/trials.log" ] || fail "dry run: a trial ran"
assert_eq 2 "$(grep -c '^# cell' "$WORK/dry.out")" "dry run: cells shown"
grep -q -- "--per_device_train_batch_size 4 --gradient_accumulation_steps 2" "$WORK/dry.out" \
  || fail "dry run: the second cell's knobs: $(cat "$WORK/dry.out")"
grep -q "^AUTOBATCH_MICRO_BATCH=4 \\\\$" "$WORK/dry.out" || fail "dry run: the trial's environment"
pass "dry run: two cells shown, nothing run"

assert_refused "events and json on stdout" "both want stdout" "$WORK/trials.log" \
  --events - --json - --batch 1:8 -- "$WORK/train.sh"
assert_refused "events unwritable" "--events: cannot open" "$WORK/trials.log" \
  --events /nonexistent/dir/ev.jsonl --batch 1:8 -- "$WORK/train.sh"
pass "bad --events refused before the first trial"
