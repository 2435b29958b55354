#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad input: a one-line error that names the fix, exit 2, nothing started.
source "$(dirname "$0")/lib.sh"

marker="$WORK/started"
cmd=(sh -c "touch '$marker'")

bad() { # expected-text, autobatch args...
  local want=$1; shift
  set +e
  "$AUTOBATCH" "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  set -e
  assert_eq 2 "$rc" "autobatch $* : exit status"
  grep -q -- "$want" "$WORK/err" || fail "autobatch $*: expected '$want' in: $(cat "$WORK/err")"
  [ "$(grep -c 'error:' "$WORK/err")" = 1 ] || fail "autobatch $*: not one error line: $(cat "$WORK/err")"
  [ ! -e "$marker" ] || fail "autobatch $*: the command was started"
  pass "$* -> $(head -1 "$WORK/err")"
}

bad "no command to tune" --batch 1:8
bad "the command after '--' is empty" --batch 1:8 --
bad "not found in PATH" -- no-such-trainer-xyz --flag
printf 'print("hi")\n' > "$WORK/train.py"
chmod 644 "$WORK/train.py"
bad "not executable" -- "$WORK/train.py"
bad "not found; check the path" -- ./missing/train.sh
bad "unknown option '--bogus'" --bogus -- "${cmd[@]}"
bad "unknown option '--batchsize'" --batchsize=4 -- "${cmd[@]}"
bad "MIN must be at least 1" --batch 0:8 -- "${cmd[@]}"
bad "MAX is below MIN" --batch 8:4 -- "${cmd[@]}"
bad "expected MIN:MAX" --batch 8 -- "${cmd[@]}"
bad "expected MIN:MAX" --batch 1:x -- "${cmd[@]}"
bad "STEP must be at least 1" --batch 1:8:0 -- "${cmd[@]}"
bad "not a duration" --trial-timeout 10x -- "${cmd[@]}"
bad "not a duration" --budget -5m -- "${cmd[@]}"
bad "not a duration" --hang-timeout= -- "${cmd[@]}"
bad "expected a whole number" --steps 0 -- "${cmd[@]}"
bad "needs a value" --json
bad "unknown preset" --preset nope -- "${cmd[@]}"
bad "choose a writable path" --json "$WORK/no/such/dir/r.json" -- "${cmd[@]}"
bad "it is a directory" --json "$WORK" -- "${cmd[@]}"
bad "takes no value" --quiet=yes -- "${cmd[@]}"

# --help and --version exit 0 and print to stdout.
"$AUTOBATCH" --help | grep -q "^usage: autobatch" || fail "--help"
"$AUTOBATCH" --help | grep -q "Examples:" || fail "--help has no examples"
"$AUTOBATCH" --version | grep -q "^autobatch [0-9]" || fail "--version"
pass "--help, --version"

# Strict numbers: no hex, no spaces, no signs, no trailing junk.
bad "a percentage" --headroom 0x10 -- "${cmd[@]}"
bad "a percentage" --headroom " 5" -- "${cmd[@]}"
bad "a percentage" --headroom 5x -- "${cmd[@]}"
bad "expected a whole number" --steps +5 -- "${cmd[@]}"
bad "expected a whole number" --steps " 5" -- "${cmd[@]}"
bad "expected MIN:MAX" --batch 0x1:8 -- "${cmd[@]}"
# Inputs found only after every trial before: now before the first one.
bad "only http:// and https://" --webhook ftp://example.invalid/hook -- "${cmd[@]}"
printf 'print("hi")\n' > "$WORK/unreadable.py"
chmod 000 "$WORK/unreadable.py"
if ! [ -r "$WORK/unreadable.py" ]; then  # root reads anything: skip there
  bad "cannot read the script" -- python3 "$WORK/unreadable.py"
fi
bad "cannot read the script" -- python3 "$WORK/missing.py" --flag
printf '{"per_device_train_batch_size": 4}\n' > "$WORK/ro.json"
chmod 444 "$WORK/ro.json"
chattr +i "$WORK/ro.json" 2>/dev/null && immutable=1 || immutable=0
if ! [ -w "$WORK/ro.json" ]; then
  bad "--write: cannot write" --preset json --config "$WORK/ro.json" --write -- "${cmd[@]}" "$WORK/ro.json"
else
  # root writes read-only files: a read-only directory stops the atomic rename
  mkdir -p "$WORK/rodir" && cp "$WORK/ro.json" "$WORK/rodir/c.json" && chmod 555 "$WORK/rodir"
  if touch "$WORK/rodir/probe" 2>/dev/null; then rm -f "$WORK/rodir/probe"; echo "skip: --write check (root on this fs)";
  else bad "--write: cannot write" --preset json --config "$WORK/rodir/c.json" --write -- "${cmd[@]}" "$WORK/rodir/c.json"; fi
fi
[ "$immutable" = 1 ] && chattr -i "$WORK/ro.json"
bad "the value is empty" --json "" -- "${cmd[@]}"
