/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for yedit.  The input is "KEY\nVALUE\nDOCUMENT": the
 * first two lines are the key path and the new value (cut at a NUL), the
 * rest is the YAML document.  Invariants checked:
 *   - get and set never crash, and fill exactly one of value/err;
 *   - a failed set leaves the output NULL and its length 0;
 *   - a successful set returns a sanely sized document in which get of
 *     the key reads the value back (booleans may be respelled in the
 *     file's style: True for true, yes for true, ...);
 *   - setting the same value again changes nothing (the edit is stable).
 * Build: clang -g -fsanitize=fuzzer,address -D_GNU_SOURCE -Iadapters
 *        adapters/yedit.c tests/fuzz/fuzz_yedit.c -lyaml
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "yedit.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

static char *cstr(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static int truth(const char *v)
{
    static const char *const t[] = { "true", "yes", "on" }, *const f[] = { "false", "no", "off" };
    for (int i = 0; i < 3; i++) {
        if (!strcasecmp(v, t[i]))
            return 1;
        if (!strcasecmp(v, f[i]))
            return 0;
    }
    return -1;
}

/* The value read back is the value set, or the same boolean respelled. */
static int same_value(const char *got, const char *want)
{
    if (!strcmp(got, want))
        return 1;
    return truth(want) >= 0 && truth(got) == truth(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl1 = memchr(data, '\n', size);
    if (!nl1)
        return 0;
    const uint8_t *rest = nl1 + 1;
    const uint8_t *nl2 = memchr(rest, '\n', size - (size_t)(rest - data));
    if (!nl2)
        return 0;
    char *key = cstr(data, (size_t)(nl1 - data));
    char *value = cstr(rest, (size_t)(nl2 - rest));
    const char *doc = (const char *)(nl2 + 1);
    size_t len = size - (size_t)(nl2 + 1 - data);
    char err[256];

    char *got = NULL;
    enum cedit_status st = yedit_get(doc, len, key, &got, err, sizeof err);
    CHECK((st == CEDIT_OK) == (got != NULL));
    CHECK(st == CEDIT_OK || err[0] != '\0');
    free(got);

    char *out = (char *)"sentinel";
    size_t outlen = 12345;
    st = yedit_set(doc, len, key, value, &out, &outlen, err, sizeof err);
    if (st != CEDIT_OK) {
        CHECK(out == NULL && outlen == 0 && err[0] != '\0' && !strchr(err, '\n'));
    } else {
        size_t klen = strlen(key), vlen = strlen(value);
        CHECK(out != NULL);
        /*
         * Quoting at most quadruples a byte ("\x01"); an inserted line adds
         * its indentation (no wider than the document), quotes, ": " and a
         * line break.
         */
        CHECK(outlen <= 2 * len + 4 * (klen + vlen) + 16);
        got = NULL;
        st = yedit_get(out, outlen, key, &got, err, sizeof err);
        CHECK(st == CEDIT_OK && got != NULL);
        CHECK(same_value(got, value));
        free(got);

        char *again = NULL;
        size_t againlen = 0;
        st = yedit_set(out, outlen, key, value, &again, &againlen, err, sizeof err);
        CHECK(st == CEDIT_OK);
        CHECK(againlen == outlen && memcmp(again, out, outlen) == 0);
        free(again);
        free(out);
    }
    free(key);
    free(value);
    return 0;
}
