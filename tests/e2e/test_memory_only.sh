#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory-only boundary trials (issue 27, item 1) on a real PyTorch job
# (examples/pytorch/train_tts.py, Debian's CPU torch) under
# --trial-memory-limit: with the probe, the boundary search's fits end
# once the probe's memory figure stops growing past the second optimizer
# step (no speed: samples_per_s null, "memory_only": true); the choice is
# measured in a full trial of warm-up + --steps and confirmed in a fresh
# run.  --full-trials measures every trial in full.  Recording trials
# (--replay) report no speed (the profiler slows them).
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_tts.py"
COMMON=(--steps 3 --warmup 1 --trial-memory-limit 803500K --no-cache --kill-grace 2s --batch 1:24)

assert_refused "--replay --no-replay" "keep one" "$WORK/trials.log" --replay --no-replay \
  --trial-memory-limit 1G -- bash -c "echo x >> $WORK/trials.log"

"$AUTOBATCH" "${COMMON[@]}" --json "$WORK/m.json" -- "$PY" "$TRAIN" --worst_case \
  >"$WORK/m.out" 2>&1 || fail "memory-only: exit $? $(tail -3 "$WORK/m.out")"
n_mem=$(jqr '[.trials[] | select(.memory_only == true)] | length' "$WORK/m.json")
[ "$n_mem" -ge 2 ] || fail "memory-only: $n_mem memory-only trials: $(jq -c '[.trials[] | [.micro_batch, .outcome, .memory_only]]' "$WORK/m.json")"
assert_eq 0 "$(jqr '[.trials[] | select(.memory_only == true and (.outcome != "fit" or .samples_per_s != null))] | length' "$WORK/m.json")" \
  "memory-only trials that are not speedless fits"
best=$(jqr '.best.micro_batch' "$WORK/m.json")
[ "$best" -ge 1 ] || fail "memory-only: no choice"
full=$(jqr "[.trials[] | select(.micro_batch == $best and .memory_only != true and .samples_per_s != null and .steps_measured >= 3)] | length" "$WORK/m.json")
[ "$full" -ge 1 ] || fail "memory-only: the choice $best has no full trial: $(jq -c '[.trials[] | [.micro_batch, .outcome, .memory_only, .samples_per_s]]' "$WORK/m.json")"
# The largest fit is measured in full too (its speed is the one the knee and the cells compare).
mf=$(jqr '.max_fit[0].micro_batch' "$WORK/m.json")
[ "$(jqr "[.trials[] | select(.micro_batch == $mf and .samples_per_s != null)] | length" "$WORK/m.json")" -ge 1 ] \
  || fail "memory-only: the largest fit $mf has no measured speed"
assert_eq true "$(jqr '.summary.confirmed' "$WORK/m.json")" "memory-only: the choice confirmed in a fresh run"
grep -q "memory only" "$WORK/m.out" || grep -q "fit (.*)" "$WORK/m.out" || fail "memory-only: no trial line"
assert_no_leftovers
pass "memory-only: $n_mem boundary trials without a speed, choice $best measured in full and confirmed, largest fit $mf"

"$AUTOBATCH" "${COMMON[@]}" --full-trials --json "$WORK/f.json" -- "$PY" "$TRAIN" --worst_case \
  >"$WORK/f.out" 2>&1 || fail "full: exit $? $(tail -3 "$WORK/f.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.memory_only == true)] | length' "$WORK/f.json")" "--full-trials: memory-only trials"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .samples_per_s == null)] | length' "$WORK/f.json")" \
  "--full-trials: fits without a speed"
pass "--full-trials: every fit measured ($(jqr '.trials | length' "$WORK/f.json") trials, largest fit $(jqr '.max_fit[0].micro_batch' "$WORK/f.json"))"

# Recording trials: profiled steps are slower; their speed is not kept.
"$AUTOBATCH" "${COMMON[@]}" --replay --no-confirm --json "$WORK/r.json" -- "$PY" "$TRAIN" --worst_case \
  >"$WORK/r.out" 2>&1 || fail "replay: exit $? $(tail -3 "$WORK/r.out")"
[ "$(jqr '[.trials[] | select(.recorded == true)] | length' "$WORK/r.json")" -ge 2 ] || fail "replay: no recording trials"
assert_eq 0 "$(jqr '[.trials[] | select(.recorded == true and .samples_per_s != null)] | length' "$WORK/r.json")" \
  "replay: recording trials with a speed"
pass "recording trials report no speed"
