#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end with config files: tune simtrain reading its knobs from a
# YAML (F5-TTS, Hydra overrides, frames) and from a JSON (Parler-TTS, the
# script's positional argument); trials never touch the user's file; the
# diff is printed; --write applies exactly the expected bytes.
source "$(dirname "$0")/lib.sh"
C="$AB_SOURCE_DIR/tests/corpus"

# --- F5-TTS: batch in frames, overrides on the command line
cp "$C/F5-TTS/F5TTS_v1_Base.yaml" "$WORK/F5TTS_v1_Base.yaml"
sum=$(sha256sum < "$WORK/F5TTS_v1_Base.yaml")
f5=("$SIMTRAIN" --config "$WORK/F5TTS_v1_Base.yaml" --batch-key datasets.batch_size_per_gpu
    --accum-key optim.grad_accumulation_steps --ckpt-key model.arch.checkpoint_activations
    --batch-unit frames --frames-per-sample 400 --capacity 24G
    --bar-desc "Epoch 1/100" --bar-unit update --bar-postfix update)
read -r _ want < <("${f5[@]}" --max_steps 7 --print-max)
"$AUTOBATCH" --preset auto --config "$WORK/F5TTS_v1_Base.yaml" --batch 400:76800:400 \
 --json "$WORK/f5.json" -- "${f5[@]}" >"$WORK/f5.out" 2>"$WORK/f5.err" || fail "f5: exit $? $(tail -3 "$WORK/f5.err")"
grep -q "picked 'f5-tts'" "$WORK/f5.err" || fail "f5: --preset auto did not pick f5-tts"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/f5.json")" "f5: max frames"
assert_eq frames "$(jqr '.space.unit' "$WORK/f5.json")" "f5: unit"
assert_eq "$sum" "$(sha256sum < "$WORK/F5TTS_v1_Base.yaml")" "f5: tuning touched the config"
best=$(jqr '.best.micro_batch' "$WORK/f5.json")
grep -q "^+  batch_size_per_gpu: $best  # 8 GPUs" "$WORK/f5.out" || fail "f5: no diff: $(cat "$WORK/f5.out")"
grep -q "add --write" "$WORK/f5.out" || fail "f5: no hint to --write"
# now with --write: exactly line 7's value changes
"$AUTOBATCH" --quiet --preset f5-tts --config "$WORK/F5TTS_v1_Base.yaml" --batch 400:76800:400 --write \
  --json "$WORK/f5w.json" \
  -- "${f5[@]}" >"$WORK/f5w.out" 2>&1 || fail "f5 --write: exit $?"
best=$(jqr '.best.micro_batch' "$WORK/f5w.json")
sed "7s/38400/$best/" "$C/F5-TTS/F5TTS_v1_Base.yaml" > "$WORK/expected.yaml"
cmp "$WORK/expected.yaml" "$WORK/F5TTS_v1_Base.yaml" || fail "f5: written bytes differ"
pass "f5-tts: largest fit $want frames, chose $best, written byte-exactly"

# --- Parler-TTS: the JSON is the script's positional argument
cp "$C/parler-tts/starting_point_v1.json" "$WORK/parler.json"
sum=$(sha256sum < "$WORK/parler.json")
parler=("$SIMTRAIN" "$WORK/parler.json" --capacity 16G --optim-mem 4G --bar-desc "Train steps ... ")
want=$("${parler[@]}" --max_steps 7 --print-max)
"$AUTOBATCH" --preset parler-tts --batch 1:128 --json "$WORK/p.json" --verbose -- "${parler[@]}" \
  >"$WORK/p.out" 2>"$WORK/p.err" || fail "parler: exit $? $(tail -3 "$WORK/p.err")"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/p.json")" "parler: max micro-batch"
assert_eq "$sum" "$(sha256sum < "$WORK/parler.json")" "parler: tuning touched the config"
grep -q "knobs micro_batch=$want (config)" "$WORK/p.err" || fail "parler: simtrain did not read the copy"
grep -q "parler.autobatch-trial-" "$WORK/p.err" || fail "parler: trials were not given a copy"
[ -z "$(ls "$WORK" | grep autobatch-trial || true)" ] || fail "parler: temporary copies left behind"
# accumulation comes from the file (4) and is kept
assert_eq 4 "$(jqr '.trials[0].grad_accum' "$WORK/p.json")" "parler: grad_accum from the file"
"$AUTOBATCH" --quiet --preset parler-tts --batch 1:128 --write --json "$WORK/pw.json" \
  -- "${parler[@]}" >/dev/null 2>&1 || fail "parler --write: exit $?"
