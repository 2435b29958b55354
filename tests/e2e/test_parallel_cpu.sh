#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --parallel N (issue 27, item 4): CPU trials side by side, each under its
# own --trial-memory-limit, (N+1)-ary cuts of the bracket as --gpus makes.
# The boundary is the one a serial search finds; the choice's speed is
# measured alone; the exact boundary takes fewer rounds than the serial
# search takes trials (the throughput points after it run alone either
# way, as many as the noise asks for).  Bad
# input (no cap, more trials than cores, caps beyond the free memory,
# with --gpus) is refused before the first trial.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}

# A trainer that holds 4 MiB a sample (a new buffer before the old one
# goes: 8 MiB at the peak) and prints a Hugging Face metric dict a step.
cat >"$WORK/alloc.py" <<'EOF'
import sys, time
b = int(sys.argv[sys.argv.index("--per_device_train_batch_size") + 1])
keep = b""
for step in range(1, 400):
    keep = bytearray(b * (4 << 20))
    time.sleep(0.05)
    print({"loss": 1.0 / step, "epoch": step}, flush=True)
EOF
CAP=300M

: >"$WORK/trials.log"
TRAP=(-- bash -c "echo x >> $WORK/trials.log")
assert_refused "no cap" "needs --trial-memory-limit" "$WORK/trials.log" --parallel 2 "${TRAP[@]}"
cores=$(getconf _NPROCESSORS_ONLN)
assert_refused "too many" "cores online" "$WORK/trials.log" --parallel $((cores + 1)) \
  --trial-memory-limit 64M "${TRAP[@]}"
printf 'MemTotal: 4194304 kB\nMemAvailable: 1048576 kB\n' >"$WORK/meminfo"
if [ "$cores" -ge 2 ]; then
  AUTOBATCH_MEMINFO="$WORK/meminfo" assert_refused "caps beyond free memory" "more than the 1.00 GiB available" \
    "$WORK/trials.log" --parallel 2 --trial-memory-limit 600M "${TRAP[@]}"
fi
assert_refused "with --gpus" "keep one" "$WORK/trials.log" --parallel 2 --gpus 0 --trial-memory-limit 64M "${TRAP[@]}"
pass "bad input refused before the first trial"

[ "$cores" -ge 2 ] || skip "one core: nothing runs side by side"
COMMON=(--steps 3 --warmup 1 --trial-memory-limit $CAP --no-cache --kill-grace 1s --batch 1:64 --no-confirm)
"$AUTOBATCH" "${COMMON[@]}" --json "$WORK/s.json" -- "$PY" "$WORK/alloc.py" \
  >"$WORK/s.out" 2>&1 || fail "serial: exit $? $(tail -3 "$WORK/s.out")"
"$AUTOBATCH" "${COMMON[@]}" --parallel 2 --json "$WORK/p.json" -- "$PY" "$WORK/alloc.py" \
  >"$WORK/p.out" 2>&1 || fail "parallel: exit $? $(tail -3 "$WORK/p.out")"
serial=$(jqr '.max_fit[0].micro_batch' "$WORK/s.json")
par=$(jqr '.max_fit[0].micro_batch' "$WORK/p.json")
[ "$serial" -ge 2 ] && [ "$serial" -lt 64 ] || fail "serial: largest fit $serial is not inside 1:64"
assert_eq "$serial" "$par" "--parallel 2: largest fit vs the serial search's"
assert_eq 2 "$(jqr '.summary.slots' "$WORK/p.json")" "--parallel 2: slots"
grep -q "CPU slot 1" "$WORK/p.out" || fail "no round used the second slot: $(grep round "$WORK/p.out" | head -3)"
rounds=$(jqr '[.trials[] | .round // empty] | unique | length' "$WORK/p.json")
pairs=$(jqr '[.trials[] | .round // empty] | group_by(.) | map(select(length == 2)) | length' "$WORK/p.json")
[ "$pairs" -ge 1 ] || fail "no round ran two trials"
n_serial=$(jqr '.trials | length' "$WORK/s.json")
# To the exact boundary (the largest fit and the size above it both
# known): rounds against serial trials.  The throughput points after it
# run alone either way, and how many the noise asks for varies.
fail_at=$((serial + 1))
to_par=$(jqr "[.trials[] | select((.micro_batch == $serial and .outcome == \"fit\") or (.micro_batch == $fail_at and .outcome == \"oom\"))]
  | group_by(.micro_batch) | map(min_by(.round).round) | if length == 2 then max else null end" "$WORK/p.json")
to_ser=$(jqr "[.trials | to_entries[] | select((.value.micro_batch == $serial and .value.outcome == \"fit\") or (.value.micro_batch == $fail_at and .value.outcome == \"oom\"))]
  | group_by(.value.micro_batch) | map(min_by(.key).key + 1) | if length == 2 then max else null end" "$WORK/s.json")
[ "$to_par" != null ] && [ "$to_ser" != null ] || fail "boundary not run: $to_par rounds, $to_ser serial trials"
[ "$to_par" -lt "$to_ser" ] || fail "to the boundary: $to_par rounds against $to_ser serial trials"
best=$(jqr '.best.micro_batch' "$WORK/p.json")
assert_eq 1 "$(jqr "[.trials[] | select(.micro_batch == $best and .shared != true and .samples_per_s != null)] | length > 0" "$WORK/p.json" | sed 's/true/1/')" \
  "--parallel 2: the choice measured alone"
assert_eq 0 "$(jqr '[.trials[] | select(.devices != null)] | length' "$WORK/p.json")" "--parallel: trials name no devices"
assert_no_leftovers
pass "--parallel 2: largest fit $par as serially, the boundary in $to_par rounds against $to_ser serial trials; $rounds rounds ($pairs of two trials) against $n_serial serial trials in all"
