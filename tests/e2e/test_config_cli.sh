#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch config get/set: byte-exact edits of real configs, refusals
# that leave the file untouched, read-only files, atomic replacement.
source "$(dirname "$0")/lib.sh"
C="$AB_SOURCE_DIR/tests/corpus"

# set FILE KEY OLD NEW LINE: only line LINE changes, OLD -> NEW (first
# occurrence on that line); get returns NEW; setting OLD back restores
# the original byte for byte.
roundtrip() {
  local file=$1 key=$2 old=$3 new=$4 line=$5
  local f="$WORK/$(basename "$file")"
  cp "$C/$file" "$f"
  "$AUTOBATCH" config set "$f" "$key=$new" || fail "$file: set $key"
  sed "${line}s/$old/$new/" "$C/$file" > "$WORK/expected"
  cmp -s "$f" "$WORK/expected" || { diff "$WORK/expected" "$f" | head >&2; fail "$file: $key: bytes"; }
  assert_eq "$new" "$("$AUTOBATCH" config get "$f" "$key")" "$file: get $key"
  "$AUTOBATCH" config set "$f" "$key=$old" || fail "$file: set back"
  cmp -s "$f" "$C/$file" || fail "$file: not restored byte for byte"
  pass "$file: $key $old -> $new"
}

roundtrip F5-TTS/F5TTS_v1_Base.yaml datasets.batch_size_per_gpu 38400 19200 7
roundtrip F5-TTS/F5TTS_v1_Base.yaml model.arch.checkpoint_activations False True 37
roundtrip parler-tts/starting_point_v1.json per_device_train_batch_size 6 12 47
roundtrip parler-tts/starting_point_v1.json gradient_checkpointing false true 46
roundtrip coqui-TTS/test_tacotron2_config.json batch_size 8 16 64
roundtrip vits/ljs_base.json train.batch_size 64 128 10
roundtrip NeMo/quartznet_15x5.yaml model.train_ds.batch_size 32 64 15
roundtrip vall-e/config.yaml hyperparameters.batch_size 16 8 50
roundtrip accelerate/fsdp.yaml fsdp_config.fsdp_activation_checkpointing false true 9

# several pairs are written once; a bad one means nothing is written
f="$WORK/ds.json"
cp "$C/CosyVoice/ds_stage2.json" "$f"
"$AUTOBATCH" config set "$f" train_micro_batch_size_per_gpu=4 gradient_accumulation_steps=8
assert_eq 4 "$("$AUTOBATCH" config get "$f" train_micro_batch_size_per_gpu)" "multi-set micro"
assert_eq 8 "$("$AUTOBATCH" config get "$f" gradient_accumulation_steps)" "multi-set accum"
cp "$f" "$WORK/before"
set +e
"$AUTOBATCH" config set "$f" gradient_accumulation_steps=2 no.such.parent.key=1 2>"$WORK/err"
rc=$?
set -e
assert_eq 2 "$rc" "partial multi-set: exit status"
cmp -s "$f" "$WORK/before" || fail "partial multi-set changed the file"
pass "config set with several pairs is all or nothing"

# refusals: exit 2, one line, file untouched
refuse() { # file key=value expected-text
  local f=$1 kv=$2 want=$3
  cp "$f" "$WORK/before"
  set +e
  "$AUTOBATCH" config set "$f" "$kv" 2>"$WORK/err"
  local rc=$?
  set -e
  assert_eq 2 "$rc" "refuse $kv: exit status"
  grep -q -- "$want" "$WORK/err" || fail "refuse $kv: expected '$want' in: $(cat "$WORK/err")"
  cmp -s "$f" "$WORK/before" || fail "refuse $kv: the file changed"
  [ -z "$(ls -A "$(dirname "$f")" | grep autobatch || true)" ] || fail "refuse $kv: temp file left"
  pass "refused $kv: $(head -1 "$WORK/err")"
}
cp "$C/NeMo/quartznet_15x5.yaml" "$WORK/nemo.yaml"
refuse "$WORK/nemo.yaml" "model.sample_rate=8000" "alias\|anchor"
refuse "$WORK/nemo.yaml" "model.nope.deeper=1" "not"
refuse "$WORK/nemo.yaml" "model.train_ds=1" "scalar\|mapping"
printf 'a: 1\nb: [1, 2\n' > "$WORK/bad.yaml"
refuse "$WORK/bad.yaml" "a=2" "line"
printf '{"a": 1, "a": 2}\n' > "$WORK/dup.json"
refuse "$WORK/dup.json" "a=3" "ambiguous\|duplicate"
cp "$C/GPT-SoVITS/s1.yaml" "$WORK/ro.yaml"
chmod 444 "$WORK/ro.yaml"
refuse "$WORK/ro.yaml" "train.batch_size=4" "read-only"
set +e
"$AUTOBATCH" config get "$WORK/missing.yaml" a 2>"$WORK/err"; rc=$?
set -e
assert_eq 2 "$rc" "get on a missing file"
grep -q "cannot read" "$WORK/err" || fail "missing file message: $(cat "$WORK/err")"

# a symlink stays a symlink and its target is edited; the mode is kept
cp "$C/GPT-SoVITS/s1.yaml" "$WORK/real.yaml"
chmod 640 "$WORK/real.yaml"
ln -s real.yaml "$WORK/link.yaml"
"$AUTOBATCH" config set "$WORK/link.yaml" train.batch_size=12
[ -L "$WORK/link.yaml" ] || fail "symlink replaced by a file"
assert_eq 12 "$("$AUTOBATCH" config get "$WORK/real.yaml" train.batch_size)" "symlink target edited"
assert_eq 640 "$(stat -c %a "$WORK/real.yaml")" "mode kept"
pass "symlink and mode"
