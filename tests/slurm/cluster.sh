#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A private single-node Slurm cluster for tests: munged, slurmctld and
# slurmd run by hand (no systemd) with every file, socket and port of their
# own under one directory, so the system's /etc/slurm and munge are never
# touched and two clusters, or a leftover one from a killed run, do not
# clash.  Usage and the facts measured with it are in README.md.
#
#   cluster.sh install              apt-get the packages if missing (root)
#   cluster.sh start DIR [NGPUS]    start a cluster in DIR; prints lines to eval
#   cluster.sh stop DIR             stop it and everything it ran; idempotent
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
START_TIMEOUT_S=30
STOP_TIMEOUT_S=15

die() {
	printf 'cluster.sh: error: %s\n' "$*" >&2
	exit 1
}

usage() {
	sed -n '8,10p' "$0" | sed 's/^# *//' >&2
	exit 2
}

need_root() {
	[[ $(id -u) -eq 0 ]] || die "'$1' needs root (slurmd runs jobs as any user)"
}

# ---------------------------------------------------------------- install

cmd_install() {
	need_root install
	local missing=() pkg
	for pkg in "${PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null |
			grep -q 'install ok installed'; then
			missing+=("$pkg")
		fi
	done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	export DEBIAN_FRONTEND=noninteractive
	# A fresh image may have no package lists yet: update once on failure.
	if ! apt-get install -y -q --no-install-recommends "${missing[@]}" \
		>/tmp/cluster-sh-apt.log 2>&1; then
		apt-get update -q >>/tmp/cluster-sh-apt.log 2>&1 ||
			die "apt-get update failed; see /tmp/cluster-sh-apt.log"
		apt-get install -y -q --no-install-recommends "${missing[@]}" \
			>>/tmp/cluster-sh-apt.log 2>&1 ||
			die "cannot install ${missing[*]}; see /tmp/cluster-sh-apt.log"
	fi
}

# ---------------------------------------------------------------- helpers

