/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for space: global-batch arithmetic, cell order and skips,
 * inference between cells, measurements below the largest fit, seeds.
 * Trials are simulated: memory need(m, ckpt) = base + m * per(ckpt).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "search/space.h"

struct sim {
    double base, per_off, per_on, cap;
    /* step time t0 + t1 m, times slow above 90% of capacity; t1 0: no speeds */
    double t0, t1, slow;
    double ck_time;  /* a step with checkpointing takes this many times as long; 0: 1 */
    int trials;
    long ran[64][3]; /* micro, accum, ckpt */
    int memory_only[64]; /* space_memory_only said so: no speed was measured */
};

static double sim_speed(const struct sim *s, long m, int ckpt)
{
    if (s->t1 <= 0)
        return 0;
    double t = s->t0 + s->t1 * (double)m;
    if (s->base + (double)m * (ckpt ? s->per_on : s->per_off) > 0.9 * s->cap)
        t *= s->slow;
    if (ckpt && s->ck_time > 0)
        t *= s->ck_time;
    return (double)m / t;
}

static int sim_fits(const struct sim *s, long m, int ckpt)
{
    return s->base + (double)m * (ckpt ? s->per_on : s->per_off) <= s->cap;
}

static void sim_run(struct space *sp, struct sim *s, int with_memory)
{
    size_t ci;
    long m;
    while (space_next(sp, &ci, &m)) {
        const struct cell *c = &sp->cells[ci];
        assert_true(s->trials < 64);
        s->ran[s->trials][0] = m;
        s->ran[s->trials][1] = c->grad_accum;
        s->ran[s->trials][2] = c->checkpointing;
        /* A memory-only trial measures no speed (space_memory_only). */
        int mem_only = space_memory_only(sp, ci);
        s->memory_only[s->trials] = mem_only;
        s->trials++;
        double need = s->base + (double)m * (c->checkpointing ? s->per_on : s->per_off);
        int fit = sim_fits(s, m, c->checkpointing);
        struct search_obs o = { m, fit, with_memory ? need : -1, with_memory ? s->cap : -1, 0,
                                fit && !mem_only ? sim_speed(s, m, c->checkpointing) : 0, 0 };
        space_record(sp, ci, &o);
    }
}

static void test_global_batch_cells(void **state)
{
    (void)state;
    long accum[] = { 1, 2, 3, 4, 8 };
    struct space_opts o = { .batch_min = 1, .batch_max = 512, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 5, .ckpt_off = 1, .ckpt_on = 1,
                            .global_batch = 256, .world_size = 2, .use_model = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    /* 256 / (accum x 2): 128, 64, (not 3), 32, 16 -> 4 cells per ckpt setting */
    assert_int_equal(sp.ncells, 8);
    /* off before on, each by increasing micro-batch */
    long want[] = { 16, 32, 64, 128, 16, 32, 64, 128 };
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(sp.cells[i].fixed_micro, want[i]);
        assert_int_equal(sp.cells[i].checkpointing, i >= 4);
        assert_int_equal(sp.cells[i].fixed_micro * sp.cells[i].grad_accum * 2, 256);
    }
    /* fits up to 40 without checkpointing, 100 with */
    struct sim s = { .base = 0, .per_off = 1, .per_on = 0.4, .cap = 40 };
    sim_run(&sp, &s, 0);
    /* off: 16 fit, 32 fit, 64 fail, 128 skipped (inferred);
     * on: 16 and 32 skipped (fit without), 64 fits, 128 fails */
    assert_int_equal(s.trials, 5);
    long ran[][3] = { { 16, 8, 0 }, { 32, 4, 0 }, { 64, 2, 0 }, { 64, 2, 1 }, { 128, 1, 1 } };
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < 3; k++)
            assert_int_equal(s.ran[i][k], ran[i][k]);
    assert_int_equal(sp.cells[3].state, CELL_SKIPPED);
    assert_int_equal(sp.cells[4].state, CELL_SKIPPED);
    assert_non_null(strstr(sp.cells[4].skip_reason, "without checkpointing"));
    space_release(&sp);

    /* nothing divides: refused with the reason */
    o.global_batch = 7;
    assert_int_equal(space_init(&sp, &o, err, sizeof err), -1);
    assert_non_null(strstr(err, "whole micro-batch"));
}

