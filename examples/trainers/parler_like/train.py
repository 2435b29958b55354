#!/usr/bin/env python
# SPDX-License-Identifier: MIT
"""A trainer that behaves like Parler-TTS's training script, for tests.

Parler-TTS (huggingface/parler-tts, training/run_parler_tts_training.py at
commit d108732cd57788ec86bc857d99a6cabd66663d68) is not on PyPI.  This
script reproduces what autobatch meets when it runs that script: nothing
here is copied from it, the behaviour is.

  * Arguments: transformers' HfArgumentParser over three dataclasses.  A
    JSON file is read only when it is the sole argument and ends in
    ".json"; otherwise every argument is a --flag.  The two never mix
    (`train.py cfg.json --per_device_train_batch_size 4` is an error).
    Unknown JSON keys are an error, as in HfArgumentParser.parse_json_file.
  * Its own accelerate loop: Accelerator(gradient_accumulation_steps=...),
    per_device_train_batch_size micro-batches, the micro-batches of one
    update fetched first, then forward/backward each, clip, optimizer.step,
    lr_scheduler.step, zero_grad; gradient_checkpointing on the decoder.
  * max_steps > 0 overrides num_train_epochs.
  * Before training: a "Combining datasets..." bar, "preprocess datasets"
    bars, one audio-encoding bar per split with no description (the
    first batch pays a codec warm-up, so the bar shows s/it before it/s),
    "Postprocessing labeling" and "Filter" bars.  Real work plus short
    sleeps: a second or two in all.
  * At the start of training output_dir is created and the tokenizer,
    feature extractor and model config are saved into it.
  * Training bar: tqdm "Train steps ... " on the local main process, one
    tick per optimizer update; "Step... (N / M | Loss: ..., Learning
    Rate: ...)" every logging_steps.
  * Every save_steps and at max_steps: accelerator.save_state() into
    output_dir/checkpoint-{step}-epoch-{epoch}; at max_steps also the model
    (config.json + model.safetensors) into output_dir; then evaluation
    ("Evaluating - Inference ..." bar and, with predict_with_generate,
    "Evaluating - Generation ..." bar) at eval_steps and at max_steps
    (eval_steps unset: once per epoch, i.e. at max_steps when max_steps is
    given).  The real script then loads Whisper and CLAP from the hub to
    score the generations; this one scores them locally (nothing is ever
    downloaded).
  * Resuming: when output_dir exists, do_train is set and
    overwrite_output_dir is false, the newest checkpoint-N-epoch-E in it is
    loaded and training goes on from step N; a non-empty output_dir without
    a checkpoint is an error ("Output directory (...) already exists and is
    not empty.").  Note that the real script's only stop test is
    `cur_step == total_train_steps`: a run resumed from a checkpoint at or
    past max_steps never meets it and trains on (as this one does).
  * save_to_disk: when it names a non-empty directory the preprocessed
    dataset is loaded from it and preprocessing is skipped; when it names
    an empty one, the preprocessed dataset is saved there.  (Real Parler
    needs save_to_disk set: it calls os.listdir(save_to_disk)
    unconditionally; here unset just means "no cache".)

The model is tiny and built from configs in code with random weights: a
T5 encoder for the description+prompt text, a MusicGen-style decoder
(transformers' MusicgenForCausalLM: num_codebooks embeddings, one LM head
per codebook, cross-attention to the text) trained on delay-pattern
codes, and a fixed random "codec" that turns synthetic audio into codes.
Memory grows with per_device_train_batch_size (eager attention over the
code frames, per-codebook logits), so under an address-space cap there
is a batch size that fits and one that does not.

    python train.py tiny.json
    accelerate launch --cpu train.py tiny.json
    python train.py --output_dir out --do_train --max_steps 4 ...
"""

import contextlib
import json
import logging
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

import transformers
from transformers import HfArgumentParser, Seq2SeqTrainingArguments
from transformers.optimization import get_scheduler

from accelerate import Accelerator
from accelerate.utils import set_seed

logger = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)-epoch-(\d+)$")


