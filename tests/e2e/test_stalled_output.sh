#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch's own stdout and stderr go to a FIFO that nobody reads, and
# every trial prints 300 KB first: the pipe fills during trial 1.  The
# search must still run to its answer (a blocked write would stall the
# supervision loop: no timeout, no signal), with the overflow dropped and
# counted, and an OOM line must still end its trial at once.
source "$(dirname "$0")/lib.sh"
mkfifo "$WORK/fifo"
exec 3<>"$WORK/fifo"      # held open for reading and writing, never read
chatty=(sh -c 'head -c 300000 /dev/zero | tr "\0" x; echo; exec "$@"' sh "$SIMTRAIN" --capacity 8G)
want=$("$SIMTRAIN" --capacity 8G --max_steps 7 --print-max)
start=$(date +%s.%N)
rc=0
timeout 120 "$AUTOBATCH" --batch 1:64 --kill-grace 1s --json "$WORK/s.json" -- "${chatty[@]}" \
  >&3 2>&3 || rc=$?
end=$(date +%s.%N)
exec 3>&-
assert_eq 0 "$rc" "exit status with a stalled stderr"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/s.json")" "largest micro-batch"
worst=$(jqr '[.trials[] | select(.outcome == "oom") | .teardown_s] | max' "$WORK/s.json")
awk -v t="$worst" 'BEGIN { exit !(t < 1.0) }' || fail "OOM teardown took ${worst}s with a stalled stderr"
assert_no_leftovers
pass "stalled stderr: $(jqr '.summary.trials' "$WORK/s.json") trials in $(awk -v a="$start" -v b="$end" 'BEGIN{printf "%.1f", b-a}')s, OOM teardown ${worst}s"

# Hostile report files: $AUTOBATCH_REPORT replaced by a FIFO, by a link to
# /dev/zero, or grown into a 20 GB sparse file.  None may block or stall
# the search (the file autobatch made is opened before the trial starts,
# regular files only, never through a link; reads are bounded per tick).
for how in fifo zero sparse; do
  case $how in
    fifo) prep='rm -f "$AUTOBATCH_REPORT"; mkfifo "$AUTOBATCH_REPORT"' ;;
    zero) prep='rm -f "$AUTOBATCH_REPORT"; ln -s /dev/zero "$AUTOBATCH_REPORT"' ;;
    sparse) prep='truncate -s 20G "$AUTOBATCH_REPORT"' ;;
  esac
  rc=0
  timeout 120 "$AUTOBATCH" --quiet --batch 1:64 --json "$WORK/h-$how.json" -- \
    sh -c "$prep; exec \"\$@\"" sh "$SIMTRAIN" --capacity 8G >"$WORK/h-$how.out" 2>&1 || rc=$?
  assert_eq 0 "$rc" "report replaced ($how): exit status"
  assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/h-$how.json")" "report replaced ($how): answer"
done
assert_no_leftovers
pass "a report file replaced by a FIFO, a link to /dev/zero or a 20 GB sparse file stalls nothing"
