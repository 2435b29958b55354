/* SPDX-License-Identifier: MIT */
/*
 * mono: the one clock for durations and deadlines.  CLOCK_MONOTONIC in
 * seconds as a double: it never jumps with the wall clock, and the probe's
 * step times (time.monotonic() in Python) are on the same clock, so they
 * can be compared with it directly.  Header only; nothing to set up.
 */
#ifndef AB_MONO_H
#define AB_MONO_H

#include <time.h>

/** Seconds on CLOCK_MONOTONIC. */
static inline double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
