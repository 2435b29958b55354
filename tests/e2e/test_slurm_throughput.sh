#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One definition of throughput on Slurm (issue 24, item 3): a trial run as
# a job array task from the login node measures the speed a local trial
# measures, within 5%.  The follower copies the task's output file every
# 0.1 s or so; timed by when it copied them, the steps came in bunches and
# samples/s was off by a quarter to a half (here -18%).  The task stamps its output as
# it is written, and the follower hands it on at those times.
source "$(dirname "$0")/lib.sh"
slurm_cluster 2 slurm-tput
# the trial directories must be on a filesystem the "nodes" share: here one
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"

# 0.165 s a step: the follower's polling (0.1 s, plus scontrol) is of the
# order of a step, and the machine's load a small part of one
micro=8 overhead=0.005 per_sample=0.02 steps=5
known=$(awk -v m=$micro -v o=$overhead -v s=$per_sample 'BEGIN { printf "%.6f", m / (o + s * m) }')
cat >"$WORK/train.sh" <<SH
#!/bin/sh
exec "$SIMTRAIN" --sample-time ${per_sample}s --step-overhead ${overhead}s --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"

measure() { # name, autobatch args...: prints samples/s
  local name=$1; shift
  "$AUTOBATCH" --no-cache --quiet --preset hf --batch $micro:$micro --warmup 1 --steps $steps \
    --json "$WORK/$name.json" "$@" -- "$WORK/train.sh" >"$WORK/$name.out" 2>&1 \
    || fail "$name: autobatch exited $? ($(tail -5 "$WORK/$name.out"))"
  jqr '.trials[0].samples_per_s' "$WORK/$name.json"
}
within() { # a b pct
  awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a / b - 1; exit !(a > 0 && d < p / 100 && d > -p / 100) }'
}

local_sps=$(measure local)
within "$local_sps" "$known" 5 || fail "local: $local_sps samples/s, simtrain runs at $known"
for i in 1 2; do
  sps=$(measure array$i --launcher slurm)
  assert_eq slurm-array "$(jqr '.summary.launcher' "$WORK/array$i.json")" "array$i: launcher"
  echo "array$i: $sps samples/s (local $local_sps, known $known; $(jqr '.trials[0].steps_measured' "$WORK/array$i.json") steps)"
  within "$sps" "$local_sps" 5 || fail "array$i: $sps samples/s, a local trial measured $local_sps (more than 5% off)"
done
pass "job arrays measure the speed of a local trial within 5% ($local_sps samples/s locally, simtrain runs at $known)"
