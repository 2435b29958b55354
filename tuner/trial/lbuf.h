/* SPDX-License-Identifier: MIT */
/*
 * lbuf: split a byte stream into lines, with a cap on memory.
 *
 * A trial's output arrives in chunks of any size.  lbuf cuts it into lines
 * at '\n' or '\r' (tqdm redraws its bar with '\r', so every redraw is a
 * line of its own) and hands each non-empty line to a callback.  A line
 * longer than the cap is delivered once, cut at the cap with `truncated`
 * set, and the rest of it is skipped up to the next line end: a child that
 * prints a 100 MB line costs us `cap` bytes, not 100 MB.  If memory runs
 * out the line is treated the same way; lbuf never fails.
 *
 * Life cycle: struct lbuf b = LBUF_INIT(cap); lbuf_feed(...) per chunk;
 * lbuf_finish(...) at EOF to deliver a last line with no line end;
 * lbuf_release(&b).
 */
#ifndef AB_LBUF_H
#define AB_LBUF_H

#include <stddef.h>

/** A flag of a delivered line: it was cut at the cap. */
#define LBUF_TRUNCATED 1
/**
 * A flag of a delivered line: it ended in '\r' and the same chunk holds
 * the next redraw of the same progress bar (the next line also ends in
 * '\r' and the two agree up to their first digit).  A reader that only
 * wants the bar's latest state may skip it: what it says, the next line
 * says later, in the same read.
 */
#define LBUF_SUPERSEDED 2

/** Called for each line: not NUL-terminated beyond len, no line end;
 *  flags: LBUF_TRUNCATED, LBUF_SUPERSEDED. */
typedef void (*lbuf_line_fn)(void *ctx, const char *line, size_t len, int flags);

struct lbuf {
    char *buf;      /**< bytes of the line being built (owned) */
    size_t len;     /**< bytes held */
    size_t alloc;   /**< bytes allocated */
    size_t cap;     /**< most bytes a line may keep */
    int skipping;   /**< the current line was already delivered cut: drop until EOL */
};
#define LBUF_INIT(cap) { NULL, 0, 0, (cap), 0 }

/** Feed n bytes; calls fn for every line they complete. */
void lbuf_feed(struct lbuf *b, const char *data, size_t n, lbuf_line_fn fn, void *ctx);

/** At EOF: deliver the unterminated last line, if any. */
void lbuf_finish(struct lbuf *b, lbuf_line_fn fn, void *ctx);

/** Free the buffer; the struct may be fed again afterwards. */
void lbuf_release(struct lbuf *b);

#endif
