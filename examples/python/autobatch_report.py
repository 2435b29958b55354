# SPDX-License-Identifier: MIT
"""Report exact step times to autobatch from a training loop.

autobatch gives every trial a file path in AUTOBATCH_REPORT.  A trainer
that appends one JSON line per optimizer step to it,

    {"step": N, "samples": S, "time": T, "peak_mem_bytes": P}

gets measured by its own clock instead of by when its progress bar happens
to be printed.  Drop this file next to your script, then:

    from autobatch_report import Reporter
    report = Reporter()                      # does nothing outside autobatch
    for step, batch in enumerate(loader, 1):
        ...
        optimizer.step()
        report.step(step, samples=len(batch))

`time` is time.monotonic(); `peak_mem_bytes` is taken from
torch.cuda.max_memory_allocated() on CUDA, else from the process's peak
resident set (getrusage), unless you pass it.  Standard library only.
"""
import json
import os
import resource
import sys
import time


class Reporter:
    """Append step records to $AUTOBATCH_REPORT (a no-op when unset)."""

    def __init__(self, path=None):
        self.path = path if path is not None else os.environ.get("AUTOBATCH_REPORT")
        self.samples = 0
        self._file = open(self.path, "a", buffering=1) if self.path else None

    def step(self, step, samples, peak_mem_bytes=None):
        """Record that optimizer step `step` finished, having seen `samples` more samples."""
        if self._file is None:
            return
        self.samples += samples
        record = {"step": int(step), "samples": self.samples, "time": time.monotonic()}
        peak = peak_mem_bytes if peak_mem_bytes is not None else _peak_memory()
        if peak is not None:
            record["peak_mem_bytes"] = int(peak)
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None


def _peak_memory():
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated()
    # ru_maxrss is in KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
