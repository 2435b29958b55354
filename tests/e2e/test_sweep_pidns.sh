#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The start-up sweep judges a scratch directory by its lock, not by a pid:
# a second run in another PID namespace (`unshare -p`, as a container
# sharing /tmp would be) that starts while a run is mid-trial must leave
# the live run's scratch directory and trial copy alone, and the live run
# must finish with every step measured.  A dead run's directory (lock not
# held) and its trial copy are swept, and the sweeping run says so.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root for unshare -p"
unshare -p -f --mount-proc true 2>/dev/null || skip "no PID namespaces here"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
cp "$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json" "$WORK/p.json"

# The live run: one size, 10 measured steps of about 0.3 s each.
"$AUTOBATCH" --preset parler-tts --batch 4:4 --steps 10 --warmup 0 --no-cache \
  --json "$WORK/live.json" -- "$SIMTRAIN" "$WORK/p.json" --sample-time 20ms \
  --bar-desc "Train steps ... " >/dev/null 2>"$WORK/live.err" &
live=$!
for _ in $(seq 1 200); do
  grep -q "Train steps" "$WORK/live.err" 2>/dev/null && break
  sleep 0.05
done
grep -q "Train steps" "$WORK/live.err" || fail "the live run's trial never started: $(cat "$WORK/live.err")"
livedir=$(ls -d "$TMPDIR"/autobatch-*)
copy=$(ls "$WORK" | grep "^p\.autobatch-trial-" || true)
[ -n "$copy" ] || fail "no trial copy of the live run"

# A dead run's leftovers, planted once the live run has swept: an owner
# file nobody holds a lock on, and its trial copy beside the config.
dead=$(sh -c 'echo $$')
mkdir -m 700 "$TMPDIR/autobatch-Dead01"
echo "$dead 1" >"$TMPDIR/autobatch-Dead01/owner"
: >"$WORK/p.autobatch-trial-$dead-3-AbCdEfGhIjKl.json"

# The sweeper, in a PID namespace of its own: the live run's pid is no
# process it can see.
unshare -p -f --mount-proc "$AUTOBATCH" --preset parler-tts --batch 1:1 --steps 1 --warmup 0 \
  --no-cache --json "$WORK/sweep.json" -- "$SIMTRAIN" "$WORK/p.json" \
  --bar-desc "Train steps ... " >/dev/null 2>"$WORK/sweep.err" \
  || fail "sweeping run: exit $? $(tail -3 "$WORK/sweep.err")"
[ -d "$livedir" ] || fail "the sweep removed the live run's scratch directory"
[ -e "$WORK/$copy" ] || fail "the sweep removed the live run's trial copy"
[ ! -e "$TMPDIR/autobatch-Dead01" ] || fail "the dead run's scratch directory was kept"
[ ! -e "$WORK/p.autobatch-trial-$dead-3-AbCdEfGhIjKl.json" ] || fail "the dead run's trial copy was kept"
grep -q "removed what an earlier, killed run left: 1 scratch directory, 1 trial copy.*holding its lock" \
  "$WORK/sweep.err" || fail "the sweep did not say what it removed: $(grep -i removed "$WORK/sweep.err" || cat "$WORK/sweep.err")"
pass "a sweep from another PID namespace kept the live run's files and removed the dead run's"

rc=0
wait "$live" || rc=$?
assert_eq 0 "$rc" "the live run's exit status ($(tail -3 "$WORK/live.err"))"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome != "fit" or .steps_measured < 10)] | length' "$WORK/live.json")" \
  "trials of the live run without all 10 steps measured"
[ ! -e "$livedir" ] || fail "the live run left its scratch directory"
assert_no_leftovers
pass "the live run finished with every step measured"
