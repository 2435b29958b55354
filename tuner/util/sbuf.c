/* SPDX-License-Identifier: MIT */
/*
 * sbuf: a growable string that frees itself when an append fails (see
 * sbuf.h).  Capacity doubles from 256 bytes, so n appends cost O(total)
 * copying; the cap and the overflow checks come before any arithmetic
 * that could wrap.
 */
#include "util/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(struct sbuf *b)
{
    *b = (struct sbuf)SBUF_INIT;
}

void sb_release(struct sbuf *b)
{
    if (!b)
        return;
    free(b->p);
    *b = (struct sbuf)SBUF_INIT;
}

/* Give up: free what is held and refuse every later append. */
static void sb_fail(struct sbuf *b)
{
    sb_release(b);
    b->oom = 1;
}

void sb_put(struct sbuf *b, const void *s, size_t n)
{
    if (b->oom)
        return;
    if (n > SBUF_MAX - b->len) {
        sb_fail(b);
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;   /* cannot wrap: len + n + 1 <= SBUF_MAX + 1 */
        char *p = realloc(b->p, cap);
        if (!p) {
            sb_fail(b);
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sb_puts(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

void sb_putc(struct sbuf *b, char c)
{
    sb_put(b, &c, 1);
}

void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap)
{
    if (b->oom)
        return;
    /* Most pieces are short: format into the stack first, and only a
     * longer result pays for a second pass. */
    char small[256];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) {
        va_end(again);
        sb_fail(b);
        return;
    }
    if ((size_t)n < sizeof small) {
        va_end(again);
        sb_put(b, small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        va_end(again);
        sb_fail(b);
        return;
    }
    vsnprintf(big, (size_t)n + 1, fmt, again);
    va_end(again);
    sb_put(b, big, (size_t)n);
    free(big);
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

char *sb_take(struct sbuf *b)
{
    char *s = b->p;
    if (b->oom) {
        free(s);    /* NULL unless a caller set oom by hand */
        s = NULL;
    } else if (!s) {
        s = strdup("");
    }
    *b = (struct sbuf)SBUF_INIT;
    return s;
}
