/* SPDX-License-Identifier: MIT */
/* Unit tests for cache: keys change with every input, save/load round
 * trip, stale or foreign files ignored. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "search/cache.h"

static char dir[] = "/tmp/ab-cache-XXXXXX";

static struct space_opts opts(long *accum)
{
    struct space_opts o = { .batch_min = 1, .batch_max = 512, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 2, .ckpt_off = 1,
                            .world_size = 1, .use_model = 0 };
    return o;
}

static void test_keys(void **state)
{
    (void)state;
    long accum[] = { 1, 2 };
    struct space_opts o = opts(accum);
    char *cmd[] = { "python3", "train.py", NULL }, *cmd2[] = { "python3", "train2.py", NULL };
    struct cfile cf = CFILE_INIT;
    cf.orig = "a: 1\n";
    cf.orig_len = 5;
    struct cache_key a, b;
    cache_key_make(&a, cmd, NULL, &o, "no-gpu");
    cache_key_make(&b, cmd, NULL, &o, "no-gpu");
    assert_string_equal(a.hex, b.hex);
    assert_int_equal(strlen(a.hex), 16);
    cache_key_make(&b, cmd2, NULL, &o, "no-gpu");
    assert_string_not_equal(a.hex, b.hex);
    cache_key_make(&b, cmd, &cf, &o, "no-gpu");
    assert_string_not_equal(a.hex, b.hex);
    cache_key_make(&b, cmd, NULL, &o, "NVIDIA H100 80GB HBM3:85520809984;");
    assert_string_not_equal(a.hex, b.hex);
    o.batch_max = 1024;
    cache_key_make(&b, cmd, NULL, &o, "no-gpu");
    assert_string_not_equal(a.hex, b.hex);
    char want[4200];
    snprintf(want, sizeof want, "%s/autobatch/%s.json", dir, a.hex);
    assert_string_equal(a.path, want);
}

static void test_roundtrip(void **state)
{
    (void)state;
    long accum[] = { 1, 2 };
    struct space_opts o = opts(accum);
    char *cmd[] = { "python3", "train.py", NULL };
    struct cache_key k;
    cache_key_make(&k, cmd, NULL, &o, "no-gpu");
    struct space sp;
    char err[128];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    assert_int_equal(cache_load(&k, &sp), 0); /* nothing cached yet */
    search_record_fit(&sp.cells[0].search, 37, 1);
    search_record_fit(&sp.cells[0].search, 38, 0);
    search_record_fit(&sp.cells[1].search, 37, 1);
    search_record_fit(&sp.cells[1].search, 38, 0);
    assert_int_equal(cache_save(&k, &sp, 0, 0, -1), 0);
    space_release(&sp);

    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    assert_int_equal(cache_load(&k, &sp), 2);
    assert_int_equal(sp.cells[0].seeds[0], 37);
    assert_int_equal(sp.cells[0].seeds[1], 38);
    assert_int_equal(sp.cells[1].seeds[0], 37);
    space_release(&sp);

    /* a file whose key does not match is ignored */
    FILE *f = fopen(k.path, "w");
    fprintf(f, "{\"key\": \"0000000000000000\", \"cells\": [{\"grad_accum\": 1, "
               "\"checkpointing\": false, \"max_fit\": 5, \"min_fail\": 6}]}");
    fclose(f);
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    assert_int_equal(cache_load(&k, &sp), 0);
    assert_int_equal(sp.cells[0].seeds[0], -1);
    space_release(&sp);
    /* so is garbage */
    f = fopen(k.path, "w");
    fprintf(f, "not json");
    fclose(f);
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    assert_int_equal(cache_load(&k, &sp), 0);
    space_release(&sp);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    setenv("XDG_CACHE_HOME", dir, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_roundtrip),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd))
        rc = 1;
    return rc;
}
