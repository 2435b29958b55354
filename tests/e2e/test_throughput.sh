#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One definition of throughput (issue 24, item 3): samples between the
# first and the last measured step boundary over the time between them.
# simtrain's speed is known exactly (a step takes overhead + sample_time x
# micro-batch), so whatever --steps is, autobatch must print it: within 2%
# of that rate and of each other.  --steps 3 used to print 4/3 of it: a bar
# line was stamped when the next redraw ended it (a step late), the last
# one when the output closed (on time), and the median of the per-step
# times then took the short last interval as the speed.
source "$(dirname "$0")/lib.sh"

micro=8 overhead=0.005 per_sample=0.02
# samples per second as simtrain sleeps them (no noise, no pressure)
known=$(awk -v m=$micro -v o=$overhead -v s=$per_sample 'BEGIN { printf "%.6f", m / (o + s * m) }')

rates=()
for steps in 2 3 5 10; do
  f="$WORK/steps$steps.json"
  "$AUTOBATCH" --quiet --no-cache --preset hf --batch $micro:$micro --steps $steps --warmup 1 \
    --json "$f" -- "$SIMTRAIN" --sample-time ${per_sample}s --step-overhead ${overhead}s \
    --output_dir "$WORK/out" >"$WORK/steps$steps.out" 2>&1 \
    || fail "--steps $steps: exit $? ($(tail -3 "$WORK/steps$steps.out"))"
  sps=$(jqr '.trials[0].samples_per_s' "$f")
  st=$(jqr '.trials[0].step_time_s' "$f")
  n=$(jqr '.trials[0].steps_measured' "$f")
  [ "$sps" != null ] || fail "--steps $steps: no samples/s"
  # the steps counted are the steps timed: at least the steps asked for,
  # and samples/s is micro-batch x steps over the interval they span
  [ "$n" -ge "$steps" ] || fail "--steps $steps: $n steps measured"
  awk -v a="$sps" -v m=$micro -v t="$st" 'BEGIN { exit !(a > 0 && (a * t / m - 1) ^ 2 < 1e-12) }' \
    || fail "--steps $steps: samples/s $sps is not $micro / step_time_s $st"
  awk -v a="$sps" -v k="$known" 'BEGIN { d = a / k - 1; exit !(d < 0.02 && d > -0.02) }' \
    || fail "--steps $steps: $sps samples/s, simtrain runs at $known (more than 2% off; $n steps of ${st}s)"
  rates+=("$sps")
  echo "--steps $steps: $sps samples/s over $n steps (known $known)"
done
spread=$(printf '%s\n' "${rates[@]}" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.4f", hi / lo - 1 }')
awk -v s="$spread" 'BEGIN { exit !(s < 0.02) }' || fail "samples/s across --steps 2 3 5 10 spread by $spread: ${rates[*]}"
pass "samples/s at --steps 2, 3, 5, 10 within 2% of each other (spread $spread) and of simtrain's $known"
