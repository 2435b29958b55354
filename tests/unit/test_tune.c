/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for tune: tune_loop driven by a fake trial runner instead of
 * trial_run.  The set-up is built the way main() builds it (the plan
 * parsed from a command line, setup_load, the OOM table, the space, the
 * inject context, the results, a GPU without NVML), so the loop prepares
 * real trial directories, commands and environments; only running the
 * command is faked.  The fake reads the candidate from the trial's
 * environment (AUTOBATCH_MICRO_BATCH) and answers as a trainer with a
 * fixed memory line would: fits up to a size, an OOM line that the
 * built-in table classifies above it, or crashes at a size.  The loop's
 * view is a recorder: what it was told, in order.
 */
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

#include "cli/cli.h"
#include "control/choose.h"
#include "control/setup.h"
#include "control/tune.h"
#include "util/mono.h"
#include "output/results.h"
#include "search/guide.h"
#include "search/search.h"
#include "search/space.h"
#include "trial/gpu.h"
#include "trial/leftovers.h"
#include "trial/trial.h"
#include "inject.h"
#include "oom.h"
#include "trainlog.h"

#define GIB 1073741824.0

/* The fake trainer: 10 GiB of its own plus 1 GiB a sample, on a device of
 * 47.5 GiB, so micro_batch <= fit_max fits (fit_max 37 by default). */
struct fake {
    long fit_max;
    long crash_at;  /* a size whose trial crashes (exit 1, no OOM); 0 none */
    long soak_max;  /* the largest size whose confirmation run (a soak that meets
                       the largest batches) fits; 0: as fit_max */
    long calls;
    long sizes[64];
};

static long fake_env_long(char *const *envp, const char *name)
{
    size_t len = strlen(name);
    for (; *envp; envp++)
        if (!strncmp(*envp, name, len) && (*envp)[len] == '=')
            return atol(*envp + len + 1);
    return -1;
}

static int fake_run(void *ctx, const struct trial_spec *spec, const struct trial_opts *opts,
                    struct trial_result *out)
{
    struct fake *f = ctx;
    long mb = fake_env_long(spec->envp, "AUTOBATCH_MICRO_BATCH");
    assert_true(mb >= 1);
    assert_non_null(opts->oom);
    if (f->calls < 64)
        f->sizes[f->calls] = mb;
    f->calls++;
    memset(out, 0, sizeof *out);
    out->exit_code = -1;
    out->step_time_s = out->step_time_mad_s = -1;
    out->peak_mem_bytes = out->peak_allocated_bytes = out->held_bytes = -1;
    out->peak_vm_bytes = out->probe_world = out->loader_batch = -1;
    out->loader_batches_per_step = -1;
    out->wall_s = 1.0;
    if (mb == f->crash_at) {
        out->outcome = TRIAL_CRASH;
        out->exit_code = 1;
        out->tail_count = 2;
        snprintf(out->tail[0], sizeof out->tail[0], "Traceback (most recent call last):");
        snprintf(out->tail[1], sizeof out->tail[1], "KeyError: 'text'");
        return 0;
    }
    long fit_max = opts->soak_s > 0 && f->soak_max > 0 ? f->soak_max : f->fit_max;
    if (mb <= fit_max) {
        out->outcome = TRIAL_FIT;
        out->exit_code = 0;
        out->steps_from = STEPS_FROM_REPORT;
        out->steps_seen = opts->target_steps;
        out->steps_measured = opts->target_steps - opts->warmup_steps;
        /* Larger batches are faster per sample, as on a real device. */
        out->step_time_s = 0.1 + 0.01 * (double)mb;
        out->step_time_mad_s = 0.001;
        out->peak_mem_bytes = (int64_t)((10.0 + (double)mb) * GIB);
        out->batch_seen = mb; /* the probe saw the model get the size passed */
        return 0;
    }
    /* PyTorch's message: the allocation that failed brings the need to
     * 10 GiB + mb GiB on a device of fit_max + 10.5 GiB with nothing free. */
    double cap = (double)fit_max + 10.5, tried = 10.0 + (double)mb - cap;
    snprintf(out->evidence, sizeof out->evidence,
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has "
             "a total capacity of %.2f GiB of which 0 bytes is free.", tried, cap);
    struct oom_match m;
    assert_true(oom_table_match(opts->oom, out->evidence, strlen(out->evidence), &m));
    out->outcome = TRIAL_OOM;
    out->exit_code = 1;
    out->oom_name = m.name;
    oom_parse_numbers(out->evidence, strlen(out->evidence), &out->oom_numbers);
    return 0;
}

