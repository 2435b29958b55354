/* SPDX-License-Identifier: MIT */
/*
 * lbuf: line splitting with a memory cap (see lbuf.h for the contract).
 *
 * The buffer grows geometrically up to the cap and is kept between lines
 * so that a steady stream of short lines costs no allocations.
 */
#include "trial/lbuf.h"

#include <stdlib.h>
#include <string.h>

/* Ensure room for `want` bytes; on failure keep what fits.  Returns the
 * number of bytes that may be held. */
static size_t lbuf_room(struct lbuf *b, size_t want)
{
    if (want > b->cap)
        want = b->cap;
    if (want <= b->alloc)
        return want;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < want)
        n *= 2;
    if (n > b->cap)
        n = b->cap;
    char *p = realloc(b->buf, n);
    if (!p)
        return b->alloc;
    b->buf = p;
    b->alloc = n;
    return want;
}

static void lbuf_deliver(struct lbuf *b, lbuf_line_fn fn, void *ctx, int flags)
{
    if (b->len)
        fn(ctx, b->buf, b->len, flags);
    b->len = 0;
}

/* The bytes before the first digit: a progress bar's description, the
 * same in each of its redraws. */
static size_t lbuf_head(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] < '0' || s[i] > '9'))
        i++;
    return i;
}

/* Does the line next (len bytes, ending in '\r') redraw the same bar as
 * the line held in b? */
static int lbuf_same_bar(const struct lbuf *b, const char *next, size_t len)
{
    size_t h = lbuf_head(b->buf, b->len);
    return len > h && h < b->len && lbuf_head(next, len) == h && !memcmp(b->buf, next, h);
}

void lbuf_feed(struct lbuf *b, const char *data, size_t n, lbuf_line_fn fn, void *ctx)
{
    /*
     * The next '\n' and '\r' of the chunk, each found with memchr and
     * looked for again only once passed: one pass over the chunk at
     * memchr's speed, however the two are mixed.
     */
    const char *nl = memchr(data, '\n', n), *cr = memchr(data, '\r', n);
    size_t i = 0;
    while (i < n) {
        if (nl && nl < data + i)
            nl = memchr(data + i, '\n', n - i);
        if (cr && cr < data + i)
            cr = memchr(data + i, '\r', n - i);
        const char *e = nl && (!cr || nl < cr) ? nl : cr;
        size_t j = e ? (size_t)(e - data) : n;
        size_t piece = j - i;
        if (!b->skipping && piece) {
            size_t keep = lbuf_room(b, b->len + piece);
            size_t take = keep > b->len ? keep - b->len : 0;
            if (take > piece)
                take = piece;
            memcpy(b->buf + b->len, data + i, take);
            b->len += take;
            if (take < piece) {
                /* Over the cap (or out of memory): deliver what we have
                 * now and skip the rest of this line. */
                lbuf_deliver(b, fn, ctx, LBUF_TRUNCATED);
                b->skipping = 1;
            }
        }
        if (j < n) {
            /* A line end: deliver and start afresh.  A '\r' whose next
             * line in this chunk redraws the same bar is superseded. */
            int flags = 0;
            if (data[j] == '\r' && !b->skipping && b->len) {
                cr = j + 1 < n ? memchr(data + j + 1, '\r', n - j - 1) : NULL;
                if (cr && (!nl || nl <= data + j || cr < nl) &&
                    lbuf_same_bar(b, data + j + 1, (size_t)(cr - (data + j + 1))))
                    flags = LBUF_SUPERSEDED;
            }
            if (!b->skipping)
                lbuf_deliver(b, fn, ctx, flags);
            b->skipping = 0;
            b->len = 0;
            j++;
        }
        i = j;
    }
}

void lbuf_finish(struct lbuf *b, lbuf_line_fn fn, void *ctx)
{
    if (!b->skipping)
        lbuf_deliver(b, fn, ctx, 0);
    b->skipping = 0;
    b->len = 0;
}

void lbuf_release(struct lbuf *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = b->alloc = 0;
    b->skipping = 0;
}
