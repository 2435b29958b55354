#!/usr/bin/env bash
# Trials side by side: rounds, trials and wall time of the boundary search
# on N = 1, 2, 4 simulated GPUs (simtrain, 1:RANGE, START s start-up per
# trial), locally with --gpus and, with --slurm, as job steps on the test
# cluster (tests/slurm/cluster.sh; root).  One run, side by side.
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
cleanup() {
  [ "$slurm" = 1 ] && bash tests/slurm/cluster.sh stop "$work/cluster" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
want=$("$sim" --capacity 80G --act-mem 24M --print-max)
echo "simtrain --capacity 80G --act-mem 24M: boundary $want; --batch 1:$range; start-up ${start}s per trial"
printf '%-7s %2s %8s %8s %9s %8s %9s\n' launcher N max_fit rounds b-trials trials wall_s

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
print("%-7s %2s %8s %8d %9d %8d %9.1f" % (sys.argv[2], sys.argv[3], mf, rounds, len(b),
      r["summary"]["trials"], r["summary"]["wall_s"]))
PY
}

run() { # launcher, n, prefix...
  local l=$1 n=$2; shift 2
  local g=()
  [ "$n" -gt 1 ] && g=(--gpus "$([ "$l" = slurm ] && echo all || seq -s, 0 $((n - 1)))")
  "$@" "$ab" --quiet --no-cache --preset hf --batch "1:$range" --warmup 1 --steps 3 "${g[@]}" \
    --json "$work/$l-$n.json" -- "$sim" --capacity 80G --act-mem 24M --startup-time "${start}s" \
    --output_dir "$work/out" >"$work/$l-$n.out" 2>&1 || { tail -3 "$work/$l-$n.out"; exit 1; }
  one "$l" "$n" "$work/$l-$n.json"
}

for n in 1 2 4; do run local "$n"; done
if [ "$slurm" = 1 ]; then
  bash tests/slurm/cluster.sh install >/dev/null
  eval "$(bash tests/slurm/cluster.sh start "$work/cluster" 4)"
  for n in 1 2 4; do run slurm "$n" salloc -N1 -n"$n" --gres=gpu:"$n" -t 30 --; done
fi
