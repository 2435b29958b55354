#!/usr/bin/env python3
"""Synthetic LJSpeech-style data for the real Coqui trainer test.

    python3 make_data.py OUT_DIR [--clips N] [--seconds S] [--rate HZ]

Writes OUT_DIR/wavs/ID.wav (16-bit mono PCM, a few tones with a little
noise, no silence to trim), OUT_DIR/metadata.csv (`ID|text|text`, Coqui's
`ljspeech` formatter reads the third column) and OUT_DIR/metadata_val.csv
(two clips, so no eval split is carved out of the training set).  Every
clip has the same length and every text the same number of characters, so
every batch of a given size has the same shape and the memory a batch needs
does not depend on which clips the shuffle picks.  Standard library only;
the same arguments give the same bytes.
"""
import argparse
import math
import os
import random
import struct
import wave

WORDS = ["alpha", "bravo", "delta", "gamma", "kappa", "omega", "sigma", "theta"]


def text_for(i):
    # four five-letter words: 23 characters with the spaces and the period
    r = random.Random(i)
    return " ".join(r.choice(WORDS) for _ in range(4)).capitalize() + "."


def write_wav(path, seconds, rate, seed):
    r = random.Random(seed)
    n = int(seconds * rate)
    f1, f2 = 180.0 + 20 * r.random(), 420.0 + 60 * r.random()
    frames = bytearray()
    for t in range(n):
        x = 0.35 * math.sin(2 * math.pi * f1 * t / rate) + 0.2 * math.sin(2 * math.pi * f2 * t / rate)
        x += 0.05 * (r.random() - 0.5)
        frames += struct.pack("<h", int(max(-1.0, min(1.0, x)) * 32000))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))


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
        write_wav(os.path.join(a.out, "wavs", cid + ".wav"), a.seconds, a.rate, i)
        t = text_for(i)
        lines.append(f"{cid}|{t}|{t}\n")
    with open(os.path.join(a.out, "metadata.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[: a.clips])
    with open(os.path.join(a.out, "metadata_val.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[a.clips :])


if __name__ == "__main__":
    main()
