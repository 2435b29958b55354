#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Links planted where autobatch makes files are never written through.
# Trial copies of the config: links at every name the old scheme
# (`p.autobatch-trial-PID-N.json`) would use, made by the very process
# that then becomes autobatch (exec keeps the pid), point at the config
# and at another file; both stay byte-identical, and the run still gives
# its trials patched copies.  The warm-start cache: a link in place of the
# cache file is replaced by the file, never followed; a cache directory
# that others may write to (1777) is not used, with a note.
source "$(dirname "$0")/lib.sh"
ORIG="$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json"
cp "$ORIG" "$WORK/p.json"
echo "precious" >"$WORK/victim"
cp "$WORK/victim" "$WORK/victim.orig"

# --- trial copies beside the config
export AB WORK SIMTRAIN
AB=$AUTOBATCH
sh -c 'for n in $(seq 1 30); do
         if [ $((n % 2)) = 0 ]; then t=victim; else t=p.json; fi
         ln -s "$WORK/$t" "$WORK/p.autobatch-trial-$$-$n.json"
       done
       exec "$AB" --preset parler-tts --batch 1:4 --steps 1 --warmup 0 --no-cache -- \
         "$SIMTRAIN" "$WORK/p.json" --bar-desc "Train steps ... "' >/dev/null 2>"$WORK/t.err" \
  || fail "run with planted links: exit $? $(tail -3 "$WORK/t.err")"
cmp -s "$ORIG" "$WORK/p.json" || fail "the config was written through a planted link"
cmp -s "$WORK/victim.orig" "$WORK/victim" || fail "another file was written through a planted link: $(head -c 200 "$WORK/victim")"
links=$(find "$WORK" -maxdepth 1 -name 'p.autobatch-trial-*' -type l | wc -l)
assert_eq 30 "$links" "planted links left as they were"
[ -z "$(find "$WORK" -maxdepth 1 -name 'p.autobatch-trial-*' ! -type l)" ] || fail "trial copies left behind"
pass "30 links planted at the predictable trial-copy names: config and victim untouched, run exit 0"
find "$WORK" -maxdepth 1 -name 'p.autobatch-trial-*' -type l -delete

# --- the warm-start cache
cache() { "$AUTOBATCH" --quiet --batch 1:64 --json "$WORK/r.json" -- "$SIMTRAIN" --capacity 8G; }
cache >/dev/null 2>"$WORK/c1.err" || fail "first cached run: exit $? $(tail -3 "$WORK/c1.err")"
cdir="$XDG_CACHE_HOME/autobatch"
f=$(ls "$cdir"/*.json 2>/dev/null | head -1)
[ -n "$f" ] || fail "the first run left no cache file in $cdir"
assert_eq 700 "$(stat -c %a "$cdir")" "the cache directory's mode"
rm "$f" && ln -s "$WORK/victim" "$f"
cache >/dev/null 2>"$WORK/c2.err" || fail "cached run with a planted link: exit $? $(tail -3 "$WORK/c2.err")"
cmp -s "$WORK/victim.orig" "$WORK/victim" || fail "the cache was written through a planted link: $(head -c 200 "$WORK/victim")"
[ -f "$f" ] && [ ! -L "$f" ] || fail "the link in the cache's place was not replaced by a file"
jq -e '.schema == "autobatch.cache/1"' "$f" >/dev/null || fail "the cache file is not a cache"
pass "a link at the cache file's name is replaced, its target untouched"

chmod 1777 "$cdir"
rm "$f" && ln -s "$WORK/victim" "$f"
cache >/dev/null 2>"$WORK/c3.err" || fail "run with a shared cache directory: exit $? $(tail -3 "$WORK/c3.err")"
grep -q "note: not using the warm-start cache '$cdir': others may write to it" "$WORK/c3.err" \
  || fail "no note about the shared cache directory: $(cat "$WORK/c3.err")"
cmp -s "$WORK/victim.orig" "$WORK/victim" || fail "a shared cache directory was written through a link"
[ -L "$f" ] || fail "a shared cache directory was written to"
pass "a cache directory others may write to is not used, and the run says so"
