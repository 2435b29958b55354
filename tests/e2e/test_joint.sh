#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The joint search on simtrain: at a fixed global batch the fastest cell is
# not the one with the largest micro-batch, in about one trial per cell;
# in free mode throughput peaks below the largest fit; --headroom; the
# warm start; NVML figures through the fake library.
source "$(dirname "$0")/lib.sh"

# --- fixed global batch, 4 accumulations x checkpointing both
"$AUTOBATCH" --quiet --global-batch 256 --grad-accum 1,2,4,8 --checkpointing both \
  --json "$WORK/g.json" -- "$SIMTRAIN" --capacity 24G >"$WORK/g.out" 2>&1 || fail "global: exit $?"
assert_eq 8 "$(jqr '.max_fit | length' "$WORK/g.json")" "global: cells"
# every trial keeps micro x accum = 256
assert_eq 0 "$(jqr '[.trials[] | select(.micro_batch * .grad_accum != 256)] | length' "$WORK/g.json")" \
  "global: a trial broke the global batch"
# about one trial per cell: never two searching trials of one cell, never
# more than the cells (a noisy finalist measured again is a repeat, not a
# search trial)
assert_eq 0 "$(jqr '[.trials[] | select(.retest | not) | [.micro_batch, .grad_accum, .checkpointing]]
  | group_by(.) | map(select(length > 1)) | length' "$WORK/g.json")" "global: a cell ran twice"
[ "$(jqr '[.trials[] | select(.retest | not)] | length' "$WORK/g.json")" -le 8 ] \
  || fail "global: more trials than cells"
[ "$(jqr '[.trials[] | select(.retest)] | length' "$WORK/g.json")" -le 2 ] \
  || fail "global: more than the two finalists repeated"
# the choice is the measured-fastest fit, and it is not the largest micro-batch that fits
assert_best_is_fastest "$WORK/g.json" "global"
big=$(jqr '[.trials[] | select(.outcome == "fit") | .micro_batch] | max' "$WORK/g.json")
[ "$(jqr '.best.micro_batch' "$WORK/g.json")" -lt "$big" ] || fail "global: chose the largest micro-batch"
# checkpointing was not measured where the size fits without it
assert_eq 0 "$(jqr '[.trials[] | select(.checkpointing and .micro_batch <= 64)] | length' "$WORK/g.json")" \
  "global: checkpointing measured where not needed"
grep -q "fits without checkpointing" "$WORK/g.json" || fail "global: no skip reason"
assert_eq 256 "$(jqr '.space.global_batch' "$WORK/g.json")" "global: space.global_batch"
pass "global batch: best $(jqr '.best | "\(.micro_batch)x\(.grad_accum) ckpt=\(.checkpointing)"' "$WORK/g.json") in $(jqr '.summary.trials' "$WORK/g.json") trials"

# --- free mode: the fastest micro-batch sits below the largest fit
"$AUTOBATCH" --quiet --json "$WORK/f.json" -- "$SIMTRAIN" --capacity 24G >"$WORK/f.out" 2>&1 \
  || fail "free: exit $?"
mf=$(jqr '.max_fit[0].micro_batch' "$WORK/f.json")
assert_eq "$("$SIMTRAIN" --capacity 24G --max_steps 7 --print-max)" "$mf" "free: max fit"
[ "$(jqr '.best.micro_batch' "$WORK/f.json")" -lt "$mf" ] || fail "free: best is the largest fit"
[ "$(jqr '.frontier | length' "$WORK/f.json")" -ge 2 ] || fail "free: frontier too small"
pass "free mode: largest fit $mf, fastest $(jqr '.best.micro_batch' "$WORK/f.json")"

# --- headroom: a choice that leaves 30% free, judged by the memory line
"$AUTOBATCH" --quiet --no-cache --headroom 30 --json "$WORK/h.json" -- "$SIMTRAIN" --capacity 24G --report >/dev/null 2>&1 \
  || fail "headroom: exit $?"
# simtrain: need(m) = 4 GiB + m x 256 MiB <= 70% of 24 GiB  ->  m <= 51
[ "$(jqr '.best.micro_batch' "$WORK/h.json")" -le 51 ] || fail "headroom: chose $(jqr '.best.micro_batch' "$WORK/h.json")"
assert_eq 0.3 "$(jqr '.space.headroom' "$WORK/h.json")" "headroom in the results"
pass "headroom 30%: chose $(jqr '.best.micro_batch' "$WORK/h.json")"

# --- noisy finalists: when the choice and its runner-up are within their
# step-time spread and one of them is noisy, both are measured again, once
"$AUTOBATCH" --quiet --no-cache --json "$WORK/noisy.json" -- "$SIMTRAIN" --capacity 24G --noise 30 \
  >/dev/null 2>&1 || fail "noisy: exit $?"
assert_eq true "$(jqr '.choice.runner_up != null and .choice.spread > 0.05' "$WORK/noisy.json")" \
  "noisy: the choice's spread"
# The finalists are measured again exactly when the margin is within the
# spread and one of them is noisy (a relative spread above 10%): either
# both were, or the choice as measured did not call for it.
again=$(jqr '[.trials[] | select(.retest == true and .outcome == "fit")] | length' "$WORK/noisy.json")
if [ "$again" = 0 ]; then
  assert_eq false "$(jqr '.choice.within_spread and .choice.spread > 0.10' "$WORK/noisy.json")" \
    "noisy: finalists within a noisy spread not measured again"
else
  assert_eq 2 "$again" "noisy: finalists measured again"
fi
pass "noisy finalists: margin $(jqr '.choice.margin' "$WORK/noisy.json"), spread $(jqr '.choice.spread' "$WORK/noisy.json")"

