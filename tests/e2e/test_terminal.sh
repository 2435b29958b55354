#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a user sees (issue 14, item 3).  On a terminal (a pty from
# util-linux's `script`, else Python's pty module) the command's output is
# hidden behind a live status (trial, candidate with every knob, step,
# elapsed, --budget, the bracket, the fastest so far) unless --show-output;
# off a terminal it is passed through as before, with plain lines.  A
# failed trial is one line with its evidence (test_terminal_lines has the
# rest of issue 28's terminal); the OOM evidence in a log is cut at a word
# boundary; outcome lines carry the
# checkpointing knob; the summary says how the choice beat its runner-up,
# what --headroom excluded, and warns when the effective batch changed.
source "$(dirname "$0")/lib.sh"

PTY_COLS=100  # on_pty (lib.sh) runs the commands on a terminal this wide

trainer=("$SIMTRAIN" --per_device_train_batch_size 8 --capacity 4G --model-mem 1G --report)

# --- on a terminal, by default: a live status, the command's output hidden
rc=0
on_pty "$WORK/t.out" "$AUTOBATCH" --preset hf --batch 1:16 --budget 10m --json "$WORK/t.json" \
  -- "${trainer[@]}" --step-overhead 150ms || rc=$?
assert_eq 0 "$rc" "terminal: exit status"
grep -q "autobatch.*: trial 1  [0-9]*x1 ckpt off  starting" "$WORK/t.out" \
  || fail "terminal: no live status line: $(head -c 600 "$WORK/t.out")"
grep -q "autobatch.*: trial [0-9]*  [0-9]*x1 ckpt off  step [0-9]*/7" "$WORK/t.out" \
  || fail "terminal: no step in the live status"
grep -Eq "elapsed [0-9]+s  bracket: nothing tried yet  budget: ~(10m00|9m5[0-9])s left" \
  "$WORK/t.out" || fail "terminal: no elapsed time / bracket / budget"
grep -q "bracket: fits [0-9]*, fails [0-9]*" "$WORK/t.out" || fail "terminal: the bracket never narrowed"
grep -q "bracket: fits [0-9]*, fails [0-9]*: ~[0-9]* trial" "$WORK/t.out" \
  || fail "terminal: no estimate of the trials left to the boundary"
grep -q "fastest so far: [0-9]*x1 ckpt off  [0-9.]* samples/s" \
  "$WORK/t.out" || fail "terminal: no fastest-so-far line"
grep -q "it/s" "$WORK/t.out" || fail "terminal: no rate"
if grep -q "'loss'" "$WORK/t.out"; then fail "terminal: the command's output was shown"; fi
grep -Eq "#1 +[0-9]+x1 ckpt off  .*(fit|oom)" "$WORK/t.out" \
  || fail "terminal: no outcome line with the checkpointing knob"
# an OOM's output was hidden: one line for it, its evidence on that line,
# not the trainer's last lines (those only with -v: test_terminal_lines)
if grep -q "last lines of its output:" "$WORK/t.out"; then fail "terminal: an OOM's traceback was shown"; fi
grep -Eq "ckpt off  .*oom.* s  tried [0-9.]+ GiB, [0-9.]+ GiB free" "$WORK/t.out" \
  || fail "terminal: the OOM's evidence is not on its line"
pass "terminal: live status, output hidden, an OOM in one line"

# --- --show-output: the command's output too
rc=0
on_pty "$WORK/s.out" "$AUTOBATCH" --preset hf --batch 4:4 --show-output -- "${trainer[@]}" || rc=$?
assert_eq 0 "$rc" "--show-output: exit status"
grep -q "'loss'" "$WORK/s.out" || fail "--show-output: the command's output is missing"
grep -Eq "#1 +4x1 ckpt off  .*fit" "$WORK/s.out" || fail "--show-output: no outcome line"
pass "--show-output on a terminal"

