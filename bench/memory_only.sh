#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory-only boundary trials against full ones (--full-trials), side by
# side: the same real CPU job (examples/pytorch/train_tts.py --worst_case,
# Debian's torch) under the same cap, the two modes interleaved and their
# order rotated each repeat.  Per mode: min and median of the whole run's
# wall time and of the time to the exact boundary (the trials' wall times
# summed, in order, until the largest fit L has fitted and L+1 failed),
# the trials, and the boundary found.
#
#   bash bench/memory_only.sh [--repeats N] [--save]
#
# --save writes bench/results/memory-only-<commit>.txt.  AUTOBATCH names
# the binary (default build/autobatch); BENCH_CAP the cap (803500K).
set -euo pipefail
cd "$(dirname "$0")/.."
AUTOBATCH=${AUTOBATCH:-build/autobatch}
CAP=${BENCH_CAP:-803500K}
REPEATS=3
SAVE=0
while [ $# -gt 0 ]; do
  case $1 in
    --repeats) REPEATS=$2; shift 2 ;;
    --save) SAVE=1; shift ;;
    *) echo "usage: bash bench/memory_only.sh [--repeats N] [--save]" >&2; exit 2 ;;
  esac
done
[ -x "$AUTOBATCH" ] || { echo "no $AUTOBATCH: build first (cmake --build build)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/ab-bench-mo-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export XDG_CACHE_HOME="$WORK/cache"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit-dirty"
build=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$(dirname "$AUTOBATCH")/CMakeCache.txt" 2>/dev/null || echo unknown)
modes=(memory-only full)
{
  echo "# memory-only vs full boundary trials, commit $commit, build ${build:-unknown}"
  echo "# job: examples/pytorch/train_tts.py --worst_case, --trial-memory-limit $CAP --batch 1:64, $REPEATS interleaved repeats"
  echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq 1 "$REPEATS"); do
    order=("${modes[@]}")
    [ $((r % 2)) -eq 0 ] && order=(full memory-only)
    for m in "${order[@]}"; do
      extra=()
      [ "$m" = full ] && extra=(--full-trials)
      t0=$(date +%s.%N)
      "$AUTOBATCH" --quiet --no-cache --trial-memory-limit "$CAP" --batch 1:64 "${extra[@]}" \
        --json "$WORK/$m-$r.json" -- /usr/bin/python3 examples/pytorch/train_tts.py --worst_case \
        >"$WORK/$m-$r.out" 2>&1 || true
      t1=$(date +%s.%N)
      python3 - "$WORK/$m-$r.json" "$m" "$r" "$(echo "$t1 - $t0" | bc)" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
cell = d["max_fit"][0]
b = cell["micro_batch"]
t, fit_b, fail_up, n = 0.0, False, False, 0
for tr in d["trials"]:
    n += 1
    t += tr["wall_s"]
    fit_b |= tr["micro_batch"] == b and tr["outcome"] == "fit"
    fail_up |= tr["micro_batch"] == b + 1 and tr["outcome"] != "fit"
    if fit_b and fail_up:
        break
mem = sum(1 for tr in d["trials"] if tr.get("memory_only"))
print("run %s %s boundary=%s to_boundary_s=%.1f trials_to_boundary=%d whole_s=%s trials=%d "
      "memory_only=%d confirmed=%s" % (sys.argv[3], sys.argv[2], b, t, n, sys.argv[4],
                                       len(d["trials"]), mem, d["summary"].get("confirmed")))
EOF
    done
  done
  echo "# load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$WORK/log.txt"
python3 - "$WORK/log.txt" <<'EOF' | tee -a "$WORK/log.txt"
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    if line.startswith("run "):
        f = dict(kv.split("=") for kv in line.split()[3:])
        runs.setdefault(line.split()[2], []).append(f)
print("| mode | boundary found | to boundary s, min / median | whole s, min / median | trials (median) |")
print("|---|---|---|---|---|")
med = {}
for m, rs in runs.items():
    tb = [float(r["to_boundary_s"]) for r in rs]
    wh = [float(r["whole_s"]) for r in rs]
    med[m] = (statistics.median(tb), statistics.median(wh))
    print("| %s | %s | %.1f / %.1f | %.1f / %.1f | %s |" % (
        m, ",".join(sorted({r["boundary"] for r in rs})), min(tb), med[m][0], min(wh), med[m][1],
        statistics.median(int(r["trials"]) for r in rs)))
if "memory-only" in med and "full" in med:
    print("memory-only / full, medians: to boundary %.2fx, whole %.2fx" % (
        med["memory-only"][0] / med["full"][0], med["memory-only"][1] / med["full"][1]))
EOF
if [ "$SAVE" = 1 ]; then
  cp "$WORK/log.txt" "bench/results/memory-only-$commit.txt"
  echo "wrote bench/results/memory-only-$commit.txt"
fi
