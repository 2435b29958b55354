/* SPDX-License-Identifier: MIT */
/*
 * say: untrusted text made safe for a terminal (see say.h).  One pass over
 * the bytes: a whole, printable UTF-8 character is copied, anything else
 * becomes "\xNN" (four visible characters).
 */
#include "cli/say.h"

#include <stdlib.h>
#include <string.h>

/* Length of the printable UTF-8 character at s (at most n bytes), or 0
 * when the byte there must be escaped. */
static size_t say_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return c >= 0x20 && c != 0x7f ? 1 : c == '\n';
    size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0)
               : c >= 0xC2 ? 2 : 0;
    if (!len || len > n)
        return 0;
    unsigned long cp = c & (len == 2 ? 0x1Fu : len == 3 ? 0x0Fu : 0x07u);
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    int ok = len == 2 ? cp >= 0xA0 /* C1 controls: some terminals obey them */
           : len == 3 ? cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)
           : cp >= 0x10000 && cp <= 0x10FFFF;
    return ok ? len : 0;
}

char *say_clean(const char *s, char *out, size_t outlen)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, o = 0;
    if (!outlen)
        return out;
    while (i < n) {
        size_t k = say_char(u + i, n - i);
        if (k) {
            if (o + k >= outlen)
                break;
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            if (o + 4 >= outlen)
                break;
            snprintf(out + o, outlen - o, "\\x%02x", u[i]);
            o += 4;
            i++;
        }
    }
    out[o] = '\0';
    return out;
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
