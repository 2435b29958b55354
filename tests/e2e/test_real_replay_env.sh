#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch --replay on a real Hugging Face Trainer job (tests/real/hf_gpt2.py:
# a small GPT-2 from a GPT2Config, random weights, synthetic tokens,
# TrainingArguments through HfArgumentParser; PyPI's torch 2.8 and
# transformers 4.57, CPU) under --trial-memory-limit, in the user's own
# allocator: no MALLOC_* variable anywhere in the environment (issue 24,
# item 2).
#   * the results' run_with.env and trial_env name no MALLOC_* variable,
#     and trial_env lists at most PYTHONPATH (the probe's directory);
#   * the replay recorded, predicted and settled the boundary;
#   * the chosen size, and the largest fit, train in a fresh run of
#     run_with's command in the same environment under `ulimit -v` of the
#     same cap, and the size above the largest fit does not (when it does
#     fit in a fresh run, the boundary is not monotone there: it is run
#     once more, and the test says so).
# A sample costs about 150 MB of address space here (the logits over a
# 16384-token vocabulary, their log-softmax and gradients, 512 tokens a
# sample), the cap lies half a sample above a size's calibrated peak, and
# glibc's default arenas move a run's peak by some tens of MB: each size
# is clearly in or out.
source "$(dirname "$0")/lib.sh"
PY=${AB_REAL_PYTHON:-$(bash "$AB_SOURCE_DIR/tests/real/pyenv.sh" real)} || fail "no Python environment for the real trainers"
"$PY" -c "import torch, transformers" 2>/dev/null || fail "$PY cannot import torch and transformers"
JOB="$AB_SOURCE_DIR/tests/real/hf_gpt2.py"
# The user's environment: the allocator as glibc ships it.
for v in $(compgen -e | grep '^MALLOC_' || true); do unset "$v"; done
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONHASHSEED=0
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HOME="$WORK/hf" TMPDIR="$WORK/tmp"
mkdir -p "$TMPDIR"
CMD=("$PY" "$JOB" --output_dir "$WORK/out" --vocab_size 16384 --seq_len 512 --n_embd 64 --samples 512)
TARGET=8   # the calibrated boundary: the cap lies half a sample above its peak
t0=$SECONDS

# --- calibration: the job's peak address space at 2 and 4 (4 steps each)
peak() { # micro-batch -> VmPeak in kB
  AB_DIRECT_STEPS=4 "$PY" "$AB_SOURCE_DIR/tests/real/direct_steps.py" "${CMD[@]:1}" \
    --per_device_train_batch_size "$1" >"$WORK/peak-$1.log" 2>&1 || return 1
  sed -n 's/^direct_steps: VmPeak:[[:space:]]*\([0-9]*\) kB$/\1/p' "$WORK/peak-$1.log"
}
p2=$(peak 2) || fail "calibration at 2 failed: $(tail -3 "$WORK/peak-2.log")"
p4=$(peak 4) || fail "calibration at 4 failed: $(tail -3 "$WORK/peak-4.log")"
slope=$(((p4 - p2) / 2))
[ "$slope" -gt 60000 ] || fail "calibration: a sample adds only ${slope}K (${p2}K at 2, ${p4}K at 4)"
CAP_KB=$((p2 + (TARGET - 2) * slope + slope / 2))
echo "calibration: VmPeak ${p2}K at 2, +${slope}K per sample; cap ${CAP_KB}K ($((SECONDS - t0))s)"

# --- autobatch --replay where the user runs it
t1=$SECONDS
"$AUTOBATCH" --replay --trial-memory-limit "${CAP_KB}K" --batch 1:32 --steps 3 --warmup 1 --kill-grace 2s \
  --no-cache --json "$WORK/r.json" -- "${CMD[@]}" >"$WORK/ab.out" 2>&1 || fail "autobatch: exit $? $(tail -5 "$WORK/ab.out")"
R="$WORK/r.json"
best=$(jqr '.best.micro_batch' "$R")
top=$(jqr '.max_fit[0].micro_batch' "$R")
echo "autobatch --replay: best $best, largest fit $top, predicted $(jqr '.replay.cells[0].predicted_max_fit' "$R"), $(jqr '.summary.trials' "$R") trials ($((SECONDS - t1))s)"

