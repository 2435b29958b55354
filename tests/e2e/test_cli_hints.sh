#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The command line helps a new user (issue 28): a misspelled option,
# preset, subcommand or help topic gets one error line with "did you mean"
# and exit 2 before anything starts; every subcommand has --help; `help`
# and `presets` work; autobatch's own options written after the command
# get a warning and still go to the command.
source "$(dirname "$0")/lib.sh"
cd "$WORK"

marker="$WORK/started"
cmd=(sh -c "touch '$marker'")

# refused WANT-STDERR ARGS...: exit 2, stderr is exactly WANT (one line),
# nothing on stdout, the trainer never started.
refused() {
  local want=$1 rc=0
  shift
  rm -f "$marker"
  "$AUTOBATCH" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  assert_eq 2 "$rc" "autobatch $*: exit status"
  assert_eq "$want" "$(cat "$WORK/err")" "autobatch $*: stderr"
  [ ! -s "$WORK/out" ] || fail "autobatch $*: printed on stdout: $(cat "$WORK/out")"
  [ ! -e "$marker" ] || fail "autobatch $*: the command was started"
  pass "$* -> $want"
}

# --- long options
refused "autobatch: error: unknown option '--bach'; did you mean '--batch'?" \
  --bach 1:8 -- "${cmd[@]}"
refused "autobatch: error: unknown option '--bach'; did you mean '--batch'?" \
  --bach=1:8 -- "${cmd[@]}"
refused "autobatch: error: unknown option '-batch'; did you mean '--batch'?" \
  -batch 1:8 -- "${cmd[@]}"
refused "autobatch: error: unknown option '--grad_accum'; did you mean '--grad-accum'?" \
  --grad_accum 1,2 -- "${cmd[@]}"
refused "autobatch: error: unknown option '--trial-mem'; did you mean '--trial-memory-limit'?" \
  --trial-mem 2G -- "${cmd[@]}"
refused "autobatch: error: unknown option '--batch-size'; did you mean '--batch'?" \
  --batch-size 8 -- "${cmd[@]}"
refused "autobatch: error: unknown option '--jsno'; did you mean '--json'?" \
  --quiet --jsno r.json -- "${cmd[@]}"
# Nothing close: as before, the error and where to look.
refused "autobatch: error: unknown option '--bogus'
try 'autobatch --help'" --bogus -- "${cmd[@]}"
refused "autobatch: error: unknown option '--webh'
try 'autobatch --help'" --webh https://example.invalid -- "${cmd[@]}"
refused "autobatch: error: unknown option '-x'
try 'autobatch --help'" -x -- "${cmd[@]}"

# --- presets
refused "autobatch: error: --preset: unknown preset 'hff'; did you mean 'hf'? ('autobatch presets' lists them)" \
  --preset hff -- "${cmd[@]}"
refused "autobatch: error: --preset: unknown preset 'hydar'; did you mean 'hydra'? ('autobatch presets' lists them)" \
  --preset=hydar -- "${cmd[@]}"
refused "autobatch: error: --preset: unknown preset 'f5tts'; did you mean 'f5-tts'? ('autobatch presets' lists them)" \
  --preset f5tts -- "${cmd[@]}"
refused "autobatch: error: --preset: unknown preset 'atuo'; did you mean 'auto'? ('autobatch presets' lists them)" \
  --preset atuo -- "${cmd[@]}"
rm -f "$marker"
assert_refused "--preset nope" "unknown preset 'nope'; use one of .*hf.*, auto, or a preset file" \
  "$WORK/none.log" --preset nope -- "${cmd[@]}"
[ ! -e "$marker" ] || fail "--preset nope: the command was started"
pass "--preset nope: every name listed, as before"

# --- a misspelled subcommand: the first word, not a command in PATH
refused "autobatch: error: command 'reprot' not found in PATH; did you mean 'autobatch report'?" \
  reprot r.json
refused "autobatch: error: command 'notfy' not found in PATH; did you mean 'autobatch notify'?" \
  notfy
refused "autobatch: error: command 'preset' not found in PATH; did you mean 'autobatch presets'?" \
  preset
