#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Results that cannot be written (a full disk) end the run with exit 7,
# "could not write the results", not 2 (bad input): a script can tell
# "make room and rerun" from "fix the command".  The old results file on
# the full disk stays byte-identical.  Simulated with /dev/full and with a
# small tmpfs of the test's own (as root; skipped where mount is refused).
source "$(dirname "$0")/lib.sh"
tune() { "$AUTOBATCH" --quiet --no-cache --batch 1:64 "$@" -- "$SIMTRAIN" --capacity 8G; }

rc=0
tune --json /dev/full >/dev/null 2>"$WORK/f.err" || rc=$?
assert_eq 7 "$rc" "--json /dev/full: exit status"
grep -q "could not write the results: .*No space left on device" "$WORK/f.err" \
  || fail "--json /dev/full: message: $(cat "$WORK/f.err")"
pass "--json /dev/full: exit 7, 'could not write the results'"

rc=0
tune --markdown /dev/full >/dev/null 2>"$WORK/m.err" || rc=$?
assert_eq 7 "$rc" "--markdown /dev/full: exit status"
pass "--markdown /dev/full: exit 7"

mkdir "$WORK/small"
if mount -t tmpfs -o size=256k tmpfs "$WORK/small" 2>/dev/null; then
  trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
  echo '{"old": true}' >"$WORK/small/r.json"
  cp "$WORK/small/r.json" "$WORK/r.orig"
  dd if=/dev/zero of="$WORK/small/fill" bs=4k 2>/dev/null || true
  rc=0
  tune --json "$WORK/small/r.json" >/dev/null 2>"$WORK/t.err" || rc=$?
  assert_eq 7 "$rc" "--json on a full tmpfs: exit status"
  grep -q "could not write the results" "$WORK/t.err" || fail "full tmpfs: message: $(cat "$WORK/t.err")"
  cmp -s "$WORK/r.orig" "$WORK/small/r.json" || fail "full tmpfs: the old results changed"
  assert_eq "fill r.json" "$(ls -A "$WORK/small" | tr '\n' ' ' | sed 's/ $//')" "full tmpfs: files left"
  pass "--json on a full tmpfs: exit 7, old results byte-identical, no temporary file left"
else
  echo "skip: cannot mount a tmpfs here; the full-disk case is covered by /dev/full only"
fi
