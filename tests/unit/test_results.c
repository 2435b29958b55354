/* SPDX-License-Identifier: MIT */
/* Unit tests for results: the schema of DESIGN.md 2.5, nulls, frontier. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/results.h"

static void fill(struct results *r)
{
    char *argv[] = { "accelerate", "launch", "train.py", NULL };
    assert_int_equal(results_init(r, argv), 0);
    r->batch_min = 1;
    r->batch_max = 512;
    r->batch_step = 1;
    r->grad_accum = malloc(sizeof *r->grad_accum);
    r->grad_accum[0] = 1;
    r->ngrad_accum = 1;
    r->ckpt_off = 1;
    struct results_trial t = { .grad_accum = 1, .exit_code = -1, .teardown_s = -1,
                               .step_time_s = -1, .samples_per_s = -1, .peak_mem_bytes = -1 };
    /* 8 fits at 100/s, 16 fits at 180/s, 32 OOMs, 24 fits at 170/s (slower
     * than 16 and bigger: dominated). */
    long mb[] = { 8, 16, 32, 24 };
    double sps[] = { 100, 180, -1, 170 };
    for (int i = 0; i < 4; i++) {
        t.id = i + 1;
        t.micro_batch = mb[i];
        t.outcome = sps[i] < 0 ? TRIAL_OOM : TRIAL_FIT;
        t.samples_per_s = sps[i];
        t.exit_code = sps[i] < 0 ? 1 : -1;
        t.signal = sps[i] < 0 ? 0 : 15;
        t.evidence = sps[i] < 0 ? "torch.OutOfMemoryError: CUDA out of memory." : NULL;
        t.signature = sps[i] < 0 ? "torch-cuda-current" : NULL;
        assert_int_equal(results_add_trial(r, &t), 0);
    }
    struct results_cell c = { .grad_accum = 1, .max_fit = 24, .min_fail = 32 };
    assert_int_equal(results_add_cell(r, &c), 0);
    r->best = 3;
    r->exit_status = 0;
    r->wall_s = 12.5;
}

static void test_schema(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    json_t *j = results_to_json(&r);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "autobatch.results/1");
    assert_int_equal(json_array_size(json_object_get(j, "command")), 3);
    const char *when = json_string_value(json_object_get(j, "started_at"));
    assert_non_null(when);
    assert_int_equal(strlen(when), 20);
    assert_int_equal(when[19], 'Z');
    json_t *host = json_object_get(j, "host");
    assert_true(json_is_string(json_object_get(host, "hostname")));
    assert_true(json_is_array(json_object_get(host, "gpus")));
    json_t *space = json_object_get(j, "space");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(space, "batch"), "max")), 512);
    assert_true(json_is_null(json_object_get(space, "global_batch")));
    assert_true(json_is_false(json_array_get(json_object_get(space, "checkpointing"), 0)));
    json_t *trials = json_object_get(j, "trials");
    assert_int_equal(json_array_size(trials), 4);
    json_t *t3 = json_array_get(trials, 2);
    const char *keys[] = { "id", "micro_batch", "grad_accum", "checkpointing", "outcome",
                           "exit_code", "signal", "wall_s", "steps_measured", "samples_per_s",
                           "peak_mem_bytes", "evidence" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        assert_non_null(json_object_get(t3, keys[i]));
    assert_string_equal(json_string_value(json_object_get(t3, "outcome")), "oom");
    assert_true(json_is_null(json_object_get(t3, "samples_per_s")));
    assert_true(json_is_null(json_object_get(t3, "peak_mem_bytes")));
    assert_true(json_is_null(json_object_get(t3, "signal")));
    assert_int_equal(json_integer_value(json_object_get(t3, "exit_code")), 1);
    json_t *t1 = json_array_get(trials, 0);
    assert_true(json_is_null(json_object_get(t1, "evidence")));
    assert_true(json_is_null(json_object_get(t1, "exit_code")));
    json_t *mf = json_array_get(json_object_get(j, "max_fit"), 0);
    assert_int_equal(json_integer_value(json_object_get(mf, "micro_batch")), 24);
    assert_null(json_object_get(mf, "bounded_by"));
    json_t *best = json_object_get(j, "best");
    assert_int_equal(json_integer_value(json_object_get(best, "micro_batch")), 24);
    json_t *sum = json_object_get(j, "summary");
    assert_int_equal(json_integer_value(json_object_get(sum, "trials")), 4);
    assert_int_equal(json_integer_value(json_object_get(sum, "exit")), 0);
    json_decref(j);
    results_release(&r);
}

