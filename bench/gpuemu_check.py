# SPDX-License-Identifier: MIT
"""The preload library on a real GPU, without autobatch: run as
    AUTOBATCH_EMULATE_GPU_MEMORY=$((16<<30)) LD_PRELOAD=build/probes/gpuemu/libautobatch-gpuemu.so \
      python3 bench/gpuemu_check.py
(add PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the cuMemCreate path).
Prints what torch sees and whether allocations just below and just above the
emulated free memory succeed and fail; exits 1 when the emulation is not in effect."""
import os
import sys

import torch

size = int(os.environ["AUTOBATCH_EMULATE_GPU_MEMORY"])
free, total = torch.cuda.mem_get_info()
props = torch.cuda.get_device_properties(0).total_memory
conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
print("allocator %s: mem_get_info total %d MiB free %d MiB; device properties %d MiB; emulated %d MiB"
      % (conf, total >> 20, free >> 20, props >> 20, size >> 20))
ok = total == size
below = (free - (256 << 20)) // 4 * 4
x = torch.empty(below, dtype=torch.uint8, device="cuda")
print("allocated %d MiB (free less 256 MiB): ok" % (below >> 20))
del x
torch.cuda.empty_cache()
free, _ = torch.cuda.mem_get_info()
try:
    y = torch.empty(free + (256 << 20), dtype=torch.uint8, device="cuda")
    print("allocated %d MiB (free plus 256 MiB): NOT refused" % ((free + (256 << 20)) >> 20))
    ok = False
except torch.OutOfMemoryError as e:
    print("free plus 256 MiB refused: %s" % str(e).splitlines()[0][:160])
sys.exit(0 if ok else 1)
