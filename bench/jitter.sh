#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Step-time jitter: is the spread autobatch reports the trainer's or the
# runner's?  (issue 28)
#
#   bash bench/jitter.sh          build the controls, run, print the table
#   bash bench/jitter.sh --save   also write bench/results/jitter-<commit>-<build type>.txt
#
# Each row runs the demo's command (examples/demo.sh: simtrain, 24 GiB,
# --long-step 4) BENCH_RUNS times, with simtrain also writing its own
# clock at every step boundary to a side file autobatch does not read
# (its --report lines, sent elsewhere: CLOCK_MONOTONIC, the runner's
# clock).  For every fitting trial the table compares what autobatch
# measured from the output lines with the trainer's clock over the same
# steps (from step --warmup to --warmup + steps_measured):
#   - step err: |step_time_s / trainer's - 1|, median and largest;
#   - spread: step_time_mad_s / step_time_s (what results.json reports and
#     the search re-measures on above 10%), autobatch's and the trainer's
#     own, median and largest, and how many trials were above 10%;
#   - excess: autobatch's spread less the trainer's, in points: the jitter
#     the runner itself adds;
#   - again: demo runs that re-measured both finalists.
# Rows: each runner at rest, then with BENCH_LOAD busy loops running (a
# shared 2-core CI machine), the runners interleaved run by run so that
# they meet the same load.
#
# Runners: AUTOBATCH (build/autobatch), BENCH_BASELINE (another autobatch,
# e.g. a build from before a change) and, unless BENCH_CONTROLS=0, two
# controls built from this tree's HEAD (git archive) with the runner
# broken on purpose, to show what runner jitter looks like here:
#   burst     reads the trial's output every 50 ms (poll with no wait
#             after a 50 ms sleep), lines stamped when read;
#   endstamp  stamps a line when it ends, not when it began to arrive (a
#             tqdm bar line is ended by the next redraw, a step later,
#             and simtrain's metric dict comes between on stdout).
# With BENCH_LATENCY_OF=COMMIT the bench also builds autobatch from COMMIT
# and from HEAD, each with its trial runner writing the points it timed
# (step, stamp) to $JITTER_STAMPS (a dump added here, in no other build),
# runs the demo with both, interleaved, BENCH_RUNS times at each load, and
# prints the latency of every step line: autobatch's stamp less
# simtrain's own clock at that step boundary (negative: stamped before
# the trainer wrote it).
# Environment: BENCH_RUNS (3), BENCH_LOAD (3; 0 no loaded rows), SIMTRAIN
# (build/simtrain), BENCH_BUILD (build-bench-jitter/, git-ignored).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ab=${AUTOBATCH:-$root/build/autobatch}
st=${SIMTRAIN:-$root/build/simtrain}
runs=${BENCH_RUNS:-3}
load=${BENCH_LOAD:-3}
bbuild=${BENCH_BUILD:-$root/build-bench-jitter}
save=0
for a in "$@"; do
  case "$a" in
    --save) save=1 ;;
    *) echo "usage: bash bench/jitter.sh [--save]" >&2; exit 2 ;;
  esac
done
[ -x "$ab" ] && [ -x "$st" ] || { echo "no $ab or $st: build first, or set AUTOBATCH and SIMTRAIN" >&2; exit 2; }

work=$(mktemp -d /tmp/ab-jitter-XXXXXX)
loaders=()
# load_start N: N busy loops beside the runs; load_stop ends them.
load_start() {
  local _
  for _ in $(seq "$1"); do
    (while :; do :; done) &
    loaders+=($!)
  done
}
load_stop() {
  local p
  for p in "${loaders[@]}"; do kill "$p" 2>/dev/null || true; done
  loaders=()
}
cleanup() {
  load_stop
  rm -rf "$work"
}
trap cleanup EXIT

# control NAME FILE OLD NEW [COMMIT]: autobatch from COMMIT (HEAD) with
# one line of FILE replaced (the pattern must be there exactly once).
control() {
  local name=$1 file=$2 old=$3 new=$4 src=$bbuild/$1/src
  rm -rf "$src"
  mkdir -p "$src"
  git -C "$root" archive "${5:-HEAD}" | tar -x -C "$src"
  python3 - "$src/$file" "$old" "$new" <<'EOF'
import sys
p, old, new = sys.argv[1:]
s = open(p).read()
if s.count(old) != 1:
    sys.exit("bench/jitter.sh: the control's pattern is not in %s once: %r" % (p, old))
open(p, "w").write(s.replace(old, new))
EOF
  cmake -S "$src" -B "$bbuild/$name/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAUTOBATCH_TESTS=OFF >/dev/null
  cmake --build "$bbuild/$name/build" --target autobatch -j2 >/dev/null
}