def vm_peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def trace(event, **fields):
    """For tests (not in Parler): when PARLER_LIKE_TRACE names a file, append
    one JSON line per event (start, step, save_checkpoint, save_model, eval,
    end) with the pid, the working directory and the event's fields."""
    path = os.environ.get("PARLER_LIKE_TRACE")
    if not path:
        return
    line = json.dumps(dict(ev=event, pid=os.getpid(), cwd=os.getcwd(), vm_peak_kb=vm_peak_kb(), **fields)) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# ----------------------------------------------------------------- arguments
# The same names as Parler's ModelArguments / DataTrainingArguments /
# ParlerTTSTrainingArguments (the ones a tiny run uses and a few more, so
# Parler-style JSON files parse); hub names are accepted and ignored.

@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="tiny-parler", metadata={"help": "ignored: the model is built in code"})
    feature_extractor_name: Optional[str] = field(default=None)
    description_tokenizer_name: Optional[str] = field(default=None)
    prompt_tokenizer_name: Optional[str] = field(default=None)
    cache_dir: Optional[str] = field(default=None)
    freeze_text_encoder: bool = field(default=False)
    do_sample: bool = field(default=True)
    temperature: float = field(default=1.0)
    max_length: int = field(default=2580)
    bandwidth: float = field(default=6)
    asr_model_name_or_path: str = field(default="distil-whisper/distil-large-v2")
    clap_model_name_or_path: str = field(default="laion/larger_clap_music_and_speech")
    attn_implementation: str = field(default="eager")
    # tiny-model sizes (not in Parler: its sizes come from the checkpoint)
    decoder_layers: int = field(default=2)
    decoder_hidden_size: int = field(default=32)
    decoder_ffn_dim: int = field(default=128)
    num_codebooks: int = field(default=9)
    decoder_attention_heads: int = field(default=8)
    codebook_size: int = field(default=1024)


@dataclass
class DataTrainingArguments:
    train_dataset_name: str = field(default="synthetic-a+synthetic-b")
    train_dataset_config_name: Optional[str] = field(default=None)
    train_split_name: str = field(default="train")
    train_metadata_dataset_name: Optional[str] = field(default=None)
    eval_dataset_name: Optional[str] = field(default=None)
    eval_dataset_config_name: Optional[str] = field(default=None)
    eval_split_name: str = field(default="test")
    eval_metadata_dataset_name: Optional[str] = field(default=None)
    target_audio_column_name: str = field(default="audio")
    description_column_name: Optional[str] = field(default="text_description")
    prompt_column_name: Optional[str] = field(default="text")
    preprocessing_num_workers: Optional[int] = field(default=None)
    max_train_samples: Optional[int] = field(default=128)
    max_eval_samples: Optional[int] = field(default=8)
    max_duration_in_seconds: float = field(default=4.0)
    min_duration_in_seconds: float = field(default=0.0)
    max_text_length: int = field(default=500)
    max_prompt_token_length: Optional[int] = field(default=None)
    max_description_token_length: Optional[int] = field(default=None)
    pad_to_max_length: bool = field(default=False)
    preprocessing_only: bool = field(default=False)
    add_audio_samples_to_wandb: bool = field(default=False)
    id_column_name: Optional[str] = field(default=None)
    wandb_project: str = field(default="parler-speech")
    wandb_run_name: Optional[str] = field(default=None)
    save_to_disk: Optional[str] = field(default=None)
    temporary_save_to_disk: Optional[str] = field(default=None)
    save_codec_steps: Optional[int] = field(default=500)
    pad_to_multiple_of: Optional[int] = field(default=2)


@dataclass
class ParlerLikeTrainingArguments(Seq2SeqTrainingArguments):
    # Parler pins transformers 4.46, whose TrainingArguments has it;
    # transformers 5 dropped it: declared here so both behave the same.
    overwrite_output_dir: bool = field(default=False)
    dtype: Optional[str] = field(default="float32")
    audio_encoder_per_device_batch_size: int = field(default=8)
    eval_dataloader_num_workers: Optional[int] = field(default=0)
    compute_clap_similarity_metric: bool = field(default=True)
    compute_noise_level_metric: bool = field(default=True)
    noise_level_to_compute_clean_wer: float = field(default=25)
    eval_generation_steps: Optional[int] = field(default=None)
    codebook_weights: Optional[List[float]] = field(default=None)


