#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Deep YAML is refused at a nesting limit, at once: `config get` on a flow
# list 100,000 deep (libyaml alone takes minutes on it) exits 2 within a
# second with one line naming the file and the limit; a document at the
# limit still reads.
source "$(dirname "$0")/lib.sh"
deep() { # FILE DEPTH OPEN CLOSE INNER
  python3 - "$@" <<'PY'
import sys
path, n, o, c, inner = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
open(path, "w").write("a: " + o * n + inner + c * n + "\nb: 1\n")
PY
}
deep "$WORK/list.yaml" 100000 "[" "]" ""
deep "$WORK/map.yaml" 100000 "{k: " "}" "1"
for f in list map; do
  start=$(date +%s.%N)
  rc=0
  timeout 10 "$AUTOBATCH" config get "$WORK/$f.yaml" b >"$WORK/$f.out" 2>"$WORK/$f.err" || rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  assert_eq 2 "$rc" "$f: exit status ($(head -c 300 "$WORK/$f.err"))"
  awk -v t="$took" 'BEGIN { exit !(t < 1.0) }' || fail "$f: 100k levels took ${took}s"
  assert_eq 1 "$(wc -l <"$WORK/$f.err")" "$f: lines of error"
  grep -q "$WORK/$f.yaml.*nested deeper than 1000 levels" "$WORK/$f.err" \
    || fail "$f: the error names neither the file nor the limit: $(cat "$WORK/$f.err")"
  pass "$f 100,000 deep: refused in ${took}s: $(cat "$WORK/$f.err")"
done

# 999 lists inside the top-level mapping: 1000 levels, still read.
deep "$WORK/ok.yaml" 999 "[" "]" "7"
key="a$(printf '.0%.0s' $(seq 1 999))"
assert_eq 7 "$("$AUTOBATCH" config get "$WORK/ok.yaml" "$key")" "a value 1000 levels deep"
pass "1000 levels deep still read"
