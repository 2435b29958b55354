#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small TTS-shaped trainer for tuning with autobatch.

A text encoder (embedding + transformer layers) and a mel-frame decoder
(transformer layers attending to the text) trained with an L1 loss on
synthetic data of variable lengths.  Torch and the standard library only.

Knobs, Hugging Face TrainingArguments style (flags win over the config):
  --per_device_train_batch_size N   --gradient_accumulation_steps N
  --gradient_checkpointing [true|false]   --bf16 [true|false] (autocast)
  --max_steps N   --output_dir DIR
  --config FILE (or a positional *.json / *.yaml) with the same keys
Also: --worst_case (every batch has the longest texts and mels),
--worst_case_rank K (only rank K does), --report (append step records to
$AUTOBATCH_REPORT via examples/python/autobatch_report.py), --device.

Runs on CPU or CUDA; several processes with torch.distributed (gloo on
CPU, NCCL on CUDA) when launched by `python3 -m torch.distributed.run` or
`accelerate launch`.  Gradient accumulation and activation checkpointing
(torch.utils.checkpoint) are real; out-of-memory errors are the real
allocator's, raised and printed as Python prints them.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from autobatch_report import Reporter  # noqa: E402

KNOBS = ("per_device_train_batch_size", "gradient_accumulation_steps",
         "gradient_checkpointing", "bf16", "max_steps", "logging_steps", "learning_rate",
         "d_model", "layers", "max_text_len", "max_mel_len", "n_mels", "seed")


def str2bool(v):
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {v!r}")


