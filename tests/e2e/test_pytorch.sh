#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real PyTorch job (examples/pytorch/train_tts.py on Debian's CPU torch)
# under --trial-memory-limit: the same largest micro-batch as a direct
# bisection under `ulimit -v` (the in-process probe loaded, as it is for
# every Python trial); checkpointing raises it; a fixed global batch with
# accumulation; and a
# 2-rank gloo job where rank 1 runs out of memory while rank 0 waits in
# all_reduce, torn down within seconds.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_tts.py"
# Half a sample (of about 7 MB) from both 27 and 28: at 800000K, 27's
# address space ended within 4 kB of the cap, so the probe's own few
# hundred kB decided it (measured 2026-11-27: 27 peaks at 800184-800376K
# with the probe, 28 fails at 803500K).
LIMIT_KB=803500                      # as --trial-memory-limit 803500K
COMMON=(--steps 3 --warmup 1 --trial-memory-limit ${LIMIT_KB}K --no-cache --kill-grace 2s)
# The same address-space use every run: glibc's dynamic mmap threshold
# makes it depend on the history of frees (sizes near the limit then fit
# or fail by luck), and Python's hash seed changes dict sizes.
export OMP_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0

# --- direct bisection under ulimit -v, the way a person would do it
fits() { # micro-batch
  (ulimit -v $LIMIT_KB; "$PY" "$TRAIN" --worst_case --per_device_train_batch_size "$1" \
     --max_steps 4 >/dev/null 2>&1)
}
lo=1 hi=65
fits 1 || fail "direct: batch 1 does not fit under the limit"
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if fits $mid; then lo=$mid; else hi=$mid; fi
done
direct=$lo
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:64 --json "$WORK/cpu.json" -- "$PY" "$TRAIN" --worst_case \
  >"$WORK/cpu.out" 2>&1 || fail "cpu: exit $? $(tail -3 "$WORK/cpu.out")"
# The largest fit is the direct one, or one below it when the confirmation
# run (20 steps, the probe loaded) ran out of memory at the direct size:
# at this cap the direct size's address space is within 0.1% of the limit
# after 20 steps, and the probe's own few hundred kB can tip it.
got=$(jqr '.max_fit[0].micro_batch' "$WORK/cpu.json")
if [ "$got" != "$direct" ]; then
  assert_eq "$((direct - 1))" "$got" "largest micro-batch vs ulimit -v bisection ($direct)"
  assert_eq oom "$(jq -r --argjson d "$direct" '[.confirm[] | select(.micro_batch == $d) | .outcome][0]' "$WORK/cpu.json")" \
    "largest fit $got below the direct $direct without a failed confirmation at $direct"
fi
assert_eq "$((got + 1))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/cpu.json")" "smallest failure"
best=$(jqr '.best.micro_batch' "$WORK/cpu.json")
(ulimit -v $LIMIT_KB; "$PY" "$TRAIN" --worst_case --per_device_train_batch_size "$best" --max_steps 21 \
   >"$WORK/best.out" 2>&1) || fail "the chosen $best does not train 21 steps in a fresh run: $(tail -2 "$WORK/best.out")"
assert_eq true "$(jqr '.summary.confirmed' "$WORK/cpu.json")" "the choice confirmed"
grep -q "DefaultCPUAllocator: can't allocate memory" <(jqr '.trials[].evidence' "$WORK/cpu.json") \
  || fail "cpu: no real allocator failure as evidence"
pass "CPU under ${LIMIT_KB}K: largest micro-batch $got (ulimit -v bisection: $direct); the chosen $best trains 21 steps in a fresh run"

# --- checkpointing: a larger micro-batch fits, and the same size runs slower
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:64 --checkpointing on --json "$WORK/ck.json" -- \
  "$PY" "$TRAIN" --worst_case >"$WORK/ck.out" 2>&1 || fail "ckpt: exit $? $(tail -3 "$WORK/ck.out")"
ck=$(jqr '.max_fit[0].micro_batch' "$WORK/ck.json")
[ "$ck" -gt "$direct" ] || fail "checkpointing: largest $ck, not above $direct"
# (Throughput is not compared here: these are two separate runs on a
# shared machine, and timings are compared only within one run.)
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .steps_from != "probe")] | length' "$WORK/ck.json")" \
  "checkpointing: every fit measured by the probe"
pass "checkpointing: largest $ck (vs $direct)"

# --- a fixed global batch with accumulation: micro x accum = 16
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:64 --global-batch 16 --grad-accum 1,2,4,8 --verbose \
  --json "$WORK/gb.json" -- "$PY" "$TRAIN" --worst_case >"$WORK/gb.out" 2>&1 \
  || fail "global batch: exit $? $(tail -3 "$WORK/gb.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.micro_batch * .grad_accum != 16)] | length' "$WORK/gb.json")" \
  "global batch kept"
grep -q -- "--gradient_accumulation_steps 4" "$WORK/gb.out" || fail "accumulation not passed to the trainer"
b=$(jqr '.best | "\(.micro_batch)x\(.grad_accum)"' "$WORK/gb.json")
[ "$(jqr '.best.micro_batch * .best.grad_accum' "$WORK/gb.json")" = 16 ] || fail "global batch: best $b"
pass "global batch 16: best $b in $(jqr '.summary.trials' "$WORK/gb.json") trials"

# --- 2 gloo ranks under torch.distributed.run; rank 1 runs out of memory
# (Debian's torch 1.13 torchrun needs --redirects/--tee spelled out on
# Python 3.11: its Std.from_str("0") returns None there.  Its --standalone
# store is at the fixed port 29400: another test's ranks would share it,
# and fail when this one exits, so the store takes a free port.)
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:16 --json "$WORK/ddp.json" -- \
  "$PY" -m torch.distributed.run --rdzv_backend c10d --rdzv_endpoint localhost:0 --nnodes 1 \
  --nproc_per_node 2 --redirects 1 --tee 2 \
  "$TRAIN" --worst_case_rank 1 >"$WORK/ddp.out" 2>&1 || fail "ddp: exit $? $(tail -5 "$WORK/ddp.out")"
[ "$(jqr '[.trials[] | select(.outcome == "oom")] | length' "$WORK/ddp.json")" -ge 1 ] || fail "ddp: no OOM trial"
worst=$(jqr '[.trials[] | select(.outcome == "oom") | .teardown_s] | max' "$WORK/ddp.json")
awk -v t="$worst" 'BEGIN { exit !(t < 4) }' || fail "ddp: teardown took ${worst}s after the OOM line"
[ "$(jqr '[.trials[] | select(.outcome == "fit")] | length' "$WORK/ddp.json")" -ge 1 ] || fail "ddp: the search did not go on"
assert_no_leftovers
pass "2 gloo ranks: torn down ${worst}s after rank 1's OOM line; best $(jqr '.best.micro_batch' "$WORK/ddp.json")"
