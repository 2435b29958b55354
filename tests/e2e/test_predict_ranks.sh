#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch predict on a job of two processes (issue 25, item 5): every
# rank's traces are modelled and the largest need decides.  Uneven shards:
# rank 1 takes 4 MiB a sample, rank 0 3 MiB, each over 10 GiB of its own
# memory (weights, optimizer state) with 500 MB outside PyTorch.  In
# 12 GiB the allocator has 12 GiB - 500000000 - 10 GiB = 1571.2 MiB for
# the step, rounded up to 2 MiB: rank 0 alone holds 523, rank 1 392; the
# answer is 392 and names rank 1.  With equal shards the answer is one
# rank's alone; with rank 1's trace missing at one size, none.
source "$(dirname "$0")/lib.sh"
MiB=1048576

# trace DIR NAME RANK B MIB_PER_SAMPLE
trace() {
  local f="$1/$2" s=$(($5 * MiB * $4))
  printf 'autobatch-trace 1\npid %d\nrank %d\nworld 2\ntorch 2.8.0\nvm_peak_kb 1000\nvm_size_kb 1000\n' \
    $((100 + $3)) "$3" >"$f"
  printf 'cuda_reserved %d\ncuda_allocated %d\ncuda_outside 500000000\n' \
    $((10260 * MiB)) $((10240 * MiB)) >>"$f"
  printf 'step 1\na g %d 1\nf g %d 1\nstep 2\na g %d 1\nf g %d 1\nend 4\n' $s $s $s $s >>"$f"
}

# largest PER: the largest b whose step fits the 1571.2 MiB left (an
# independent calculation: b * PER MiB rounded up to 2 MiB).
largest() {
  local room=$((12 * 1024 * MiB - 500000000 - 10240 * MiB))
  echo $(( room / (2 * MiB) * 2 / $1 ))
}

mkdir -p "$WORK/uneven" "$WORK/equal"
for b in 2 3; do
  trace "$WORK/uneven" "accum1-ckptoff-b$b.txt" 0 $b 3
  trace "$WORK/uneven" "accum1-ckptoff-b$b-rank1.txt" 1 $b 4
  trace "$WORK/equal" "accum1-ckptoff-b$b.txt" 0 $b 3
  trace "$WORK/equal" "accum1-ckptoff-b$b-rank1.txt" 1 $b 3
done

"$AUTOBATCH" predict "$WORK/uneven" --capacity 12G --batch 1:8192 >"$WORK/u.out" \
  || fail "predict uneven: exit $? $(cat "$WORK/u.out")"
cat "$WORK/u.out"
got=$(sed -n 's/^accum 1, ckpt off: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/u.out")
assert_eq "$(largest 4)" "$got" "uneven shards: rank 1's boundary"
assert_eq 392 "$got" "the worked figure"
grep -q "^  rank 1 decides (the largest need of 2 ranks); rank 0 alone would hold 523$" \
  "$WORK/u.out" || fail "the deciding rank not named: $(cat "$WORK/u.out")"

# A grid of 8 (1, 9, ...): within one step of rank 1's boundary.
"$AUTOBATCH" predict "$WORK/uneven" --capacity 12G --batch 1:8192:8 >"$WORK/u8.out" \
  || fail "predict uneven grid 8: exit $?"
g8=$(sed -n 's/^accum 1, ckpt off: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/u8.out")
[ "$g8" -le 392 ] && [ "$g8" -gt $((392 - 8)) ] || fail "grid of 8: $g8, not within a step of 392"
grep -q "^  rank 1 decides" "$WORK/u8.out" || fail "$(cat "$WORK/u8.out")"

"$AUTOBATCH" predict "$WORK/equal" --capacity 12G --batch 1:8192 >"$WORK/e.out" \
  || fail "predict equal: exit $?"
cat "$WORK/e.out"
got=$(sed -n 's/^accum 1, ckpt off: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/e.out")
assert_eq "$(largest 3)" "$got" "equal shards: one rank's boundary"
grep -q "^  rank 0 decides (the largest need of 2 ranks); rank 1 alone would hold 523 too$" \
  "$WORK/e.out" || fail "equal ranks: $(cat "$WORK/e.out")"

# --gpu (a fake driver where the build has the GPU replay): each rank
# replayed with real allocations; rank 1's answer, named.
if [ -n "${FAKE_CUDA_DIR:-}" ] && [ -e "$FAKE_CUDA_DIR/libcuda.so.1" ]; then
  env LD_LIBRARY_PATH="$FAKE_CUDA_DIR" FAKE_CUDA_REPORT="$WORK/fake.report" \
    FAKE_CUDA_TOTAL=$((80 * 1024 * MiB)) FAKE_CUDA_USED=$((2 * 1024 * MiB)) FAKE_CUDA_GRANULE=1 \
    "$AUTOBATCH" predict "$WORK/uneven" --capacity 12G --batch 1:8192 --gpu 0 >"$WORK/g.out" \
    || fail "predict --gpu: exit $? $(cat "$WORK/g.out")"
  cat "$WORK/g.out"
  dev=$(sed -n 's/^  on GPU 0: largest micro-batch \([0-9]*\) .*/\1/p' "$WORK/g.out")
  assert_eq 392 "$dev" "--gpu: rank 1's boundary"
  grep -q "^  on GPU 0: .*; rank 1 decides)$" "$WORK/g.out" || fail "--gpu: $(cat "$WORK/g.out")"
fi

rm "$WORK/uneven/accum1-ckptoff-b3-rank1.txt"
rc=0
"$AUTOBATCH" predict "$WORK/uneven" --capacity 12G --batch 1:8192 >"$WORK/m.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "a rank missing: exit"
grep -q "^accum 1, ckpt off: no prediction: rank 1 of 2 wrote no trace at micro-batch 3$" \
  "$WORK/m.out" || fail "a rank missing: $(cat "$WORK/m.out")"
pass "every rank modelled: rank 1 decides at $((392)), equal ranks at $(largest 3)"
