#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Batch is not the problem (issue 29, item 3) on a real PyTorch job
# (examples/pytorch/train_tts.py made big: d_model 1024, 4 layers, about
# 454 MiB of fp32 weights, on Debian's torch on the CPU) under a
# --trial-memory-limit that the weights, their gradients and AdamW's
# state cannot fit in together: micro_batch=1 runs out in its first
# backward pass, before any optimizer step.  autobatch must exit 3 and
# say so with the breakdown, the byte counts matching what this test
# computes on its own from the same model; the results carry it in
# memory_breakdown.failure and the failed trials' memory_breakdown
# ("at": "failure"); the Markdown report shows it.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || fail "$PY cannot import torch: apt-get install python3-torch"
TRAIN="$AB_SOURCE_DIR/examples/pytorch/train_tts.py"
# Short sequences: the forward and backward passes of batch 1 take a
# fraction of a second; the weights are what does not fit.
BIG=(--d_model 1024 --layers 4 --max_text_len 4 --max_mel_len 8)
LIMIT=1536M

rc=0
"$AUTOBATCH" --batch 1:4 --grad-accum 1,2 --checkpointing both --steps 3 --warmup 1 \
  --no-confirm --no-cache --kill-grace 2s --trial-memory-limit "$LIMIT" --json "$WORK/m.json" \
  -- "$PY" "$TRAIN" "${BIG[@]}" >"$WORK/m.out" 2>&1 || rc=$?
assert_eq 3 "$rc" "exit status (nothing fits): $(tail -5 "$WORK/m.out")"
# At once: the first trial's failure shows that no size fits in any of
# the four cells, and the search stops there.
assert_eq 1 "$(jqr '.trials | length' "$WORK/m.json")" "trials run"
grep -q '^autobatch: micro_batch=[0-9]* ran out with the weights, gradients and optimizer state alone (1\.77 GiB before any activation) above the 1\.50 GiB there is: no size fits in any cell; the search stops$' "$WORK/m.out" \
  || fail "no stop note: $(grep '^autobatch:' "$WORK/m.out" | head -5)"

# The model's own figures, computed here: the parameters' bytes, and
# AdamW's state once allocated (exp_avg and exp_avg_sq like each
# parameter, plus a "step" tensor per parameter where this torch keeps
# one: read from a real step on a copy).
"$PY" - "$TRAIN" "${BIG[@]}" >"$WORK/expect.json" <<'EOF'
import json, os, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import torch
import train_tts
a = train_tts.parse_args(sys.argv[2:])
model = train_tts.TTS(a)
params = list(model.parameters())
pbytes = sum(p.numel() * p.element_size() for p in params)
small = torch.nn.Linear(2, 2)
opt = torch.optim.AdamW(small.parameters())
for p in small.parameters():
    p.grad = torch.zeros_like(p)
opt.step()
step = opt.state[small.weight].get("step")
step_bytes = step.numel() * step.element_size() if torch.is_tensor(step) else 0
print(json.dumps({"params": pbytes, "optimizer": 2 * pbytes + len(params) * step_bytes,
                  "torch": torch.__version__}))
EOF
want_p=$(jqr .params "$WORK/expect.json")
want_o=$(jqr .optimizer "$WORK/expect.json")
want_t=$((2 * want_p + want_o))
limit=$((1536 << 20))
[ "$want_t" -gt "$limit" ] || fail "the test's model ($want_t bytes before activations) fits in $limit"

# The results: memory_breakdown.failure with the model's own figures.
F='.memory_breakdown.failure'
mb=$(jqr "$F.micro_batch" "$WORK/m.json")
assert_eq "$(jqr '.trials[0].micro_batch' "$WORK/m.json")" "$mb" "the failure's micro-batch"
assert_eq cpu "$(jqr "$F.device" "$WORK/m.json")" "the failure's device"
assert_eq "$want_p" "$(jqr "$F.params" "$WORK/m.json")" "weights (bytes)"
assert_eq "$want_p" "$(jqr "$F.grads" "$WORK/m.json")" "gradients once all exist (bytes)"
assert_eq "$want_o" "$(jqr "$F.optimizer" "$WORK/m.json")" "AdamW state once allocated (bytes)"
assert_eq AdamW "$(jqr "$F.optimizer_class" "$WORK/m.json")" "the optimizer's class"
# Where it ran out depends on the limit's edge (the backward pass, or
# AdamW's first step as it allocates its state): what was allocated then
# is at most the whole, and said when less.
oa=$(jqr "$F.optimizer_allocated" "$WORK/m.json")
[ "$oa" -ge 0 ] && [ "$oa" -lt "$want_o" ] || fail "AdamW state allocated when it failed: $oa of $want_o"
assert_eq "$want_t" "$(jqr "$F.before_activations" "$WORK/m.json")" "the sum before activations"
assert_eq "$limit" "$(jqr "$F.capacity_bytes" "$WORK/m.json")" "the capacity (--trial-memory-limit)"
assert_eq true "$(jqr "$F.exceeds_capacity" "$WORK/m.json")" "exceeds the capacity"
assert_eq '["mixed_precision","8bit_optimizer","sharding"]' "$(jq -c "$F.suggestions" "$WORK/m.json")" \
  "suggestions (no checkpointing: it saves activations only)"
