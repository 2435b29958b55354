#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch predict --gpu: CUDA traces replayed with real driver
# allocations on a GPU held back to the asked capacity.  No GPU here: a
# fake libcuda.so.1 (tests/fake_cuda) stands in for the driver, found
# through LD_LIBRARY_PATH as the real one would be.  Checked: the device's
# answer equals the simulation's when the device allocates exactly; a
# device that hands out coarse pieces fits less; every allocation, held
# back or replayed, is given back; a missing driver, a wrong GPU number,
# a card too small for the capacity and CPU traces each get their line.
source "$(dirname "$0")/lib.sh"
[ -n "${FAKE_CUDA_DIR:-}" ] || skip "built without the CUDA toolkit: no GPU replay"
[ -e "$FAKE_CUDA_DIR/libcuda.so.1" ] || fail "no fake libcuda.so.1 in $FAKE_CUDA_DIR"
MiB=1048576
OUTSIDE=500000000

# Traces at 2 and 3: weights made before the step (200 MiB, freed and
# made again, as an optimizer's update does: step 2 frees the copy step 1
# made, at its address), a kept activation of 3 MiB a sample, a temporary
# of 5 MiB a sample.
trace() { # dir batch device
  local b=$2 d=$3 ev
  ev() { # the weights' old and new address
    printf 'a %s %d 1\na %s %d 2\nf %s %d 2\nf %s %d %d\na %s %d %d\nf %s %d 1' \
      "$d" $((3 * MiB * b)) "$d" $((5 * MiB * b)) "$d" $((5 * MiB * b)) \
      "$d" $((200 * MiB)) "$1" "$d" $((200 * MiB)) "$2" "$d" $((3 * MiB * b))
  }
  {
    printf 'autobatch-trace 1\npid 1\nrank 0\nworld 1\ntorch 2.8.0\nvm_peak_kb 1000\n'
    printf 'vm_size_kb 1000\ncuda_reserved %d\ncuda_allocated %d\ncuda_outside %d\n' \
      $((200 * MiB)) $((200 * MiB)) $OUTSIDE
    printf 'step 1\n%s\nstep 2\n%s\nend 12\n' "$(ev 3 4)" "$(ev 4 3)"
  } >"$1/accum1-ckptoff-b$b.txt"
}
mkdir -p "$WORK/g" "$WORK/c"
trace "$WORK/g" 2 g
trace "$WORK/g" 3 g
trace "$WORK/c" 2 c
trace "$WORK/c" 3 c
CAP=$((OUTSIDE + 1024 * MiB)) # 1 GiB left to the allocator

fake() { # env... -- autobatch args
  env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" FAKE_CUDA_REPORT="$WORK/fake.report" "$@"
}

# --- no driver: one line naming it, exit 2
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  set +e
  "$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu 0 >"$WORK/nodrv.out" 2>&1
  rc=$?
  set -e
  assert_eq 2 "$rc" "predict --gpu without a driver: exit"
  assert_eq 1 "$(wc -l <"$WORK/nodrv.out")" "one line"
  grep -q "no CUDA driver: cannot load libcuda.so.1" "$WORK/nodrv.out" || fail "$(cat "$WORK/nodrv.out")"
  pass "no driver: $(cat "$WORK/nodrv.out")"
fi

# --- an exact device: the replay on it agrees with the simulation
fake FAKE_CUDA_TOTAL=$((80 * 1024 * MiB)) FAKE_CUDA_USED=$((2 * 1024 * MiB)) FAKE_CUDA_GRANULE=1 \
  "$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu 0 --batch 1:1000 >"$WORK/exact.out" \
  || fail "predict --gpu: exit $? $(cat "$WORK/exact.out")"
cat "$WORK/exact.out"
sim=$(sed -n 's/^accum 1, ckpt off: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/exact.out")
dev=$(sed -n 's/^  on GPU 0: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/exact.out")
[ -n "$sim" ] && [ -n "$dev" ] || fail "no predictions: $(cat "$WORK/exact.out")"
# By hand: 200 MiB (a 200 MiB segment) + 3b MiB kept + 5b MiB temporary,
# each rounded up to 2 MiB (or a 20 MiB segment under 10 MiB) within 1 GiB.
assert_eq 102 "$sim" "simulated largest fit"
assert_eq "$sim" "$dev" "the exact device's largest fit"
grep -q "77.00 GiB held back, 1.00 GiB left to the allocator" "$WORK/exact.out" \
  || fail "held back wrong: $(cat "$WORK/exact.out")"
read -r _ allocs _ frees _ live _ <"$WORK/fake.report"
assert_eq 0 "$live" "allocations left on the device"
assert_eq "$allocs" "$frees" "allocations and frees"
pass "exact device: $dev, as simulated ($allocs driver allocations, all given back)"

# --- a device that hands out 64 MiB pieces fits less than the simulation says
fake FAKE_CUDA_TOTAL=$((80 * 1024 * MiB)) FAKE_CUDA_GRANULE=$((64 * MiB)) \
  "$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu 0 --batch 1:1000 >"$WORK/coarse.out" \
  || fail "predict --gpu coarse: exit $?"
coarse=$(sed -n 's/^  on GPU 0: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/coarse.out")
[ -n "$coarse" ] && [ "$coarse" -lt "$sim" ] || fail "coarse device: '$coarse' (simulated $sim)"
read -r _ allocs _ frees _ live _ <"$WORK/fake.report"
assert_eq 0 "$live" "allocations left on the coarse device"
pass "coarse device: $coarse < $sim"

# --- a card smaller than the capacity: the simulated answer, and why not replayed
fake FAKE_CUDA_TOTAL=$((512 * MiB)) "$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu 0 \
  >"$WORK/small.out" || fail "predict --gpu small: exit $?"
grep -q "^  on GPU 0: not replayed: the device has 0.50 GiB free, less than the 1.00 GiB asked for" \
  "$WORK/small.out" || fail "$(cat "$WORK/small.out")"
pass "small card: $(sed -n 2p "$WORK/small.out")"

# --- CPU traces: nothing to replay on a GPU
fake "$AUTOBATCH" predict "$WORK/c" --capacity 4G --gpu 0 >"$WORK/cpu.out" || fail "cpu traces: exit $?"
grep -q "^  on GPU 0: not replayed: the traces were recorded on the CPU" "$WORK/cpu.out" \
  || fail "$(cat "$WORK/cpu.out")"

# --- a GPU that is not there, a bad number
set +e
fake "$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu 3 >"$WORK/gpu3.out" 2>&1
rc3=$?
"$AUTOBATCH" predict "$WORK/g" --capacity $CAP --gpu one >"$WORK/gpux.out" 2>&1
rcx=$?
set -e
assert_eq 2 "$rc3" "--gpu 3 exit"
grep -q "GPU 3: cuDeviceGet failed: invalid device ordinal" "$WORK/gpu3.out" || fail "$(cat "$WORK/gpu3.out")"
assert_eq 2 "$rcx" "--gpu one exit"
grep -q "a GPU number such as 0" "$WORK/gpux.out" || fail "$(cat "$WORK/gpux.out")"
pass "refusals: $(cat "$WORK/gpu3.out")"
