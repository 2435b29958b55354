/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for session: one tuning run's life cycle through its public
 * calls, with no trial run.  Each case parses a command line as main()
 * does, opens and arms a session on it, and reads what the session says
 * through a recording view (each line's kind and text, in order): the
 * scratch directory made under $TMPDIR and removed by session_close,
 * bad input refused before the first trial with one error line (a
 * --keep-traces without --replay, a TMPDIR that does not exist), and
 * session_answer's exit status (DESIGN.md 2.4) from trials appended to
 * the results and the space as the loop would append them and the loop's
 * flags set by hand: budget, nothing fits, timeouts, a crash, a signal, a
 * fit chosen, a fit the headroom leaves out, the loop's own status.
 * TMPDIR and XDG_CACHE_HOME point into a directory of the test's, and
 * NVML at a library that does not exist, so no GPU, user cache or other
 * run's scratch directory is touched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/session.h"
#include "control/tune.h"
#include "output/results.h"
#include "search/space.h"
#include "trial/leftovers.h"
#include "trial/trial.h"

/* The test's own directory: base/tmp is $TMPDIR, base/cache the cache. */
static char base[64], tmpdir[128], cachedir[128];
static char *saved_tmpdir, *saved_xdg;

/* The view: every line said, in order. */
#define REC_MAX 32
struct rec {
    size_t n;
    enum tune_line kind[REC_MAX];
    char text[REC_MAX][1024];
};

static void rec_line(void *ctx, enum tune_line kind, const char *text)
{
    struct rec *r = ctx;
    assert_non_null(text);
    if (r->n < REC_MAX) {
        r->kind[r->n] = kind;
        snprintf(r->text[r->n], sizeof r->text[0], "%s", text);
    }
    r->n++;
}

static size_t rec_count(const struct rec *r, enum tune_line kind)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n && i < REC_MAX; i++)
        n += r->kind[i] == kind;
    return n;
}

/* The one error line said (fails unless there is exactly one). */
static const char *rec_error(const struct rec *r)
{
    assert_int_equal(rec_count(r, TUNE_ERROR), 1);
    for (size_t i = 0; i < r->n && i < REC_MAX; i++)
        if (r->kind[i] == TUNE_ERROR)
            return r->text[i];
    return NULL;
}

/* A command line, its plan (which points into argv), the session (big,
 * and it must not move: on the heap) and the view. */
struct fx {
    char buf[512];
    char *argv[32];
    struct plan plan;
    struct session s;
    struct rec rec;
    struct tune_view view;
};

static struct fx *fx_new(const char *line)
{
    struct fx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    snprintf(x->buf, sizeof x->buf, "%s", line);
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(x->buf, " ", &save); t && argc < 31; t = strtok_r(NULL, " ", &save))
        x->argv[argc++] = t;
    assert_int_equal(cli_parse(argc, x->argv, &x->plan), CLI_RUN);
    x->view.ctx = &x->rec;
    x->view.line = rec_line;
    return x;
}

/* Opened and armed, with neither step saying an error. */
static struct fx *fx_armed(const char *line)
{
    struct fx *x = fx_new(line);
    assert_int_equal(session_open(&x->s, &x->plan, &x->view), SESSION_OK);
    assert_int_equal(session_arm(&x->s, &x->view), SESSION_OK);
    assert_int_equal(rec_count(&x->rec, TUNE_ERROR), 0);
    return x;
}

