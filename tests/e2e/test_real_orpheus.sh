#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch on an Orpheus-TTS-like fine-tune (examples/trainers/orpheus_like:
# no arguments, `config.yaml` opened from the working directory, an HF
# Trainer with per_device_train_batch_size = batch_size, output to
# ./save_folder, a checkpoint saved at the end of the epochs) on PyPI's
# torch 2.x, CPU, under --trial-memory-limit:
#   * the largest batch_size equals a direct bisection under `ulimit -v`
#     with the same cap;
#   * every fit measured training steps;
#   * every trial ran in a working directory of its own (a mirror of the
#     original holding the patched config.yaml), none reached the Trainer's
#     end (no checkpoint saved), those directories are gone, the user's
#     save_folder was never created and config.yaml is byte-identical;
#   * --write then changes exactly the batch_size bytes of config.yaml;
#   * nothing left in $TMPDIR/autobatch-*, no processes left.
# The trainer appends what it does to $ORPHEUS_LIKE_TRACE (one JSON line
# per event), which is how the test sees inside the trials.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import torch, transformers, accelerate, yaml" 2>/dev/null || fail "$PY cannot import torch, transformers, accelerate, yaml"
# The cap is measured, not assumed (torch versions and builds map different
# amounts of address space): two uncapped runs at batch 1 and 2 give the
# base and the growth per sample; the cap lies half a sample above the peak
# of batch TARGET, so the boundary sits far from any small difference
# between a trial and a direct run.
TARGET=${AB_REAL_TARGET:-4}
MAXB=$((2 * TARGET))                 # --batch 1:$MAXB
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" \
       TOKENIZERS_PARALLELISM=false WANDB_DISABLED=true WANDB_MODE=disabled
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"

