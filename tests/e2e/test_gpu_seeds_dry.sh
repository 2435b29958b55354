#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/gpu_seeds.sh --dry: the seed users' models (F5-TTS DiT, a
# Parler-TTS decoder, an Orpheus-like Llama with checkpointing), tiny, on
# the CPU with Debian's torch: each gets a real boundary by fresh processes
# under an address-space cap and a --replay search that must land on it;
# the results file has a row per model, written as each part finished.
source "$(dirname "$0")/lib.sh"
PY=${AB_PYTHON:-/usr/bin/python3}
"$PY" -c "import torch" 2>/dev/null || skip "$PY cannot import torch: apt-get install python3-torch"
cd "$AB_SOURCE_DIR"
rc=0
OUT="$WORK/out" PY="$PY" GV_LIMIT_S=200 timeout -k 5 240 bash bench/gpu_seeds.sh --dry \
  >"$WORK/run.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "gpu_seeds.sh --dry exit $rc: $(tail -20 "$WORK/run.out")"
res=$(ls "$WORK"/out/gpu-seeds-dry-*.txt 2>/dev/null | head -1)
[ -n "$res" ] || fail "no results file: $(tail -5 "$WORK/run.out")"
grep -q "^autobatch: $AUTOBATCH" "$res" || fail "the built autobatch was not used: $(grep autobatch: "$res")"
for m in f5 parler orpheus; do
  row=$(grep "^\[.*\] | $m | default |" "$res" | tail -1)
  [ -n "$row" ] || fail "no $m row: $(cat "$res")"
  IFS='|' read -r _ _ _ real _ _ _ _ _ rsearch _ <<<"$row"
  real=${real// /} rsearch=${rsearch// /}
  [[ $real =~ ^[0-9]+$ ]] || fail "$m: no real boundary: $row"
  [[ $rsearch =~ ^[0-9]+$ ]] || fail "$m: no replay search answer: $row"
  # The search must certify the boundary fresh processes found (the same
  # cap; the probe's own few hundred kB may cost one size).
  [ $((real - rsearch)) -le 1 ] && [ "$rsearch" -le "$real" ] ||
    fail "$m: replay search found $rsearch, fresh processes $real: $row"
  grep -q "^\[ *[0-9.]*s\] $m default fraction: boundary $real" "$res" ||
    fail "$m: the fraction part's line is missing"
  pass "$m: real $real, replay search $rsearch"
done
assert_no_leftovers
pass "gpu_seeds --dry: $(grep -o 'done in [0-9]* s' "$res")"
