# SPDX-License-Identifier: MIT
"""Synthetic speech-like clips for the real trainers' tests (standard
library only; the same seed gives the same bytes).

Every clip of a test has the same length and every text the same number
of characters, so every batch of a given size has the same shape and the
memory a batch needs does not depend on which clips a shuffle picks.
"""
import math
import random
import struct
import wave

WORDS = ["alpha", "bravo", "delta", "gamma", "kappa", "omega", "sigma", "theta"]


def text_for(i):
    """Four five-letter words: 23 characters with the spaces and the period."""
    r = random.Random(i)
    return " ".join(r.choice(WORDS) for _ in range(4)).capitalize() + "."


def write_wav(path, samples, rate, seed):
    """16-bit mono PCM: two tones and a little noise, no silence to trim."""
    r = random.Random(seed)
    f1, f2 = 180.0 + 20 * r.random(), 420.0 + 60 * r.random()
    frames = bytearray()
    for t in range(samples):
        x = 0.35 * math.sin(2 * math.pi * f1 * t / rate) + 0.2 * math.sin(2 * math.pi * f2 * t / rate)
        x += 0.05 * (r.random() - 0.5)
        frames += struct.pack("<h", int(max(-1.0, min(1.0, x)) * 32000))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))