best=$(jqr '.best.micro_batch' "$WORK/pw.json")
sed "47s/\"per_device_train_batch_size\": 6/\"per_device_train_batch_size\": $best/" \
  "$C/parler-tts/starting_point_v1.json" > "$WORK/expected.json"
cmp "$WORK/expected.json" "$WORK/parler.json" || fail "parler: written bytes differ"
pass "parler-tts: largest fit $want, chose $best, written byte-exactly"

# --- the config replaced by a directory mid-run: nothing is written, exit 2
cp "$C/parler-tts/starting_point_v1.json" "$WORK/moving.json"
"$AUTOBATCH" --quiet --preset parler-tts --batch 1:128 --write -- \
  "$SIMTRAIN" "$WORK/moving.json" --capacity 16G --startup-time 300ms --bar-desc "Train steps ... " \
  >"$WORK/m.out" 2>"$WORK/m.err" &
ab=$!
for _ in $(seq 1 100); do grep -q "trial 2" "$WORK/m.err" && break; sleep 0.05; done
mv "$WORK/moving.json" "$WORK/moved.json"
mkdir "$WORK/moving.json"
set +e
wait $ab
rc=$?
set -e
assert_eq 2 "$rc" "replaced by a directory: exit status"
[ -d "$WORK/moving.json" ] && [ -z "$(ls -A "$WORK/moving.json")" ] || fail "the directory was touched"
cmp -s "$WORK/moved.json" "$C/parler-tts/starting_point_v1.json" || fail "the moved file changed"
[ -z "$(ls "$WORK" | grep autobatch || true)" ] || fail "temporary files left: $(ls "$WORK")"
assert_no_leftovers
pass "config replaced by a directory mid-run: refused, nothing written"

# --- interrupted while a trial has a temporary copy: the copy is removed
cp "$C/parler-tts/starting_point_v1.json" "$WORK/int.json"
"$AUTOBATCH" --preset parler-tts --batch 1:128 -- "$SIMTRAIN" "$WORK/int.json" --sample-time 50ms \
  --bar-desc "Train steps ... " \
  >/dev/null 2>"$WORK/i.err" &
ab=$!
for _ in $(seq 1 200); do grep -q "Train steps" "$WORK/i.err" && break; sleep 0.05; done
ls "$WORK" | grep -q "int.autobatch-trial-" || fail "interrupt: no temporary copy during the trial"
kill -INT $ab
set +e; wait $ab; rc=$?; set -e
assert_eq 130 "$rc" "interrupt: exit status"
[ -z "$(ls "$WORK" | grep autobatch-trial || true)" ] || fail "interrupt: temporary copy left"
cmp -s "$WORK/int.json" "$C/parler-tts/starting_point_v1.json" || fail "interrupt: config changed"
assert_no_leftovers
pass "interrupt removes the trial's copy"

# --- a 0600 config's trial copies are 0600 too (they were 0644), and the
# written config keeps 0600
cp "$C/parler-tts/starting_point_v1.json" "$WORK/secret.json"
chmod 600 "$WORK/secret.json"
: >"$WORK/modes"
MODES="$WORK/modes" "$AUTOBATCH" --quiet --preset parler-tts --batch 1:8 --write --json "$WORK/s.json" -- \
  sh -c 'for a; do case $a in *.json) stat -c %a "$a" >>"$MODES";; esac; done; exec "$@"' sh \
  "$SIMTRAIN" "$WORK/secret.json" --capacity 16G --bar-desc "Train steps ... " >"$WORK/s.out" 2>&1 \
  || fail "0600: exit $? $(tail -3 "$WORK/s.out")"
[ -s "$WORK/modes" ] || fail "0600: the trials' config copies were not seen"
assert_eq 600 "$(sort -u "$WORK/modes" | tr '\n' ' ' | sed 's/ $//')" "mode of every trial copy"
assert_eq 600 "$(stat -c %a "$WORK/secret.json")" "mode of the written config"
pass "a 0600 config gives 0600 trial copies and stays 0600"
