#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a new user sees at 80 columns (issue 28), and that --quiet is never
# louder than the default.  On a terminal: one line per finished trial
# ("#4  53x1 ckpt off  fit  0.2 s  3017.5 samples/s"), an OOM's evidence on
# that line, no line of autobatch's wider than the terminal, the trainer's
# traceback only with --show-output or -v; off a terminal the lines that
# scripts read, one evidence line per OOM, the trainer's output passed
# through by default and not under --quiet.  A trial --budget cut short is
# "budget", not "timeout".  The final block names each cell's largest fit
# and smallest failure, where the results went and the next command.
source "$(dirname "$0")/lib.sh"

PTY_COLS=80   # on_pty (lib.sh) runs the commands on a terminal this wide

# screen_lines FILE: every piece of text written between two line starts
# (a "\r" or a "\n"), colour and cursor codes taken out, one per line: what
# the terminal had to hold on one row.
screen_lines() {
  python3 -c '
import re, sys
data = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
data = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", data)
for seg in re.split(r"[\r\n]", data):
    if seg:
        print(seg)' "$1"
}

# wider SCREEN: the lines over 80 columns, but for the two lines that
# main.c's write-back callback prints as they are ("run with:", "trials
# also had:"), outside the terminal layer.
wider() {
  python3 -c '
import sys
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    if len(line) > 80:
        print(len(line), line)' "$1"
}

trainer=("$SIMTRAIN" --per_device_train_batch_size 8 --capacity 4G --model-mem 1G --report)
outcome='(fit|oom|crash|timeout|budget|hang|interrupted|spawn_failed|no_steps|mismatch)'

# --- the default on a terminal, 80 columns
rc=0
on_pty "$WORK/t.raw" "$AUTOBATCH" --no-cache --preset hf --batch 1:16 --budget 10m \
  --json "$WORK/t.json" -- "${trainer[@]}" --step-overhead 200ms || rc=$?
assert_eq 0 "$rc" "terminal: exit status"
screen_lines "$WORK/t.raw" >"$WORK/t.screen"
w=$(wider "$WORK/t.screen")
[ -z "$w" ] || fail "terminal: lines wider than 80 columns:
$w"
# one line per finished trial, the confirmation run included
ran=$(jq '(.trials | length) + (.confirm // [] | length)' "$WORK/t.json")
lines=$(grep -Ec "^#[0-9]+ +[0-9]+x1 ckpt off  $outcome " "$WORK/t.screen" || true)
assert_eq "$ran" "$lines" "terminal: lines for finished trials"
for id in $(jq -r '.trials[].id' "$WORK/t.json"); do
  assert_eq 1 "$(grep -Ec "^#$id +[0-9]+x1 " "$WORK/t.screen" || true)" "terminal: lines for trial $id"
done
ooms=$(jq '[.trials[] | select(.outcome == "oom")] | length' "$WORK/t.json")
[ "$ooms" -ge 1 ] || fail "terminal: no trial ran out of memory: nothing shown of an OOM"
grep -Eq "^#[0-9]+ +[0-9]+x1 ckpt off  oom +[0-9.]+ s  tried [0-9.]+ [GM]iB, [0-9.]+ [GM]iB free$" \
  "$WORK/t.screen" || fail "terminal: an OOM's line has no evidence: $(grep ' oom ' "$WORK/t.screen" | head -2)"
grep -Eq "^#[0-9]+ +[0-9]+x1 ckpt off  fit +[0-9.]+ s +[0-9.]+ samples/s$" "$WORK/t.screen" \
  || fail "terminal: a fit's line has no speed: $(grep ' fit ' "$WORK/t.screen" | head -2)"
if grep -q "Traceback\|File \"\|last lines of its output" "$WORK/t.screen"; then
  fail "terminal: the trainer's traceback was shown: $(grep -m3 'Traceback\|File "' "$WORK/t.screen")"
fi
if grep -q "'loss'" "$WORK/t.screen"; then fail "terminal: the command's output was shown"; fi
# the live status: starting, then steps, the time a trial takes, whole fields
grep -Eq "^autobatch: trial 1  [0-9]+x1 ckpt off  starting  [0-9]+s$" "$WORK/t.screen" \
  || fail "terminal: no starting phase: $(grep -m3 '^autobatch: trial' "$WORK/t.screen")"
grep -Eq "^autobatch: trial [0-9]+  [0-9]+x1 ckpt off  step [0-9]+/7  [0-9.]+ it/s  [0-9]+s of ~[0-9]+s$" \
  "$WORK/t.screen" || fail "terminal: no step, rate and trial estimate: $(grep -m5 'step [0-9]' "$WORK/t.screen")"
