#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Long-tailed synthetic LJSpeech-style data for the real Coqui trainer.

    python3 make_longtail.py OUT_DIR [--short N] [--short-seconds A:B]
                             [--long L] [--long-seconds C:D] [--rate HZ]

Like make_data.py (same layout: OUT_DIR/wavs/ID.wav, metadata.csv,
metadata_val.csv with two clips), but the training clips' lengths are
long-tailed: N short clips spread evenly over A..B seconds and L long ones
spread evenly over C..D seconds, listed interleaved (a long clip after
every N/L short ones), so their place in metadata.csv says nothing about
their length.  Coqui's TTSDataset sorts its samples by audio length,
shortest first, and the template config does not shuffle: an epoch trains
on short batches first and meets the long clips only in its last batches.
Every text has the same number of characters (tests/real/synth.py).
Standard library only; the same arguments give the same bytes.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from synth import text_for, write_wav  # noqa: E402


def spread(n, lo, hi):
    if n <= 1:
        return [hi] * n
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def span(s):
    a, _, b = s.partition(":")
    return float(a), float(b or a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--short", type=int, default=48)
    ap.add_argument("--short-seconds", type=span, default=(2.0, 3.0))
    ap.add_argument("--long", type=int, default=8)
    ap.add_argument("--long-seconds", type=span, default=(15.0, 20.0))
    ap.add_argument("--rate", type=int, default=22050)
    a = ap.parse_args()
    short = spread(a.short, *a.short_seconds)
    long_ = spread(a.long, *a.long_seconds)
    every = max(1, a.short // max(1, a.long))
    secs = []
    for i, s in enumerate(short):
        secs.append(s)
        if long_ and (i + 1) % every == 0:
            secs.append(long_.pop(0))
    secs += long_
    secs += [short[0], short[-1]]   # the two validation clips
    os.makedirs(os.path.join(a.out, "wavs"), exist_ok=True)
    lines = []
    for i, s in enumerate(secs):
        cid = f"LT{i:04d}"
        write_wav(os.path.join(a.out, "wavs", cid + ".wav"), int(s * a.rate), a.rate, i)
        t = text_for(i)
        lines.append(f"{cid}|{t}|{t}\n")
    n = len(secs) - 2
    with open(os.path.join(a.out, "metadata.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[:n])
    with open(os.path.join(a.out, "metadata_val.csv"), "w", encoding="utf-8") as f:
        f.writelines(lines[n:])


if __name__ == "__main__":
    main()
