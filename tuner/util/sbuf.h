/* SPDX-License-Identifier: MIT */
/*
 * sbuf: the growable string every builder of text in autobatch uses (the
 * reports, the webhook payloads, the unified diff, the YAML editor's
 * splices).
 *
 * An append that cannot be done (memory ran out, or the string would
 * pass SBUF_MAX) frees the buffer and sets `oom`; every later append does
 * nothing, so a builder appends without checking and looks at `oom` once
 * at the end, as curl's dynbuf does.  While `oom` is clear and len > 0,
 * p holds len bytes and a NUL after them (the bytes may hold NULs of
 * their own); an empty buffer may have p NULL.
 *
 * Life cycle:
 *
 *   1. struct sbuf b = SBUF_INIT;  (or sb_init(&b))
 *   2. sb_put / sb_puts / sb_putc / sb_printf / sb_vprintf any number of
 *      times;
 *   3. either sb_take(&b), which hands the string to the caller (who
 *      frees it) and leaves b empty, or sb_release(&b), which frees it.
 *      Both leave b as SBUF_INIT, ready for reuse.
 *
 * Nothing here prints or exits.
 */
#ifndef AB_SBUF_H
#define AB_SBUF_H

#include <stdarg.h>
#include <stddef.h>

/** The most bytes a buffer holds (NUL excluded): a larger result is
 *  treated as running out of memory. */
#define SBUF_MAX ((size_t)1 << 30)

struct sbuf {
    char *p;        /**< the string (owned), NUL-terminated; NULL while empty */
    size_t len;     /**< bytes before the NUL */
    size_t cap;     /**< bytes allocated */
    int oom;        /**< an append failed: p is freed, appends do nothing */
};
#define SBUF_INIT { NULL, 0, 0, 0 }

/** Set b to SBUF_INIT. */
void sb_init(struct sbuf *b);

/** Append n bytes of s (n may be 0, s then NULL). */
void sb_put(struct sbuf *b, const void *s, size_t n);

/** Append the NUL-terminated s. */
void sb_puts(struct sbuf *b, const char *s);

/** Append one byte. */
void sb_putc(struct sbuf *b, char c);

/** Append printf(fmt, ...); any length.  A format error counts as oom. */
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** The same with a va_list (ap is used once; the caller ends it). */
void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/**
 * Hand the string to the caller, who frees it: "" (allocated) when
 * nothing was appended, NULL when oom is set (or the "" cannot be
 * allocated).  b is left as SBUF_INIT.
 */
char *sb_take(struct sbuf *b);

/** Free the string and set b to SBUF_INIT; NULL b is fine. */
void sb_release(struct sbuf *b);

#endif
