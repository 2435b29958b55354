#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --write when the user edits the config while autobatch tunes: the file
# is read again under its lock at the end.  An edit of another key is
# kept and the choice is applied on top of it; an edit of a value the
# choice sets is never overwritten: exit 2, one line naming the file and
# the key, the file exactly as the user left it.
source "$(dirname "$0")/lib.sh"
ORIG="$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json"

# Tune NAME-config.json with --write while the command itself edits it
# during trial 1, as an editor would (sed -i writes a new file and renames
# it over the old one).  Sets rc; the results go to NAME-results.json.
tune() { # name sed-expression
  local cfg="$WORK/$1-config.json"
  cp "$ORIG" "$cfg"
  set +e
  CFG=$cfg EDIT=$2 "$AUTOBATCH" --quiet --no-cache --preset parler-tts --batch 1:8 --write \
    --json "$WORK/$1-results.json" -- \
    sh -c '[ "$AUTOBATCH_TRIAL" != 1 ] || sed -i "$EDIT" "$CFG"; exec "$@"' sh \
    "$SIMTRAIN" "$cfg" --capacity 16G --bar-desc "Train steps ... " >"$WORK/$1.out" 2>"$WORK/$1.err"
  rc=$?
  set -e
}

# --- another key changed during tuning: both changes are in the file
tune a 's/"seed": 456/"seed": 457/'
assert_eq 0 "$rc" "edit elsewhere: exit status ($(tail -2 "$WORK/a.err"))"
best=$(jqr '.best.micro_batch' "$WORK/a-results.json")
[ "$best" != 6 ] || fail "the choice equals the file's value, so this test shows nothing"
sed -e 's/"seed": 456/"seed": 457/' \
    -e "47s/\"per_device_train_batch_size\": 6/\"per_device_train_batch_size\": $best/" \
    "$ORIG" >"$WORK/a.expected"
cmp -s "$WORK/a.expected" "$WORK/a-config.json" || {
  diff "$WORK/a.expected" "$WORK/a-config.json" >&2 || true
  fail "edit elsewhere: the user's edit or the choice is missing"
}
grep -q "was changed while autobatch ran" "$WORK/a.out" || fail "edit elsewhere: not said: $(cat "$WORK/a.out")"
[ -z "$(ls -A "$WORK" | grep autobatch || true)" ] || fail "temporary files left: $(ls -A "$WORK")"
pass "an edit of another key during tuning is kept; micro_batch=$best applied on top of it"

# --- the batch key itself changed during tuning: refused, file untouched
tune b 's/"per_device_train_batch_size": 6/"per_device_train_batch_size": 3/'
assert_eq 2 "$rc" "edit of the batch key: exit status"
sed 's/"per_device_train_batch_size": 6/"per_device_train_batch_size": 3/' "$ORIG" >"$WORK/b.expected"
cmp -s "$WORK/b.expected" "$WORK/b-config.json" || fail "edit of the batch key: the user's file was changed"
assert_eq 1 "$(grep -c "error" "$WORK/b.err")" "edit of the batch key: error lines"
msg=$(grep "error" "$WORK/b.err")
grep -qF "'$WORK/b-config.json'" <<<"$msg" || fail "the message does not name the file: $msg"
grep -q "per_device_train_batch_size is now 3 (was 6)" <<<"$msg" || fail "the message does not name the key: $msg"
assert_eq 2 "$(jqr '.summary.exit' "$WORK/b-results.json")" "edit of the batch key: summary.exit"
[ -z "$(ls -A "$WORK" | grep autobatch || true)" ] || fail "temporary files left: $(ls -A "$WORK")"
assert_no_leftovers
pass "an edit of the batch key during tuning: refused, file as the user left it"
echo "  $msg"
