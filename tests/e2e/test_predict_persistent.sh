#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch predict on CUDA traces counts the model's own memory: the
# weights and optimizer state live across the steps (the header's
# allocated bytes) take their room before the step's.  10 GiB of them and
# a 3 MiB-a-sample step in 12 GiB with 500 MB outside PyTorch: the
# allocator has 12 GiB - 500000000 - 10 GiB = 1571.2 MiB for the step's
# 3b MiB, rounded up to 2 MiB: 523 (a replay of the step alone says 3936).
source "$(dirname "$0")/lib.sh"
MiB=1048576
mkdir -p "$WORK/t"
for b in 2 3; do
  s=$((3 * MiB * b))
  printf 'autobatch-trace 1\npid 1\nrank 0\nworld 1\ntorch 2.8.0\nvm_peak_kb 1000\nvm_size_kb 1000\n' \
    >"$WORK/t/accum1-ckptoff-b$b.txt"
  printf 'cuda_reserved %d\ncuda_allocated %d\ncuda_outside 500000000\n' \
    $((10260 * MiB)) $((10240 * MiB)) >>"$WORK/t/accum1-ckptoff-b$b.txt"
  printf 'step 1\na g %d 1\nf g %d 1\nstep 2\na g %d 1\nf g %d 1\nend 4\n' $s $s $s $s \
    >>"$WORK/t/accum1-ckptoff-b$b.txt"
done
"$AUTOBATCH" predict "$WORK/t" --capacity 12G --batch 1:8192 >"$WORK/p.out" || fail "predict: exit $?"
cat "$WORK/p.out"
got=$(sed -n 's/^accum 1, ckpt off: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/p.out")
b=$(( (12 * 1024 * MiB - 500000000 - 10240 * MiB) / (2 * MiB) * 2 / 3 ))
assert_eq "$b" "$got" "largest micro-batch with 10 GiB kept"
assert_eq 523 "$got" "the worked figure"
pass "persistent memory counted: $got"
