/* SPDX-License-Identifier: MIT */
/*
 * choose: the choice among measured fits, and the facts that explain it.
 *
 * After (and during) a search the controller asks which configuration to
 * recommend.  The rule: the fastest measured fit that leaves --headroom
 * of the device free; two speeds within 1% of each other are a tie, and a
 * tie goes to less memory; without any measured speed, the largest fit.
 * A fit above a confirmed failure of its own cell (a contradiction whose
 * smaller failure stood) is never chosen.  The runner-up is the fastest
 * other candidate that passed the same filters, so the choice can say by
 * how much it won (choose_margin), and what the headroom kept out is
 * counted (choose_excluded).
 *
 * Library code: nothing here prints.  What the user is to be told, a
 * function returns as facts (a struct choose_notes, a struct
 * choose_repeat, an enum choose_verdict), and the callers word them: session_answer (control/session.c) the
 * notes, tune_loop (control/tune.c) the repeats, summary_say
 * (cli/summary.c) the margin and what the headroom kept out.
 *
 * Life cycle: none of its own.  The caller owns the struct results and
 * struct space it passes; functions read them, and only
 * choose_collect_cells (appends to the results), choose_best (sets
 * res->runner_up) and choose_repeat_noisy (queues requests in the space)
 * write.  Typical end of a run:
 *     choose_collect_cells(&space, &res);
 *     double cap = choose_capacity(&gpu, &space);
 *     res.best = choose_best(&res, &space, cap, headroom, &notes);
 *     choose_margin(&res, &m); choose_excluded(&res, &space, cap, headroom, &x);
 */
#ifndef AB_CHOOSE_H
#define AB_CHOOSE_H

#include <stddef.h>

#include "output/results.h"
#include "search/space.h"

struct gpu;

/**
 * The device capacity the headroom rule measures against: the smallest
 * device's total from NVML (g may be NULL), else the largest capacity any
 * cell's OOM messages showed.  Bytes, or -1 when unknown.
 */
double choose_capacity(const struct gpu *g, const struct space *sp);

/**
 * The memory that runs out: choose_capacity(), else the
 * --trial-memory-limit (mem_limit bytes, 0 none).  Bytes, or -1 unknown.
 * The results' capacity and the "batch is not the problem" stop both
 * measure against it.
 */
double choose_memory_limit(const struct gpu *g, const struct space *sp, double mem_limit);

/**
 * Append each cell's answer (boundary, skip reason, trials) and each
 * cell's contradictions to res, in cell order.  The contradictions added
 * are res->contra[n..res->ncontra), n being res->ncontra before the call:
 * the caller warns about them.  Allocation failures drop the entry (as
 * results_add_cell does); nothing is returned.
 */
void choose_collect_cells(const struct space *sp, struct results *res);

/**
 * Memory a fitting trial needs, for the headroom rule: its measured peak,
 * else its cell's memory line at its micro-batch.  Bytes, or -1 unknown.
 */
double choose_need(const struct results_trial *t, const struct space *sp);

/**
 * 1 when t lies above its cell's largest fit, i.e. above a confirmed
 * failure (not safe to train with); 0 otherwise, and 0 when no cell
 * matches t.
 */
int choose_above_boundary(const struct results_trial *t, const struct space *sp);

/** What choose_best noticed while choosing, for the caller to say. */
struct choose_notes {
    int headroom_unchecked; /**< headroom > 0 but some fit had no memory figure
                                 or the capacity is unknown: it was let through */
};

/**
 * The choice: the index into res->trials of the trial that stands for
 * the chosen configuration (its speed-measuring trial when it has one),
 * or -1 when no fit qualifies.  cap is choose_capacity()'s answer;
 * headroom a fraction (0: no rule).  Sets res->runner_up (-1 none).
 * notes may be NULL; otherwise it is overwritten.
 */
long choose_best(struct results *res, const struct space *sp, double cap, double headroom,
                 struct choose_notes *notes);

/** The finalists choose_repeat_noisy queued again, for the caller to say. */
struct choose_repeat {
    long best_micro, runner_micro; /**< their micro-batches */
    double margin;                 /**< best's speed over the runner-up's, less 1 */
    double spread;                 /**< the larger of their relative step-time spreads */
};

/**
 * When the choice and its runner-up are within their measured spread and
 * either was noisy (MAD over 10% of the median step), queue one more
 * trial of each (space_request): a noisy measurement does not decide
 * alone.  Returns the trials queued (0: nothing to repeat, *out left
 * alone); with trials queued, fills *out when out is not NULL.  Sets
 * res->runner_up as choose_best does.
 */
int choose_repeat_noisy(struct results *res, struct space *sp, double cap, double headroom,
                        struct choose_repeat *out);

/** How the choice compares with its runner-up (choose_margin). */
enum choose_verdict {
    CHOOSE_NO_MARGIN,    /**< no runner-up, or a speed is missing: nothing to say */
    CHOOSE_TIE,          /**< the runner-up is faster, within 1%: the tie went to less memory */
    CHOOSE_WITHIN_NOISE, /**< faster by no more than the step-time spread */
    CHOOSE_FASTER,       /**< faster by more than the spread */
    CHOOSE_FASTER_UNKNOWN_SPREAD, /**< faster; the spread is unknown */
};

struct choose_margin {
    enum choose_verdict verdict;
    double best_speed, runner_speed; /**< pooled samples/s (results_speed) */
    double ratio;                    /**< best_speed / runner_speed */
    double spread;                   /**< the larger relative spread, -1 unknown */
};

/**
 * Compare res->best with res->runner_up.  Fills *m and returns its
 * verdict; CHOOSE_NO_MARGIN when either is missing or unmeasured.
 */
enum choose_verdict choose_margin(const struct results *res, struct choose_margin *m);

/** What --headroom kept out of the choice (choose_excluded). */
struct choose_excluded {
    size_t n;        /**< fitting configurations excluded, each counted once */
    long top;        /**< the fastest of them, an index into res->trials; -1 none */
    double need;     /**< top's memory need in bytes */
};

/**
 * The fits whose memory leaves less than the headroom free (not those
 * above their boundary, which are excluded anyway), counted once per
 * configuration, and the fastest of them.  Returns x->n (0 when headroom
 * or cap is not positive).
 */
size_t choose_excluded(const struct results *res, const struct space *sp, double cap,
                       double headroom, struct choose_excluded *x);

#endif
