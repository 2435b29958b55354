#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The man page autobatch(1) reads as a man page: man(1) renders it without
# a warning and within 80 columns; it has NAME, SYNOPSIS, DESCRIPTION,
# OPTIONS, EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES and SEE ALSO, in that
# order; every option of `autobatch --help` is an entry of OPTIONS, every
# exit status of tuner/control/exit.h one of EXIT STATUS, every variable
# the code reads with getenv() one of ENVIRONMENT; units stay as written
# (90s, not 90S).  The page is the one the build made (what cmake --install
# installs), or, when the build made none, one generated here the same way.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-python3}
command -v man >/dev/null || skip "man is missing: apt-get install man-db"

page="$(dirname "$AUTOBATCH")/autobatch.1"
if [ ! -s "$page" ]; then
  page="$WORK/autobatch.1"
  cmake -DAUTOBATCH="$AUTOBATCH" -DVERSION=0.0.0 -DTEMPLATE="$AB_SOURCE_DIR/docs/autobatch.1.in" \
    -DOUT="$page" -P "$AB_SOURCE_DIR/docs/man.cmake" >"$WORK/gen.out" 2>&1 \
    || fail "docs/man.cmake: $(cat "$WORK/gen.out")"
fi

# --- man renders it without a word of complaint, within 80 columns
warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
[ -z "$warn" ] || fail "man --warnings: $warn"
MANWIDTH=80 LC_ALL=C.UTF-8 man -l "$page" >"$WORK/page.txt" 2>"$WORK/man.err" \
  || fail "man -l: exit $? $(cat "$WORK/man.err")"
[ "$(wc -l <"$WORK/page.txt")" -gt 100 ] || fail "the page is too short: $(cat "$WORK/page.txt")"
"$PY" - "$WORK/page.txt" <<'PYEOF' || fail "lines wider than 80 columns"
import sys
wide = [(i + 1, l) for i, l in enumerate(open(sys.argv[1], encoding="utf-8").read().splitlines())
        if len(l) > 80]
for n, l in wide[:5]:
    print("line %d, %d columns: %s" % (n, len(l), l), file=sys.stderr)
sys.exit(1 if wide else 0)
PYEOF
pass "man --warnings says nothing; $(wc -l <"$WORK/page.txt") lines, none over 80 columns"

# --- the sections of a man page, in order
got=$(grep -E '^[A-Z][A-Z ]+$' "$WORK/page.txt" | tr '\n' ',')
want="NAME,SYNOPSIS,DESCRIPTION,OPTIONS,EXIT STATUS,ENVIRONMENT,FILES,EXAMPLES,SEE ALSO,"
assert_eq "$want" "$got" "the page's sections"
pass "sections: ${want%,}"

# section NAME: the rendered lines of that section
section() { awk -v s="$1" '/^[A-Z][A-Z ]+$/ { on = ($0 == s); next } on' "$WORK/page.txt"; }

# --- every option of --help is an entry (a tag line) of OPTIONS
"$AUTOBATCH" --help >"$WORK/help.txt" || fail "--help: exit $?"
section OPTIONS >"$WORK/options.txt"
n=0
for o in $(grep -oE '^  (-[a-zA-Z], )?--[a-z][a-z-]*' "$WORK/help.txt" | grep -oE -- '--[a-z][a-z-]*'); do
  grep -qE -- "^       (-[a-zA-Z], )?$o( |$)" "$WORK/options.txt" || fail "OPTIONS has no entry for $o"
  n=$((n + 1))
done
[ "$n" -gt 40 ] || fail "only $n options found in --help"
grep -q -- "^       --markdown FILE, --junit FILE, --html FILE$" "$WORK/options.txt" \
  || fail "the entry for --markdown"
pass "OPTIONS: an entry for each of the $n options of --help"

# --- units and headings as written
grep -q "90S\|10M, 2H" "$WORK/page.txt" && fail "units uppercased: $(grep -n "90S\|10M, 2H" "$WORK/page.txt")"
grep -q "^   Limits (durations like 90s, 10m, 2h)$" "$WORK/options.txt" || fail "the Limits heading"
pass "units as written (90s, 10m, 2h)"

# --- every exit status, every variable read
section "EXIT STATUS" >"$WORK/exit.txt"
for c in $(grep -oE '= [0-9]+' "$AB_SOURCE_DIR/tuner/control/exit.h" | grep -oE '[0-9]+'); do
  grep -qE "^       $c( |$)" "$WORK/exit.txt" || fail "EXIT STATUS lacks $c"
done
section ENVIRONMENT >"$WORK/env.txt"
vars=$(grep -rhoE 'getenv\("[A-Z_]+"\)' "$AB_SOURCE_DIR/tuner" | grep -oE '[A-Z_]{2,}' | sort -u)
vars="$vars $(grep -hoE '#define WEBHOOK_ENV_[A-Z]+ "[A-Z_]+"' "$AB_SOURCE_DIR/tuner/output/webhook.h" | grep -oE '"[A-Z_]+"' | tr -d '"')"
for v in $vars; do
  [ "$v" = PATH ] && continue
  grep -qE "(^|[^A-Z_])$v([^A-Z_]|$)" "$WORK/env.txt" || fail "ENVIRONMENT lacks $v"
done
for v in AUTOBATCH_TRIAL AUTOBATCH_MICRO_BATCH AUTOBATCH_GRAD_ACCUM AUTOBATCH_CHECKPOINTING \
         AUTOBATCH_MAX_STEPS AUTOBATCH_REPORT; do
  grep -q "^       $v$" "$WORK/env.txt" || fail "ENVIRONMENT lacks the trial's $v"
done
pass "EXIT STATUS and ENVIRONMENT: every status of exit.h, every variable read with getenv()"
