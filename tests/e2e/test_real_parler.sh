#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch on a Parler-TTS-like trainer (examples/trainers/parler_like:
# its own accelerate loop, the JSON as the script's sole argument,
# preprocessing bars before training -- "Combining datasets...", an
# audio-encoding bar "n/16 [..., s/it]" with no description -- a "Train
# steps ... " bar, and at max_steps a checkpoint, the model and an
# evaluation with generation) on PyPI's torch 2.x, CPU, under
# --trial-memory-limit:
#   * the largest micro-batch equals a direct bisection under `ulimit -v`
#     with the same cap (the trainer run to its own max_steps);
#   * every fit measured training steps (the preprocessing bars are not
#     steps);
#   * no trial reached the trainer's own end (no checkpoint, model or
#     evaluation), every trial had an output directory of its own, none
#     resumed, and those directories are gone; the user's output_dir was
#     never created and the JSON is unchanged;
#   * nothing left in $TMPDIR/autobatch-*, no processes left.
# The trainer appends what it does to $PARLER_LIKE_TRACE (one JSON line
# per event), which is how the test sees inside trials whose scratch
# directories autobatch has removed.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import torch, transformers, accelerate" 2>/dev/null || fail "$PY cannot import torch, transformers and accelerate"
TRAIN="$AB_SOURCE_DIR/examples/trainers/parler_like/train.py"
# The cap is measured, not assumed (torch versions and builds map different
# amounts of address space): two uncapped runs at batch 1 and 2 give the
# base and the growth per sample; the cap lies half a sample above the peak
# of batch TARGET, so the boundary sits far from any small difference
# between a trial and a direct run.
TARGET=${AB_REAL_TARGET:-4}
MAXB=$((2 * TARGET))                 # --batch 1:$MAXB
# The same address-space use every run (glibc's dynamic mmap threshold and
# per-thread arenas, Python's hash seed, one OpenMP thread).
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
# Nothing is downloaded: the trainer builds its tiny model and data itself.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" \
       TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true WANDB_MODE=disabled
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR" "$WORK/run"
cd "$WORK/run"                       # a relative output_dir would land here

# The user's config: the sample with its output_dir in $WORK (not there yet)
jq --arg o "$WORK/user_out" '.output_dir = $o' "$AB_SOURCE_DIR/examples/trainers/parler_like/tiny.json" \
  > "$WORK/tiny.json"
sum=$(sha256sum < "$WORK/tiny.json")

# --- direct bisection under ulimit -v: the trainer run to its own end
# (max_steps 4 = warmup + steps), a fresh output_dir each time
run_direct() { # micro-batch cap_kb|unlimited
  local d="$WORK/direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  jq --arg o "$d/out" --argjson b "$1" \
    '.output_dir = $o | .overwrite_output_dir = true | .per_device_train_batch_size = $b | .max_steps = 4' \
    "$WORK/tiny.json" > "$d/cfg.json"
  (ulimit -v "$2"; PARLER_LIKE_TRACE="$d/trace.jsonl" exec "$PY" "$TRAIN" "$d/cfg.json" >"$d/log" 2>&1)
}
peak() { jq -s '[.[].vm_peak_kb] | max' "$WORK/direct/$1/trace.jsonl"; }
fits() { run_direct "$1" "$CAP_KB"; }
t0=$SECONDS
run_direct 1 unlimited || fail "direct: batch 1 failed: $(tail -3 "$WORK/direct/1/log")"
[ -f "$WORK/direct/1/out/model.safetensors" ] || fail "direct: the trainer did not save its model at max_steps"
grep -q "Evaluating - Generation" "$WORK/direct/1/log" || fail "direct: no evaluation at max_steps"
grep -q "Train steps ... " "$WORK/direct/1/log" || fail "direct: no training bar"
grep -q "Combining datasets..." "$WORK/direct/1/log" || fail "direct: no preprocessing bar"
p1=$(peak 1)
run_direct 2 unlimited || fail "direct: batch 2 failed: $(tail -3 "$WORK/direct/2/log")"
p2=$(peak 2)
slope=$((p2 - p1))
[ "$slope" -gt 20000 ] || fail "direct: memory does not grow with the batch (${p1}K at 1, ${p2}K at 2)"
CAP_KB=$((p1 + slope * (TARGET - 1) + slope / 2))
echo "calibration: VmPeak ${p1}K at batch 1, +${slope}K per sample; cap ${CAP_KB}K"
lo=1 hi=$((MAXB + 1))
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if fits $mid; then lo=$mid; else hi=$mid; fi
done
direct=$lo
[ "$direct" -gt 1 ] || fits 1 || fail "direct: batch 1 does not fit under ${CAP_KB}K"
if [ $hi -le $MAXB ]; then
  grep -q "DefaultCPUAllocator" "$WORK/direct/$hi/log" \
    || fail "direct: batch $hi failed, but not for memory: $(tail -3 "$WORK/direct/$hi/log")"
