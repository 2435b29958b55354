#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real trainer's own entry point, stopped after N optimizer steps.

    AB_DIRECT_STEPS=4 python direct_steps.py -m MODULE [ARGS...]
    AB_DIRECT_STEPS=4 python direct_steps.py SCRIPT.py [ARGS...]

The real trainers' tests bisect directly under `ulimit -v` with this:
exit 0 means N real optimizer updates ran (forward, backward and step at
that batch size), anything else means they did not.  It counts with
torch's global optimizer step hook, so forward-only passes (GlowTTS's
data-dependent init) are not counted, prints the peak address space for
the test's calibration, and leaves with os._exit: Coqui's Trainer.fit
catches BaseException, SystemExit included, and would turn a sys.exit(0)
into exit 1.  The trainer runs as `python -m MODULE` or `python SCRIPT`
would run it (runpy, sys.argv as it would see it); its code is untouched.
"""
import os
import runpy
import sys

import torch  # noqa: F401  (torch.optim.optimizer below is a submodule)
import torch.optim.optimizer as _optmod

want = int(os.environ.get("AB_DIRECT_STEPS", "4"))
seen = 0


def _after_step(optimizer, args, kwargs):
    global seen
    seen += 1
    if seen >= want:
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmPeak:"):
                        # on a line of its own: a progress bar may hold the current one
                        print("\ndirect_steps: " + line.strip(), file=sys.stderr)
        except OSError:
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


_optmod.register_optimizer_step_post_hook(_after_step)

if len(sys.argv) > 2 and sys.argv[1] == "-m":
    module, sys.argv = sys.argv[2], [sys.argv[2]] + sys.argv[3:]
    run = lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)  # noqa: E731
else:
    script, sys.argv = sys.argv[1], sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    run = lambda: runpy.run_path(script, run_name="__main__")  # noqa: E731
try:
    run()
    code = 0
except SystemExit as e:
    code = e.code
# the run ended by itself (its epochs done, or an error) before N steps
print(f"direct_steps: ended after {seen} of {want} optimizer steps (exit {code})", file=sys.stderr)
sys.exit(3 if code in (0, None) else code)
