#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Beyond the batch (issue 29, items 2 and 3): when micro_batch=1 fits in
# no cell, autobatch turns knobs on in order of cost and searches again:
# activation checkpointing first (when --checkpointing was not given and
# the preset places it; numerics unchanged), then bf16 mixed precision,
# only under --allow precision (it changes numerics).  simtrain (hf
# preset flags, 24G device, 4G of weights and optimizer state) takes
# HF's --bf16 and halves its activations, and --optim adamw_bnb_8bit
# keeps a quarter of the optimizer state; a wrapper logs every trial's
# command line, so the test sees what reached the trainer.
#   A  activations 24G a sample: batch 1 fits only with checkpointing
#      (6G): the ladder turns it on, finds 3, and says to run with
#      --gradient_checkpointing true; no --bf16 ever.
#   B  activations 100G a sample, no --allow: checkpointing (25G) is not
#      enough; exit 3, a note names --allow precision, no --bf16 ever.
#   C  the same with --allow precision: checkpointing + bf16 (12.5G)
#      fits 1; the choice and run_with carry --bf16 true.
#   D  --checkpointing off (the user's word): no ladder to checkpointing.
#   F  a trainer that refuses --gradient_checkpointing: exit 3, said.
#   G  weights + AdamW state beyond the device, --allow optim8bit, the
#      command's python3 without bitsandbytes: skipped with one line.
#   H  the same with a bitsandbytes to import: --optim adamw_bnb_8bit
#      makes it fit (after checkpointing, which alone did not).
#   I  weights + AdamW state beyond one device, two ranks, --allow
#      sharding: --fsdp 'full_shard auto_wrap' makes it fit.
#   J  the same with one rank: sharding skipped with one line.
#   K  DeepSpeed: --dry-run shows zero_optimization.stage = 3, read back
#      from a trial's patched copy of the JSON.
#   E  bad input: --allow with a preset that cannot place precision, an
#      unknown knob, optim8bit (not tried yet): exit 2 before any trial.
source "$(dirname "$0")/lib.sh"
cat >"$WORK/wrap.sh" <<EOF
#!/bin/sh
echo "\$*" >>"$WORK/argv.log"
exec "$SIMTRAIN" "\$@"
EOF
chmod +x "$WORK/wrap.sh"
COMMON=(--batch 1:64 --steps 2 --warmup 1 --no-cache --no-confirm --kill-grace 1s)
SIM=(--model-mem 2G --optim-mem 2G --output_dir "$WORK/out")

run() { # NAME WANT_RC ARGS... (autobatch options, then -- and simtrain's)
  local name=$1 want=$2 rc=0
  shift 2
  : >"$WORK/argv.log"
  "$AUTOBATCH" "${COMMON[@]}" --json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1 || rc=$?
  assert_eq "$want" "$rc" "$name: exit status ($(tail -4 "$WORK/$name.out"))"
}

# A: checkpointing makes batch 1 fit.
run A 0 -- "$WORK/wrap.sh" "${SIM[@]}" --act-mem 24G
assert_eq 3 "$(jqr '.best.micro_batch' "$WORK/A.json")" "A: choice"
assert_eq true "$(jqr '.best.checkpointing' "$WORK/A.json")" "A: checkpointing on"
assert_eq unchanged "$(jqr '.best.precision' "$WORK/A.json")" "A: precision"
assert_eq checkpointing "$(jqr '[.knobs.turned_on[].knob] | join(",")' "$WORK/A.json")" "A: turned on"
assert_eq 0 "$(jqr '.knobs.allowed | length' "$WORK/A.json")" "A: allowed"
grep -q '^autobatch: micro_batch=1 fits in no cell with the command.s own settings; searching again with activation checkpointing on$' "$WORK/A.out" \
  || fail "A: no note: $(grep '^autobatch:' "$WORK/A.out" | head -5)"