fi
echo "direct bisection: largest $direct under ${CAP_KB}K ($((SECONDS - t0))s)"

# --- autobatch
export PARLER_LIKE_TRACE="$WORK/trace.jsonl"
t0=$SECONDS
"$AUTOBATCH" --preset parler-tts --trial-memory-limit ${CAP_KB}K --batch 1:$MAXB --steps 3 --warmup 1 \
  --no-cache --kill-grace 2s --json "$WORK/r.json" -- "$PY" "$TRAIN" "$WORK/tiny.json" \
  >"$WORK/ab.out" 2>"$WORK/ab.err" || fail "autobatch: exit $? $(tail -5 "$WORK/ab.err")"
unset PARLER_LIKE_TRACE
echo "autobatch: $(jqr '.summary.trials' "$WORK/r.json") trials, $((SECONDS - t0))s"

assert_eq "$direct" "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "largest micro-batch vs ulimit -v bisection"
[ "$(jqr '[.trials[] | select(.outcome == "fit")] | length' "$WORK/r.json")" -ge 1 ] || fail "no fit trial"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and (.steps_measured // 0) <= 0)] | length' "$WORK/r.json")" \
  "fit trials without measured steps"
if [ "$direct" -lt "$MAXB" ]; then
  [ "$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/r.json")" -ge 1 ] || fail "no OOM trial"
  assert_eq "$((direct + 1))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/r.json")" "smallest failure"
fi

# --- inside the trials, as the trainer saw them
[ -s "$WORK/trace.jsonl" ] || fail "the trainer never started under autobatch (no trace)"
starts=$(jq -s '[.[] | select(.ev == "start")] | length' "$WORK/trace.jsonl")
[ "$starts" -ge "$(jqr '.summary.trials' "$WORK/r.json")" ] || fail "fewer trainer starts ($starts) than trials"
ended=$(jq -s -c '[.[] | select(.ev != "start" and .ev != "step")]' "$WORK/trace.jsonl")
assert_eq "[]" "$ended" "a trial reached the trainer's own end (checkpoint, model, evaluation)"
assert_eq 0 "$(jq -s '[.[] | select(.ev == "start" and .max_steps <= 4)] | length' "$WORK/trace.jsonl")" \
  "a trial's max_steps is within reach"
assert_eq 0 "$(jq -s '[.[] | select(.ev == "start" and .resume_from != null)] | length' "$WORK/trace.jsonl")" \
  "a trial resumed from a checkpoint"
assert_eq 0 "$(jq -s --arg u "$WORK/user_out" '[.[] | select(.ev == "start" and .output_dir == $u)] | length' \
  "$WORK/trace.jsonl")" "a trial wrote into the user's output_dir"
assert_eq "$starts" "$(jq -s '[.[] | select(.ev == "start") | .output_dir] | unique | length' "$WORK/trace.jsonl")" \
  "trials shared an output directory"
while read -r d; do
  [ ! -e "$d" ] || fail "a trial's output directory was left behind: $d"
done < <(jq -r 'select(.ev == "start") | .output_dir' "$WORK/trace.jsonl")
[ ! -e "$WORK/user_out" ] || fail "the user's output_dir was created: $(ls -A "$WORK/user_out")"
[ ! -e "$WORK/run/output_dir_training" ] || fail "the sample's relative output_dir was written"
assert_eq "$sum" "$(sha256sum < "$WORK/tiny.json")" "tuning touched the JSON"
[ -z "$(ls -A "$WORK" | grep autobatch-trial || true)" ] || fail "temporary config copies left behind"
[ -z "$(ls -A "$TMPDIR" | grep '^autobatch-' || true)" ] || fail "left in \$TMPDIR: $(ls -A "$TMPDIR")"
assert_no_leftovers
pass "parler-like: largest micro-batch $direct (direct bisection $direct) in $(jqr '.summary.trials' "$WORK/r.json") trials, no trial reached the trainer's end"
