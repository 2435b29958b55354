#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Memory-only boundary trials (issue 27, item 1).  On a GPU (NVML's, here
# the fake one) with the probe, a boundary trial is a fit at the first
# step past the second optimizer step over which the probe's CUDA figure
# did not grow; its tree is killed at once, it reports no speed
# ("memory_only": true, samples_per_s null); the sizes that can win are
# measured in full.  A figure that keeps growing keeps the trial going.
# The trainer here writes the probe's lines itself (no CUDA on this
# machine): its reserved bytes are base + per-sample x batch from the
# second step on (the first lacks the optimizer's state), and it prints
# PyTorch's CUDA OOM message where that passes the fake card's 24 GiB.
# On CPU under --trial-memory-limit (glibc's heap grows for steps after
# that) every trial is full, on the real PyTorch job.  --full-trials keeps
# every trial full; recording trials (--replay) report no speed.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}

cat >"$WORK/fake.py" <<'EOF'
import json, os, sys, time
argv = sys.argv
b = int(argv[argv.index("--per_device_train_batch_size") + 1])
grow = "--grow" in argv              # the figure grows every step until step 8
GiB = 1 << 30
base, per, cap = 4 * GiB, GiB // 4, 24 * GiB   # boundary: (24 - 4) * 4 = 80
out = open(os.environ["AUTOBATCH_PROBE"], "a")
# one log per run (trials run in PID namespaces of their own: pids repeat)
log = open(os.path.join(os.environ["FAKE_LOG_DIR"], "steps-%d-%s" % (b, os.urandom(6).hex())), "w")
pid = os.getpid()
def emit(o):
    out.write(json.dumps(o) + "\n")
    out.flush()
emit({"ab": "torch", "pid": pid, "rank": 0, "version": "2.5.0", "hook": "global"})
for step in range(1, 400):
    need = base + per * b + (64 << 20) * min(step, 8) * grow
    if step == 1:
        need -= per * b // 4           # no optimizer state yet
    time.sleep(0.05)
    if need > cap:
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 "
              "has a total capacity of 24.00 GiB of which 0 bytes is free.", file=sys.stderr)
        sys.exit(1)
    log.write("%d\n" % step)
    log.flush()
    emit({"ab": "step", "pid": pid, "rank": 0, "world": 1, "step": step, "t": time.monotonic(),
          "res": need, "alloc": need - (32 << 20), "held": base, "bs": b, "blen": None, "nb": 1,
          "vm": None, "seen": b, "fw": 1, "elems": b * 100, "tok": b * 100, "retries": 0,
          "outside": 512 << 20, "ctotal": cap if step == 1 else None})
    print({"loss": 1.0 / step, "epoch": step}, flush=True)
EOF
mkdir "$WORK/steps"
export FAKE_LOG_DIR="$WORK/steps"
GPU=(env AUTOBATCH_NVML_LIB="$FAKE_NVML_LIB" FAKE_NVML_TOTAL=24G)
COMMON=(--no-cache --no-replay --kill-grace 2s --batch 1:128 --steps 5 --warmup 2)

# --- on a GPU: memory-only boundary trials
"${GPU[@]}" "$AUTOBATCH" "${COMMON[@]}" --json "$WORK/g.json" -- "$PY" "$WORK/fake.py" \
  >"$WORK/g.out" 2>&1 || fail "gpu: exit $? $(tail -3 "$WORK/g.out")"
trials() { jq -c '[.trials[] | [.micro_batch, .outcome, .memory_only, .samples_per_s]]' "$1"; }
assert_eq 80 "$(jqr '.max_fit[0].micro_batch' "$WORK/g.json")" "gpu: largest fit"
n_mem=$(jqr '[.trials[] | select(.memory_only == true)] | length' "$WORK/g.json")
[ "$n_mem" -ge 2 ] || fail "gpu: $n_mem memory-only trials: $(trials "$WORK/g.json")"
assert_eq 0 "$(jqr '[.trials[] | select(.memory_only == true and (.outcome != "fit" or .samples_per_s != null))] | length' "$WORK/g.json")" \
  "gpu: memory-only trials that are not speedless fits"
# Each memory-only trial stopped at step 3 (the first flat step past the
# second): per size, as many of the trainer's runs logged at most one
# step more before the kill as there were memory-only trials of it.
for v in $(jqr '[.trials[] | select(.memory_only == true) | .micro_batch] | unique | .[]' "$WORK/g.json"); do
  want=$(jqr "[.trials[] | select(.memory_only == true and .micro_batch == $v)] | length" "$WORK/g.json")
  short=0
  for f in "$WORK"/steps/steps-"$v"-*; do
    [ "$(sort -n "$f" | tail -1)" -le 4 ] && short=$((short + 1))
  done
  [ "$short" -ge "$want" ] || fail "gpu: $want memory-only trials at $v, $short runs stopped by step 4"
