/* SPDX-License-Identifier: MIT */
/*
 * main: the entry point.  A subcommand (tuner/cli/subcmd.c), or a run:
 * parse the command line (cli.c), check the output files, open the
 * session (tuner/control/session.h: everything checked before the first
 * trial), hand the trials to tune_loop (tuner/control/tune.h) with the
 * progress module as its view, take the session's answer, say it
 * (summary.c), write the choice back (tuner/control/writeback.h) and
 * the results and reports (outputs.c).  Signals only set a
 * flag that the loop reads.
 *
 * Exit statuses are those of DESIGN.md 2.4 (enum ab_exit, control/exit.h).
 */
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/dry_run.h"
#include "cli/outputs.h"
#include "cli/outq.h"
#include "cli/per_model.h"
#include "cli/targets.h"
#include "cli/progress.h"
#include "cli/say.h"
#include "cli/subcmd.h"
#include "cli/summary.h"
#include "control/session.h"
#include "control/tune.h"
#include "control/writeback.h"
#include "output/events.h"

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
            _exit(AB_EXIT_USAGE);
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

/* writeback_choice's lines: what it says and its diffs go to the summary
 * stream (ctx), its errors to stderr. */
static void ab_writeback_line(void *ctx, enum writeback_kind kind, const char *text)
{
    FILE *say = ctx;
    if (kind == WRITEBACK_ERROR)
        cli_error("%s", text);
    else if (kind == WRITEBACK_DIFF)
        fputs(text, say);
    else
        say_wrap(say, "autobatch: ", "  ", say_width(fileno(say)), text);
}

/* Give a slow reader of our output two seconds at exit, then drop the rest. */
static void ab_flush_output(void)
{
    outq_finish(2.0);
}

int main(int argc, char **argv)
{
    ab_sanitize_fds();
    outq_install();
    atexit(ab_flush_output);
    signal(SIGPIPE, SIG_IGN);
    outputs_set_program(argv[0]);
    if (argc > 1) {
        int rc = subcmd_dispatch(argc, argv);
        if (rc >= 0)
            return rc;
    }
    struct plan plan;
    switch (cli_parse(argc, argv, &plan)) {
    case CLI_DONE: return AB_EXIT_OK;
    case CLI_USAGE: return AB_EXIT_USAGE;
    case CLI_RUN: break;
    }

    /* The output files, checked before the first trial so that a bad path
     * fails in the first second and not after an hour of tuning. */
    json_t *baseline = NULL;
    if (outputs_check(&plan, &baseline))
        return AB_EXIT_USAGE;
    struct progress pg;
    progress_init(&pg, plan.quiet, plan.show_output, plan.verbose);
    pg.budget_s = plan.budget_s;
    struct tune_view view = progress_view(&pg);

    /* Everything checked and acquired before the first trial. */
    static struct session s;
    enum session_status opened = session_open(&s, &plan, &view);
    if (opened == SESSION_OK)
        ab_install_signals();
    pg.unit = s.setup.unit;
    /* A config found in the command, not named by --config: one output
     * on its path would replace it with results. */
    if (opened == SESSION_OK &&
        outputs_check_config(&plan, s.setup.have_config ? s.setup.config_path : NULL))
        opened = SESSION_BAD;
    if (opened == SESSION_OK && plan.dry_run) {
        int bad = dry_run_print(&s);
        session_close(&s);
        return bad ? AB_EXIT_USAGE : AB_EXIT_OK;
    }
    if (opened == SESSION_OK)
        opened = session_arm(&s, &view);
    if (opened != SESSION_OK) {
        int status = opened == SESSION_SPLIT
                   ? per_model_run(argc, argv, &plan, &s.gpu, &ab_interrupted)
                   : AB_EXIT_USAGE;
        session_close(&s);
        /* the targets' runs start once this run's scratch and locks are gone */
        if (opened == SESSION_TARGETS)
            status = targets_run(argc, argv, &plan, &ab_interrupted);
        json_decref(baseline);
        return status;
    }

    /* The trials. */
    struct tune_run run = session_tune(&s, &view);
    run.interrupt = &ab_interrupted;
    int looped = tune_loop(&run), more;
    while (!looped && (more = session_escalate(&s, &run, &view)) != 0)
        looped = more < 0 || tune_loop(&run);
    if (looped) {
        session_close(&s);
        json_decref(baseline);
        return AB_EXIT_USAGE;
    }
    int status = session_answer(&s, &run, &view);

    /* Say what was found, and write the choice back. */
    FILE *say = plan.json_path && !strcmp(plan.json_path, "-") ? stderr : stdout;
    summary_say(say, &s, &run, status);
    struct results *res = &s.res;
    if (res->best >= 0 && status == AB_EXIT_OK) {
        const struct results_trial *b = &res->trials[res->best];
        struct inject_candidate best = { .micro_batch = b->micro_batch,
                                         .grad_accum = b->grad_accum,
                                         .checkpointing = b->checkpointing,
                                         .extra = b->extra };
        struct writeback_out wo = { ab_writeback_line, say };
        if (writeback_choice(&plan, &s.setup, &s.ctx, &best, res, &wo))
            status = res->exit_status = AB_EXIT_USAGE;
    }
    fflush(say);

    /* The results document, then everything rendered from it: the file,
     * the reports, the baseline gate, the step summary, the webhook. */
    json_t *doc = results_to_json(res);
    if (!doc) {
        cli_error("cannot render the results: out of memory");
        status = status == AB_EXIT_OK ? AB_EXIT_USAGE : status;
    } else {
        status = outputs_write(&plan, doc, baseline, status, &ab_interrupted);
    }
    json_decref(doc);
    json_decref(baseline);
    events_emit("end", json_pack("{s:i, s:I, s:f}", "exit", status, "trials",
                                 (json_int_t)res->ntrials, "wall_s", res->wall_s));
    events_close();
    session_close(&s);
    return status;
}
