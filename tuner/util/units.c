/* SPDX-License-Identifier: MIT */
/*
 * units: the parsers behind every duration, size and count on the command
 * line (see units.h).  strtod/strtol do the digits; this file only checks
 * that nothing else was typed and applies the unit.
 */
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Parse the leading non-negative decimal number; *end gets the rest. */
static int units_number(const char *s, double *v, const char **end)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1; /* no sign, no leading space, no ".5" */
    char *e;
    errno = 0;
    double d = strtod(s, &e);
    if (errno || !isfinite(d) || d < 0)
        return -1;
    /* strtod also takes hex and exponents; we want plain decimals. */
    for (const char *p = s; p < e; p++)
        if (!isdigit((unsigned char)*p) && *p != '.')
            return -1;
    *v = d;
    *end = e;
    return 0;
}

int units_duration(const char *s, double *seconds)
{
    static const struct { const char *unit; double mult; } units[] = {
        { "", 1 }, { "s", 1 }, { "ms", 0.001 }, { "m", 60 }, { "h", 3600 },
    };
    double v;
    const char *rest;
    if (units_number(s, &v, &rest))
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (!strcmp(rest, units[i].unit)) {
            *seconds = v * units[i].mult;
            return 0;
        }
    }
    return -1;
}

int units_size(const char *s, uint64_t *bytes)
{
    static const struct { const char *unit; double mult; } units[] = {
        { "", 1 }, { "B", 1 },
        { "K", 1024.0 }, { "KB", 1024.0 }, { "KIB", 1024.0 },
        { "M", 1048576.0 }, { "MB", 1048576.0 }, { "MIB", 1048576.0 },
        { "G", 1073741824.0 }, { "GB", 1073741824.0 }, { "GIB", 1073741824.0 },
        { "T", 1099511627776.0 }, { "TB", 1099511627776.0 }, { "TIB", 1099511627776.0 },
    };
    double v;
    const char *rest;
    if (units_number(s, &v, &rest))
        return -1;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (!strcasecmp(rest, units[i].unit)) {
            double b = v * units[i].mult;
            if (b >= 18446744073709551615.0)
                return -1;
            *bytes = (uint64_t)b;
            return 0;
        }
    }
    return -1;
}

int units_long(const char *s, long min, long max, long *out)
{
    /* Digits only (a leading '-' where negatives are allowed): no sign,
     * no spaces, no hex, no trailing junk. */
    if (!s || !*s)
        return -1;
    for (const char *p = s + (*s == '-' && min < 0); ; p++) {
        if (!*p)
            break;
        if (!isdigit((unsigned char)*p))
            return -1;
    }
    if (*s == '-' && !s[1])
        return -1;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int units_decimal(const char *s, double *v, const char **end)
{
    return units_number(s, v, end);
}
