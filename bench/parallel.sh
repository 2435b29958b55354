#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Trials side by side: rounds, trials and wall time of the boundary search
# on N = 1, 2, 4 simulated GPUs (simtrain, 1:RANGE, START s start-up per
# trial), locally with --gpus and, with --slurm, on the test cluster
# (tests/slurm/cluster.sh; root) as job steps in salloc and as job arrays
# from outside.  One run, side by side.  b-trials and b-wall: the boundary
# search's trials and its wall time (each round as long as its longest
# trial); trials and wall_s: the whole run, throughput measured alone
# included.
#   bash bench/parallel.sh [--slurm] [RANGE] [START]
set -euo pipefail
cd "$(dirname "$0")/.."
slurm=0
[ "${1:-}" = --slurm ] && { slurm=1; shift; }
range=${1:-4096}
start=${2:-1}
ab=${AUTOBATCH:-build/autobatch}
sim=${SIMTRAIN:-build/simtrain}
work=$(mktemp -d /tmp/ab-parallel-XXXXXX)
cluster=$(mktemp -d /tmp/ab-parallel-cluster-XXXXXX)
cleanup() {
  [ "$slurm" = 1 ] && bash tests/slurm/cluster.sh stop "$cluster" >/dev/null 2>&1
  rm -rf "$work" "$cluster"
}
trap cleanup EXIT
want=$("$sim" --capacity 80G --act-mem 24M --print-max)
echo "simtrain --capacity 80G --act-mem 24M: boundary $want; --batch 1:$range; start-up ${start}s per trial"
printf '%-11s %2s %8s %7s %9s %7s %9s %7s\n' launcher N max_fit rounds b-trials b-wall trials wall_s

one() { # launcher, n, json
  local f=$3
  python3 - "$f" "$1" "$2" <<'PY'
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
print("%-11s %2s %8s %7d %9d %7.1f %9d %7.1f" % (r["summary"].get("launcher", sys.argv[2]),
      sys.argv[3], mf, rounds, len(b), bwall, r["summary"]["trials"], r["summary"]["wall_s"]))
PY
}

run() { # launcher, n, prefix...
  local l=$1 n=$2; shift 2
  local g=()
  [ "$l" = array ] && g=(--launcher slurm)
  [ "$n" -gt 1 ] && g+=(--gpus "$([ "$l" = slurm ] && echo all || seq -s, 0 $((n - 1)))")
  "$@" "$ab" --quiet --no-cache --preset hf --batch "1:$range" --warmup 1 --steps 3 "${g[@]}" \
    --json "$work/$l-$n.json" -- "$sim" --capacity 80G --act-mem 24M --startup-time "${start}s" \
    --output_dir "$work/out" >"$work/$l-$n.out" 2>&1 || { tail -3 "$work/$l-$n.out"; exit 1; }
  one "$l" "$n" "$work/$l-$n.json"
}

for n in 1 2 4; do run local "$n"; done
if [ "$slurm" = 1 ]; then
  bash tests/slurm/cluster.sh install >/dev/null
  eval "$(bash tests/slurm/cluster.sh start "$cluster" 4)"
  for n in 1 2 4; do run slurm "$n" salloc -N1 -n"$n" --gres=gpu:"$n" -t 30 --; done
  for n in 1 2 4; do run array "$n"; done
fi
