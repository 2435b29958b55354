/*
 * main: the controller.  Parse the plan, check everything that can be
 * checked before the first trial, then loop: ask the search for a
 * candidate, run it as a supervised trial, record the outcome, until the
 * search is done, the budget is spent, the command crashes, or we are
 * interrupted.  Then write the results and say what was found.
 *
 * Exit statuses are those of DESIGN.md 2.4 (enum ab_exit below).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "afile.h"
#include "cli.h"
#include "inject.h"
#include "oom.h"
#include "proctree.h"
#include "progress.h"
#include "results.h"
#include "search.h"
#include "strvec.h"
#include "trial.h"

extern char **environ;

enum ab_exit {
    AB_OK = 0,
    AB_USAGE = 2,
    AB_NOTHING_FITS = 3,
    AB_CRASH = 4,
    AB_BUDGET = 5,
    AB_INTERRUPTED = 130,
};

static volatile sig_atomic_t ab_interrupted;

static void ab_on_signal(int sig)
{
    ab_interrupted = sig;
}

/* fds 0-2 must be open, or the first file we open becomes "stdout". */
static void ab_sanitize_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            _exit(AB_USAGE);
}

static void ab_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ab_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static double ab_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The tail of a crashed command's output, so the user sees the real error. */
static void ab_show_crash(struct progress *pg, const struct trial_result *r)
{
    progress_note(pg, "the command failed for a reason other than memory (%s%d); "
                      "its last lines:",
                  r->signal ? "signal " : "exit code ", r->signal ? r->signal : r->exit_code);
    for (int i = 0; i < r->tail_count; i++)
        fprintf(stderr, "  | %s\n", r->tail[i]);
    fputs("autobatch: fix the command so that it runs at the smallest batch, then try again\n",
          stderr);
}

