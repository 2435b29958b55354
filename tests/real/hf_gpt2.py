#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small GPT-2 trained by the Hugging Face Trainer, as a user writes it.

    python hf_gpt2.py --per_device_train_batch_size B [--max_steps N]
                      [--n_layer L] [--n_embd E] [--seq_len T] [TrainingArguments...]
    python hf_gpt2.py args.json    (the same keys in one JSON file, as the
                                    HF example scripts take them)

Flags through HfArgumentParser (the model's own dataclass and
TrainingArguments), a GPT2LMHeadModel built from a GPT2Config with random
weights (nothing is downloaded), synthetic token sequences all of the same
length (every batch of a size has the same shape), labels = inputs.  Pass
--output_dir (the Trainer's default is ./trainer_output).  The
rest is the Trainer's defaults for a CPU run with a loss line every step:
AdamW, a linear schedule, the tqdm bar; no checkpoints, no reporting.
Standard library, torch and transformers only.
"""
import sys
from dataclasses import dataclass, field

import torch
from transformers import GPT2Config, GPT2LMHeadModel, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    n_layer: int = field(default=2)
    n_embd: int = field(default=128)
    n_head: int = field(default=4)
    vocab_size: int = field(default=4096)
    seq_len: int = field(default=256)
    samples: int = field(default=4096)


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n, seq_len, vocab):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, vocab, (n, seq_len), generator=g)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x = self.data[i]
        return {"input_ids": x, "labels": x}


def main():
    p = HfArgumentParser((ModelArguments, TrainingArguments))
    p.set_defaults(max_steps=6, logging_steps=1,
                   save_strategy="no", report_to="none", use_cpu=True, dataloader_num_workers=0,
                   learning_rate=3e-4, seed=0)
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        m, args = p.parse_json_file(sys.argv[1])
    else:
        m, args = p.parse_args_into_dataclasses(args=sys.argv[1:])
    cfg = GPT2Config(n_layer=m.n_layer, n_embd=m.n_embd, n_head=m.n_head, vocab_size=m.vocab_size,
                     n_positions=m.seq_len)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg)
    Trainer(model=model, args=args, train_dataset=Tokens(m.samples, m.seq_len, m.vocab_size)).train()


if __name__ == "__main__":
    main()