def load_config(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            sys.exit(f"train_tts.py: reading {path} needs PyYAML (apt-get install python3-yaml)")
        data = yaml.safe_load(text) or {}
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        sys.exit(f"train_tts.py: {path}: expected a mapping of TrainingArguments keys")
    return data


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config_file", nargs="?", help="a JSON or YAML config with the same keys")
    p.add_argument("--config", dest="config_flag")
    p.add_argument("--per_device_train_batch_size", type=int)
    p.add_argument("--gradient_accumulation_steps", type=int)
    p.add_argument("--gradient_checkpointing", type=str2bool, nargs="?", const=True)
    p.add_argument("--bf16", type=str2bool, nargs="?", const=True)
    p.add_argument("--max_steps", type=int)
    p.add_argument("--logging_steps", type=int)
    p.add_argument("--learning_rate", type=float)
    p.add_argument("--output_dir")
    p.add_argument("--d_model", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--max_text_len", type=int)
    p.add_argument("--max_mel_len", type=int)
    p.add_argument("--n_mels", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--worst_case", action="store_true")
    p.add_argument("--worst_case_rank", type=int, default=-1)
    p.add_argument("--report", action="store_true", help="append step records to $AUTOBATCH_REPORT")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    a = p.parse_args(argv)
    defaults = dict(per_device_train_batch_size=8, gradient_accumulation_steps=1,
                    gradient_checkpointing=False, bf16=False, max_steps=100, logging_steps=1,
                    learning_rate=3e-4, d_model=64, layers=2, max_text_len=32,
                    max_mel_len=160, n_mels=40, seed=0)
    path = a.config_flag or a.config_file
    conf = load_config(path) if path else {}
    for k in KNOBS:
        if getattr(a, k) is None:
            v = conf.get(k, defaults[k])
            setattr(a, k, str2bool(v) if isinstance(defaults[k], bool) else type(defaults[k])(v))
    if a.per_device_train_batch_size < 1 or a.gradient_accumulation_steps < 1:
        p.error("batch size and accumulation must be at least 1")
    return a


class TextEncoder(nn.Module):
    def __init__(self, d, layers, vocab=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True)
            for _ in range(layers))

    def forward(self, tokens, pad_mask, ckpt):
        x = self.embed(tokens)
        for layer in self.layers:
            if ckpt:
                x = checkpoint(layer, x, None, pad_mask, use_reentrant=False)
            else:
                x = layer(x, src_key_padding_mask=pad_mask)
        return x


class MelDecoder(nn.Module):
    def __init__(self, d, layers, n_mels):
        super().__init__()
        self.prenet = nn.Sequential(nn.Linear(n_mels, d), nn.ReLU(), nn.Linear(d, d))
        self.layers = nn.ModuleList(
            nn.TransformerDecoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True)
            for _ in range(layers))
        self.out = nn.Linear(d, n_mels)

    def forward(self, mels, memory, mel_mask, text_mask, ckpt):
        x = self.prenet(mels)
        for layer in self.layers:
            if ckpt:
                x = checkpoint(layer, x, memory, None, None, mel_mask, text_mask,
                               use_reentrant=False)
            else:
                x = layer(x, memory, tgt_key_padding_mask=mel_mask,
                          memory_key_padding_mask=text_mask)
        return self.out(x)


class TTS(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.encoder = TextEncoder(a.d_model, a.layers)
        self.decoder = MelDecoder(a.d_model, a.layers, a.n_mels)
        self.ckpt = a.gradient_checkpointing

    def forward(self, tokens, text_mask, mels, mel_mask):
        memory = self.encoder(tokens, text_mask, self.ckpt)
        return self.decoder(mels, memory, mel_mask, text_mask, self.ckpt)


def make_batch(a, gen, worst, device):
    """Synthetic text/mel pairs; lengths vary unless worst is set."""
    b = a.per_device_train_batch_size
    if worst:
        text_len = torch.full((b,), a.max_text_len)
    else:
        text_len = torch.randint(a.max_text_len // 4, a.max_text_len + 1, (b,), generator=gen)
    mel_len = torch.clamp(text_len * a.max_mel_len // a.max_text_len, min=1)
    t, m = int(text_len.max()), int(mel_len.max())
    tokens = torch.randint(1, 256, (b, t), generator=gen)
    text_mask = torch.arange(t)[None, :] >= text_len[:, None]
    mels = torch.randn(b, m, a.n_mels, generator=gen)
    mel_mask = torch.arange(m)[None, :] >= mel_len[:, None]
    return [x.to(device) for x in (tokens, text_mask, mels, mel_mask)]


def fmt_interval(s):
    s = int(s)
    h, m = divmod(s, 3600)
    m, s = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def progress(n, total, t0):
    """One redraw of a tqdm-style bar, as tqdm's format_meter prints it."""
    elapsed = time.monotonic() - t0
    rate = n / elapsed if elapsed > 0 and n else None
    frac = n / total if total else 0
    bar = "#" * int(10 * frac) + " " * (10 - int(10 * frac))
    remaining = fmt_interval((total - n) / rate) if rate else "?"
    if rate is None:
        r = "?it/s"
    elif rate >= 1:
        r = f"{rate:5.2f}it/s"
    else:
        r = f"{1 / rate:5.2f}s/it"
    sys.stderr.write(f"\r{int(100 * frac):3d}%|{bar}| {n}/{total} "
                     f"[{fmt_interval(elapsed)}<{remaining}, {r}]")
    sys.stderr.flush()


def main(argv):
    a = parse_args(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        torch.distributed.init_process_group("nccl" if cuda else "gloo")
    torch.manual_seed(a.seed)
    model = TTS(a).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.AdamW(model.parameters(), lr=a.learning_rate)
    report = Reporter() if a.report else Reporter(path="")
    gen = torch.Generator().manual_seed(a.seed * 1000 + rank)
    worst = a.worst_case or a.worst_case_rank == rank
    samples_per_step = a.per_device_train_batch_size * a.gradient_accumulation_steps * world
    if rank == 0:
        print(f"***** Running training *****\n  Instantaneous batch size per device = "
              f"{a.per_device_train_batch_size}\n  Gradient Accumulation steps = "
              f"{a.gradient_accumulation_steps}\n  Gradient checkpointing = "
              f"{a.gradient_checkpointing}\n  bf16 autocast = {a.bf16}\n  World size = {world}\n  Device = {device}\n"
              f"  Total optimization steps = {a.max_steps}", flush=True)
    t0 = time.monotonic()
    if rank == 0:
        progress(0, a.max_steps, t0)
    for step in range(1, a.max_steps + 1):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for micro in range(a.gradient_accumulation_steps):
            tokens, text_mask, mels, mel_mask = make_batch(a, gen, worst, device)
            # Without syncing gradients on all but the last micro-step, as HF does.
            last = micro == a.gradient_accumulation_steps - 1
            ctx = model.no_sync() if world > 1 and not last else _Null()
            with ctx, torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.bf16):
                pred = model(tokens, text_mask, mels, mel_mask).float()
                keep = (~mel_mask).unsqueeze(-1).float()
                loss = (F.l1_loss(pred, mels, reduction="none") * keep).sum() / keep.sum() / a.n_mels
                (loss / a.gradient_accumulation_steps).backward()
            total += loss.item() / a.gradient_accumulation_steps
        opt.step()
        report.step(step, samples=samples_per_step)
        if rank == 0:
            progress(step, a.max_steps, t0)
            if step % a.logging_steps == 0:
                print(f"\n{{'loss': {total:.4f}, 'learning_rate': {a.learning_rate}, "
                      f"'epoch': {step / 1000:.4f}}}", flush=True)
    if rank == 0:
        runtime = time.monotonic() - t0
        print(f"\n{{'train_runtime': {runtime:.4f}, 'train_samples_per_second': "
              f"{a.max_steps * samples_per_step / runtime:.3f}, 'train_steps_per_second': "
              f"{a.max_steps / runtime:.3f}}}", flush=True)
        if a.output_dir:
            os.makedirs(a.output_dir, exist_ok=True)
    report.close()
    if world > 1:
        torch.distributed.destroy_process_group()


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main(sys.argv[1:])
