#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# How knobs reach the command: the hf preset replaces flags in place
# (--flag V and --flag=V, never duplicated); the env preset only sets the
# AUTOBATCH_* variables of DESIGN.md 2.2.
source "$(dirname "$0")/lib.sh"

# hf: the command's own flags are replaced; simtrain prints where each knob
# came from, and rejects nothing, so look at what it saw.
"$AUTOBATCH" --batch 1:64 --json "$WORK/hf.json" --verbose -- "$SIMTRAIN" --capacity 8G \
  --per_device_train_batch_size 3 --gradient_accumulation_steps=1 --max_steps 999 \
  >/dev/null 2>"$WORK/hf.err" || fail "hf: exit $?"
want=$("$SIMTRAIN" --capacity 8G --max_steps 7 --print-max)
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/hf.json")" "hf: max micro-batch"
grep -q "knobs micro_batch=$want (flag)" "$WORK/hf.err" || fail "hf: simtrain did not get the flag"
line=$(grep -m1 '^autobatch: \$' "$WORK/hf.err")
for f in --per_device_train_batch_size --max_steps; do
  [ "$(grep -o -- "$f " <<<"$line" | wc -l)" = 1 ] || fail "hf: $f duplicated: $line"
done
grep -q -- "--gradient_accumulation_steps=1 " <<<"$line" || fail "hf: --flag=V form not kept: $line"
pass "hf preset replaces flags in place"

# env: only the variables; simtrain reads them with --knobs-from-env.
"$AUTOBATCH" --preset env --batch 1:64 --json "$WORK/env.json" -- "$SIMTRAIN" --capacity 8G \
  --knobs-from-env --max_steps 7 >/dev/null 2>"$WORK/env.err" || fail "env: exit $?"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/env.json")" "env: max micro-batch"
grep -q "knobs micro_batch=$want (env)" "$WORK/env.err" || fail "env: simtrain did not read the env"
pass "env preset"

# Every trial sees the variables of DESIGN.md 2.2.
"$AUTOBATCH" --preset env --quiet --batch 2:2 --steps 1 --warmup 0 --no-confirm --json "$WORK/vars.json" -- sh -c \
  'env | grep ^AUTOBATCH_ | sort > "$0"; echo "{\"step\": 1, \"samples\": 2, \"time\": 1}" >> "$AUTOBATCH_REPORT"' \
  "$WORK/vars" >/dev/null 2>&1 || fail "vars: exit $?"
for v in AUTOBATCH_TRIAL=1 AUTOBATCH_MICRO_BATCH=2 AUTOBATCH_GRAD_ACCUM=1 \
         AUTOBATCH_CHECKPOINTING=0 AUTOBATCH_MAX_STEPS=3; do  # warm-up + 3 x --steps
  grep -qx "$v" "$WORK/vars" || fail "vars: $v missing: $(cat "$WORK/vars")"
done
grep -q '^AUTOBATCH_REPORT=/' "$WORK/vars" || fail "vars: AUTOBATCH_REPORT"
assert_eq true "$(jqr '.max_fit[0].bounded_by == "batch.max"' "$WORK/vars.json")" "vars: bounded"
pass "trial environment"

# --preset auto picks the seed trainers' presets from their real command
# lines and configs (the command here is a stand-in that exits 0 at once:
# only the pick is checked, and a trial that trains nothing is no_steps).
pick() { # want dir command...
  local want=$1 dir=$2; shift 2
  (cd "$dir" && "$AUTOBATCH" --preset auto --batch 1:1 --steps 1 --warmup 0 --no-cache -- "$@") \
    >"$WORK/pick.out" 2>&1 || true
  grep -q "picked '$want'" "$WORK/pick.out" || fail "auto: expected '$want': $(cat "$WORK/pick.out")"
}
mkdir -p "$WORK/coqui" "$WORK/orpheus" "$WORK/plain"
cp "$AB_SOURCE_DIR/tests/corpus/coqui-TTS/tacotron2-DDC.json" "$WORK/coqui/config.json"
sed -i 's/"max_seq_len": 153/"max_seq_len": Infinity/' "$WORK/coqui/config.json"
grep -q '"max_seq_len": Infinity' "$WORK/coqui/config.json" || fail "auto: fixture lacks Infinity"
printf 'TTS_dataset: x\nbatch_size: 1\nsave_folder: out\n' >"$WORK/orpheus/config.yaml"
pick coqui "$WORK/coqui" sh -c 'exit 0' python -m TTS.bin.train_tts --config_path config.json
pick orpheus "$WORK/orpheus" sh -c 'exit 0' python train.py
pick f5-tts-finetune "$WORK/plain" sh -c 'exit 0' accelerate launch f5-tts_finetune-cli --batch_size_per_gpu 3200
pick f5-tts "$WORK/plain" sh -c 'exit 0' accelerate launch src/f5_tts/train/train.py --config-name F5TTS_v1_Base
pick parler-tts "$WORK/plain" sh -c 'exit 0' accelerate launch run_parler_tts_training.py "$AB_SOURCE_DIR/tests/corpus/parler-tts/starting_point_v1.json"
pass "--preset auto picks coqui, orpheus, f5-tts-finetune, f5-tts and parler-tts"
