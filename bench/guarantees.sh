#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What issue 24's guarantees cost: the worst case first (--worst-case) and
# the confirmation run (--confirm) against the whole run.
#
#   bash bench/guarantees.sh [--save] [--repeats N] [--jobs longtail,sim] [--rev REV]
#
# The same search four ways, side by side:
#   A  --worst-case off  --no-confirm   the behaviour before issue 24
#   B  --worst-case auto --no-confirm   the probe's worst-case ordering
#                                       (train_longtail.py: its dataset's
#                                       `lengths`, mode 'lengths')
#   C  --worst-case scan --no-confirm   a bounded scan of the loader's batches
#   D  the default                      auto + the confirmation run (20 steps
#                                       or 60 s)
# on two jobs:
#   longtail  examples/pytorch/train_longtail.py on /usr/bin/python3 (Debian's
#             torch 1.13), under --trial-memory-limit, set up as
#             tests/e2e/test_worst_case.sh sets it up (cap 770000K, 512
#             samples, the last 8 of 256 frames in the epoch's last batch);
#   sim       simtrain --capacity 24G, --batch 1:512: no Python, no probe, so
#             only the confirmation costs anything.
# The runs are interleaved: each repeat runs every (job, variant) once, the
# variants' order rotated by one per repeat and the jobs' order swapped, so
# a burst of load on this shared machine falls on all variants alike.  Per
# variant: min and median wall time of the whole autobatch run (measured
# here), the trials, the confirmation run's wall_s (the results' "confirm"
# list) and the scan's scan_s (trials[].worst_case.scan_s, summed over the
# trials), as ratios to A's median wall time.
#
# Then the point of it: every distinct size a longtail run chose (and every
# distinct largest fit) trains one fresh full epoch under `ulimit -v` of the
# same cap, once per size, not per repeat, as the user's own run would.  A
# may print a size whose epoch runs out of memory at its last (long) batch;
# B, C and D should not.  The boundary N (the largest size whose epoch
# fits) is bisected between the sizes checked when they leave a gap.
#
# Every run has --no-cache (the warm-start cache would change the trials)
# and a private XDG_CACHE_HOME/XDG_STATE_HOME.  The environment is the
# test's: OMP_NUM_THREADS=1 PYTHONHASHSEED=0 MALLOC_ARENA_MAX=2
# MALLOC_MMAP_THRESHOLD_=65536, for the searches and the epochs alike (the
# cap was calibrated with them).
#
# The build: BENCH_BUILD (default build-bench-guarantees/), configured
# Release and built (autobatch, simtrain) from the working tree unless
# AUTOBATCH and SIMTRAIN name binaries; with --rev REV, from REV in a
# temporary git worktree (a clean tree: the working tree may hold others'
# unfinished edits), built in the work directory unless BENCH_BUILD says
# where, and the trainer is REV's too.  The binaries are copied at the start, so a rebuild during
# the run does not mix versions.  --save writes
# bench/results/guarantees-<short commit>.txt.  BENCH_KEEP_WORK=1 keeps the
# work directory (every run's output and results JSON).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
save=0 repeats=${BENCH_REPEATS:-4} jobs=${BENCH_JOBS:-longtail,sim} rev=""
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --repeats) repeats=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --rev) rev=$2; shift ;;
    *) echo "usage: bash bench/guarantees.sh [--save] [--repeats N] [--jobs longtail,sim] [--rev REV]" >&2; exit 2 ;;
  esac
  shift
done
[ "$repeats" -ge 1 ] 2>/dev/null || { echo "guarantees: --repeats wants a number >= 1" >&2; exit 2; }

