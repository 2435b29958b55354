#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Slurm options and what a user sees of Slurm, on a real single-node
# cluster (tests/slurm/cluster.sh, partitions debug, other and never):
# --slurm-arg reaches sbatch (job arrays: --partition, --time) and srun
# (job steps: --mem, not --partition); a bad --slurm-arg, or --gpus
# naming GPUs from a login node, is refused before the first trial with
# exit 2; srun's and slurmstepd's routine lines about a step or task that
# autobatch ended are folded into one line; trials[].devices holds the
# GPU indices Slurm gave each trial.
source "$(dirname "$0")/lib.sh"
slurm_cluster 4 slurmargs

# 50 ms a step: a task never reaches simtrain's step limit (about 200
# steps) before autobatch ends it, so every task is one autobatch ended
# (on a quiet machine a fast task could finish first, and the fold line
# below did not come).
cat >"$WORK/train.sh" <<SH
#!/bin/sh
tres=-
[ -n "\$SLURM_STEP_ID" ] && tres=\$(scontrol show step -o "\$SLURM_JOB_ID.\$SLURM_STEP_ID" | tr ' ' '\n' | grep '^TRES=')
echo "\$AUTOBATCH_TRIAL \${SLURM_JOB_ID:-none} \${CUDA_VISIBLE_DEVICES:--} \$tres" >>"$WORK/steps.log"
exec "$SIMTRAIN" --capacity 24G --startup-time 0.3s --step-overhead 50ms --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"
want=$("$SIMTRAIN" --capacity 24G --print-max)
jobs_seen() { squeue -h -t all -o '%j' | grep -c '^autobatch' || true; }

# Refused before the first trial (no trial ran, no job was submitted),
# exit 2, the line naming the fix.
refused() { # what, expected text, autobatch args...
  local rc=0 before
  : >"$WORK/steps.log"
  before=$(jobs_seen)
  "$AUTOBATCH" --no-cache --batch 1:8 "${@:3}" -- "$WORK/train.sh" >"$WORK/bad.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$1: exit status ($(cat "$WORK/bad.out"))"
  grep -qF -- "$2" "$WORK/bad.out" || fail "$1: expected '$2' in: $(cat "$WORK/bad.out")"
  # (a note that a killed run's leftovers were swept, another test's
  # kill -9 running beside this one, is not part of the refusal)
  assert_eq 1 "$(grep -cv '^autobatch: removed what an earlier, killed run left' "$WORK/bad.out")" \
    "$1: lines of output ($(cat "$WORK/bad.out"))"
  [ ! -s "$WORK/steps.log" ] || fail "$1: a trial ran"
  assert_eq "$before" "$(jobs_seen)" "$1: jobs submitted"
}
refused "--array" "autobatch sets --array itself; drop it" --launcher slurm --slurm-arg --array=0-9
refused "abbreviated --output" "autobatch sets --output itself" --launcher slurm --slurm-arg=--out=x.log
refused "--job-name" "autobatch sets --job-name itself" --launcher slurm --slurm-arg --job-name=x
refused "--wrap" "autobatch sets --wrap itself" --launcher slurm --slurm-arg --wrap=true
refused "whitespace" "--slurm-arg is empty" --launcher slurm --slurm-arg ' '
refused "short option" "give a long option with its value after '='" --launcher slurm --slurm-arg -p
refused "value after a space" "one option per --slurm-arg" --launcher slurm --slurm-arg '--partition other'
refused "--gres with --gpus" "drop --gres, or drop --gpus" --launcher slurm --gpus 2 --slurm-arg --gres=gpu:1
refused "no Slurm" "add --launcher slurm" --slurm-arg --partition=other
refused "--launcher local" "add --launcher slurm" --launcher local --slurm-arg --mem=1G
refused "--gpus list from a login node" "from a login node: each trial is a job array task given --gres=gpu:1" \
  --launcher slurm --gpus 0,1
refused "--gpus all from a login node" "give how many, e.g. --gpus 4" --launcher slurm --gpus all
refused "sbatch refuses" "sbatch: error: invalid partition specified: nope" --launcher slurm --slurm-arg --partition=nope
pass "bad --slurm-arg and --gpus lists on a login node: one line, exit 2, no trial"