static void test_free_mode_shares_the_boundary(void **state)
{
    (void)state;
    long accum[] = { 1, 2, 4 };
    struct space_opts o = { .batch_min = 1, .batch_max = 1024, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 3, .ckpt_off = 1,
                            .world_size = 1, .use_model = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 1000, .per_off = 37, .per_on = 10, .cap = 1000 + 37 * 300.5,
                     .t0 = 1, .t1 = 0.01, .slow = 1.3 };
    sim_run(&sp, &s, 1);
    for (size_t i = 0; i < sp.ncells; i++)
        assert_int_equal(search_max_fit(&sp.cells[i].search), 300);
    /* Steps slow down above 90% of capacity: from 268 on.  The first
     * cell finds the knee within 4%, in at most 4 throughput points. */
    long best = -1;
    for (int i = 0; i < s.trials; i++) {
        long m = s.ran[i][0];
        if (s.ran[i][1] == 1 && m <= 300 &&
            (best < 0 || sim_speed(&s, m, 0) > sim_speed(&s, best, 0)))
            best = m;
    }
    assert_true(best <= 267 && best >= 257);
    assert_true(sp.cells[0].extra <= 4);
    /* the other accumulation cells each ran only the largest fit and the
     * first cell's fastest size */
    int per_cell[3] = { 0 }, saw_best[3] = { 0 };
    for (int i = 0; i < s.trials; i++) {
        int k = s.ran[i][1] == 1 ? 0 : s.ran[i][1] == 2 ? 1 : 2;
        per_cell[k]++;
        saw_best[k] |= s.ran[i][0] == best;
    }
    assert_true(per_cell[1] <= 2 && per_cell[2] <= 2);
    assert_true(saw_best[1] && saw_best[2]);
    space_release(&sp);
}

/* Without a slowdown the largest fit is the fastest: one point for the
 * step-time line, no knee search. */
static void test_no_knee_no_search(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 1024, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1,
                            .world_size = 1, .use_model = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 1000, .per_off = 37, .cap = 1000 + 37 * 300.5, .t0 = 1, .t1 = 0.01,
                     .slow = 1 };
    sim_run(&sp, &s, 1);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 300);
    assert_true(sp.cells[0].extra <= 1);
    space_release(&sp);
}

static void test_checkpointing_only_where_needed(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 4096, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1, .ckpt_on = 1,
                            .world_size = 1, .use_model = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 0, .per_off = 1, .per_on = 0.25, .cap = 100 };
    sim_run(&sp, &s, 0);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 100);
    assert_int_equal(search_max_fit(&sp.cells[1].search), 400);
    /* no checkpointing trial at a size that fits without it */
    for (int i = 0; i < s.trials; i++)
        if (s.ran[i][2])
            assert_true(s.ran[i][0] > 100);
    space_release(&sp);
}

/* Without memory figures (no NVML) the cell with checkpointing opens at
 * twice the max-fit without it, not in the middle of its range: there
 * one trial's speed, by the step-time line, shows it cannot beat the
 * fastest point measured, and it is pruned after that one trial.  (From
 * the middle it failed and bisected down first.) */
static void test_checkpointing_pruned_after_one_trial(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 512, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1, .ckpt_on = 1,
                            .world_size = 1, .use_model = 1, .open_mid = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    /* Boundaries 40 and 133; steps nearly proportional to the batch, so
     * speed saturates, and checkpointing costs 30% more per step. */
    struct sim s = { .base = 0, .per_off = 1, .per_on = 0.3, .cap = 40.5, .t0 = 0.05,
                     .t1 = 0.01, .slow = 1, .ck_time = 1.3 };
    sim_run(&sp, &s, 0);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 40);
    int ck = 0, first = -1;
    for (int i = 0; i < s.trials; i++)
        if (s.ran[i][2]) {
            if (first < 0)
                first = i;
            ck++;
        }
    assert_int_equal(ck, 1);
    assert_int_equal(s.ran[first][0], 80);
    assert_true(sp.cells[1].pruned);
    space_release(&sp);
}

/* Memory-only boundary trials (issue 27 item 1): the same job as above.
 * Every trial of the boundary search measures memory alone; the max-fit
 * is then measured in full, with the step-time line's points; the cell
 * with checkpointing opens with a full trial (its speed prunes it) and
 * is still pruned after that one trial. */
