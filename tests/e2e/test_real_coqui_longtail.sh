#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The worst case first (issue 24, item 4) on the real Coqui TTS trainer
# (PyPI coqui-tts 0.27.5, `python -m TTS.bin.train_tts`, the tiny GlowTTS of
# tests/real/coqui/config.template.json, PyPI's torch 2.8, CPU) with
# long-tailed data (tests/real/coqui/make_longtail.py): 40 clips of 2-3 s
# and 8 of 36-40 s.  Coqui's TTSDataset sorts its samples by audio length,
# shortest first, and the config does not shuffle, so an epoch trains on
# short batches and meets the long clips only in its last two batches.
#   * direct full epochs (tests/real/direct_steps.py stopped at the
#     epoch's last optimizer step): the peak address space at 5 and 6 puts
#     the cap half a sample above 5's, so N = 5 is the largest size whose
#     full epoch fits; under the cap an epoch at 6 trains its short
#     batches and runs out of memory at a long one;
#   * autobatch with its defaults (the worst case first: Coqui's samples'
#     audio_length, else the scan; the confirmation run on) records, for
#     every trial, the batch the trial met first (worst_case: mode lengths
#     or scan, the whole epoch seen, the largest batch being a long one),
#     its largest fit is at most N and at least 0.8 N, the choice is
#     confirmed, and the choice trains through a fresh full epoch under
#     the same cap;
#   * with --worst-case scan (what a loader without a length signal gets),
#     a trial at N+1 scans the whole epoch well within its 30 s, meets its
#     last batch (the longest) first and runs out of memory.
# The choice is the fastest fit, which on a CPU may be below the largest
# one; the 0.8 N bound is on the largest fit it prints (as test_worst_case).
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import TTS, torch" 2>/dev/null || fail "$PY cannot import TTS and torch"
R="$AB_SOURCE_DIR/tests/real/coqui"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" MPLBACKEND=Agg
export TMPDIR="$WORK/tmp"
SHORT=40 LONG=8 CLIPS=48
N_WANT=5   # the cap lies half a sample above a full epoch's peak at 5
mkdir -p "$TMPDIR" "$WORK/project"
t0=$SECONDS
python3 "$R/make_longtail.py" "$WORK/data" --short $SHORT --short-seconds 2:3 --long $LONG --long-seconds 36:40 \
  >/dev/null || fail "make_longtail failed"
sed -e "s|@OUT@|$WORK/project/runs|" -e "s|@DATA@|$WORK/data|" "$R/config.template.json" >"$WORK/project/config.json"
CFG="$WORK/project/config.json"
grep -q '"shuffle": false' "$CFG" || fail "the config shuffles: the long clips would not come last"

# --- direct full epochs: ceil(CLIPS / b) optimizer steps, the last batch included
epoch() { # batch_size cap_kb|unlimited -> VmPeak in kB on stdout, or fails; output in $WORK/epoch-B.log
  local out="$WORK/epoch-$1"
  rm -rf "$WORK/direct-runs"
  sed -e "s|$WORK/project/runs|$WORK/direct-runs|" "$CFG" >"$WORK/direct.json"
  (ulimit -v "$2"; AB_DIRECT_STEPS=$(((CLIPS + $1 - 1) / $1)) exec "$PY" "$AB_SOURCE_DIR/tests/real/direct_steps.py" \
     -m TTS.bin.train_tts --config_path "$WORK/direct.json" --coqpit.batch_size "$1" >"$out.log" 2>&1) || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out.log"
}
N=$N_WANT
pN=$(epoch $N unlimited) || fail "direct: a full epoch at $N failed: $(tail -3 "$WORK/epoch-$N.log")"
pU=$(epoch $((N + 1)) unlimited) || fail "direct: a full epoch at $((N + 1)) failed: $(tail -3 "$WORK/epoch-$((N + 1)).log")"
slope=$((pU - pN))
[ "$slope" -gt 80000 ] || fail "direct: a long sample adds only ${slope}K (${pN}K at $N, ${pU}K at $((N + 1)))"
CAP_KB=$((pN + slope / 2))
echo "calibration: full-epoch VmPeak ${pN}K at $N, ${pU}K at $((N + 1)); cap ${CAP_KB}K ($((SECONDS - t0))s)"
# under the cap, an epoch at N+1 trains its short batches (LONG_AT of
# them: the first holding a long clip is batch LONG_AT, from 0), then runs
# out of memory at a long one
B=$((N + 1))
LONG_AT=$((SHORT / B))
if epoch $B "$CAP_KB" >/dev/null; then fail "direct: a full epoch at $B fits under ${CAP_KB}K"; fi
grep -q -E "DefaultCPUAllocator|MemoryError|Cannot allocate memory" "$WORK/epoch-$B.log" \
  || fail "direct: the epoch at $B failed, but not for memory: $(tail -3 "$WORK/epoch-$B.log")"
trained=$(grep -c -- '--> TIME: .* STEP: ' "$WORK/epoch-$B.log" || true)
[ "$trained" -ge "$LONG_AT" ] || fail "direct: the epoch at $B stopped after $trained steps, before its long batch $LONG_AT"
pass "direct: a full epoch fits at $N (${pN}K) under ${CAP_KB}K; at $B it trains $trained batches ($LONG_AT short ones first), then OOMs at a long one ($((SECONDS - t0))s)"

