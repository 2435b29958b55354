#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A trainer on data with long-tailed lengths, whose largest batch comes last.

Speech and text datasets have a few samples far longer than the rest, and
trainers pad each batch to its longest sample, so the memory a step needs
follows the longest sample of its batch.  Here a map-style dataset of
--samples sequences is --short frames long (give or take a quarter),
except the last --long_count ones, which are --long frames: the one batch
that holds them comes at the end of the epoch (the loader does not
shuffle).  A size that trains through the first batches can still run out
of memory there; autobatch's probe puts that batch first (the dataset has
a `lengths` attribute, as Coqui's and F5-TTS's datasets do).

Each frame goes through --layers residual blocks of
Linear(--dim, --hidden), GELU, Linear(--hidden, --dim): the activations
kept for backward are about 3 x 4 x hidden bytes per frame per block, so a
step's memory is about batch x longest frames x that.

Knobs, Hugging Face TrainingArguments style:
  --per_device_train_batch_size N (else $AUTOBATCH_MICRO_BATCH, else 8)
  --gradient_accumulation_steps N  --max_steps N (0: no limit)
  --epochs N (default 1)  --output_dir DIR (accepted, unused)
Runs on CPU (or CUDA with --device cuda); torch 1.13 through 2.x and the
standard library only.  Prints one line per optimizer step and one at the
end of each epoch; out-of-memory errors are the allocator's own.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per_device_train_batch_size", type=int)
    p.add_argument("--gradient_accumulation_steps", type=int, default=1)
    p.add_argument("--max_steps", type=int, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--output_dir")
    p.add_argument("--samples", type=int, default=128)
    p.add_argument("--short", type=int, default=16)
    p.add_argument("--long", type=int, default=256)
    p.add_argument("--long_count", type=int, default=8)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = p.parse_args(argv)
    if a.per_device_train_batch_size is None:
        a.per_device_train_batch_size = int(os.environ.get("AUTOBATCH_MICRO_BATCH", "8"))
    if a.per_device_train_batch_size < 1 or a.gradient_accumulation_steps < 1:
        p.error("batch size and accumulation must be at least 1")
    return a


class LongTail(torch.utils.data.Dataset):
    """Sequences of `dim` features; `lengths` (frames per sample) is what a
    length-aware sampler or autobatch's probe may read without loading."""

    def __init__(self, a):
        n, short = a.samples, a.short
        spread = max(1, short // 4)
        self.lengths = [short - spread + (i * 7) % (2 * spread + 1) for i in range(n)]
        for i in range(max(0, n - a.long_count), n):
            self.lengths[i] = a.long
        self.dim = a.dim
        self.seed = a.seed

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(self.seed * 100003 + i)
        x = torch.randn(self.lengths[i], self.dim, generator=g)
        return x, x.sum(dim=1, keepdim=True).tanh()


def pad_collate(items):
    """Pad to the batch's longest sample; a mask of the real frames."""
    t = max(x.shape[0] for x, _ in items)
    b, d = len(items), items[0][0].shape[1]
    x = torch.zeros(b, t, d)
    y = torch.zeros(b, t, 1)
    mask = torch.zeros(b, t, 1)
    for k, (xi, yi) in enumerate(items):
        n = xi.shape[0]
        x[k, :n], y[k, :n], mask[k, :n] = xi, yi, 1
    return x, y, mask


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(a.dim, a.hidden) for _ in range(a.layers)])
        self.out = nn.Linear(a.dim, 1)

    def forward(self, x):
        return self.out(self.blocks(x))


def main(argv):
    a = parse_args(argv)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    data = LongTail(a)
    loader = torch.utils.data.DataLoader(data, batch_size=a.per_device_train_batch_size,
                                         shuffle=False, collate_fn=pad_collate,
                                         num_workers=a.workers)
    model = Model(a).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    print(f"***** Running training *****\n  Num examples = {len(data)}\n  Num Epochs = {a.epochs}\n"
          f"  Instantaneous batch size per device = {a.per_device_train_batch_size}\n"
          f"  Gradient Accumulation steps = {a.gradient_accumulation_steps}\n"
          f"  Total optimization steps = {a.max_steps or a.epochs * len(loader)}", flush=True)
    step = micro = 0
    t0 = time.monotonic()
    for epoch in range(a.epochs):
        for x, y, mask in loader:
            x, y, mask = x.to(device), y.to(device), mask.to(device)
            pred = model(x)
            loss = ((pred - y) ** 2 * mask).sum() / mask.sum()
            (loss / a.gradient_accumulation_steps).backward()
            micro += 1
            if micro % a.gradient_accumulation_steps:
                continue
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            print(f"step {step} loss {loss.item():.4f} frames {x.shape[0]}x{x.shape[1]}", flush=True)
            if a.max_steps and step >= a.max_steps:
                break
        else:
            print(f"epoch {epoch + 1} done", flush=True)
            continue
        break
    runtime = time.monotonic() - t0
    print(f"{{'train_runtime': {runtime:.4f}, 'train_steps_per_second': "
          f"{step / runtime if runtime > 0 else 0:.3f}}}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