# --- nothing of the allocator's was set for the trials or asked of the user
assert_eq "" "$(jqr '[.run_with.env[] | select(startswith("MALLOC_"))] | join(" ")' "$R")" "run_with.env: MALLOC_* variables"
assert_eq "" "$(jqr '[.trial_env[].name | select(. != "PYTHONPATH")] | join(" ")' "$R")" "trial_env: variables other than PYTHONPATH"
[ "$(jqr '.trial_env | length' "$R")" -le 1 ] || fail "trial_env: $(jq -c .trial_env "$R")"
if grep -q 'MALLOC_' "$WORK/ab.out"; then fail "autobatch's output names a MALLOC_ variable: $(grep MALLOC_ "$WORK/ab.out")"; fi
assert_eq done "$(jqr '.replay.cells[0].state' "$R")" "replay state"
assert_eq true "$(jqr '.summary.confirmed' "$R")" "the choice confirmed"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .steps_from != "probe")] | length' "$R")" \
  "fits without probe-measured steps"
pass "results: no MALLOC_* in run_with.env ($(jqr '.run_with.env | length' "$R") variables) nor trial_env ($(jqr '[.trial_env[].name] | join(",")' "$R"))"

# --- fresh runs of run_with's command, in this environment, under the cap
mapfile -t RUN < <(jqr '.run_with.command[]' "$R")
[ "${#RUN[@]}" -gt 2 ] || fail "run_with.command: $(jq -c .run_with.command "$R")"
printf '%s\n' "${RUN[@]}" | grep -qx -- "--per_device_train_batch_size" || fail "run_with.command lacks the knob: ${RUN[*]}"
fresh() { # micro-batch -> the exit status of run_with's command at it, under the cap
  local args=() a prev=""
  for a in "${RUN[@]}"; do
    [ "$prev" = "--per_device_train_batch_size" ] && a=$1
    args+=("$a")
    prev=$a
  done
  (ulimit -v "$CAP_KB"; exec "${args[@]}") >"$WORK/fresh-$1.log" 2>&1
}
oomed() { grep -q -E "DefaultCPUAllocator|MemoryError|Cannot allocate memory" "$WORK/fresh-$1.log"; }
t2=$SECONDS
fresh "$best" || fail "fresh run: the choice $best does not fit: $(tail -3 "$WORK/fresh-$best.log")"
if [ "$top" != "$best" ] && ! fresh "$top"; then
  # The largest fit was certified by one 4-step trial, not confirmed (the
  # choice was): with the user's allocator (no MALLOC_* set) address-space
  # use at the edge depends on glibc's dynamic mmap threshold, so a size
  # within a sample of the cap can fit or fail by luck (docs/pytorch.md).
  # As for $up below: failing twice is a wrong answer, once is the edge.
  oomed "$top" || fail "fresh run at the largest fit $top failed, but not for memory: $(tail -3 "$WORK/fresh-$top.log")"
  mv "$WORK/fresh-$top.log" "$WORK/fresh-$top.first.log"
  fresh "$top" || fail "fresh runs: the largest fit $top does not fit, twice: $(tail -3 "$WORK/fresh-$top.log")"
  echo "note: the boundary is not monotone in fresh runs: the largest fit $top failed once and fitted once"
fi
# Above it: the next size fails a fresh run (once in two, as above). The
# trials carry the probe (hooks, the worst-case scan's batches), whose few
# MB count against the cap too, so at an edge this close autobatch may be
# one size conservative (docs/limits.md): then two sizes up must fail.
above_fails() { # size -> 0 when a fresh run at it fails for memory (once in two)
  if fresh "$1"; then
    mv "$WORK/fresh-$1.log" "$WORK/fresh-$1.first.log"
    fresh "$1" && return 1
    echo "note: the boundary is not monotone in fresh runs: $1 fitted once and failed once"
  fi
  oomed "$1" || fail "fresh run at $1 failed, but not for memory: $(tail -3 "$WORK/fresh-$1.log")"
}
up=$((top + 1))
if ! above_fails "$up"; then
  up=$((top + 2))
  above_fails "$up" || fail "fresh runs: $((top + 1)) and $up fit twice, autobatch's largest fit is $top"
  echo "note: autobatch's largest fit $top is one size conservative: $((top + 1)) fits fresh runs without the probe"
fi
assert_no_leftovers
pass "fresh runs under ${CAP_KB}K: the choice $best fits, the largest fit $top fits, $up does not ($((SECONDS - t2))s; total $((SECONDS - t0))s)"
