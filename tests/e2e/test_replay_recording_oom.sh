#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --replay: a recording trial that runs out of memory is not evidence.
# Recording (the profiler's events, the trace) needs memory of its own,
# so a size can fail while recorded and fit without it: the real Coqui
# trainer did, under the replay bench's cap, and autobatch answered 2
# where the plain search found 6.  Here a trainer fits up to 5 but fails
# from 3 up while recorded; the replay declines and the search must still
# find 5.  Bash stands in for PyTorch: it writes a small trace where the
# probe would and reports its steps through $AUTOBATCH_REPORT.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/trainer.sh" <<'SH'
#!/usr/bin/env bash
b=$AUTOBATCH_MICRO_BATCH
if [ "$b" -gt 5 ] || { [ -n "${AUTOBATCH_RECORD:-}" ] && [ "$b" -ge 3 ]; }; then
  echo "RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 9011200 bytes. Error code 12 (Cannot allocate memory)" >&2
  exit 1
fi
if [ -n "${AUTOBATCH_RECORD:-}" ]; then
  ev="a c $((1000 * b)) 1
f c $((1000 * b)) 1"
  printf 'autobatch-trace 1\npid %d\nrank 0\nworld 1\ntorch 2.8.0\nvm_peak_kb 1000\nvm_size_kb 1000\ncuda_reserved -1\ncuda_allocated -1\ncuda_outside -1\nstep 1\n%s\nstep 2\n%s\nend 4\n' \
    $$ "$ev" "$ev" >"$AUTOBATCH_RECORD/trace-$$.txt"
fi
for i in $(seq 1 "$AUTOBATCH_MAX_STEPS"); do echo "{\"step\": $i}" >>"$AUTOBATCH_REPORT"; sleep 0.05; done
SH
chmod +x "$WORK/trainer.sh"
"$AUTOBATCH" --preset env --replay --trial-memory-limit 800000K --batch 1:8 --no-cache \
  --json "$WORK/r.json" -- "$WORK/trainer.sh" >"$WORK/out" 2>&1 || fail "exit $? $(tail -3 "$WORK/out")"
grep -q "declined: the recording trial at micro-batch 3 did not fit" "$WORK/out" \
  || fail "no decline: $(grep autobatch: "$WORK/out")"
assert_eq "declined" "$(jqr '.replay.cells[0].state' "$WORK/r.json")" "replay state"
assert_eq 5 "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "largest fit"
assert_eq 6 "$(jqr '.max_fit[0].smallest_fail' "$WORK/r.json")" "smallest failure"
assert_eq true "$(jqr '[.trials[] | select(.micro_batch == 3)][0].recorded' "$WORK/r.json")" \
  "the failed trial at 3 is marked recorded"
pass "recording OOM at 3 declined the replay; the search found 5/6 ($(jqr '.summary.trials' "$WORK/r.json") trials)"
