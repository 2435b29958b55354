/* SPDX-License-Identifier: MIT */
/* Unit tests for sbuf: appends of every kind, growth, long formats,
 * the failure that frees, take and release. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sbuf.h"

static void test_appends(void **state)
{
    (void)state;
    struct sbuf b = SBUF_INIT;
    sb_puts(&b, "micro_batch");
    sb_putc(&b, '=');
    sb_printf(&b, "%d", 256);
    sb_put(&b, " grad_accum=2xyz", 13);
    sb_put(&b, NULL, 0);
    assert_false(b.oom);
    assert_int_equal(b.len, strlen("micro_batch=256 grad_accum=2"));
    assert_string_equal(b.p, "micro_batch=256 grad_accum=2");
    assert_true(b.cap > b.len);
    char *s = sb_take(&b);
    assert_string_equal(s, "micro_batch=256 grad_accum=2");
    /* take leaves the buffer empty and reusable */
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    sb_puts(&b, "again");
    assert_string_equal(b.p, "again");
    sb_release(&b);
    assert_null(b.p);
    assert_int_equal(b.cap, 0);
    free(s);
    sb_release(NULL);
}

static void test_empty_take_is_allocated(void **state)
{
    (void)state;
    struct sbuf b;
    sb_init(&b);
    char *s = sb_take(&b);
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
}

static void test_embedded_nul_and_growth(void **state)
{
    (void)state;
    struct sbuf b = SBUF_INIT;
    sb_put(&b, "a\0b", 3);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.p, "a\0b", 4);   /* and the NUL after them */
    /* Many doublings: every byte kept, in order. */
    for (int i = 0; i < 100000; i++)
        sb_putc(&b, (char)('a' + i % 26));
    assert_false(b.oom);
    assert_int_equal(b.len, 100003);
    assert_int_equal(b.p[3], 'a');
    assert_int_equal(b.p[3 + 99999], (char)('a' + 99999 % 26));
    assert_int_equal(b.p[b.len], '\0');
    sb_release(&b);
}

/* A format longer than the stack buffer (256) comes out whole: the
 * webhook's builder used to cut such pieces at 511 bytes. */
static void test_long_printf(void **state)
{
    (void)state;
    size_t n = 70000;
    char *big = malloc(n + 1);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++)
        big[i] = (char)('0' + i % 10);
    big[n] = '\0';
    struct sbuf b = SBUF_INIT;
    sb_puts(&b, "<");
    sb_printf(&b, "%s|%zu", big, n);
    sb_puts(&b, ">");
    assert_false(b.oom);
    char tail[32];
    snprintf(tail, sizeof tail, "|%zu>", n);
    assert_int_equal(b.len, 1 + n + strlen(tail));
    assert_memory_equal(b.p + 1, big, n);
    assert_string_equal(b.p + 1 + n, tail);
    /* exactly at the stack buffer's edges */
    for (size_t k = 254; k <= 258; k++) {
        struct sbuf e = SBUF_INIT;
        sb_printf(&e, "%.*s", (int)k, big);
        assert_int_equal(e.len, k);
        assert_memory_equal(e.p, big, k);
        sb_release(&e);
    }
    sb_release(&b);
    free(big);
}

/* A helper of the kind other modules write over sb_vprintf. */
static void __attribute__((format(printf, 2, 3))) logf_(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_puts(b, "[x] ");
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

static void test_vprintf(void **state)
{
    (void)state;
    struct sbuf b = SBUF_INIT;
    logf_(&b, "%s %d %.1f", "trial", 7, 2.25);
    assert_string_equal(b.p, "[x] trial 7 2.2");
    sb_release(&b);
}

/* Past SBUF_MAX an append fails like an allocation would: the buffer is
 * freed, oom set, later appends do nothing, take gives NULL.  (The
 * length is checked before any byte is read.) */
static void test_cap_fails_and_frees(void **state)
{
    (void)state;
    struct sbuf b = SBUF_INIT;
    sb_puts(&b, "kept so far");
    sb_put(&b, "x", SBUF_MAX);          /* would pass the cap by 11 bytes */
    assert_true(b.oom);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    sb_puts(&b, "ignored");
    sb_printf(&b, "%d", 1);
    sb_putc(&b, 'c');
    assert_true(b.oom);
    assert_null(b.p);
    assert_null(sb_take(&b));
    assert_false(b.oom);                /* take resets it */

    struct sbuf w = SBUF_INIT;
    sb_put(&w, "y", (size_t)-1);        /* len + n would wrap */
    assert_true(w.oom);
    sb_release(&w);
    assert_false(w.oom);
}

/* A builder may set oom itself (a piece it could not make): take then
 * frees what the buffer holds (ASan reports a leak otherwise). */
static void test_oom_set_by_caller(void **state)
{
    (void)state;
    struct sbuf b = SBUF_INIT;
    sb_puts(&b, "partial");
    b.oom = 1;
    assert_null(sb_take(&b));
    assert_null(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_appends),
        cmocka_unit_test(test_empty_take_is_allocated),
        cmocka_unit_test(test_embedded_nul_and_growth),
        cmocka_unit_test(test_long_printf),
        cmocka_unit_test(test_vprintf),
        cmocka_unit_test(test_cap_fails_and_frees),
        cmocka_unit_test(test_oom_set_by_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