# --- autobatch where the user runs it, with its defaults for the worst case and the confirmation
cd "$WORK/project"
t1=$SECONDS
"$AUTOBATCH" --preset coqui --trial-memory-limit ${CAP_KB}K --batch 1:8 --steps 3 --warmup 1 \
  --kill-grace 2s --no-cache --json "$WORK/r.json" -- "$PY" -m TTS.bin.train_tts --config_path config.json \
  >"$WORK/ab.out" 2>"$WORK/ab.err" || fail "autobatch: exit $? $(tail -5 "$WORK/ab.err")"
J="$WORK/r.json"
best=$(jqr '.best.micro_batch' "$J")
got=$(jqr '.max_fit[0].micro_batch' "$J")
echo "autobatch: best $best, largest fit $got, smallest failure $(jqr '.max_fit[0].smallest_fail' "$J"), $(jqr '.summary.trials' "$J") trials + $(jqr '.confirm | length' "$J") confirmation run(s) ($((SECONDS - t1))s)"
cd "$WORK"

# every trial that got to the data met its worst case first, and says so
w='[.trials[], .confirm[] | select(.worst_case != null)]'
assert_eq "$(jqr '[.trials[], .confirm[]] | length' "$J")" "$(jqr "$w | length" "$J")" "trials with a worst_case record"
assert_eq 0 "$(jqr "$w | map(select(.worst_case.mode != \"lengths\" and .worst_case.mode != \"scan\")) | length" "$J")" \
  "trials whose worst case was neither lengths nor scan: $(jq -c "$w | map(.worst_case.mode)" "$J")"
assert_eq 0 "$(jqr "$w | map(select(.worst_case.whole != true)) | length" "$J")" "trials that did not see the whole epoch"
# the largest batch met is one holding long clips: at least 36 s (lengths: in
# samples at 22050 Hz); a scan sees the text's length as `longest`, so its
# elements stand in
jq -e "$w | all(.worst_case | if .mode == \"lengths\" then .longest >= 36 * 22050 else .elems > 4 * .median end)" \
  "$J" >/dev/null || fail "a trial's worst case is not a long batch: $(jq -c "$w | map(.worst_case)" "$J")"
mode=$(jqr '.trials[0].worst_case.mode + " (" + (.trials[0].worst_case.signal // "scan") + ")"' "$J")
assert_eq true "$(jqr '.summary.confirmed' "$J")" "the choice confirmed"
assert_eq "$best" "$(jqr '.confirm[-1].micro_batch' "$J")" "the confirmed size"
[ "$got" != null ] && [ "$got" -le "$N" ] || fail "largest fit $got, but a full epoch fits only up to $N"
[ $((got * 10)) -ge $((N * 8)) ] || fail "largest fit $got is below 0.8 x $N"
[ "$best" -le "$got" ] || fail "best $best above the largest fit $got"
pass "autobatch: worst case $mode in every trial; largest fit $got (full epoch: $N), choice $best confirmed"

# --- the scan, as when no length signal is found: one trial at N+1 meets
# the epoch's last (longest) batch first and runs out of memory, well
# within the scan's default 30 s
cd "$WORK/project"
rc=0
"$AUTOBATCH" --quiet --preset coqui --trial-memory-limit ${CAP_KB}K --batch $B:$B --steps 3 --warmup 1 \
  --worst-case scan --no-confirm --kill-grace 2s --no-cache --json "$WORK/s.json" -- \
  "$PY" -m TTS.bin.train_tts --config_path config.json >"$WORK/s.out" 2>&1 || rc=$?
cd "$WORK"
assert_eq 3 "$rc" "scan at $B: exit status (nothing fits) $(tail -3 "$WORK/s.out")"
assert_eq oom "$(jqr '.trials[0].outcome' "$WORK/s.json")" "scan at $B: the trial"
s='.trials[0].worst_case'
assert_eq scan "$(jqr "$s.mode" "$WORK/s.json")" "scan at $B: worst_case.mode"
assert_eq true "$(jqr "$s.whole" "$WORK/s.json")" "scan at $B: the whole epoch seen"
assert_eq $((CLIPS / B)) "$(jqr "$s.batches_seen" "$WORK/s.json")" "scan at $B: batches seen"
assert_eq $((CLIPS / B - 1)) "$(jqr "$s.position" "$WORK/s.json")" "scan at $B: the largest batch is the epoch's last"
jq -e "$s.scan_s < 30" "$WORK/s.json" >/dev/null || fail "scan at $B: took $(jqr "$s.scan_s" "$WORK/s.json")s"
pass "scan at $B: met batch $(jqr "$s.position" "$WORK/s.json") of $((CLIPS / B)) first after a $(jqr "$s.scan_s" "$WORK/s.json")s scan, and ran out of memory"

# --- the choice trains through a fresh full epoch under the same cap
t2=$SECONDS
epoch "$best" "$CAP_KB" >/dev/null || fail "the choice $best does not survive a full epoch: $(tail -3 "$WORK/epoch-$best.log")"
assert_no_leftovers
pass "the choice $best survives a fresh full epoch under ${CAP_KB}K ($((SECONDS - t2))s; total $((SECONDS - t0))s)"
