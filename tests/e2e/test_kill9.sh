#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# kill -9 of autobatch during a 2-rank trial whose ranks ignore SIGTERM and
# whose grandchild escaped with setsid(): the kernel takes the whole trial
# down (the trial runs in a PID namespace whose init dies with autobatch),
# checked through /proc.  The next run removes the scratch directory and
# the trial copy of the config that the killed run left, and says so.
source "$(dirname "$0")/lib.sh"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
C="$AB_SOURCE_DIR/tests/corpus"
cp "$C/parler-tts/starting_point_v1.json" "$WORK/p.json"

"$AUTOBATCH" --preset parler-tts --batch 1:64 --kill-grace 5s --json "$WORK/k.json" -- \
  "$SIMTRAIN" "$WORK/p.json" --nproc 2 --ignore-sigterm --escape "$WORK/esc.pid" \
  --sample-time 50ms --bar-desc "Train steps ... " >/dev/null 2>"$WORK/k.err" &
ab=$!
for _ in $(seq 1 200); do
  grep -q "Train steps" "$WORK/k.err" 2>/dev/null && [ -s "$WORK/esc.pid" ] && break
  sleep 0.05
done
grep -q "Train steps" "$WORK/k.err" || fail "the trial never started: $(cat "$WORK/k.err")"
[ -n "$(marked_procs)" ] || fail "no trial processes to kill"
ls "$WORK" | grep -q "p.autobatch-trial-" || fail "no trial copy of the config during the trial"
start=$(date +%s.%N)
kill -9 "$ab"
wait "$ab" 2>/dev/null || true
# The kernel's teardown is asynchronous but quick: give it up to 3 s.
for _ in $(seq 1 60); do [ -z "$(marked_procs)" ] && break; sleep 0.05; done
end=$(date +%s.%N)
left=$(marked_procs)
if [ -n "$left" ]; then
  grep -q "process-tree" <(ls "$TMPDIR"/autobatch-*/ 2>/dev/null; echo) || true
  ps -o pid,ppid,stat,cmd -p "${left// /,}" >&2 || true
  fail "processes left after kill -9 of autobatch:$left"
fi
gone=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
pass "kill -9 of autobatch: every trial process gone within ${gone}s"

# What the killed run left: its scratch directory and the config copy.
[ -n "$(ls -d "$TMPDIR"/autobatch-* 2>/dev/null)" ] || fail "the killed run left no scratch directory?"
"$AUTOBATCH" --preset parler-tts --batch 1:2 --steps 1 --warmup 0 --json "$WORK/n.json" -- \
  "$SIMTRAIN" "$WORK/p.json" --bar-desc "Train steps ... " >/dev/null 2>"$WORK/n.err" \
  || fail "next run: exit $? $(tail -3 "$WORK/n.err")"
grep -q "removed what an earlier, killed run left: 1 scratch directory, 1 trial copy" "$WORK/n.err" \
  || fail "next run did not sweep: $(grep removed "$WORK/n.err")"
assert_eq "" "$(ls -A "$TMPDIR")" "scratch directories after the next run"
[ -z "$(ls "$WORK" | grep autobatch-trial || true)" ] || fail "trial copy left: $(ls "$WORK")"
cmp -s "$WORK/p.json" "$C/parler-tts/starting_point_v1.json" || fail "the config changed"
assert_eq pid-namespace "$(jqr '.teardown' "$WORK/n.json")" "teardown mechanism"
assert_no_leftovers
pass "the next run swept the killed run's scratch directory and config copy"