static void test_memory_only_boundary_trials(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 512, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1, .ckpt_on = 1,
                            .world_size = 1, .use_model = 1, .open_mid = 1, .memory_only = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 0, .per_off = 1, .per_on = 0.3, .cap = 40.5, .t0 = 0.05,
                     .t1 = 0.01, .slow = 1, .ck_time = 1.3 };
    sim_run(&sp, &s, 0);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 40);
    int first_full = -1, ran40_full = 0, ck = 0, mem = 0;
    for (int i = 0; i < s.trials; i++) {
        mem += s.memory_only[i];
        if (!s.memory_only[i] && first_full < 0)
            first_full = i;
        if (s.ran[i][2] == 0 && s.ran[i][0] == 40 && !s.memory_only[i])
            ran40_full = 1;
        if (s.ran[i][2]) {
            ck++;
            assert_false(s.memory_only[i]); /* its one trial measures a speed */
        }
    }
    /* bisection of 1..512 from the middle: at least 9 memory-only trials,
     * all before the first full one */
    assert_true(mem >= 9);
    assert_int_equal(first_full, mem);
    assert_true(ran40_full);
    assert_int_equal(space_fastest(&sp.cells[0]), 40);
    assert_int_equal(ck, 1);
    assert_true(sp.cells[1].pruned);
    space_release(&sp);

    /* Without the option every trial is full. */
    o.memory_only = 0;
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s2 = s;
    s2.trials = 0;
    sim_run(&sp, &s2, 0);
    for (int i = 0; i < s2.trials; i++)
        assert_false(s2.memory_only[i]);
    space_release(&sp);
}

/* A knee found from full trials only: steps slow above 90% of capacity,
 * the memory-only search gives no speeds, and the points (the max-fit,
 * half and a quarter of it, then the knee's bisection) find a size below
 * the slowed max-fit that is faster. */
static void test_memory_only_knee(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 1024, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1,
                            .world_size = 1, .use_model = 1, .memory_only = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 1000, .per_off = 37, .cap = 1000 + 37 * 300.5, .t0 = 1, .t1 = 0.01,
                     .slow = 1.5 };
    sim_run(&sp, &s, 1);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 300);
    long fastest = space_fastest(&sp.cells[0]);
    assert_true(fastest > 0 && fastest < 300);
    /* the fastest size was measured in a full trial, never memory-only */
    int full = 0;
    for (int i = 0; i < s.trials; i++)
        if (s.ran[i][0] == fastest && !s.memory_only[i])
            full = 1;
    assert_true(full);
    space_release(&sp);
}

/* The same where checkpointing does win (steps cost a fixed time, so
 * larger batches are much faster): the cell is not pruned, its boundary
 * is exact. */
static void test_checkpointing_searched_when_it_can_win(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 512, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1, .ckpt_on = 1,
                            .world_size = 1, .use_model = 1, .open_mid = 1 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    struct sim s = { .base = 0, .per_off = 1, .per_on = 0.3, .cap = 40.5, .t0 = 1, .t1 = 0.001,
                     .slow = 1, .ck_time = 1.3 };
    sim_run(&sp, &s, 0);
    assert_false(sp.cells[1].pruned);
    assert_int_equal(search_max_fit(&sp.cells[1].search), 135);
    space_release(&sp);
}

static void test_seeds_confirm_in_two_trials(void **state)
{
    (void)state;
    long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 4096, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1,
                            .global_batch = 0, .world_size = 1, .use_model = 0 };
    struct space sp;
    char err[256];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    space_seed(&sp, 1, 0, 1234, 1235);
    struct sim s = { .base = 0, .per_off = 1, .cap = 1234 };
    sim_run(&sp, &s, 0);
    /* 1234 fits, 1235 fails; no speeds, so no throughput points */
    assert_int_equal(s.ran[0][0], 1234);
    assert_int_equal(s.ran[1][0], 1235);
    assert_int_equal(s.trials, 2);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 1234);
    space_release(&sp);

    /* a stale seed costs its two trials and the search goes on */
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    space_seed(&sp, 1, 0, 1234, 1235);
    struct sim t = { .base = 0, .per_off = 1, .cap = 700 };
    sim_run(&sp, &t, 0);
    assert_int_equal(search_max_fit(&sp.cells[0].search), 700);
    space_release(&sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_batch_cells),
        cmocka_unit_test(test_free_mode_shares_the_boundary),
        cmocka_unit_test(test_no_knee_no_search),
        cmocka_unit_test(test_checkpointing_only_where_needed),
        cmocka_unit_test(test_seeds_confirm_in_two_trials),
        cmocka_unit_test(test_checkpointing_pruned_after_one_trial),
        cmocka_unit_test(test_checkpointing_searched_when_it_can_win),
        cmocka_unit_test(test_memory_only_boundary_trials),
        cmocka_unit_test(test_memory_only_knee),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