grep -Eq "^  elapsed [0-9]+s  bracket: fits [0-9]+, fails [0-9]+(: ~[0-9]+ trials?, ~[0-9]+s)?  budget: ~[0-9m]+s left$" \
  "$WORK/t.screen" || fail "terminal: no elapsed / bracket / budget line: $(grep -m3 elapsed "$WORK/t.screen")"
# the final block: the choice, the largest fit and smallest failure, where
# the results went, the next command
fit=$(jq '.max_fit[0].micro_batch' "$WORK/t.json")
nofit=$(jq '.max_fit[0].smallest_fail' "$WORK/t.json")
best=$(jq '.best.micro_batch' "$WORK/t.json")
grep -q "^autobatch: best: micro_batch=$best grad_accum=1 checkpointing=off" "$WORK/t.screen" \
  || fail "terminal: no best line"
tr '\n' ' ' <"$WORK/t.screen" | sed 's/  */ /g' \
  | grep -q "autobatch: largest fit: micro_batch=$fit grad_accum=1 checkpointing=off; micro_batch=$nofit did not fit" \
  || fail "terminal: the largest fit ($fit, $nofit failed) is not named: $(grep -A1 'largest' "$WORK/t.screen")"
grep -qF "autobatch: results: $WORK/t.json" "$WORK/t.screen" || fail "terminal: the results' path is not said"
# (autobatch named as it was run, so the command can be pasted as it is)
tr '\n' ' ' <"$WORK/t.screen" | sed 's/  */ /g' | grep -qF "autobatch: next: $AUTOBATCH report $WORK/t.json" \
  || fail "terminal: no next command: $(tail -5 "$WORK/t.screen")"
pass "terminal at 80 columns: one line per trial, OOM evidence on it, no traceback, final block"

# --- --quiet on a terminal: no louder
rc=0
on_pty "$WORK/q.raw" "$AUTOBATCH" --no-cache --quiet --preset hf --batch 1:16 -- "${trainer[@]}" || rc=$?
assert_eq 0 "$rc" "terminal --quiet: exit status"
screen_lines "$WORK/q.raw" >"$WORK/q.screen"
w=$(wider "$WORK/q.screen")
[ -z "$w" ] || fail "terminal --quiet: lines wider than 80 columns:
$w"
if grep -q "Traceback\|File \"" "$WORK/q.screen"; then fail "terminal --quiet: the traceback was shown"; fi
grep -Eq "^#[0-9]+ +[0-9]+x1 ckpt off  oom " "$WORK/q.screen" || fail "terminal --quiet: no OOM line"
pass "terminal --quiet: no traceback"

# --- --show-output and -v: the traceback, asked for
rc=0
on_pty "$WORK/s.raw" "$AUTOBATCH" --no-cache --show-output --preset hf --batch 1:16 -- "${trainer[@]}" || rc=$?
assert_eq 0 "$rc" "--show-output: exit status"
grep -q "Traceback (most recent call last)" "$WORK/s.raw" || fail "--show-output: no traceback"
rc=0
on_pty "$WORK/v.raw" "$AUTOBATCH" --no-cache -v --preset hf --batch 1:16 -- "${trainer[@]}" || rc=$?
assert_eq 0 "$rc" "-v: exit status"
screen_lines "$WORK/v.raw" >"$WORK/v.screen"
grep -q "^  last lines of its output:" "$WORK/v.screen" || fail "-v: an OOM's last lines are not shown"
grep -q "^    | torch.OutOfMemoryError: CUDA out of memory" "$WORK/v.screen" || fail "-v: no OOM line in the tail"
pass "--show-output and -v show the traceback"

# --- a crash on a terminal: its last lines in full, folded within the width
rc=0
on_pty "$WORK/c.raw" "$AUTOBATCH" --no-cache --preset hf --batch 4:4 -- "${trainer[@]}" \
  --crash-at-step 3 || rc=$?
assert_eq 4 "$rc" "crash: exit status"
screen_lines "$WORK/c.raw" >"$WORK/c.screen"
w=$(wider "$WORK/c.screen")
[ -z "$w" ] || fail "crash: lines wider than 80 columns:
$w"
grep -Eq "^#1 +4x1 ckpt off  crash +[0-9.]+ s  Expected all tensors" "$WORK/c.screen" \
  || fail "crash: no line with its evidence: $(grep '^#' "$WORK/c.screen")"
# the folded lines put back together: the error whole
sed -e ':a' -e '$!N' -e 's/\n  + //' -e 'ta' -e 'P' -e 'D' "$WORK/c.screen" \
  | grep -qx "  | RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!" \
  || fail "crash: the error is not shown whole: $(grep -A3 RuntimeError "$WORK/c.screen")"
