#!/usr/bin/env python3
"""Coqui's own `python -m TTS.bin.train_tts`, stopped after N optimizer steps.

    AB_DIRECT_STEPS=4 python direct_train.py --config_path C [--coqpit.* ...]

The test's direct bisection runs this under `ulimit -v`: exit 0 means N
real optimizer updates ran (forward, backward and step at that batch size),
anything else means they did not.  It counts with torch's global optimizer
step hook, so forward-only passes (GlowTTS's data-dependent init steps)
are not counted, and it leaves with os._exit: Coqui's Trainer.fit catches
BaseException, SystemExit included, and would turn a sys.exit(0) into
exit 1.  The trainer code itself is untouched.
"""
import os
import sys

import torch

want = int(os.environ.get("AB_DIRECT_STEPS", "4"))
seen = 0


def _after_step(optimizer, args, kwargs):
    global seen
    seen += 1
    if seen >= want:
        try:  # the peak address space, for the test's calibration
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmPeak:"):
                        print("direct_train: " + line.strip(), file=sys.stderr)
        except OSError:
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


import torch.optim.optimizer as _optmod  # noqa: E402  (a submodule, not an attribute)

_optmod.register_optimizer_step_post_hook(_after_step)

from TTS.bin.train_tts import main  # noqa: E402

try:
    main(sys.argv[1:])
except SystemExit as e:
    # the run ended by itself (its epochs done, or an error) before N steps
    print(f"direct_train: ended after {seen} of {want} optimizer steps (exit {e.code})", file=sys.stderr)
    sys.exit(3 if e.code in (0, None) else e.code)
