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
    int repeated = 0;
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
                                     &again))
                break;
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
        /* One at a time, output shown: on the first slot when there are
         * slots (a throughput measurement alone). */
        struct tune_job *j = &jobs[0];
        memset(j, 0, sizeof *j);
        if (tune_job_prepare(r, j, round_ci[0], round_micro[0], r->slots,
                             width > 1 ? round + 1 : 0))
            break;
        if (tune_slurm_submit(r, j, 1)) {
            r->status = AB_EXIT_USAGE;
            inject_trial_release(&j->t);
            leftovers_remove_tree(j->tdir);
            tune_slurm_done(r, j);
            break;
        }
        tune_job_run(r, j);
        tune_slurm_done(r, j);
        if (width > 1)
            res->rounds = ++round;
        int stop = tune_job_finish(r, j, 0);
        if (!gpu_settle(r->gpu))
            tune_say(r, TUNE_NOTE, "warning: GPU memory did not return to its level before the "
                                   "trial within 10s; the next trial may see less free memory");
        if (stop)
            break;
    }
    free(jobs);
    free(round_ci);
    free(round_micro);
    return 0;
}
