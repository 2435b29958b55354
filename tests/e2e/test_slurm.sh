#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trials on a real single-node Slurm cluster started here
# (tests/slurm/cluster.sh: Debian's slurm-wlm, munge, four fake GPUs).
# Inside an allocation each trial is a job step (srun); from the login
# node each round is a job array.  Either way the boundary is the local
# search's, side by side (--gpus) in fewer rounds with no GPU shared by
# two trials at once; an OOM line ends its step or task; a trainer that
# ignores SIGTERM is still ended; nothing is left queued or running, even
# when autobatch itself is killed.
source "$(dirname "$0")/lib.sh"
slurm_cluster 4 slurm

cat >"$WORK/train.sh" <<SH
#!/bin/sh
echo "\$AUTOBATCH_TRIAL \$AUTOBATCH_MICRO_BATCH \${SLURM_JOB_ID:-none}.\${SLURM_STEP_ID:-batch} \$CUDA_VISIBLE_DEVICES" >>"$WORK/steps.log"
# a GPU held by two steps at once would find its lock taken
flock -n -E 99 "$WORK/gpu-\$CUDA_VISIBLE_DEVICES.lock" \
  "$SIMTRAIN" --capacity 24G --startup-time 0.3s --output_dir "$WORK/out" "\$@"
rc=\$?
[ \$rc -ne 99 ] || echo "CLASH \$AUTOBATCH_TRIAL \$CUDA_VISIBLE_DEVICES" >>"$WORK/clash.log"
exit \$rc
SH
chmod +x "$WORK/train.sh"
want=$("$SIMTRAIN" --capacity 24G --print-max)

in_alloc() { # name, autobatch args...
  local name=$1; shift
  : >"$WORK/steps.log"
  salloc -N1 -n4 --gres=gpu:4 -t 10 -J "ab-$name" -- \
    "$AUTOBATCH" --no-cache --preset hf --batch 1:512 --warmup 1 --steps 3 \
    --json "$WORK/$name.json" "$@" -- "$WORK/train.sh" >"$WORK/$name.out" 2>&1 \
    || fail "$name: autobatch in salloc exited $? ($(tail -5 "$WORK/$name.out"))"
}
nothing_left() { # what
  local left
  left=$(squeue -h -s -o '%i %j %M' | grep autobatch || true)
  [ -z "$left" ] || fail "$1: job steps still listed: $left"
  pgrep -f "$SIMTRAIN" >/dev/null && fail "$1: a trainer process is still running"
  return 0
}

in_alloc serial
f="$WORK/serial.json"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$f")" "serial: max micro-batch"
assert_eq slurm "$(jqr '.summary.launcher' "$f")" "serial: launcher"
steps=$(awk '$3 !~ /^none/' "$WORK/steps.log" | wc -l)
assert_eq "$(wc -l <"$WORK/steps.log")" "$steps" "serial: trials that ran as job steps"
nothing_left serial
serial_trials=$(jqr '.summary.trials' "$f")
pass "serial: $want as $steps job steps"

in_alloc n4 --gpus all
f="$WORK/n4.json"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$f")" "n4: max micro-batch"
rounds=$(jq '[.trials[] | select(.shared) | .round] | unique | length' "$f")
[ "$rounds" -ge 1 ] && [ "$rounds" -lt "$serial_trials" ] \
  || fail "n4: $rounds side-by-side rounds against $serial_trials serial trials"
# no GPU was held by two steps at once, and the steps used several GPUs
[ ! -s "$WORK/clash.log" ] || fail "n4: two steps on one GPU at once: $(cat "$WORK/clash.log")"
gpus=$(awk '{print $4}' "$WORK/steps.log" | sort -u | grep -c .)
[ "$gpus" -ge 2 ] || fail "n4: steps ran on $gpus GPU(s)"
# the round notes name Slurm as the one that gives the GPUs, not a slot's placeholder
grep -q "round 1: trial [0-9]* micro_batch=[0-9]* on the GPUs Slurm gives it" "$WORK/n4.out" \
  || fail "n4: round notes: $(grep 'round 1' "$WORK/n4.out" | head -2)"
grep -q "Slurm picks" "$WORK/n4.out" && fail "n4: a placeholder shown: $(grep 'Slurm picks' "$WORK/n4.out" | head -1)"
nothing_left n4
pass "n4: $want in $rounds rounds of job steps ($(jqr '.summary.trials' "$f") trials, $(jqr '.summary.cancelled' "$f") cancelled)"

# A trainer that ignores SIGTERM: the step still ends (SIGKILL after the
# grace, then scancel of the step).
cat >"$WORK/stubborn.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --ignore-sigterm --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/stubborn.sh"
salloc -N1 -n1 --gres=gpu:1 -t 5 -J ab-stubborn -- \
  "$AUTOBATCH" --quiet --no-cache --preset hf --batch 1:128 --steps 3 --kill-grace 1s \
  --json "$WORK/stubborn.json" -- "$WORK/stubborn.sh" >"$WORK/stubborn.out" 2>&1 \
  || fail "stubborn: exited $? ($(tail -3 "$WORK/stubborn.out"))"
