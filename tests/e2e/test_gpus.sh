#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trials side by side (--gpus): on 1, 2 and 4 simulated GPUs autobatch
# finds the serial search's boundary in fewer rounds; each trial of a
# round gets its own CUDA_VISIBLE_DEVICES; a trial that another answered
# for is cancelled; throughput is measured alone; bad --gpus input is
# refused before the first trial.  simtrain takes a capacity per visible
# device (--device-capacity), the fake NVML several GPUs.
source "$(dirname "$0")/lib.sh"

# A wrapper that logs which devices each trial saw, then runs simtrain.
cat >"$WORK/train.sh" <<SH
#!/bin/sh
echo "\$AUTOBATCH_TRIAL \$AUTOBATCH_MICRO_BATCH \$CUDA_VISIBLE_DEVICES \$AUTOBATCH_SLOT" >>"$WORK/devices.log"
exec "$SIMTRAIN" --capacity 24G --startup-time 0.3s --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"
want=$("$SIMTRAIN" --capacity 24G --print-max)

run() { # name, autobatch args...
  local name=$1; shift
  : >"$WORK/devices.log"
  "$AUTOBATCH" --no-cache --preset hf --batch 1:512 --warmup 1 --steps 3 \
    --json "$WORK/$name.json" "$@" -- "$WORK/train.sh" >"$WORK/$name.out" 2>&1 \
    || fail "$name: autobatch exited $? ($(tail -3 "$WORK/$name.out"))"
  cp "$WORK/devices.log" "$WORK/$name.devices"
}

# Rounds of the boundary search: trials that ran side by side, plus the
# boundary trials run alone before the first throughput measurement.
boundary_rounds() {
  jq '[.trials[] | select(.shared)] | map(.round) | unique | length' "$1"
}

run serial
serial_trials=$(jqr '[.trials[] | select(.retest | not)] | length' "$WORK/serial.json")
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/serial.json")" "serial: max micro-batch"
prev=1000
for n in 2 4; do
  list=$(seq -s, 0 $((n - 1)))
  run "n$n" --gpus "$list"
  f="$WORK/n$n.json"
  assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$f")" "n$n: max micro-batch"
  assert_eq "$n" "$(jqr '.summary.slots' "$f")" "n$n: slots"
  rounds=$(boundary_rounds "$f")
  [ "$rounds" -ge 1 ] || fail "n$n: no round ran side by side"
  # the bracket was searched in fewer rounds than the serial search took trials
  [ "$rounds" -lt "$serial_trials" ] || fail "n$n: $rounds rounds vs $serial_trials serial trials"
  [ "$rounds" -le "$prev" ] || fail "n$n: more rounds ($rounds) than with fewer GPUs ($prev)"
  prev=$rounds
  # every trial that ran beside others names devices from the list, and no
  # two trials of one round share a device
  dup=$(jq '[.trials[] | select(.shared) | "\(.round) \(.devices)"] | (length - (unique | length))' "$f")
  assert_eq 0 "$dup" "n$n: trials of one round sharing a device"
  bad=$(jq --arg l ",$list," '[.trials[] | select(.devices) | .devices as $d | select(($l | index("," + $d + ",")) | not)] | length' "$f")
  assert_eq 0 "$bad" "n$n: devices outside --gpus"
  # the trials really saw them
  seen=$(awk '{print $3}' "$WORK/n$n.devices" | sort -u | grep -c . || true)
  [ "$seen" -ge 2 ] || fail "n$n: trials saw only $seen distinct CUDA_VISIBLE_DEVICES"
  # the slot number is the device's place in the list (one GPU per slot)
  wrong=$(awk '$3 != $4' "$WORK/n$n.devices" | wc -l)
  assert_eq 0 "$wrong" "n$n: trials whose AUTOBATCH_SLOT is not their GPU's slot"
  # a speed measured beside others is not kept; the choice has one measured alone
  shared_speed=$(jq '[.trials[] | select(.shared and .samples_per_s != null)] | length' "$f")
  assert_eq 0 "$shared_speed" "n$n: a shared trial's speed kept"
  [ "$(jqr '.best.samples_per_s' "$f")" != null ] || fail "n$n: the choice has no speed measured alone"
  pass "n$n: max micro-batch $want in $rounds side-by-side rounds ($(jqr '.summary.trials' "$f") trials, $(jqr '.summary.cancelled' "$f") cancelled, $(jqr '.summary.wall_s' "$f" | cut -c1-5) s); serial: $serial_trials trials, $(jqr '.summary.wall_s' "$WORK/serial.json" | cut -c1-5) s"
