#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The in-process probe on a real PyTorch program (Debian's torch 1.13):
# optimizer steps come from inside the process; data-preparation bars are
# not training; a run that trains nothing (prepares data only, or resumes
# from the user's finished checkpoint) is "no_steps", not a fit; a batch
# knob that does not reach the trainer stops the search; a knob the preset
# lacks is refused before the first trial; the user's own sitecustomize
# still runs; nothing is left in the temporary directory.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
T="$AB_SOURCE_DIR/tests/e2e/fixtures/probe_trainer.py"
export TMPDIR="$WORK/tmp" OMP_NUM_THREADS=1
mkdir -p "$TMPDIR"
COMMON=(--steps 3 --warmup 1 --no-cache --kill-grace 1s)

# --- a fit is measured from inside: probe steps, the loader's batch size
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:8 --json "$WORK/a.json" -- "$PY" "$T" \
  >"$WORK/a.out" 2>&1 || fail "fit: exit $? $(tail -5 "$WORK/a.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome != "fit")] | length' "$WORK/a.json")" "fit: every trial fits"
assert_eq 0 "$(jqr '[.trials[] | select(.steps_from != "probe")] | length' "$WORK/a.json")" "fit: steps from the probe"
assert_eq 0 "$(jqr '[.trials[] | select(.probe.loader_batch_size != .micro_batch)] | length' "$WORK/a.json")" \
  "fit: the probe saw the candidate's batch size"
assert_eq 0 "$(jqr '[.trials[] | select(.steps_measured < 3 or .samples_per_s == null)] | length' "$WORK/a.json")" \
  "fit: measured steps and a rate"
case "$(jqr '.trials[0].probe.torch' "$WORK/a.json")" in 1.*|2.*) ;; *) fail "fit: no torch version from the probe" ;; esac
assert_eq "" "$(ls -A "$TMPDIR")" "fit: nothing left in TMPDIR"
pass "probe: $(jqr '.trials | length' "$WORK/a.json") fits measured from inside torch $(jqr '.trials[0].probe.torch' "$WORK/a.json")"

# --- data preparation only: its bars are not training steps
for probe in on off; do
  extra=(); [ $probe = off ] && extra=(--no-probe)
  rc=0
  "$AUTOBATCH" --quiet "${COMMON[@]}" "${extra[@]}" --batch 1:8 --json "$WORK/b.json" -- "$PY" "$T" --no_train \
    >"$WORK/b.out" 2>&1 || rc=$?
  assert_eq 4 "$rc" "prep-only ($probe): exit status"
  assert_eq no_steps "$(jqr '.trials[0].outcome' "$WORK/b.json")" "prep-only ($probe): outcome"
  assert_eq 1 "$(jqr '.trials | length' "$WORK/b.json")" "prep-only ($probe): the search stopped"
  grep -q "without a training step" "$WORK/b.out" || fail "prep-only ($probe): no explanation: $(cat "$WORK/b.out")"
done
grep -q "Sorting with sampler" "$WORK/b.out" || fail "prep-only: the message does not say which bars were seen"
pass "data preparation bars are not steps, with and without the probe"

# --- a trainer that resumes from the user's finished checkpoint trains nothing
mkdir -p "$WORK/user_out"
"$PY" -c "import torch, sys; torch.save({'step': 1000}, sys.argv[1])" "$WORK/user_out/model_last.pt"
sum_before=$(sha256sum "$WORK/user_out/model_last.pt")
cat >"$WORK/noout.yaml" <<'YAML'
name: noout
knobs:
  micro_batch: {flag: --per_device_train_batch_size}
  max_steps: {flag: --max_steps}
YAML
rc=0
"$AUTOBATCH" --quiet "${COMMON[@]}" --preset "$WORK/noout.yaml" --batch 1:8 --json "$WORK/c.json" -- \
  "$PY" "$T" --output_dir "$WORK/user_out" >"$WORK/c.out" 2>&1 || rc=$?
assert_eq 4 "$rc" "resume: exit status"
assert_eq no_steps "$(jqr '.trials[0].outcome' "$WORK/c.json")" "resume: outcome"
grep -q "resumed from a finished checkpoint" "$WORK/c.out" || fail "resume: not explained: $(cat "$WORK/c.out")"
# the hf preset gives each trial a scratch output directory: it trains, and
# the user's directory is not touched
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 1:4 --json "$WORK/c2.json" -- \
  "$PY" "$T" --output_dir "$WORK/user_out" >"$WORK/c2.out" 2>&1 || fail "scratch: exit $? $(tail -5 "$WORK/c2.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome != "fit")] | length' "$WORK/c2.json")" "scratch: every trial fits"
