#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --emulate-gpu-memory on a real GPU: the same PyTorch job's boundary on an
# emulated SIZE card, by the preload library and by the probe's memory
# fraction, against the boundary on the real card with all but SIZE held
# back by another process (what a SIZE card would leave the job).
#   bash bench/gpu_emulate.sh [SIZE_GIB] [BATCH_RANGE]
# Needs a CUDA GPU, python3 with torch, and a build (AUTOBATCH, default
# build/autobatch, with probes/gpuemu/libautobatch-gpuemu.so beside it).
# Prints one line per method and writes results JSON to $OUT or /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
size_gib=${1:-16}
range=${2:-1:16384}
ab=${AUTOBATCH:-build/autobatch}
out=${OUT:-/tmp/ab-emulate}
mkdir -p "$out"
size=$((size_gib << 30))
job=(python3 examples/pytorch/train_tts.py --device cuda --worst_case)
common=(--no-cache --batch "$range" --steps 3 --warmup 1 --budget "${BUDGET:-170s}")

python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0),
  "total %d MiB" % (torch.cuda.mem_get_info()[1] >> 20))'

search() { # name, autobatch args...
  local name=$1; shift
  local t0=$SECONDS
  AUTOBATCH_EMULATE_GPU_LOG="$out/$name.emu.log" \
    "$ab" --quiet "${common[@]}" --json "$out/$name.json" "$@" -- "${job[@]}" \
    >"$out/$name.out" 2>&1 || true
  python3 - "$out/$name.json" "$name" "$((SECONDS - t0))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mf = r["max_fit"][0] if r["max_fit"] else {}
mark = {"fit": "+", "oom": "x"}
print("%-8s max_fit %s smallest_fail %s largest_tried_fit %s trials %d (%s s) emulated %s"
      % (sys.argv[2], mf.get("micro_batch"), mf.get("smallest_fail"),
         mf.get("largest_tried_fit"), r["summary"]["trials"], sys.argv[3],
         (r["host"].get("emulated_gpu_memory") or {}).get("with")))
print("         " + " ".join("%d%s" % (x["micro_batch"], mark.get(x["outcome"], "?"))
                            for x in r["trials"]) + "   (+ fit, x oom, ? stopped by --budget)")
PY
}

search preload --emulate-gpu-memory "${size_gib}G"
search probe --emulate-gpu-memory "${size_gib}G" --emulate-with probe

# Hold back everything but SIZE in another process, then search the real card.
python3 - "$size" "$out/hold.ready" <<'PY' &
import sys, time, torch
size, ready = int(sys.argv[1]), sys.argv[2]
torch.cuda.init()
held = []
chunk = 1 << 30
while True:
    free, total = torch.cuda.mem_get_info()
    want = free - size
    if want < (2 << 20):
        break
    n = min(chunk, want) // (2 << 20) * (2 << 20)
    try:
        held.append(torch.empty(n, dtype=torch.uint8, device="cuda"))
    except RuntimeError:
        chunk //= 2
        if chunk < (2 << 20):
            break
free, total = torch.cuda.mem_get_info()
open(ready, "w").write("%d %d\n" % (free, total))
print("holder: free %d MiB of %d MiB (target %d MiB)" % (free >> 20, total >> 20, size >> 20), flush=True)
time.sleep(3600)
PY
holder=$!
trap 'kill $holder 2>/dev/null || true' EXIT
for _ in $(seq 300); do [ -s "$out/hold.ready" ] && break; sleep 0.2; done
search held
kill "$holder"; wait "$holder" 2>/dev/null || true
grep -h "refused" "$out"/preload.emu.log 2>/dev/null | head -3 || true
