#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SIGINT (and SIGTERM) to autobatch mid-trial: the trial's whole tree is
# torn down, partial results are written, exit 130, no process left.
source "$(dirname "$0")/lib.sh"

interrupt() { # signal
  local sig=$1 log="$WORK/int-$1.err" json="$WORK/int-$1.json"
  # Two ranks that ignore SIGTERM, plus an escaped grandchild: the worst case.
  "$AUTOBATCH" --batch 1:64 --kill-grace 1s --json "$json" -- \
    "$SIMTRAIN" --nproc 2 --ignore-sigterm --escape "$WORK/esc-$sig.pid" --sample-time 50ms \
    >/dev/null 2>"$log" &
  local ab=$!
  # Wait (bounded) until the first trial is really training.
  for _ in $(seq 1 200); do
    grep -q "it/s" "$log" 2>/dev/null && [ -s "$WORK/esc-$sig.pid" ] && break
    sleep 0.05
  done
  grep -q "it/s" "$log" || fail "$sig: the trial never started"
  kill -"$sig" "$ab"
  set +e
  wait "$ab"
  local rc=$?
  set -e
  assert_eq 130 "$rc" "$sig: exit status"
  assert_eq true "$(jqr '.summary.interrupted' "$json")" "$sig: partial results"
  assert_eq interrupted "$(jqr '.trials[-1].outcome' "$json")" "$sig: last trial"
  # (the escaped grandchild is found by the test's mark, like every process)
  assert_no_leftovers
  pass "$sig -> 130, partial results, no process left"
}

interrupt INT
interrupt TERM
