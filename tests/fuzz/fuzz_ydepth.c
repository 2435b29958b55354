/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for yedit's nesting limit.  Each input byte opens
 * (1 + byte/2) * SCALE collections, a flow list "[" for an odd byte, a
 * flow mapping "{k: " for an even one, closed again in reverse order, all
 * as the value of "a" (so depth reaches tens of thousands).  Invariants:
 *   - a document nested deeper than YEDIT_MAX_DEPTH is refused as
 *     CEDIT_MALFORMED with "nested deeper than 1000 levels";
 *   - one within the limit reads "a" as a collection (CEDIT_NOT_SCALAR),
 *     or as an empty scalar when nothing is nested;
 *   - either way in linear time (libFuzzer's -timeout catches a return of
 *     the quadratic scan).
 * Build: see tests/CMakeLists.txt (fuzz_ydepth).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yedit.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

#define SCALE 40

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t depth = 0, cap = 8;
    for (size_t i = 0; i < size; i++)
        depth += (1 + data[i] / 2u) * SCALE;
    if (depth > 200000)
        return 0;
    cap += depth * 5 + 8;
    char *doc = malloc(cap), *p = doc;
    CHECK(doc);
    p += sprintf(p, "a: ");
    for (size_t i = 0; i < size; i++)
        for (size_t k = 0; k < (1 + data[i] / 2u) * SCALE; k++)
            p += sprintf(p, "%s", data[i] & 1 ? "[" : "{k: ");
    for (size_t i = size; i-- > 0;)
        for (size_t k = 0; k < (1 + data[i] / 2u) * SCALE; k++)
            *p++ = data[i] & 1 ? ']' : '}';
    *p++ = '\n';

    char *value = NULL, err[512] = "";
    enum cedit_status st = yedit_get(doc, (size_t)(p - doc), "a", &value, err, sizeof err);
    if (depth + 1 > YEDIT_MAX_DEPTH) {
        CHECK(st == CEDIT_MALFORMED && !value);
        CHECK(strstr(err, "nested deeper than 1000 levels"));
    } else if (depth) {
        CHECK(st == CEDIT_NOT_SCALAR && !value);
    } else {
        CHECK(st == CEDIT_OK && value);
    }
    free(value);
    free(doc);
    return 0;
}