PY=${AB_PYTHON:-/usr/bin/python3}
CAP_KB=${BENCH_CAP_KB:-770000}
SAMPLES=512
LT_ARGS=(--preset hf --steps 3 --warmup 1 --batch 4:32 --trial-memory-limit "${CAP_KB}K" --kill-grace 1s)
SIM_ARGS=(--preset hf --batch 1:512)
VARIANTS=(A B C D)
declare -A VFLAGS=(
  [A]="--worst-case off --no-confirm"
  [B]="--worst-case auto --no-confirm"
  [C]="--worst-case scan --no-confirm"
  [D]=""
)
declare -A VNAME=(
  [A]="off, no confirm"
  [B]="auto, no confirm"
  [C]="scan, no confirm"
  [D]="default (auto + confirm)"
)

tmp=$(mktemp -d /tmp/ab-guarantees-XXXXXX)
cleanup() {
  [ -z "$rev" ] || git -C "$root" worktree remove --force "$tmp/src" 2>/dev/null || true
  if [ "${BENCH_KEEP_WORK:-0}" = 1 ]; then echo "work kept in $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ---- the source and the binaries
src=$root
commit=$(git -C "$root" rev-parse --short HEAD)
dirty=$(git -C "$root" status --porcelain -uno | awk '{ print $2 }' | tr '\n' ' ' | sed 's/ $//')
if [ -n "$rev" ]; then
  commit=$(git -C "$root" rev-parse --short "$rev^{commit}")
  git -C "$root" worktree add -q --detach "$tmp/src" "$commit"
  src=$tmp/src dirty=""
fi
TRAIN=$src/examples/pytorch/train_longtail.py
build=${BENCH_BUILD:-$root/build-bench-guarantees}
[ -z "$rev" ] || build=${BENCH_BUILD:-$tmp/build}
if [ -z "${AUTOBATCH:-}" ] || [ -z "${SIMTRAIN:-}" ]; then
  echo "guarantees: building $commit${rev:+ (clean worktree)} in $build (Release)" >&2
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j2 --target autobatch simtrain >/dev/null
fi
mkdir -p "$tmp/bin"
cp "${AUTOBATCH:-$build/autobatch}" "$tmp/bin/autobatch"
cp "${SIMTRAIN:-$build/simtrain}" "$tmp/bin/simtrain"
AB=$tmp/bin/autobatch SIM=$tmp/bin/simtrain
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[ -z "${AUTOBATCH:-}" ] || build_type="unknown (AUTOBATCH=$AUTOBATCH)"

export OMP_NUM_THREADS=1 PYTHONHASHSEED=0 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536
export XDG_CACHE_HOME=$tmp/xdg-cache XDG_STATE_HOME=$tmp/xdg-state
mkdir -p "$XDG_CACHE_HOME" "$XDG_STATE_HOME" "$tmp/runs" "$tmp/out"

IFS=, read -r -a JOBS <<<"$jobs"
for j in "${JOBS[@]}"; do
  case "$j" in
    longtail) "$PY" -c "import torch" 2>/dev/null || { echo "guarantees: $PY cannot import torch" >&2; exit 2; } ;;
    sim) ;;
    *) echo "guarantees: unknown job $j (longtail, sim)" >&2; exit 2 ;;
  esac
done

ncpu=$(getconf _NPROCESSORS_ONLN)  # not nproc: it obeys OMP_NUM_THREADS
now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start=$(load)
t_start=$(now)

