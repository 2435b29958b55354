#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The worst case first (issue 24, item 4) on a real PyTorch trainer whose
# largest batch comes last: examples/pytorch/train_longtail.py (Debian's
# CPU torch), 512 samples of about 16 frames, the last 8 of 256 frames,
# padded per batch, not shuffled.  Under an address-space cap:
#   * direct runs: a full epoch at BIG runs out of memory only at its last
#     batch (after the short ones trained), while SAFE trains through; the
#     largest size N whose full epoch fits lies between them (bisection);
#   * one trial at BIG with the probe's worst case off meets only short
#     batches and "fits"; with the default (auto: the dataset's `lengths`)
#     it meets the long batch within its steps and runs out of memory, and
#     the results record which batch it met (worst_case);
#   * a search with the worst case first picks at most N and at least
#     0.8 N, and the size it picks trains through a fresh full epoch.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_longtail.py"

# ---- the constants (Debian's torch 1.13 on x86-64; see the direct checks)
CAP_KB=770000   # --trial-memory-limit / ulimit -v; a process's VmPeak is ~650 MB
                # of torch before any batch, +~0.4 MB per short sample, +~10 MB
                # per long (256-frame) sample of a batch
SAFE=8          # a full epoch fits: the long batch is 8 x 256 frames (~730 MB)
BIG=16          # a full epoch does not (16 x 256 frames, ~810 MB), yet its
                # short batches (16 x ~20 frames, ~660 MB) fit with room
SAMPLES=512     # samples per epoch; the last 8 are the long ones
BATCHES_BIG=32  # batches per epoch at BIG (512 / 16): the long one is the last
COMMON=(--preset hf --steps 2 --warmup 1 --trial-memory-limit "${CAP_KB}K" --no-cache --kill-grace 1s)
# The same address-space use every run (as in test_pytorch.sh).
export OMP_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
t0=$SECONDS

# --- direct runs under ulimit -v, the way the user's own run would go
epoch() { # micro-batch -> exit status of a full epoch under the cap; output in $WORK/epoch-N.out
  (ulimit -v $CAP_KB; exec "$PY" "$TRAIN" --samples $SAMPLES --per_device_train_batch_size "$1" --epochs 1) \
    >"$WORK/epoch-$1.out" 2>&1
}
epoch $SAFE || fail "direct: a full epoch at $SAFE does not fit under ${CAP_KB}K (adjust the constants): $(tail -2 "$WORK/epoch-$SAFE.out")"
grep -q "epoch 1 done" "$WORK/epoch-$SAFE.out" || fail "direct: the epoch at $SAFE did not finish"
if epoch $BIG; then fail "direct: a full epoch at $BIG fits under ${CAP_KB}K (adjust the constants)"; fi
grep -q "can't allocate memory" "$WORK/epoch-$BIG.out" || fail "direct: $BIG failed without an OOM: $(tail -3 "$WORK/epoch-$BIG.out")"
trained=$(grep -c '^step ' "$WORK/epoch-$BIG.out" || true)
assert_eq $((BATCHES_BIG - 1)) "$trained" "direct: steps trained at $BIG before the long batch"
lo=$SAFE hi=$BIG
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if epoch $mid; then lo=$mid; else hi=$mid; fi
done
N=$lo
pass "direct: a full epoch fits up to $N (of $SAFE..$BIG); at $BIG it trains $trained short batches, then OOMs ($((SECONDS - t0))s)"

# --- one trial at BIG: with the worst case off it meets only short batches
t1=$SECONDS
"$AUTOBATCH" --quiet "${COMMON[@]}" --worst-case off --batch $BIG:$BIG --json "$WORK/off.json" -- \
  "$PY" "$TRAIN" --samples $SAMPLES >"$WORK/off.out" 2>&1 || fail "worst case off: exit $? $(tail -3 "$WORK/off.out")"
assert_eq fit "$(jqr '.trials[0].outcome' "$WORK/off.json")" "worst case off: the trial at $BIG"
# --- ... and with the default it meets the long batch and runs out of memory
rc=0
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch $BIG:$BIG --json "$WORK/on.json" -- \
  "$PY" "$TRAIN" --samples $SAMPLES >"$WORK/on.out" 2>&1 || rc=$?