# Two adjacent TCP ports nobody listens on or is connected from, picked at
# random so a second cluster or a leftover one gets different ports.
pick_ports() {
	local used p tries
	used=$(awk 'NR > 1 { split($2, a, ":"); print strtonum("0x" a[2]) }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -un)
	for ((tries = 0; tries < 100; tries++)); do
		p=$((20000 + RANDOM % 30000))
		if ! grep -qx -e "$p" -e "$((p + 1))" <<<"$used"; then
			echo "$p"
			return 0
		fi
	done
	die "no free pair of TCP ports found in 20000-50000"
}

# Whether this machine lets slurmd make cgroups: v1 with the controllers
# proctrack/cgroup and task/cgroup use, or v2 with a writable root.
cgroups_usable() {
	local c
	if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
		[[ -w /sys/fs/cgroup/cgroup.subtree_control ]]
		return
	fi
	for c in freezer memory cpuset devices; do
		[[ -w /sys/fs/cgroup/$c/cgroup.procs ]] || return 1
	done
}

# Pids of processes that carry this cluster's marker in their environment:
# the daemons and every slurmstepd they started (slurmd execs slurmstepd
# with its own environment), also after their pid files are gone.
marked_pids() {
	grep -lzxF "AB_SLURM_CLUSTER=$1" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3 | grep -vx "$$" || true
}

# Pids of job tasks of this cluster: SLURM_CONF names our slurm.conf and a
# step id is set.  srun, salloc and the test itself have no SLURM_STEP_ID.
task_pids() {
	local f
	grep -lzxF "SLURM_CONF=$1/slurm.conf" /proc/[0-9]*/environ 2>/dev/null |
		while read -r f; do
			if grep -qz '^SLURM_STEP_ID=' "$f" 2>/dev/null; then
				cut -d/ -f3 <<<"$f"
			fi
		done | grep -vx "$$" || true
}

# Wait until none of the given pids is alive; false after $1 seconds.
wait_gone() {
	local limit=$1 pid alive
	shift
	local deadline=$((SECONDS + limit))
	while :; do
		alive=0
		for pid in "$@"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		[[ $alive -eq 0 ]] && return 0
		[[ $SECONDS -ge $deadline ]] && return 1
		sleep 0.1
	done
}

log_tails() {
	local f
	for f in "$1"/log/*.log; do
		[[ -f $f ]] || continue
		printf '==> %s <==\n' "$f" >&2
		tail -n 15 "$f" >&2
	done
}

# ---------------------------------------------------------------- start

write_conf() {
	local dir=$1 ngpus=$2 proctrack=$3 port=$4 cpus mem i
	cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p')
	mem=$(slurmd -C | sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p')
	[[ -n $cpus && -n $mem ]] || die "cannot read CPUs/RealMemory from 'slurmd -C'"
	# Each step takes at least one CPU: with fewer CPUs than GPUs the
	# GPUs could never all be busy at once, so declare NGPUS CPUs and let
	# slurmd accept the configured count (SlurmdParameters=config_overrides).
	local overrides=""
	if ((cpus < ngpus)); then
		cpus=$ngpus
		overrides="SlurmdParameters=config_overrides"
	fi

	for ((i = 0; i < ngpus; i++)); do
		# A character device, not a file: Slurm sets CUDA_VISIBLE_DEVICES
		# only for device files.  1,3 is /dev/null.
		mknod "$dir/dev/gpu$i" c 1 3
	done

	# Two GPU types, as a cluster with two generations has: the first half
	# "small", the rest "big" (--gres=gpu:small:1 picks one of the first).
	local nsmall=$((ngpus / 2)) gres
	if ((nsmall > 0)); then
		cat >"$dir/gres.conf" <<-EOF
			AutoDetect=off
			Name=gpu Type=small File=$dir/dev/gpu[0-$((nsmall - 1))]
			Name=gpu Type=big File=$dir/dev/gpu[$nsmall-$((ngpus - 1))]
		EOF
		gres=gpu:small:$nsmall,gpu:big:$((ngpus - nsmall))
	else
		cat >"$dir/gres.conf" <<-EOF
			AutoDetect=off
			Name=gpu Type=big File=$dir/dev/gpu[0-$((ngpus - 1))]
		EOF
		gres=gpu:big:$ngpus
	fi

	local task=task/none
	if [[ $proctrack == cgroup ]]; then
		task=task/cgroup
		cat >"$dir/cgroup.conf" <<-EOF
			CgroupPlugin=autodetect
			IgnoreSystemd=yes
			ConstrainRAMSpace=yes
			ConstrainSwapSpace=no
			ConstrainDevices=no
		EOF
	fi

	# FirstJobId at random: job ids name the cgroups
	# (slurm_abnode/uid_0/job_N), which every cluster on the machine
	# shares.  Memory is a consumable resource, as on most clusters;
	# without DefMemPerCPU a job that gives no --mem holds the whole node.
	cat >"$dir/slurm.conf" <<-EOF
		ClusterName=abtest
		SlurmctldHost=localhost(127.0.0.1)
		SlurmctldPort=$port
		SlurmdPort=$((port + 1))
		SlurmUser=root
		SlurmdUser=root
		AuthType=auth/munge
		AuthInfo=socket=$dir/munge/munge.sock
		CredType=cred/munge
		StateSaveLocation=$dir/state
		SlurmdSpoolDir=$dir/spool
		SlurmctldPidFile=$dir/run/slurmctld.pid
		SlurmdPidFile=$dir/run/slurmd.pid
		SlurmctldLogFile=$dir/log/slurmctld.log
		SlurmdLogFile=$dir/log/slurmd.log
		SlurmctldDebug=info
		SlurmdDebug=info
		PlugStackConfig=$dir/plugstack.conf
		FirstJobId=$((1000 + RANDOM * 16 + RANDOM % 16))
		MpiDefault=none
		ReturnToService=2
		SchedulerType=sched/backfill
		SchedulerParameters=batch_sched_delay=0
		MinJobAge=600
		KillWait=5
		InactiveLimit=0
		SelectType=select/cons_tres
		SelectTypeParameters=CR_Core_Memory
		DefMemPerCPU=$((mem / cpus))
		ProctrackType=proctrack/$proctrack
		TaskPlugin=$task
		JobAcctGatherType=jobacct_gather/none
		AccountingStorageType=accounting_storage/none
		GresTypes=gpu
		$overrides
		NodeName=abnode NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=$gres State=UNKNOWN
		PartitionName=debug Nodes=abnode Default=YES MaxTime=INFINITE State=UP
		PartitionName=other Nodes=abnode Default=NO MaxTime=INFINITE State=UP
		PartitionName=never Nodes=abnode Default=NO MaxTime=INFINITE State=DOWN
	EOF
	: >"$dir/plugstack.conf"
}

# Start slurmctld and slurmd; false if the node is not idle, or a probe
# step does not run, within START_TIMEOUT_S.
start_daemons() {
	local dir=$1
	export SLURM_CONF=$dir/slurm.conf AB_SLURM_CLUSTER=$dir
	slurmctld -f "$dir/slurm.conf" -i </dev/null >>"$dir/log/slurmctld.out" 2>&1 ||
		return 1
	slurmd -f "$dir/slurm.conf" -N abnode </dev/null >>"$dir/log/slurmd.out" 2>&1 ||
		return 1
	local deadline=$((SECONDS + START_TIMEOUT_S)) state
	while [[ $SECONDS -lt $deadline ]]; do
		state=$(sinfo -h -N -n abnode -p debug -o '%T' 2>/dev/null || true)
		[[ $state == idle ]] && break
		sleep 0.2
	done
	[[ $state == idle ]] || return 1
	# An idle node is not enough: slurmctld's scheduler makes its first
	# pass 2-3 s after start, and a batch job submitted before waits for
	# it.  One batch job run to the end waits for that pass and proves
	# that munge, slurmstepd and the cgroups work.
	local job
	job=$(sbatch --parsable -J cluster-sh-probe -t 1 -o /dev/null --wrap true 2>/dev/null) ||
		return 1
	while [[ $SECONDS -lt $deadline ]]; do
		state=$(squeue -h -t all -j "$job" -o %T 2>/dev/null || true)
		case $state in
		COMPLETED) return 0 ;;
		PENDING | CONFIGURING | RUNNING | COMPLETING | "") sleep 0.1 ;;
		*) return 1 ;;
		esac
	done
	return 1
}

# The pid in pid file $2 if that process is one of cluster $1's daemons.
# A pid file left by a killed run may name a pid since given to another
# process, so the marker in its environment decides.
our_pid() {
	local pid
	[[ -s $2 ]] || return 1
	pid=$(<"$2")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	grep -qzxF "AB_SLURM_CLUSTER=$1" "/proc/$pid/environ" 2>/dev/null || return 1
	echo "$pid"
}

# SIGTERM to the daemons named (slurmd slurmctld munged), SIGKILL to any
# still alive after 10 s; removes their pid files.
stop_daemons() {
	local dir=$1 name file pid pids=()
	shift
	for name in "$@"; do
		file=$dir/run/$name.pid
		[[ $name == munged ]] && file=$dir/munge/munged.pid
		if pid=$(our_pid "$dir" "$file"); then
			kill "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
		rm -f "$file"
	done
	[[ ${#pids[@]} -gt 0 ]] || return 0
	wait_gone 10 "${pids[@]}" || kill -KILL "${pids[@]}" 2>/dev/null || true
}

# Print the logs' last lines, stop what did start, and fail.
fail_start() {
	log_tails "$1"
	cmd_stop "$1" || true
	die "$2"
}

cmd_start() {
	need_root start
	[[ $# -ge 1 && $# -le 2 ]] || usage
	local dir=$1 ngpus=${2:-4}
	[[ $ngpus =~ ^[1-9][0-9]*$ ]] || die "NGPUS must be a positive number, not '$ngpus'"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd -P)
	[[ ! -e $dir/slurm.conf ]] ||
		die "'$dir' already holds a cluster; stop it and give a fresh directory"
	for cmd in munged mungekey slurmctld slurmd sinfo; do
		command -v "$cmd" >/dev/null || die "'$cmd' not found; run '$0 install'"
	done
	# Daemons must not inherit a caller's cluster or job.
	unset "${!SLURM_@}"

	chmod 0755 "$dir"
	mkdir -p "$dir"/{munge,state,spool,run,log,dev}
	chmod 0755 "$dir/munge"

	mungekey --create --keyfile="$dir/munge/munge.key" --bits=1024
	AB_SLURM_CLUSTER=$dir munged \
		--socket="$dir/munge/munge.sock" \
		--key-file="$dir/munge/munge.key" \
		--pid-file="$dir/munge/munged.pid" \
		--log-file="$dir/log/munged.log" \
		--seed-file="$dir/munge/munged.seed" </dev/null ||
		fail_start "$dir" "munged did not start"

	local port proctrack=${AB_SLURM_PROCTRACK:-}
	port=$(pick_ports)
	if [[ -z $proctrack ]]; then
		proctrack=linuxproc
		cgroups_usable && proctrack=cgroup
	fi
	write_conf "$dir" "$ngpus" "$proctrack" "$port"
	if ! start_daemons "$dir"; then
		if [[ $proctrack == cgroup && -z ${AB_SLURM_PROCTRACK:-} ]]; then
			# The cgroups looked usable but Slurm refused them: keep
			# the logs' last lines and fall back to tracking by
			# process tree.
			log_tails "$dir" 2>"$dir/cgroup-failure.txt"
			stop_daemons "$dir" slurmd slurmctld
			rm -f "$dir/dev/"gpu* "$dir/cgroup.conf"
			rm -rf "$dir/state" "$dir/spool" && mkdir "$dir/state" "$dir/spool"
			proctrack=linuxproc
			port=$(pick_ports)
			write_conf "$dir" "$ngpus" "$proctrack" "$port"
			start_daemons "$dir" ||
				fail_start "$dir" "node 'abnode' not ready after ${START_TIMEOUT_S}s"
		else
			fail_start "$dir" "node 'abnode' not ready after ${START_TIMEOUT_S}s"
		fi
	fi
	printf 'export SLURM_CONF=%q\n' "$dir/slurm.conf"
	printf 'export AB_SLURM_PROCTRACK=%q\n' "$proctrack"
}

# ---------------------------------------------------------------- stop

cmd_stop() {
	[[ $# -eq 1 ]] || usage
	local dir=$1
	[[ -d $dir ]] || return 0
	dir=$(cd "$dir" && pwd -P)
	export SLURM_CONF=$dir/slurm.conf

	# Cancel every job while slurmctld still runs, and give the
	# slurmstepds time to kill their tasks (KillWait is 5 s).
	if our_pid "$dir" "$dir/run/slurmctld.pid" >/dev/null; then
		scancel --quiet --user=root 2>/dev/null || true
		local deadline=$((SECONDS + 8))
		while [[ $SECONDS -lt $deadline ]] &&
			[[ -n $(squeue -h -t running,completing,configuring -o %i 2>/dev/null) ]]; do
			sleep 0.2
		done
	fi
	stop_daemons "$dir" slurmd slurmctld
	stop_daemons "$dir" munged

	# Whatever is left (stepds of a killed run, tasks that ignored
	# SIGTERM, processes a linuxproc cluster lost track of): SIGKILL.
	local left
	mapfile -t left < <(marked_pids "$dir"; task_pids "$dir")
	if [[ ${#left[@]} -gt 0 ]]; then
		kill -KILL "${left[@]}" 2>/dev/null || true
		wait_gone "$STOP_TIMEOUT_S" "${left[@]}" ||
			die "processes ${left[*]} of '$dir' survive SIGKILL"
	fi
}

case ${1:-} in
install) shift; cmd_install "$@" ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) usage ;;
esac