pass "a crash on a terminal: its last lines whole, folded at 80 columns"

# --- off a terminal: the lines scripts read; the default passes the
# trainer's output through, --quiet does not and adds nothing for it
"$AUTOBATCH" --no-cache --preset hf --batch 1:16 --json "$WORK/p.json" -- "${trainer[@]}" \
  >"$WORK/p.out" 2>"$WORK/p.err"
"$AUTOBATCH" --no-cache --quiet --preset hf --batch 1:16 --json "$WORK/pq.json" -- "${trainer[@]}" \
  >"$WORK/pq.out" 2>"$WORK/pq.err"
for m in p pq; do
  ooms=$(jq '[.trials[] | select(.outcome == "oom")] | length' "$WORK/$m.json")
  assert_eq "$ooms" "$(grep -c "^autobatch:   evidence: " "$WORK/$m.err" || true)" "log $m: evidence lines"
  assert_eq "$ooms" "$(grep -Ec "^autobatch: trial [0-9]+: micro_batch=[0-9]+ grad_accum=1 checkpointing=off -> oom \(" "$WORK/$m.err" || true)" \
    "log $m: OOM outcome lines"
  if grep -q "last lines of its output\|^    | " "$WORK/$m.err"; then fail "log $m: an OOM's tail was printed"; fi
  if grep -q $'\033' "$WORK/$m.err" "$WORK/$m.out"; then fail "log $m: terminal codes in a log"; fi
  grep -q "^autobatch: largest fit: micro_batch=$(jq '.max_fit[0].micro_batch' "$WORK/$m.json") grad_accum=1 checkpointing=off; micro_batch=$(jq '.max_fit[0].smallest_fail' "$WORK/$m.json") did not fit$" \
    "$WORK/$m.out" || fail "log $m: no largest fit: $(cat "$WORK/$m.out")"
  grep -qx "autobatch: results: $WORK/$m.json" "$WORK/$m.out" || fail "log $m: no results path"
done
grep -q "Traceback (most recent call last)" "$WORK/p.err" || fail "log: the trainer's output is not passed through"
if grep -q "Traceback\|'loss'" "$WORK/pq.err"; then fail "log --quiet: the trainer's output was shown"; fi
dq=$(wc -l <"$WORK/pq.err") dd=$(wc -l <"$WORK/p.err")
[ "$dq" -lt "$dd" ] || fail "log: --quiet ($dq lines) is not quieter than the default ($dd)"
[ "$(grep -c . "$WORK/pq.err")" -le "$(grep -c '^autobatch' "$WORK/p.err")" ] \
  || fail "log: --quiet says more than the default's own lines"
pass "off a terminal: one evidence line per OOM, --quiet quieter than the default"

# --- --json -: the final block goes to stderr, stdout stays JSON
"$AUTOBATCH" --no-cache --quiet --preset hf --batch 4:4 --json - -- "${trainer[@]}" \
  >"$WORK/j.out" 2>"$WORK/j.err"
jq -e .best "$WORK/j.out" >/dev/null || fail "--json -: stdout is not the results"
grep -q "^autobatch: results: on stdout" "$WORK/j.err" || fail "--json -: where the results went"
pass "--json -: stdout holds the results only"

# --- a trial --budget cut short is "budget", not "timeout"
rc=0
"$AUTOBATCH" --no-cache --quiet --budget 2s --preset hf --batch 2:2 --json "$WORK/b.json" \
  -- "${trainer[@]}" --step-overhead 1s >"$WORK/b.out" 2>"$WORK/b.err" || rc=$?
assert_eq 5 "$rc" "budget: exit status"
grep -q "^autobatch: trial 1: micro_batch=2 grad_accum=1 checkpointing=off -> budget (" "$WORK/b.err" \
  || fail "budget: the cut trial is not labelled budget: $(cat "$WORK/b.err")"
if grep -q "timeout" "$WORK/b.err" "$WORK/b.out"; then fail "budget: called a timeout: $(grep timeout "$WORK/b.err" "$WORK/b.out")"; fi
rc=0
on_pty "$WORK/bt.raw" "$AUTOBATCH" --no-cache --budget 2s --preset hf --batch 2:2 \
  -- "${trainer[@]}" --step-overhead 1s || rc=$?
assert_eq 5 "$rc" "budget on a terminal: exit status"
screen_lines "$WORK/bt.raw" >"$WORK/bt.screen"
grep -Eq "^#1 +2x1 ckpt off  budget +[0-9.]+ s$" "$WORK/bt.screen" \
  || fail "budget on a terminal: $(grep '^#' "$WORK/bt.screen")"
pass "a trial cut by --budget is labelled budget"