grep -q '^autobatch: run with:.* --gradient_checkpointing true' "$WORK/A.out" || fail "A: run with: $(grep 'run with' "$WORK/A.out")"
jq -e '.run_with.command | index("--gradient_checkpointing") != null' "$WORK/A.json" >/dev/null || fail "A: run_with lacks checkpointing"
if grep -q -- '--bf16' "$WORK/argv.log"; then fail "A: a trial got --bf16 without --allow precision"; fi
# The first search's trials (checkpointing off) stay in the results.
[ "$(jqr '[.trials[] | select(.checkpointing == false)] | length' "$WORK/A.json")" -ge 1 ] || fail "A: first search's trials missing"
# The user's run at the printed size fits: a fresh run of the command.
"$SIMTRAIN" "${SIM[@]}" --act-mem 24G --per_device_train_batch_size 3 --gradient_checkpointing true --max_steps 5 >"$WORK/A.fresh" 2>&1 \
  || fail "A: a fresh run at the answer failed: $(tail -3 "$WORK/A.fresh")"
pass "A: checkpointing turned on, 3 fits, written as --gradient_checkpointing true"

# B: nothing allowed fits; the note names what to allow next.
run B 3 -- "$WORK/wrap.sh" "${SIM[@]}" --act-mem 100G
grep -q '^autobatch: micro_batch=1 fits in no cell with what is on; --allow precision,optim8bit would let autobatch try bf16 mixed precision (--bf16 true; changes numerics) and an 8-bit optimizer (--optim adamw_bnb_8bit; changes numerics)$' "$WORK/B.out" \
  || fail "B: no note: $(grep '^autobatch:' "$WORK/B.out" | tail -5)"
if grep -q -- '--bf16' "$WORK/argv.log"; then fail "B: a trial got --bf16 without --allow precision"; fi
assert_eq 0 "$(jqr '[.trials[] | select(.precision != "unchanged")] | length' "$WORK/B.json")" "B: bf16 trials"
pass "B: exit 3 without --allow precision, no bf16 trial, the next knob named"

# C: with --allow precision, checkpointing + bf16 fits batch 1.
run C 0 --allow precision -- "$WORK/wrap.sh" "${SIM[@]}" --act-mem 100G
assert_eq 1 "$(jqr '.best.micro_batch' "$WORK/C.json")" "C: choice"
assert_eq bf16 "$(jqr '.best.precision' "$WORK/C.json")" "C: precision"
assert_eq true "$(jqr '.best.checkpointing' "$WORK/C.json")" "C: checkpointing"
assert_eq checkpointing,precision "$(jqr '[.knobs.turned_on[].knob] | join(",")' "$WORK/C.json")" "C: turned on"
assert_eq precision "$(jqr '.knobs.allowed | join(",")' "$WORK/C.json")" "C: allowed"
grep -q '^autobatch: run with:.* --gradient_checkpointing true --bf16 true' "$WORK/C.out" || fail "C: run with: $(grep 'run with' "$WORK/C.out")"
grep -q -- '--bf16 true' "$WORK/argv.log" || fail "C: no trial got --bf16 true"
# Trials before precision was turned on never had --bf16.
[ "$(grep -c -- '--bf16' "$WORK/argv.log")" = "$(jqr '[.trials[] | select(.precision == "bf16")] | length' "$WORK/C.json")" ] \
  || fail "C: --bf16 reached $(grep -c -- '--bf16' "$WORK/argv.log") trials"
"$SIMTRAIN" "${SIM[@]}" --act-mem 100G --per_device_train_batch_size 1 --gradient_checkpointing true --bf16 true --max_steps 5 >"$WORK/C.fresh" 2>&1 \
  || fail "C: a fresh run at the answer failed: $(tail -3 "$WORK/C.fresh")"
pass "C: --allow precision: checkpointing then bf16, batch 1 fits"

# D: --checkpointing off is the user's choice: no ladder to checkpointing.
run D 3 --checkpointing off -- "$WORK/wrap.sh" "${SIM[@]}" --act-mem 24G
assert_eq 0 "$(jqr '[.trials[] | select(.checkpointing)] | length' "$WORK/D.json")" "D: checkpointing trials"
assert_eq 0 "$(jqr '.knobs.turned_on | length' "$WORK/D.json")" "D: turned on"
pass "D: --checkpointing off keeps it off"

# F: a trainer that does not take the flag: the ladder's step crashes the
# command; the answer is that nothing fits (exit 3), said, not a crash.
cat >"$WORK/strict.sh" <<EOF
#!/bin/sh
case " \$* " in *" --gradient_checkpointing "*)
  echo "train.py: error: unrecognized arguments: --gradient_checkpointing true" >&2; exit 2 ;;