static void fx_free(struct fx *x)
{
    session_close(&x->s);
    free(x);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(base, sizeof base, "/tmp/test_session-XXXXXX");
    if (!mkdtemp(base))
        return -1;
    snprintf(tmpdir, sizeof tmpdir, "%s/tmp", base);
    snprintf(cachedir, sizeof cachedir, "%s/cache", base);
    if (mkdir(tmpdir, 0700) || mkdir(cachedir, 0700))
        return -1;
    const char *t = getenv("TMPDIR"), *c = getenv("XDG_CACHE_HOME");
    saved_tmpdir = t ? strdup(t) : NULL;
    saved_xdg = c ? strdup(c) : NULL;
    setenv("TMPDIR", tmpdir, 1);
    setenv("XDG_CACHE_HOME", cachedir, 1);
    setenv("AUTOBATCH_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    unsetenv("SLURM_JOB_ID");
    unsetenv("AUTOBATCH_WEBHOOK_URL");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    leftovers_remove_tree(base);
    if (saved_tmpdir)
        setenv("TMPDIR", saved_tmpdir, 1);
    else
        unsetenv("TMPDIR");
    if (saved_xdg)
        setenv("XDG_CACHE_HOME", saved_xdg, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved_tmpdir);
    free(saved_xdg);
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* (a) Catches: the scratch directory not made under $TMPDIR, not marked
 * as this run's, the probe not installed in it, the results not
 * described, or session_close leaving the directory behind. */
static void test_open_arm_close(void **state)
{
    (void)state;
    struct fx *x = fx_new("autobatch --batch 1:8 --no-cache -- /bin/true");
    assert_int_equal(session_open(&x->s, &x->plan, &x->view), SESSION_OK);
    assert_string_equal(x->s.tmpbase, tmpdir);
    assert_int_equal(strncmp(x->s.dir, tmpdir, strlen(tmpdir)), 0);
    assert_true(is_dir(x->s.dir));
    char path[4400];
    snprintf(path, sizeof path, "%s/owner", x->s.dir);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/sitecustomize.py", x->s.probe_dir);
    assert_int_equal(access(path, R_OK), 0);
    assert_true(x->s.have_space);
    assert_true(x->s.space.ncells >= 1);

    assert_int_equal(session_arm(&x->s, &x->view), SESSION_OK);
    assert_int_equal(rec_count(&x->rec, TUNE_ERROR), 0);
    assert_true(is_dir(x->s.dir));
    assert_int_equal(x->s.nslots, 0);
    assert_int_equal(x->s.gpu.n, 0);
    assert_int_equal(x->s.slurm, 0);
    assert_int_equal(x->s.cached, 0);
    assert_true(x->s.have_res);
    assert_int_equal(x->s.res.batch_min, 1);
    assert_int_equal(x->s.res.batch_max, 8);
    assert_string_equal(x->s.res.launcher, "local");
    assert_int_equal(x->s.res.ntrials, 0);

    char dir[sizeof x->s.dir];
    snprintf(dir, sizeof dir, "%s", x->s.dir);
    session_close(&x->s);
    assert_false(is_dir(dir));
    assert_int_not_equal(access(dir, F_OK), 0);
    assert_string_equal(x->s.dir, "");
    free(x);
}

/* (b) Catches: --keep-traces without --replay let through to the first
 * trial, or refused without its line (or with more than one). */
static void test_keep_traces_needs_replay(void **state)
{
    (void)state;
    struct fx *x = fx_new("autobatch --batch 1:8 --no-cache --no-probe --keep-traces /tmp -- "
                          "/bin/true");
    assert_int_equal(session_open(&x->s, &x->plan, &x->view), SESSION_OK);
    assert_int_equal(rec_count(&x->rec, TUNE_ERROR), 0);
    assert_int_equal(session_arm(&x->s, &x->view), SESSION_BAD);
    const char *e = rec_error(&x->rec);
    assert_non_null(strstr(e, "--keep-traces keeps --replay's traces"));
    /* the error is the last thing said */
    assert_true(x->rec.n <= REC_MAX);
    assert_int_equal(x->rec.kind[x->rec.n - 1], TUNE_ERROR);
    fx_free(x);
}

/* (c) Catches: $TMPDIR ignored (the directory made in /tmp instead), or
 * a failed mkdtemp not reported, or reported without naming TMPDIR. */
static void test_tmpdir_missing(void **state)
{
    (void)state;
    char missing[192];
    snprintf(missing, sizeof missing, "%s/no-such-dir", base);
    setenv("TMPDIR", missing, 1);
    struct fx *x = fx_new("autobatch --batch 1:8 --no-cache --no-probe -- /bin/true");
    enum session_status st = session_open(&x->s, &x->plan, &x->view);
    setenv("TMPDIR", tmpdir, 1);
    assert_int_equal(st, SESSION_BAD);
    const char *e = rec_error(&x->rec);
    assert_non_null(strstr(e, "TMPDIR"));
    assert_non_null(strstr(e, missing));
    assert_string_equal(x->s.dir, "");
    assert_false(is_dir(missing));
    fx_free(x);
}

/* One trial of micro-batch m appended as the loop appends it (fields as
 * tune_job_finish fills them) and recorded in the first cell's search:
 * a fit at speed samples/s with peak bytes (< 0 unknown), or an OOM on a
 * device of cap bytes (< 0 unknown).  Returns its index in the results. */
static long fx_trial(struct fx *x, long m, enum trial_outcome outcome, double speed, int64_t peak,
                     double cap)
{
    struct session *s = &x->s;
    const struct cell *c = &s->space.cells[0];
    int fit = outcome == TRIAL_FIT;
    struct results_trial t = {
        .id = (long)s->res.ntrials + 1, .micro_batch = m, .grad_accum = c->grad_accum,
        .checkpointing = c->checkpointing, .outcome = outcome, .exit_code = fit ? 0 : 1,
        .wall_s = 1.0, .teardown_s = -1, .steps_measured = fit ? 5 : 0,
        .step_time_s = fit ? (double)m / speed : -1, .step_time_mad_s = fit ? 0.001 : -1,
        .samples_per_s = fit ? speed : -1, .peak_mem_bytes = fit ? peak : -1,
        .evidence = outcome == TRIAL_OOM ? "torch.OutOfMemoryError: CUDA out of memory." : NULL,
        .signature = outcome == TRIAL_OOM ? "pytorch-cuda" : NULL,
        .steps_from = fit ? "report" : NULL, .probe_world = -1, .loader_batch = -1,
        .batches_per_step = -1, .peak_allocated_bytes = -1, .peak_vm_bytes = -1,
    };
    assert_int_equal(results_add_trial(&s->res, &t), 0);
    if (fit || outcome == TRIAL_OOM) {
        struct search_obs o = {
            m, fit, fit ? (double)peak : (cap > 0 ? cap + 1 : -1), fit ? -1 : cap, 0,
            fit ? speed : 0, fit ? 0.01 : 0,
        };
        space_record(&s->space, 0, &o);
    }
    return (long)s->res.ntrials - 1;
}

/* session_answer on x with the run's flags as a test sets them. */
struct flags {
    int budget_hit, crashed, timeouts, no_steps, status;
    volatile sig_atomic_t *interrupt;
};

static int fx_answer(struct fx *x, struct flags f)
{
    struct tune_run run = session_tune(&x->s, &x->view);
    assert_int_equal(run.status, 0);
    assert_ptr_equal(run.res, &x->s.res);
    run.budget_hit = f.budget_hit;
    run.crashed = f.crashed;
    run.timeouts = f.timeouts;
    run.no_steps = f.no_steps;
    run.status = f.status;
    run.interrupt = f.interrupt;
    int status = session_answer(&x->s, &run, &x->view);
    assert_int_equal(x->s.res.exit_status, status);
    assert_int_equal(x->s.res.interrupted, status == AB_EXIT_INTERRUPTED);
    assert_true(x->s.res.wall_s >= 0);
    return status;
}

#define PLAIN "autobatch --batch 1:8 --no-cache --no-probe -- /bin/true"

/* Catches: the budget's status dropped (nothing ran: 3 instead of 5),
 * or the budget outranking a fit (a run that found a fit is answered
 * even when the budget ended it). */
static void test_exit_budget(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    assert_int_equal(fx_answer(x, (struct flags){ .budget_hit = 1 }), AB_EXIT_BUDGET);
    assert_int_equal(x->s.res.best, -1);
    fx_free(x);

    x = fx_armed(PLAIN);
    fx_trial(x, 1, TRIAL_OOM, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .budget_hit = 1 }), AB_EXIT_BUDGET);
    fx_free(x);

    x = fx_armed(PLAIN);
    long fit = fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    fx_trial(x, 4, TRIAL_OOM, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .budget_hit = 1 }), AB_EXIT_OK);
    assert_int_equal(x->s.res.best, fit);
    fx_free(x);
}

