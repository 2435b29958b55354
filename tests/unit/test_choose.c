/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for choose: the headroom rule, ties within 1% going to less
 * memory, the runner-up and its margin, fits above a confirmed failure,
 * no fits, the finalists measured again when noise could decide, and
 * each cell's answer with its contradictions.  Each fixture is one space
 * (grad_accum 1, checkpointing off, micro-batch 1..64) whose search sees
 * the same trials as the results, as in a run.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "control/choose.h"

struct fx {
    struct space sp;
    struct results res;
};

static void fx_init(struct fx *f)
{
    static long accum[] = { 1 };
    struct space_opts o = { .batch_min = 1, .batch_max = 64, .batch_step = 1,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1,
                            .world_size = 1 };
    char err[256], *argv[] = { "python3", "train.py", NULL };
    assert_int_equal(space_init(&f->sp, &o, err, sizeof err), 0);
    memset(&f->res, 0, sizeof f->res);
    assert_int_equal(results_init(&f->res, argv), 0);
}

static void fx_release(struct fx *f)
{
    space_release(&f->sp);
    results_release(&f->res);
}

/* One trial of micro-batch m: a fit at speed samples/s (<= 0: none
 * measured) with relative step-time spread (< 0: unknown) and peak bytes
 * (< 0: unknown), or an OOM.  Returns its index in the results. */
static long fx_trial(struct fx *f, long m, int fit, double speed, double spread, int64_t peak)
{
    struct results_trial t = {
        .id = (long)f->res.ntrials + 1, .micro_batch = m, .grad_accum = 1,
        .outcome = fit ? TRIAL_FIT : TRIAL_OOM, .exit_code = -1, .teardown_s = -1,
        .step_time_s = -1, .step_time_mad_s = -1, .samples_per_s = fit && speed > 0 ? speed : -1,
        .peak_mem_bytes = fit ? peak : -1, .probe_world = -1, .loader_batch = -1,
        .batches_per_step = -1, .peak_allocated_bytes = -1, .peak_vm_bytes = -1,
    };
    if (fit && speed > 0 && spread >= 0) {
        t.step_time_s = (double)m / speed;
        t.step_time_mad_s = spread * t.step_time_s;
    }
    assert_int_equal(results_add_trial(&f->res, &t), 0);
    struct search_obs o = { m, fit, fit ? (double)peak : -1, -1, 0, fit ? speed : 0, 0 };
    space_record(&f->sp, 0, &o);
    return (long)f->res.ntrials - 1;
}

/* --headroom leaves out a fit whose peak leaves less free; without it
 * that fit, the fastest, is chosen. */
static void test_headroom_excludes_a_fit_above_the_threshold(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    long small = fx_trial(&f, 8, 1, 100, 0.01, 500);
    long big = fx_trial(&f, 16, 1, 150, 0.01, 950);
    fx_trial(&f, 32, 0, 0, -1, -1);
    struct choose_notes notes;
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0, &notes), big);
    assert_int_equal(notes.headroom_unchecked, 0);
    /* 10% of 1000 bytes free: 950 needs more than 900 */
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0.10, &notes), small);
    assert_int_equal(f.res.runner_up, -1); /* the excluded fit is no runner-up either */
    assert_int_equal(notes.headroom_unchecked, 0);
    struct choose_excluded x;
    assert_int_equal(choose_excluded(&f.res, &f.sp, 1000, 0.10, &x), 1);
    assert_int_equal(x.top, big);
    assert_true(x.need == 950);
    /* 4% free: both fit under 960 */
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0.04, &notes), big);
    assert_int_equal(choose_excluded(&f.res, &f.sp, 1000, 0.04, &x), 0);
    /* capacity unknown: nothing can be excluded, and the caller is told */
    assert_int_equal(choose_best(&f.res, &f.sp, -1, 0.10, &notes), big);
    assert_int_equal(notes.headroom_unchecked, 1);
    fx_release(&f);
}

