#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch on the real F5-TTS trainer (PyPI f5-tts 1.1.22's own
# src/f5_tts/train/train.py, Hydra, a tiny DiT, synthetic data made here)
# on PyPI's torch 2.8, CPU, under --trial-memory-limit.  The checkout is
# laid out as F5's editable install has it: <top>/src/f5_tts (the pinned
# package's files), <top>/data/tiny_char (tests/real/f5/make_data.py), the
# user's config in src/f5_tts/configs/.  The batch is in mel frames
# (batch_size_type: frame); every clip is 200 frames, so k*200 frames is
# a batch of k clips.
#   * the largest batch_size_per_gpu equals a direct bisection under
#     `ulimit -v` with the same cap (tests/real/direct_steps.py runs the
#     same train.py and stops after 4 optimizer steps);
#   * every fit measured its steps with the in-process probe;
#   * nothing is written into the checkout (F5 joins ckpts.save_dir onto
#     it, Hydra puts its run directory under ckpts/ there): no ckpts/, no
#     runs/, nothing left in $TMPDIR, the config unchanged;
#   * --write (with --preset auto) changes exactly the batch_size_per_gpu
#     bytes.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
pkg=$("$PY" -c 'import f5_tts; print(list(f5_tts.__path__)[0])' 2>/dev/null) \
  || fail "$PY cannot import f5_tts"
R="$AB_SOURCE_DIR/tests/real/f5"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=65536 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" WANDB_MODE=disabled
export TMPDIR="$WORK/tmp"
TOP="$WORK/F5-TTS"
mkdir -p "$TMPDIR" "$TOP/src"
cp -r "$pkg" "$TOP/src/f5_tts"
find "$TOP/src" -name __pycache__ -prune -exec rm -rf {} +
export PYTHONPATH="$TOP/src"
"$PY" "$R/make_data.py" "$TOP" tiny --clips 64 --frames 200 >/dev/null 2>&1 || fail "make_data failed"
CFG_REL=src/f5_tts/configs/F5TTS_tiny.yaml
CFG="$TOP/$CFG_REL"
cp "$R/F5TTS_tiny.yaml" "$CFG"
cp "$CFG" "$WORK/config.orig.yaml"
( cd "$TOP" && find . -path ./src/f5_tts/__pycache__ -prune -o -print | sort ) >"$WORK/tree.before"

# --- direct runs: the trainer's peak address space at 4 and 12 clips
# gives the growth per clip; the cap lies half a clip above 8 clips' peak
direct() { # frames cap_kb|unlimited -> VmPeak in kB on stdout, or fails
  local out="$WORK/direct-$1"
  rm -rf "$WORK/direct-out"
  (cd "$TOP" && ulimit -v "$2" && AB_DIRECT_STEPS=4 exec "$PY" "$AB_SOURCE_DIR/tests/real/direct_steps.py" \
     src/f5_tts/train/train.py --config-name F5TTS_tiny datasets.batch_size_per_gpu="$1" \
     ckpts.save_dir="$(printf '../%.0s' {1..64})${WORK#/}/direct-out" hydra.run.dir="$WORK/direct-out/hydra" \
     >"$out.log" 2>&1) || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$out.log"
}
t0=$SECONDS
p4=$(direct 800 unlimited) || fail "direct: 800 frames failed: $(tail -3 "$WORK/direct-800.log")"
p12=$(direct 2400 unlimited) || fail "direct: 2400 frames failed: $(tail -3 "$WORK/direct-2400.log")"
slope=$(((p12 - p4) / 8))
[ "$slope" -gt 4000 ] || fail "direct: memory does not grow with the batch (${p4}K at 4 clips, ${p12}K at 12)"
CAP_KB=$((p4 + 4 * slope + slope / 2))
echo "calibration: VmPeak ${p4}K at 4 clips, +${slope}K per clip; cap ${CAP_KB}K"
lo=1 hi=17
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if direct $((mid * 200)) "$CAP_KB" >/dev/null; then lo=$mid; else hi=$mid; fi
done
want=$((lo * 200))
if [ $hi -le 16 ]; then
  grep -q -E "DefaultCPUAllocator|MemoryError|Cannot allocate memory" "$WORK/direct-$((hi * 200)).log" \
    || fail "direct: $((hi * 200)) frames failed, but not for memory: $(tail -3 "$WORK/direct-$((hi * 200)).log")"