int main(int argc, char **argv)
{
    ab_sanitize_fds();
    struct plan plan;
    switch (cli_parse(argc, argv, &plan)) {
    case CLI_DONE: return AB_OK;
    case CLI_USAGE: return AB_USAGE;
    case CLI_RUN: break;
    }

    char err[512];
    /* Export files are checked before the first trial, so a bad path fails
     * in the first second and not after an hour of tuning. */
    if (plan.json_path && strcmp(plan.json_path, "-") &&
        afile_check_writable(plan.json_path, err, sizeof err)) {
        cli_error("--json: %s; choose a writable path", err);
        return AB_USAGE;
    }
    struct oom_table oom = OOM_TABLE_INIT;
    if (oom_table_load_default(&oom, err, sizeof err)) {
        cli_error("built-in OOM signatures: %s", err);
        return AB_USAGE;
    }
    if (proctree_become_subreaper()) {
        cli_error("cannot become a child subreaper: %s", strerror(errno));
        oom_table_release(&oom);
        return AB_USAGE;
    }
    ab_install_signals();

    char tmpdir[] = "/tmp/autobatch-XXXXXX";
    const char *tmpbase = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/autobatch-XXXXXX", tmpbase && *tmpbase ? tmpbase : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir)
        dir = mkdtemp(tmpdir);
    if (!dir) {
        cli_error("cannot make a temporary directory: %s; set TMPDIR to a writable place",
                  strerror(errno));
        oom_table_release(&oom);
        return AB_USAGE;
    }

    struct progress pg;
    progress_init(&pg, plan.quiet, plan.verbose);
    struct results res = RESULTS_INIT;
    struct search search;
    if (results_init(&res, plan.command) ||
        search_init(&search, plan.batch_min, plan.batch_max, plan.batch_step)) {
        cli_error("out of memory");
        return AB_USAGE;
    }
    res.preset = plan.preset_name;
    res.batch_min = plan.batch_min;
    res.batch_max = plan.batch_max;
    res.batch_step = plan.batch_step;
    res.world_size = plan.world_size;
    res.grad_accum = malloc(sizeof *res.grad_accum);
    if (res.grad_accum) {
        res.grad_accum[0] = 1;
        res.ngrad_accum = 1;
    }
    res.ckpt_off = 1;

    const long grad_accum = 1;
    const int ckpt = 0;
    double t0 = ab_now();
    int status = AB_OK, budget_hit = 0, crashed = 0, timeouts = 0;
    long id = 0, value;
    struct trial_result *tr = malloc(sizeof *tr);
    if (!tr) {
        cli_error("out of memory");
        return AB_USAGE;
    }

    while (!ab_interrupted && search_next(&search, &value)) {
        double left = plan.budget_s > 0 ? plan.budget_s - (ab_now() - t0) : 0;
        if (plan.budget_s > 0 && left <= 0) {
            budget_hit = 1;
            break;
        }
        id++;
        char report[4200];
        snprintf(report, sizeof report, "%s/report-%ld.jsonl", dir, id);
        struct inject_opts io = {
            .preset = plan.preset, .set_checkpointing = 0,
            .max_steps = plan.warmup + plan.steps, .trial_id = id, .report_path = report,
        };
        struct inject_candidate cand = { value, grad_accum, ckpt };
        struct strvec targv = STRVEC_INIT, tenv = STRVEC_INIT;
        if (inject_build(&io, plan.command, environ, &cand, &targv, &tenv)) {
            cli_error("out of memory");
            status = AB_USAGE;
            break;
        }
        /* The budget caps the trial too; a trial cut by the budget says
         * nothing about memory and is not recorded in the search. */
        double ttl = plan.trial_timeout_s;
        int budget_caps = plan.budget_s > 0 && (ttl <= 0 || left < ttl);
        if (budget_caps)
            ttl = left;
        struct trial_opts to = {
            .oom = &oom, .target_steps = plan.warmup + plan.steps,
            .warmup_steps = plan.warmup, .trial_timeout_s = ttl,
            .hang_timeout_s = plan.hang_timeout_s, .grace_s = plan.grace_s,
            .report_path = report, .interrupt = &ab_interrupted,
            .hooks = { &pg, progress_output, progress_step },
        };
        struct trial_spec spec = { targv.v, tenv.v };
        progress_trial_start(&pg, id, value, grad_accum, ckpt, to.target_steps, targv.v);
        int rc = trial_run(&spec, &to, tr);
        strvec_release(&targv);
        strvec_release(&tenv);
        unlink(report);
        if (rc) {
            cli_error("cannot start a trial: %s", strerror(errno));
            status = AB_USAGE;
            break;
        }
        if (tr->outcome == TRIAL_SPAWN_FAILED) {
            cli_error("cannot run '%s': %s; check the command", plan.command[0],
                      strerror(tr->spawn_errno));
            status = AB_USAGE;
            break;
        }
        double samples = (double)value * (double)grad_accum * (double)plan.world_size;
        double sps = tr->step_time_s > 0 ? samples / tr->step_time_s : -1;
        progress_trial_end(&pg, tr, tr->outcome == TRIAL_FIT ? sps : -1);
        if (tr->outcome == TRIAL_TIMEOUT && budget_caps) {
            budget_hit = 1;
            tr->outcome = TRIAL_INTERRUPTED;
        }
        struct results_trial rt = {
            .id = id, .micro_batch = value, .grad_accum = grad_accum, .checkpointing = ckpt,
            .outcome = tr->outcome, .exit_code = tr->exit_code, .signal = tr->signal,
            .wall_s = tr->wall_s, .teardown_s = tr->teardown_s > 0 ? tr->teardown_s : -1,
            .steps_measured = tr->steps_measured, .step_time_s = tr->step_time_s,
            .samples_per_s = tr->outcome == TRIAL_FIT ? sps : -1,
            .peak_mem_bytes = tr->peak_mem_bytes,
            .evidence = tr->outcome == TRIAL_FIT || !tr->evidence[0] ? NULL : tr->evidence,
            .signature = tr->outcome == TRIAL_OOM ? (char *)tr->oom_name : NULL,
        };
        for (size_t i = 0; i < res.ntrials; i++)
            if (res.trials[i].micro_batch == value)
                rt.retest = 1;
        results_add_trial(&res, &rt);
        if (tr->teardown_incomplete)
            progress_note(&pg, "warning: a process outside the trial's tree kept its output "
                               "open; gave up waiting for it");

        if (budget_hit || tr->outcome == TRIAL_INTERRUPTED)
            break;
        if (tr->outcome == TRIAL_CRASH) {
            ab_show_crash(&pg, tr);
            crashed = 1;
            break;
        }
        if (tr->outcome == TRIAL_TIMEOUT || tr->outcome == TRIAL_HANG) {
            /* No memory evidence, but the size does not work as it is:
             * treat it as an upper bound and say so. */
            timeouts++;
            progress_note(&pg, "micro_batch=%ld %s; counted as not fitting (raise --%s if it "
                               "was only slow)", value,
                          tr->outcome == TRIAL_TIMEOUT ? "ran past --trial-timeout"
                                                       : "printed nothing for --hang-timeout",
                          tr->outcome == TRIAL_TIMEOUT ? "trial-timeout" : "hang-timeout");
        }
        search_record(&search, value, tr->outcome == TRIAL_FIT);
    }

    /* ---- the answer */
    long max_fit = search_max_fit(&search);
    struct results_cell cell = {
        .grad_accum = grad_accum, .checkpointing = ckpt, .max_fit = max_fit,
        .min_fail = search_min_fail(&search),
        .bounded_by = search_bounded(&search) ? "batch.max" : NULL,
    };
    results_add_cell(&res, &cell);
    for (size_t i = 0; i < search.ncontra; i++) {
        struct results_contradiction c = {
            grad_accum, ckpt, search.contra[i].value, search.contra[i].larger_fit,
            search.contra[i].retest_fit,
        };
        results_add_contradiction(&res, &c);
        progress_note(&pg, "warning: micro_batch=%ld failed although %ld fitted; re-tested: %s",
                      c.micro_batch, c.larger_fit,
                      c.retest_fit ? "fits (the first failure was a fluke)"
                                   : "fails again (memory use is not monotone here)");
    }
    /* The choice: the largest size that fits, from its latest fitting trial. */
    for (size_t i = 0; i < res.ntrials; i++)
        if (max_fit > 0 && res.trials[i].micro_batch == max_fit &&
            res.trials[i].outcome == TRIAL_FIT)
            res.best = (long)i;

    if (status == AB_OK) {
        if (ab_interrupted)
            status = AB_INTERRUPTED;
        else if (crashed)
            status = AB_CRASH;
        else if (res.best < 0 && budget_hit)
            status = AB_BUDGET;
        else if (res.best < 0)
            status = timeouts ? AB_CRASH : AB_NOTHING_FITS;
    }
    res.wall_s = ab_now() - t0;
    res.exit_status = status;
    res.interrupted = status == AB_INTERRUPTED;

    FILE *say = plan.json_path && !strcmp(plan.json_path, "-") ? stderr : stdout;
    if (res.best >= 0) {
        const struct results_trial *b = &res.trials[res.best];
        char rate[64] = "";
        if (b->samples_per_s > 0)
            snprintf(rate, sizeof rate, ", %.1f samples/s", b->samples_per_s);
        fprintf(say, "autobatch: %s micro_batch=%ld grad_accum=%ld%s (%zu trials, %.1fs)%s\n",
                status == AB_OK ? "best:" : "best so far:", b->micro_batch, b->grad_accum, rate,
                res.ntrials, res.wall_s,
                cell.bounded_by ? "; the top of --batch fitted, raise MAX to look further" : "");
        if (budget_hit)
            fprintf(say, "autobatch: --budget ran out; the search was not finished\n");
    } else if (status == AB_NOTHING_FITS) {
        fprintf(stderr, "autobatch: nothing fits: micro_batch=%ld ran out of memory; lower the "
                        "model's memory use or try gradient checkpointing\n", plan.batch_min);
    } else if (status == AB_CRASH && !crashed) {
        fprintf(stderr, "autobatch: micro_batch=%ld never finished a trial (timeout or hang), so "
                        "this is not a memory limit; raise --trial-timeout/--hang-timeout or "
                        "check the command\n", plan.batch_min);
    } else if (status == AB_BUDGET) {
        fprintf(stderr, "autobatch: --budget ran out before any candidate fitted; raise it\n");
    } else if (status == AB_INTERRUPTED) {
        fprintf(stderr, "autobatch: interrupted; every trial process is gone\n");
    }
    fflush(say);

    if (plan.json_path && results_write(&res, plan.json_path, err, sizeof err)) {
        cli_error("%s", err);
        if (status == AB_OK)
            status = AB_USAGE;
    }
    rmdir(dir);
    free(tr);
    search_release(&search);
    results_release(&res);
    oom_table_release(&oom);
    return status;
}
