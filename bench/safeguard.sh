#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The search's safeguard against bisection (issue 27, item 3), in one run:
# the search bench (bench/bench.c) built against this tree's search and
# against an older one, and this tree's search with other trial budgets
# (SEARCH_SLACK), each printing its boundary trials per curve family
# against per-cell bisection, the joint search with checkpointing, and the
# targets (bench/README.md, "The safeguard").
#
#   bash bench/safeguard.sh                 print it
#   bash bench/safeguard.sh --save          also write bench/results/search-safeguard-<commit>.txt
#   bash bench/safeguard.sh --old REV       the older search to compare (default 9ebe994,
#                                           the tree before the budget)
#
# Every variant is the same bench.c (the tables are this tree's), compiled
# like bench/run.sh: $CC (default cc) -std=c11 -O2, into $BENCH_BUILD
# (default build-bench/).  Deterministic: no timing, no randomness.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BENCH_BUILD:-$root/build-bench}
cc=${CC:-cc}
old=9ebe994
save=0
while [ $# -gt 0 ]; do
  case "$1" in
    --save) save=1 ;;
    --old) old=$2; shift ;;
    *) echo "safeguard.sh: unknown option '$1'; try --save or --old REV" >&2; exit 2 ;;
  esac
  shift
done

mkdir -p "$build/old/search"
flags=(-std=c11 -O2 -Wall -Wextra -Werror)
for f in search.c search.h space.c space.h; do
  git -C "$root" show "$old:tuner/search/$f" > "$build/old/search/$f"
done
"$cc" "${flags[@]}" -I "$root/tuner" "$root/bench/bench.c" "$root/tuner/search/search.c" \
  "$root/tuner/search/space.c" -lm -o "$build/bench-new"
"$cc" "${flags[@]}" -I "$build/old" "$root/bench/bench.c" "$build/old/search/search.c" \
  "$build/old/search/space.c" -lm -o "$build/bench-old"
for k in 1 2 3; do
  "$cc" "${flags[@]}" -DSEARCH_SLACK=$k -I "$root/tuner" "$root/bench/bench.c" \
    "$root/tuner/search/search.c" "$root/tuner/search/space.c" -lm -o "$build/bench-slack$k"
done

commit=$(git -C "$root" rev-parse --short HEAD)
dirty=""
git -C "$root" diff --quiet HEAD -- tuner/search bench/bench.c || dirty=" + uncommitted changes"
oldname=$(git -C "$root" rev-parse --short "$old")

# The part of a bench run this compares: from the per-family table to the
# targets.
part() {
  "$1" | sed -n '/^search by memory figures/,/^target: the choice/p'
}

report() {
  echo "search safeguard bench: commit $commit$dirty against $oldname"
  echo "build: $cc ${flags[*]} (bench/run.sh's flags), bench.c of this tree for every variant"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "=== this tree (SEARCH_SLACK 4, the default)"
  part "$build/bench-new"
  echo
  echo "=== before: the search of $oldname (no budget, ramp on flat figures, fit side first,"
  echo "=== the checkpointing cell in the middle of its range without figures)"
  part "$build/bench-old"
  for k in 1 2 3; do
    echo
    echo "=== this tree with SEARCH_SLACK $k: boundary search by figures, joint search, targets"
    part "$build/bench-slack$k" | grep -E '^(nvml|probe|none) +[0-9]|^ +all|^target'
  done
}

if [ "$save" = 1 ]; then
  mkdir -p "$root/bench/results"
  out="$root/bench/results/search-safeguard-$commit.txt"
  report > "$out.tmp"
  mv "$out.tmp" "$out"
  cat "$out"
  echo "wrote $out" >&2
else
  report
fi
