#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/gpu_verify.sh --dry: every step of the GPU verification on the CPU
# with tiny models (Debian's torch 1.13), under a 3-minute bound: the real
# boundary by fresh processes under an address-space cap, the same with a
# holder process and with the emulation library preloaded, autobatch
# --replay with kept traces and `autobatch predict` on them, a plain
# search; the results file gets a line per part and the table's rows.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || skip "$PY cannot import torch: apt-get install python3-torch"
cd "$AB_SOURCE_DIR"
rc=0
OUT="$WORK/out" PY="$PY" GV_LIMIT_S=150 timeout -k 5 180 bash bench/gpu_verify.sh --dry \
  >"$WORK/run.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "gpu_verify.sh --dry exit $rc: $(tail -20 "$WORK/run.out")"
res=$(ls "$WORK"/out/gpu-verify-dry-*.txt 2>/dev/null | head -1)
[ -n "$res" ] || fail "no results file: $(tail -5 "$WORK/run.out")"
grep -q "^python: $PY .*torch" "$res" || fail "no python/torch line in $res"
grep -q "^autobatch: $AUTOBATCH" "$res" || fail "the built autobatch was not used: $(grep autobatch: "$res")"
# Header, then the rows.  gpt/default runs every part: all its columns are numbers.
grep -q '| model | allocator | real@fraction | predict@fraction | held-back card | emulated (bisect) |' "$res" ||
  fail "no table header in $res"
row=$(grep '| gpt | default |' "$res" | tail -1)
[ -n "$row" ] || fail "no gpt/default row: $(cat "$res")"
IFS='|' read -r _ model alloc real pfrac held emu rep pcard rsearch plain trials wall _ <<<"$row"
for v in "$real" "$pfrac" "$held" "$emu" "$rsearch" "$plain"; do
  [[ $v =~ ^\ *[0-9]+ ]] || fail "gpt/default: a column is not a number: $row"
done
[[ $rep =~ ^\ *([0-9]+/[0-9]+|declined|done|off) ]] || fail "gpt/default: no replay prediction: $row"
[[ $trials =~ ^\ *[0-9]+/[0-9]+ ]] || fail "gpt/default: no trial counts: $row"
pass "gpt/default row: $row"
# The held-back, emulated and real bisections run under the same cap on the
# CPU: within one size (the preloaded library maps a little more).
r=${real// /} h=${held// /} e=${emu// /}
[ $((r - h)) -le 1 ] && [ $((h - r)) -le 1 ] && [ $((r - e)) -le 1 ] && [ $((e - r)) -le 1 ] ||
  fail "the same cap gave boundaries more than one apart: $row"
for m in "gpt-ckpt | default" "conv | default" "gpt | expandable"; do
  grep -q "^\[.*\] | $m | [0-9]" "$res" || fail "no $m row with a real boundary: $(grep -F "$m" "$res")"
done
pass "every configuration of the dry plan has a row"
# Each finished part was written as it finished, with the elapsed time.
n=$(grep -c -E '^\[ *[0-9.]+s\] (gpt|gpt-ckpt|conv) [a-z]+ (fraction|replay|held|emulated|plain):' "$res")
[ "$n" -ge 8 ] || fail "only $n part lines: $(cat "$res")"
grep -q "traces-gpt-default-replay" "$WORK/out/gpu-verify-work-dry/records.jsonl" || fail "replay traces not recorded"
ls "$WORK"/out/gpu-verify-work-dry/traces-gpt-default-replay/*.txt >/dev/null 2>&1 || fail "no kept traces"
assert_no_leftovers
pass "gpu_verify --dry: $n parts in $(grep -o 'done in [0-9]* s' "$res")"
