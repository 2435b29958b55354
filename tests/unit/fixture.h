/* SPDX-License-Identifier: MIT */
/*
 * fixture: the results files under tests/data/ that the report, matrix
 * and baseline tests share.  ctest sets AB_SOURCE_DIR to the repository
 * root; include after <cmocka.h> and <jansson.h>.
 */
#ifndef AB_TEST_FIXTURE_H
#define AB_TEST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

/* $AB_SOURCE_DIR/tests/data/NAME, malloc'd. */
static inline char *data_path(const char *name)
{
    const char *src = getenv("AB_SOURCE_DIR");
    if (!src || !*src)
        fail_msg("AB_SOURCE_DIR is not set: run with AB_SOURCE_DIR=<repository root> so the "
                 "fixtures are found at $AB_SOURCE_DIR/tests/data/");
    char *p = NULL;
    assert_true(asprintf(&p, "%s/tests/data/%s", src, name) > 0);
    return p;
}

/* The parsed fixture; the caller json_decref()s it. */
static inline json_t *fixture(const char *name)
{
    char *p = data_path(name);
    json_error_t je;
    json_t *j = json_load_file(p, 0, &je);
    if (!j)
        fail_msg("cannot load fixture '%s': %s", p, je.text);
    free(p);
    return j;
}

#endif
