#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# autobatch's GPU answers against real boundaries on one GPU (issue 25,
# item 8).  Models defined inline in bench/gpu_verify.py (random weights,
# synthetic data, nothing downloaded): a 163M-parameter GPT-like decoder
# with AdamW, the same with activation checkpointing, a ResNet-18-sized
# conv net; each with the default allocator and expandable_segments:True
# (the GPT also with backend:cudaMallocAsync).  For each, under a 16 GiB
# budget:
#   fraction  the real boundary (largest micro-batch that trains 3 steps)
#             with torch's memory fraction = 16 GiB / total, one fresh
#             process per size (a fork server: torch imported once, CUDA
#             started in each child), from one uncapped process's estimate;
#             that process's peak reserved at 2, 3 and a larger size is the
#             real curve at the trace sizes;
#   replay    autobatch --replay --emulate-gpu-memory 16G (prediction, trials,
#             wall), then `autobatch predict` on its kept traces: for the
#             16 GiB card, for the fraction's budget (+ the recording's
#             memory outside the allocator), and the simulated need at the
#             sizes measured for real;
#   held      the boundary on the real card with all but 16 GiB held back by
#             another process (fresh processes again);
#   emulated  the same bisection under the preload library at 16 GiB;
#   plain     a plain autobatch --emulate-gpu-memory 16G search.
# Most important first (GPT default: real vs replay vs held vs emulated);
# each part is skipped when its time is not left; every finished part is a
# line in the results file at once, so a cut-off run still reports.
#
#   bash bench/gpu_verify.sh            # GPU: at most GV_LIMIT_S (360) s after the build
#   bash bench/gpu_verify.sh --dry      # CPU only, tiny models, /usr/bin/python3 (CI)
#
# Environment: OUT (default bench/results): the results file
# gpu-verify-<gpu>-<date>.txt and gpu-verify-work/ (logs, results JSON,
# traces, records.jsonl); AUTOBATCH (default build-gpu/autobatch, else
# build/autobatch; built with cmake when neither exists); PY (python3, or
# /usr/bin/python3 with --dry); GV_LIMIT_S; GV_BUDGET_GIB (16); GV_ONLY
# ("gpt:default conv:expandable": only those); GV_PY_SCRIPT and GV_NAME
# (bench/gpu_seeds.sh runs bench/gpu_seeds.py through this script).
set -uo pipefail
cd "$(dirname "$0")/.."
script=${GV_PY_SCRIPT:-bench/gpu_verify.py}
name=${GV_NAME:-gpu-verify}
dry=0
[ "${1:-}" = "--dry" ] && dry=1
out=${OUT:-bench/results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
t_start=$SECONDS
if [ $dry = 1 ]; then
  py=${PY:-/usr/bin/python3}
  limit=${GV_LIMIT_S:-150}
  tag=dry
else
  py=${PY:-python3}
  limit=${GV_LIMIT_S:-360}
  tag=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 |
        tr 'A-Z' 'a-z' | grep -o -E '[a-z]?[0-9]{2,4}[a-z]*' | head -1)
  tag=${tag:-gpu}
fi
results="$out/$name-$tag-$(date -u +%Y%m%d-%H%M%S).txt"
work="$out/$name-work"
[ $dry = 1 ] && work="$out/$name-work-dry"
mkdir -p "$work"
say() { echo "$*" | tee -a "$results"; }

say "bench/${name//-/_}.sh$([ $dry = 1 ] && echo ' --dry') on $(hostname) at $(date -u +%FT%TZ)"
say "tree: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git status --porcelain 2>/dev/null | grep -q . && echo ' + uncommitted changes')"
if [ $dry = 0 ]; then
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi >"$work/nvidia-smi.txt" 2>&1
    say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')"
  else
    say "gpu: nvidia-smi not found"
  fi
fi
say "python: $py $("$py" -c 'import sys, torch
cuda = torch.cuda.is_available()
print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      torch.cuda.get_device_name(0) if cuda else "no CUDA device",
      "%d MiB (CUDA total)" % (torch.cuda.mem_get_info()[1] >> 20) if cuda else "")' 2>&1 | tail -1)"

# autobatch: the one given, a build here, or a build now (cmake and the -dev
# packages permitting); without it the pure-torch parts still run.
ab=${AUTOBATCH:-}
if [ -z "$ab" ]; then
  for c in build-gpu/autobatch build/autobatch; do [ -x "$c" ] && { ab=$PWD/$c; break; }; done
fi
if [ -z "$ab" ] && [ $dry = 0 ] && command -v cmake >/dev/null; then
  say "building build-gpu/autobatch ..."
  if { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DAUTOBATCH_TESTS=OFF &&
       cmake --build build-gpu -j"$(nproc)"; } >"$work/build.log" 2>&1; then
    ab=$PWD/build-gpu/autobatch
  else
    say "build failed ($(tail -3 "$work/build.log" | tr '\n' ' ')); the pure-torch parts run alone"
  fi
fi
emu=${AUTOBATCH_GPUEMU_LIB:-}
if [ -n "$ab" ]; then
  d=$(dirname "$ab")
  [ -d "$d/lib" ] && export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [ -z "$emu" ] && [ -f "$d/probes/gpuemu/libautobatch-gpuemu.so" ] && emu=$d/probes/gpuemu/libautobatch-gpuemu.so
  say "autobatch: $ab ($("$ab" --version 2>&1 | head -1))"
else
  say "autobatch: none (no build-gpu/autobatch, build/autobatch or AUTOBATCH)"
fi
left=$((limit - (SECONDS - t_start)))
[ "$left" -lt 30 ] && left=30
args=(run --results "$results" --work "$work" --python "$py" --limit-s "$left"
      --budget-gib "${GV_BUDGET_GIB:-16}")
[ -n "$ab" ] && args+=(--autobatch "$ab")
[ -n "$emu" ] && args+=(--gpuemu "$emu")
[ $dry = 1 ] && args+=(--dry --search-budget-s 45 --plain-budget-s 40)
"$py" "$script" "${args[@]}"
rc=$?
echo "results: $results"
exit $rc
