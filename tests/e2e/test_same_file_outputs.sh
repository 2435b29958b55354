#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two options naming one file are refused before the first trial (exit 2,
# one line naming both): an output on the config's path (by --config or
# found in the command, under another spelling or through a link) would
# replace the config; two outputs on one path would leave only the last.
# A character device shared by two outputs is fine.
source "$(dirname "$0")/lib.sh"
ORIG="$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json"
cp "$ORIG" "$WORK/p.json"
mkdir "$WORK/sub"
ln -s "$WORK/p.json" "$WORK/link.json"

refused() { # what text args...
  local what=$1 text=$2 rc=0
  shift 2
  "$AUTOBATCH" "$@" >"$WORK/o.out" 2>&1 || rc=$?
  assert_eq 2 "$rc" "$what: exit status"
  grep -q -- "$text" "$WORK/o.out" || fail "$what: '$text' not in: $(cat "$WORK/o.out")"
  assert_eq 1 "$(grep -c . "$WORK/o.out")" "$what: lines said"
  cmp -s "$ORIG" "$WORK/p.json" || fail "$what: the config changed"
  [ -z "$(ls "$WORK" | grep autobatch-trial || true)" ] || fail "$what: a trial ran"
  pass "$what: refused"
}
sim() { echo "$SIMTRAIN" "$WORK/p.json" --bar-desc "Train steps ... "; }

refused "--json on --config" "--config '$WORK/p.json' and --json '$WORK/p.json' are the same file" \
  --preset parler-tts --batch 1:2 --steps 1 --config "$WORK/p.json" --json "$WORK/p.json" -- $(sim)
refused "--write --markdown on --config, another spelling" "--config '$WORK/p.json' and --markdown '$WORK/sub/../p.json'" \
  --preset parler-tts --batch 1:2 --steps 1 --write --config "$WORK/p.json" --markdown "$WORK/sub/../p.json" -- $(sim)
refused "--json on the config found in the command, through a link" "the config '$WORK/p.json' and --json '$WORK/link.json'" \
  --preset parler-tts --batch 1:2 --steps 1 --json "$WORK/link.json" -- $(sim)
refused "--json and --html on one new file" "--json '$WORK/r.json' and --html '$WORK/sub/../r.json'" \
  --quiet --batch 1:8 --json "$WORK/r.json" --html "$WORK/sub/../r.json" -- "$SIMTRAIN" --capacity 8G
[ ! -e "$WORK/r.json" ] || fail "the refused run wrote r.json"
refused "--events on --junit" "--junit '$WORK/e.xml' and --events '$WORK/e.xml'" \
  --quiet --batch 1:8 --junit "$WORK/e.xml" --events "$WORK/e.xml" -- "$SIMTRAIN" --capacity 8G

# a device shared by two outputs is written through by both: no clash
"$AUTOBATCH" --quiet --batch 1:64 --json /dev/null --markdown /dev/null -- "$SIMTRAIN" --capacity 8G \
  >/dev/null 2>"$WORK/n.err" || fail "two outputs on /dev/null: exit $? $(cat "$WORK/n.err")"
pass "two outputs on /dev/null still run"
