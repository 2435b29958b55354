/* SPDX-License-Identifier: MIT */
/* Unit tests for inproc: the probe's lines, range checks, installing it. */
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

#include "inproc.h"

static int parse(const char *line, struct inproc_event *ev)
{
    return inproc_parse_line(line, strlen(line), ev);
}

static void test_step_line(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":4242,\"rank\":1,\"world\":2,\"step\":7,"
                           "\"t\":722.842295,\"res\":2147483648,\"alloc\":1073741824,\"held\":536870912,\"bs\":8,"
                           "\"blen\":8,\"nb\":4}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_STEP);
    assert_int_equal(ev.pid, 4242);
    assert_int_equal(ev.rank, 1);
    assert_int_equal(ev.world, 2);
    assert_int_equal(ev.step, 7);
    assert_true(ev.t > 722.84 && ev.t < 722.85);
    assert_int_equal(ev.reserved, 2147483648LL);
    assert_int_equal(ev.allocated, 1073741824LL);
    assert_int_equal(ev.held, 536870912LL);
    assert_int_equal(ev.batch_size, 8);
    assert_int_equal(ev.batch_len, 8);
    assert_int_equal(ev.batches, 4);
}

static void test_nulls_are_unknown(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":9,\"rank\":0,\"world\":1,\"step\":1,\"t\":1.5,"
                           "\"res\":null,\"alloc\":null,\"bs\":null,\"blen\":null,\"nb\":0}", &ev), 1);
    assert_int_equal(ev.reserved, -1);
    assert_int_equal(ev.held, -1); /* absent: an older probe */
    assert_int_equal(ev.allocated, -1);
    assert_int_equal(ev.batch_size, -1);
    assert_int_equal(ev.batches, 0);
}

static void test_torch_and_error_lines(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"torch\",\"pid\":12,\"rank\":0,\"version\":\"2.8.0+cu128\","
                           "\"hook\":\"global\"}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_TORCH);
    assert_string_equal(ev.text, "2.8.0+cu128");
    assert_string_equal(ev.hook, "global");
    assert_int_equal(parse("{\"ab\":\"error\",\"pid\":12,\"what\":\"DataLoader hooks: x\"}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_ERROR);
    assert_string_equal(ev.text, "DataLoader hooks: x");
}

/* A line that claims an absurd number is no event: nothing downstream is
 * ever sized by a number the child printed. */
static void test_out_of_range_rejected(void **state)
{
    (void)state;
    struct inproc_event ev;
    const char *bad[] = {
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":2305843009213693952,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":0,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":-3,\"world\":1,\"step\":1,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":-5}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":1,\"res\":1e300}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1.5,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":0,\"rank\":0,\"world\":1,\"step\":1,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":1,\"bs\":\"8\"}",
        "{\"ab\":\"nope\",\"pid\":1}",
        "{\"step\": 3}",
        "not json",
        "",
        "{\"ab\":\"step\",\"pid\":1,\"step\":1,\"t\":1,\"ab\":\"torch\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i], &ev), 0);
        assert_int_equal(ev.kind, INPROC_NONE);
    }
}

static void test_install_writes_the_probe(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/ab-inproc-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char dir[128], file[160], err[256];
    snprintf(dir, sizeof dir, "%s/probe", tmpl);
    assert_int_equal(inproc_install(dir, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/sitecustomize.py", dir);
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "AUTOBATCH_PROBE"));
    assert_non_null(strstr(buf, "register_optimizer_step_post_hook"));
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    unlink(file);
    rmdir(dir);
    /* A directory that cannot be made is an error with a reason. */
    snprintf(dir, sizeof dir, "%s/missing/probe", tmpl);
    assert_int_equal(inproc_install(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot make"));
    rmdir(tmpl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_line),
        cmocka_unit_test(test_nulls_are_unknown),
        cmocka_unit_test(test_torch_and_error_lines),
        cmocka_unit_test(test_out_of_range_rejected),
        cmocka_unit_test(test_install_writes_the_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