/* The view: what the loop said, in order, as one letter an event (s
 * start, e end, b bracket, n note, x error, t tail line), and the lines. */
struct rec {
    char events[256];
    size_t n;
    char lines[16][256];
    size_t nlines;
    long last_fit, last_fail;
};

static void rec_event(struct rec *r, char c)
{
    if (r->n + 1 < sizeof r->events)
        r->events[r->n++] = c;
}

static void rec_line(void *ctx, enum tune_line kind, const char *text)
{
    struct rec *r = ctx;
    rec_event(r, kind == TUNE_NOTE ? 'n' : kind == TUNE_ERROR ? 'x' : 't');
    if (r->nlines < 16)
        snprintf(r->lines[r->nlines++], sizeof r->lines[0], "%s", text);
}

static void rec_bracket(void *ctx, long max_fit, long min_fail)
{
    struct rec *r = ctx;
    rec_event(r, 'b');
    r->last_fit = max_fit;
    r->last_fail = min_fail;
}

static void rec_start(void *ctx, long id, long micro, long accum, int ckpt, long target_steps,
                      char *const *argv)
{
    (void)id, (void)micro, (void)accum, (void)ckpt, (void)target_steps;
    assert_non_null(argv); /* every trial here runs in this process */
    rec_event(ctx, 's');
}

static void rec_end(void *ctx, const struct trial_result *tr, double samples_per_s)
{
    assert_true(tr->outcome == TRIAL_FIT ? samples_per_s > 0 : samples_per_s < 0);
    rec_event(ctx, 'e');
}

/* Everything main() prepares before the loop, for one command line. */
struct fx {
    struct plan plan;
    struct setup setup;
    struct oom_table oom;
    struct trainlog_rules log_rules;
    long accum[1];
    struct space space;
    struct inject_ctx ctx;
    struct results res;
    struct gpu gpu;
    struct guide guide;
    struct rec rec;
    char dir[64];
    volatile sig_atomic_t interrupted;
    struct tune_run run;
};

static void fx_init(struct fx *x, struct fake *f)
{
    static char a0[] = "autobatch", a1[] = "--batch", a2[] = "1:128", a3[] = "--no-cache",
                a4[] = "--quiet", a5[] = "--", a6[] = "/bin/true";
    static char *argv[] = { a0, a1, a2, a3, a4, a5, a6, NULL };
    char err[8192];
    memset(x, 0, sizeof *x);
    assert_int_equal(cli_parse(7, argv, &x->plan), CLI_RUN);
    struct setup s0 = SETUP_INIT;
    x->setup = s0;
    assert_int_equal(setup_load(&x->setup, &x->plan, err, sizeof err), 0);
    struct oom_table t0 = OOM_TABLE_INIT;
    x->oom = t0;
    assert_int_equal(oom_table_load_default(&x->oom, err, sizeof err), 0);
    x->log_rules = setup_log_rules(&x->setup.preset);
    x->accum[0] = x->setup.grad_accum;
    struct space_opts so = {
        .batch_min = x->plan.batch_min, .batch_max = x->plan.batch_max,
        .batch_step = x->plan.batch_step, .grad_accum = x->accum, .ngrad_accum = 1,
        .ckpt_off = x->plan.ckpt_off, .ckpt_on = x->plan.ckpt_on,
        .world_size = x->plan.world_size, .use_model = 1,
    };
    assert_int_equal(space_init(&x->space, &so, err, sizeof err), 0);
    assert_int_equal(x->space.ncells, 1);
    snprintf(x->dir, sizeof x->dir, "/tmp/test_tune-XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    struct inject_ctx c = {
        .preset = &x->setup.preset, .max_steps = x->plan.warmup + 3 * x->plan.steps,
        .step_limit = 1000, .world_size = x->plan.world_size,
    };
    x->ctx = c;
    assert_int_equal(results_init(&x->res, x->plan.command), 0);
    gpu_open(&x->gpu, "/nonexistent/libnvidia-ml.so.1");
    assert_int_equal(x->gpu.n, 0);
    x->space.cells[0].search.open_mid = 1; /* no GPU: as main() does */
    struct tune_run r = {
        .plan = &x->plan, .setup = &x->setup, .ctx = &x->ctx, .space = &x->space,
        .res = &x->res, .gpu = &x->gpu, .guide = &x->guide, .oom = &x->oom,
        .log_rules = &x->log_rules, .dir = x->dir, .t0 = mono_now(),
        .interrupt = &x->interrupted, .run_trial = fake_run, .trial_ctx = f,
        .view = { .ctx = &x->rec, .line = rec_line, .bracket = rec_bracket,
                  .trial_start = rec_start, .trial_end = rec_end },
    };
    x->run = r;
}