# Each trial's devices: what its step or task saw (CUDA_VISIBLE_DEVICES
# is the node's index here: ConstrainDevices=no).
devices_match() { # name
  local f="$WORK/$1.json" id dev want_dev n=0
  while read -r id dev; do
    want_dev=$(awk -v t="$id" '$1 == t { d = $3 } END { print d }' "$WORK/steps.log")
    [ -n "$want_dev" ] || fail "$1: trial $id is not in steps.log"
    assert_eq "$want_dev" "$dev" "$1: trial $id's devices"
    n=$((n + 1))
  done < <(jq -r '(.trials + (.confirm // []))[] | "\(.id) \(.devices)"' "$f")
  [ "$n" -ge 3 ] || fail "$1: only $n trials"
}
# Slurm's routine lines about a step or task that autobatch ended are one
# line; none of them shows.
folded() { # name, expected fold line
  local out="$WORK/$1.out"
  grep -q "^$2" "$out" || fail "$1: no '$2' line: $(tail -5 "$out")"
  if grep -E "forcing job termination|Job step aborted|CANCELLED AT|task 0: Killed|_step_signal" "$out"; then
    fail "$1: routine Slurm lines shown"
  fi
  return 0
}

# scancel, its calls written down (the queue's guard cancels by name).
mkdir -p "$WORK/bin"
cat >"$WORK/bin/scancel" <<SH
#!/bin/sh
echo "\$*" >>"$WORK/scancel.log"
exec "$(command -v scancel)" "\$@"
SH
chmod +x "$WORK/bin/scancel"

# From the login node: the partition and time limit reach every array
# task; --gpus 2 gives two tasks a round, each on the GPU Slurm picked.
: >"$WORK/steps.log"
PATH="$WORK/bin:$PATH" "$AUTOBATCH" --launcher slurm --gpus 2 --slurm-arg --partition=other --slurm-arg --time=7 \
  --no-cache --preset hf --batch 1:128 --warmup 1 --steps 3 --json "$WORK/array.json" \
  -- "$WORK/train.sh" >"$WORK/array.out" 2>&1 || fail "array: exited $? ($(tail -5 "$WORK/array.out"))"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/array.json")" "array: max micro-batch"
parts=$(squeue -h -t all -o '%j %P %l' | awk '$1 ~ /^autobatch/ { print $2, $3 }' | sort -u)
assert_eq "other 7:00" "$parts" "array: partition and time limit of the tasks"
devices_match array
folded array "slurm: task ended by autobatch (1 routine slurmstepd line hidden)"
# Each stopped task was cancelled at once and its follower ended itself:
# no task trained on to simtrain's 200 steps (a scancel killed by the
# trial runner's SIGTERM to the tree never reached Slurm), no teardown
# near the follower's 15 s wait for Slurm or the runner's 20 s limit (the
# queue's guard, a child of autobatch, held the first trial run alone).
long=$(jq -r '[.trials[] | select(.steps_measured > 100 or .teardown_s > 10) | "\(.id):\(.steps_measured)/\(.teardown_s)"] | join(" ")' "$WORK/array.json")
assert_eq "" "$long" "array: trials (id:steps/teardown s) not ended at once"
# The guard lived through trials run alone (whose runner reaps and
# signals every process below autobatch) and cancelled by name last.
assert_eq "--name=autobatch-" "$(tail -1 "$WORK/scancel.log" | cut -c1-17)" "array: the last scancel"
pass "array: --partition=other --time=7 on every task; devices from Slurm; routine lines folded; tasks ended at once"

# Inside an allocation: --mem reaches the steps, --partition (the job's)
# does not reach srun; two steps side by side.
: >"$WORK/steps.log"
salloc -N1 -n2 --gres=gpu:2 -t 10 -J ab-args -- \
  "$AUTOBATCH" --no-cache --preset hf --batch 1:128 --warmup 1 --steps 3 --gpus all \
  --slurm-arg --partition=other --slurm-arg --mem=200M --json "$WORK/steps.json" \
  -- "$WORK/train.sh" >"$WORK/steps.out" 2>&1 || fail "steps: exited $? ($(tail -5 "$WORK/steps.out"))"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/steps.json")" "steps: max micro-batch"
assert_eq "TRES=cpu=1,mem=200M,node=1" "$(awk '{ print $4 }' "$WORK/steps.log" | sort -u)" "steps: each step's TRES"
squeue -h -t all -o '%j %P' | grep -q '^ab-args debug' || fail "steps: the allocation's partition changed"
devices_match steps
folded steps "slurm: step ended by autobatch ([0-9]* routine srun/slurmstepd lines hidden)"
pass "steps: --mem=200M on every step, --partition kept for sbatch; devices from Slurm; routine lines folded"

