#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch killed with SIGKILL inside a standing allocation (salloc
# --no-shell, then SLURM_JOB_ID=ID autobatch ...; an interactive salloc
# shell and an sbatch script are the same case): its trial is a job step
# whose srun dies with autobatch, and a step outlives its srun.  The step's
# heartbeat watchdog (tuner/trial/slurm.c slurm_step_argv) must end it:
# within 60 s nothing of the trial is left in `squeue -s` or in /proc.
# Then the start-up sweep: a later autobatch in the allocation cancels a
# step named for a dead autobatch whose srun (on this host) is dead, and
# leaves one named for a live pid alone.
source "$(dirname "$0")/lib.sh"
slurm_cluster 3 slurm9
cat >"$WORK/slow.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --startup-time 100s --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/slow.sh"

salloc --no-shell -N1 -n3 --gres=gpu:2 -t 5 -J ab-kill9 >"$WORK/salloc.out" 2>&1 \
  || fail "salloc --no-shell: $(cat "$WORK/salloc.out")"
job=$(sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' "$WORK/salloc.out")
[ -n "$job" ] || fail "no job id from salloc: $(cat "$WORK/salloc.out")"
steps() { squeue -h -s -j "$job" -o '%i %j' 2>/dev/null | grep -c ' autobatch-' || true; }
trainers() { pgrep -f "$SIMTRAIN" | grep -c . || true; }

SLURM_JOB_ID=$job AUTOBATCH_SLURM_HEARTBEAT=3 "$AUTOBATCH" --no-cache --preset hf --batch 1:8 \
  -- "$WORK/slow.sh" >"$WORK/killed.out" 2>&1 &
ab=$!
for _ in $(seq 300); do [ "$(steps)" -ge 1 ] && [ "$(trainers)" -ge 1 ] && break; sleep 0.1; done
[ "$(steps)" -ge 1 ] && [ "$(trainers)" -ge 1 ] \
  || fail "no trial step running after 30 s ($(squeue -h -s -o '%i %j'); $(tail -3 "$WORK/killed.out"))"
kill -9 "$ab"
wait "$ab" 2>/dev/null || true
t0=$SECONDS
while { [ "$(steps)" -gt 0 ] || [ "$(trainers)" -gt 0 ]; } && [ $((SECONDS - t0)) -lt 60 ]; do
  sleep 0.5
done
[ "$(steps)" -eq 0 ] || fail "a step still listed $((SECONDS - t0)) s after autobatch's SIGKILL: $(squeue -h -s -j "$job" -o '%i %j %M')"
[ "$(trainers)" -eq 0 ] || fail "the trainer still runs $((SECONDS - t0)) s after autobatch's SIGKILL: $(pgrep -af "$SIMTRAIN")"
pass "killed: the trial's step and trainer ended $((SECONDS - t0)) s after autobatch's SIGKILL"

# The start-up sweep.  Two steps left as a killed autobatch leaves them
# (srun and its group SIGKILLed, the step running on): one named for a
# dead pid, one for a live one (this shell).
sleep 0 & dead=$!
wait "$dead"
leave_step() { # name, seconds (the step's process, found by them)
  SLURM_JOB_ID=$job setsid srun --exact -n1 --mem=0 --gres=none -J "$1" -t 3 -- sleep "$2" >/dev/null 2>&1 &
  local s=$!
  # launched on the node, not only listed: a step whose srun dies before
  # the launch is a different case
  for _ in $(seq 100); do pgrep -fx "(/usr)?(/bin/)?sleep $2" >/dev/null && break; sleep 0.1; done
  pgrep -fx "(/usr)?(/bin/)?sleep $2" >/dev/null || fail "sweep: step $1 did not start"
  kill -9 -- -"$s" 2>/dev/null || true
}
leave_step "autobatch-$dead-1" 3001
leave_step "autobatch-$$-1" 3002
sleep 1
for name in "autobatch-$dead-1" "autobatch-$$-1"; do
  squeue -h -s -j "$job" -o '%j' | grep -qx "$name" \
    || fail "sweep: step $name did not outlive its srun ($(squeue -h -s -j "$job" -o '%i %j %T'))"
done
cat >"$WORK/fast.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --capacity 24G --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/fast.sh"
SLURM_JOB_ID=$job "$AUTOBATCH" --no-cache --preset hf --batch 1:4 --steps 2 --warmup 1 \
  -- "$WORK/fast.sh" >"$WORK/sweep.out" 2>&1 || fail "sweep: autobatch exited $? ($(tail -3 "$WORK/sweep.out"))"
grep -q "cancelled 1 job step(s) of an autobatch killed earlier" "$WORK/sweep.out" \
  || fail "sweep: no note ($(cat "$WORK/sweep.out"))"
for _ in $(seq 100); do
  left=$(squeue -h -s -j "$job" -o '%j')
  echo "$left" | grep -qx "autobatch-$dead-1" || break
  sleep 0.1
done
echo "$left" | grep -qx "autobatch-$dead-1" && fail "sweep: the dead run's step is still listed"
echo "$left" | grep -qx "autobatch-$$-1" || fail "sweep: a live pid's step was cancelled ($left; $(cat "$WORK/sweep.out"))"
pass "sweep: a dead run's step cancelled, a live pid's step left alone"
