#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Batch 1 does not fit; checkpointing makes it fit (issue 29's CPU case)
# on a real Hugging Face Trainer job: tests/real/hf_gpt2.py, a GPT-2 of
# random weights over 2048-token sequences (16 heads: the attention
# activations dominate), its TrainingArguments in a JSON file as HF's
# example scripts take them (--preset json), PyPI's torch 2.8 and
# transformers 4.57 on the CPU, under a --trial-memory-limit between
# batch 1's peak address space with checkpointing and without it
# (calibrated here, as test_real_replay_env does).
#   * autobatch says that batch 1 fits nowhere with the config's own
#     settings, turns checkpointing on, finds batch 1, and with --write
#     sets gradient_checkpointing: true in the JSON (the only bytes that
#     change besides the batch);
#   * it says so with the breakdown of the failed batch-1 trial (weights,
#     gradients and AdamW's state, from the probe), which the results
#     carry (trials[].memory_breakdown "at": "failure"), and
#     knobs.turned_on = checkpointing, "fits";
#   * a fresh run of the user's command with the written config under
#     `ulimit -v` of the same cap trains; the config as it was does not;
#   * without --allow precision no trial got bf16.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import torch, transformers" 2>/dev/null || fail "$PY cannot import torch and transformers"
JOB="$AB_SOURCE_DIR/tests/real/hf_gpt2.py"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
cat >"$WORK/train.json" <<EOF
{
  "output_dir": "$WORK/out",
  "per_device_train_batch_size": 4,
  "gradient_accumulation_steps": 1,
  "gradient_checkpointing": false,
  "max_steps": 50,
  "logging_steps": 1,
  "save_strategy": "no",
  "report_to": "none",
  "use_cpu": true,
  "seq_len": 2048,
  "n_layer": 2,
  "n_embd": 128,
  "n_head": 16,
  "vocab_size": 2048,
  "samples": 64
}
EOF
cp "$WORK/train.json" "$WORK/train.orig.json"
t0=$SECONDS

# --- calibration: batch 1's peak address space, 3 steps, without and with checkpointing
peak() { # CONFIG -> VmPeak in kB
  AB_DIRECT_STEPS=3 "$PY" "$AB_SOURCE_DIR/tests/real/direct_steps.py" "$JOB" "$1" >"$WORK/peak.log" 2>&1 || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$WORK/peak.log"
}
jq '.per_device_train_batch_size = 1' "$WORK/train.json" >"$WORK/b1.json"
jq '.per_device_train_batch_size = 1 | .gradient_checkpointing = true' "$WORK/train.json" >"$WORK/b1c.json"
plain=$(peak "$WORK/b1.json") || fail "calibration without checkpointing failed: $(tail -3 "$WORK/peak.log")"
ckpt=$(peak "$WORK/b1c.json") || fail "calibration with checkpointing failed: $(tail -3 "$WORK/peak.log")"
gap=$((plain - ckpt))
[ "$gap" -gt 200000 ] || fail "calibration: checkpointing saves only ${gap}K (${plain}K without, ${ckpt}K with)"
CAP_KB=$((ckpt + gap / 2))
echo "calibration: batch 1 peaks at ${plain}K without checkpointing, ${ckpt}K with; cap ${CAP_KB}K ($((SECONDS - t0))s)"

# --- autobatch where the user runs it
t1=$SECONDS
"$AUTOBATCH" --preset json --config "$WORK/train.json" --write --trial-memory-limit "${CAP_KB}K" \
  --batch 1:4 --steps 2 --warmup 1 --kill-grace 2s --no-cache --no-confirm --json "$WORK/r.json" \
  -- "$PY" "$JOB" "$WORK/train.json" >"$WORK/ab.out" 2>&1 || fail "autobatch: exit $? $(tail -8 "$WORK/ab.out")"
R="$WORK/r.json"
echo "autobatch: best $(jqr '.best.micro_batch' "$R") checkpointing $(jqr '.best.checkpointing' "$R"), $(jqr '.summary.trials' "$R") trials ($((SECONDS - t1))s)"
grep -q "^autobatch: micro_batch=1 fits in no cell with the command's own settings (weights [0-9.]* MiB + gradients [0-9.]* MiB (not yet allocated when it failed) + AdamW state [0-9.]* MiB (not yet allocated when it failed) = [0-9.]* MiB of [0-9.]* GiB before any activation); searching again with activation checkpointing on$" "$WORK/ab.out" \
  || fail "no ladder note: $(grep '^autobatch:' "$WORK/ab.out" | head -8)"
assert_eq 1 "$(jqr '.best.micro_batch' "$R")" "best"
assert_eq true "$(jqr '.best.checkpointing' "$R")" "best checkpointing"
assert_eq unchanged "$(jqr '.best.precision' "$R")" "best precision"
assert_eq "checkpointing fits" "$(jqr '.knobs.turned_on | map(.knob + " " + .outcome) | join(",")' "$R")" "knobs.turned_on"
assert_eq 0 "$(jqr '[.trials[] | select(.precision != "unchanged")] | length' "$R")" "bf16 trials"
# The failed batch-1 trial's breakdown, from the probe: the weights and
# AdamW's state once allocated, and room left for activations.
jq -e '[.trials[] | select(.micro_batch == 1 and .checkpointing == false)][0].memory_breakdown
       | .at == "failure" and .params > 0 and .grads_expected == .params and .optimizer_expected >= 2 * .params' "$R" >/dev/null \
  || fail "the failed trial's breakdown: $(jq -c '.trials[2].memory_breakdown' "$R")"

# --- the write-back: the batch and checkpointing, nothing else
diff <(jq -S 'del(.per_device_train_batch_size, .gradient_checkpointing)' "$WORK/train.orig.json") \
     <(jq -S 'del(.per_device_train_batch_size, .gradient_checkpointing)' "$WORK/train.json") >/dev/null \
  || fail "the write-back changed other keys: $(diff "$WORK/train.orig.json" "$WORK/train.json")"
assert_eq 4 "$(diff "$WORK/train.orig.json" "$WORK/train.json" | grep -c '^[<>]')" "diff lines (two lines changed, in place)"
assert_eq true "$(jqr '.gradient_checkpointing' "$WORK/train.json")" "written gradient_checkpointing"
assert_eq 1 "$(jqr '.per_device_train_batch_size' "$WORK/train.json")" "written batch"

# --- the promise: the user's command with the written config trains under the cap
jq '.max_steps = 4' "$WORK/train.json" >"$WORK/fresh.json"
(ulimit -v "$CAP_KB"; exec "$PY" "$JOB" "$WORK/fresh.json") >"$WORK/fresh.log" 2>&1 \
  || fail "a fresh run with the written config failed under the cap: $(tail -3 "$WORK/fresh.log")"
jq '.max_steps = 4 | .per_device_train_batch_size = 1' "$WORK/train.orig.json" >"$WORK/before.json"
if (ulimit -v "$CAP_KB"; exec "$PY" "$JOB" "$WORK/before.json") >"$WORK/before.log" 2>&1; then
  fail "batch 1 without checkpointing trains under the cap: the test's cap is wrong"
fi
pass "batch 1 fits only with checkpointing: turned on, written, and a fresh run trains ($((SECONDS - t0))s)"
assert_no_leftovers
