#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Log throughput: how fast autobatch reads a trial's output (bench/README.md).
#
#   bash bench/logthroughput.sh          build, write the log, print the table
#   bash bench/logthroughput.sh --save   also write bench/results/log-throughput.txt
#
# A trial's every output line goes through the line splitter, the OOM
# signatures and the step parser, so a trainer that logs fast must not be
# slowed down by autobatch reading its pipe.  The trial command here is
# `cat` of a generated training log (a tqdm bar redrawn every step, metric
# dicts, logging lines, warnings), so the trial runs exactly as fast as
# autobatch reads.  Each row is the best and the median wall time of
# BENCH_RUNS runs, as MB/s (MB = 10^6 bytes):
#   - `cat FILE > /dev/null` and `cat FILE | cat > /dev/null`: the ceiling;
#   - autobatch --quiet, one trial of `cat FILE`;
#   - the same with AB_BENCH_NO_PREFILTER=1: every line through every OOM
#     regex, as before the prefilter (probes/oom.c reads that variable only
#     in this bench's build, made with -DAB_BENCH_OOM_SWITCH);
#   - autobatch showing the output (not --quiet; off a terminal that is
#     the default) to /dev/null, to a regular file beside the log, and
#     through a pipe to `cat > /dev/null`: the sink's own cost is in the
#     last two (writing 300 MB to a file costs the kernel what it costs;
#     autobatch passes each read through with one write).
#
# Environment: BENCH_LOG_MB (300) log size; BENCH_RUNS (3); BENCH_BUILD
# (build-bench-log/, git-ignored) the CMake build of autobatch with the
# switch; AUTOBATCH and BENCH_BASELINE: other autobatch binaries to time
# in the same run (the normal build, a build from before a change), each
# with --quiet and with the output shown (to /dev/null and to a file).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BENCH_BUILD:-$root/build-bench-log}
mb=${BENCH_LOG_MB:-300}
runs=${BENCH_RUNS:-3}
save=0
for a in "$@"; do
  case "$a" in
    --save) save=1 ;;
    *) echo "usage: bash bench/logthroughput.sh [--save]" >&2; exit 2 ;;
  esac
done

cmake -S "$root" -B "$build" -DAUTOBATCH_TESTS=OFF -DAUTOBATCH_WERROR=ON \
  -DCMAKE_C_FLAGS=-DAB_BENCH_OOM_SWITCH >/dev/null
cmake --build "$build" --target autobatch -j2 >/dev/null
ab=$build/autobatch

work=$(mktemp -d /tmp/ab-logbench-XXXXXX)
trap 'rm -rf "$work"' EXIT
log=$work/train.log

# A training log: a tqdm bar redrawn with '\r' every step, a Hugging Face
# metric dict every 10 steps, a logging line every 50, a UserWarning with
# its source line every 500, and every 5000 steps a warning that mentions
# "CUDA out of memory" without being one (it reaches the regexes).
awk -v mb="$mb" 'BEGIN {
    srand(1)
    target = mb * 1000000
    total = 10000000
    block = "\342\226\210"
    for (step = 1; bytes < target; step++) {
        pct = int(100 * step / total)
        bar = ""
        for (i = 0; i < int(pct / 10); i++)
            bar = bar block
        line = sprintf("Epoch 0: %3d%%|%s%*s| %d/%d [%02d:%02d<%02d:%02d, %.2fit/s, loss=%.4f, v_num=0]\r",
                       pct, bar, 10 - int(pct / 10), "", step, total, int(step / 3000) % 60,
                       int(step / 50) % 60, 59 - int(step / 3000) % 60, 59 - int(step / 50) % 60,
                       50 + 10 * rand(), 2 + rand())
        if (step % 10 == 0)
            line = line sprintf("{\047loss\047: %.4f, \047grad_norm\047: %.4f, \047learning_rate\047: %.3e, \047epoch\047: %.2f}\n",
                                2 + rand(), 1 + rand(), 5e-5 * (1 - step / total), step / 10000)
        if (step % 50 == 0)
            line = line sprintf("2025-03-14 09:%02d:%02d,%03d - INFO - trainer.py:2212 - step %d: loss %.4f, lr %.3e, tokens/s %d\n",
                                int(step / 3000) % 60, int(step / 50) % 60, step % 1000, step,
                                2 + rand(), 5e-5, 50000 + int(2000 * rand()))
        if (step % 500 == 0)
            line = line "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:558: UserWarning: This DataLoader will create 8 worker processes in total. Our suggested max number of worker in current system is 2, which is smaller than what this DataLoader is going to create.\n  warnings.warn(_create_warning_msg(\n"
        if (step % 5000 == 0)
            line = line "WARNING: reduce --per_device_train_batch_size to avoid CUDA out of memory errors\n"
        printf "%s", line
        bytes += length(line)
    }
    printf "\n"
}' > "$log"
bytes=$(stat -c %s "$log")
lines=$(tr '\r' '\n' < "$log" | grep -c .)
cat "$log" > /dev/null # into the page cache

now() { date +%s.%N; }

# time_runs CMD...: BENCH_RUNS wall times, one a line
time_runs() {
  for _ in $(seq "$runs"); do
    local s e
    s=$(now)
    "$@" >/dev/null
    e=$(now)
    awk -v s="$s" -v e="$e" 'BEGIN { printf "%.4f\n", e - s }'
  done
}

