/* SPDX-License-Identifier: MIT */
/*
 * tune: the tuning loop (tune.h).  tune_loop asks the space for the next
 * round of candidates: one runs here, with its output shown
 * (tune_job.c); several run side by side (tune_round.c).  When the
 * search is done, the two finalists are measured once more if their
 * speeds differ by less than their step times vary.  The loop ends with
 * the search, the budget, a trial that stops it, or a signal.  The
 * loop's parts share tune_int.h.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/choose.h"
#include "control/plan.h"
#include "control/tune_int.h"
#include "output/events.h"
#include "output/results.h"
#include "search/space.h"
#include "trial/gpu.h"
#include "trial/leftovers.h"

/* Confirmation runs at most: each failure moves the choice down once. */
#define TUNE_CONFIRMS 3

void tune_view_say(const struct tune_view *v, enum tune_line kind, const char *fmt, ...)
{
    if (!v->line)
        return;
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    v->line(v->ctx, kind, n < 0 ? "out of memory" : text);
    if (n >= 0)
        free(text);
}

/* ---- the loop */

/* The --events line of the run's start: the command, the range, where
 * trials run. */
static void tune_event_run(const struct tune_run *r)
{
    if (!events_on())
        return;
    const struct plan *plan = r->plan;
    json_t *cmd = json_array();
    for (size_t i = 0; plan->command[i]; i++)
        json_array_append_new(cmd, json_string(plan->command[i]));
    events_emit("start", json_pack("{s:o, s:{s:I, s:I, s:I}, s:s, s:I}", "command", cmd, "batch",
                                   "min", (json_int_t)plan->batch_min, "max",
                                   (json_int_t)plan->batch_max, "step",
                                   (json_int_t)plan->batch_step, "launcher", r->res->launcher,
                                   "slots", (json_int_t)r->res->slots));
}

/*
 * One trial at a time, output shown: on the first slot when there are
 * slots (a throughput measurement alone).  confirm: the choice's
 * confirmation run.  Returns 1 when the loop must stop, else 0.
 */
static int tune_serial(struct tune_run *r, struct tune_job *j, size_t ci, long value,
                       size_t width, long *round, int confirm)
{
    memset(j, 0, sizeof *j);
    j->confirm = confirm;
    if (tune_job_prepare(r, j, ci, value, r->slots, width > 1 ? *round + 1 : 0))
        return 1;
    if (tune_slurm_submit(r, j, 1)) {
        r->status = AB_EXIT_USAGE;
        inject_trial_release(&j->t);
        leftovers_remove_tree(j->tdir);
        tune_slurm_done(r, j);
        return 1;
    }
    tune_job_run(r, j);
    tune_slurm_done(r, j);
    if (width > 1)
        r->res->rounds = ++*round;
    int stop = tune_job_finish(r, j, 0);
    if (!gpu_settle(r->gpu))
        tune_say(r, TUNE_NOTE, "warning: GPU memory did not return to its level before the "
                               "trial within 10s; the next trial may see less free memory");
    return stop;
}

/*
 * The choice, confirmed (issue 24, item 5): the configuration the search
 * would choose now runs once more in the user's command and environment,
 * through the largest batches first (the probe's worst-case order), for
 * --confirm's steps or time.  Returns 1 when it failed on memory (the
 * search goes on below it), 0 when it fitted or nothing was run, -1 when
 * the run stopped the loop (crash, interrupt, budget).
 */