/* Two speeds within 1% are a tie, which goes to less memory; 2% apart
 * the faster wins. */
static void test_tie_within_one_percent_goes_to_less_memory(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    long small = fx_trial(&f, 8, 1, 100.0, 0.01, 400);
    long big = fx_trial(&f, 16, 1, 100.5, 0.01, 800);
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0, NULL), small);
    assert_int_equal(f.res.runner_up, big);
    f.res.best = small;
    struct choose_margin m;
    assert_int_equal(choose_margin(&f.res, &m), CHOOSE_TIE);
    assert_true(m.runner_speed == 100.5);
    fx_release(&f);

    fx_init(&f);
    fx_trial(&f, 8, 1, 100.0, 0.01, 400);
    big = fx_trial(&f, 16, 1, 102.0, 0.01, 800);
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0, NULL), big);
    fx_release(&f);

    /* without memory figures the tie goes to the smaller micro-batch */
    fx_init(&f);
    big = fx_trial(&f, 16, 1, 100.5, 0.01, -1);
    small = fx_trial(&f, 8, 1, 100.0, 0.01, -1);
    assert_int_equal(choose_best(&f.res, &f.sp, -1, 0, NULL), small);
    fx_release(&f);
}

/* The runner-up is the fastest other fit; the margin is the speed
 * ratio, told apart from the step-time spread. */
static void test_runner_up_and_margin(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    fx_trial(&f, 8, 1, 100, 0.02, 400);
    long best = fx_trial(&f, 16, 1, 150, 0.02, 600);
    long runner = fx_trial(&f, 32, 1, 120, 0.01, 900);
    fx_trial(&f, 64, 0, 0, -1, -1);
    f.res.best = choose_best(&f.res, &f.sp, 1000, 0, NULL);
    assert_int_equal(f.res.best, best);
    assert_int_equal(f.res.runner_up, runner);
    struct choose_margin m;
    assert_int_equal(choose_margin(&f.res, &m), CHOOSE_FASTER);
    assert_true(m.ratio == 1.25);
    assert_true(m.spread == 0.02);
    /* nothing noisy: no repeat */
    struct choose_repeat again = { -1, -1, -1, -1 };
    assert_int_equal(choose_repeat_noisy(&f.res, &f.sp, 1000, 0, &again), 0);
    assert_int_equal(again.best_micro, -1);
    assert_int_equal(f.sp.nreq, 0);
    fx_release(&f);

    /* step times that vary by 30%: a 25% margin is within noise, and
     * both finalists are measured again */
    fx_init(&f);
    best = fx_trial(&f, 16, 1, 150, 0.30, 600);
    runner = fx_trial(&f, 32, 1, 120, 0.05, 900);
    f.res.best = choose_best(&f.res, &f.sp, 1000, 0, NULL);
    assert_int_equal(f.res.runner_up, runner);
    assert_int_equal(choose_margin(&f.res, &m), CHOOSE_WITHIN_NOISE);
    assert_true(m.spread == 0.30);
    assert_int_equal(choose_repeat_noisy(&f.res, &f.sp, 1000, 0, &again), 2);
    assert_int_equal(again.best_micro, 16);
    assert_int_equal(again.runner_micro, 32);
    assert_true(again.margin > 0.2499 && again.margin < 0.2501);
    assert_true(again.spread == 0.30);
    assert_int_equal(f.sp.nreq, 2);
    assert_int_equal(f.sp.req[0].micro, 16);
    assert_int_equal(f.sp.req[1].micro, 32);
    fx_release(&f);

    /* spread unknown; a lone fit has no runner-up */
    fx_init(&f);
    fx_trial(&f, 16, 1, 150, -1, 600);
    fx_trial(&f, 32, 1, 120, -1, 900);
    f.res.best = choose_best(&f.res, &f.sp, 1000, 0, NULL);
    assert_int_equal(choose_margin(&f.res, &m), CHOOSE_FASTER_UNKNOWN_SPREAD);
    fx_release(&f);
    fx_init(&f);
    fx_trial(&f, 16, 1, 150, 0.01, 600);
    f.res.best = choose_best(&f.res, &f.sp, 1000, 0, NULL);
    assert_int_equal(f.res.runner_up, -1);
    assert_int_equal(choose_margin(&f.res, &m), CHOOSE_NO_MARGIN);
    fx_release(&f);
}