# After '--' or after an option the word is a command for sure: no guess.
refused "autobatch: error: command 'reprot' not found in PATH; check the spelling or give its path
try 'autobatch --help'" -- reprot r.json
refused "autobatch: error: command 'reprot' not found in PATH; check the spelling or give its path
try 'autobatch --help'" --quiet reprot r.json
refused "autobatch: error: command 'trian.py' not found in PATH; check the spelling or give its path
try 'autobatch --help'" trian.py
# A script's name is no misspelled subcommand, nor is a file here.
refused "autobatch: error: command 'help.py' not found in PATH; check the spelling or give its path
try 'autobatch --help'" help.py
: >"$WORK/reprot"
refused "autobatch: error: command 'reprot' not found in PATH; check the spelling or give its path
try 'autobatch --help'" reprot
rm -f "$WORK/reprot"

# A real program of a name close to a subcommand's is tuned, as any
# command is; one of a subcommand's very name is tuned after '--'.
mkdir -p "$WORK/bin"
for name in reports report; do
  cat >"$WORK/bin/$name" <<SH
#!/bin/sh
touch "$marker"
exec "$SIMTRAIN" --capacity 4G --model-mem 1G --output_dir "$WORK/out" "\$@"
SH
  chmod +x "$WORK/bin/$name"
done
rm -f "$marker"
PATH="$WORK/bin:$PATH" "$AUTOBATCH" reports --per_device_train_batch_size 4 >"$WORK/real.out" 2>&1 \
  || fail "a program named 'reports': exit $?: $(tail -3 "$WORK/real.out")"
[ -e "$marker" ] || fail "a program named 'reports' was not run"
if grep -q "did you mean" "$WORK/real.out"; then fail "a real program got a guess"; fi
rm -f "$marker"
PATH="$WORK/bin:$PATH" "$AUTOBATCH" -- report --per_device_train_batch_size 4 >"$WORK/real.out" 2>&1 \
  || fail "autobatch -- report: exit $?: $(tail -3 "$WORK/real.out")"
[ -e "$marker" ] || fail "autobatch -- report did not run the program"
pass "a program named 'reports' is tuned; 'autobatch -- report' tunes a program named report"

# --- help: the main help, each subcommand's, the presets
"$AUTOBATCH" --help >"$WORK/main.help"
"$AUTOBATCH" help >"$WORK/help.out" 2>"$WORK/help.err" || fail "autobatch help: exit $?"
cmp -s "$WORK/main.help" "$WORK/help.out" || fail "autobatch help is not --help"
[ ! -s "$WORK/help.err" ] || fail "autobatch help wrote to stderr"
for sub in config report matrix notify predict presets help; do
  for form in "$sub --help" "$sub -h" "help $sub"; do
    [ "$form" = "help presets" ] && continue # the list itself, below
    rc=0
    # shellcheck disable=SC2086 # the form is words
    "$AUTOBATCH" $form >"$WORK/sub.out" 2>"$WORK/sub.err" || rc=$?
    assert_eq 0 "$rc" "autobatch $form: exit status"
    [ ! -s "$WORK/sub.err" ] || fail "autobatch $form: stderr: $(cat "$WORK/sub.err")"
    head -1 "$WORK/sub.out" | grep -q "^usage: autobatch $sub" \
      || fail "autobatch $form: $(head -1 "$WORK/sub.out")"
  done
  # every subcommand's usage line is one of the main help's
  grep -qF "$(head -1 "$WORK/sub.out" | sed 's/^usage: //' | cut -d' ' -f1-2)" "$WORK/main.help" \
    || fail "$sub is not in autobatch --help"
done
# --help wins over the rest of the words, which are not read.
"$AUTOBATCH" report missing.json --format nope --help >"$WORK/sub.out" || fail "report ... --help: exit $?"
grep -q "^usage: autobatch report" "$WORK/sub.out" || fail "report ... --help: $(head -1 "$WORK/sub.out")"
"$AUTOBATCH" config set missing.yaml -h >"$WORK/sub.out" || fail "config set ... -h: exit $?"
grep -q "^usage: autobatch config get" "$WORK/sub.out" || fail "config set -h: $(head -1 "$WORK/sub.out")"
pass "help, help TOPIC, TOPIC --help and TOPIC -h: exit 0, usage on stdout"

