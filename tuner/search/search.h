/* SPDX-License-Identifier: MIT */
/*
 * search: find the largest micro-batch that fits, on a grid of sizes,
 * with as few trials as the evidence allows.
 *
 * The candidates are the grid MIN, MIN+STEP, ... up to MAX.  The bracket
 * is (lo, hi): lo the largest size seen to fit below every failure, hi
 * the smallest seen to fail (MAX+STEP while nothing failed).  Three ways
 * of choosing the next size, in order of preference:
 *
 *   1. Model.  A fit's memory figure (its measured peak) is a point
 *      (size, bytes needed) on the memory line.  An OOM's figure (device
 *      memory in use plus the allocation that failed, from PyTorch's
 *      message) is not: the step failed part-way, often before the
 *      optimizer's state existed, so it is only a lower bound just above
 *      capacity, and it feeds nothing but the capacity.  With a capacity,
 *      the line through the largest fit and either the memory a step
 *      holds between steps (the in-process probe's figure: one trial is
 *      enough) or a smaller fit predicts the boundary.  The proposal is
 *      the predicted largest fit P when it lies inside the bracket, or
 *      P + STEP (expected to fail) when P lies in the lower half: the
 *      size whose expected verdict cuts off more goes first, and the other
 *      confirms it.  When the prediction sits at lo, the size GALLOP steps
 *      above it (1, doubled each time such a confirmation fits), so a
 *      right model is confirmed by one trial and a model that reads low is
 *      escaped exponentially, not one size at a time.  A line that says
 *      the smallest failure fits is refuted (a failure adds no point to
 *      correct it).  Safeguarded as in Brent's method: a proposal is
 *      accepted only when its two-trial plan (the size and its
 *      confirmation) would leave at most a quarter of the bracket, as two
 *      bisections would, and when the last two model trials did shrink
 *      the bracket at least that much; otherwise one bisection step.
 *      And by a budget (below): once spent, the line only picks among the
 *      sizes that keep bisection's count.
 *   2. Ramp.  With nothing failed yet, no model yet, and fits that carry
 *      figures: double from lo, so the model gets its second point
 *      cheaply and a huge range does not open with a doomed trial.  Not
 *      when the last ramp step read the same memory as the fit before
 *      (within the allocator's 2 MiB): the first sizes then all land in
 *      the same segments (a staircase), and doubling again would too.
 *   3. Bisection between lo and hi.  A cell that has run nothing but
 *      knows a fit from another cell (the cell with checkpointing, after
 *      the one without) first tries twice that fit, also without figures:
 *      small enough that its one speed may show, by space.c's step-time
 *      line, that the cell cannot win.
 *
 * The budget.  Bisection of a bracket of W grid steps needs at most
 * ceil(log2 W) trials; trials run + ceil(log2 W) never grows under
 * bisection and grows by at most one with any other trial.  When the
 * opening (MIN and the ramp) ends, and again after any trial the search
 * did not propose (a cached size, a replay prediction, a throughput
 * point, a round's extra cuts), the budget is set to that sum plus
 * SEARCH_SLACK (4, search.c).  A model proposal past it is moved into
 * the sizes that leave neither side of the bracket wider than half the
 * power of two covering it.  So on a monotone curve the search's own
 * trials after the opening never exceed bisection's count from there by
 * more than SEARCH_SLACK, whatever the figures say.  The opening costs
 * nothing over bisection of 1..2^k when the model's line comes from the
 * first trial (the probe's held figure), one trial per ramp step
 * otherwise.  (A bound of one trial would forbid the model's near guesses
 * altogether: a right prediction near lo in a wide bracket, tried and
 * found to fit, leaves almost all of it; the search bench measures what
 * each bound costs, bench/README.md.)
 *
 * The search opens at MIN, a cheap fit whose figure the model can use,
 * unless the caller says no figures will come (open_mid): then it opens
 * in the middle of the range.  Without figures it is bisection from there
 * on (no search is better on every boundary than bisection, which needs
 * ceil(log2(sizes + 1)) trials), one trial more when it opened at MIN.
 *
 * Monotonicity is checked, not assumed: when a size fails although a
 * larger one fitted, the failing size is tried once more.  If it fits the
 * second time the first failure was a fluke; if it fails again, the
 * smaller failure stands and the larger fit is disregarded.  Either way it
 * is recorded as a contradiction.  No other size is ever tried twice.
 *
 * Inferred observations (search_infer) come from other cells of the
 * space (a size that failed with less memory per sample fails here too);
 * they narrow the bracket and feed the model like real ones but are never
 * counted as tried, so a size known only by inference may still be run to
 * measure it.
 *
 * Life cycle: struct search s; search_init(&s, min, max, step); loop
 * { search_next(&s, &v) -> run v -> search_record(&s, &obs) } until
 * search_next returns 0; read the answer with search_max_fit() and
 * friends; search_release(&s).  Pure logic: no I/O.
 */