static void test_frontier(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    long idx[8];
    size_t n = results_frontier(&r, idx);
    /* 8 (least memory) and 16 (fastest); 24 is dominated by 16. */
    assert_int_equal(n, 2);
    assert_int_equal(r.trials[idx[0]].micro_batch, 8);
    assert_int_equal(r.trials[idx[1]].micro_batch, 16);
    results_release(&r);
}

static void test_bounded_and_write(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    r.cells[0].bounded_by = "batch.max";
    char path[] = "/tmp/ab-results-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char err[256];
    assert_int_equal(results_write(&r, path, err, sizeof err), 0);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    unlink(path);
    assert_non_null(j);
    json_t *mf = json_array_get(json_object_get(j, "max_fit"), 0);
    assert_true(json_is_null(json_object_get(mf, "micro_batch")));
    assert_string_equal(json_string_value(json_object_get(mf, "bounded_by")), "batch.max");
    json_decref(j);
    results_release(&r);
}

/* The capacity, warm start and settings: unknown is null, never a number. */
static void test_capacity_warm_settings(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    json_t *j = results_to_json(&r);
    json_t *cap = json_object_get(j, "capacity"), *warm = json_object_get(j, "warm_start");
    assert_true(json_is_null(json_object_get(cap, "bytes")));
    assert_true(json_is_null(json_object_get(cap, "source")));
    assert_true(json_is_null(json_object_get(cap, "usable_bytes")));
    assert_true(json_is_null(json_object_get(cap, "headroom_checked")));
    assert_true(json_is_null(json_object_get(cap, "excluded")));
    assert_true(json_is_false(json_object_get(warm, "used")));
    assert_true(json_is_null(json_object_get(warm, "cache_key")));
    assert_true(json_is_null(json_object_get(warm, "trials_saved")));
    assert_true(json_is_null(json_object_get(j, "settings")));
    assert_null(json_object_get(json_array_get(json_object_get(j, "max_fit"), 0), "memory_model"));
    json_decref(j);

    r.capacity = 24.0 * (1 << 30);
    r.capacity_source = "oom-message";
    r.headroom = 0.25;
    r.headroom_checked = 1;
    r.excluded = 3;
    r.warm_start = 1;
    r.warm_cells = 2;
    r.cache_key = "0123456789abcdef";
    r.cells[0].has_model = 1;
    r.cells[0].model_base = 4.0 * (1 << 30);
    r.cells[0].model_slope = 256.0 * (1 << 20);
    r.settings = (struct results_settings){ .known = 1, .steps = 5, .warmup = 2, .confirm = 1,
                                            .confirm_steps = 20, .worst_case = "auto", .cache = 1,
                                            .trial_timeout_s = 1200, .trial_mem_limit = 2ULL << 30 };
    j = results_to_json(&r);
    cap = json_object_get(j, "capacity");
    warm = json_object_get(j, "warm_start");
    json_t *st = json_object_get(j, "settings"), *mm;
    assert_int_equal(json_integer_value(json_object_get(cap, "bytes")), 24LL << 30);
    assert_string_equal(json_string_value(json_object_get(cap, "source")), "oom-message");
    assert_int_equal(json_integer_value(json_object_get(cap, "usable_bytes")), 18LL << 30);
    assert_true(json_is_true(json_object_get(cap, "headroom_checked")));
    assert_int_equal(json_integer_value(json_object_get(cap, "excluded")), 3);
    assert_int_equal(json_integer_value(json_object_get(cap, "trial_memory_limit_bytes")), 2LL << 30);
    assert_true(json_is_true(json_object_get(warm, "used")));
    assert_int_equal(json_integer_value(json_object_get(warm, "cells_seeded")), 2);
    assert_string_equal(json_string_value(json_object_get(warm, "cache_key")), "0123456789abcdef");
    assert_int_equal(json_integer_value(json_object_get(st, "steps")), 5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(st, "confirm"), "steps")), 20);
    assert_true(json_is_null(json_object_get(json_object_get(st, "confirm"), "time_s")));
    assert_true(json_is_null(json_object_get(st, "budget_s")));
    assert_true(json_is_null(json_object_get(st, "gpus")));
    assert_true(json_number_value(json_object_get(st, "trial_timeout_s")) == 1200);
    mm = json_object_get(json_array_get(json_object_get(j, "max_fit"), 0), "memory_model");
    assert_true(json_number_value(json_object_get(mm, "bytes_per_unit")) == 256.0 * (1 << 20));
    json_decref(j);
    /* --no-confirm */
    r.settings.confirm = 0;
    j = results_to_json(&r);
    assert_true(json_is_false(json_object_get(json_object_get(j, "settings"), "confirm")));
    json_decref(j);
    results_release(&r);
}