labels=(autobatch)
bins=("$ab")
if [ -n "${BENCH_BASELINE:-}" ]; then
  labels+=(baseline)
  bins+=("$BENCH_BASELINE")
fi
if [ "${BENCH_CONTROLS:-1}" != 0 ]; then
  control burst tuner/trial/trial.c "        int pr = poll(pfd, nfd, TRIAL_TICK_MS);" \
    "        usleep(TRIAL_TICK_MS * 1000); int pr = poll(pfd, nfd, 0);"
  control endstamp tuner/trial/trial.c "    double t = st->line_t; /* when it began to arrive */" \
    "    double t = st->read_t;"
  labels+=(burst endstamp)
  bins+=("$bbuild/burst/build/autobatch" "$bbuild/endstamp/build/autobatch")
fi

# The latency builds: the runner's timed points dumped at the end of each trial.
stamp_at='    series_timing(trial_timing_series(&st), o->warmup_steps, r);'
IFS= read -r -d '' stamp_dump <<'EOF' || true
    series_timing(trial_timing_series(&st), o->warmup_steps, r);
    if (getenv("JITTER_STAMPS")) {
        const struct series *js = trial_timing_series(&st);
        FILE *jf = fopen(getenv("JITTER_STAMPS"), "a");
        if (jf) {
            fprintf(jf, "[");
            for (size_t ji = 0; ji < js->n; ji++)
                fprintf(jf, "%s[%ld, %.6f]", ji ? ", " : "", js->step[ji], js->t[ji]);
            fprintf(jf, "]\n");
            fclose(jf);
        }
    }
EOF
if [ -n "${BENCH_LATENCY_OF:-}" ]; then
  control stamps-old tuner/trial/trial.c "$stamp_at" "$stamp_dump" "$BENCH_LATENCY_OF"
  control stamps-new tuner/trial/trial.c "$stamp_at" "$stamp_dump" HEAD
fi

cat >"$work/simtrain-clock" <<EOF
#!/bin/sh
AUTOBATCH_REPORT="\$JITTER_SIDE/\$AUTOBATCH_TRIAL.jsonl" exec "$st" --report "\$@"
EOF
chmod +x "$work/simtrain-clock"

# demo RUNNER_INDEX LOAD RUN: one demo run; its trials' numbers go to $work/rows
demo() {
  local i=$1 l=$2 r=$3 d="$work/run-$1-$2-$3"
  mkdir -p "$d/side"
  JITTER_SIDE="$d/side" "${bins[$i]}" --preset hf --batch 1:512 --no-cache --json "$d/r.json" -- \
    "$work/simtrain-clock" --capacity 24G --long-step 4 --output_dir "$d/out" >"$d/log" 2>&1 \
    || { echo "${labels[$i]}: autobatch exited $?" >&2; tail -5 "$d/log" >&2; exit 1; }
  python3 - "$d" "${labels[$i]}" "$l" >>"$work/rows" <<'EOF'
import json, os, sys
d, label, load = sys.argv[1:]
res = json.load(open(os.path.join(d, "r.json")))
again = "measuring both again" in open(os.path.join(d, "log"), errors="replace").read()
def median(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
for t in res["trials"] + (res.get("confirm") or []):
    if t["outcome"] != "fit" or not t.get("step_time_s") or t.get("step_time_mad_s") is None:
        continue
    side = os.path.join(d, "side", "%d.jsonl" % t["id"])
    pts = [(j["step"], j["time"]) for j in map(json.loads, open(side))]
    pts = [p for p in pts if 2 <= p[0] <= 2 + t["steps_measured"]]
    if len(pts) < 2:
        continue
    per = [(pts[k][1] - pts[k - 1][1]) / (pts[k][0] - pts[k - 1][0]) for k in range(1, len(pts))]
    tst = (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])
    m = median(per)
    tmad = median([abs(x - m) for x in per])
    print(json.dumps({"label": label, "load": int(load), "run": d, "again": again,
                      "st": t["step_time_s"], "spread": t["step_time_mad_s"] / t["step_time_s"],
                      "tst": tst, "tspread": tmad / tst}))
EOF
}

loads=(0)
[ "$load" -gt 0 ] && loads+=("$load")
: >"$work/rows"
for l in "${loads[@]}"; do
  load_start "$l"
  for r in $(seq "$runs"); do
    for i in "${!bins[@]}"; do
      demo "$i" "$l" "$r"
    done
  done
  load_stop
done

