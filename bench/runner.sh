#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What autobatch's runner costs: its own CPU while a trial runs, against
# the host's process count, and its start-up.
#
#   bash bench/runner.sh [--save] [--baseline REV]
#
# Idle CPU: with NVML present, autobatch samples GPU memory every 100 ms
# and needs the trial's processes for that.  Until issue 12 it found them
# by reading every process's /proc/<pid>/stat and marking descendants in
# O(n^2) per tree level, so its cost grew with the host; now it walks down
# its own subtree through /proc/<pid>/task/<tid>/children.  A trial that
# sleeps 8 s (no output) runs under an optimized build with the fake NVML
# library (tests/fake_nvml), once on a quiet host and once with 3000 extra
# sleeping processes that are not autobatch's; the CPU seconds of
# autobatch and its children (getrusage) are the figure.
#
# Start-up: `autobatch --version` 200 times (wall seconds), and the
# instructions of one run under callgrind when valgrind is installed.
# libcurl and the libraries it pulls in were linked into every run until
# issue 12; now tuner/output/webhook.c loads it when a webhook is used.
#
# With --baseline REV the same runs are made with REV's autobatch, built in
# a temporary worktree, side by side in the same run.  --save writes
# bench/results/runner-cost.txt.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
save=0 baseline=""
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --baseline) baseline=$2; shift ;;
    *) echo "usage: bash bench/runner.sh [--save] [--baseline REV]" >&2; exit 2 ;;
  esac
  shift
done
tmp=$(mktemp -d /tmp/ab-runner-XXXXXX)
pids=()
cleanup() {
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  [ -z "$baseline" ] || git -C "$root" worktree remove --force "$tmp/old" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

build() { # src dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DAUTOBATCH_TESTS=ON >/dev/null
  cmake --build "$2" -j2 --target autobatch fake_nvml >/dev/null
}
build "$root" "$tmp/new"
bins=("new=$tmp/new/autobatch")
if [ -n "$baseline" ]; then
  git -C "$root" worktree add -q --detach "$tmp/old" "$baseline"
  build "$tmp/old" "$tmp/old-build"
  bins+=("$baseline=$tmp/old-build/autobatch")
fi
nvml=$(find "$tmp/new" -name libfake_nvml.so | head -1)
export IDLE_CACHE=$tmp/cache

cpu() { # autobatch
  python3 - "$1" "$nvml" <<'PY'
import os, resource, subprocess, sys
env = dict(os.environ, AUTOBATCH_NVML_LIB=sys.argv[2], XDG_CACHE_HOME=os.environ["IDLE_CACHE"])
subprocess.run([sys.argv[1], "--no-cache", "--batch", "1:1", "--steps", "1", "--",
                "sh", "-c", "sleep 8", "sh"],
               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f" % (r.ru_utime + r.ru_stime))
PY
}

declare -A res start ins
run_all() { # label
  for b in "${bins[@]}"; do
    res["${b%%=*} $1"]=$(cpu "${b#*=}")
  done
}
run_all quiet
for _ in $(seq 3000); do sleep 600 & pids+=($!); done
hostn=$(ls -d /proc/[0-9]* | wc -l)
run_all busy
kill "${pids[@]}" 2>/dev/null || true
pids=()

for b in "${bins[@]}"; do
  n=${b%%=*} bin=${b#*=}
  t0=$(date +%s.%N)
  for _ in $(seq 200); do "$bin" --version >/dev/null; done
  start[$n]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  ins[$n]=-
  if command -v valgrind >/dev/null; then
    ins[$n]=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" --version 2>&1 \
      | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  fi
done

{
  echo "autobatch's runner: CPU while a trial runs, and start-up (bash bench/runner.sh${baseline:+ --baseline $baseline})"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "machine: $(nproc) CPUs, $(uname -sr)"
  echo "host processes: quiet about $((hostn - 3000)), busy $hostn"
  echo
  echo "CPU seconds of autobatch over an 8 s trial, fake NVML sampled every 100 ms:"
  printf '%-12s %10s %10s %10s\n' binary "quiet s" "busy s" "busy/quiet"
  for b in "${bins[@]}"; do
    n=${b%%=*}
    q=${res["$n quiet"]} z=${res["$n busy"]}
    printf '%-12s %10s %10s %10s\n' "$n" "$q" "$z" \
      "$(awk -v q="$q" -v z="$z" 'BEGIN { printf "%.1f", (q > 0 ? z / q : 0) }')"
  done
  echo
  echo "start-up: autobatch --version"
  printf '%-12s %14s %22s\n' binary "200 runs, s" "instructions, 1 run"
  for b in "${bins[@]}"; do
    n=${b%%=*}
    printf '%-12s %14s %22s\n' "$n" "${start[$n]}" "${ins[$n]}"
  done
} >"$tmp/out.txt"
cat "$tmp/out.txt"
[ "$save" = 0 ] || cp "$tmp/out.txt" "$root/bench/results/runner-cost.txt"