esac
exec "$SIMTRAIN" "\$@"
EOF
chmod +x "$WORK/strict.sh"
run F 3 -- "$WORK/strict.sh" "${SIM[@]}" --act-mem 24G
grep -q '^autobatch: turning checkpointing on made the command fail, not run out of memory (see the trial.s output): it may not reach this trainer; micro_batch=1 fits nowhere without it$' "$WORK/F.out" \
  || fail "F: no note: $(grep '^autobatch:' "$WORK/F.out" | tail -5)"
assert_eq "command failed" "$(jqr '.knobs.turned_on[0].outcome' "$WORK/F.json")" "F: outcome"
assert_eq fits "$(jqr '.knobs.turned_on[0].outcome' "$WORK/A.json")" "A: outcome"
pass "F: a knob the trainer refuses: exit 3, said"

# G, H: an 8-bit optimizer (--allow optim8bit) for weights and AdamW's
# state that do not fit (10G + 20G of a 24G device; 8-bit keeps 5G).
# The command runs through python3, whose bitsandbytes decides.
cat >"$WORK/run_sim.py" <<EOF
import os, sys
os.execv("$WORK/wrap.sh", ["wrap.sh"] + sys.argv[1:])
EOF
BIG=(--model-mem 10G --optim-mem 20G --act-mem 256M --output_dir "$WORK/out")
run G 3 --allow optim8bit -- python3 "$WORK/run_sim.py" "${BIG[@]}"
grep -q '^autobatch: --allow optim8bit: the command.s Python cannot import bitsandbytes, so 8-bit optimizers are skipped' "$WORK/G.out" \
  || fail "G: no skip note: $(grep '^autobatch:' "$WORK/G.out" | head -3)"
if grep -q -- 'adamw_bnb_8bit' "$WORK/argv.log"; then fail "G: a trial got --optim adamw_bnb_8bit without bitsandbytes"; fi
assert_eq "optim8bit: the command's Python cannot import bitsandbytes" "$(jqr '.knobs.skipped' "$WORK/G.json")" "G: knobs.skipped"
pass "G: --allow optim8bit without bitsandbytes: skipped with one line, exit 3"
mkdir -p "$WORK/site/bitsandbytes" && : >"$WORK/site/bitsandbytes/__init__.py"
PYTHONPATH="$WORK/site" run H 0 --allow optim8bit -- python3 "$WORK/run_sim.py" "${BIG[@]}"
assert_eq true "$(jqr '.best.optim8bit' "$WORK/H.json")" "H: best optim8bit"
assert_eq checkpointing,optim8bit "$(jqr '[.knobs.turned_on[].knob] | join(",")' "$WORK/H.json")" "H: turned on"
assert_eq "nothing fits,fits" "$(jqr '[.knobs.turned_on[].outcome] | join(",")' "$WORK/H.json")" "H: outcomes"
# Checkpointing did not do it alone; with the 8-bit optimizer both settings
# are searched (the faster wins), each cell's trials all 8-bit.
assert_eq "false,true" "$(jqr '[.max_fit[].checkpointing] | join(",")' "$WORK/H.json")" "H: cells"
assert_eq 36 "$(jqr '.max_fit[] | select(.checkpointing == false) | .micro_batch' "$WORK/H.json")" "H: largest fit without checkpointing"
ckpt_flag=()
[ "$(jqr '.best.checkpointing' "$WORK/H.json")" = true ] && ckpt_flag=(--gradient_checkpointing true)
grep -q '^autobatch: run with:.* --optim adamw_bnb_8bit' "$WORK/H.out" || fail "H: run with: $(grep 'run with' "$WORK/H.out")"
"$SIMTRAIN" "${BIG[@]}" --per_device_train_batch_size "$(jqr '.best.micro_batch' "$WORK/H.json")" "${ckpt_flag[@]}" --optim adamw_bnb_8bit --max_steps 5 >"$WORK/H.fresh" 2>&1 \
  || fail "H: a fresh run at the answer failed: $(tail -3 "$WORK/H.fresh")"
