#!/bin/sh
# SPDX-License-Identifier: MIT
# expect.sh RC PATTERN PROGRAM [ARGS...]: run PROGRAM and pass only if it
# exits with RC and prints a line matching PATTERN (grep -E) on stderr.
# Used where a run must fail in a known way, or must warn.
want_rc=$1 pattern=$2
shift 2
err=$(mktemp) || exit 1
"$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ "$rc" -ne "$want_rc" ]; then
    echo "expect.sh: '$1' exited with $rc, expected $want_rc" >&2
    rm -f "$err"
    exit 1
fi
if ! grep -Eq -- "$pattern" "$err"; then
    echo "expect.sh: no line of stderr matches '$pattern'" >&2
    rm -f "$err"
    exit 1
fi
rm -f "$err"
