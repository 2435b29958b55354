#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Output paths that exist and are not regular files are never replaced: a
# character device and a FIFO with a reader are written through,
# /dev/stdout works through a pipe, a FIFO without a reader is refused at
# once, and a socket, block device or directory is refused before the
# first trial (exit 2, one line).  Device nodes are private ones made in
# the test's directory, never the system's.
source "$(dirname "$0")/lib.sh"

tune() { "$AUTOBATCH" --quiet --no-cache --batch 1:8 "$@" -- "$SIMTRAIN" --capacity 8G; }
no_temps() { [ -z "$(ls -A "$WORK" | grep autobatch || true)" ] || fail "$1: temporary files left: $(ls -A "$WORK")"; }

tune --json "$WORK/r.json" >/dev/null 2>&1 || fail "a plain run: exit $?"

# --- a character device (what /dev/null is: 1,3) stays one
if mknod "$WORK/null" c 1 3 2>/dev/null; then
  tune --json "$WORK/null" --markdown "$WORK/null" >"$WORK/c.out" 2>&1 || fail "char device: exit $? $(tail -3 "$WORK/c.out")"
  [ -c "$WORK/null" ] || fail "char device: replaced by $(stat -c %F "$WORK/null")"
  "$AUTOBATCH" report "$WORK/r.json" -o "$WORK/null" || fail "report -o char device: exit $?"
  [ -c "$WORK/null" ] || fail "report -o: char device replaced by $(stat -c %F "$WORK/null")"
  no_temps "char device"
  pass "--json, --markdown and report -o to a character device: written through, still a device"
else
  echo "skip: mknod is not permitted here; character device not tested"
fi

# --- a FIFO with a reader gets the JSON, and stays a FIFO
mkfifo "$WORK/fifo"
cat "$WORK/fifo" >"$WORK/fifo.out" &
reader=$!
tune --json "$WORK/fifo" >"$WORK/f.out" 2>&1 || fail "FIFO: exit $? $(tail -3 "$WORK/f.out")"
for _ in $(seq 1 100); do kill -0 "$reader" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$reader" 2>/dev/null; then
  kill "$reader"
  fail "FIFO: its reader never got the results ($(stat -c %F "$WORK/fifo"))"
fi
wait "$reader" || true
[ -p "$WORK/fifo" ] || fail "FIFO: replaced by $(stat -c %F "$WORK/fifo")"
jq -e '.best.micro_batch > 0' "$WORK/fifo.out" >/dev/null || fail "FIFO: the reader got no results: $(head -c 200 "$WORK/fifo.out")"
no_temps "FIFO"
pass "--json to a FIFO with a reader: the reader got the results"

# --- a FIFO nobody reads: refused at once, not a hang
set +e
timeout 20 "$AUTOBATCH" report "$WORK/r.json" -o "$WORK/fifo" 2>"$WORK/nr.err"
rc=$?
set -e
assert_eq 2 "$rc" "FIFO without a reader: exit status"
grep -q "nothing reads it" "$WORK/nr.err" || fail "FIFO without a reader: $(cat "$WORK/nr.err")"
[ -p "$WORK/fifo" ] || fail "FIFO without a reader: replaced"
no_temps "FIFO without a reader"
pass "report -o to a FIFO without a reader: $(cat "$WORK/nr.err")"

# --- /dev/stdout into a pipe
best=$(tune --json /dev/stdout 2>"$WORK/so.err" | jq -r '.best.micro_batch') || fail "--json /dev/stdout: exit $? $(tail -3 "$WORK/so.err")"
[ "$best" -gt 0 ] 2>/dev/null || fail "--json /dev/stdout: no results on the pipe"
"$AUTOBATCH" report "$WORK/r.json" -o /dev/stdout | grep -q "micro-batch" || fail "report -o /dev/stdout"
pass "--json /dev/stdout and report -o /dev/stdout through a pipe"

# --- refused before the first trial: a socket, a block device, a directory
refuse() { # option path what
  set +e
  "$AUTOBATCH" --no-cache --batch 1:8 "$1" "$2" -- "$SIMTRAIN" --capacity 8G >"$WORK/x.out" 2>"$WORK/x.err"
  local rc=$?
  set -e
  assert_eq 2 "$rc" "$1 $3: exit status"
  assert_eq 1 "$(wc -l <"$WORK/x.err")" "$1 $3: lines of error ($(cat "$WORK/x.err"))"
  grep -q "it is $3" "$WORK/x.err" || fail "$1 $3: $(cat "$WORK/x.err")"
  ! grep -q "trial 1" "$WORK/x.out" "$WORK/x.err" || fail "$1 $3: a trial ran"
  pass "$1 $3: refused before the first trial: $(cat "$WORK/x.err")"
}
"${AB_PYTHON:-python3}" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$WORK/sock"
refuse --json "$WORK/sock" "a socket"
[ -S "$WORK/sock" ] || fail "the socket was replaced"
set +e
"$AUTOBATCH" report "$WORK/r.json" -o "$WORK/sock" 2>"$WORK/rs.err"
rc=$?
set -e
assert_eq 2 "$rc" "report -o socket: exit status"
[ -S "$WORK/sock" ] || fail "report -o: the socket was replaced"
if mknod "$WORK/blk" b 7 0 2>/dev/null; then
  refuse --junit "$WORK/blk" "a block device"
  [ -b "$WORK/blk" ] || fail "the block device was replaced"
fi
mkdir "$WORK/dir"
refuse --markdown "$WORK/dir" "a directory"
no_temps "refusals"
assert_no_leftovers
