#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Where the memory goes (issue 29, item 1) on a real PyTorch job
# (examples/pytorch/train_tts.py, Debian's torch): the probe's breakdown
# of parameters, gradients and optimizer state must match what this test
# computes on its own from the same model (built from the example's own
# classes with its default arguments) within 2%; the results carry it per
# trial and for the smallest fit and the choice, with shares of the
# capacity; the Markdown, HTML and JUnit reports show it.  On the CPU the
# allocator's parts (activations, cache, outside) are null, not made up;
# on CUDA they must add up to the step's peak.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_tts.py"

"$AUTOBATCH" --batch 1:8 --steps 3 --warmup 1 --no-confirm --no-cache --kill-grace 2s \
  --trial-memory-limit 803500K --json "$WORK/m.json" -- "$PY" "$TRAIN" \
  >"$WORK/m.out" 2>&1 || fail "exit $? $(tail -3 "$WORK/m.out")"

# The model's own figures, computed here: the parameters' bytes, and
# AdamW's state (exp_avg and exp_avg_sq like each parameter, plus a
# "step" counter per parameter where this torch keeps one as a tensor:
# 1.12 on; it lives with the parameters unless they are on CUDA).
"$PY" - "$TRAIN" >"$WORK/expect.json" <<'EOF'
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import torch
import train_tts
a = train_tts.parse_args([])
model = train_tts.TTS(a)
params = list(model.parameters())
pbytes = sum(p.numel() * p.element_size() for p in params)
opt = torch.optim.AdamW(params, lr=a.learning_rate)
for p in params:
    p.grad = torch.zeros_like(p)
opt.step()
step = opt.state[params[0]].get("step")
step_bytes = step.numel() * step.element_size() if torch.is_tensor(step) else 0
print(json.dumps({"params": pbytes, "grads": pbytes,
                  "optimizer": 2 * pbytes + len(params) * step_bytes,
                  "tensors": len(params), "step_bytes": step_bytes,
                  "torch": torch.__version__}))
EOF
want_p=$(jqr .params "$WORK/expect.json")
want_o=$(jqr .optimizer "$WORK/expect.json")

fits=$(jqr '[.trials[] | select(.outcome == "fit")] | length' "$WORK/m.json")
[ "$fits" -ge 2 ] || fail "$fits fits: $(jq -c '[.trials[] | [.micro_batch, .outcome]]' "$WORK/m.json")"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .memory_breakdown == null)] | length' "$WORK/m.json")" \
  "fits without a breakdown"

# Within 2% of the independent figures, every fit (a CPU run: each
# parameter exactly; a CUDA one counts the allocator's 512-byte blocks).
within() { # got want
  awk -v g="$1" -v w="$2" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(w > 0 && d <= 0.02 * w) }'
}
while read -r id mb dev p g o; do
  within "$p" "$want_p" || fail "trial $id (micro-batch $mb): params $p, computed $want_p"
  within "$g" "$want_p" || fail "trial $id (micro-batch $mb): grads $g, computed $want_p"
  if [ "$dev" = cpu ]; then
    within "$o" "$want_o" || fail "trial $id (micro-batch $mb): optimizer $o, computed $want_o"
  else # the step counters stay on the CPU
    within "$o" "$((2 * want_p))" || fail "trial $id (micro-batch $mb): optimizer $o, computed $((2 * want_p))"
  fi
done < <(jq -r '.trials[] | select(.outcome == "fit") | .memory_breakdown as $m
  | "\(.id) \(.micro_batch) \($m.device) \($m.params) \($m.grads) \($m.optimizer)"' "$WORK/m.json")
pass "params/grads/optimizer within 2% of the model's own ($want_p/$want_p/$want_o bytes, torch $(jqr .torch "$WORK/expect.json"))"

# The allocator's parts: null on the CPU; on CUDA they add up to the peak.
dev=$(jqr '.memory_breakdown.choice.device' "$WORK/m.json")
if [ "$dev" = cpu ]; then
  assert_eq 0 "$(jqr '[.trials[].memory_breakdown | select(. != null) | select(.activations != null or .cache != null or .peak != null)] | length' "$WORK/m.json")" \
    "CPU breakdowns with allocator figures"
else
  assert_eq 0 "$(jqr '[.trials[].memory_breakdown | select(. != null)
    | select(.params + .grads + .optimizer + .activations + .cache + .outside != .peak
             or .params + .grads + .optimizer > .held)] | length' "$WORK/m.json")" \
    "CUDA breakdowns whose parts do not add up to the peak"
fi

# The smallest fit and the choice, with shares of the capacity.
cap=$(jqr '.capacity.bytes' "$WORK/m.json")
assert_eq "$cap" "$(jqr '.memory_breakdown.capacity_bytes' "$WORK/m.json")" "the breakdown's capacity"
small_mb=$(jqr '[.trials[] | select(.outcome == "fit") | .micro_batch] | min' "$WORK/m.json")
assert_eq "$small_mb" "$(jqr '.memory_breakdown.smallest.micro_batch' "$WORK/m.json")" "the smallest fit"
assert_eq "$(jqr '.best.micro_batch' "$WORK/m.json")" "$(jqr '.memory_breakdown.choice.micro_batch' "$WORK/m.json")" "the choice"
for who in smallest choice; do
  share=$(jqr ".memory_breakdown.$who.share.params" "$WORK/m.json")
  want=$(jqr ".memory_breakdown.$who.parts.params / $cap" "$WORK/m.json")
  awk -v a="$share" -v b="$want" 'BEGIN { exit !(a > 0 && a - b < 1e-9 && b - a < 1e-9) }' \
    || fail "$who: share of params $share, not params / capacity $want"
done
pass "smallest fit (micro-batch $small_mb) and choice, shares of $cap bytes"

# Every report shows it.
"$AUTOBATCH" report "$WORK/m.json" --format markdown >"$WORK/r.md" || fail "report markdown"
"$AUTOBATCH" report "$WORK/m.json" --format html >"$WORK/r.html" || fail "report html"
"$AUTOBATCH" report "$WORK/m.json" --format junit >"$WORK/r.xml" || fail "report junit"
grep -q '^- \*\*Memory:\*\* the choice\(, also the smallest fit\)\{0,1\} (trial [0-9]*, micro-batch [0-9]*, CPU): parameters .* (0\.[0-9]*%), gradients' "$WORK/r.md" \
  || fail "markdown: no memory line: $(grep -i memory "$WORK/r.md" | head -3)"
grep -q 'the smallest fit (trial [0-9]*, micro-batch '"$small_mb" "$WORK/r.md" \
  || [ "$(jqr '.memory_breakdown.smallest.trial == .memory_breakdown.choice.trial' "$WORK/m.json")" = true ] \
  || fail "markdown: no smallest fit"
grep -q 'not measured: activations and temporaries' "$WORK/r.md" || fail "markdown: the CPU's unknown parts not said"
grep -q '<th>Memory</th><td>the choice\(, also the smallest fit\)\{0,1\} (trial' "$WORK/r.html" \
  || fail "html: no memory line: $(grep -o '<th>Memory</th><td>[^<]*' "$WORK/r.html" | head -1)"
grep -q '<property name="memory" value="the choice\(, also the smallest fit\)\{0,1\} (trial' "$WORK/r.xml" \
  || fail "junit: no memory property: $(grep -o '<property name="memory" value="[^"]*' "$WORK/r.xml" | head -1)"
assert_no_leftovers
pass "markdown, html and junit reports show where the memory goes"
