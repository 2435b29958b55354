/* SPDX-License-Identifier: MIT */
/*
 * say: untrusted text made safe for a terminal (see say.h), through
 * util/tclean: a whole, printable UTF-8 character is copied, anything
 * else becomes "\xNN" (four visible characters); newlines are kept.
 */
#include "cli/say.h"
#include "util/tclean.h"

#include <stdlib.h>
#include <string.h>

char *say_clean(const char *s, char *out, size_t outlen)
{
    return tclean(out, outlen, s, (size_t)-1, 1);
}

void say_vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    char *text = NULL, *safe = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    size_t cap = text ? strlen(text) * 4 + 1 : 0;
    if (text && (safe = malloc(cap)))
        say_clean(text, safe, cap);
    fprintf(f, "%s%s\n", prefix, safe ? safe : "out of memory");
    free(safe);
    free(text);
}

void say_line(FILE *f, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_vline(f, prefix, fmt, ap);
    va_end(ap);
}

void say_fputs(FILE *f, const char *s)
{
    size_t cap = strlen(s) * 4 + 1;
    char *safe = malloc(cap);
    fputs(safe ? say_clean(s, safe, cap) : "(out of memory)", f);
    free(safe);
}
