#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The seed users' models on an emulated 24 GB card (issue 25, item 9):
# autobatch, plain and --replay (with `autobatch predict` on the kept
# traces), on F5-TTS's v1 Base DiT (micro-batch in mel frames), a Parler-TTS
# Mini-sized decoder and an Orpheus-sized 3B Llama (LoRA, checkpointing),
# defined inline in bench/gpu_seeds.py from the published configs with
# random weights and synthetic data; then each model's boundary on the
# emulated card by fresh processes (bisection under the emulation library),
# as time allows.  First, beyond the batch (issue 29): the Orpheus 3B
# Llama as a full fine-tune (fp32 weights, AdamW, 1024 tokens), autobatch
# with every knob allowed; the results file quotes what it said (the
# breakdown, the knobs it turned on, or why none helps).  The same machinery, environment and output as
# bench/gpu_verify.sh (which it runs): $OUT/gpu-seeds-<gpu>-<date>.txt.
#   bash bench/gpu_seeds.sh          # GPU: at most GV_LIMIT_S (300) s
#   bash bench/gpu_seeds.sh --dry    # CPU, tiny versions, /usr/bin/python3
cd "$(dirname "$0")/.."
GV_PY_SCRIPT=bench/gpu_seeds.py GV_NAME=gpu-seeds GV_BUDGET_GIB=${GV_BUDGET_GIB:-24} \
  GV_LIMIT_S=${GV_LIMIT_S:-$([ "${1:-}" = --dry ] && echo 150 || echo 300)} exec bash bench/gpu_verify.sh "$@"