# --- off a terminal: passed through as before, plain lines, the OOM
# evidence cut at a word boundary
"$AUTOBATCH" --preset hf --batch 1:16 --json "$WORK/p.json" -- "${trainer[@]}" \
  >"$WORK/p.out" 2>"$WORK/p.err"
grep -q "'loss'" "$WORK/p.err" || fail "log: the command's output is not passed through"
grep -q "^autobatch: trial 1: micro_batch=[0-9]* grad_accum=1 checkpointing=off$" "$WORK/p.err" \
  || fail "log: no plain start line"
if grep -q $'\033\[K' "$WORK/p.err"; then fail "log: terminal codes in a log"; fi
if grep -q "last lines of its output" "$WORK/p.err"; then fail "log: the shown output was repeated"; fi
ev=$(grep -m1 "^autobatch:   evidence: " "$WORK/p.err" | sed 's/^autobatch:   evidence: //')
full=$(jqr '[.trials[] | select(.outcome == "oom")][0].evidence' "$WORK/p.json")
case "$ev" in *" ...") ;; *) fail "log: long evidence not marked as cut: $ev" ;; esac
kept=${ev% ...}
[ "${full:0:${#kept}}" = "$kept" ] || fail "log: evidence is not the OOM line's start"
[ "${full:${#kept}:1}" = " " ] || fail "log: evidence cut mid-word: '$kept' | '${full:${#kept}:10}'"
# the summary: the margin over the runner-up, the changed effective batch
grep -Eq "^autobatch: ([0-9]+\.[0-9]{2} times faster \(\+- [0-9.]+%\) than|within noise of|within 1% of) the runner-up micro_batch=[0-9]+ grad_accum=1 checkpointing=off \([0-9.]+ samples/s\)" \
  "$WORK/p.out" || fail "summary: no runner-up comparison: $(cat "$WORK/p.out")"
best=$(jqr '.best.micro_batch' "$WORK/p.json")
if [ "$best" != 8 ]; then
  grep -q "warning: the effective batch changes from 8 (micro_batch=8 x grad_accum=1 x world size 1) to $best " \
    "$WORK/p.out" || fail "summary: no warning about the effective batch: $(cat "$WORK/p.out")"
fi
pass "log: output passed through, plain lines, evidence cut at a word, summary"

# --- --quiet in a log: no louder than the default: an OOM's evidence in
# one line, not its last lines; --headroom's exclusions
"$AUTOBATCH" --preset hf --batch 1:32 --quiet --headroom 30 --json "$WORK/q.json" \
  -- "${trainer[@]}" --capacity 8G >"$WORK/q.out" 2>"$WORK/q.err"
if grep -q "'loss'" "$WORK/q.err"; then fail "--quiet: the command's output was shown"; fi
if grep -q "^    | " "$WORK/q.err"; then fail "--quiet: a failure's last lines were printed"; fi
grep -q "^autobatch:   evidence: torch.OutOfMemoryError" "$WORK/q.err" || fail "--quiet: an OOM's evidence is missing"
grep -Eq "^autobatch: --headroom 30% excluded [0-9]+ fitting configurations?, which use more than 5\.6 of the device's 8\.0 GiB; the fastest: micro_batch=[0-9]+" \
  "$WORK/q.out" || fail "--headroom: exclusions not said: $(cat "$WORK/q.out")"
pass "--quiet: an OOM's evidence in one line; --headroom's exclusions said"

# --- the knob's own value unknown (env preset): no effective-batch warning
"$AUTOBATCH" --preset env --batch 1:16 --quiet -- "$SIMTRAIN" --knobs-from-env --capacity 4G \
  --model-mem 1G >"$WORK/e.out" 2>"$WORK/e.err"
if grep -q "effective batch" "$WORK/e.out"; then fail "env: a warning without the command's own batch"; fi
assert_refused "--quiet with --show-output" "choose one" "$WORK/none.log" --quiet --show-output \
  -- "$SIMTRAIN"
pass "no warning without the command's batch; --quiet --show-output refused"