# --- warm start: the same command again confirms the boundary in two trials
"$AUTOBATCH" --quiet --batch 1:4096 --json "$WORK/w1.json" -- "$SIMTRAIN" --capacity 80G >/dev/null 2>&1 \
  || fail "warm 1: exit $?"
"$AUTOBATCH" --batch 1:4096 --json "$WORK/w2.json" -- "$SIMTRAIN" --capacity 80G >/dev/null 2>"$WORK/w2.err" \
  || fail "warm 2: exit $?"
grep -q "warm start" "$WORK/w2.err" || fail "warm 2: no warm start"
assert_eq "$(jqr '.max_fit[0].micro_batch' "$WORK/w1.json")" "$(jqr '.max_fit[0].micro_batch' "$WORK/w2.json")" \
  "warm: same boundary"
# two to confirm the boundary, the cached fastest size and the sizes
# measured next to it (and, when step times were noisy, the two finalists
# measured again)
[ "$(jqr '[.trials[] | select(.retest | not)] | length' "$WORK/w2.json")" -le 5 ] \
  || fail "warm: $(jqr '.summary.trials' "$WORK/w2.json") trials"
# the old choice and its measured neighbours below the max-fit are measured again
want=$(jq -r --slurpfile w1 "$WORK/w1.json" -n '
  [$w1[0].trials[] | select(.outcome == "fit" and .samples_per_s != null) | .micro_batch] | unique as $m
  | ($w1[0].best.micro_batch) as $c | ($m | index($c)) as $i
  | [$c, (if $i > 0 then $m[$i-1] else empty end), (if $i + 1 < ($m|length) then $m[$i+1] else empty end)]
  | map(select(. <= $w1[0].max_fit[0].micro_batch)) | sort | map(tostring) | join(" ")')
got=$(jqr '[.trials[] | select(.outcome == "fit") | .micro_batch] | unique | map(tostring) | join(" ")' "$WORK/w2.json")
for m in $want; do
  case " $got " in *" $m "*) ;; *) fail "warm: $m (old choice or its neighbour) not measured again: $got";; esac
done
"$AUTOBATCH" --quiet --no-cache --batch 1:4096 --json "$WORK/w3.json" -- "$SIMTRAIN" --capacity 80G \
  >/dev/null 2>&1 || fail "no-cache: exit $?"
[ "$(jqr '.summary.trials' "$WORK/w3.json")" -gt 3 ] || fail "--no-cache still used the cache"
# a changed command is a different key: no warm start
"$AUTOBATCH" --batch 1:4096 --json "$WORK/w4.json" -- "$SIMTRAIN" --capacity 40G >/dev/null 2>"$WORK/w4.err" \
  || fail "warm 4: exit $?"
if grep -q "warm start" "$WORK/w4.err"; then fail "a different command used the cache"; fi
assert_eq "false true false" "$(jqr '.summary.warm_start' "$WORK/w1.json") $(jqr '.summary.warm_start' \
  "$WORK/w2.json") $(jqr '.summary.warm_start' "$WORK/w3.json")" "warm: summary.warm_start of runs 1-3"
# the script's content and the visible devices are part of the key
printf '#!/bin/sh\nexec "%s" --capacity 80G "$@"\n' "$SIMTRAIN" >"$WORK/warm.sh"
chmod +x "$WORK/warm.sh"
warm() { "$AUTOBATCH" --batch 1:4096 --json "$WORK/$1.json" -- "$WORK/warm.sh" >/dev/null 2>&1 \
           || fail "$1: exit $?"; jqr '.summary.warm_start' "$WORK/$1.json"; }
warm s1 >/dev/null
assert_eq true "$(warm s2)" "warm: the same script again"
echo "# edited" >>"$WORK/warm.sh"
assert_eq false "$(warm s3)" "warm: an edited script"
assert_eq false "$(CUDA_VISIBLE_DEVICES=1 warm s4)" "warm: other visible devices"
pass "warm start: $(jqr '.summary.trials' "$WORK/w1.json") trials, then $(jqr '.summary.trials' "$WORK/w2.json")"

# --- NVML through the fake library: GPUs in the results, peaks measured
AUTOBATCH_NVML_LIB="$FAKE_NVML_LIB" FAKE_NVML_USED=1073741824 FAKE_NVML_TOTAL=80G \
  "$AUTOBATCH" --quiet --batch 1:64 --json "$WORK/n.json" -- "$SIMTRAIN" --capacity 8G >/dev/null 2>&1 \
  || fail "nvml: exit $?"
assert_eq "NVIDIA H100 80GB HBM3" "$(jqr '.host.gpus[0].name' "$WORK/n.json")" "nvml: GPU name"
assert_eq 85899345920 "$(jqr '.host.gpus[0].memory_total_bytes' "$WORK/n.json")" "nvml: GPU memory"
assert_eq 0 "$(jqr '[.trials[] | select(.outcome == "fit" and .peak_mem_bytes == null)] | length' "$WORK/n.json")" \
  "nvml: a fit without a peak"
# without a driver the same figures are null, and nothing fails
AUTOBATCH_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$AUTOBATCH" --quiet --batch 1:8 --json "$WORK/nn.json" \
  -- "$SIMTRAIN" --capacity 8G >/dev/null 2>&1 || fail "no nvml: exit $?"
assert_eq 0 "$(jqr '.host.gpus | length' "$WORK/nn.json")" "no nvml: gpus"
assert_eq null "$(jqr '.best.peak_mem_bytes' "$WORK/nn.json")" "no nvml: peak"
pass "NVML: fake GPU seen, peaks recorded; none without a driver"
assert_no_leftovers
