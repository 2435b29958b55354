/*
 * strvec: NULL-terminated string arrays (see strvec.h).
 */
#include "strvec.h"

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

int strvec_insert(struct strvec *sv, size_t i, const char *s)
{
    char *c = strdup(s);
    if (!c || strvec_grow(sv)) {
        free(c);
        return -1;
    }
    memmove(sv->v + i + 1, sv->v + i, (sv->n - i) * sizeof *sv->v);
    sv->v[i] = c;
    sv->n++;
    sv->v[sv->n] = NULL;
    return 0;
}

int strvec_push(struct strvec *sv, const char *s)
{
    return strvec_insert(sv, sv->n, s);
}

int strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    int rc = strvec_push(sv, s);
    free(s);
    return rc;
}

int strvec_replace(struct strvec *sv, size_t i, const char *s)
{
    char *c = strdup(s);
    if (!c)
        return -1;
    free(sv->v[i]);
    sv->v[i] = c;
    return 0;
}

int strvec_replacef(struct strvec *sv, size_t i, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    free(sv->v[i]);
    sv->v[i] = s;
    return 0;
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