static long long jint(const json_t *o, const char *k)
{
    const json_t *v = json_object_get(o, k);
    assert_true(json_is_integer(v));
    return (long long)json_integer_value(v);
}

/* Where the memory goes: the CUDA parts follow from the allocator's
 * figures of the same step; CPU ones are null, not made up; the top
 * level names the smallest fit and the choice, with shares of the
 * capacity. */
static void test_memory_breakdown(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    json_t *j = results_to_json(&r);
    json_t *mb = json_object_get(j, "memory_breakdown");
    assert_true(json_is_null(json_object_get(mb, "smallest")));
    assert_true(json_is_null(json_object_get(mb, "choice")));
    assert_true(json_is_null(json_object_get(json_array_get(json_object_get(j, "trials"), 0),
                                             "memory_breakdown")));
    json_decref(j);

    /* 16 (trial 2, index 1) on CUDA; 24 (the choice, index 3) and 8 on the CPU. */
    r.trials[1].mem = (struct inproc_mem){ "cuda", 0, 2, 100 << 20, 100 << 20, 200 << 20,
                                           1LL << 30, 1280LL << 20, 402 << 20, 500 << 20, 0, 0, 0, "" };
    r.trials[3].mem = (struct inproc_mem){ "cpu", 0, 2, 4096, 4096, 8192 + 268, -1, -1, -1, -1, 0, 0, 0, "" };
    r.trials[0].mem = r.trials[3].mem;
    r.trials[0].mem.step = 3;
    r.capacity = 16.0 * (1 << 30);
    j = results_to_json(&r);
    json_t *t2 = json_object_get(json_array_get(json_object_get(j, "trials"), 1), "memory_breakdown");
    assert_string_equal(json_string_value(json_object_get(t2, "device")), "cuda");
    assert_int_equal(jint(t2, "params"), 100 << 20);
    assert_int_equal(jint(t2, "optimizer"), 200 << 20);
    assert_int_equal(jint(t2, "activations"), (1LL << 30) - (400 << 20));
    assert_int_equal(jint(t2, "cache"), 256 << 20);
    assert_int_equal(jint(t2, "outside"), 500 << 20);
    assert_int_equal(jint(t2, "peak"), (1280LL + 500) << 20);
    assert_int_equal(jint(t2, "held"), 402 << 20);
    json_t *t4 = json_object_get(json_array_get(json_object_get(j, "trials"), 3), "memory_breakdown");
    assert_int_equal(jint(t4, "optimizer"), 8192 + 268);
    assert_true(json_is_null(json_object_get(t4, "activations")));
    assert_true(json_is_null(json_object_get(t4, "cache")));
    assert_true(json_is_null(json_object_get(t4, "peak")));

    mb = json_object_get(j, "memory_breakdown");
    assert_int_equal(jint(mb, "capacity_bytes"), 16LL << 30);
    json_t *sm = json_object_get(mb, "smallest"), *ch = json_object_get(mb, "choice");
    assert_int_equal(jint(sm, "trial"), 1);
    assert_int_equal(jint(sm, "micro_batch"), 8);
    assert_int_equal(jint(json_object_get(sm, "parts"), "step"), 3);
    assert_int_equal(jint(ch, "trial"), 4);
    assert_int_equal(jint(ch, "micro_batch"), 24);
    assert_string_equal(json_string_value(json_object_get(ch, "device")), "cpu");
    json_t *share = json_object_get(ch, "share");
    assert_true(json_real_value(json_object_get(share, "params")) == 4096.0 / (16.0 * (1 << 30)));
    assert_true(json_is_null(json_object_get(share, "activations")));
    json_decref(j);

    /* An activation figure never goes below 0 (the probe's counts and the
     * allocator's can disagree by rounding), and a choice without a
     * breakdown borrows one of its configuration's; an OOM has none to
     * give, and with no capacity the shares are null. */
    r.trials[1].mem.peak_alloc = 300 << 20;
    r.trials[1].mem.peak_res = 200 << 20;
    r.trials[3].mem.device[0] = '\0';
    r.capacity = -1;
    j = results_to_json(&r);
    t2 = json_object_get(json_array_get(json_object_get(j, "trials"), 1), "memory_breakdown");
    assert_int_equal(jint(t2, "activations"), 0);
    assert_int_equal(jint(t2, "cache"), 0);
    mb = json_object_get(j, "memory_breakdown");
    assert_true(json_is_null(json_object_get(mb, "choice")));
    assert_true(json_is_null(json_object_get(mb, "capacity_bytes")));
    assert_true(json_is_null(json_object_get(json_object_get(json_object_get(mb, "smallest"), "share"),
                                             "params")));
    json_decref(j);
    struct results_trial again = r.trials[3];
    again.id = 5;
    again.mem = r.trials[1].mem;
    again.evidence = again.signature = NULL;
    assert_int_equal(results_add_trial(&r, &again), 0);
    assert_int_equal(results_mem_choice(&r), 4);
    r.trials[4].outcome = TRIAL_OOM;
    assert_int_equal(results_mem_choice(&r), -1);
    results_release(&r);
}

