#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The batch knob must reach the trainer (issue 24, item 1).  A torch
# trainer that takes --per_device_train_batch_size and ignores it (always
# 8, no DataLoader) is refused with exit 2 and nothing written:
#   * under hf, env and auto with the in-process probe (it sees the batch
#     the model gets: 8, not the size passed);
#   * under hf without the probe (steps and peak memory from
#     $AUTOBATCH_REPORT): the smallest and largest sizes ran with the same
#     memory and time per step; with no memory figure only a warning;
#   * --preset auto picks nothing without evidence (exit 2 before any
#     trial) and picks hf for examples/pytorch/train_tts.py, whose search
#     test_pytorch.sh runs (27 under its cap, not the top of the range).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || skip "no torch for $PY"
export OMP_NUM_THREADS=1 PYTHONHASHSEED=0
T="$AB_SOURCE_DIR/tests/e2e/fixtures/ignore_batch.py"
COMMON=(--batch 1:64 --steps 3 --warmup 1 --no-cache --quiet)

refused_after_trials() { # WHAT JSON ARGS...: exit 2, the reason, no choice written
  local what=$1 json=$2 rc=0
  shift 2
  "$AUTOBATCH" "$@" >"$WORK/out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$what: exit status ($(tail -3 "$WORK/out"))"
  grep -q "does not reach the trainer" "$WORK/out" || fail "$what: no reason in: $(cat "$WORK/out")"
  if grep -q '^autobatch: best:' "$WORK/out"; then fail "$what: printed a best size"; fi
  [ ! -e "$json" ] || [ "$(jq -r '.best' "$json")" = null ] || fail "$what: results name a best size"
  pass "$what: refused after $(jq '.trials | length' "$json" 2>/dev/null || echo '?') trial(s)"
}

refused_after_trials "hf, probe" "$WORK/hf.json" --preset hf "${COMMON[@]}" --json "$WORK/hf.json" \
  -- "$PY" "$T"
refused_after_trials "env, probe" "$WORK/env.json" --preset env "${COMMON[@]}" --json "$WORK/env.json" \
  -- "$PY" "$T"
refused_after_trials "auto, probe" "$WORK/auto.json" --preset auto "${COMMON[@]}" --json "$WORK/auto.json" \
  -- "$PY" "$T"
grep -q "picked 'hf'" "$WORK/out" || fail "auto: did not say it picked hf: $(head -3 "$WORK/out")"
for j in hf env auto; do # the probe's view decides after two sizes, not the top of the range
  [ "$(jq '.trials | length' "$WORK/$j.json")" -le 2 ] || fail "$j: more than two trials"
  [ "$(jq '[.trials[].batch_seen] | unique' -c "$WORK/$j.json")" = "[8]" ] \
    || fail "$j: batch_seen is not the 8 the model got"
done

# Without the probe: steps from $AUTOBATCH_REPORT, the outside check.
refused_after_trials "hf, no probe" "$WORK/np.json" --preset hf "${COMMON[@]}" --no-probe \
  --json "$WORK/np.json" -- "$PY" "$T" --report --report_mem
grep -q "same memory and the same time per step" "$WORK/out" || fail "no probe: not the memory/time check: $(cat "$WORK/out")"

# Without the probe and without memory figures, the same times are no
# proof: a warning, not a refusal (a real knob at small sizes can change
# a step's time by less than its noise).
rc=0
"$AUTOBATCH" --preset hf "${COMMON[@]}" --no-probe --json "$WORK/nm.json" -- "$PY" "$T" --report \
  >"$WORK/out" 2>&1 || rc=$?
assert_eq 0 "$rc" "no probe, no memory figures: exit status ($(tail -2 "$WORK/out"))"
grep -q "warning: .*cannot tell whether the batch knob reaches the trainer" "$WORK/out" \
  || fail "no probe, no memory figures: no warning in: $(cat "$WORK/out")"
pass "no probe, no memory figures: warned, not refused"

# --write: a refused run leaves the config as it was.
printf '{\n  "per_device_train_batch_size": 8,\n  "lr": 0.1\n}\n' > "$WORK/cfg.json"
cp "$WORK/cfg.json" "$WORK/cfg.orig"
refused_after_trials "json --write" "$WORK/w.json" --preset json --config "$WORK/cfg.json" --write \
  "${COMMON[@]}" --json "$WORK/w.json" -- "$PY" "$T" --config "$WORK/cfg.json"
cmp -s "$WORK/cfg.json" "$WORK/cfg.orig" || fail "--write changed the config of a refused run"
pass "--write left the config alone"

# --preset auto with no evidence: exit 2 before any trial, naming the fix.
printf 'import os\nprint(os.environ.get("BATCH"))\n' > "$WORK/plain.py"
: > "$WORK/trials.log"
assert_refused "auto without evidence" "cannot tell how the command takes its batch size" \
  "$WORK/trials.log" --preset auto -- bash -c "echo x >> $WORK/trials.log; $PY $WORK/plain.py"
assert_refused "auto without evidence (script)" "--preset" "$WORK/trials.log" \
  --preset auto -- "$PY" "$WORK/plain.py"
# ... and hf for the repository's real trainer, on the flag its script parses.
"$AUTOBATCH" --preset auto --dry-run -- "$PY" "$AB_SOURCE_DIR/examples/pytorch/train_tts.py" \
  >"$WORK/dry.out" 2>&1 || fail "auto dry run on train_tts.py: $(cat "$WORK/dry.out")"
grep -q "picked 'hf'.*--per_device_train_batch_size" "$WORK/dry.out" \
  || fail "auto on train_tts.py: $(head -2 "$WORK/dry.out")"
pass "--preset auto: no guess without evidence; hf for train_tts.py"
assert_no_leftovers
