/* SPDX-License-Identifier: MIT */
/* tclean: untrusted text made safe to show (tclean.h). */
#include "util/tclean.h"

#include <stdio.h>
#include <string.h>

/* Length of the printable UTF-8 character at s (at most n bytes), or 0
 * when the byte there must be escaped. */
static size_t tclean_char(const unsigned char *s, size_t n, int keep_newline)
{
    unsigned c = s[0];
    if (c < 0x80)
        return (c >= 0x20 && c != 0x7f) || (keep_newline && c == '\n') ? 1 : 0;
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

char *tclean(char *out, size_t outlen, const char *s, size_t max, int keep_newline)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strnlen(s, max), i = 0, o = 0;
    if (!outlen)
        return out;
    while (i < n) {
        unsigned c = u[i];
        size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
        if (n == max && i + want > n && c >= 0xC2 && c <= 0xF4)
            break; /* max cuts this character: stop before it */
        size_t k = tclean_char(u + i, n - i, keep_newline);
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