/* Catches: a run where every size failed answered 0, or a run with no
 * trial at all (and no flag) answered anything but 3. */
static void test_exit_nothing_fits(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    fx_trial(x, 1, TRIAL_OOM, 0, -1, -1);
    fx_trial(x, 4, TRIAL_OOM, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ 0 }), AB_EXIT_NOTHING_FITS);
    assert_int_equal(x->s.res.best, -1);
    assert_int_equal(x->s.res.runner_up, -1);
    fx_free(x);

    x = fx_armed(PLAIN);
    assert_int_equal(fx_answer(x, (struct flags){ 0 }), AB_EXIT_NOTHING_FITS);
    fx_free(x);
}

/* Catches: trials that timed out (no fit) counted as "nothing fits"
 * (3) rather than a crash (4), or timeouts failing a run that found a
 * fit. */
static void test_exit_timeouts(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    fx_trial(x, 4, TRIAL_TIMEOUT, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .timeouts = 1 }), AB_EXIT_CRASH);
    fx_free(x);

    x = fx_armed(PLAIN);
    fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    fx_trial(x, 4, TRIAL_TIMEOUT, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .timeouts = 1 }), AB_EXIT_OK);
    fx_free(x);
}

/* Catches: a crash (or a trial with no steps) answered by the fit found
 * before it, or as "nothing fits". */
