#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch on the real Coqui TTS trainer (PyPI coqui-tts 0.27.5,
# `python -m TTS.bin.train_tts --config_path config.json`, a small GlowTTS
# on synthetic LJSpeech-style data made here) on PyPI's torch 2.8, CPU,
# under --trial-memory-limit:
#   * the largest batch_size equals a direct bisection under `ulimit -v`
#     with the same cap (tests/real/direct_steps.py runs the same
#     trainer and stops after 4 optimizer steps);
#   * every fit measured its steps with the in-process probe, and the
#     trainer's DataLoader had the candidate's batch size;
#   * the trainer wrote only into each trial's scratch output_path: the
#     config's own output_path is never created, nothing is left in
#     $TMPDIR, and config.json (with Coqui's Infinity values) is unchanged;
#   * --write changes exactly the batch_size bytes, Infinity kept.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import TTS, torch" 2>/dev/null || fail "$PY cannot import TTS and torch"
R="$AB_SOURCE_DIR/tests/real/coqui"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" MPLBACKEND=Agg
export TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR" "$WORK/project"
python3 "$R/make_data.py" "$WORK/data" --clips 64 --seconds 10 >/dev/null || fail "make_data failed"
sed -e "s|@OUT@|$WORK/project/runs|" -e "s|@DATA@|$WORK/data|" "$R/config.template.json" >"$WORK/project/config.json"
CFG="$WORK/project/config.json"
grep -q '"max_audio_len": Infinity' "$CFG" || fail "the config lacks Coqui's Infinity"
cp "$CFG" "$WORK/config.orig.json"

# --- direct runs: the trainer's peak address space at batch 4 and 6 gives
# the growth per sample; the cap lies half a sample above batch 5's peak
direct() { # batch_size cap_kb|unlimited -> VmPeak in kB on stdout, or fails
  local out="$WORK/direct-$1"
  rm -rf "$WORK/direct-runs"
  sed -e "s|$WORK/project/runs|$WORK/direct-runs|" "$CFG" >"$WORK/direct.json"
  (ulimit -v "$2"; AB_DIRECT_STEPS=4 exec "$PY" "$AB_SOURCE_DIR/tests/real/direct_steps.py" -m TTS.bin.train_tts --config_path "$WORK/direct.json" \
     --coqpit.batch_size "$1" >"$out.log" 2>&1) || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out.log"
}
t0=$SECONDS
p4=$(direct 4 unlimited) || fail "direct: batch 4 failed: $(tail -3 "$WORK/direct-4.log")"
p6=$(direct 6 unlimited) || fail "direct: batch 6 failed: $(tail -3 "$WORK/direct-6.log")"
slope=$(((p6 - p4) / 2))
[ "$slope" -gt 8000 ] || fail "direct: memory does not grow with the batch (${p4}K at 4, ${p6}K at 6)"
CAP_KB=$((p4 + slope + slope / 2))
echo "calibration: VmPeak ${p4}K at batch 4, +${slope}K per sample; cap ${CAP_KB}K"
lo=1 hi=9
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if direct $mid "$CAP_KB" >/dev/null; then lo=$mid; else hi=$mid; fi
done
want=$lo
if [ $hi -le 8 ]; then
  grep -q -E "DefaultCPUAllocator|MemoryError|Cannot allocate memory" "$WORK/direct-$hi.log" \
    || fail "direct: batch $hi failed, but not for memory: $(tail -3 "$WORK/direct-$hi.log")"
fi
echo "direct bisection: largest $want under ${CAP_KB}K ($((SECONDS - t0))s)"

# --- autobatch where the user runs it
cd "$WORK/project"
t0=$SECONDS
"$AUTOBATCH" --preset coqui --trial-memory-limit ${CAP_KB}K --batch 1:8 --steps 3 --warmup 1 \
  --kill-grace 2s --no-cache --json "$WORK/r.json" -- "$PY" -m TTS.bin.train_tts --config_path config.json \
  >"$WORK/ab.out" 2>"$WORK/ab.err" || fail "autobatch: exit $? $(tail -5 "$WORK/ab.err")"
echo "autobatch: $(jqr '.summary.trials' "$WORK/r.json") trials, $((SECONDS - t0))s"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "largest batch_size vs ulimit -v bisection"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and (.steps_measured <= 0 or .steps_from != "probe"))] | length' \
  "$WORK/r.json")" "fits without probe-measured steps"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .probe.loader_batch_size != .micro_batch)] | length' \
  "$WORK/r.json")" "the trainer's DataLoader batch size vs the candidate"
if [ "$want" -lt 8 ]; then
  assert_eq "$((want + 1))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/r.json")" "smallest failure"
fi
[ ! -e "$WORK/project/runs" ] || fail "the config's own output_path was written: $(ls -A "$WORK/project/runs")"
assert_eq "config.json" "$(ls -A "$WORK/project")" "the project directory"
cmp -s "$CFG" "$WORK/config.orig.json" || fail "tuning changed config.json"
[ -z "$(ls -A "$TMPDIR" | grep '^autobatch-' || true)" ] || fail "left in \$TMPDIR: $(ls -A "$TMPDIR")"
assert_no_leftovers
pass "coqui: largest batch_size $want (direct bisection $want) in $(jqr '.summary.trials' "$WORK/r.json") trials, all measured by the probe"

# --- --write: only the batch_size bytes change, Infinity kept
"$AUTOBATCH" --quiet --preset coqui --trial-memory-limit ${CAP_KB}K --batch 1:8 --steps 3 --warmup 1 \
  --kill-grace 2s --write --json "$WORK/w.json" -- "$PY" -m TTS.bin.train_tts --config_path config.json \
  >"$WORK/w.out" 2>&1 || fail "--write: exit $? $(tail -5 "$WORK/w.out")"
best=$(jqr '.best.micro_batch' "$WORK/w.json")
sed "s/^    \"batch_size\": 4,\$/    \"batch_size\": $best,/" "$WORK/config.orig.json" >"$WORK/expected.json"
cmp "$WORK/expected.json" "$CFG" || fail "--write: bytes other than batch_size changed: $(diff "$WORK/expected.json" "$CFG")"
assert_no_leftovers
pass "coqui --write: batch_size 4 -> $best, Infinity and every other byte kept"