# latency VERSION LOAD RUN: one demo run with the stamps-VERSION build; each
# step line's latency (ms) goes to $work/lat-VERSION-LOAD
latency() {
  local v=$1 l=$2 r=$3 d="$work/lat-run-$1-$2-$3"
  mkdir -p "$d/side"
  JITTER_SIDE="$d/side" JITTER_STAMPS="$d/stamps" "$bbuild/stamps-$v/build/autobatch" --preset hf \
    --batch 1:512 --no-cache --json "$d/r.json" -- "$work/simtrain-clock" --capacity 24G \
    --long-step 4 --output_dir "$d/out" >"$d/log" 2>&1 || { echo "stamps-$v: exit $?" >&2; exit 1; }
  python3 - "$d" >>"$work/lat-$v-$l" <<'EOF'
import json, os, sys
d = sys.argv[1]
for k, line in enumerate(open(os.path.join(d, "stamps")), 1):
    side = os.path.join(d, "side", "%d.jsonl" % k)
    if not os.path.exists(side):
        continue
    clock = {j["step"]: j["time"] for j in map(json.loads, open(side))}
    for step, t in json.loads(line):
        if step >= 2 and step in clock:
            print("%.4f" % (1e3 * (t - clock[step])))
EOF
}
lat_table=""
if [ -n "${BENCH_LATENCY_OF:-}" ]; then
  for l in "${loads[@]}"; do
    load_start "$l"
    : >"$work/lat-old-$l"
    : >"$work/lat-new-$l"
    for r in $(seq "$runs"); do
      latency old "$l" "$r"
      latency new "$l" "$r"
    done
    load_stop
  done
  lat_table=$(
    echo "latency of a step line: autobatch's stamp less simtrain's clock (ms), old = $BENCH_LATENCY_OF, new = HEAD"
    printf '%-4s %4s %5s | %7s %7s %7s %7s %7s | %6s %6s\n' build load lines min median p90 p99 max '>1ms' early
    for l in "${loads[@]}"; do
      for v in old new; do
        sort -g "$work/lat-$v-$l" | awk -v v=$v -v l=$l '{ a[NR] = $1 } $1 > 1 { c++ } $1 < -0.05 { e++ }
          END { printf "%-4s %4d %5d | %7.3f %7.3f %7.3f %7.3f %7.3f | %6d %6d\n", v, l, NR, a[1],
                a[int(NR / 2) + 1], a[int(NR * 0.9) + 1], a[int(NR * 0.99) + 1], a[NR], c, e }'
      done
    done)
fi

build_type() { # the CMAKE_BUILD_TYPE beside a binary, or ?
  sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$(dirname "$1")/CMakeCache.txt" 2>/dev/null | grep . || echo '?'
}
commit=$(git -C "$root" rev-parse --short HEAD)
btype=$(build_type "$ab")
table=$(python3 - "$work/rows" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def median(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
print("%-9s %4s %4s %6s | %-11s | %-11s %-11s %-7s | %-11s | %s" % (
    "runner", "load", "runs", "trials", "step err %", "spread %", "trainer's %", ">10%",
    "excess pts", "again"))
print("%-9s %4s %4s %6s | %-11s | %-11s %-11s %-7s | %-11s |" % (
    "", "", "", "", "med   max", "med   max", "med   max", "ab/tr", "med   max"))
seen = []
for r in rows:
    if (r["label"], r["load"]) not in seen:
        seen.append((r["label"], r["load"]))
for label, load in sorted(seen, key=lambda k: (k[1], [s[0] for s in seen].index(k[0]))):
    g = [r for r in rows if r["label"] == label and r["load"] == load]
    err = [100 * abs(r["st"] / r["tst"] - 1) for r in g]
    sp = [100 * r["spread"] for r in g]
    tsp = [100 * r["tspread"] for r in g]
    ex = [a - b for a, b in zip(sp, tsp)]
    demos = {r["run"]: r["again"] for r in g}
    print("%-9s %4d %4d %6d | %5.1f %5.1f | %5.1f %5.1f %5.1f %5.1f %3d/%-3d | %5.1f %5.1f | %d/%d" % (
        label, load, len(demos), len(g), median(err), max(err), median(sp), max(sp),
        median(tsp), max(tsp), sum(s > 10 for s in sp), sum(s > 10 for s in tsp),
        median(ex), max(ex), sum(demos.values()), len(demos)))
EOF
)
out=$(cat <<EOF
# bench/jitter.sh: autobatch's step times against the trainer's own clock
# commit $commit, autobatch $(basename "$(dirname "$ab")")/autobatch ($btype), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)
# BENCH_RUNS=$runs demo runs per row, BENCH_LOAD=$load busy loops in the loaded rows; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)
# command: autobatch --preset hf --batch 1:512 --no-cache -- simtrain --capacity 24G --long-step 4
# runners: $(for i in "${!bins[@]}"; do printf '%s=%s (%s) ' "${labels[$i]}" "${bins[$i]}" "$("${bins[$i]}" --version | head -1)"; done)

$table

$lat_table
EOF
)
echo "$out"
if [ "$save" = 1 ]; then
  f="$root/bench/results/jitter-$commit-$btype.txt"
  echo "$out" >"$f"
  echo "wrote $f"
fi
