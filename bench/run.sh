#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Build the search bench and print its table (bench/README.md).
#
#   bash bench/run.sh             the summary table
#   bash bench/run.sh --detail    every trial of every algorithm on every curve
#   bash bench/run.sh --check     exit 1 when a target of the project's search is missed
#   bash bench/run.sh --save      write the table and the detail to
#                                 bench/results/search-vs-anchors.txt
#
# It compiles directly with $CC (default cc) into $BENCH_BUILD (default
# build-bench/, git-ignored), so it needs neither CMake nor the project's
# libraries: only bench.c and the search it measures, tuner/search/search.c and
# tuner/search/space.c.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BENCH_BUILD:-$root/build-bench}
cc=${CC:-cc}

save=0
args=()
for a in "$@"; do
  case "$a" in
    --save) save=1 ;;
    *) args+=("$a") ;;
  esac
done

mkdir -p "$build"
"$cc" -std=c11 -O2 -Wall -Wextra -Werror -I "$root/tuner" \
  "$root/bench/bench.c" "$root/tuner/search/search.c" "$root/tuner/search/space.c" -lm \
  -o "$build/autobatch-bench"

if [ "$save" = 1 ]; then
  # One deterministic run: the table, then every curve's trials.
  mkdir -p "$root/bench/results"
  out="$root/bench/results/search-vs-anchors.txt"
  "$build/autobatch-bench" --detail > "$out.tmp"
  mv "$out.tmp" "$out"
  sed '/^per curve/,$d' "$out"
else
  exec "$build/autobatch-bench" ${args[@]+"${args[@]}"}
fi
