/*
 * lbuf: line splitting with a memory cap (see lbuf.h for the contract).
 *
 * The buffer grows geometrically up to the cap and is kept between lines
 * so that a steady stream of short lines costs no allocations.
 */
#include "lbuf.h"

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

static void lbuf_deliver(struct lbuf *b, lbuf_line_fn fn, void *ctx, int truncated)
{
    if (b->len)
        fn(ctx, b->buf, b->len, truncated);
    b->len = 0;
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
                lbuf_deliver(b, fn, ctx, 1);
                b->skipping = 1;
            }
        }
        if (j < n) {
            /* A line end: deliver and start afresh. */
            if (!b->skipping)
                lbuf_deliver(b, fn, ctx, 0);
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