static void fx_release(struct fx *x)
{
    /* Every trial's directory went with its trial. */
    char probe[128];
    snprintf(probe, sizeof probe, "%s/trial-1", x->dir);
    assert_int_not_equal(access(probe, F_OK), 0);
    leftovers_remove_tree(x->dir);
    results_release(&x->res);
    space_release(&x->space);
    gpu_release(&x->gpu);
    oom_table_release(&x->oom);
    setup_release(&x->setup);
}

/* A fixture for f, tune_loop run on it (sig: the signal seen before the
 * loop starts, 0 none).  fx_free releases it. */
static struct fx *fx_loop(struct fake *f, int sig)
{
    struct fx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    fx_init(x, f);
    x->interrupted = sig;
    assert_int_equal(tune_loop(&x->run), 0);
    return x;
}

static void fx_free(struct fx *x)
{
    fx_release(x);
    free(x);
}

static void test_boundary_found(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 37 };
    struct fx *x = fx_loop(&f, 0);
    assert_int_equal(x->run.status, 0);
    assert_false(x->run.crashed || x->run.budget_hit || x->run.no_steps || x->run.timeouts);
    const struct search *s = &x->space.cells[0].search;
    assert_int_equal(search_max_fit(s), 37);
    assert_int_equal(search_min_fail(s), 38);
    /* One trial a call, in order, each as the fake answered it. */
    assert_true(f.calls >= 2);
    /* The search's trials, then the choice's confirmation run. */
    assert_int_equal(x->res.ntrials + 1, (size_t)f.calls);
    assert_int_equal(f.sizes[f.calls - 1], x->res.trials[choose_best(&x->res, &x->space, -1, 0,
                                                                      NULL)].micro_batch);
    assert_int_equal(json_array_size(x->res.confirm), 1);
    assert_true(x->res.confirmed);
    int fits = 0;
    for (size_t i = 0; i < x->res.ntrials; i++) {
        const struct results_trial *t = &x->res.trials[i];
        assert_int_equal(t->id, (long)i + 1);
        assert_int_equal(t->micro_batch, f.sizes[i]);
        if (t->micro_batch <= 37) {
            fits++;
            assert_int_equal(t->outcome, TRIAL_FIT);
            double want = (double)t->micro_batch / (0.1 + 0.01 * (double)t->micro_batch);
            assert_true(t->samples_per_s > 0.999 * want && t->samples_per_s < 1.001 * want);
        } else {
            assert_int_equal(t->outcome, TRIAL_OOM);
            assert_non_null(t->signature);
            assert_non_null(t->evidence);
            assert_true(t->samples_per_s < 0);
        }
    }
    assert_true(fits >= 1);
    /* The view saw each trial as bracket, start, end, and nothing else:
     * no error; then a note and the confirmation run. */
    assert_int_equal(x->rec.n, 3 * x->res.ntrials + 4);
    for (size_t i = 0; i < x->res.ntrials; i++)
        assert_memory_equal(x->rec.events + 3 * i, "bse", 3);
    assert_memory_equal(x->rec.events + 3 * x->res.ntrials, "nbse", 4);
    /* The last bracket is the one before the last trial, inside [1, 128]. */
    assert_true(x->rec.last_fit <= 37 && (x->rec.last_fail < 0 || x->rec.last_fail >= 38));
    fx_free(x);
}

/* A trial that crashes stops the loop, and the view is told why: a note,
 * the command's last lines, and what to do. */
