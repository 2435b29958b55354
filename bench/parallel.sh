#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trials side by side: rounds, trials and wall time of the boundary search
# on N = 1, 2, 4 simulated GPUs (simtrain, 1:RANGE, START s start-up per
# trial), locally with --gpus and, with --slurm, on the test cluster
# (tests/slurm/cluster.sh; root) as job steps in salloc and as job arrays
# from outside.
#
#   bash bench/parallel.sh [--slurm] [--save] [--repeats N] [RANGE] [START]
#
# The runs are interleaved: each repeat (BENCH_REPEATS, default 3) runs
# every (launcher, N) once, the order of N rotated by one each repeat, so a
# burst of load on this shared machine falls on all alike.  Per run:
# b-trials and b-wall, the boundary search's trials and its wall time (each
# round as long as its longest trial); trials and wall_s, the whole run
# (throughput measured alone and the confirmation run included); start-ups,
# the processes started (trials and confirmation runs).  Per (launcher, N):
# min and median of b-wall and wall_s, and the medians' ratio to N=1's.
# Two GPU-hour columns: start-ups x START (what the start-ups cost) and
# N x wall_s (the GPU-seconds the run holds: N slots for its whole time,
# which side by side trials do not make shorter).
#
# The build: AUTOBATCH and SIMTRAIN name binaries; otherwise both are built
# Release from the working tree in BENCH_BUILD (default build-bench-parallel/).
# They are copied at the start.  --save writes
# bench/results/parallel-<short commit>[-dirty].txt with the commit, the
# build type and the machine's load at the start.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
slurm=0 save=0 repeats=${BENCH_REPEATS:-3}
while [ $# -gt 0 ]; do
  case "$1" in
    --slurm) slurm=1 ;;
    --save) save=1 ;;
    --repeats) repeats=$2; shift ;;
    -*) echo "usage: bash bench/parallel.sh [--slurm] [--save] [--repeats N] [RANGE] [START]" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
[ "$repeats" -ge 1 ] 2>/dev/null || { echo "parallel: --repeats wants a number >= 1" >&2; exit 2; }
range=${1:-4096}
start=${2:-1}
work=$(mktemp -d /tmp/ab-parallel-XXXXXX)
cluster=$(mktemp -d /tmp/ab-parallel-cluster-XXXXXX)
cleanup() {
  [ "$slurm" = 1 ] && bash tests/slurm/cluster.sh stop "$cluster" >/dev/null 2>&1
  rm -rf "$work" "$cluster"
}
trap cleanup EXIT

commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain -uno 2>/dev/null)" ] || commit="$commit-dirty"
build=${BENCH_BUILD:-$root/build-bench-parallel}
if [ -z "${AUTOBATCH:-}" ] || [ -z "${SIMTRAIN:-}" ]; then
  echo "parallel: building the working tree in $build (Release)" >&2
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j2 --target autobatch simtrain >/dev/null
fi
ab_src=${AUTOBATCH:-$build/autobatch} sim_src=${SIMTRAIN:-$build/simtrain}
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$(dirname "$ab_src")/CMakeCache.txt" 2>/dev/null || true)
build_type=${build_type:-unknown (no CMakeCache.txt beside $ab_src)}
mkdir -p "$work/bin"
cp "$ab_src" "$work/bin/autobatch"; cp "$sim_src" "$work/bin/simtrain"
ab=$work/bin/autobatch sim=$work/bin/simtrain
export XDG_CACHE_HOME=$work/xdg-cache XDG_STATE_HOME=$work/xdg-state
ncpu=$(getconf _NPROCESSORS_ONLN)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$SECONDS

want=$("$sim" --capacity 80G --act-mem 24M --print-max)
: > "$work/runs.txt"
header() {
  echo "bash bench/parallel.sh$([ $slurm = 1 ] && echo ' --slurm') --repeats $repeats $range $start"
  echo "commit $commit, build $build_type ($ab_src, sha256 $(sha256sum "$ab" | cut -c1-16))"
  echo "machine: $ncpu cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), shared with other work; load avg $load_start at the start"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "simtrain --capacity 80G --act-mem 24M: boundary $want; --batch 1:$range; start-up ${start}s per trial"
  echo "$repeats repeats, interleaved (the order of N rotated by one each repeat)"
}
header
printf '%-11s %2s %3s %8s %7s %9s %7s %7s %7s %9s\n' launcher N rep max_fit rounds b-trials b-wall trials wall_s start-ups

