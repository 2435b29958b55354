#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A tiny F5-TTS dataset in the layout its trainer reads.

    python make_data.py ROOT NAME [--clips N] [--frames F]

F5-TTS (src/f5_tts/model/dataset.py, load_dataset with its defaults
"CustomDataset" and "raw") reads <root>/data/<NAME>_<tokenizer>/raw.arrow
(rows of audio_path, text, duration), duration.json ({"duration": [...]})
and, for the "char" tokenizer, vocab.txt (one symbol a line, space first),
where <root> is the package's ../.. (an editable checkout's top).  This
writes them for the "char" tokenizer, with 24 kHz clips of F mel frames
each (F5's hop is 256): every clip the same length and every text the
same number of characters, so a batch of k clips always has the same
shape, and a batch_size_per_gpu of k*F frames holds exactly k clips
(the duration given is a hair under F frames, as DynamicBatchSampler
compares sums of durations with the threshold).  raw.arrow is written with
the `datasets` ArrowWriter, as F5's own prepare_csv_wavs.py does, so run
this with the trainers' Python.
"""
import argparse
import json
import os
import sys

from datasets.arrow_writer import ArrowWriter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from synth import text_for, write_wav  # noqa: E402

RATE, HOP = 24000, 256


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("name")
    ap.add_argument("--clips", type=int, default=64)
    ap.add_argument("--frames", type=int, default=200)
    a = ap.parse_args()
    out = os.path.join(os.path.abspath(a.root), "data", f"{a.name}_char")
    os.makedirs(os.path.join(out, "wavs"), exist_ok=True)
    samples = a.frames * HOP - HOP // 2
    duration = samples / RATE
    rows, chars = [], set()
    for i in range(a.clips):
        path = os.path.join(out, "wavs", f"AB{i:04d}.wav")
        write_wav(path, samples, RATE, i)
        text = text_for(i)
        chars.update(text)
        rows.append({"audio_path": path, "text": text, "duration": duration})
    with ArrowWriter(path=os.path.join(out, "raw.arrow")) as w:
        for r in rows:
            w.write(r)
        w.finalize()
    with open(os.path.join(out, "duration.json"), "w", encoding="utf-8") as f:
        json.dump({"duration": [duration] * a.clips}, f)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write(" \n")
        for c in sorted(chars - {" "}):
            f.write(c + "\n")


if __name__ == "__main__":
    main()
