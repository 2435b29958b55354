#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The follower of a Slurm array task (autobatch __slurm-follow, tuner/trial/slurm.c)
# against a scripted scontrol and scancel: it copies the task's output,
# touches the heartbeat, and turns each final state into an exit status
# and a line (COMPLETED 0, FAILED the task's code, OUT_OF_MEMORY and the
# rest a line naming the state); a pending task says why, once; SIGTERM
# cancels the task and waits for Slurm to say it ended.
source "$(dirname "$0")/lib.sh"
bin="$WORK/bin"
mkdir -p "$bin"
# scontrol: JobState and ExitCode from $WORK/state ("STATE CODE [REASON]");
# "gone" makes it answer as for an unknown job.
cat >"$bin/scontrol" <<SH
#!/bin/sh
read -r st code reason <"$WORK/state"
[ "\$st" = gone ] && { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
echo "JobId=7 ArrayJobId=7 ArrayTaskId=0 JobName=autobatch-1 JobState=\$st Reason=\${reason:-None} Dependency=(null) ExitCode=\$code"
SH
cat >"$bin/scancel" <<SH
#!/bin/sh
echo "scancel \$*" >>"$WORK/scancel.log"
echo "CANCELLED 0:15" >"$WORK/state"
SH
chmod +x "$bin/scontrol" "$bin/scancel"
export PATH="$bin:$PATH"

follow() { # state-file content, expected exit; output in $WORK/f.out
  echo "$1" >"$WORK/state"
  local rc=0
  timeout 20 "$AUTOBATCH" __slurm-follow 7_0 "$WORK/task.log" "$WORK/beat" >"$WORK/f.out" 2>&1 || rc=$?
  assert_eq "$2" "$rc" "$1: exit status"
}

echo "step 1/5 loss 2.0" >"$WORK/task.log"
touch -d '1 hour ago' "$WORK/beat"
follow "COMPLETED 0:0" 0
grep -q "step 1/5 loss 2.0" "$WORK/f.out" || fail "COMPLETED: the task's output was not copied"
[ "$(( $(date +%s) - $(stat -c %Y "$WORK/beat") ))" -lt 60 ] || fail "the heartbeat was not touched"
follow "FAILED 3:0" 3
follow "FAILED 0:9" 137
follow "OUT_OF_MEMORY 0:125" 1
grep -q "autobatch: slurm job 7_0 ended OUT_OF_MEMORY" "$WORK/f.out" || fail "OOM: $(cat "$WORK/f.out")"
for st in TIMEOUT PREEMPTED NODE_FAIL CANCELLED BOOT_FAIL DEADLINE; do
  follow "$st 0:15" 1
  grep -q "ended $st" "$WORK/f.out" || fail "$st: $(cat "$WORK/f.out")"
done
follow "gone 0:0" 1
grep -q "no longer known to Slurm" "$WORK/f.out" || fail "gone: $(cat "$WORK/f.out")"
pass "final states: COMPLETED 0, FAILED 3:0 -> 3, 0:9 -> 137, the rest say their state"

# Pending, then running, then done: the reason is said once.
echo "PENDING 0:0 Resources" >"$WORK/state"
( sleep 2.5; echo "RUNNING 0:0" >"$WORK/state"; sleep 1.5; echo "COMPLETED 0:0" >"$WORK/state" ) &
rc=0
timeout 20 "$AUTOBATCH" __slurm-follow 7_0 "$WORK/task.log" "$WORK/beat" >"$WORK/f.out" 2>&1 || rc=$?
wait
assert_eq 0 "$rc" "pending: exit status"
assert_eq 1 "$(grep -c "slurm job 7_0 pending (Resources)" "$WORK/f.out")" "pending: lines saying why"
pass "pending: said once, then followed to the end"

# SIGTERM: the task is cancelled and the follower ends when Slurm says so.
echo "RUNNING 0:0" >"$WORK/state"
: >"$WORK/scancel.log"
"$AUTOBATCH" __slurm-follow 7_0 "$WORK/task.log" "$WORK/beat" >"$WORK/f.out" 2>&1 &
f=$!
sleep 1.5
kill -TERM "$f"
rc=0
wait "$f" || rc=$?
assert_eq 143 "$rc" "SIGTERM: exit status"
assert_eq "scancel 7_0" "$(cat "$WORK/scancel.log")" "SIGTERM: scancel"
pass "SIGTERM: scancel 7_0, then exit 143 once the task was CANCELLED"

# Stamped output (the task's stamper, __slurm-follow --stamp): handed on
# at the times the task wrote it, however late it was copied.  Three
# chunks written 0.6 s apart, all in the file before the follower looks,
# with a line of Slurm's own between them: they come out 0.6 s apart
# (the first within a second and a half), the stamps gone, Slurm's line
# in its place.
{ printf 'step 1\n'; sleep 0.6; printf 'step 2\n'; sleep 0.6; printf 'step 3\n'; } \
  | "$AUTOBATCH" __slurm-follow --stamp - - >"$WORK/stamped.log" || fail "stamper: exit $?"
assert_eq 3 "$(grep -c $'^\x1e[0-9.]* 7$' "$WORK/stamped.log")" "stamper: records"
{ head -c "$(( $(grep -b -a -m2 $'^\x1e' "$WORK/stamped.log" | tail -1 | cut -d: -f1) ))" "$WORK/stamped.log"
  echo "slurmstepd: error: a line of its own"
  tail -c +"$(( $(grep -b -a -m2 $'^\x1e' "$WORK/stamped.log" | tail -1 | cut -d: -f1) + 1 ))" "$WORK/stamped.log"
} >"$WORK/task.log"
echo "RUNNING 0:0" >"$WORK/state"
( sleep 3.5; echo "COMPLETED 0:0" >"$WORK/state" ) &
start=$EPOCHREALTIME
timeout 20 "$AUTOBATCH" __slurm-follow 7_0 "$WORK/task.log" "$WORK/beat" \
  | while IFS= read -r line; do echo "$EPOCHREALTIME $line"; done >"$WORK/f.out"
wait
assert_eq "step 1|slurmstepd: error: a line of its own|step 2|step 3" \
  "$(cut -d' ' -f2- "$WORK/f.out" | paste -sd'|')" "stamped: lines in order, stamps gone"
awk -v s="$start" 'NR == 1 { a = $1 } $3 == "2" { b = $1 } $3 == "3" { c = $1 }
  END { exit !(a - s < 1.5 && b - a > 0.5 && b - a < 0.7 && c - b > 0.5 && c - b < 0.7) }' "$WORK/f.out" \
  || fail "stamped: not handed on 0.6 s apart: $(cat "$WORK/f.out") (started $start)"
pass "stamped output handed on at the task's times, Slurm's own line in its place"

rc=0
"$AUTOBATCH" __slurm-follow 7_0 >"$WORK/f.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "usage: exit status"
pass "usage error: exit 2"
