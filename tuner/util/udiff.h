/* SPDX-License-Identifier: MIT */
/*
 * udiff: a unified diff of two texts, as `diff -u` prints it, for showing
 * the user exactly what a write-back would change.
 *
 * Lines end at '\n' ('\r' stays part of the line, so CRLF files diff as
 * they are); a last line without '\n' gets "\ No newline at end of file".
 * Myers' O(ND) algorithm: configs differ in a handful of lines, so D is
 * tiny.  Three lines of context.
 */
#ifndef AB_UDIFF_H
#define AB_UDIFF_H

#include <stddef.h>

/**
 * Render the diff of a -> b with the given labels into a malloc'd string
 * (*out; empty string when the texts are equal).  Returns 0, or -1 when
 * out of memory.
 */
int udiff(const char *a, size_t alen, const char *b, size_t blen, const char *label_a,
          const char *label_b, char **out);

#endif
