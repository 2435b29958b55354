/*
 * search: find the largest micro-batch that fits, on a grid of sizes,
 * with as few trials as the evidence allows.
 *
 * The candidates are the grid MIN, MIN+STEP, ... up to MAX.  Three ways
 * of choosing the next size, in order of preference:
 *
 *   1. Model jump.  Every observation that carries a memory figure (a
 *      fit's measured peak, or an OOM's "in use + tried to allocate" from
 *      PyTorch's message) is a point (size, bytes needed).  With a known
 *      capacity, the line through the two ends of the bracket (when both
 *      carry figures), else a least-squares line over all points of two or
 *      more sizes, predicts the boundary, and the search proposes the
 *      untried grid size at the prediction, clamped inside the open
 *      bracket: when the prediction sits at an end of the bracket, the
 *      size next to that end, so that a right guess is confirmed by one
 *      more trial.  A clamped guess that does not end the search is not
 *      repeated, and there are at most two model proposals in a row:
 *      then one bisection step, so that a wrong model costs a bounded
 *      number of trials.
 *   2. Ramp.  With nothing failed yet and no model: double from MIN, so
 *      that a huge range does not open with a doomed trial.
 *   3. Bisection between the largest size seen to fit and the smallest
 *      seen to fail.
 * Without memory figures this is ramp-then-bisect: at most about
 * 2*log2(range) trials.
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
};

struct search_probe {
    long value;
    int fit;
    int inferred;         /**< not run here: known from another cell */
    double need_bytes;
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
    int use_model;         /**< 1 (default): allow model jumps */
    int model_streak;      /**< model proposals since the last bisection */
    int model_clamped;     /**< the last model proposal was clamped to the bracket */
    int model_refuted;     /**< ... and did not end the search: bisect next */
    enum search_how last_how; /**< how the last proposal was chosen */
};

/** Returns 0, or -1 when min < 1, max < min or step < 1. */
int search_init(struct search *s, long min, long max, long step);
void search_release(struct search *s);

/** Propose the next size: returns 1 and sets *value, or 0 when done. */
int search_next(struct search *s, long *value);

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
 * The fitted memory line bytes = a + b * size, from the points with
 * memory figures; returns 0 when at least two distinct sizes gave one.
 */
int search_model(const struct search *s, double *a, double *b);

#endif
