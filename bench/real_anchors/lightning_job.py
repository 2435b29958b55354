#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A bench job wrapped in a LightningModule, tuned by Lightning's own finder.

    python lightning_job.py --job tts|orpheus --mode tune --steps N
    python lightning_job.py --job tts|orpheus --mode fit --batch B --steps N

tune: what the Lightning docs tell a user to do: build a Trainer, call
      Tuner(trainer).scale_batch_size(model, mode="binsearch") with every
      other argument at its default (init_val 2, steps_per_trial 3,
      max_trials 25, margin 0.05, max_val 8192, batch_arg_name
      "batch_size": the module's attribute that train_dataloader reads),
      then trainer.fit(model) in the same process at the size it set, for
      N optimizer steps.  That fit is the answer's survival test; with
      --steps 0 there is none (the process ends when the tuner returns).
fit:  trainer.fit at batch B for N steps, no tuner (the bench's calibration
      runs, under tests/real/direct_steps.py).

The module observes only.  It prints one line per event, flushed, as
"ANCHOR {json}" (bench/real_anchors/report.py reads them with the time each
line arrived):
  {"ev": "start", "vm_kb": ...}                    model and data built
  {"ev": "trial", "phase": P, "size": B}           a fit loop started (P tune|fit)
  {"ev": "step", "phase": P, "size": B, "n": k}    its k-th optimizer step ended
  {"ev": "tuned", "size": B}                       scale_batch_size returned B
  {"ev": "done", "phase": P, "steps": k}           trainer.fit returned
  {"ev": "error", "phase": P, "oom": bool, "msg": "..."}  it raised
A tuning trial whose loop started but did not reach 3 steps before the
next one began is one that Lightning caught as out of memory (any other
exception ends the run with an "error" event).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor_jobs as J  # noqa: E402

import torch  # noqa: E402
import lightning.pytorch as pl  # noqa: E402
from lightning.pytorch.tuner import Tuner  # noqa: E402
from lightning.pytorch.utilities.memory import is_oom_error  # noqa: E402


def say(**ev):
    print("ANCHOR " + json.dumps(ev), flush=True)


class Wrapped(pl.LightningModule):
    """A job's model and data; train_dataloader reads self.batch_size."""

    def __init__(self, job, batch_size):
        super().__init__()
        self.job, self.batch_size, self.phase = job, batch_size, "fit"
        if job == "tts":
            self.net, self.a = J.tts_model()
            self.data, self.lr = J.TTSWorstCase(self.a), self.a.learning_rate
        else:
            self.net, self.a = J.orpheus_model(), None
            self.data, self.lr = J.OrpheusRows(), J.ORPHEUS_LR
        self.steps = 0

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.data, batch_size=self.batch_size, shuffle=False, num_workers=0)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        if self.job == "tts":
            return J.tts_loss(self.net, self.a, batch)
        return J.orpheus_loss(self.net, batch)

    # observation only
    def on_train_start(self):
        self.steps = 0
        say(ev="trial", phase=self.phase, size=int(self.batch_size))

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.steps += 1
        say(ev="step", phase=self.phase, size=int(next(iter(batch.values())).shape[0]), n=self.steps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--job", choices=("tts", "orpheus"), required=True)
    p.add_argument("--mode", choices=("tune", "fit"), required=True)
    p.add_argument("--batch", type=int, default=2, help="fit mode: the batch size")
    p.add_argument("--steps", type=int, default=30, help="optimizer steps of the fit")
    p.add_argument("--root", default=None, help="Trainer default_root_dir (default: a temporary one)")
    a = p.parse_args()

    pl.seed_everything(0, verbose=False)
    model = Wrapped(a.job, a.batch)
    root = a.root or tempfile.mkdtemp(prefix="ab-lightning-")
    # max_steps must be positive; with --steps 0 the fit below is skipped
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_steps=max(a.steps, 1), logger=False,
                         enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=False,
                         num_sanity_val_steps=0, default_root_dir=root)
    say(ev="start", vm_kb=J.vm_kb()[0])
    phase = "tune"
    try:
        if a.mode == "tune":
            model.phase = "tune"
            size = Tuner(trainer).scale_batch_size(model, mode="binsearch")
            say(ev="tuned", size=int(size), attr=int(model.batch_size))
            if a.steps == 0:
                return
        phase = model.phase = "fit"
        trainer.fit(model)
        say(ev="done", phase="fit", steps=int(trainer.global_step), size=int(model.batch_size))
    except Exception as e:  # reported, then raised as it would be
        say(ev="error", phase=phase, oom=bool(is_oom_error(e)), msg=str(e).splitlines()[0][:300] if str(e) else repr(e))
        raise


if __name__ == "__main__":
    main()
