#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A trainer's bytes never reach the terminal raw inside autobatch's own
# lines: an OOM line and a crash's last lines carrying an OSC 52 clipboard
# write, a window-title escape and clear-screen are shown with their
# control characters as \xNN (with --quiet every line on stderr is
# autobatch's own, so none may hold ESC, BEL or another C0 control).
source "$(dirname "$0")/lib.sh"
cat >"$WORK/hostile.sh" <<SH
#!/usr/bin/env bash
# Fits up to micro-batch 4 (simtrain), larger is "out of memory"; with
# HOSTILE_CRASH every size crashes.  Both say so through escapes.
evil=\$'\\e]52;c;cHduZWQ=\\a\\e]0;pwned\\a\\e[2J\\e[H'
if [ -n "\${HOSTILE_CRASH:-}" ]; then
  echo "Traceback (most recent call last):" >&2
  echo "\${evil}RuntimeError: boom\${evil}" >&2
  exit 1
fi
if [ "\$AUTOBATCH_MICRO_BATCH" -gt 4 ]; then
  echo "\${evil}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\${evil}" >&2
  exit 1
fi
exec "$SIMTRAIN" "\$@"
SH
chmod +x "$WORK/hostile.sh"

# Raw control bytes other than the line break in FILE: their count.
raw_controls() { LC_ALL=C tr -d '\n' <"$1" | LC_ALL=C tr -cd '\000-\037\177' | wc -c; }

rc=0
"$AUTOBATCH" --quiet --batch 1:16 --steps 2 --warmup 0 --no-cache -- "$WORK/hostile.sh" \
  >"$WORK/oom.out" 2>"$WORK/oom.err" || rc=$?
assert_eq 0 "$rc" "oom: exit status ($(tail -3 "$WORK/oom.err"))"
grep -q 'out of memory' "$WORK/oom.err" || fail "oom: the OOM line is not shown: $(cat -v "$WORK/oom.err")"
grep -qF '\x1b]52;c;cHduZWQ=\x07' "$WORK/oom.err" || fail "oom: the escape is not shown as \\xNN: $(cat -v "$WORK/oom.err")"
assert_eq 0 "$(raw_controls "$WORK/oom.err")" "oom: raw control characters in autobatch's lines ($(cat -v "$WORK/oom.err" | grep '\^' | head -3))"
pass "an OOM line's escapes are shown as \\xNN"

rc=0
HOSTILE_CRASH=1 "$AUTOBATCH" --quiet --batch 1:16 --steps 2 --warmup 0 --no-cache -- "$WORK/hostile.sh" \
  >"$WORK/crash.out" 2>"$WORK/crash.err" || rc=$?
assert_eq 4 "$rc" "crash: exit status ($(tail -3 "$WORK/crash.err"))"
grep -q 'RuntimeError: boom' "$WORK/crash.err" || fail "crash: the tail is not shown: $(cat -v "$WORK/crash.err")"
grep -qF '\x1b[2J' "$WORK/crash.err" || fail "crash: clear-screen not shown as \\xNN: $(cat -v "$WORK/crash.err")"
assert_eq 0 "$(raw_controls "$WORK/crash.err")" "crash: raw control characters in autobatch's lines ($(cat -v "$WORK/crash.err" | grep '\^' | head -3))"
assert_no_leftovers
pass "a crash's last lines' escapes are shown as \\xNN"