# The user's project: train.py and config.yaml side by side
cp -r "$AB_SOURCE_DIR/examples/trainers/orpheus_like" "$WORK/orpheus"
ORIG="$WORK/orpheus/config.yaml"
grep -qx "batch_size: 1" "$ORIG" || fail "the sample config.yaml has no 'batch_size: 1' line"
sum=$(sha256sum < "$ORIG")
save_folder=$(sed -n 's/^save_folder: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ORIG")
[ -n "$save_folder" ] || fail "no save_folder in config.yaml"

# --- direct bisection under ulimit -v: a copy of the project per size,
# with 4 batches of data, so the Trainer runs 4 steps (warmup + steps) and
# ends (Orpheus has no max-steps setting: epochs only)
run_direct() { # batch_size cap_kb|unlimited
  local d="$WORK/direct/$1"
  rm -rf "$d"; mkdir -p "$d"
  cp "$WORK/orpheus/train.py" "$d/"
  sed -e "s/^batch_size: .*/batch_size: $1/" \
      -e "s/^TTS_dataset: synthetic:[0-9]*x/TTS_dataset: synthetic:$((4 * $1))x/" "$ORIG" > "$d/config.yaml"
  (cd "$d" && ulimit -v "$2" && ORPHEUS_LIKE_TRACE="$d/trace.jsonl" exec "$PY" train.py >log 2>&1)
}
peak() { jq -s '[.[].vm_peak_kb] | max' "$WORK/direct/$1/trace.jsonl"; }
fits() { run_direct "$1" "$CAP_KB"; }
t0=$SECONDS
run_direct 1 unlimited || fail "direct: batch 1 failed: $(tail -3 "$WORK/direct/1/log")"
[ -d "$WORK/direct/1/$save_folder/checkpoint-4" ] || fail "direct: the Trainer saved no checkpoint at its end"
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

# --- autobatch, run where the user runs it: in the project directory
cd "$WORK/orpheus"
export ORPHEUS_LIKE_TRACE="$WORK/trace.jsonl"
t0=$SECONDS
"$AUTOBATCH" --preset orpheus --trial-memory-limit ${CAP_KB}K --batch 1:$MAXB --steps 3 --warmup 1 \
  --kill-grace 2s --json "$WORK/r.json" -- "$PY" train.py \
  >"$WORK/ab.out" 2>"$WORK/ab.err" || fail "autobatch: exit $? $(tail -5 "$WORK/ab.err")"
unset ORPHEUS_LIKE_TRACE
echo "autobatch: $(jqr '.summary.trials' "$WORK/r.json") trials, $((SECONDS - t0))s"

assert_eq "$direct" "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "largest batch_size vs ulimit -v bisection"
[ "$(jqr '[.trials[] | select(.outcome == "fit")] | length' "$WORK/r.json")" -ge 1 ] || fail "no fit trial"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and (.steps_measured // 0) <= 0)] | length' "$WORK/r.json")" \
  "fit trials without measured steps"
if [ "$direct" -lt "$MAXB" ]; then
  [ "$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/r.json")" -ge 1 ] || fail "no OOM trial"
  assert_eq "$((direct + 1))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/r.json")" "smallest failure"
fi

# --- inside the trials
[ -s "$WORK/trace.jsonl" ] || fail "the trainer never started under autobatch (no trace)"
starts=$(jq -s '[.[] | select(.ev == "start")] | length' "$WORK/trace.jsonl")
[ "$starts" -ge "$(jqr '.summary.trials' "$WORK/r.json")" ] || fail "fewer trainer starts ($starts) than trials"
assert_eq "[]" "$(jq -s -c '[.[] | select(.ev == "save" or .ev == "end")]' "$WORK/trace.jsonl")" \
  "a trial reached the Trainer's end (checkpoint saved)"
assert_eq 0 "$(jq -s --arg d "$WORK/orpheus" '[.[] | select(.cwd == $d)] | length' "$WORK/trace.jsonl")" \
  "a trial ran in the user's directory"
assert_eq "$starts" "$(jq -s '[.[] | select(.ev == "start") | .cwd] | unique | length' "$WORK/trace.jsonl")" \
  "trials shared a working directory"
# each trial (and the confirmation run) read the patched config: the batch
# the Trainer got is the trial's
assert_eq "$(jqr '[.trials[].micro_batch, .confirm[].micro_batch] | sort | join(",")' "$WORK/r.json")" \
  "$(jq -s -r '[.[] | select(.ev == "start") | .batch_size] | sort | join(",")' "$WORK/trace.jsonl")" \
  "the batch sizes the Trainer got vs the trials"
while read -r d; do
  [ ! -e "$d" ] || fail "a trial's working directory was left behind: $d"
done < <(jq -r 'select(.ev == "start") | .cwd' "$WORK/trace.jsonl")
[ ! -e "$WORK/orpheus/$save_folder" ] || fail "the user's save_folder was created: $(ls -A "$WORK/orpheus/$save_folder")"
assert_eq "$sum" "$(sha256sum < "$ORIG")" "tuning touched config.yaml"
[ -z "$(ls -A "$WORK/orpheus" | grep -v -x -e train.py -e config.yaml || true)" ] \
  || fail "left in the project directory: $(ls -A "$WORK/orpheus")"
[ -z "$(ls -A "$TMPDIR" | grep '^autobatch-' || true)" ] || fail "left in \$TMPDIR: $(ls -A "$TMPDIR")"
assert_no_leftovers
pass "orpheus-like: largest batch_size $direct (direct bisection $direct) in $(jqr '.summary.trials' "$WORK/r.json") trials, each in its own directory"

# --- --write: only the batch_size bytes change (the cache from the run
# above confirms the boundary in a couple of trials)
"$AUTOBATCH" --quiet --preset orpheus --trial-memory-limit ${CAP_KB}K --batch 1:$MAXB --steps 3 --warmup 1 \
  --kill-grace 2s --write --json "$WORK/w.json" -- "$PY" train.py >"$WORK/w.out" 2>&1 \
  || fail "--write: exit $? $(tail -5 "$WORK/w.out")"
best=$(jqr '.best.micro_batch' "$WORK/w.json")
[ "$best" -ge 1 ] && [ "$best" -le "$direct" ] || fail "--write: chose $best, largest fit $direct"
sed "s/^batch_size: 1\$/batch_size: $best/" "$AB_SOURCE_DIR/examples/trainers/orpheus_like/config.yaml" \
  > "$WORK/expected.yaml"
cmp "$WORK/expected.yaml" "$ORIG" || fail "--write: bytes other than batch_size changed: $(diff "$WORK/expected.yaml" "$ORIG")"
[ ! -e "$WORK/orpheus/$save_folder" ] || fail "--write run: the user's save_folder was created"
[ -z "$(ls -A "$TMPDIR" | grep '^autobatch-' || true)" ] || fail "--write run: left in \$TMPDIR: $(ls -A "$TMPDIR")"
assert_no_leftovers
pass "orpheus-like --write: batch_size 1 -> $best, nothing else changed"
