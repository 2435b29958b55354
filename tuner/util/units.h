/* SPDX-License-Identifier: MIT */
/*
 * units: parse the durations and sizes a user types.
 *
 * Durations: a non-negative decimal number with an optional unit, `ms`,
 * `s`, `m`, `h` (no unit means seconds): `90s`, `10m`, `2h`, `1.5h`.
 * Sizes: a non-negative integer or decimal with an optional binary unit,
 * `K`, `M`, `G`, `T` (also `KiB`, `MiB`, ..., and `B`): `512M`, `2G`.
 * Both reject empty strings, signs, trailing junk and overflow.
 */
#ifndef AB_UNITS_H
#define AB_UNITS_H

#include <stdint.h>

/** Parse a duration into seconds.  Returns 0, or -1 when malformed. */
int units_duration(const char *s, double *seconds);

/** Parse a size into bytes.  Returns 0, or -1 when malformed. */
int units_size(const char *s, uint64_t *bytes);

/** Parse a whole number in [min, max].  Returns 0, or -1. */
int units_long(const char *s, long min, long max, long *out);

/**
 * A plain non-negative decimal ("5", "0.25") at the start of s: no sign,
 * no leading space, no hex, no exponent.  *end gets what follows.
 * Returns 0, or -1 when s does not start with one.
 */
int units_decimal(const char *s, double *v, const char **end);

#endif