pass "H: --allow optim8bit with bitsandbytes: $(jqr '.best.micro_batch' "$WORK/H.json") fits with adamw_bnb_8bit"

# I, J, K: sharding (--allow sharding) for weights and AdamW's state that
# do not fit one device (20G + 20G): simtrain's two ranks with HF's
# --fsdp full_shard hold half each.
SHARD=(--nproc 2 --model-mem 20G --optim-mem 20G --act-mem 256M --output_dir "$WORK/out")
run I 0 --world-size 2 --allow sharding -- "$WORK/wrap.sh" "${SHARD[@]}"
assert_eq true "$(jqr '.best.sharding' "$WORK/I.json")" "I: best sharding"
assert_eq "checkpointing,sharding" "$(jqr '[.knobs.turned_on[].knob] | join(",")' "$WORK/I.json")" "I: turned on"
grep -q "^autobatch: run with:.* --fsdp 'full_shard auto_wrap'" "$WORK/I.out" || fail "I: run with: $(grep 'run with' "$WORK/I.out")"
"$SIMTRAIN" "${SHARD[@]}" --per_device_train_batch_size "$(jqr '.best.micro_batch' "$WORK/I.json")" --fsdp "full_shard auto_wrap" \
  $([ "$(jqr '.best.checkpointing' "$WORK/I.json")" = true ] && echo --gradient_checkpointing true) --max_steps 5 >"$WORK/I.fresh" 2>&1 \
  || fail "I: a fresh run at the answer failed: $(tail -3 "$WORK/I.fresh")"
pass "I: --allow sharding over 2 ranks: $(jqr '.best.micro_batch' "$WORK/I.json") fits with --fsdp full_shard"
run J 3 --allow sharding -- "$WORK/wrap.sh" "${SHARD[@]}"
grep -q '^autobatch: --allow sharding: the command runs one rank (--world-size 1), so sharding is skipped' "$WORK/J.out" \
  || fail "J: no skip note: $(grep '^autobatch:' "$WORK/J.out" | head -3)"
if grep -q -- '--fsdp' "$WORK/argv.log"; then fail "J: a trial got --fsdp with one rank"; fi
pass "J: --allow sharding with one rank: skipped with one line"
# K: DeepSpeed's ZeRO stage, placed in the JSON config: --dry-run reads it
# back from a trial's patched copy.
printf '{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 1,\n  "train_batch_size": 8,\n  "zero_optimization": {"stage": 1}\n}\n' >"$WORK/ds.json"
"$AUTOBATCH" --dry-run --preset deepspeed --config "$WORK/ds.json" --world-size 2 --allow sharding \
  -- "$WORK/wrap.sh" --deepspeed "$WORK/ds.json" >"$WORK/K.out" 2>&1 || fail "K: dry run: $(tail -3 "$WORK/K.out")"
grep -q "^# --allow sharding, if micro_batch=1 fits nowhere: zero_optimization.stage = 3 in the patched copy of $WORK/ds.json$" "$WORK/K.out" \
  || fail "K: $(cat "$WORK/K.out")"
grep -q '"stage": 1' "$WORK/ds.json" || fail "K: the dry run changed ds.json"
pass "K: ZeRO-3 placed in DeepSpeed's JSON (--dry-run)"

# E: bad input, before any trial.
: >"$WORK/argv.log"
echo '{"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}' >"$WORK/train.json"
assert_refused "--allow with json preset" "--allow precision: preset 'json' has no place for mixed precision" "$WORK/argv.log" \
  "${COMMON[@]}" --preset json --config "$WORK/train.json" --allow precision -- "$WORK/wrap.sh" "$WORK/train.json"
assert_refused "--allow bogus" "--allow 'bogus': 'bogus' is not a knob" "$WORK/argv.log" \
  "${COMMON[@]}" --allow bogus -- "$WORK/wrap.sh"
assert_refused "--allow optim8bit with json preset" "--allow optim8bit: preset 'json' has no place for the optimizer" "$WORK/argv.log" \
  "${COMMON[@]}" --preset json --config "$WORK/train.json" --allow optim8bit -- "$WORK/wrap.sh" "$WORK/train.json"
pass "E: bad --allow refused before any trial"
assert_no_leftovers