assert_eq 3 "$rc" "worst case first: exit status (nothing fits) $(tail -3 "$WORK/on.out")"
assert_eq oom "$(jqr '.trials[0].outcome' "$WORK/on.json")" "worst case first: the trial at $BIG"
jqr '.trials[0].evidence' "$WORK/on.json" | grep -q "can't allocate memory" || fail "worst case first: no allocator failure as evidence"
# What the results say about it: the batch the trial met, and the batch
# the model got.
w='.trials[0].worst_case'
assert_eq lengths "$(jqr "$w.mode" "$WORK/on.json")" "worst_case.mode"
assert_eq dataset.lengths "$(jqr "$w.signal" "$WORK/on.json")" "worst_case.signal"
assert_eq true "$(jqr "$w.whole" "$WORK/on.json")" "worst_case.whole"
assert_eq $BATCHES_BIG "$(jqr "$w.batches_seen" "$WORK/on.json")" "worst_case.batches_seen"
assert_eq $((BATCHES_BIG - 1)) "$(jqr "$w.position" "$WORK/on.json")" "worst_case.position: the last batch"
assert_eq 256 "$(jqr "$w.longest" "$WORK/on.json")" "worst_case.longest"
assert_eq $((BIG * 256)) "$(jqr "$w.elems" "$WORK/on.json")" "worst_case.elems"
assert_eq off "$(jqr '.trials[0].worst_case.mode' "$WORK/off.json")" "worst case off: recorded as off"
assert_eq $BIG "$(jqr '.trials[0].batch_seen' "$WORK/off.json")" "batch_seen: the micro-batch the model got"
assert_eq $BIG "$(jqr '.trials[0].probe.seen_per_step' "$WORK/off.json")" "probe.seen_per_step"
pass "results: the trial met batch $(jqr "$w.position" "$WORK/on.json") of $BATCHES_BIG first ($(jqr "$w.elems" "$WORK/on.json") padded frames)"
pass "one trial at $BIG: fits with the worst case off, OOMs with it first ($((SECONDS - t1))s)"

# --- a search with the worst case first: at most N, at least 0.8 N, and
# the choice trains through a fresh full epoch
t2=$SECONDS
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:64 --json "$WORK/search.json" -- "$PY" "$TRAIN" --samples $SAMPLES \
  >"$WORK/search.out" 2>&1 || fail "search: exit $? $(tail -3 "$WORK/search.out")"
got=$(jqr '.max_fit[0].micro_batch' "$WORK/search.json")
[ "$got" != null ] && [ "$got" -le "$N" ] || fail "search: largest fit $got, but a full epoch fits only up to $N"
[ $((got * 10)) -ge $((N * 8)) ] || fail "search: largest fit $got is below 0.8 x $N"
best=$(jqr '.best.micro_batch' "$WORK/search.json")
epoch "$best" || fail "search: the chosen $best does not survive a full epoch: $(tail -2 "$WORK/epoch-$best.out")"
pass "search: largest fit $got (full epoch: $N), chosen $best survives a full epoch ($(jqr '.summary.trials' "$WORK/search.json") trials, $((SECONDS - t2))s)"

# --- a scan that cannot see everything says so, with a margin to keep
"$AUTOBATCH" --worst-case scan --worst-case-scan 0.02s --batch 4:4 --steps 2 --warmup 1 \
  --no-cache --confirm 2 --json "$WORK/scan.json" -- "$PY" "$TRAIN" --samples 40000 \
  >"$WORK/scan.out" 2>&1 || fail "scan: exit $? $(tail -3 "$WORK/scan.out")"
assert_eq "scan false" "$(jqr '.trials[0].worst_case | "\(.mode) \(.whole)"' "$WORK/scan.json")" \
  "scan: the record of a partial scan"
grep -q "warning: the probe saw .* batches of the data .*not all of them.*--headroom" "$WORK/scan.out" \
  || fail "scan: the answer does not say the data was not all seen: $(grep autobatch: "$WORK/scan.out")"
pass "a partial scan is said in the answer, with a margin"
assert_no_leftovers
