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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_load_set_save),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