/* 32 fitted, then 16 failed twice: the smaller failure stands, and the
 * fastest fit, 32, lies above the boundary. */
static void test_fit_above_the_boundary_is_not_chosen(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    long safe = fx_trial(&f, 8, 1, 100, 0.01, 300);
    long above = fx_trial(&f, 32, 1, 200, 0.01, 700);
    fx_trial(&f, 16, 0, 0, -1, -1);
    fx_trial(&f, 16, 0, 0, -1, -1);
    assert_true(choose_above_boundary(&f.res.trials[above], &f.sp));
    assert_false(choose_above_boundary(&f.res.trials[safe], &f.sp));
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0, NULL), safe);
    assert_int_equal(f.res.runner_up, -1);

    choose_collect_cells(&f.sp, &f.res);
    assert_int_equal(f.res.ncells, 1);
    assert_int_equal(f.res.cells[0].max_fit, 8);
    assert_int_equal(f.res.cells[0].min_fail, 16);
    assert_int_equal(f.res.cells[0].trials, 4);
    assert_int_equal(f.res.ncontra, 1);
    assert_int_equal(f.res.contra[0].micro_batch, 16);
    assert_int_equal(f.res.contra[0].larger_fit, 32);
    assert_int_equal(f.res.contra[0].retest_fit, 0);
    fx_release(&f);
}

/* Nothing fitted, nothing ran, or every fit breaks the headroom: no
 * choice and no runner-up. */
static void test_no_fits_no_choice(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0.1, NULL), -1);
    fx_trial(&f, 1, 0, 0, -1, -1);
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0.1, NULL), -1);
    assert_int_equal(f.res.runner_up, -1);
    fx_release(&f);

    fx_init(&f);
    fx_trial(&f, 4, 1, 100, 0.01, 950);
    fx_trial(&f, 8, 1, 120, 0.01, 990);
    assert_int_equal(choose_best(&f.res, &f.sp, 1000, 0.10, NULL), -1);
    assert_int_equal(f.res.runner_up, -1);
    struct choose_excluded x;
    assert_int_equal(choose_excluded(&f.res, &f.sp, 1000, 0.10, &x), 2);
    assert_int_equal(f.res.trials[x.top].micro_batch, 8);
    fx_release(&f);
}

/* Without any speed: the largest fit; the capacity comes from the OOM
 * figures when there is no NVML. */
static void test_no_speeds_and_capacity(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    fx_trial(&f, 8, 1, 0, -1, -1);
    long big = fx_trial(&f, 24, 1, 0, -1, -1);
    fx_trial(&f, 16, 1, 0, -1, -1);
    assert_int_equal(choose_best(&f.res, &f.sp, -1, 0, NULL), big);
    assert_true(choose_capacity(NULL, &f.sp) < 0);
    struct search_obs o = { 32, 0, 2000, 4096, 0, 0, 0 };
    space_record(&f.sp, 0, &o);
    assert_true(choose_capacity(NULL, &f.sp) == 4096);
    fx_release(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headroom_excludes_a_fit_above_the_threshold),
        cmocka_unit_test(test_tie_within_one_percent_goes_to_less_memory),
        cmocka_unit_test(test_runner_up_and_margin),
        cmocka_unit_test(test_fit_above_the_boundary_is_not_chosen),
        cmocka_unit_test(test_no_fits_no_choice),
        cmocka_unit_test(test_no_speeds_and_capacity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