#ifndef AB_SEARCH_H
#define AB_SEARCH_H

#include <stddef.h>

/** What one trial (or an inference) showed about one size. */
struct search_obs {
    long value;
    int fit;
    double need_bytes;    /**< peak for a fit, in use + tried for an OOM; <0 unknown */
    double capacity_bytes;/**< device capacity when known (OOM message, NVML); <0 unknown */
    double base_bytes;    /**< a fit's memory held between steps (the probe's); <=0 unknown */
    double speed;         /**< a fit's measured samples/s; <=0 unknown */
    double spread;        /**< ... and its step times' MAD over their median; <=0 unknown */
};

struct search_probe {
    long value;
    int fit;
    int inferred;         /**< not run here: known from another cell */
    double need_bytes;    /**< a fit's peak; <0 unknown (an OOM's lower bound is not kept) */
    double base_bytes;
    double speed;
    double spread;
};

struct search_contradiction {
    long value;     /**< the size that failed below a larger fit */
    long larger_fit;/**< the larger size that had fitted */
    int retest_fit; /**< what the re-test of value said */
};

enum search_how { SEARCH_START, SEARCH_RAMP, SEARCH_BISECT, SEARCH_MODEL, SEARCH_RETEST };

struct search {
    long min, max, step;   /**< the grid; max is snapped down onto it */
    struct search_probe *probes;
    size_t nprobes, alloc;
    struct search_contradiction *contra;
    size_t ncontra;
    double capacity;       /**< largest capacity seen; <0 unknown */
    double base;           /**< memory held between steps, the latest figure; <=0 unknown */
    double base_hint;      /**< the line's intercept from another cell (space.c); <=0 none */
    int use_model;         /**< 1 (default): allow model proposals */
    int open_mid;          /**< no memory figures to come: open in the middle, bisect throughout */
    int nramp;             /**< ramp steps proposed */
    long gallop;           /**< grid steps past a bracket end for the next confirmation */
    int confirm;           /**< the last proposal confirmed an end: +1 above lo, -1 below hi */
    long width[2];         /**< bracket width (grid steps) before the last two trials */
    int how_hist[2];       /**< ... how those two were chosen (enum search_how) */
    int width_failed[2];   /**< ... and whether a failure bounded the bracket then */
    enum search_how last_how; /**< how the last proposal was chosen */
    long proposed;         /**< the size search_next last returned; -1 none */
    int budget;            /**< the trial budget (the budget, above); -1 not set yet */
};

/** Returns 0, or -1 when min < 1, max < min or step < 1. */
int search_init(struct search *s, long min, long max, long step);
void search_release(struct search *s);

/** Propose the next size: returns 1 and sets *value, or 0 when done. */
int search_next(struct search *s, long *value);

/**
 * Propose up to n sizes to run side by side (n <= 64): search_next's
 * choice, with the size above it when that is a model's prediction, and
 * the remaining slots cutting the bracket evenly ((n+1)-ary cuts; a
 * bisection step is replaced by them).  Returns how many were written to
 * values (0 when done).  The results may be recorded in any order.
 */
int search_next_n(struct search *s, int n, long *values);

/** Record a trial of obs->value. */
void search_record(struct search *s, const struct search_obs *obs);

/**
 * Record what another cell implies about a size (not a trial here).  Its
 * memory figure, if any, feeds the model too: cells that share a
 * boundary share their memory line.
 */
void search_infer(struct search *s, const struct search_obs *obs);

/** Shorthand for search_record with no memory figures. */
void search_record_fit(struct search *s, long value, int fit);

/** Largest size that fitted below every confirmed failure; -1 if none. */
long search_max_fit(const struct search *s);

/** Smallest confirmed failing size; -1 if none. */
long search_min_fail(const struct search *s);

/** 1 when the top of the range fitted: the answer is bounded by MAX. */
int search_bounded(const struct search *s);

/** 1 when anything is known about value here, run or inferred. */
int search_known(const struct search *s, long value);

/** 1 when value was run here (not only inferred). */
int search_tried(const struct search *s, long value);

/**
 * The memory line bytes = a + b * size the model uses: through the
 * largest fit with a figure and either the memory held between steps or
 * a smaller fit; returns 0 when there is one (b > 0), -1 otherwise.
 */
int search_model(const struct search *s, double *a, double *b);

#endif
