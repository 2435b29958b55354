/* SPDX-License-Identifier: MIT */
/*
 * errbuf: filling an error buffer (see errbuf.h): vsnprintf into the
 * caller's buffer, cut to fit, and nothing when the buffer is NULL or of
 * size 0.
 */
#include "util/errbuf.h"

#include <stdio.h>

void errbuf_vset(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
}

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errbuf_vset(err, errlen, fmt, ap);
    va_end(ap);
}
