#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Synthetic LJSpeech-style data for the real Coqui trainer test.

    python3 make_data.py OUT_DIR [--clips N] [--seconds S] [--rate HZ]

Writes OUT_DIR/wavs/ID.wav (16-bit mono PCM, a few tones with a little
noise, no silence to trim), OUT_DIR/metadata.csv (`ID|text|text`, Coqui's
`ljspeech` formatter reads the third column) and OUT_DIR/metadata_val.csv
(two clips, so no eval split is carved out of the training set).  Every
clip has the same length and every text the same number of characters, so
every batch of a given size has the same shape (tests/real/synth.py).
Standard library only; the same arguments give the same bytes.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from synth import text_for, write_wav  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--clips", type=int, default=160)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--rate", type=int, default=22050)
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "wavs"), exist_ok=True)
    lines = []
    for i in range(a.clips + 2):
        cid = f"AB{i:04d}"
        write_wav(os.path.join(a.out, "wavs", cid + ".wav"), int(a.seconds * a.rate), a.rate, i)
        t = text_for(i)
        lines.append(f"{cid}|{t}|{t}\n")
    with open(os.path.join(a.out, "metadata.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[: a.clips])
    with open(os.path.join(a.out, "metadata_val.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[a.clips :])


if __name__ == "__main__":
    main()
