#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's GPU commands, copied as written, on a real GPU, and the
# nightly set-up the README recommends: the same job twice, the second run
# warm-started and gated with --baseline against the first (an unchanged
# job must not report a regression).  Then the live terminal status under a
# pseudo-terminal.  Needs a CUDA GPU and python3 with torch; builds
# build/autobatch (Release) first unless it is there (a machine without
# the -dev packages gets it carried, with the shared libraries it needs in
# build/lib).  Writes everything under $OUT (default /tmp/ab-gpu-readme)
# and prints one summary line per run.
#   bash bench/gpu_readme.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/ab-gpu-readme}
mkdir -p "$out"
export XDG_CACHE_HOME="$out/cache" XDG_STATE_HOME="$out/state"
if [ ! -x build/autobatch ]; then
  { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DAUTOBATCH_TESTS=OFF -DAUTOBATCH_WERROR=ON &&
    cmake --build build -j"$(nproc)"; } >"$out/build.log" 2>&1 || { tail -20 "$out/build.log"; exit 1; }
fi
[ -d build/lib ] && export LD_LIBRARY_PATH=$PWD/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
build/autobatch --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'

summary() { # name rc seconds
  python3 - "$out/$1.json" "$1" "$2" "$3" <<'PY'
import json, sys
path, name, rc, secs = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print("%-8s exit %s, %s s, no results (%s)" % (name, rc, secs, e)); sys.exit()
s, b, c = r["summary"], r.get("best") or {}, r.get("choice") or {}
print("%-8s exit %s, %s s, %d trials, warm_start %s, best %sx%s ckpt=%s %.0f samples/s, margin %s, baseline %s"
      % (name, rc, secs, s["trials"], s.get("warm_start"), b.get("micro_batch"), b.get("grad_accum"),
         b.get("checkpointing"), b.get("samples_per_s") or 0, c.get("margin"),
         (r.get("baseline") or {}).get("regression")))
for t in r["trials"]:
    print("   %s x%s ckpt=%s %s %s samples/s peak %s%s" % (t["micro_batch"], t["grad_accum"],
          t["checkpointing"], t["outcome"], t.get("samples_per_s"), t.get("peak_mem_bytes"),
          " (re-measured)" if t.get("retest") else ""))
PY
}
run() { # name, autobatch args...
  local name=$1 t0=$SECONDS rc; shift
  build/autobatch "$@" >"$out/$name.out" 2>&1; rc=$?
  cp r.json "$out/$name.json" 2>/dev/null
  summary "$name" "$rc" "$((SECONDS - t0))"
}
# The README's first GPU command, as written: night 1 (cold).
rm -f r.json
run night1 --batch 1:1024 --grad-accum 1,2,4 --checkpointing both --headroom 5 --json r.json -- \
  python3 examples/pytorch/train_tts.py --device cuda --report --worst_case
# Night 2: the same, warm, gated against night 1.
cp "$out/night1.json" "$out/baseline.json"
rm -f r.json
run night2 --batch 1:1024 --grad-accum 1,2,4 --checkpointing both --headroom 5 --json r.json \
  --baseline "$out/baseline.json" -- \
  python3 examples/pytorch/train_tts.py --device cuda --report --worst_case
# The README's accelerate command, as written, where accelerate is installed.
if python3 -c 'import accelerate' 2>/dev/null; then
  rm -f r.json
  run accel --batch 1:1024 --json r.json -- \
    accelerate launch --num_processes 1 examples/pytorch/train_tts.py --report --worst_case
else
  echo "accel    skipped: accelerate is not installed for python3"
fi
# The live status on a terminal (script(1) gives the pty), kept as a typescript.
if command -v script >/dev/null; then
  rm -f r.json
  t0=$SECONDS
  script -qfec "build/autobatch --no-cache --batch 1:2048 --json r.json -- python3 examples/pytorch/train_tts.py --device cuda --worst_case" \
    "$out/tty.typescript" >/dev/null 2>&1
  cp r.json "$out/tty.json" 2>/dev/null
  summary tty "$?" "$((SECONDS - t0))"
  tr '\r' '\n' <"$out/tty.typescript" | sed 's/\x1b\[[0-9;]*[A-Za-z]//g' | grep -v '^$' | tail -25
fi
