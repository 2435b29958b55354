/* SPDX-License-Identifier: MIT */
/*
 * strvec: NULL-terminated string arrays (see strvec.h).  Every entry point
 * ends in strvec_put(), which takes ownership of one malloc'd string.
 */
#include "util/strvec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int strvec_grow(struct strvec *sv)
{
    if (sv->n + 2 <= sv->alloc)
        return 0;
    size_t na = sv->alloc ? 2 * sv->alloc : 16;
    char **p = realloc(sv->v, na * sizeof *p);
    if (!p)
        return -1;
    sv->v = p;
    sv->alloc = na;
    return 0;
}

/* Insert (replace = 0) or replace (1) at i with c, which sv now owns; a
 * NULL c is an earlier allocation failure.  Returns 0 or -1. */
static int strvec_put(struct strvec *sv, size_t i, char *c, int replace)
{
    if (!c || (!replace && strvec_grow(sv))) {
        free(c);
        return -1;
    }
    if (replace) {
        free(sv->v[i]);
    } else {
        memmove(sv->v + i + 1, sv->v + i, (sv->n - i) * sizeof *sv->v);
        sv->n++;
        sv->v[sv->n] = NULL;
    }
    sv->v[i] = c;
    return 0;
}

static char *strvec_vformat(const char *fmt, va_list ap)
{
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

int strvec_insert(struct strvec *sv, size_t i, const char *s)
{
    return strvec_put(sv, i, strdup(s), 0);
}

int strvec_push(struct strvec *sv, const char *s)
{
    return strvec_insert(sv, sv->n, s);
}

int strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = strvec_vformat(fmt, ap);
    va_end(ap);
    return strvec_put(sv, sv->n, s, 0);
}

int strvec_replace(struct strvec *sv, size_t i, const char *s)
{
    return strvec_put(sv, i, strdup(s), 1);
}

int strvec_replacef(struct strvec *sv, size_t i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = strvec_vformat(fmt, ap);
    va_end(ap);
    return strvec_put(sv, i, s, 1);
}

void strvec_remove(struct strvec *sv, size_t i)
{
    free(sv->v[i]);
    memmove(sv->v + i, sv->v + i + 1, (sv->n - i) * sizeof *sv->v);
    sv->n--;
}

void strvec_release(struct strvec *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = sv->alloc = 0;
}

void strvec_shell_word(FILE *f, const char *s)
{
    if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%")
                  == strlen(s)) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}
