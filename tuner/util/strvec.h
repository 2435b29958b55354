/* SPDX-License-Identifier: MIT */
/*
 * strvec: a growable, NULL-terminated array of owned strings, the shape
 * execvpe() wants for argv and envp.
 *
 * Life cycle: struct strvec v = STRVEC_INIT; strvec_push()...; use v.v;
 * strvec_release(&v).  Allocation failures are reported, never fatal.
 */
#ifndef AB_STRVEC_H
#define AB_STRVEC_H

#include <stddef.h>
#include <stdio.h>

struct strvec {
    char **v;     /**< NULL-terminated once anything was pushed */
    size_t n, alloc;
};
#define STRVEC_INIT { NULL, 0, 0 }

/** Append a copy of s.  Returns 0 or -1 (ENOMEM). */
int strvec_push(struct strvec *sv, const char *s);
/** Append a formatted string.  Returns 0 or -1. */
int strvec_pushf(struct strvec *sv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Insert a copy of s at index i (0..n).  Returns 0 or -1. */
int strvec_insert(struct strvec *sv, size_t i, const char *s);
/** Replace element i with a copy of s.  Returns 0 or -1. */
int strvec_replace(struct strvec *sv, size_t i, const char *s);
/** Replace element i with a formatted string.  Returns 0 or -1. */
int strvec_replacef(struct strvec *sv, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Remove element i. */
void strvec_remove(struct strvec *sv, size_t i);
void strvec_release(struct strvec *sv);

/** s as one word for a POSIX shell: as it is when it needs no quoting,
 *  else in single quotes. */
void strvec_shell_word(FILE *f, const char *s);

#endif
