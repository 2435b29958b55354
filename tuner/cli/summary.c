/* SPDX-License-Identifier: MIT */
/*
 * summary: the lines that end a run (summary.h).  The choice with its
 * speed and the trials it took; how it compares with the runner-up
 * (control/choose.h's margin, worded); each cell's largest fit and
 * smallest failure; what --headroom excluded; a
 * warning when the effective batch changes; or, with no choice, why not
 * and what to do.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/say.h"
#include "cli/summary.h"
#include "control/choose.h"
#include "control/session.h"
#include "output/report.h"

/* One line of the answer, "autobatch: " and the printf-style text, made
 * safe (it names the user's files); on a terminal wrapped at its width,
 * elsewhere one line that scripts can grep. */
static void summary_line(FILE *say, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void summary_line(FILE *say, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    say_wrap(say, "autobatch: ", "  ", say_width(fileno(say)), text ? text : "out of memory");
    free(text);
}

/*
 * The worst case could not be seen whole (a bounded scan, an iterable
 * dataset): say so, with what was seen and a margin to keep.  The margin
 * is how far the largest batch seen stood above the second largest, as a
 * share of it (at least 5%, at most 50%): a batch that far above the
 * largest would need about that much more of the memory that grows with
 * the batch.  A guess, labelled as one; nothing is said when the whole
 * dataset was seen or the probe planned nothing.
 */
static void summary_unseen(FILE *say, const struct results_trial *b)
{
    const struct inproc_worst *w = &b->worst;
    if (!w->mode[0] || w->whole || strcmp(w->mode, "scan") || w->nsizes < 1)
        return;
    double gap = w->nsizes >= 2 && w->sizes[0] > 0 ? (w->sizes[0] - w->sizes[1]) / w->sizes[0] : 0;
    int pct = (int)(100 * gap + 0.5);
    pct = pct < 5 ? 5 : pct > 50 ? 50 : pct;
    summary_line(say, "warning: the probe saw %ld batches of the data (a %.2gs scan), not "
                 "all of them: the largest had %.0f elements (median %.0f); a larger batch later "
                 "may not fit. Keep a margin, e.g. --headroom %d (a guess from the gap between "
                 "the largest batches seen)", w->batches_seen, w->scan_s, w->sizes[0],
            w->median, pct);
}

/* Whether the choice passed its confirmation run, and what that run saw. */
static void summary_confirmed(FILE *say, const struct plan *plan, const struct results *res,
                              const struct results_trial *b)
{
    size_t n = json_array_size(res->confirm);
    const json_t *c = n ? json_array_get(res->confirm, n - 1) : NULL;
    if (res->confirmed && c) {
        json_int_t steps = json_integer_value(json_object_get(c, "steps_measured"));
        double wall = json_real_value(json_object_get(c, "wall_s"));
        const char *mode = json_string_value(json_object_get(json_object_get(c, "worst_case"),
                                                             "mode"));
        int worst = mode && (!strcmp(mode, "lengths") || !strcmp(mode, "scan"));
        summary_line(say, "confirmed: micro_batch=%ld trained %lld more steps (%.1fs) in "
                     "a fresh run%s", b->micro_batch, (long long)steps, wall,
                worst ? ", largest batches first" : "");
    } else if (plan->no_confirm) {
        summary_line(say, "not confirmed (--no-confirm): the search's trials are the "
                     "only evidence");
    } else {
        summary_line(say, "not confirmed: the confirmation run did not run to the end");
    }
}

/* How the choice compares with its runner-up: "x.xx times faster (+- the
 * spread)", or that the two cannot be told apart. */
static void summary_runner_up(FILE *say, const struct results *res, const char *unit)
{
    struct choose_margin m;
    if (choose_margin(res, &m) == CHOOSE_NO_MARGIN)
        return;
    const struct results_trial *u = &res->trials[res->runner_up];
    char who[160];
    snprintf(who, sizeof who, "the runner-up micro_batch=%ld grad_accum=%ld checkpointing=%s "
             "(%.1f %s/s)", u->micro_batch, u->grad_accum, u->checkpointing ? "on" : "off",
             m.runner_speed, unit);
    switch (m.verdict) {
    case CHOOSE_TIE:
        summary_line(say, "within 1%% of %s: a tie, which goes to less memory", who);
        break;
    case CHOOSE_WITHIN_NOISE:
        summary_line(say, "within noise of %s: %.2f times as fast, step times vary by "
                     "%.1f%%", who, m.ratio, 100 * m.spread);
        break;
    case CHOOSE_FASTER:
        summary_line(say, "%.2f times faster (+- %.1f%%) than %s", m.ratio,
                100 * m.spread, who);
        break;
    case CHOOSE_FASTER_UNKNOWN_SPREAD:
        summary_line(say, "%.2f times faster than %s", m.ratio, who);
        break;
    case CHOOSE_NO_MARGIN:
        break;
    }
}

/* What --headroom kept out of the choice, and why: the fits whose memory
 * leaves less than the headroom free, counted once per configuration,
 * and the fastest of them with its figure. */
static void summary_headroom(FILE *say, const struct results *res, const struct space *sp,
                             const struct gpu *g, double headroom, const char *unit)
{
    double cap = choose_capacity(g, sp);
    struct choose_excluded x;
    if (!choose_excluded(res, sp, cap, headroom, &x))
        return;
    const struct results_trial *top = &res->trials[x.top];
    char rate[64] = "";
    if (results_speed(res, top) > 0)
        snprintf(rate, sizeof rate, ", %.1f %s/s", results_speed(res, top), unit);
    summary_line(say, "--headroom %.0f%% excluded %zu fitting configuration%s, which use "
                 "more than %.1f of the device's %.1f GiB; the fastest: micro_batch=%ld "
                 "grad_accum=%ld checkpointing=%s%s, %.1f GiB", 100 * headroom, x.n,
            x.n == 1 ? "" : "s", (1 - headroom) * cap / 1073741824.0, cap / 1073741824.0,
            top->micro_batch, top->grad_accum, top->checkpointing ? "on" : "off", rate,
            x.need / 1073741824.0);
}

/* A choice that trains with another effective batch (micro x accum x
 * world size) than the command's own changes what its learning rate was
 * tuned for: say so.  Silent when the command's own values are unknown. */
static void summary_effective_batch(FILE *say, const struct plan *plan, const struct setup *s,
                                    const struct results_trial *b)
{
    long micro = setup_current(s, plan->command, KNOB_MICRO_BATCH, -1);
    /* Without --grad-accum the choice keeps the command's accumulation,
     * whatever it is; with it, the command's own must be known. */
    long accum = plan->ngrad_accum == 0 ? b->grad_accum
               : setup_current(s, plan->command, KNOB_GRAD_ACCUM, -1);
    if (micro < 1 || accum < 1)
        return;
    long world = plan->world_size;
    long before = micro * accum * world, after = b->micro_batch * b->grad_accum * world;
    if (before == after)
        return;
    summary_line(say, "warning: the effective batch changes from %ld (micro_batch=%ld x "
                 "grad_accum=%ld x world size %ld) to %ld (%ld x %ld x %ld): scale the learning "
                 "rate with it, or keep it with --global-batch %ld", before, micro, accum, world,
            after, b->micro_batch, b->grad_accum, world, before);
}

/*
 * The boundary each cell found: its largest fit and smallest failure.
 * The choice is the fastest fit, often not the largest (a larger batch
 * can be slower per sample, or within noise of a smaller one): the user
 * who reads "best 52" must also see that 53 fitted and 54 did not.
 */
static void summary_cells(FILE *say, const struct results *res)
{
    for (size_t i = 0; i < res->ncells; i++) {
        const struct results_cell *c = &res->cells[i];
        if (c->skipped || (c->max_fit < 0 && c->min_fail < 0))
            continue;
        char knobs[96], fail[96] = "";
        snprintf(knobs, sizeof knobs, "grad_accum=%ld checkpointing=%s", c->grad_accum,
                 c->checkpointing ? "on" : "off");
        if (c->min_fail >= 0)
            snprintf(fail, sizeof fail, "; micro_batch=%ld did not fit", c->min_fail);
        else if (c->bounded_by && !strcmp(c->bounded_by, "batch.max"))
            snprintf(fail, sizeof fail, "; nothing larger in --batch");
        if (c->max_fit < 0)
            summary_line(say, "largest fit: none with %s%s", knobs, fail);
        else
            summary_line(say, "largest fit: micro_batch=%ld %s%s%s", c->max_fit, knobs,
                         c->inferred ? " (inferred from other trials)" : "", fail);
    }
}

void summary_say(FILE *say, const struct session *s, const struct tune_run *run, int status)
{
    const struct results *res = &s->res;
    const struct plan *plan = s->plan;
    const char *unit = s->setup.unit;
    int any_fit = results_any_fit(res), bounded = 0;
    for (size_t i = 0; i < res->ncells; i++)
        bounded |= res->cells[i].bounded_by && !strcmp(res->cells[i].bounded_by, "batch.max");
    if (res->best >= 0) {
        const struct results_trial *b = &res->trials[res->best];
        char rate[64] = "";
        if (b->samples_per_s > 0)
            snprintf(rate, sizeof rate, ", %.1f %s/s", results_speed(res, b), unit);
        summary_line(say, "%s micro_batch=%ld grad_accum=%ld checkpointing=%s%s "
                     "(%zu trials, %.1fs)%s",
                status == AB_EXIT_OK ? "best:" : "best so far:", b->micro_batch,
                b->grad_accum, b->checkpointing ? "on" : "off", rate, res->ntrials, res->wall_s,
                bounded ? "; the top of --batch fitted, raise MAX to look further" : "");
        summary_confirmed(say, plan, res, b);
        summary_unseen(say, b);
        summary_runner_up(say, res, unit);
        summary_cells(say, res);
        summary_headroom(say, res, &s->space, &s->gpu, plan->headroom, unit);
        summary_effective_batch(say, plan, &s->setup, b);
        if (run->budget_hit)
            summary_line(say, "--budget ran out; the search was not finished");
    } else if (status == AB_EXIT_NOTHING_FITS && any_fit) {
        summary_line(stderr, "every configuration that fits uses more than %.0f%% of "
                        "device memory; lower --headroom", 100 * (1 - plan->headroom));
        summary_headroom(stderr, res, &s->space, &s->gpu, plan->headroom, unit);
    } else if (status == AB_EXIT_NOTHING_FITS) {
        /* With the probe's breakdown at the failure: batch is not the
         * problem, and by how much (results "memory_breakdown.failure"). */
        json_t *f = results_nofit_json(res);
        char *what = NULL, *next = NULL;
        if (report_nofit_text(f, &what, &next)) {
            summary_line(stderr, "nothing fits: %s", what);
            summary_line(stderr, "%s", next);
        } else {
            int ckpt = 0;
            for (size_t i = 0; i < res->ntrials; i++)
                ckpt |= res->trials[i].checkpointing;
            summary_line(stderr, "nothing fits: the smallest candidate ran out of memory; lower "
                            "the model's memory use%s", ckpt ? " (checkpointing did not make it fit)"
                                                         : " or try --checkpointing on");
        }
        free(what);
        free(next);
        json_decref(f);
    } else if (status == AB_EXIT_CRASH && run->no_steps) {
        /* said when it happened */
    } else if (status == AB_EXIT_CRASH && !run->crashed) {
        summary_line(stderr, "micro_batch=%ld never finished a trial (timeout or hang), so "
                        "this is not a memory limit; raise --trial-timeout/--hang-timeout or "
                        "check the command", plan->batch_min);
    } else if (status == AB_EXIT_BUDGET && run->pending) {
        summary_line(stderr, "nothing was measured: Slurm kept the trials pending past "
                        "--slurm-pending (%s)", s->res.slurm_pending);
    } else if (status == AB_EXIT_BUDGET) {
        summary_line(stderr, "--budget ran out before any candidate fitted; raise it");
    } else if (status == AB_EXIT_INTERRUPTED) {
        summary_line(stderr, "interrupted; every trial process is gone");
    }
}