# --slurm-pending (issue 30): a partition that never runs jobs (never,
# State=DOWN) is given up after the deadline, the task cancelled, exit 5
# (out of time, nothing measured), the reason in the results; nothing of
# ours stays queued.  From anywhere but a login node it is refused.
refused "--slurm-pending locally" "--slurm-pending: trials are not queued jobs here" --launcher local --slurm-pending 5s
t0=$SECONDS rc=0
"$AUTOBATCH" --no-cache --preset hf --batch 1:64 --warmup 1 --steps 2 --launcher slurm \
  --slurm-arg --partition=never --slurm-pending 4s --json "$WORK/pend.json" \
  -- "$WORK/train.sh" >"$WORK/pend.out" 2>&1 || rc=$?
took=$((SECONDS - t0))
assert_eq 5 "$rc" "pending: exit status ($(tail -5 "$WORK/pend.out"))"
[ "$took" -le 45 ] || fail "pending: took ${took}s for --slurm-pending 4s"
grep -q '^autobatch: Slurm did not start micro_batch=[0-9]* within --slurm-pending (PartitionDown); the search stops' "$WORK/pend.out" \
  || fail "pending: no note: $(grep '^autobatch' "$WORK/pend.out" | tail -5)"
assert_eq PartitionDown "$(jqr '.summary.slurm_pending' "$WORK/pend.json")" "pending: summary.slurm_pending"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" or .outcome == "oom")] | length' "$WORK/pend.json")" "pending: measured trials"
left=$(squeue -h -t PENDING,RUNNING,CONFIGURING -o '%j' | grep -c '^autobatch' || true)
assert_eq 0 "$left" "pending: our jobs still queued or running"
pass "pending: a DOWN partition given up after --slurm-pending 4s (${took}s), exit 5, nothing left queued"

# kill -9 of autobatch while its array task is pending (issue 30): a
# pending task runs no watchdog; the queue's guard (slurm.h) cancels it.
"$AUTOBATCH" --no-cache --preset hf --batch 1:64 --launcher slurm --slurm-arg --partition=never \
  -- "$WORK/train.sh" >"$WORK/k9.out" 2>&1 &
abpid=$!
queued() { squeue -h -t PENDING,RUNNING,CONFIGURING -o '%j' | grep -c "^autobatch-$abpid\$" || true; }
for _ in $(seq 1 60); do [ "$(queued)" -ge 1 ] && break; sleep 0.5; done
[ "$(queued)" -ge 1 ] || fail "kill -9: the array never reached the queue: $(tail -3 "$WORK/k9.out")"
kill -9 "$abpid"
wait "$abpid" 2>/dev/null || true
t0=$SECONDS
while [ "$(queued)" -ge 1 ] && [ $((SECONDS - t0)) -lt 60 ]; do sleep 1; done
assert_eq 0 "$(queued)" "kill -9: autobatch-$abpid still queued after 60 s"
pass "kill -9 with a pending array task: cancelled within $((SECONDS - t0)) s"

# An OOM that Slurm itself reports (the step's cgroup) still shows and
# counts as an OOM, folded or not.
if [ "$AB_SLURM_PROCTRACK" = cgroup ]; then
  cat >"$WORK/hog.sh" <<'SH'
#!/bin/sh
echo "step 1/3"
exec python3 -c 'x = bytearray(400 << 20); import time; time.sleep(5)'
SH
  chmod +x "$WORK/hog.sh"
  rc=0
  salloc -N1 -n1 -t 5 -J ab-oom -- "$AUTOBATCH" --no-cache --preset env --knob micro_batch=MB \
    --batch 1:1 --no-confirm --slurm-arg --mem=100M --json "$WORK/oom.json" \
    -- "$WORK/hog.sh" >"$WORK/oom.out" 2>&1 || rc=$?
  assert_eq oom "$(jqr '.trials[0].outcome' "$WORK/oom.json")" "oom: outcome ($(tail -5 "$WORK/oom.out"))"
  jqr '.trials[0].signature' "$WORK/oom.json" | grep -q '^slurm-' || fail "oom: signature $(jqr '.trials[0].signature' "$WORK/oom.json")"
  pass "oom: Slurm's cgroup OOM in a step with --slurm-arg --mem=100M is an OOM ($(jqr '.trials[0].signature' "$WORK/oom.json"))"
fi