assert_eq "$("$SIMTRAIN" --capacity 24G --print-max)" "$(jqr '.max_fit[0].micro_batch' "$WORK/stubborn.json")" "stubborn: answer"
nothing_left stubborn
pass "stubborn: SIGTERM-ignoring steps ended, nothing left"

# From the login node: each round is a job array, each trial's output
# followed from its task's file, states read from scontrol.
running() { squeue -h -t pending,running,completing -o '%j' | grep -c '^autobatch' || true; }
from_login() { # name, autobatch args...
  local name=$1; shift
  : >"$WORK/steps.log"
  "$AUTOBATCH" --launcher slurm --no-cache --preset hf --batch 1:512 --warmup 1 --steps 3 \
    --json "$WORK/$name.json" "$@" -- "$WORK/train.sh" >"$WORK/$name.out" 2>&1 \
    || fail "$name: autobatch exited $? ($(tail -5 "$WORK/$name.out"))"
}
from_login array1
f="$WORK/array1.json"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$f")" "array1: max micro-batch"
assert_eq slurm-array "$(jqr '.summary.launcher' "$f")" "array1: launcher"
tasks=$(awk '$3 !~ /^none/' "$WORK/steps.log" | wc -l)
# (the choice's confirmation run is an array task too, kept apart from .trials)
assert_eq "$(jqr '.summary.trials + (.confirm | length)' "$f")" "$tasks" "array1: trials that ran as array tasks"
assert_eq 0 "$(running)" "array1: tasks still queued or running"
pass "array1: $want in $tasks array tasks, nothing left"

from_login array4 --gpus 4
f="$WORK/array4.json"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$f")" "array4: max micro-batch"
[ ! -s "$WORK/clash.log" ] || fail "array4: two tasks on one GPU at once: $(cat "$WORK/clash.log")"
[ "$(jqr '.best.samples_per_s' "$f")" != null ] || fail "array4: the choice has no speed"
rounds=$(jq '[.trials[] | select(.shared) | .round] | unique | length' "$f")
assert_eq 0 "$(running)" "array4: tasks still queued or running"
pass "array4: $want in $rounds rounds of 4-task arrays ($(jqr '.summary.trials' "$f") trials)"

# autobatch killed with SIGKILL mid-trial: its followers die with it, the
# task's watchdog sees no heartbeat and ends the trial.
cat >"$WORK/slow.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --startup-time 60s --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/slow.sh"
AUTOBATCH_SLURM_HEARTBEAT=3 "$AUTOBATCH" --launcher slurm --no-cache --preset hf --batch 1:8 \
  -- "$WORK/slow.sh" >"$WORK/killed.out" 2>&1 &
ab=$!
# the task must be running (its watchdog with it) before autobatch dies
for _ in $(seq 600); do [ "$(squeue -h -t running -o '%j' | grep -c '^autobatch')" -ge 1 ] && break; sleep 0.1; done
[ "$(squeue -h -t running -o '%j' | grep -c '^autobatch')" -ge 1 ] \
  || fail "killed: no task running after 60 s ($(squeue -h -t all -o '%i %T %r' | tail -3); $(tail -3 "$WORK/killed.out"))"
kill -9 "$ab"
wait "$ab" 2>/dev/null || true
# a later autobatch sweeps the killed run's directory, heartbeat file and
# all (as other runs on a busy machine do): a task must take that as the
# end too
"$AUTOBATCH" --dry-run --batch 1:2 -- "$WORK/slow.sh" >/dev/null 2>&1 || fail "killed: the sweeping run failed"
t0=$SECONDS
while [ "$(running)" -gt 0 ] && [ $((SECONDS - t0)) -lt 60 ]; do sleep 0.5; done
[ "$(running)" -eq 0 ] || fail "killed: still queued or running $((SECONDS - t0)) s after autobatch was killed: $(squeue -h -t all -o '%i %T %r %M' | grep -v COMPLETED | tail -3); autobatch said: $(tail -3 "$WORK/killed.out")"
pgrep -f "$SIMTRAIN" >/dev/null && fail "killed: a trainer process is still running"
pass "killed: the orphaned task ended itself $((SECONDS - t0)) s after autobatch's SIGKILL"

# Bad input: --launcher slurm without srun (in an allocation) or sbatch
# (outside), refused before the first trial.
refused() { # what, expected text, environment...
  local rc=0
  : >"$WORK/steps.log"
  env "${@:3}" "$AUTOBATCH" --launcher slurm --batch 1:8 -- "$WORK/train.sh" >"$WORK/bad.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$1: exit status"
  grep -q "$2" "$WORK/bad.out" || fail "$1: $(cat "$WORK/bad.out")"
  [ ! -s "$WORK/steps.log" ] || fail "$1: a trial ran"
}
refused "no srun" "srun is not in PATH" SLURM_JOB_ID=1 PATH=/nonexistent
refused "no sbatch" "sbatch, scontrol and scancel must be in PATH" PATH=/nonexistent
pass "no srun, no sbatch: refused before the first trial"
