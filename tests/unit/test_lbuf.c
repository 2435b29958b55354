/* SPDX-License-Identifier: MIT */
/* Unit tests for lbuf: line ends, caps, huge lines. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "trial/lbuf.h"

struct got {
    char lines[16][128];
    int trunc[16];
    int super[16];
    size_t lens[16];
    int n;
};

static void collect(void *ctx, const char *line, size_t len, int truncated)
{
    struct got *g = ctx;
    assert_true(g->n < 16);
    size_t k = len < 127 ? len : 127;
    memcpy(g->lines[g->n], line, k);
    g->lines[g->n][k] = '\0';
    g->lens[g->n] = len;
    g->trunc[g->n] = truncated & LBUF_TRUNCATED;
    g->super[g->n] = !!(truncated & LBUF_SUPERSEDED);
    g->n++;
}

/* A bar redraw followed, in the same chunk, by the next redraw of the
 * same bar is flagged superseded; a redraw of another bar, a redraw the
 * chunk ends on, or one followed by a newline line is not. */
static void test_superseded_redraws(void **state)
{
    (void)state;
    struct got g = { 0 };
    struct lbuf b = LBUF_INIT(1024);
    const char *in = "Epoch 0:  10%| 1/10\rEpoch 0:  20%| 2/10\rEval:  5%| 1/20\r"
                     "Epoch 0:  30%| 3/10\r{'loss': 1.0}\nEpoch 0:  40%| 4/10\r";
    lbuf_feed(&b, in, strlen(in), collect, &g);
    assert_int_equal(g.n, 6);
    assert_string_equal(g.lines[0], "Epoch 0:  10%| 1/10");
    assert_int_equal(g.super[0], 1); /* the next line redraws it */
    assert_int_equal(g.super[1], 0); /* another bar follows */
    assert_int_equal(g.super[2], 0);
    assert_int_equal(g.super[3], 0); /* a newline line follows */
    assert_int_equal(g.super[4], 0);
    assert_int_equal(g.super[5], 0); /* the chunk ends on it */
    /* Across chunks nothing is superseded: the next read may never come. */
    struct got h = { 0 };
    lbuf_feed(&b, "Epoch 0:  50%| 5/10\r", 20, collect, &h);
    lbuf_feed(&b, "Epoch 0:  60%| 6/10\r", 20, collect, &h);
    assert_int_equal(h.n, 2);
    assert_int_equal(h.super[0] + h.super[1], 0);
    lbuf_release(&b);
}

static void test_newline_and_cr(void **state)
{
    (void)state;
    struct got g = { 0 };
    struct lbuf b = LBUF_INIT(1024);
    const char *in = "one\ntwo\r\n 10%|#| 1/10\r 20%|#| 2/10\rlast";
    lbuf_feed(&b, in, strlen(in), collect, &g);
    assert_int_equal(g.n, 4);
    assert_string_equal(g.lines[0], "one");
    assert_string_equal(g.lines[1], "two");
    assert_string_equal(g.lines[2], " 10%|#| 1/10");
    assert_string_equal(g.lines[3], " 20%|#| 2/10");
    lbuf_finish(&b, collect, &g);
    assert_int_equal(g.n, 5);
    assert_string_equal(g.lines[4], "last");
    lbuf_release(&b);
}

static void test_split_across_chunks(void **state)
{
    (void)state;
    struct got g = { 0 };
    struct lbuf b = LBUF_INIT(1024);
    const char *in = "CUDA out of memory. Tried to allocate 2 GiB\nnext\n";
    for (size_t i = 0; i < strlen(in); i++)
        lbuf_feed(&b, in + i, 1, collect, &g);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.lines[0], "CUDA out of memory. Tried to allocate 2 GiB");
    assert_string_equal(g.lines[1], "next");
    lbuf_release(&b);
}

static void test_cap_truncates_and_skips(void **state)
{
    (void)state;
    struct got g = { 0 };
    struct lbuf b = LBUF_INIT(8);
    const char *in = "abcdefghijklmnop\nxy\n";
    lbuf_feed(&b, in, strlen(in), collect, &g);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.lens[0], 8);
    assert_string_equal(g.lines[0], "abcdefgh");
    assert_int_equal(g.trunc[0], 1);
    assert_string_equal(g.lines[1], "xy");
    assert_int_equal(g.trunc[1], 0);
    assert_true(b.alloc <= 8);
    lbuf_release(&b);
}

static void test_huge_line_bounded_memory(void **state)
{
    (void)state;
    /* 100 MB in 1 MB chunks, no line end: memory stays at the cap. */
    struct got g = { 0 };
    struct lbuf b = LBUF_INIT(64 * 1024);
    char *chunk = malloc(1 << 20);
    assert_non_null(chunk);
    memset(chunk, 'x', 1 << 20);
    for (int i = 0; i < 100; i++)
        lbuf_feed(&b, chunk, 1 << 20, collect, &g);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.lens[0], 64 * 1024);
    assert_true(b.alloc <= 64 * 1024);
    lbuf_feed(&b, "\nok\n", 4, collect, &g);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.lines[1], "ok");
    free(chunk);
    lbuf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_newline_and_cr),
        cmocka_unit_test(test_superseded_redraws),
        cmocka_unit_test(test_split_across_chunks),
        cmocka_unit_test(test_cap_truncates_and_skips),
        cmocka_unit_test(test_huge_line_bounded_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