# ------------------------------------------------------------- tiny pieces

SAMPLING_RATE = 16000
HOP = 320                     # 50 code frames per second
TEXT_VOCAB = 260              # bytes + pad/eos/unk/bos


class ByteTokenizer:
    """Bytes as tokens (stands in for the T5 tokenizers)."""
    pad_token_id, eos_token_id = 256, 257

    def __call__(self, text):
        return {"input_ids": list(text.encode("utf-8"))[:200] + [self.eos_token_id]}

    def decode(self, ids):
        return bytes(i for i in ids if i < 256).decode("utf-8", "replace")

    def save_pretrained(self, d):
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "ByteTokenizer", "pad_token_id": 256, "eos_token_id": 257}, f)


class TinyCodec(torch.nn.Module):
    """A fixed random 'codec': frames of HOP samples -> num_codebooks codes
    (a strided convolution, one projection per codebook, quantized)."""

    def __init__(self, num_codebooks, codebook_size):
        super().__init__()
        g = torch.Generator().manual_seed(1234)
        self.codebook_size = codebook_size
        self.conv = torch.nn.Conv1d(1, 16, kernel_size=HOP, stride=HOP)
        self.books = torch.nn.Parameter(torch.randn(16, num_codebooks, generator=g))
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(self.conv.weight.shape, generator=g) * 0.05)
            self.conv.bias.zero_()

    @torch.no_grad()
    def encode(self, input_values):
        h = self.conv(input_values.unsqueeze(1)).transpose(1, 2)          # (b, frames, 16)
        z = torch.sigmoid(h @ self.books).transpose(1, 2)                # (b, K, frames) in (0, 1)
        return (z * self.codebook_size).long().clamp(max=self.codebook_size - 1)


class TinyParlerTTS(torch.nn.Module):
    """Text encoder + MusicGen-style multi-codebook decoder."""

    def __init__(self, margs):
        super().__init__()
        from transformers import MusicgenDecoderConfig, MusicgenForCausalLM, T5Config, T5EncoderModel
        K, V = margs.num_codebooks, margs.codebook_size
        self.num_codebooks = K
        self.pad_token_id = V          # also the EOS of the codes, as in Parler (1024)
        self.bos_token_id = V + 1      # decoder_start_token_id (1025)
        self.text_config = T5Config(vocab_size=TEXT_VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                    num_heads=4, dropout_rate=0.0, pad_token_id=ByteTokenizer.pad_token_id)
        self.decoder_config = MusicgenDecoderConfig(
            vocab_size=V + 64, max_position_embeddings=4096, num_hidden_layers=margs.decoder_layers,
            ffn_dim=margs.decoder_ffn_dim, num_attention_heads=margs.decoder_attention_heads, hidden_size=margs.decoder_hidden_size,
            num_codebooks=K, pad_token_id=self.pad_token_id, bos_token_id=self.bos_token_id,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0,
            scale_embedding=False, tie_word_embeddings=False)
        try:
            self.decoder_config._attn_implementation = margs.attn_implementation
        except Exception:
            pass
        self.text_encoder = T5EncoderModel(self.text_config)
        self.enc_to_dec_proj = torch.nn.Linear(64, margs.decoder_hidden_size)
        self.decoder = MusicgenForCausalLM(self.decoder_config)
        self.audio_encoder = TinyCodec(K, V)
        self.audio_encoder.requires_grad_(False)

    def gradient_checkpointing_enable(self):
        self.decoder.gradient_checkpointing_enable()

    def freeze_encoders(self, freeze_text_encoder):
        self.audio_encoder.requires_grad_(False)
        if freeze_text_encoder:
            self.text_encoder.requires_grad_(False)

    def config_dict(self):
        return {"model_type": "parler_like", "num_codebooks": self.num_codebooks,
                "pad_token_id": self.pad_token_id, "decoder_start_token_id": self.bos_token_id,
                "text_encoder": self.text_config.to_dict(), "decoder": self.decoder_config.to_dict()}

    def save_pretrained(self, directory):
        from safetensors.torch import save_model
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(self.config_dict(), f, indent=2, default=str)
        save_model(self, os.path.join(directory, "model.safetensors"))

    def encode_text(self, input_ids, attention_mask):
        h = self.text_encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.enc_to_dec_proj(h) * attention_mask[..., None]

    def decoder_logits(self, codes, enc, enc_mask):
        # codes: (b, T, K) -> MusicGen wants (b*K, T); logits (b, K, T, vocab)
        b, T, K = codes.shape
        ids = codes.transpose(1, 2).reshape(b * K, T)
        out = self.decoder(input_ids=ids, encoder_hidden_states=enc, encoder_attention_mask=enc_mask,
                           use_cache=False, return_dict=True)
        logits = out.logits
        if logits.dim() == 3:
            logits = logits.reshape(b, K, T, -1)
        return logits

    def forward(self, input_ids, attention_mask, labels, loss_reduction="mean"):
        enc = self.encode_text(input_ids, attention_mask)
        # teacher forcing: BOS then the labels shifted right; -100 (padding) as PAD
        start = torch.full_like(labels[:, :1], self.bos_token_id)
        inp = torch.cat([start, labels[:, :-1]], 1)
        inp = torch.where(inp < 0, torch.full_like(inp, self.pad_token_id), inp)
        logits = self.decoder_logits(inp, enc, attention_mask)
        losses = []
        for k in range(self.num_codebooks):
            losses.append(F.cross_entropy(logits[:, k].reshape(-1, logits.shape[-1]), labels[..., k].reshape(-1),
                                          ignore_index=-100, reduction=loss_reduction))
        return sum(losses) / self.num_codebooks, losses

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_new_tokens=8):
        enc = self.encode_text(input_ids, attention_mask)
        codes = torch.full((input_ids.shape[0], 1, self.num_codebooks), self.bos_token_id, dtype=torch.long)
        for _ in range(max_new_tokens):
            nxt = self.decoder_logits(codes, enc, attention_mask)[:, :, -1].argmax(-1)   # (b, K)
            codes = torch.cat([codes, nxt[:, None, :].clamp(max=self.pad_token_id)], 1)
        return codes[:, 1:]