done
# The largest fit and the choice have full trials: warm-up + 5 steps timed.
for v in 80 "$(jqr '.best.micro_batch' "$WORK/g.json")"; do
  [ "$(jqr "[.trials[] | select(.micro_batch == $v and .memory_only != true and .samples_per_s != null and .steps_measured >= 5)] | length" "$WORK/g.json")" -ge 1 ] \
    || fail "gpu: $v has no full trial: $(trials "$WORK/g.json")"
done
assert_eq 0 "$(jqr '.contradictions | length' "$WORK/g.json")" "gpu: contradictions"
assert_eq true "$(jqr '.summary.confirmed' "$WORK/g.json")" "gpu: the choice confirmed"
grep -q "memory only" "$WORK/g.out" || true
assert_no_leftovers
pass "gpu: $n_mem boundary trials memory-only (stopped by step 4), largest fit 80 measured in full, choice $(jqr '.best.micro_batch' "$WORK/g.json") confirmed"

# --- a figure that keeps growing: the trial is not decided early
rm -f "$WORK"/steps/*
"${GPU[@]}" "$AUTOBATCH" "${COMMON[@]}" --batch 8:8 --no-confirm --json "$WORK/grow.json" -- \
  "$PY" "$WORK/fake.py" --grow >"$WORK/grow.out" 2>&1 || fail "grow: exit $? $(tail -3 "$WORK/grow.out")"
assert_eq "fit" "$(jqr '.trials[0].outcome' "$WORK/grow.json")" "grow: outcome"
assert_eq null "$(jqr '.trials[0].memory_only' "$WORK/grow.json")" "grow: memory-only"
[ "$(cat "$WORK"/steps/steps-8-* | sort -n | tail -1)" -ge 7 ] || fail "grow: stopped before warm-up + steps"
pass "a growing figure: the trial ran its $(jqr '.trials[0].steps_measured' "$WORK/grow.json") measured steps"

# --- --full-trials: every trial full
"${GPU[@]}" "$AUTOBATCH" "${COMMON[@]}" --full-trials --no-confirm --json "$WORK/f.json" -- \
  "$PY" "$WORK/fake.py" >"$WORK/f.out" 2>&1 || fail "full: exit $? $(tail -3 "$WORK/f.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.memory_only == true)] | length' "$WORK/f.json")" "--full-trials: memory-only trials"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .samples_per_s == null)] | length' "$WORK/f.json")" \
  "--full-trials: fits without a speed"
assert_eq 80 "$(jqr '.max_fit[0].micro_batch' "$WORK/f.json")" "--full-trials: largest fit"
pass "--full-trials: every fit measured ($(jqr '.trials | length' "$WORK/f.json") trials)"

# --- a warm start with --replay says that the replay records nothing
"${GPU[@]}" "$AUTOBATCH" --no-replay --kill-grace 2s --batch 1:128 --steps 5 --warmup 2 --no-confirm \
  -- "$PY" "$WORK/fake.py" >"$WORK/w1.out" 2>&1 || fail "warm 1: exit $? $(tail -3 "$WORK/w1.out")"
"${GPU[@]}" "$AUTOBATCH" --replay --kill-grace 2s --batch 1:128 --steps 5 --warmup 2 --no-confirm \
  -- "$PY" "$WORK/fake.py" >"$WORK/w2.out" 2>&1 || fail "warm 2: exit $? $(tail -3 "$WORK/w2.out")"
grep -q "warm start: .*--replay records nothing for a cached boundary" "$WORK/w2.out" \
  || fail "warm start with --replay: not said: $(grep 'warm start' "$WORK/w2.out")"
pass "a warm start with --replay says the replay records nothing"

assert_refused "--replay --no-replay" "keep one" "$WORK/trials.log" --replay --no-replay \
  --trial-memory-limit 1G -- bash -c "echo x >> $WORK/trials.log"

# --- on CPU, the real PyTorch job: every trial full; recording trials speedless
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_tts.py"
AUTOBATCH_NVML_LIB=/nonexistent "$AUTOBATCH" --steps 3 --warmup 1 --trial-memory-limit 803500K \
  --no-cache --kill-grace 2s --batch 1:24 --replay --no-confirm --json "$WORK/r.json" -- \
  "$PY" "$TRAIN" --worst_case >"$WORK/r.out" 2>&1 || fail "cpu: exit $? $(tail -3 "$WORK/r.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.memory_only == true)] | length' "$WORK/r.json")" "cpu: memory-only trials"
[ "$(jqr '[.trials[] | select(.recorded == true)] | length' "$WORK/r.json")" -ge 2 ] || fail "cpu: no recording trials"
assert_eq 0 "$(jqr '[.trials[] | select(.recorded == true and .samples_per_s != null)] | length' "$WORK/r.json")" \
  "cpu: recording trials with a speed"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .recorded != true and .samples_per_s == null)] | length' "$WORK/r.json")" \
  "cpu: plain fits without a speed"
assert_no_leftovers
pass "cpu: every trial full, recording trials report no speed"
