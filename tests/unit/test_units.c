/* SPDX-License-Identifier: MIT */
/* Unit tests for units: durations, sizes, counts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/units.h"

static void test_durations(void **state)
{
    (void)state;
    double s;
    assert_int_equal(units_duration("90s", &s), 0);
    assert_true(s == 90);
    assert_int_equal(units_duration("10m", &s), 0);
    assert_true(s == 600);
    assert_int_equal(units_duration("2h", &s), 0);
    assert_true(s == 7200);
    assert_int_equal(units_duration("1.5h", &s), 0);
    assert_true(s == 5400);
    assert_int_equal(units_duration("250ms", &s), 0);
    assert_true(s > 0.2499 && s < 0.2501);
    assert_int_equal(units_duration("45", &s), 0);
    assert_true(s == 45);
    const char *bad[] = { "", "s", "-5s", "5x", "5 s", " 5s", "1e3s", "0x10", "abc", "5sm", "inf" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(units_duration(bad[i], &s), -1);
}

static void test_sizes(void **state)
{
    (void)state;
    uint64_t b;
    assert_int_equal(units_size("512M", &b), 0);
    assert_true(b == 512ull << 20);
    assert_int_equal(units_size("2G", &b), 0);
    assert_true(b == 2ull << 30);
    assert_int_equal(units_size("1.5GiB", &b), 0);
    assert_true(b == 3ull << 29);
    assert_int_equal(units_size("4096", &b), 0);
    assert_true(b == 4096);
    assert_int_equal(units_size("2g", &b), 0);
    assert_true(b == 2ull << 30);
    assert_int_equal(units_size("-1G", &b), -1);
    assert_int_equal(units_size("1X", &b), -1);
    assert_int_equal(units_size("", &b), -1);
    assert_int_equal(units_size("99999999999T", &b), -1);
}

static void test_longs(void **state)
{
    (void)state;
    long v;
    assert_int_equal(units_long("42", 1, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(units_long("0", 1, 100, &v), -1);
    assert_int_equal(units_long("101", 1, 100, &v), -1);
    assert_int_equal(units_long("4x", 1, 100, &v), -1);
    assert_int_equal(units_long("", 1, 100, &v), -1);
    assert_int_equal(units_long(" 4", 1, 100, &v), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_longs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