static void test_crash_told(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 37, .crash_at = -1 };
    struct fx *x = fx_loop(&f, 0);
    long first = f.sizes[0]; /* where the search opens; crash there on a second run */
    fx_free(x);
    struct fake g = { .fit_max = 37, .crash_at = first };
    x = fx_loop(&g, 0);
    assert_int_equal(g.calls, 1);
    assert_true(x->run.crashed);
    assert_int_equal(x->res.ntrials, 1);
    assert_int_equal(x->res.trials[0].outcome, TRIAL_CRASH);
    assert_string_equal(x->rec.events, "bsentt" "n");
    assert_non_null(strstr(x->rec.lines[0], "failed for a reason other than memory (exit code 1)"));
    assert_string_equal(x->rec.lines[1], "Traceback (most recent call last):");
    assert_string_equal(x->rec.lines[2], "KeyError: 'text'");
    assert_non_null(strstr(x->rec.lines[3], "fix the command"));
    fx_free(x);
}

/* The choice fits in the search's short trials but not through the
 * largest batches of its confirmation run: the choice moves down, the
 * search goes on below it, and the size chosen at last is one that
 * passed its confirmation (issue 24, item 5). */
static void test_confirm_moves_down(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 37, .soak_max = 35 };
    struct fx *x = fx_loop(&f, 0);
    assert_int_equal(x->run.status, 0);
    size_t nc = json_array_size(x->res.confirm);
    assert_true(nc >= 2 && nc <= 3);
    /* Each confirmation run failed above 35 and fitted at or below it;
     * the last fitted, at the size chosen. */
    for (size_t i = 0; i < nc; i++) {
        const json_t *c = json_array_get(x->res.confirm, i);
        long mb = (long)json_integer_value(json_object_get(c, "micro_batch"));
        assert_string_equal(json_string_value(json_object_get(c, "outcome")),
                            mb > 35 ? "oom" : "fit");
        assert_true(i + 1 == nc ? mb <= 35 : mb > 35);
    }
    const json_t *last = json_array_get(x->res.confirm, nc - 1);
    long best = choose_best(&x->res, &x->space, -1, 0, NULL);
    assert_true(best >= 0);
    assert_int_equal(json_integer_value(json_object_get(last, "micro_batch")),
                     x->res.trials[best].micro_batch);
    assert_true(x->res.confirmed);
    /* The search ran again below each failed confirmation: the boundary
     * is the soak's, 35/36, not the last size measured before it. */
    const struct search *s = &x->space.cells[0].search;
    assert_int_equal(search_max_fit(s), 35);
    assert_int_equal(search_min_fail(s), 36);
    int said = 0;
    for (size_t i = 0; i < x->rec.nlines; i++)
        said |= strstr(x->rec.lines[i], "failed its confirmation run") != NULL;
    assert_true(said);
    fx_free(x);
}

/* --no-confirm: no confirmation run, nothing confirmed. */
static void test_no_confirm(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 37 };
    struct fx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    fx_init(x, &f);
    x->plan.no_confirm = 1;
    assert_int_equal(tune_loop(&x->run), 0);
    assert_int_equal(x->res.ntrials, (size_t)f.calls);
    assert_int_equal(json_array_size(x->res.confirm), 0);
    assert_false(x->res.confirmed);
    fx_free(x);
}

static void test_nothing_fits(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 0 };
    struct fx *x = fx_loop(&f, 0);
    assert_int_equal(x->run.status, 0);
    const struct search *s = &x->space.cells[0].search;
    assert_int_equal(search_max_fit(s), -1);
    assert_int_equal(search_min_fail(s), 1);
    assert_true(f.calls >= 1);
    assert_int_equal(x->res.ntrials, (size_t)f.calls);
    for (size_t i = 0; i < x->res.ntrials; i++)
        assert_int_equal(x->res.trials[i].outcome, TRIAL_OOM);
    fx_free(x);
}

/* A signal before the first round: no trial runs. */
static void test_interrupted(void **state)
{
    (void)state;
    struct fake f = { .fit_max = 37 };
    struct fx *x = fx_loop(&f, 15);
    assert_int_equal(f.calls, 0);
    assert_int_equal(x->res.ntrials, 0);
    fx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundary_found),
        cmocka_unit_test(test_confirm_moves_down),
        cmocka_unit_test(test_no_confirm),
        cmocka_unit_test(test_nothing_fits),
        cmocka_unit_test(test_crash_told),
        cmocka_unit_test(test_interrupted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