# One trial of `cat $log`, which must end as a fit with its output read
# to the end (no OOM: the near misses must stay near misses).  autobatch's
# stderr goes to $AB_ERR (a file in $work unless a row says otherwise).
run_ab() { # binary [autobatch options...]
  local bin=$1 err=${AB_ERR:-$work/ab.err} rc=0
  shift
  (cd "$work" && "$bin" "$@" --preset env --batch 1:1 --steps 1000000000 --warmup 0 --no-cache \
    --no-probe --trial-timeout 10m --hang-timeout 10m --json "$work/r.json" -- cat "$log" \
    >/dev/null 2>"$err") || rc=$?
  if [ "$rc" != 0 ]; then
    echo "autobatch failed (exit $rc)" >&2
    if [ -f "$err" ]; then tail -20 "$err" >&2; fi
    exit 1
  fi
  grep -q '"outcome": *"fit"' "$work/r.json" || { echo "not a fit:" >&2; cat "$work/r.json" >&2; exit 1; }
}
# The output shown: to /dev/null, to a regular file, through a pipe.
run_shown_null() { AB_ERR=/dev/null run_ab "$@"; }
run_shown_file() { AB_ERR="$work/shown.err" run_ab "$@"; rm -f "$work/shown.err"; }
run_shown_pipe() {
  local bin=$1
  shift
  (cd "$work" && "$bin" "$@" --preset env --batch 1:1 --steps 1000000000 --warmup 0 --no-cache \
    --no-probe --trial-timeout 10m --hang-timeout 10m --json "$work/r.json" -- cat "$log" \
    2>&1 >/dev/null | cat >/dev/null)
  grep -q '"outcome": *"fit"' "$work/r.json" || { echo "not a fit:" >&2; cat "$work/r.json" >&2; exit 1; }
}

run_ab_unfiltered() {
  AB_BENCH_NO_PREFILTER=1 run_ab "$@"
}

declare -a table
row() { # label CMD...
  local label=$1 t best med
  shift
  t=$(time_runs "$@" | sort -n)
  best=$(echo "$t" | head -1)
  med=$(echo "$t" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
  table+=("$(awk -v l="$label" -v b="$bytes" -v best="$best" -v med="$med" 'BEGIN {
    printf "%-50s %8.0f %8.0f %8.3f\n", l, b / best / 1e6, b / med / 1e6, best }')")
  echo "${table[-1]}" >&2
}

cat_pipe() { cat "$log" | cat > /dev/null; }

header=$(printf '%-50s %8s %8s %8s' "reader" "best" "median" "best s")
echo "$header  (MB/s)" >&2
row "cat FILE > /dev/null" cat "$log" # (to /dev/null: time_runs)
row "cat FILE | cat > /dev/null" cat_pipe
row "autobatch --quiet" run_ab "$ab" --quiet
row "autobatch --quiet, no OOM prefilter" run_ab_unfiltered "$ab" --quiet
row "autobatch, output shown, to /dev/null" run_shown_null "$ab"
row "autobatch, output shown, to a file" run_shown_file "$ab"
row "autobatch, output shown, | cat > /dev/null" run_shown_pipe "$ab"
for other in AUTOBATCH BENCH_BASELINE; do
  bin=${!other:-}
  if [ -z "$bin" ]; then continue; fi
  row "autobatch --quiet (\$$other)" run_ab "$bin" --quiet
  row "autobatch, shown, to /dev/null (\$$other)" run_shown_null "$bin"
  row "autobatch, shown, to a file (\$$other)" run_shown_file "$bin"
done

mbps() { echo "${table[$1]}" | awk '{ print $(NF - 2) }'; } # best MB/s of row $1
ratio=$(awk -v a="$(mbps 2)" -v b="$(mbps 3)" 'BEGIN { printf "%.1f", a / b }')
verdict=$(awk -v a="$(mbps 2)" -v b="$(mbps 4)" 'BEGIN {
  printf "--quiet %s, output shown to /dev/null %s", (a >= 500 ? "met" : "MISSED"),
         (b >= 500 ? "met" : "MISSED") }')
report() {
  echo "log throughput: $(awk -v b="$bytes" 'BEGIN { printf "%.0f", b / 1e6 }') MB, $lines lines" \
    "(tqdm redraws, metric dicts, logging lines, warnings); best and median of $runs runs"
  echo
  echo "$header  (MB/s)"
  printf '%s\n' "${table[@]}"
  echo
  echo "the OOM prefilter: ${ratio}x the throughput without it (autobatch --quiet, best)"
  echo "target 500 MB/s (issue 12): $verdict"
}
report

if [ "$save" = 1 ]; then
  out=$root/bench/results/log-throughput.txt
  mkdir -p "$root/bench/results"
  {
    report
    echo
    echo "reproduce: BENCH_LOG_MB=$mb BENCH_RUNS=$runs bash bench/logthroughput.sh --save"
    if [ -n "${AUTOBATCH:-}" ]; then echo "\$AUTOBATCH: $AUTOBATCH"; fi
    if [ -n "${BENCH_BASELINE:-}" ]; then echo "\$BENCH_BASELINE: $BENCH_BASELINE"; fi
    echo "autobatch: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
      "$(git -C "$root" diff --quiet HEAD -- probes tuner 2>/dev/null || echo '(with uncommitted changes)')," \
      "built by this script (RelWithDebInfo, -DAB_BENCH_OOM_SWITCH)"
    echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)," \
      "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  } > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
fi
