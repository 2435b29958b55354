#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Config writes take the file's lock and re-read it under the lock: 20
# `autobatch config set` processes started at once on one file, each
# setting a different key, lose none of the 20 updates; no lock file or
# temporary file is left beside it.
source "$(dirname "$0")/lib.sh"

race() { # file format(yaml|json)
  local f=$1 i
  local pids=()
  for i in $(seq 0 19); do
    "$AUTOBATCH" config set "$f" "k$i=$((i + 100))" 2>"$WORK/err.$i" &
    pids+=($!)
  done
  for i in $(seq 0 19); do
    wait "${pids[$i]}" || fail "$2: config set k$i: exit $? $(cat "$WORK/err.$i")"
  done
  local lost=""
  for i in $(seq 0 19); do
    [ "$("$AUTOBATCH" config get "$f" "k$i")" = $((i + 100)) ] || lost="$lost k$i"
  done
  [ -z "$lost" ] || fail "$2: updates lost:$lost"
  cmp -s "$f" "$WORK/expected" || { diff "$WORK/expected" "$f" >&2 || true; fail "$2: bytes"; }
  rm -f "$WORK"/err.*
  assert_eq "$(basename "$f") expected" "$(ls -A "$WORK" | grep -v '^cache$' | sort -r | tr '\n' ' ' | sed 's/ $//')" \
    "$2: files beside the config"
  pass "$2: 20 concurrent config set, all 20 updates kept"
}

{ echo "# twenty knobs"; for i in $(seq 0 19); do echo "k$i: 000  # knob $i"; done; } >"$WORK/many.yaml"
{ echo "# twenty knobs"; for i in $(seq 0 19); do echo "k$i: $((i + 100))  # knob $i"; done; } >"$WORK/expected"
race "$WORK/many.yaml" yaml
rm "$WORK/many.yaml"

{ echo "{"; for i in $(seq 0 19); do echo "  \"k$i\": 0$([ "$i" = 19 ] || echo ,)"; done; echo "}"; } >"$WORK/many.json"
{ echo "{"; for i in $(seq 0 19); do echo "  \"k$i\": $((i + 100))$([ "$i" = 19 ] || echo ,)"; done; echo "}"; } >"$WORK/expected"
race "$WORK/many.json" json
