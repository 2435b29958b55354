#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""train_tts.py's model and worst-case data trained by the Hugging Face Trainer.

    python hf_tts.py --per_device_train_batch_size B --max_steps N [--auto_find_batch_size]
                     [--output_dir DIR]

The script a user of the HF Trainer would write for the bench's first job
(bench/real_anchors/anchor_jobs.py: the same model, loss, optimizer, learning
rate and batch as examples/pytorch/train_tts.py --worst_case).  With
--auto_find_batch_size the Trainer starts at B and, on an out-of-memory
error, reruns its whole training loop at int(0.9 x size) (accelerate's
find_executable_batch_size) until one runs to the end: N steps at the size
it settled on.  The rest is the Trainer's defaults for a CPU run: AdamW
(torch), a linear schedule, a loss line every step, no checkpoints, no
reporting.  Nothing is downloaded.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import anchor_jobs as J  # noqa: E402

import torch  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402


class TTSForTrainer(torch.nn.Module):
    """The TTS model with the loss inside forward, as the Trainer expects."""

    def __init__(self):
        super().__init__()
        self.tts, self.a = J.tts_model()

    def forward(self, tokens, text_mask, mels, mel_mask):
        batch = dict(tokens=tokens, text_mask=text_mask, mels=mels, mel_mask=mel_mask)
        return {"loss": J.tts_loss(self.tts, self.a, batch)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--per_device_train_batch_size", type=int, required=True)
    p.add_argument("--max_steps", type=int, default=30)
    p.add_argument("--auto_find_batch_size", action="store_true")
    p.add_argument("--output_dir", default=None)
    a = p.parse_args()

    model = TTSForTrainer()
    args = TrainingArguments(
        output_dir=a.output_dir or tempfile.mkdtemp(prefix="ab-hf-"),
        per_device_train_batch_size=a.per_device_train_batch_size,
        auto_find_batch_size=a.auto_find_batch_size,
        max_steps=a.max_steps,
        learning_rate=model.a.learning_rate,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        seed=0,
    )
    Trainer(model=model, args=args, train_dataset=J.TTSWorstCase(model.a)).train()


if __name__ == "__main__":
    main()