one() { # launcher, n, rep, json, wall measured here
  python3 - "$4" "$1" "$2" "$3" "$5" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["trials"]
mf = r["max_fit"][0]["micro_batch"]
# the boundary search: every trial before the max-fit's first speed
# measured alone (serially, the max-fit's own trial)
i = next(k for k, x in enumerate(t) if x["micro_batch"] == mf and x["outcome"] == "fit"
         and not x.get("shared"))
b = t[:i + 1] if sys.argv[3] == "1" else t[:i]
rounds = len(b) if sys.argv[3] == "1" else len({x["round"] for x in b})
# the boundary's wall time: each round lasts as long as its longest trial
per = {}
for k, x in enumerate(b):
    key = k if sys.argv[3] == "1" else x["round"]
    per[key] = max(per.get(key, 0), x["wall_s"])
bwall = sum(per.values())
startups = len(t) + len(r.get("confirm") or [])
print("%-11s %2s %3s %8s %7d %9d %7.1f %7d %7.1f %9d" % (r["summary"].get("launcher", sys.argv[2]),
      sys.argv[3], sys.argv[4], mf, rounds, len(b), bwall, r["summary"]["trials"], float(sys.argv[5]), startups))
PY
}

run() { # launcher, n, rep, prefix...
  local l=$1 n=$2 rep=$3; shift 3
  local g=() t0 t1
  [ "$l" = array ] && g=(--launcher slurm)
  # in an allocation all its GPUs; from a login node how many (Slurm picks
  # them); locally the indices
  [ "$n" -gt 1 ] && g+=(--gpus "$(case $l in slurm) echo all ;; array) echo "$n" ;; *) seq -s, 0 $((n - 1)) ;; esac)")
  t0=$(date +%s.%N)
  "$@" "$ab" --quiet --no-cache --preset hf --batch "1:$range" --warmup 1 --steps 3 "${g[@]}" \
    --json "$work/$l-$n-$rep.json" -- "$sim" --capacity 80G --act-mem 24M --startup-time "${start}s" \
    --output_dir "$work/out" >"$work/$l-$n-$rep.out" 2>&1 || { tail -3 "$work/$l-$n-$rep.out"; exit 1; }
  t1=$(date +%s.%N)
  one "$l" "$n" "$rep" "$work/$l-$n-$rep.json" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')" \
    | tee -a "$work/runs.txt"
}

launchers=(local)
if [ "$slurm" = 1 ]; then
  bash tests/slurm/cluster.sh install >/dev/null
  eval "$(bash tests/slurm/cluster.sh start "$cluster" 4)"
  launchers+=(slurm array)
fi
NS=(1 2 4)
for ((rep = 1; rep <= repeats; rep++)); do
  order=()
  for ((k = 0; k < ${#NS[@]}; k++)); do order+=("${NS[$(((k + rep - 1) % ${#NS[@]}))]}"); done
  for l in "${launchers[@]}"; do
    for n in "${order[@]}"; do
      case "$l" in
        slurm) run slurm "$n" "$rep" salloc -N1 -n"$n" --gres=gpu:"$n" -t 30 -- ;;
        *) run "$l" "$n" "$rep" ;;
      esac
    done
  done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

summary() {
  python3 - "$work/runs.txt" "$start" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
start = float(sys.argv[2])
def med(xs):
    xs = sorted(xs); n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
print("| launcher | N | runs | max-fit | rounds | b-trials | b-wall s, min / median | vs N=1 | trials | wall s, min / median | vs N=1 | start-ups | start-ups x START s | N x wall s (GPU-s held) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for l in dict.fromkeys(r[0] for r in rows):
    base = None
    for n in ("1", "2", "4"):
        rs = [r for r in rows if r[0] == l and r[1] == n]
        if not rs:
            continue
        bw = [float(r[6]) for r in rs]; w = [float(r[8]) for r in rs]
        su = med([int(r[9]) for r in rs])
        if n == "1":
            base = (med(bw), med(w))
        rb = "-" if base is None else "%.2fx" % (med(bw) / base[0])
        rw = "-" if base is None else "%.2fx" % (med(w) / base[1])
        print("| %s | %s | %d | %s | %s | %s | %.1f / %.1f | %s | %s | %.1f / %.1f | %s | %g | %.0f | %.0f |" % (
            l, n, len(rs), "/".join(sorted({r[3] for r in rs})), "/".join(sorted({r[4] for r in rs})),
            "/".join(r[5] for r in rs), min(bw), med(bw), rb, "/".join(r[7] for r in rs), min(w), med(w), rw,
            su, su * start, int(n) * med(w)))
PY
}
echo
summary | tee "$work/summary.md"
echo
echo "load avg $load_end at the end; whole bench $((SECONDS - t_start)) s"
if [ "$save" = 1 ]; then
  out=bench/results/parallel-$commit.txt
  {
    header
    echo "load avg at the end: $load_end; whole bench $((SECONDS - t_start)) s"
    echo
    printf '%-11s %2s %3s %8s %7s %9s %7s %7s %7s %9s\n' launcher N rep max_fit rounds b-trials b-wall trials wall_s start-ups
    cat "$work/runs.txt"
    echo
    cat "$work/summary.md"
    echo
    echo "b-wall: the boundary search's wall time, each round as long as its longest trial (from the"
    echo "results' trials[].wall_s); wall_s: the whole autobatch run, timed around it here."
  } > "$out"
  echo "wrote $out" >&2
fi