def delay_pattern(codes, bos, eos):
    """(K, T) codes -> (T+K, K) labels: codebook k delayed by k frames,
    BOS before, EOS after (Parler's build_delay_pattern_mask, in effect)."""
    K, T = codes.shape
    out = torch.full((T + K, K), eos, dtype=torch.long)
    for k in range(K):
        out[:k, k] = bos
        out[k:k + T, k] = codes[k]
    return out


# --------------------------------------------------------------- datasets

DESCRIPTIONS = ["A female speaker with a calm voice", "A fast male voice, slightly noisy",
                "A very expressive speaker in a small room", "A monotone voice, clear recording"]
PROMPTS = ["hello there", "the quick brown fox jumps over the lazy dog", "good morning to you all",
           "this is a test of the synthetic data"]


def load_synthetic(name, split, n, seed, max_seconds, pad_to_max):
    """One synthetic 'dataset': n rows of audio (sines + noise), text, description."""
    g = torch.Generator().manual_seed(seed + sum(map(ord, name + split)))
    rows = []
    for i in range(n):
        secs = max_seconds * 0.999 if pad_to_max else max_seconds * (0.6 + 0.39 * float(torch.rand(1, generator=g)))
        t = torch.arange(int(secs * SAMPLING_RATE)) / SAMPLING_RATE
        f = 110.0 + 330.0 * float(torch.rand(1, generator=g))
        audio = 0.5 * torch.sin(2 * math.pi * f * t) + 0.05 * torch.randn(t.shape, generator=g)
        rows.append({"id": f"{name}-{split}-{i}", "audio": {"array": audio, "sampling_rate": SAMPLING_RATE},
                     "text": PROMPTS[i % len(PROMPTS)], "text_description": DESCRIPTIONS[(i // 4) % len(DESCRIPTIONS)]})
    time.sleep(0.3)           # "downloading" and casting the audio column
    return rows


def load_multiple(names, split, total, seed, max_seconds, pad_to_max):
    names = [n for n in names.split("+") if n]
    per = [total // len(names) + (1 if i < total % len(names) else 0) for i in range(len(names))]
    rows = []
    for name, n in tqdm(list(zip(names, per)), desc="Combining datasets..."):
        rows.extend(load_synthetic(name, split, n, seed, max_seconds, pad_to_max))
    return rows


def bar_map(rows, fn, desc):
    out = []
    for r in tqdm(rows, desc=desc, unit=" examples"):
        out.append(fn(r))
    return out


# ------------------------------------------------------------------ main

def parse_args():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, ParlerLikeTrainingArguments))
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        return parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
    return parser.parse_args_into_dataclasses()


def last_checkpoint_in(folder):
    found = [d for d in os.listdir(folder)
             if CHECKPOINT_RE.match(d) and os.path.isdir(os.path.join(folder, d))]
    if not found:
        return None
    return os.path.join(folder, max(found, key=lambda d: int(CHECKPOINT_RE.match(d).group(1))))


def main():
    model_args, data_args, training_args = parse_args()

    mixed_precision = {"float16": "fp16", "bfloat16": "bf16"}.get(training_args.dtype, "no")
    if data_args.pad_to_max_length and (data_args.max_duration_in_seconds is None
                                        or data_args.max_prompt_token_length is None
                                        or data_args.max_description_token_length is None):
        raise ValueError("`pad_to_max_length` is `True` but one of the following parameters has not been set: "
                         "`max_duration_in_seconds`, `max_prompt_token_length`, `max_description_token_length`")
    padding = "max_length" if data_args.pad_to_max_length else "longest"

    accelerator = Accelerator(gradient_accumulation_steps=training_args.gradient_accumulation_steps,
                              mixed_precision=mixed_precision, log_with=training_args.report_to,
                              project_dir=training_args.output_dir)

    last_checkpoint = None
    if os.path.isdir(training_args.output_dir) and training_args.do_train and not training_args.overwrite_output_dir:
        last_checkpoint = last_checkpoint_in(training_args.output_dir)
        if last_checkpoint is None and len(os.listdir(training_args.output_dir)) > 0:
            raise ValueError(f"Output directory ({training_args.output_dir}) already exists and is not empty. "
                             "Use --overwrite_output_dir to overcome.")
        elif last_checkpoint is not None and training_args.resume_from_checkpoint is None:
            logger.info(f"Checkpoint detected, resuming training at {last_checkpoint}. To avoid this behavior, "
                        "change the `--output_dir` or add `--overwrite_output_dir` to train from scratch.")

    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", handlers=[logging.StreamHandler(sys.stdout)])
    logger.setLevel(logging.INFO if accelerator.is_main_process else logging.WARN)
    logger.warning(f"Process rank: {training_args.local_rank}, device: {training_args.device}, "
                   f"n_gpu: {training_args.n_gpu}, distributed training: "
                   f"{training_args.parallel_mode.value == 'distributed'}, 16-bits training: {training_args.fp16}")
    if not accelerator.is_local_main_process:
        transformers.utils.logging.set_verbosity_error()
    logger.info("Training/evaluation parameters %s", training_args)

    set_seed(training_args.seed)

    description_tokenizer = prompt_tokenizer = ByteTokenizer()

    # 3. the model, from configs in code
    model = TinyParlerTTS(model_args)
    if training_args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.freeze_encoders(model_args.freeze_text_encoder)
    K = model.num_codebooks
    bos, eos = model.bos_token_id, model.pad_token_id
    max_target_length = int(data_args.max_duration_in_seconds * SAMPLING_RATE)

    gathered = accelerator.gather(torch.tensor([accelerator.process_index], device=accelerator.device))
    print("gathered_tensor", gathered)
    accelerator.wait_for_everyone()

    # 2./4. datasets and preprocessing (or the saved result of an earlier run)
    cache = data_args.save_to_disk
    if cache is not None:
        os.makedirs(cache, exist_ok=True)
    precomputed = cache is not None and len(os.listdir(cache)) > 0
    if precomputed:
        with accelerator.local_main_process_first():
            vectorized = torch.load(os.path.join(cache, "dataset.pt"))
    else:
        raw = {}
        if training_args.do_train:
            raw["train"] = load_multiple(data_args.train_dataset_name, data_args.train_split_name,
                                         data_args.max_train_samples or 128, training_args.seed,
                                         data_args.max_duration_in_seconds, data_args.pad_to_max_length)
        if training_args.do_eval:
            raw["eval"] = load_multiple(data_args.eval_dataset_name or data_args.train_dataset_name,
                                        data_args.eval_split_name, data_args.max_eval_samples or 8,
                                        training_args.seed, data_args.max_duration_in_seconds,
                                        data_args.pad_to_max_length)

        def tokenize(row):
            return {"input_ids": description_tokenizer(row["text_description"].strip())["input_ids"],
                    "prompt_input_ids": prompt_tokenizer(row["text"].strip())["input_ids"]}

        vectorized = {split: bar_map(rows, tokenize, "preprocess datasets") for split, rows in raw.items()}

        logger.info("*** Encode target audio with encodec ***")
        codec = model.audio_encoder.eval()
        warm = [True]

        def encode_batch(rows):
            audios = [r["audio"]["array"][:max_target_length] for r in rows]
            n = max(a.shape[0] for a in audios) if padding == "longest" else max_target_length
            x = torch.zeros(len(audios), n)
            for i, a in enumerate(audios):
                x[i, :a.shape[0]] = a
            codes = codec.encode(x)
            if warm[0]:                       # loading the codec, first batch only
                time.sleep(1.2)
                warm[0] = False
            time.sleep(0.03)
            return [c[:, :max(1, a.shape[0] // HOP)] for c, a in zip(codes, audios)], [a.shape[0] for a in audios]

        for split in list(vectorized):
            loader = DataLoader(raw[split], batch_size=training_args.audio_encoder_per_device_batch_size,
                                collate_fn=lambda rows: rows)
            codes, lens = [], []
            for batch in tqdm(loader, disable=not accelerator.is_local_main_process):
                c, n = encode_batch(batch)
                codes += c
                lens += n
            labels = bar_map(codes, lambda c: delay_pattern(c, bos, eos), "Postprocessing labeling")
            for row, lab, n in zip(vectorized[split], labels, lens):
                row["labels"], row["target_length"] = lab, n
            min_len = int(data_args.min_duration_in_seconds * SAMPLING_RATE)
            keep = bar_map(vectorized[split], lambda r: min_len < r["target_length"] < max_target_length, "Filter")
            vectorized[split] = [r for r, k in zip(vectorized[split], keep) if k]
            logger.info(f"Concatenating {split}: {len(vectorized[split])} rows with their audio codes")
        if cache is not None and accelerator.is_main_process:
            torch.save(vectorized, os.path.join(cache, "dataset.pt"))
            logger.info(f"Dataset saved at {cache}")
        accelerator.wait_for_everyone()

    if data_args.preprocessing_only:
        if cache is None:
            raise ValueError("`preprocessing_only=True` but `save_to_disk` is not set. The latter should "
                             "indicates where to save the dataset locally.")
        logger.info(f"Data preprocessing finished. Files save at {cache}")
        return

    audio_max_length = None
    if padding == "max_length":
        audio_max_length = max(r["labels"].shape[0] for r in vectorized["train"])

    def collate(rows):
        labels = torch.nn.utils.rnn.pad_sequence([r["labels"] for r in rows], batch_first=True, padding_value=-100)
        if audio_max_length is not None and labels.shape[1] < audio_max_length:
            labels = F.pad(labels, (0, 0, 0, audio_max_length - labels.shape[1]), value=-100)
        # description and prompt, one sequence for the text encoder
        texts = [(r["input_ids"] + r["prompt_input_ids"]) for r in rows]
        width = max(map(len, texts))
        if padding == "max_length":
            width = max(width, data_args.max_description_token_length + data_args.max_prompt_token_length)
        if data_args.pad_to_multiple_of:
            width = -(-width // data_args.pad_to_multiple_of) * data_args.pad_to_multiple_of
        ids = torch.full((len(rows), width), ByteTokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, t in enumerate(texts):
            ids[i, :len(t)] = torch.tensor(t)
            mask[i, :len(t)] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    # 6. schedule
    per_device_train_batch_size = int(training_args.per_device_train_batch_size)
    train_batch_size = per_device_train_batch_size * accelerator.num_processes
    gradient_accumulation_steps = int(training_args.gradient_accumulation_steps)
    if training_args.max_steps < 0:
        num_epochs = int(training_args.num_train_epochs)
        steps_per_epoch = len(vectorized["train"]) // (train_batch_size * gradient_accumulation_steps)
        total_train_steps = steps_per_epoch * num_epochs
    else:
        logger.info("max_steps is given, it will override any value given in num_train_epochs")
        total_train_steps = int(training_args.max_steps)
        num_epochs = sys.maxsize
        steps_per_epoch = total_train_steps
    eval_steps = training_args.eval_steps if training_args.eval_steps is not None else steps_per_epoch
    if training_args.eval_steps is None:
        logger.info("eval_steps is not set, evaluating at the end of each epoch")
    eval_generation_steps = training_args.eval_generation_steps or eval_steps

    optimizer = torch.optim.AdamW(params=[p for p in model.parameters() if p.requires_grad],
                                  lr=training_args.learning_rate,
                                  betas=(training_args.adam_beta1, training_args.adam_beta2),
                                  eps=training_args.adam_epsilon, weight_decay=training_args.weight_decay)
    lr_scheduler = get_scheduler(name=training_args.lr_scheduler_type, optimizer=optimizer,
                                 num_warmup_steps=training_args.get_warmup_steps(total_train_steps) * accelerator.num_processes,
                                 num_training_steps=total_train_steps * accelerator.num_processes)
    model, optimizer, lr_scheduler = accelerator.prepare(model, optimizer, lr_scheduler)

    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {total_train_steps * train_batch_size * gradient_accumulation_steps}")
    logger.info(f"  Instantaneous batch size per device = {per_device_train_batch_size}")
    logger.info(f"  Gradient accumulation steps = {gradient_accumulation_steps}")
    logger.info(f"  Total train batch size (w. parallel & distributed) = {train_batch_size * gradient_accumulation_steps}")
    logger.info(f"  Total optimization steps = {total_train_steps}")

    train_time = 0.0
    train_start = time.time()
    bar = tqdm(range(total_train_steps), desc="Train steps ... ", position=0,
               disable=not accelerator.is_local_main_process)
    continue_training = True
    epochs_trained = 0
    cur_step = 0
    checkpoint = training_args.resume_from_checkpoint or last_checkpoint

    if accelerator.is_main_process and training_args.output_dir is not None:
        os.makedirs(training_args.output_dir, exist_ok=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:   # tokenizer, feature extractor and config, as Parler saves them
        prompt_tokenizer.save_pretrained(training_args.output_dir)
        with open(os.path.join(training_args.output_dir, "preprocessor_config.json"), "w") as f:
            json.dump({"feature_extractor_type": "TinyCodec", "sampling_rate": SAMPLING_RATE, "hop_length": HOP}, f)
        with open(os.path.join(training_args.output_dir, "config.json"), "w") as f:
            json.dump(accelerator.unwrap_model(model).config_dict(), f, indent=2, default=str)
    accelerator.wait_for_everyone()

    trace("start", output_dir=os.path.abspath(training_args.output_dir), batch_size=per_device_train_batch_size,
          grad_accum=gradient_accumulation_steps, max_steps=total_train_steps, resume_from=checkpoint,
          gradient_checkpointing=bool(training_args.gradient_checkpointing))
    g = torch.Generator().manual_seed(training_args.seed)
    if checkpoint is not None:
        accelerator.load_state(checkpoint)
        m = re.search(r"checkpoint-(\d+)-epoch-(\d+)", checkpoint)
        cur_step, epochs_trained = int(m.group(1)), int(m.group(2))
        logger.info("  Continuing training from checkpoint, will skip to saved global_step")
        logger.info(f"  Continuing training from epoch {epochs_trained}")
        logger.info(f"  Continuing training from global step {cur_step}")
        bar.update(cur_step)
        for _ in range(epochs_trained + 1):      # the shuffles of the epochs done, and one more
            torch.randperm(len(vectorized["train"]), generator=g)

    def train_step(batch, num_items):
        loss, per_codebook = model(**batch, loss_reduction="sum")
        loss = loss * gradient_accumulation_steps * accelerator.num_processes / num_items
        return loss, {"loss": loss}

    def evaluate():
        trace("eval", step=cur_step)
        model.eval()
        unwrapped = accelerator.unwrap_model(model)
        loader = DataLoader(vectorized["eval"], collate_fn=collate, batch_size=training_args.per_device_eval_batch_size)
        losses = []
        for batch in tqdm(loader, desc="Evaluating - Inference ...", position=2,
                          disable=not accelerator.is_local_main_process):
            with torch.no_grad():
                losses.append(unwrapped(**batch)[0].detach())
        desc = ""
        if training_args.predict_with_generate and (cur_step % eval_generation_steps == 0 or cur_step == total_train_steps):
            gens = []
            for batch in tqdm(loader, desc="Evaluating - Generation ...", position=2,
                              disable=not accelerator.is_local_main_process):
                gens.append(unwrapped.generate(batch["input_ids"], batch["attention_mask"]))
            # Parler scores the generations with Whisper (WER) and CLAP from the hub;
            # this stand-in measures how varied the generated codes are.
            codes = torch.cat([x.reshape(-1) for x in gens])
            desc = f"Eval distinct_codes: {codes.unique().numel()} |"
        if accelerator.is_local_main_process:
            bar.write(f"Eval results for step ({cur_step} / {total_train_steps} | Eval Loss: "
                      f"{torch.stack(losses).mean().item()} | {desc})")
        model.train()

    model.train()
    for epoch in range(epochs_trained, num_epochs):
        order = torch.randperm(len(vectorized["train"]), generator=g).tolist()
        train_dataloader = DataLoader([vectorized["train"][i] for i in order], collate_fn=collate,
                                      batch_size=per_device_train_batch_size, shuffle=False,
                                      num_workers=training_args.dataloader_num_workers)
        train_dataloader = accelerator.prepare(train_dataloader)
        it = iter(train_dataloader)
        n_batches = len(train_dataloader)
        remainder = n_batches % gradient_accumulation_steps or gradient_accumulation_steps
        total_updates = math.ceil(n_batches / gradient_accumulation_steps)
        for update in range(total_updates):
            n = gradient_accumulation_steps if update != total_updates - 1 else remainder
            batches = [next(it) for _ in range(n)]
            num_items = sum(int(b["labels"].ne(-100).sum()) for b in batches) or 1
            num_items = int(accelerator.gather(torch.tensor([num_items], device=accelerator.device)).sum())
            for i, batch in enumerate(batches):
                ctx = model.no_sync if (i < len(batches) - 1 and accelerator.num_processes > 1) else contextlib.nullcontext
                with ctx():
                    loss, metric = train_step(batch, num_items)
                    accelerator.backward(loss)
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), training_args.max_grad_norm)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            bar.update(1)
            cur_step += 1
            trace("step", step=cur_step)

            if cur_step % training_args.logging_steps == 0:
                bar.write(f"Step... ({cur_step} / {total_train_steps} | Loss: {metric['loss']}, "
                          f"Learning Rate: {lr_scheduler.get_last_lr()[0]})")

            if cur_step % training_args.save_steps == 0 or cur_step == total_train_steps:
                ckpt = os.path.join(training_args.output_dir, f"checkpoint-{cur_step}-epoch-{epoch}")
                accelerator.save_state(output_dir=ckpt, safe_serialization=False)
                trace("save_checkpoint", path=os.path.abspath(ckpt))
                accelerator.wait_for_everyone()
                if accelerator.is_main_process and cur_step == total_train_steps:
                    accelerator.unwrap_model(model).save_pretrained(training_args.output_dir)
                    trace("save_model", path=os.path.abspath(training_args.output_dir))
                accelerator.wait_for_everyone()

            if training_args.do_eval and (cur_step % eval_steps == 0 or cur_step == total_train_steps):
                train_time += time.time() - train_start
                evaluate()
                train_start = time.time()

            if cur_step == total_train_steps:
                continue_training = False
                break
        if not continue_training:
            break

    accelerator.end_training()
    trace("end", step=cur_step)


if __name__ == "__main__":
    main()