done

# Two GPUs per trial: each trial sees two devices.
run pairs --gpus 0,1,2,3 --gpus-per-trial 2
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/pairs.json")" "pairs: max micro-batch"
grep -qv ',' <(awk '{print $3}' "$WORK/pairs.devices") && fail "pairs: a trial saw one device"
pass "pairs: every trial saw two devices"

# A capacity per device: the search runs on the slots' devices only.
cat >"$WORK/small.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --device-capacity 2=12G,3=12G --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/small.sh"
small=$(CUDA_VISIBLE_DEVICES=2 "$SIMTRAIN" --capacity 24G --device-capacity 2=12G,3=12G --print-max)
"$AUTOBATCH" --quiet --no-cache --preset hf --batch 1:512 --steps 3 --gpus 2,3 \
  --json "$WORK/small.json" -- "$WORK/small.sh" >"$WORK/small.out" 2>&1 \
  || fail "small: autobatch exited $?"
assert_eq "$small" "$(jqr '.max_fit[0].micro_batch' "$WORK/small.json")" "small: max micro-batch on GPUs 2,3"
pass "small: GPUs 2 and 3 (12G) give $small, not $want"

# Bad input: refused before any trial, exit 2, one line that names the fix.
bad() { # what, expected text, args...
  assert_refused "$1" "$2" "$WORK/devices.log" --quiet --preset hf --batch 1:8 "${@:3}" -- "$WORK/train.sh"
}
bad "odd count" "not a multiple of --gpus-per-trial 2" --gpus 0,1,2 --gpus-per-trial 2
bad "twice" "listed twice" --gpus 0,0
bad "word" "neither an index nor a GPU UUID" --gpus zero
bad "all without NVML" "list them" --gpus all
export AUTOBATCH_NVML_LIB=$FAKE_NVML_LIB FAKE_NVML_GPUS=2
bad "missing GPU" "GPU 5 does not exist" --gpus 0,5
pass "bad --gpus input refused before the first trial"

# Two GPU models: each searched on its own GPUs, results per model.
cat >"$WORK/mixed.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --device-capacity GPU-fake-00000002=12G,GPU-fake-00000003=12G \
  --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/mixed.sh"
big=$(CUDA_VISIBLE_DEVICES=GPU-fake-00000000 "$SIMTRAIN" --capacity 24G --print-max)
small=$(CUDA_VISIBLE_DEVICES=GPU-fake-00000002 "$SIMTRAIN" --capacity 24G \
  --device-capacity GPU-fake-00000002=12G,GPU-fake-00000003=12G --print-max)
FAKE_NVML_GPUS=4 FAKE_NVML_NAME="NVIDIA A100;NVIDIA A100;NVIDIA L4;NVIDIA L4" \
  FAKE_NVML_TOTAL="24G 24G 12G 12G" "$AUTOBATCH" --quiet --no-cache --preset hf --batch 1:256 \
  --steps 3 --gpus all --json "$WORK/mixed.json" -- "$WORK/mixed.sh" >"$WORK/mixed.out" 2>&1 \
  || fail "mixed: exited $? ($(tail -3 "$WORK/mixed.out"))"
a="$WORK/mixed-nvidia-a100-24g.json" l="$WORK/mixed-nvidia-l4-12g.json"
[ -s "$a" ] && [ -s "$l" ] || fail "mixed: no results per model: $(ls "$WORK" | grep mixed)"
assert_eq "$big" "$(jqr '.max_fit[0].micro_batch' "$a")" "mixed: A100 max micro-batch"
assert_eq "$small" "$(jqr '.max_fit[0].micro_batch' "$l")" "mixed: L4 max micro-batch"
assert_eq "GPU-fake-00000002" "$(jq -r '[.trials[].devices // empty | split(",")[]] | unique | first' "$l")" "mixed: L4 trials' first device"
grep -q "NVIDIA L4, 12.0 GiB (GPUs 2,3): searched on its own" "$WORK/mixed.out" \
  || fail "mixed: the split not said: $(head -3 "$WORK/mixed.out")"
pass "mixed: A100s $big and L4s $small, searched apart, one results file each"
assert_no_leftovers
