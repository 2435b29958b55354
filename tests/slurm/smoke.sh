#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Smoke test of cluster.sh and of the Slurm behaviour autobatch's Slurm
# launcher relies on: GPU binding of steps, how srun and scancel end a step
# whose command ignores SIGTERM, job arrays, and the state strings squeue
# and scontrol give for each way a job can end.  Runs as root; prints one
# "time:" or "seen:" line per measurement and exits non-zero on the first
# check that fails.  The TIMEOUT case runs only with AB_SMOKE_TIMEOUT=1: a
# job with -t 1 took 67-102 s to reach TIMEOUT, more than doubling the
# time of the rest (about 45 s).
# shellcheck disable=SC2016 # $VARS in single quotes are for the job's shell
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/cluster.sh
dir=$(mktemp -d /tmp/ab-slurm.XXXXXX)
stopped=0

fail() {
	printf 'smoke.sh: FAIL: %s\n' "$*" >&2
	exit 1
}

cleanup() {
	local rc=$?
	[[ $stopped -eq 1 ]] || bash "$cluster" stop "$dir" || rc=1
	if [[ $rc -ne 0 && -d $dir/log ]]; then
		tail -n 5 "$dir"/log/*.log >&2 || true
	fi
	rm -rf "$dir"
	exit "$rc"
}
trap cleanup EXIT

now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# The state of job (or array task) $1 as squeue shows it, "" once gone.
state_of() {
	squeue -h -t all -j "$1" -o %T 2>/dev/null || true
}

# Wait until job $1 is in state $2, for at most $3 seconds.
wait_state() {
	local deadline=$((SECONDS + $3))
	while [[ $(state_of "$1") != "$2" ]]; do
		[[ $SECONDS -lt $deadline ]] ||
			fail "job $1 is '$(state_of "$1")', not '$2', after $3 s"
		sleep 0.1
	done
}

# Wait until job $1 has ended, for at most $2 seconds; prints its state.
wait_ended() {
	local deadline=$((SECONDS + $2)) st
	while :; do
		st=$(state_of "$1")
		case $st in
		PENDING | CONFIGURING | RUNNING | COMPLETING | "") ;;
		*) break ;;
		esac
		[[ $SECONDS -lt $deadline ]] || fail "job $1 still '$st' after $2 s"
		sleep 0.1
	done
	echo "$st"
}

# Whether pid $1 runs: a zombie does not (srun, once its parent subshell
# is gone, is reaped by init, which may take a while).
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != Z ]]
}

# Wait until pid $1 is gone, for at most $2 seconds; prints the ms it took.
wait_pid_gone() {
	local t0 deadline=$((SECONDS + $2))
	t0=$(now_ms)
	while alive "$1"; do
		[[ $SECONDS -lt $deadline ]] || fail "pid $1 still alive after $2 s"
		sleep 0.02
	done
	echo $(($(now_ms) - t0))
}

# Wait until file $1 is not empty, for at most $2 seconds.
wait_file() {
	local deadline=$((SECONDS + $2))
	until [[ -s $1 ]]; do
		[[ $SECONDS -lt $deadline ]] || fail "'$1' still empty after $2 s"
		sleep 0.05
	done
}

# The squeue and scontrol view of how job $1 ended, as one line.
ending_of() {
	local sq sc
	sq=$(squeue -h -t all -j "$1" -O JobID,State,Reason,exit_code | tr -s ' ')
	sc=$(scontrol show job -o "$1" | grep -o 'JobState=[^ ]* Reason=[^ ]*\|ExitCode=[^ ]*' |
		tr '\n' ' ')
	echo "squeue: '${sq% }' scontrol: ${sc% }"
}

# ---------------------------------------------------------------- cluster

t0=$(now_ms)
bash "$cluster" install
echo "time: install (or check) $(($(now_ms) - t0)) ms"

t0=$(now_ms)
eval "$(bash "$cluster" start "$dir" 4)"
echo "time: start (munged, slurmctld, slurmd, node idle, probe job done) $(($(now_ms) - t0)) ms"
echo "seen: ProctrackType=proctrack/$AB_SLURM_PROCTRACK"
[[ $SLURM_CONF == "$dir/slurm.conf" ]] || fail "start printed SLURM_CONF=$SLURM_CONF"

# ---------------------------------------------------------------- one step

t0=$(now_ms)
out=$(srun --exact --gres=gpu:1 -n1 -J ab-test-1 --unbuffered -t 1 -- \
	sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
echo "time: srun of one step outside an allocation $(($(now_ms) - t0)) ms"
[[ $out =~ ^[0-3]$ ]] || fail "step printed CUDA_VISIBLE_DEVICES='$out'"
echo "seen: srun --gres=gpu:1 step CUDA_VISIBLE_DEVICES=$out"

# The TIMEOUT case takes a minute or more: submit it first, check it last.
timeout_id=""
if [[ ${AB_SMOKE_TIMEOUT:-0} == 1 ]]; then
	timeout_id=$(sbatch --parsable -t 1 --mem=20M -J ab-timeout -o "$dir/timeout.log" \
		--wrap 'sleep 300')
	timeout_t0=$SECONDS
fi

# ---------------------------------------------------------------- steps in an allocation

# Two steps at once inside one allocation, each printing its GPU and
# sleeping 2 s: they must get different GPUs and overlap in time.  The
# script prints how long the two took, not counting the wait for the
# allocation (an allocation asked for right after an sbatch waits for the
# next scheduler pass, about 2 s).
cat >"$dir/two-steps.sh" <<'EOF'
set -euo pipefail
[[ -n ${SLURM_JOB_ID:-} ]] || { echo "no SLURM_JOB_ID" >&2; exit 1; }
t0=$(date +%s%N)
for i in 1 2; do
	srun --exact --gres=gpu:1 -n1 -J "ab-test-$i" --unbuffered -t 1 "$@" -- \
		sh -c 'echo "gpu $CUDA_VISIBLE_DEVICES"; sleep 2' &
done
wait
echo "ms $((($(date +%s%N) - t0) / 1000000))"
EOF

# "<ms> <gpu> <gpu>" from the output of two-steps.sh.
steps_result() {
	echo "$(sed -n 's/^ms //p' <<<"$1") $(sed -n 's/^gpu //p' <<<"$1" | sort | tr '\n' ' ')"
}

# $1: salloc options; rest: srun options.
two_steps() {
	local opts=$1
	shift
	# shellcheck disable=SC2086 # $opts is a list of options
	steps_result "$(salloc -N1 $opts --gres=gpu:4 -t 2 -J ab-alloc -- \
		bash "$dir/two-steps.sh" "$@" 2>"$dir/salloc.err")"
}

read -r ms g1 g2 < <(two_steps -n2)
echo "time: salloc -n2, two 2 s steps at once: $ms ms, GPUs $g1 and $g2"
[[ -n $g2 && $g1 != "$g2" ]] || fail "two steps got GPUs '$g1' '$g2'"
((ms < 3800)) || fail "two steps in salloc -n2 did not overlap ($ms ms)"

read -r ms g1 g2 < <(two_steps "-n1")
echo "time: salloc -n1 (one CPU), two steps: $ms ms (serialised), GPUs $g1 $g2"
((ms >= 4000)) || fail "two steps fitted in one CPU ($ms ms)"

read -r ms g1 g2 < <(two_steps "-n2 --mem=1G")
echo "time: salloc -n2 --mem=1G, steps without --mem: $ms ms (serialised)"
((ms >= 4000)) || fail "steps without --mem overlapped in a --mem job ($ms ms)"
grep -q 'step creation temporarily disabled' "$dir/salloc.err" ||
	fail "no 'step creation temporarily disabled' from srun"

read -r ms g1 g2 < <(two_steps "-n2 --mem=1G" --mem=0)
echo "time: salloc -n2 --mem=1G, steps --mem=0: $ms ms, GPUs $g1 and $g2"
((ms < 3800)) || fail "steps with --mem=0 did not overlap ($ms ms)"

# An allocation held without a shell, steps started from outside it.
salloc --no-shell -N1 -n2 --gres=gpu:2 -t 2 -J ab-held 2>/dev/null
held=$(squeue -h -n ab-held -o %i)
[[ -n $held ]] || fail "salloc --no-shell made no job"
read -r ms g1 g2 <<<"$(steps_result "$(SLURM_JOB_ID=$held bash "$dir/two-steps.sh")")"
echo "time: salloc --no-shell, SLURM_JOB_ID=ID srun x2 from outside: $ms ms, GPUs $g1 $g2"
[[ -n $g2 && $g1 != "$g2" ]] || fail "steps in held job got GPUs '$g1' '$g2'"

# ---------------------------------------------------------------- ending a step

# Start srun of a step whose command ignores SIGTERM, as the leader of its
# own process group (as autobatch starts its children); sets srun_pid and
# task_pid.  srun is not this shell's child, so that bash prints no
# "Killed" notice for it.  $1: a name; rest: extra srun options.
start_stubborn() {
	local name=$1
	shift
	rm -f "$dir/$name.pid"
	(
		setsid srun -n1 --gres=gpu:1 -t 1 -J "$name" "$@" -- \
			sh -c "trap '' TERM; echo \$\$ >$dir/$name.pid; exec sleep 120" \
			</dev/null >/dev/null 2>"$dir/$name.err" &
		echo $! >"$dir/$name.srun"
	)
	srun_pid=$(<"$dir/$name.srun")
	wait_file "$dir/$name.pid" 10
	task_pid=$(<"$dir/$name.pid")
}

# srun that made its own job (no allocation around it).
start_stubborn ab-term
job=$(squeue -h -n ab-term -o %i)
t0=$(now_ms)
kill -TERM "$srun_pid"
ms=$(wait_pid_gone "$task_pid" 15)
wait_pid_gone "$srun_pid" 15 >/dev/null
st=$(wait_ended "$job" 15)
echo "time: own job: SIGTERM to srun -> task gone $ms ms, job $st $(($(now_ms) - t0)) ms"
echo "seen: own job, SIGTERM to srun: $(ending_of "$job")"

# srun forks a second srun that cancels the job when the first one dies.
start_stubborn ab-kill
job=$(squeue -h -n ab-kill -o %i)
t0=$(now_ms)
kill -KILL "$srun_pid"
ms=$(wait_pid_gone "$task_pid" 15)
wait_pid_gone "$srun_pid" 15 >/dev/null
st=$(wait_ended "$job" 15)
echo "time: own job: SIGKILL to srun alone -> task gone $ms ms, job $st $(($(now_ms) - t0)) ms"
echo "seen: own job, SIGKILL to srun alone: $(ending_of "$job")"

# SIGKILL to srun's whole process group takes that second srun too.
start_stubborn ab-killpg
job=$(squeue -h -n ab-killpg -o %i)
kill -KILL -- -"$srun_pid"
wait_pid_gone "$srun_pid" 15 >/dev/null
sleep 2
alive "$task_pid" || fail "SIGKILL to srun's group ended its task"
[[ $(state_of "$job") == RUNNING ]] || fail "SIGKILL to srun's group: job $(state_of "$job")"
echo "seen: own job, SIGKILL to srun's process group: 2 s later task alive, job RUNNING"
t0=$(now_ms)
scancel --name=ab-killpg
ms=$(wait_pid_gone "$task_pid" 15)
st=$(wait_ended "$job" 15)
echo "time: then scancel --name=<job name> -> task gone $ms ms, job $st $(($(now_ms) - t0)) ms"
echo "seen: scancel --name after SIGKILL to srun's group: $(ending_of "$job")"

# Steps inside an allocation held by salloc --no-shell.
salloc --no-shell -N1 -n2 --gres=gpu:2 -t 2 -J ab-held2 2>/dev/null
held=$(squeue -h -n ab-held2 -o %i)
[[ -n $held ]] || fail "salloc --no-shell made no job"

start_stubborn ab-stepterm --jobid="$held" --exact
t0=$(now_ms)
kill -TERM "$srun_pid"
ms=$(wait_pid_gone "$task_pid" 15)
wait_pid_gone "$srun_pid" 15 >/dev/null
echo "time: step in allocation: SIGTERM to srun -> task gone $ms ms, srun gone $(($(now_ms) - t0)) ms; job $(state_of "$held")"

start_stubborn ab-stepkill --jobid="$held" --exact
t0=$(now_ms)
kill -KILL "$srun_pid"
ms=$(wait_pid_gone "$task_pid" 15)
wait_pid_gone "$srun_pid" 15 >/dev/null
echo "time: step in allocation: SIGKILL to srun alone -> task gone $ms ms; job $(state_of "$held")"

start_stubborn ab-step --jobid="$held" --exact
kill -KILL -- -"$srun_pid"
wait_pid_gone "$srun_pid" 15 >/dev/null
scancel --name=ab-step
sleep 2
alive "$task_pid" ||
	fail "step ended by SIGKILL to srun's group or scancel --name=<step name>"
echo "seen: step in allocation: SIGKILL to srun's group, then scancel --name=<step name>: 2 s later task alive"
step=$(squeue -h -s -j "$held" -o '%i %j' | awk '$2 == "ab-step" { print $1 }')
[[ $step =~ ^$held\.[0-9]+$ ]] || fail "step of $held listed as '$step'"
t0=$(now_ms)
scancel "$step"
ms=$(wait_pid_gone "$task_pid" 15)
echo "time: then scancel $held.N (step id from squeue -s) -> task gone $ms ms; job $(state_of "$held")"
scancel "$held"

# ---------------------------------------------------------------- job states

t0=$(now_ms)
arr=$(sbatch --parsable --array=0-2 --gres=gpu:1 -t 1 -o "$dir/out-%A_%a.log" \
	--wrap 'echo $SLURM_ARRAY_TASK_ID $CUDA_VISIBLE_DEVICES')
for i in 0 1 2; do
	wait_state "${arr}_$i" COMPLETED 20
done
echo "time: array of 3 submitted -> all COMPLETED $(($(now_ms) - t0)) ms"
for i in 0 1 2; do
	f=$dir/out-${arr}_$i.log
	[[ -f $f ]] || fail "no output file '$(basename "$f")'; have: $(ls "$dir")"
	read -r task gpu <"$f"
	[[ $task == "$i" && $gpu =~ ^[0-3]$ ]] || fail "'$f' holds '$task $gpu'"
	echo "seen: $(basename "$f"): '$task $gpu'"
done
squeue -h -t all -j "$arr" -O JobArrayID,JobID,State,Reason,exit_code | tr -s ' ' |
	sed 's/^/seen: array squeue -O JobArrayID,JobID,...: /'
echo "seen: array $(ending_of "${arr}_1")"

t0=$(now_ms)
job=$(sbatch --parsable -t 1 -J ab-fail -o /dev/null --wrap 'exit 3')
wait_state "$job" FAILED 15
echo "time: exit 3 -> FAILED $(($(now_ms) - t0)) ms; $(ending_of "$job")"

job=$(sbatch --parsable -t 1 -J ab-cancel -o /dev/null --wrap 'sleep 60')
wait_state "$job" RUNNING 15
t0=$(now_ms)
scancel "$job"
wait_state "$job" CANCELLED 15
echo "time: scancel of a running batch job -> CANCELLED $(($(now_ms) - t0)) ms; $(ending_of "$job")"

if [[ $AB_SLURM_PROCTRACK == cgroup ]]; then
	t0=$(now_ms)
	job=$(sbatch --parsable -t 1 --mem=50M -J ab-oom -o "$dir/oom.log" \
		--wrap "perl -e '\$x = q(x) x (500 * 1024 * 1024); print length(\$x)'")
	wait_state "$job" OUT_OF_MEMORY 30
	echo "time: 500 MB in --mem=50M -> OUT_OF_MEMORY $(($(now_ms) - t0)) ms; $(ending_of "$job")"
	grep -q 'slurmstepd.*error: Detected [0-9]* oom-kill event' "$dir/oom.log" ||
		fail "no oom-kill message in the job's output: $(cat "$dir/oom.log")"
	echo "seen: oom output: $(grep -o 'error: Detected [0-9]* oom-kill event(s)' "$dir/oom.log")"
else
	echo "seen: OOM case skipped: no cgroup memory enforcement with proctrack/linuxproc"
fi

if [[ -n $timeout_id ]]; then
	while [[ $(state_of "$timeout_id") == RUNNING ]]; do
		((SECONDS - timeout_t0 < 120)) || fail "-t 1 job still RUNNING after 120 s"
		sleep 0.5
	done
	wait_state "$timeout_id" TIMEOUT 5
	echo "time: -t 1 job -> TIMEOUT $((SECONDS - timeout_t0)) s after submission; $(ending_of "$timeout_id")"
	echo "seen: timeout output: $(cat "$dir/timeout.log")"
else
	echo "seen: TIMEOUT case skipped (AB_SMOKE_TIMEOUT=1 runs it)"
fi

# ---------------------------------------------------------------- stop

t0=$(now_ms)
bash "$cluster" stop "$dir"
stopped=1
echo "time: stop $(($(now_ms) - t0)) ms"
left=$(grep -lzE "^(AB_SLURM_CLUSTER=$dir|SLURM_CONF=$dir/slurm.conf)\$" \
	/proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx "$$" || true)
for pid in $left; do
	# This script and its subshells carry SLURM_CONF too; anything else
	# (daemons, stepds, srun, tasks) must be gone.
	kill -0 "$pid" 2>/dev/null || continue
	[[ $(ps -o ppid= -p "$pid" 2>/dev/null | tr -d ' ') == "$$" ]] && continue
	fail "process left after stop: $(ps -o pid=,args= -p "$pid")"
done
# Nor any slurm or munge process at all, but those of another cluster.sh
# cluster (a leftover one, or one of a test running beside this).
for pid in $(for name in slurmctld slurmd slurmstepd munged; do pgrep -x "$name"; done); do
	grep -qz '^AB_SLURM_CLUSTER=' "/proc/$pid/environ" 2>/dev/null && continue
	kill -0 "$pid" 2>/dev/null || continue
	fail "process left after stop: $(ps -o pid=,args= -p "$pid")"
done
echo "seen: after stop no slurm/munge/test process is left"
echo "smoke.sh: all checks passed"