static int tune_confirm(struct tune_run *r, struct tune_job *jobs, size_t width, long *round)
{
    const struct plan *plan = r->plan;
    struct results *res = r->res;
    if (plan->no_confirm || r->status || tune_interrupted(r) || r->budget_hit)
        return 0;
    long best = choose_best(res, r->space, choose_capacity(r->gpu, r->space), plan->headroom,
                            NULL);
    if (best < 0)
        return 0;
    const struct results_trial b = res->trials[best];
    size_t ci = 0;
    while (ci < r->space->ncells && (r->space->cells[ci].grad_accum != b.grad_accum ||
                                     r->space->cells[ci].checkpointing != b.checkpointing))
        ci++;
    if (ci == r->space->ncells)
        return 0;
    char what[64];
    if (plan->confirm_steps > 0 && plan->confirm_s > 0)
        snprintf(what, sizeof what, "%ld steps or %.0fs", plan->confirm_steps, plan->confirm_s);
    else if (plan->confirm_steps > 0)
        snprintf(what, sizeof what, "%ld steps", plan->confirm_steps);
    else
        snprintf(what, sizeof what, "%.0fs", plan->confirm_s);
    tune_say(r, TUNE_NOTE, "confirming the choice micro_batch=%ld grad_accum=%ld "
                           "checkpointing=%s: a fresh run of %s",
             b.micro_batch, b.grad_accum, b.checkpointing ? "on" : "off", what);
    if (tune_serial(r, &jobs[0], ci, b.micro_batch, width, round, 1))
        return r->status || r->crashed || r->budget_hit || tune_interrupted(r) ? -1 : 0;
    const struct trial_result *tr = &jobs[0].tr; /* the run just finished */
    if (tr->outcome == TRIAL_FIT) {
        res->confirmed = 1;
        return 0;
    }
    if (tr->outcome == TRIAL_TIMEOUT || tr->outcome == TRIAL_HANG)
        return 0; /* said by tune_job_finish: not evidence about memory */
    tune_say(r, TUNE_NOTE, "the choice micro_batch=%ld failed its confirmation run (%s%s%s): "
                           "it does not fit through the largest batches; moving to the next "
                           "candidate", b.micro_batch, trial_outcome_name(tr->outcome),
             tr->evidence[0] ? ": " : "", tr->evidence);
    return 1;
}

int tune_loop(struct tune_run *r)
{
    const struct plan *plan = r->plan;
    struct space *space = r->space;
    struct results *res = r->res;
    size_t width = r->nslots > 1 ? r->nslots : 1;
    struct tune_job *jobs = calloc(width, sizeof *jobs);
    size_t *round_ci = calloc(width, sizeof *round_ci);
    long *round_micro = calloc(width, sizeof *round_micro);
    if (!jobs || !round_ci || !round_micro) {
        tune_say(r, TUNE_ERROR, "out of memory");
        free(jobs);
        free(round_ci);
        free(round_micro);
        return -1;
    }
    tune_event_run(r);
    int repeated = 0, confirms = 0;
    long round = 0;
    for (;;) {
        size_t k = 0;
        if (!tune_interrupted(r))
            k = space_next_round(space, width, round_ci, round_micro);
        if (!k) {
            /* The finalists measured again, once, when noise could have
             * decided between them. */
            struct choose_repeat again;
            if (repeated || tune_interrupted(r) ||
                !choose_repeat_noisy(res, space, choose_capacity(r->gpu, space), plan->headroom,
                                     &again)) {
                /* The choice runs once more as the user will run it; a
                 * failure is a boundary below it: the search goes on. */
                if (!confirms && !tune_interrupted(r) && !r->budget_hit && tune_knob_check(r))
                    break;
                int c = confirms < TUNE_CONFIRMS ? tune_confirm(r, jobs, width, &round) : 0;
                if (c > 0) {
                    confirms++;
                    repeated = 0;
                    continue;
                }
                break;
            }
            tune_say(r, TUNE_NOTE, "micro_batch=%ld and %ld differ by %.1f%%, within their "
                                   "step-time spread (%.1f%%): measuring both again",
                     again.best_micro, again.runner_micro, 100 * again.margin,
                     100 * again.spread);
            repeated = 1;
            continue;
        }
        if (k > 1) {
            res->rounds = ++round;
            if (tune_round(r, jobs, k, round_ci, round_micro, round))
                break;
            continue;
        }
        if (tune_serial(r, &jobs[0], round_ci[0], round_micro[0], width, &round, 0))
            break;
    }
    free(jobs);
    free(round_ci);
    free(round_micro);
    return 0;
}
