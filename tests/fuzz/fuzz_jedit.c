/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for jedit.  The input is DOC '\0' KEY '\0' VALUE (a
 * missing KEY or VALUE defaults to "a" and "1").  It checks that get and
 * set never crash or leak, that a failure leaves no output, and that a
 * successful set is read back by get and is idempotent.
 *
 *   clang -g -fsanitize=fuzzer,address -D_GNU_SOURCE -Iadapters \
 *       adapters/jedit.c tests/fuzz/fuzz_jedit.c -ljansson -o fuzz_jedit
 *   ./fuzz_jedit -max_total_time=60 [SEED_DIR]
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jedit.h"

static int ascii_caseeq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        int x = *a >= 'A' && *a <= 'Z' ? *a + 32 : *a;
        int y = *b >= 'A' && *b <= 'Z' ? *b + 32 : *b;
        if (x != y)
            return 0;
    }
    return *a == *b;
}

/* Whether v is a JSON number: the one kind of value jansson may refuse (overflow). */
static int json_number(const char *v)
{
    const char *p = v;
    if (*p == '-')
        p++;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return !*p;
}

static int utf8_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s, k, cp, min;
        if (c < 0x80) {
            s++;
            continue;
        }
        if ((c & 0xE0) == 0xC0)
            k = 1, cp = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            k = 2, cp = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            k = 3, cp = c & 0x07, min = 0x10000;
        else
            return 0;
        for (unsigned i = 1; i <= k; i++) {
            if ((s[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        s += k + 1;
    }
    return 1;
}

/* What get must return after set: booleans are respelled in JSON's one spelling. */
static int same_value(const char *got, const char *value)
{
    if (ascii_caseeq(value, "true") || ascii_caseeq(value, "false"))
        return ascii_caseeq(got, value);
    return !strcmp(got, value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    const char *nul = memchr(d, '\0', size);
    size_t doclen = nul ? (size_t)(nul - d) : size;
    char *key = NULL, *value = NULL;
    if (nul) {
        const char *k = nul + 1, *end = d + size;
        const char *nul2 = memchr(k, '\0', (size_t)(end - k));
        size_t klen = nul2 ? (size_t)(nul2 - k) : (size_t)(end - k);
        key = strndup(k, klen);
        if (nul2)
            value = strndup(nul2 + 1, (size_t)(end - nul2 - 1));
    }
    if (!key)
        key = strdup("a");
    if (!value)
        value = strdup("1");
    if (!key || !value)
        abort();
    /* A copy of exactly doclen bytes, so reading past it is caught. */
    char *doc = malloc(doclen ? doclen : 1);
    if (!doc)
        abort();
    memcpy(doc, d, doclen);

    char err[256], *got = NULL, *out = (char *)"x";
    size_t outlen = 7;
    enum cedit_status st = jedit_get(doc, doclen, key, &got, err, sizeof err);
    if ((st == CEDIT_OK) != (got != NULL))
        abort();
    free(got);

    st = jedit_set(doc, doclen, key, value, &out, &outlen, err, sizeof err);
    if (st != CEDIT_OK) {
        if (out || outlen || !err[0])
            abort();
        /* The edit checks refuse only values JSON or jansson cannot hold. */
        if (st == CEDIT_VERIFY && utf8_ok((const unsigned char *)value) && !json_number(value))
            abort();
    } else {
        if (!out || err[0])
            abort();
        got = NULL;
        if (jedit_get(out, outlen, key, &got, err, sizeof err) != CEDIT_OK || !same_value(got, value))
            abort();
        free(got);
        /* Setting the same value again changes nothing. */
        char *again = NULL;
        size_t againlen = 0;
        if (jedit_set(out, outlen, key, value, &again, &againlen, err, sizeof err) != CEDIT_OK ||
            againlen != outlen || memcmp(again, out, outlen))
            abort();
        free(again);
        free(out);
    }
    free(doc);
    free(key);
    free(value);
    return 0;
}