fi
[ ! -e "$TOP/ckpts" ] || fail "direct: the climbing save_dir still wrote into the checkout"
echo "direct bisection: largest $want frames under ${CAP_KB}K ($((SECONDS - t0))s)"

# --- autobatch where the user runs it (the checkout's top)
cd "$TOP"
t0=$SECONDS
"$AUTOBATCH" --preset f5-tts --config "$CFG_REL" --trial-memory-limit ${CAP_KB}K --batch 200:3200:200 \
  --steps 3 --warmup 1 --kill-grace 2s --no-cache --json "$WORK/r.json" \
  -- "$PY" src/f5_tts/train/train.py --config-name F5TTS_tiny \
  >"$WORK/ab.out" 2>"$WORK/ab.err" || fail "autobatch: exit $? $(tail -5 "$WORK/ab.err")"
echo "autobatch: $(jqr '.summary.trials' "$WORK/r.json") trials, $((SECONDS - t0))s"
assert_eq frames "$(jqr '.space.unit' "$WORK/r.json")" "the batch's unit (datasets.batch_size_type: frame)"
assert_eq "$want" "$(jqr '.max_fit[0].micro_batch' "$WORK/r.json")" "largest batch_size_per_gpu vs ulimit -v bisection"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and (.steps_measured <= 0 or .steps_from != "probe"))] | length' \
  "$WORK/r.json")" "fits without probe-measured steps"
if [ "$want" -lt 3200 ]; then
  assert_eq "$((want + 200))" "$(jqr '.max_fit[0].smallest_fail' "$WORK/r.json")" "smallest failure"
fi
( cd "$TOP" && find . -path ./src/f5_tts/__pycache__ -prune -o -print | sort ) >"$WORK/tree.after"
diff "$WORK/tree.before" "$WORK/tree.after" >&2 || fail "tuning wrote into the checkout (above)"
cmp -s "$CFG" "$WORK/config.orig.yaml" || fail "tuning changed the config"
[ -z "$(ls -A "$TMPDIR" | grep '^autobatch-' || true)" ] || fail "left in \$TMPDIR: $(ls -A "$TMPDIR")"
assert_no_leftovers
pass "f5-tts: largest batch_size_per_gpu $want frames (direct bisection $want) in $(jqr '.summary.trials' "$WORK/r.json") trials, all measured by the probe, nothing written into the checkout"

# --- --write with --preset auto: only the batch_size_per_gpu bytes change
"$AUTOBATCH" --quiet --preset auto --config "$CFG_REL" --trial-memory-limit ${CAP_KB}K --batch 200:3200:200 \
  --steps 3 --warmup 1 --kill-grace 2s --write --json "$WORK/w.json" \
  -- "$PY" src/f5_tts/train/train.py --config-name F5TTS_tiny >"$WORK/w.out" 2>&1 \
  || fail "--write: exit $? $(tail -5 "$WORK/w.out")"
assert_eq f5-tts "$(jqr '.preset' "$WORK/w.json")" "--preset auto on F5's train.py"
best=$(jqr '.best.micro_batch' "$WORK/w.json")
sed "s/^  batch_size_per_gpu: 800  #/  batch_size_per_gpu: $best  #/" "$WORK/config.orig.yaml" >"$WORK/expected.yaml"
cmp "$WORK/expected.yaml" "$CFG" || fail "--write: bytes other than batch_size_per_gpu changed: $(diff "$WORK/expected.yaml" "$CFG")"
[ ! -e "$TOP/ckpts" ] || fail "--write run wrote ckpts/ into the checkout"
assert_no_leftovers
pass "f5-tts --write: batch_size_per_gpu 800 -> $best, every other byte kept"