assert_eq "$sum_before" "$(sha256sum "$WORK/user_out/model_last.pt")" "scratch: the user's checkpoint"
assert_eq "model_last.pt" "$(ls -A "$WORK/user_out")" "scratch: the user's output directory"
assert_eq "" "$(ls -A "$TMPDIR")" "scratch: nothing left in TMPDIR"
pass "resuming from the user's checkpoint is no_steps; scratch output directories leave it alone"

# --- a knob that does not reach the trainer stops the search
rc=0
"$AUTOBATCH" --quiet "${COMMON[@]}" --preset env --batch 1:64 --json "$WORK/d.json" -- "$PY" "$T" --fixed_batch 8 \
  >"$WORK/d.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "mismatch: exit status"
assert_eq knob_mismatch "$(jqr '.trials[-1].outcome' "$WORK/d.json")" "mismatch: outcome"
assert_eq 1 "$(jqr '.trials | length' "$WORK/d.json")" "mismatch: stopped at the first trial"
grep -Eq "batch_size=8 where autobatch passed micro_batch=[0-9]+: the batch knob \(preset 'env', environment variable 'AUTOBATCH_MICRO_BATCH'\) does not reach the trainer" \
  "$WORK/d.out" || fail "mismatch: message: $(cat "$WORK/d.out")"
pass "a batch knob that does not reach the trainer stops the search"

# --- a searched knob the preset has no place for is bad input
rc=0
"$AUTOBATCH" --quiet "${COMMON[@]}" --preset "$WORK/noout.yaml" --grad-accum 1,2 -- "$PY" "$T" \
  >"$WORK/e.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "no accumulation knob: exit status"
grep -q "has no gradient-accumulation knob" "$WORK/e.out" || fail "no accumulation knob: $(cat "$WORK/e.out")"
grep -q "Sorting" "$WORK/e.out" && fail "no accumulation knob: a trial ran"
rc=0
"$AUTOBATCH" --quiet "${COMMON[@]}" --preset "$WORK/noout.yaml" --checkpointing both -- "$PY" "$T" \
  >"$WORK/e.out" 2>&1 || rc=$?
assert_eq 2 "$rc" "no checkpointing knob: exit status"
pass "a knob the preset lacks is refused before the first trial"

# --- the user's own sitecustomize still runs beside the probe
mkdir -p "$WORK/site"
printf 'import os\nopen(os.environ["SITE_MARK"], "a").write("ran\\n")\n' >"$WORK/site/sitecustomize.py"
SITE_MARK="$WORK/site.mark" PYTHONPATH="$WORK/site" "$AUTOBATCH" --quiet "${COMMON[@]}" --batch 2:2 \
  --json "$WORK/f.json" -- "$PY" "$T" >"$WORK/f.out" 2>&1 || fail "site: exit $? $(tail -5 "$WORK/f.out")"
grep -q ran "$WORK/site.mark" || fail "site: the user's sitecustomize did not run"
assert_eq probe "$(jqr '.trials[0].steps_from' "$WORK/f.json")" "site: the probe loaded too"
pass "the user's sitecustomize runs, and so does the probe"

# --- a Python that skips the probe (-I ignores PYTHONPATH): steps come
# from the training bar, and autobatch says once what it could not see
"$AUTOBATCH" "${COMMON[@]}" --batch 2:4 --json "$WORK/g.json" -- "$PY" -I "$T" >"$WORK/g.out" 2>&1 \
  || fail "no probe: exit $? $(tail -5 "$WORK/g.out")"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome != "fit" or .steps_from != "log" or .probe != null)] | length' \
  "$WORK/g.json")" "no probe: fits measured from the output"
assert_eq 1 "$(grep -c "probe did not load" "$WORK/g.out")" "no probe: said once"
pass "without the probe, steps come from the training bar, and autobatch says so once"
assert_no_leftovers

# --- an import hook of the trainer's own in front of the probe's (Coqui's
# dependencies install one): torch is still seen, through the import wrapper
cat >"$WORK/hooked.py" <<PYEOF
import importlib.machinery, runpy, sys
class First:
    def find_spec(self, name, path=None, target=None):
        return importlib.machinery.PathFinder.find_spec(name, path) if name == "torch" else None
sys.meta_path.insert(0, First())
sys.argv = ["$T"] + sys.argv[1:]
runpy.run_path("$T", run_name="__main__")
PYEOF
"$AUTOBATCH" --quiet "${COMMON[@]}" --batch 2:2 --json "$WORK/h.json" -- "$PY" "$WORK/hooked.py" \
  >"$WORK/h.out" 2>&1 || fail "hooked: exit $? $(tail -5 "$WORK/h.out")"
assert_eq probe "$(jqr '.trials[0].steps_from' "$WORK/h.json")" "hooked: steps from the probe"
pass "an import hook in front of the probe's does not hide torch from it"