# ---- one run: job variant rep -> a line in $tmp/runs.tsv
# job variant rep rc wall trials confirms confirm_s scan_s trial_s best maxfit modes top
# (maxfit: .max_fit's micro_batch, else its largest_tried_fit, and top = "top"
# when the top of --batch fitted)
run_one() {
  local job=$1 v=$2 rep=$3 f="$tmp/runs/$1-$2-$3"
  local -a flags
  read -r -a flags <<<"${VFLAGS[$v]}"
  local t0 t1 rc=0
  t0=$(now)
  if [ "$job" = longtail ]; then
    "$AB" --quiet --no-cache "${LT_ARGS[@]}" "${flags[@]}" --json "$f.json" -- \
      "$PY" "$TRAIN" --samples $SAMPLES >"$f.out" 2>&1 || rc=$?
  else
    "$AB" --quiet --no-cache "${SIM_ARGS[@]}" "${flags[@]}" --json "$f.json" -- \
      "$SIM" --capacity 24G --output_dir "$tmp/out" >"$f.out" 2>&1 || rc=$?
  fi
  t1=$(now)
  local fields="- - - - - - - - -"
  if [ -s "$f.json" ]; then
    fields=$(jq -r '[
        (.trials | length),
        (.confirm // [] | length),
        ([.confirm // [] | .[].wall_s] | add // 0),
        ([.trials[].worst_case | select(. != null) | .scan_s] | add // 0),
        ([.trials[].wall_s] | add // 0),
        (.best.micro_batch // "-"),
        (.max_fit[0].micro_batch // .max_fit[0].largest_tried_fit // "-"),
        ([.trials[].worst_case | select(. != null)
          | .mode + (if .whole or .mode == "off" then "" else "(part)" end)]
          | unique | join("+") | if . == "" then "none" else . end),
        (if .max_fit[0].micro_batch == null and .max_fit[0].largest_tried_fit != null
         then "top" else "-" end)
      ] | map(tostring) | join(" ")' "$f.json")
  fi
  local wall
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  printf '%s %s %s %s %s %s\n' "$job" "$v" "$rep" "$rc" "$wall" "$fields" >>"$tmp/runs.tsv"
  printf '  %-8s %s rep %s: exit %s, %6.2fs, %s\n' "$job" "$v" "$rep" "$rc" "$wall" "$fields" >&2
}

echo "guarantees: $repeats repeats of ${JOBS[*]} x ${VARIANTS[*]} (commit $commit, load $load_start)" >&2
: >"$tmp/runs.tsv"
for ((rep = 1; rep <= repeats; rep++)); do
  order=()
  for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
    order+=("${VARIANTS[$(((k + rep - 1) % ${#VARIANTS[@]}))]}")
  done
  jorder=("${JOBS[@]}")
  if [ $((rep % 2)) -eq 0 ] && [ ${#JOBS[@]} -eq 2 ]; then jorder=("${JOBS[1]}" "${JOBS[0]}"); fi
  echo "repeat $rep: jobs ${jorder[*]}, variants ${order[*]}" >&2
  for j in "${jorder[@]}"; do
    for v in "${order[@]}"; do run_one "$j" "$v" "$rep"; done
  done
done
t_runs=$(now)
load_runs=$(load)

# ---- a fresh full epoch under ulimit -v at every distinct size chosen
declare -A EPOCH LONG
epoch() { # micro-batch -> "fits S s" | "OOM at step K of M, S s"
  local b=$1 o="$tmp/epoch-$1.out" t0 t1 rc=0
  [ -z "${EPOCH[$b]:-}" ] || return 0
  t0=$(now)
  (ulimit -v "$CAP_KB"; exec "$PY" "$TRAIN" --samples $SAMPLES --per_device_train_batch_size "$b" --epochs 1) \
    >"$o" 2>&1 || rc=$?
  t1=$(now)
  local steps total s
  steps=$(grep -c '^step ' "$o" || true)
  total=$(((SAMPLES + b - 1) / b))
  # the long batch: from the batch holding sample SAMPLES-8 (the first long
  # one) to the end of that batch
  local first=$((SAMPLES - 8)) end
  end=$(((first / b + 1) * b)); [ $end -le $SAMPLES ] || end=$SAMPLES
  LONG[$b]="$((end - (first / b) * b))x256"
  s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ] && grep -q "epoch 1 done" "$o"; then
    EPOCH[$b]="fits ($steps of $total steps, ${s}s)"
  elif grep -qi "can't allocate memory\|out of memory\|MemoryError" "$o"; then
    EPOCH[$b]="OOM after $steps of $total steps (${s}s)"
  else
    EPOCH[$b]="failed, exit $rc, $steps of $total steps: $(tail -1 "$o")"
  fi
  echo "  epoch at $b: ${EPOCH[$b]}" >&2
}
if [[ " ${JOBS[*]} " == *" longtail "* ]]; then
  sizes=$(awk '$1 == "longtail" { if ($11 != "-") print $11; if ($12 != "-") print $12 }' "$tmp/runs.tsv" | sort -un)
  echo "full epochs under ulimit -v $CAP_KB at: $(echo $sizes)" >&2
  for b in $sizes; do epoch "$b"; done
  # No bisection for a boundary: which sizes survive is not monotone here.
  # The epoch's one long batch is whichever batch holds the last 8 samples
  # (256 frames each): its padded size is its sample count x 256, and that
  # count depends on where the batches split 512 (at 25 it is the last 12,
  # at 26 the last 18, at 28 exactly the 8 long ones).
fi
t_end=$(now)
load_end=$(load)

# ---- the report
report() {
  echo "# bench/guarantees.sh: the worst case first and the confirmation run against the whole run"
  echo
  echo "commit:      $commit ($(git -C "$root" log -1 --format='%cd %s' --date=short "$commit" | cut -c1-100))"
  echo "build:       CMAKE_BUILD_TYPE=${build_type:-?} ($build); autobatch sha256 $(sha256sum "$AB" | cut -c1-16)"
  echo "tree:        $(if [ -n "$dirty" ]; then echo "the working tree, whose tracked files differed from $commit in: $dirty"; elif [ -n "$rev" ]; then echo "a clean worktree of $commit (--rev $rev)"; else echo "clean at $commit"; fi)"
  echo "machine:     $ncpu cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), shared with other work"
  echo "load avg:    $load_start at the start, $load_runs after the searches, $load_end at the end"
  echo "date:        $(date -u '+%Y-%m-%d %H:%M UTC'); whole bench $(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.0f", b - a }') s"
  if [[ " ${JOBS[*]} " == *" longtail "* ]]; then
    echo "python:      $PY, torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  fi
  echo "environment: OMP_NUM_THREADS=1 PYTHONHASHSEED=0 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536, private XDG_CACHE_HOME/XDG_STATE_HOME"
  echo "repeats:     $repeats, interleaved (variants rotated by one each repeat, jobs swapped)"
  echo
  echo "commands (each with --no-cache --json F; the variant's flags where [V] stands):"
  echo "  longtail: autobatch --quiet --no-cache ${LT_ARGS[*]} [V] -- $PY examples/pytorch/train_longtail.py --samples $SAMPLES"
  echo "  sim:      autobatch --quiet --no-cache ${SIM_ARGS[*]} [V] -- simtrain --capacity 24G --output_dir OUT"
  for v in "${VARIANTS[@]}"; do echo "  $v = ${VFLAGS[$v]:-(no flags)}   ${VNAME[$v]}"; done
  echo "  epoch check: (ulimit -v $CAP_KB; $PY examples/pytorch/train_longtail.py --samples $SAMPLES --per_device_train_batch_size B --epochs 1)"
  echo
  echo "every run, in the order run (wall s measured around autobatch; trials = .trials; confirm s = sum of"
  echo ".confirm[].wall_s; scan s = sum of .trials[].worst_case.scan_s; trial s = sum of .trials[].wall_s;"
  echo "chosen = .best.micro_batch; largest fit = .max_fit[0].micro_batch, (top) when the top of --batch fitted; worst case = the trials' worst_case.mode):"
  echo
  printf '%-9s %-2s %-3s %-4s %7s %6s %7s %9s %6s %7s %6s %8s  %s\n' job v rep exit "wall s" trials confirms "confirm s" "scan s" "trial s" chosen "largest" "worst case"
  while read -r job v rep rc wall tr nc cs ss ts best mf modes top; do
    [ "$top" != top ] || mf="$mf(top)"
    printf '%-9s %-2s %-3s %-4s %7s %6s %7s %9.2f %6.2f %7.2f %6s %8s  %s\n' "$job" "$v" "$rep" "$rc" "$wall" "$tr" "$nc" "$cs" "$ss" "$ts" "$best" "$mf" "$modes"
  done <"$tmp/runs.tsv"
  echo
  BENCH_EPOCHS=$(for b in "${!EPOCH[@]}"; do printf '%s\t%s: %s\n' "$b" "${LONG[$b]}" "${EPOCH[$b]}"; done) \
  "$PY" - "$tmp/runs.tsv" <<'EOF'
import os, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
epochs = {}
for l in os.environ.get("BENCH_EPOCHS", "").splitlines():
    if l.strip():
        b, what = l.split("\t", 1)
        epochs[b] = what
names = {"A": "off, no confirm", "B": "auto, no confirm", "C": "scan, no confirm", "D": "default: auto + confirm"}
def num(x):
    try:
        return float(x)
    except ValueError:
        return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def f(x, fmt="%.2f"):
    return "-" if x is None else fmt % x
for job in dict.fromkeys(r[0] for r in rows):
    jr = [r for r in rows if r[0] == job]
    by = {v: [r for r in jr if r[1] == v] for v in "ABCD"}
    a = by["A"]
    a_med = med([num(r[4]) for r in a])
    a_min = min([num(r[4]) for r in a]) if a else None
    print(f"## {job}: cost against A (ratios use A's median wall time, {f(a_med)} s)")
    print()
    print("| variant | runs | wall min s | wall median s | median / A | min / A | trials | trial s (median) | confirm s (median) | confirm / A | scan s (median) | scan / A | chosen | largest fit | worst case |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for v in "ABCD":
        rs = by[v]
        if not rs:
            continue
        walls = [num(r[4]) for r in rs]
        wmin, wmed = min(walls), med(walls)
        cs, ss = med([num(r[7]) for r in rs]), med([num(r[8]) for r in rs])
        bad = [r for r in rs if r[3] != "0"]
        trials = "/".join(r[5] for r in rs)
        chosen = "/".join(sorted(set(r[10] for r in rs), key=lambda s: (len(s), s)))
        largest = "/".join(sorted(set(r[11] + (" (top of --batch)" if r[13] == "top" else "") for r in rs),
                                  key=lambda s: (len(s), s)))
        ts = med([num(r[9]) for r in rs])
        modes = "/".join(sorted(set(r[12] for r in rs)))
        rat = lambda x, d: "-" if x is None or not d else "%.2f" % (x / d)
        print(f"| {v} {names[v]} | {len(rs)}{' (' + str(len(bad)) + ' exit != 0)' if bad else ''} | {f(wmin)} | {f(wmed)} | "
              f"{rat(wmed, a_med)} | {rat(wmin, a_min)} | {trials} | {f(ts)} | {f(cs)} | {rat(cs, a_med)} | {f(ss)} | {rat(ss, a_med)} | "
              f"{chosen} | {largest} | {modes} |")
    print()
    if job == "longtail" and epochs:
        print(f"## longtail: does the size survive a fresh full epoch under ulimit -v of the same cap?")
        print()
        print("| variant | chosen | its full epoch | largest fit | its full epoch |")
        print("|---|---|---|---|---|")
        for v in "ABCD":
            for b, m in sorted(set((r[10], r[11]) for r in by[v])):
                print(f"| {v} {names[v]} | {b} | {epochs.get(b, '-')} | {m} | {epochs.get(m, '-')} |")
        print()
        print("(BxT: the epoch's long batch, B samples padded to T frames; which sizes fit is not monotone in the size)")
        print()
EOF
}
out=$(report)
printf '%s\n' "$out"
if [ $save -eq 1 ]; then
  mkdir -p "$root/bench/results"
  printf '%s\n' "$out" >"$root/bench/results/guarantees-$commit.txt"
  echo "written: bench/results/guarantees-$commit.txt" >&2
fi