refused "autobatch: error: no help on 'reprot'; did you mean 'autobatch help report'?" help reprot
refused "autobatch: error: no help on 'xyz'; topics: config, report, matrix, notify, predict, presets, help" \
  help xyz
refused "autobatch: error: one topic at a time, e.g. autobatch help report" help report matrix

# --- presets: every file of configs/presets, its summary, then auto
"$AUTOBATCH" presets >"$WORK/presets.out" 2>"$WORK/presets.err" || fail "autobatch presets: exit $?"
[ ! -s "$WORK/presets.err" ] || fail "autobatch presets: stderr: $(cat "$WORK/presets.err")"
n=0
for f in "$AB_SOURCE_DIR"/configs/presets/*.yaml; do
  name=$(basename "$f" .yaml)
  summary=$(sed -n 's/^summary: //p' "$f")
  [ -n "$summary" ] || fail "$f has no summary"
  grep -qxF "$(printf '%-15s  %s' "$name" "$summary")" "$WORK/presets.out" \
    || fail "presets: no line '$name  $summary' in: $(cat "$WORK/presets.out")"
  n=$((n + 1))
done
assert_eq $((n + 1)) "$(wc -l <"$WORK/presets.out")" "presets: lines"
tail -1 "$WORK/presets.out" | grep -q "^auto  " || fail "presets: auto is not last"
"$AUTOBATCH" help presets | cmp -s - "$WORK/presets.out" || fail "help presets is not presets"
refused "autobatch: error: 'x': presets takes no arguments; usage: autobatch presets" presets x
pass "presets: $n presets with their summaries, then auto"

# --- a subcommand's own options
refused "autobatch: error: unknown option '--fromat' for 'autobatch report'; did you mean '--format'?" \
  report r.json --fromat html
refused "autobatch: error: unknown option '--bogus' for 'autobatch matrix'; try 'autobatch matrix --help'" \
  matrix r.json --bogus

# --- autobatch's options after the command: a warning, and the command gets them
rm -f "$marker"
"$AUTOBATCH" --dry-run -- "${cmd[@]}" --json r.json --config c.yaml --batch 1:4 --write \
  >"$WORK/dry.out" 2>"$WORK/dry.err" || fail "--dry-run: exit $?: $(cat "$WORK/dry.err")"
assert_eq "autobatch: warning: '--json', '--batch' and '--write' after the command go to the command; put autobatch's options before '--'" \
  "$(cat "$WORK/dry.err")" "the warning"
grep -q -- "--json r.json --config c.yaml --batch 1:4 --write" "$WORK/dry.out" \
  || fail "the command's words changed: $(cat "$WORK/dry.out")"
[ ! -e "$marker" ] || fail "--dry-run started the command"
"$AUTOBATCH" --dry-run -- "${cmd[@]}" --config c.yaml --steps 3 --gpus 0 --help \
  >/dev/null 2>"$WORK/dry.err" || fail "--dry-run: exit $?"
[ ! -s "$WORK/dry.err" ] || fail "a warning for options trainers take: $(cat "$WORK/dry.err")"
pass "a warning for --json, --batch, --write after the command; none for --config, --steps, --gpus, --help"

# A real run: one warning line, the run goes on, --json was the command's.
"$AUTOBATCH" --preset env --batch 1:8 --quiet "$SIMTRAIN" --knobs-from-env --capacity 4G --model-mem 1G \
  --json r.json >"$WORK/run.out" 2>"$WORK/run.err" || fail "the run: exit $?: $(tail -3 "$WORK/run.err")"
assert_eq "autobatch: warning: '--json' after the command goes to the command; put autobatch's options before the command" \
  "$(grep warning "$WORK/run.err")" "the run's warning"
grep -q "run with: AUTOBATCH_MICRO_BATCH=" "$WORK/run.out" || fail "the run chose nothing: $(cat "$WORK/run.out")"
[ ! -e r.json ] || fail "autobatch took --json after the command"
pass "a run with --json after the command: warned, tuned, no results file of autobatch's"
