/* SPDX-License-Identifier: MIT */
/* Unit tests for cfile: format choice, loading errors, save refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfile.h"

static void test_format(void **state)
{
    (void)state;
    assert_int_equal(cfile_format_of("a.json", "x: 1", 4), CFILE_JSON);
    assert_int_equal(cfile_format_of("a.jsonc", "", 0), CFILE_JSON);
    assert_int_equal(cfile_format_of("a.yml", "{}", 2), CFILE_YAML);
    assert_int_equal(cfile_format_of("config", "\xEF\xBB\xBF \n {\"a\": 1}", 13), CFILE_JSON);
    assert_int_equal(cfile_format_of("config", "# c\na: 1\n", 9), CFILE_YAML);
}

static void test_load_set_save(void **state)
{
    (void)state;
    char dir[] = "/tmp/ab-cfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/t.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("train:\n  batch_size: 8  # per GPU\n", f);
    fclose(f);
    struct cfile c = CFILE_INIT;
    assert_int_equal(cfile_load(&c, path, err, sizeof err), 0);
    assert_false(cfile_changed(&c));
    assert_int_equal(cfile_set(&c, "train.batch_size", "16", err, sizeof err), CEDIT_OK);
    assert_true(cfile_changed(&c));
    /* a failed set leaves the bytes as they were */
    assert_int_not_equal(cfile_set(&c, "nope.deeper", "1", err, sizeof err), CEDIT_OK);
    assert_string_equal(c.cur, "train:\n  batch_size: 16  # per GPU\n");
    /* read-only: refused, file untouched */
    chmod(path, 0444);
    assert_int_equal(cfile_save(&c, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "read-only"));
    chmod(path, 0644);
    assert_int_equal(cfile_save(&c, path, err, sizeof err), 0);
    struct cfile d = CFILE_INIT;
    assert_int_equal(cfile_load(&d, path, err, sizeof err), 0);
    assert_string_equal(d.cur, c.cur);
    cfile_release(&d);
    cfile_release(&c);
    /* loading a directory or a missing file */
    assert_int_equal(cfile_load(&c, dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
    snprintf(path, sizeof path, "%s/missing.json", dir);
    assert_int_equal(cfile_load(&c, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "missing.json"));
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* The file as loaded at the start, edited in memory at train.batch_size
 * (8 -> 16); then someone else writes `now` to it.  What does a re-read
 * say? */
static enum cfile_drift drift_after(const char *now, struct cfile *fresh, const char **key,
                                    char *err, size_t errlen)
{
    char dir[] = "/tmp/ab-cfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/t.yaml", dir);
    put(path, "train:\n  batch_size: 8\n  accum: 2\nseed: 1\n");
    struct cfile c = CFILE_INIT;
    assert_int_equal(cfile_load(&c, path, err, errlen), 0);
    assert_int_equal(cfile_set(&c, "train.batch_size", "16", err, errlen), CEDIT_OK);
    assert_int_equal(cfile_set(&c, "train.accum", "2", err, errlen), CEDIT_OK);
    if (now)
        put(path, now);
    const char *keys[] = { "train.batch_size", "train.accum", NULL };
    enum cfile_drift d = cfile_reread(&c, path, keys, fresh, key, err, errlen);
    cfile_release(&c);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    return d;
}

static void test_reread(void **state)
{
    (void)state;
    char err[256];
    const char *key;
    struct cfile now = CFILE_INIT;
    /* untouched */
    assert_int_equal(drift_after(NULL, &now, &key, err, sizeof err), CFILE_SAME);
    assert_null(key);
    cfile_release(&now);
    /* another key changed, one added: the new bytes come back */
    assert_int_equal(drift_after("train:\n  batch_size: 8\n  accum: 2\nseed: 7\nlr: 1\n", &now,
                                 &key, err, sizeof err), CFILE_CHANGED);
    assert_null(key);
    assert_non_null(strstr(now.cur, "seed: 7"));
    cfile_release(&now);
    /* a key we set changed to what we set it to anyway: no conflict */
    assert_int_equal(drift_after("train:\n  batch_size: 16\n  accum: 2\nseed: 1\n", &now, &key,
                                 err, sizeof err), CFILE_CHANGED);
    cfile_release(&now);
    /* a key we set changed to something else */
    assert_int_equal(drift_after("train:\n  batch_size: 4\n  accum: 2\nseed: 1\n", &now, &key,
                                 err, sizeof err), CFILE_CONFLICT);
    assert_string_equal(key, "train.batch_size");
    assert_string_equal(err, "train.batch_size is now 4 (was 8)");
    cfile_release(&now);
    /* a key we only keep (accum stays 2) changed: that is a conflict too */
    assert_int_equal(drift_after("train:\n  batch_size: 8\n  accum: 4\nseed: 1\n", &now, &key,
                                 err, sizeof err), CFILE_CONFLICT);
    assert_string_equal(key, "train.accum");
    cfile_release(&now);
    /* a key removed */
    assert_int_equal(drift_after("train:\n  accum: 2\nseed: 1\n", &now, &key, err, sizeof err),
                     CFILE_CONFLICT);
    assert_string_equal(err, "train.batch_size is now (absent) (was 8)");
    cfile_release(&now);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_load_set_save),
        cmocka_unit_test(test_reread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
