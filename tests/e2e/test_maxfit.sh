#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch finds the exact largest micro-batch of simtrain for several
# capacities and each OOM point (forward at step 1, optimizer state at the
# first optimizer step, a long batch at a later step), every trial is
# classified fit or oom, and the count stays within 2*log2(range)+1.
source "$(dirname "$0")/lib.sh"

check() { # name, simtrain args...
  local name=$1; shift
  local steps=7 want
  want=$("$SIMTRAIN" "$@" --max_steps $steps --print-max)
  "$AUTOBATCH" --quiet --preset hf --batch 1:512 --warmup 2 --steps 5 \
    --json "$WORK/$name.json" -- "$SIMTRAIN" "$@" --output_dir "$WORK/out" >"$WORK/$name.out" 2>&1 \
    || fail "$name: autobatch exited $? ($(tail -3 "$WORK/$name.out"))"
  local got trials others
  got=$(jqr '.max_fit[0].micro_batch' "$WORK/$name.json")
  trials=$(jqr '.summary.trials' "$WORK/$name.json")
  others=$(jqr '[.trials[] | select(.outcome != "fit" and .outcome != "oom")] | length' "$WORK/$name.json")
  assert_eq "$want" "$got" "$name: max micro-batch"
  assert_best_is_fastest "$WORK/$name.json" "$name"
  assert_eq 0 "$others" "$name: trials neither fit nor oom"
  [ "$trials" -le 19 ] || fail "$name: $trials trials for a 1:512 range"
  # the trial just above the answer failed with the evidence of an OOM
  local ev
  ev=$(jqr ".trials[] | select(.micro_batch == $((want + 1))) | .evidence" "$WORK/$name.json")
  [ -n "$ev" ] && [ "$ev" != null ] || fail "$name: no evidence for micro_batch=$((want + 1))"
  pass "$name: max micro-batch $got in $trials trials"
}

# OOM in the forward pass of step 1: the optimizer state is tiny.
check fwd-8g   --capacity 8G  --optim-mem 2M
check fwd-24g  --capacity 24G --optim-mem 2M
# OOM when the optimizer state is allocated at the first optimizer step.
check optim-24g --capacity 24G --optim-mem 6G
check optim-80g --capacity 80G --optim-mem 20G --act-mem 300M
# OOM at step 4, when the longest batch comes.
check long-24g --capacity 24G --long-step 4 --long-factor 1.7
check long-40g --capacity 40G --long-step 6 --long-factor 1.3 --oom-style old
# Other message generations and a kernel OOM kill.
check style-21 --capacity 16G --oom-style 2.1
check cpu      --capacity 12G --oom-style cpu
check killer   --capacity 12G --kernel-oom
assert_no_leftovers
