#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# No open of a spool, cache or events file can hang: a FIFO in the
# webhook spool is skipped with a message (`autobatch notify` exits 1 at
# once, where it used to hang forever); --events on a FIFO nobody reads
# waits at most 10 s for a reader, then exits 2 before the first trial;
# a FIFO in the warm-start cache's place is ignored.  Each bounded at
# 10 s (20 s for the one that waits 10 s by design).
source "$(dirname "$0")/lib.sh"
tune() { "$AUTOBATCH" --quiet --batch 1:64 "$@" -- "$SIMTRAIN" --capacity 8G; }

# --- a FIFO in the webhook spool
spool="$XDG_STATE_HOME/autobatch/webhook-spool"
mkdir -p "$spool" && chmod 700 "$spool"
mkfifo "$spool/20260101T000000Z-x.json"
rc=0
timeout -k 1 10 "$AUTOBATCH" notify >"$WORK/n.out" 2>&1 || rc=$?
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "autobatch notify hung on a FIFO in the spool"
assert_eq 1 "$rc" "notify with a FIFO in the spool: exit status"
grep -q "not a spool file" "$WORK/n.out" || fail "notify did not say what it skipped: $(cat "$WORK/n.out")"
[ -p "$spool/20260101T000000Z-x.json" ] || fail "the FIFO in the spool was removed"
pass "autobatch notify skips a FIFO in the spool at once (exit 1)"

# --- --events on a FIFO nobody reads
mkfifo "$WORK/events"
rc=0
start=$(date +%s)
timeout -k 1 20 "$AUTOBATCH" --quiet --batch 1:64 --events "$WORK/events" -- "$SIMTRAIN" --capacity 8G \
  >"$WORK/e.out" 2>&1 || rc=$?
took=$(($(date +%s) - start))
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "--events on a FIFO with no reader hung"
assert_eq 2 "$rc" "--events FIFO without a reader: exit status"
grep -q "nothing opened it for reading in 10 s" "$WORK/e.out" || fail "no message: $(cat "$WORK/e.out")"
[ "$took" -ge 9 ] && [ "$took" -le 15 ] || fail "--events FIFO: gave up after ${took}s, not 10"
pass "--events on a FIFO nobody reads: exit 2 after ${took}s"

# --- a reader that comes within the 10 s gets every event
(sleep 3; cat "$WORK/events" >"$WORK/events.out") &
reader=$!
timeout -k 1 20 "$AUTOBATCH" --quiet --no-cache --batch 1:64 --events "$WORK/events" -- "$SIMTRAIN" --capacity 8G \
  >/dev/null 2>"$WORK/e2.err" || fail "--events FIFO with a late reader: exit $? $(tail -3 "$WORK/e2.err")"
wait "$reader"
assert_eq end "$(tail -1 "$WORK/events.out" | jq -r .event)" "the late reader's last event"
pass "--events on a FIFO whose reader comes 3 s late: every event, exit 0"

# --- a FIFO in the cache file's place
tune --json "$WORK/r.json" >/dev/null 2>"$WORK/c.err" || fail "cached run: exit $? $(tail -3 "$WORK/c.err")"
f=$(ls "$XDG_CACHE_HOME"/autobatch/*.json | head -1)
rm "$f" && mkfifo "$f"
rc=0
timeout -k 1 10 "$AUTOBATCH" --quiet --batch 1:64 -- "$SIMTRAIN" --capacity 8G >/dev/null 2>"$WORK/c2.err" || rc=$?
[ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "a FIFO in the cache's place hung the run"
assert_eq 0 "$rc" "run with a FIFO in the cache's place: exit status"
pass "a FIFO in the cache file's place is ignored"
