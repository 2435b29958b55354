#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A write killed with SIGKILL between writing its temporary file and the
# rename leaves `.NAME.autobatch-tmp-PID-XXXXXX` beside NAME.  The next
# tuning run removes such files, beside the config and beside its output
# files, when their PID belongs to no live process and they are older
# than a write takes, and says so; the temporary files of a live process,
# young ones, and files only named alike, stay.
source "$(dirname "$0")/lib.sh"
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR" "$WORK/out"
ORIG="$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json"
cp "$ORIG" "$WORK/p.json"

# A pid that belongs to no process: one that has just exited.
dead=$(sh -c 'echo $$')
killed=0

# --- a real SIGKILL: strace kills `config set` as it enters rename()
if strace -f -qq -o /dev/null true 2>/dev/null; then
  set +e
  strace -f -qq -o /dev/null -e trace=rename,renameat,renameat2 \
    -e inject=rename,renameat,renameat2:signal=SIGKILL \
    "$AUTOBATCH" config set "$WORK/p.json" per_device_train_batch_size=12 2>/dev/null
  set -e
  left=$(ls -A "$WORK" | grep '^\.p\.json\.autobatch-' || true)
  [ -n "$left" ] || fail "the killed write left no temporary file: $(ls -A "$WORK")"
  grep -q '^\.p\.json\.autobatch-tmp-[0-9][0-9]*-......$' <<<"$left" || fail "no pid in the temporary name: $left"
  cmp -s "$ORIG" "$WORK/p.json" || fail "the killed write changed the config"
  killed=1
  pass "config set killed before its rename left '$left' and an unchanged config"
else
  echo "skip: no strace (or no ptrace) here; the killed write is planted instead"
  : >"$WORK/.p.json.autobatch-tmp-$dead-Kil9ed"
fi

# Beside an output file, a dead writer's; beside the config, a live
# process's (this shell's), and one with no pid (not ours to judge).
: >"$WORK/out/.r.json.autobatch-tmp-$dead-aB3xYz"
: >"$WORK/.p.json.autobatch-tmp-$$-Live01"
: >"$WORK/.p.json.autobatch-Ab12Cd"
mkdir "$WORK/.d.autobatch-tmp-$dead-NotAFi"
# A pid means nothing in another PID namespace, so a temporary file is
# only judged once it is older than a write takes (a minute): a dead
# writer's made just now, which may be a live writer's elsewhere, stays.
: >"$WORK/out/.r.json.autobatch-tmp-$dead-Young1"
old=$(( $(date +%s) - 120 ))
for f in "$WORK"/.p.json.autobatch-tmp-* "$WORK/out/.r.json.autobatch-tmp-$dead-aB3xYz"; do
  touch -d "@$old" "$f"
done

"$AUTOBATCH" --preset parler-tts --batch 1:2 --steps 1 --warmup 0 --json "$WORK/out/r.json" -- \
  "$SIMTRAIN" "$WORK/p.json" --bar-desc "Train steps ... " >/dev/null 2>"$WORK/n.err" \
  || fail "next run: exit $? $(tail -3 "$WORK/n.err")"
grep -q "removed what an earlier, killed run left: .*2 temporary files of an unfinished write" "$WORK/n.err" \
  || fail "next run did not say what it swept: $(grep removed "$WORK/n.err" || cat "$WORK/n.err")"
assert_eq ".r.json.autobatch-tmp-$dead-Young1" "$(ls -A "$WORK/out" | grep autobatch-tmp || true)" \
  "temporary files beside the results"
assert_eq ".d.autobatch-tmp-$dead-NotAFi .p.json.autobatch-Ab12Cd .p.json.autobatch-tmp-$$-Live01" \
  "$(ls -A "$WORK" | grep autobatch | sort | tr '\n' ' ' | sed 's/ $//')" "what stays beside the config"
cmp -s "$ORIG" "$WORK/p.json" || fail "the config changed"
assert_no_leftovers
pass "the next run swept the dead writers' temporary files (killed by SIGKILL: $killed) and kept the rest"