/* Batch is not the problem: when nothing fits, the smallest size that
 * ran out with the probe's breakdown at its failure says what the
 * weights, gradients and optimizer's state take before any activation,
 * against the capacity; checkpointing is suggested only where the rest
 * leaves room and it was not tried. */
static void test_nofit(void **state)
{
    (void)state;
    struct results r = RESULTS_INIT;
    fill(&r);
    struct results_nofit f;
    /* Fits exist: no such entry, even with a failure's breakdown. */
    r.trials[2].mem = (struct inproc_mem){ "cpu", 0, 0, 1000, 300, 0, -1, -1, -1, -1,
                                           1, 1000, 2016, "AdamW" };
    assert_int_equal(results_mem_failure(&r), -1);
    assert_int_equal(results_nofit_split(&r, &f), 0);
    json_t *j = results_to_json(&r);
    assert_true(json_is_null(json_object_get(json_object_get(j, "memory_breakdown"), "failure")));
    json_t *t3 = json_object_get(json_array_get(json_object_get(j, "trials"), 2), "memory_breakdown");
    assert_string_equal(json_string_value(json_object_get(t3, "at")), "failure");
    assert_int_equal(jint(t3, "optimizer_expected"), 2016);
    assert_int_equal(jint(t3, "grads_expected"), 1000);
    assert_string_equal(json_string_value(json_object_get(t3, "optimizer_class")), "AdamW");
    json_decref(j);

    /* Nothing fits: 8 and 32 ran out (8 with the breakdown, 32 without). */
    for (size_t i = 0; i < r.ntrials; i++)
        r.trials[i].outcome = TRIAL_OOM;
    r.best = -1;
    r.trials[0].mem = r.trials[2].mem;
    r.trials[2].mem.device[0] = '\0';
    r.capacity = 2500;
    assert_int_equal(results_mem_failure(&r), 0);
    assert_int_equal(results_nofit_split(&r, &f), 1);
    assert_true(f.params == 1000 && f.grads == 1000 && f.grads_now == 300 && f.optim == 2016 &&
                f.optim_now == 0 && f.total == 4016 && f.capacity == 2500 && f.exceeds == 1);
    assert_int_equal(f.nsuggest, 3); /* no checkpointing: it saves activations only */
    assert_string_equal(f.suggest[0], "mixed_precision");
    assert_string_equal(f.suggest[1], "8bit_optimizer");
    assert_string_equal(f.suggest[2], "sharding");
    j = results_to_json(&r);
    json_t *fj = json_object_get(json_object_get(j, "memory_breakdown"), "failure");
    assert_int_equal(jint(fj, "trial"), 1);
    assert_int_equal(jint(fj, "micro_batch"), 8);
    assert_int_equal(jint(fj, "before_activations"), 4016);
    assert_int_equal(jint(fj, "batch_min"), 1);
    assert_int_equal(jint(fj, "capacity_bytes"), 2500);
    assert_int_equal(jint(fj, "grads_allocated"), 300);
    assert_int_equal(jint(fj, "optimizer_allocated"), 0);
    assert_true(json_is_true(json_object_get(fj, "exceeds_capacity")));
    assert_true(json_is_false(json_object_get(fj, "checkpointing_tried")));
    assert_int_equal(json_array_size(json_object_get(fj, "suggestions")), 3);
    json_decref(j);

    /* Room left for activations and no checkpointing tried: try it
     * first; an optimizer torch does not ship has no size (its part
     * allocated so far counts, a floor); no capacity: not compared. */
    r.capacity = 8000;
    assert_int_equal(results_nofit_split(&r, &f), 1);
    assert_int_equal(f.exceeds, 0);
    assert_int_equal(f.nsuggest, 4);
    assert_string_equal(f.suggest[0], "checkpointing");
    r.trials[3].checkpointing = 1;
    assert_int_equal(results_nofit_split(&r, &f), 1);
    assert_int_equal(f.ckpt_tried, 1);
    assert_string_equal(f.suggest[0], "mixed_precision");
    r.trials[0].mem.optim_expected = -1;
    r.trials[0].mem.optim = 64;
    snprintf(r.trials[0].mem.optim_class, sizeof r.trials[0].mem.optim_class, "Lion");
    r.capacity = -1;
    assert_int_equal(results_nofit_split(&r, &f), 1);
    assert_true(f.optim == -1 && f.total == 2064 && f.capacity == -1 && f.exceeds == -1);
    j = results_to_json(&r);
    fj = json_object_get(json_object_get(j, "memory_breakdown"), "failure");
    assert_true(json_is_null(json_object_get(fj, "optimizer")));
    assert_true(json_is_null(json_object_get(fj, "capacity_bytes")));
    assert_true(json_is_null(json_object_get(fj, "exceeds_capacity")));
    json_decref(j);

    /* Of two at the smallest size, the one whose optimizer is known. */
    r.trials[1].micro_batch = 8;
    r.trials[1].mem = r.trials[0].mem;
    r.trials[1].mem.optim_expected = 2016;
    assert_int_equal(results_mem_failure(&r), 1);
    /* Only a trial that ran out of memory says so (a crash does not). */
    r.trials[1].outcome = TRIAL_CRASH;
    assert_int_equal(results_mem_failure(&r), 0);
    results_release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema),
        cmocka_unit_test(test_frontier),
        cmocka_unit_test(test_bounded_and_write),
        cmocka_unit_test(test_capacity_warm_settings),
        cmocka_unit_test(test_memory_breakdown),
        cmocka_unit_test(test_nofit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