static void test_exit_crash(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    fx_trial(x, 4, TRIAL_CRASH, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .crashed = 1 }), AB_EXIT_CRASH);
    fx_free(x);

    x = fx_armed(PLAIN);
    fx_trial(x, 4, TRIAL_CRASH, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .crashed = 1, .budget_hit = 1 }),
                     AB_EXIT_CRASH);
    fx_free(x);

    x = fx_armed(PLAIN);
    fx_trial(x, 4, TRIAL_NO_STEPS, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .no_steps = 1 }), AB_EXIT_CRASH);
    fx_free(x);
}

/* Catches: the signal not read through the pointer (a set pointer to 0
 * taken as a signal), or outranked by a fit or a crash; res.interrupted
 * not set. */
static void test_exit_interrupted(void **state)
{
    (void)state;
    volatile sig_atomic_t sig = 15;
    struct fx *x = fx_armed(PLAIN);
    fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .crashed = 1, .interrupt = &sig }),
                     AB_EXIT_INTERRUPTED);
    assert_true(x->s.res.interrupted);
    fx_free(x);

    x = fx_armed(PLAIN);
    assert_int_equal(fx_answer(x, (struct flags){ .budget_hit = 1, .interrupt = &sig }),
                     AB_EXIT_INTERRUPTED);
    fx_free(x);

    sig = 0;
    x = fx_armed(PLAIN);
    fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .interrupt = &sig }), AB_EXIT_OK);
    assert_false(x->s.res.interrupted);
    fx_free(x);
}

/* Catches: the choice not made or not stored in res.best (the fastest
 * fit, below the boundary), the runner-up not set, a fit above a failure
 * chosen, res.exit_status not set. */
static void test_exit_fit_chosen(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    long slow = fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    long fast = fx_trial(x, 4, TRIAL_FIT, 40, -1, -1);
    fx_trial(x, 8, TRIAL_OOM, 0, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ 0 }), AB_EXIT_OK);
    assert_int_equal(x->s.res.best, fast);
    assert_int_equal(x->s.res.runner_up, slow);
    assert_int_equal(x->s.res.trials[x->s.res.best].micro_batch, 4);
    assert_int_equal(x->s.res.exit_status, AB_EXIT_OK);
    assert_false(x->s.res.interrupted);
    /* the cell's boundary was collected */
    assert_int_equal(x->s.res.ncells, x->s.space.ncells);
    assert_int_equal(x->s.res.cells[0].max_fit, 4);
    assert_int_equal(x->s.res.cells[0].min_fail, 8);
    assert_int_equal(rec_count(&x->rec, TUNE_ERROR), 0);
    fx_free(x);
}

/* Catches: a run whose only fits break --headroom answered 0 with no
 * choice (res.best -1), instead of "nothing fits". */
static void test_exit_headroom_leaves_nothing(void **state)
{
    (void)state;
    struct fx *x = fx_armed("autobatch --batch 1:8 --headroom 10 --no-cache --no-probe -- "
                            "/bin/true");
    fx_trial(x, 4, TRIAL_FIT, 40, 950, -1);
    fx_trial(x, 8, TRIAL_OOM, 0, -1, 1000);
    assert_int_equal(fx_answer(x, (struct flags){ 0 }), AB_EXIT_NOTHING_FITS);
    assert_int_equal(x->s.res.best, -1);
    fx_free(x);
}

/* Catches: the loop's own status (a trial that could not start: 2)
 * overridden by the answer from the trials. */
static void test_exit_loop_status_kept(void **state)
{
    (void)state;
    struct fx *x = fx_armed(PLAIN);
    fx_trial(x, 2, TRIAL_FIT, 20, -1, -1);
    assert_int_equal(fx_answer(x, (struct flags){ .status = AB_EXIT_USAGE }), AB_EXIT_USAGE);
    fx_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_arm_close),
        cmocka_unit_test(test_keep_traces_needs_replay),
        cmocka_unit_test(test_tmpdir_missing),
        cmocka_unit_test(test_exit_budget),
        cmocka_unit_test(test_exit_nothing_fits),
        cmocka_unit_test(test_exit_timeouts),
        cmocka_unit_test(test_exit_crash),
        cmocka_unit_test(test_exit_interrupted),
        cmocka_unit_test(test_exit_fit_chosen),
        cmocka_unit_test(test_exit_headroom_leaves_nothing),
        cmocka_unit_test(test_exit_loop_status_kept),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
