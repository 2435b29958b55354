#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# --emulate-gpu-memory on a machine without a GPU: the fake NVML stands in
# for a 24 GiB card, simtrain takes AUTOBATCH_EMULATE_GPU_MEMORY as its
# device's size (what the preload library makes of a real card; the
# library itself is tested against a fake driver in unit.gpuemu, and on a
# real GPU in bench/results/), and the probe's method is checked against
# a stand-in torch.cuda.  Checked: the emulated boundary is the smaller
# card's, the preload library is in every trial's LD_PRELOAD (and harmless
# to a program that never touches CUDA), the results say the memory was
# emulated, the cache keeps emulated and real boundaries apart, and bad
# input is refused before the first trial.
source "$(dirname "$0")/lib.sh"

export AUTOBATCH_NVML_LIB=$FAKE_NVML_LIB FAKE_NVML_TOTAL=24G
# simtrain may be built with ASan, which wants its runtime first in LD_PRELOAD
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
cat >"$WORK/train.sh" <<SH
#!/bin/sh
echo "\$LD_PRELOAD|\$AUTOBATCH_EMULATE_GPU_MEMORY|\$AUTOBATCH_EMULATE_METHOD" >>"$WORK/env.log"
exec "$SIMTRAIN" --capacity 24G --output_dir "$WORK/out" "\$@"
SH
chmod +x "$WORK/train.sh"
full=$("$SIMTRAIN" --capacity 24G --print-max)
small=$("$SIMTRAIN" --capacity 12G --print-max)
[ "$full" != "$small" ] || fail "the test needs different boundaries ($full)"

run() { # name, autobatch args...
  local name=$1; shift
  : >"$WORK/env.log"
  "$AUTOBATCH" --quiet --preset hf --batch 1:256 --steps 3 --json "$WORK/$name.json" "$@" \
    -- "$WORK/train.sh" >"$WORK/$name.out" 2>&1 || fail "$name: autobatch exited $? ($(tail -3 "$WORK/$name.out"))"
}

run preload --emulate-gpu-memory 12G
f="$WORK/preload.json"
assert_eq "$small" "$(jqr '.max_fit[0].micro_batch' "$f")" "preload: max micro-batch on 12G"
assert_eq $((12 << 30)) "$(jqr '.host.emulated_gpu_memory.bytes' "$f")" "preload: emulated bytes"
assert_eq preload "$(jqr '.host.emulated_gpu_memory.with' "$f")" "preload: method"
assert_eq $((24 << 30)) "$(jqr '.host.emulated_gpu_memory.real_total_bytes' "$f")" "preload: real total"
assert_eq $((12 << 30)) "$(jqr '.host.gpus[0].memory_total_bytes' "$f")" "preload: the GPU's total as reported"
lines=$(wc -l <"$WORK/env.log")
with_lib=$(grep -c "libautobatch-gpuemu.so|$((12 << 30))|$" "$WORK/env.log" || true)
assert_eq "$lines" "$with_lib" "preload: trials with the library and the size"
pass "preload: $small on an emulated 12G card ($full on the real 24G), library in all $lines trials"

# The real card is searched apart: the emulated boundary is not reused.
run real
assert_eq "$full" "$(jqr '.max_fit[0].micro_batch' "$WORK/real.json")" "real: max micro-batch"
assert_eq null "$(jqr '.host.emulated_gpu_memory' "$WORK/real.json")" "real: not emulated"
grep -q "warm start" "$WORK/real.out" && fail "real: warm-started from the emulated run"
pass "real: $full, searched afresh"

# A user's own LD_PRELOAD stays, after ours.
LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 run keep --emulate-gpu-memory 12G --no-cache --batch 1:16
grep -q "libautobatch-gpuemu.so:/lib/x86_64-linux-gnu/libm.so.6|" "$WORK/env.log" \
  || fail "keep: the user's LD_PRELOAD was not kept: $(head -1 "$WORK/env.log")"
pass "keep: the user's LD_PRELOAD follows ours"

run probe --emulate-gpu-memory 12G --emulate-with probe --no-cache
assert_eq probe "$(jqr '.host.emulated_gpu_memory.with' "$WORK/probe.json")" "probe: method"
grep -q "^|$((12 << 30))|probe$" "$WORK/env.log" || fail "probe: env $(head -1 "$WORK/env.log")"
pass "probe: AUTOBATCH_EMULATE_METHOD=probe and no preload"

# The probe's method against a stand-in torch.cuda: 40 GiB card, 1 GiB
# outside the allocator at CUDA's start, emulating 24 GiB.
PROBE_PY="$AB_SOURCE_DIR/probes/python/sitecustomize.py" python3 - <<'PY' || fail "probe method"
import importlib.util, os, types
os.environ.pop("AUTOBATCH_PROBE", None)
spec = importlib.util.spec_from_file_location("abprobe", os.environ["PROBE_PY"])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
G = 1 << 30
class Cuda:
    def __init__(s): s.init = False; s.queue = []; s.dev = 0; s.frac = {}
    def is_initialized(s): return s.init
    def _lazy_call(s, f): s.queue.append(f)
    def current_device(s): return s.dev
    def set_device(s, d): s.dev = d
    def mem_get_info(s, d): return (39 * G - s.reserved(d), 40 * G)
    def reserved(s, d): return 2 * G if d == 1 else 0
    def memory_reserved(s, d): return s.reserved(d)
    def set_per_process_memory_fraction(s, f, d): s.frac[d] = f
    def start(s):
        s.init = True
        for f in s.queue: f()
lines = []
probe = types.SimpleNamespace(emit=lines.append, error=lambda w: lines.append("error " + w))
os.environ["AUTOBATCH_EMULATE_GPU_MEMORY"] = str(24 * G)
torch = types.SimpleNamespace(cuda=Cuda())
m._emulate(probe, torch)
assert not torch.cuda.frac, "applied before CUDA started"
torch.cuda.start()
assert abs(torch.cuda.frac[0] * 40 * G - 23 * G) < 1024, torch.cuda.frac
torch.cuda.set_device(1)   # the allocator already holds 2 GiB there: not "outside"
assert abs(torch.cuda.frac[1] * 40 * G - 23 * G) < 1024, torch.cuda.frac
assert len(lines) == 2 and '"limit":%d' % (23 * G) in lines[0], lines
print("probe method: fraction %.4f (23 of 40 GiB) on each device" % torch.cuda.frac[0])
PY
pass "probe method: the allocator's limit is the emulated size less the memory outside it"

# Bad input: exit 2, one line naming the fix, before any trial.
bad() { # what, expected text, args...
  assert_refused "$1" "$2" "$WORK/env.log" --quiet --preset hf --batch 1:8 "${@:3}" -- "$WORK/train.sh"
}
bad "not smaller" "not smaller than the GPU's 24.0 GiB" --emulate-gpu-memory 32G
bad "too small" "at least 256M" --emulate-gpu-memory 1M
bad "method" "use preload or probe" --emulate-gpu-memory 8G --emulate-with magic
bad "probe off" "drop --no-probe" --emulate-gpu-memory 8G --emulate-with probe --no-probe
AUTOBATCH_GPUEMU_LIB=/nonexistent/lib.so bad "no library" "AUTOBATCH_GPUEMU_LIB" --emulate-gpu-memory 8G
AUTOBATCH_NVML_LIB=/nonexistent/libnvidia-ml.so.1 bad "no GPU" "needs a GPU seen through NVML" \
  --emulate-gpu-memory 8G
pass "bad --emulate-gpu-memory input refused before the first trial"
assert_no_leftovers
