/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for udiff: the hunks must be exactly what GNU `diff -u`
 * prints for the same two files (diffutils is essential on Debian).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/udiff.h"

static void write_file(const char *path, const char *s, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(s, 1, n, f), n);
    fclose(f);
}

/* Applying our diff with patch(1) must turn a into b. */
static void check_applies(const char *a, const char *b)
{
    char *mine = NULL;
    assert_int_equal(udiff(a, strlen(a), b, strlen(b), "a/x", "b/x", &mine), 0);
    char pa[] = "/tmp/ab-udiff-p-XXXXXX", pd[] = "/tmp/ab-udiff-d-XXXXXX",
         po[] = "/tmp/ab-udiff-o-XXXXXX";
    close(mkstemp(pa));
    close(mkstemp(pd));
    close(mkstemp(po));
    write_file(pa, a, strlen(a));
    write_file(pd, mine, strlen(mine));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "patch -s -o %s %s %s", po, pa, pd);
    if (*mine)
        assert_int_equal(system(cmd), 0);
    else
        assert_string_equal(a, b);
    FILE *f = fopen(*mine ? po : pa, "rb");
    char got[8192];
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
    assert_string_equal(got, b);
    unlink(pa);
    unlink(pd);
    unlink(po);
    free(mine);
}

/* GNU diff's output without its two header lines. */
static char *gnu_diff(const char *a, size_t an, const char *b, size_t bn)
{
    char pa[] = "/tmp/ab-udiff-a-XXXXXX", pb[] = "/tmp/ab-udiff-b-XXXXXX";
    close(mkstemp(pa));
    close(mkstemp(pb));
    write_file(pa, a, an);
    write_file(pb, b, bn);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "diff -u %s %s | tail -n +3", pa, pb);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    len = fread(buf, 1, cap - 1, p);
    buf[len] = '\0';
    pclose(p);
    unlink(pa);
    unlink(pb);
    return buf;
}

static void check(const char *a, const char *b)
{
    char *mine = NULL;
    assert_int_equal(udiff(a, strlen(a), b, strlen(b), "a/x", "b/x", &mine), 0);
    char *want = gnu_diff(a, strlen(a), b, strlen(b));
    const char *body = mine;
    if (*body) {
        assert_true(!strncmp(body, "--- a/x\n+++ b/x\n", 16));
        body += 16;
    }
    assert_string_equal(body, want);
    free(mine);
    free(want);
}

static void test_cases(void **state)
{
    (void)state;
    check("a\nb\nc\n", "a\nb\nc\n");
    check("a\nb\nc\n", "a\nB\nc\n");
    check("", "x\n");
    check("x\n", "");
    check("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n",
          "1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\nNINETEEN\n20\n");
    check("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\nthree\n4\n5\n6\n7\nnew\n8\n9\n10\n");
    check("a\nb\nc", "a\nb\nC");
    check("a\nb\nc", "a\nb\nc\n");
    check("k: 1\r\nv: 2\r\n", "k: 16\r\nv: 2\r\n");
    check("1\n2\n3\n4\n5\n6\n7\n", "0\n1\n2\n3\n4\n5\n6\n7\n8\n");
}

static void test_random_edits(void **state)
{
    (void)state;
    srand(7);
    for (int round = 0; round < 200; round++) {
        char a[4096] = "", b[4096] = "";
        int n = rand() % 40;
        for (int i = 0; i < n; i++) {
            char line[32];
            snprintf(line, sizeof line, "line %d\n", rand() % 12);
            strcat(a, line);
            int r = rand() % 10;
            if (r == 0)
                continue; /* deleted */
            if (r == 1)
                snprintf(line, sizeof line, "changed %d\n", rand() % 5);
            strcat(b, line);
            if (r == 2)
                strcat(b, "inserted\n");
        }
        check_applies(a, b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_random_edits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