ga=$(jqr "$F.grads_allocated" "$WORK/m.json")
[ "$ga" -ge 0 ] && [ "$ga" -le "$want_p" ] || fail "gradients allocated when it failed: $ga of $want_p"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome != "oom")] | length' "$WORK/m.json")" "trials that did not run out"
# (step 1 when AdamW's first step ran out: torch 1.13's step wrapper counts a step that raised)
assert_eq 0 "$(jqr '[.trials[] | select(.memory_breakdown.at != "failure" or .memory_breakdown.step > 1
  or .memory_breakdown.params != '"$want_p"' or .memory_breakdown.optimizer_expected != '"$want_o"')] | length' "$WORK/m.json")" \
  "failed trials without the failure breakdown"
assert_eq null "$(jqr '.memory_breakdown.smallest' "$WORK/m.json")" "no smallest fit"
pass "results: weights $want_p + gradients $want_p + AdamW $want_o = $want_t bytes > $limit (torch $(jqr .torch "$WORK/expect.json"))"

# The terminal answer, in the units autobatch prints (GiB/MiB, one decimal).
mib() { awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.1f GiB", b / 1073741824; else printf "%.1f MiB", b / 1048576 }'; }
line=$(grep '^autobatch: nothing fits: ' "$WORK/m.out") || fail "no nothing-fits line: $(tail -5 "$WORK/m.out")"
want="autobatch: nothing fits: micro_batch=$mb does not fit: weights $(mib "$want_p") + gradients $(mib "$want_p")"
[ "$ga" = "$want_p" ] && want="$want + " || want="$want ("
case "$line" in "$want"*) ;; *) fail "the line: $line; want it to start: $want" ;; esac
if [ "$oa" = 0 ]; then now="not yet allocated"; else now="$(awk -v b="$oa" 'BEGIN {
  if (b >= 1073741824) printf "%.1f GiB", b / 1073741824; else if (b >= 1048576) printf "%.1f MiB", b / 1048576;
  else printf "%.0f KiB", b / 1024 }') allocated"; fi
want="+ AdamW state $(mib "$want_o") ($now when it failed) = $(mib "$want_t") of $(mib "$limit") before any activation"
case "$line" in *"$want") ;; *) fail "the line: $line; want it to end: $want" ;; esac
grep -q '^autobatch: the batch is not the problem: the weights, gradients and optimizer state alone are more than the memory, so no batch size fits (not even micro_batch=1) and checkpointing cannot help .*try what autobatch does not try yet: mixed precision or bf16 weights, an 8-bit Adam (bitsandbytes), or sharding' "$WORK/m.out" \
  || fail "no advice line: $(grep '^autobatch:' "$WORK/m.out" | tail -3)"
pass "the answer: ${line#autobatch: }"

# The traceback the trainer printed is Python's own (the probe's hook chains).
grep -q '^RuntimeError: .*DefaultCPUAllocator: can.t allocate memory' "$WORK/m.out" \
  || fail "the trainer's traceback is not there"

"$AUTOBATCH" report "$WORK/m.json" --format markdown >"$WORK/r.md" || fail "report markdown"
grep -q '^- \*\*Memory:\*\* micro\\_batch='"$mb"' does not fit: weights .* before any activation; the batch is not the problem' "$WORK/r.md" \
  || fail "markdown: no memory line: $(grep -i memory "$WORK/r.md" | head -3)"
assert_no_leftovers
pass "the report says it; no trial leftovers"
