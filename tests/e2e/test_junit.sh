#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JUnit reports validate against the common junit schema
# (tests/data/junit.xsd) for every results fixture and for a run gated
# against a baseline, and name each testcase by its configuration, so CI
# history follows a size from one night to the next.
source "$(dirname "$0")/lib.sh"
command -v xmllint >/dev/null || fail "xmllint is missing: apt-get install libxml2-utils"
xsd="$AB_SOURCE_DIR/tests/data/junit.xsd"
n=0
for f in "$AB_SOURCE_DIR"/tests/data/results-*.json; do
  "$AUTOBATCH" report "$f" --format junit -o "$WORK/j.xml" || fail "report $f: exit $?"
  xmllint --noout --schema "$xsd" "$WORK/j.xml" 2>"$WORK/xmllint.err" \
    || fail "$(basename "$f"): $(head -3 "$WORK/xmllint.err")"
  n=$((n + 1))
done
# A run with a regression gate (a baseline far faster than simtrain).
jq '.best.samples_per_s = 1e9' "$AB_SOURCE_DIR/tests/data/results-h100.json" >"$WORK/base.json"
rc=0
"$AUTOBATCH" --quiet --no-cache --batch 1:32 --steps 3 --baseline "$WORK/base.json" --junit "$WORK/g.xml" \
  -- "$SIMTRAIN" --capacity 8G --output_dir "$WORK/out" >/dev/null 2>&1 || rc=$?
assert_eq 6 "$rc" "gated run: exit status"
xmllint --noout --schema "$xsd" "$WORK/g.xml" 2>"$WORK/xmllint.err" || fail "gated: $(head -3 "$WORK/xmllint.err")"
grep -q '<testcase name="regression gate"' "$WORK/g.xml" || fail "gated: no regression gate testcase"
pass "junit: $n fixtures and a gated run validate against the junit schema"

# Testcases named by configuration; a configuration run again is "(run 2)".
"$AUTOBATCH" report "$AB_SOURCE_DIR/tests/data/results-h100.json" --format junit -o "$WORK/h.xml"
grep -q '<testcase name="micro_batch=256 grad_accum=1 checkpointing=off" ' "$WORK/h.xml" \
  || fail "a testcase not named by its configuration: $(grep -m1 '<testcase' "$WORK/h.xml")"
if grep -q '<testcase name="trial ' "$WORK/h.xml"; then fail "testcases still named by trial"; fi
names=$(grep -o '<testcase name="[^"]*"' "$WORK/h.xml" | sort | uniq -d | wc -l)
assert_eq 0 "$names" "testcase names used twice"
pass "junit: testcases named by configuration, none twice"
