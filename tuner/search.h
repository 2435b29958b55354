/*
 * search: bisection on the micro-batch size within one cell of the space.
 *
 * The candidates are the grid MIN, MIN+STEP, ... up to MAX.  The search
 * ramps up from MIN by doubling, so that a huge range does not open with a
 * doomed trial, until a size fails (or the top of the range fits); then it
 * bisects between the largest size seen to fit and the smallest seen to
 * fail.  That takes at most about 2*log2(range) trials.
 *
 * Monotonicity is checked, not assumed: when a size fails although a
 * larger one fitted, the failing size is tried once more.  If it fits the
 * second time the first failure was a fluke; if it fails again, the
 * smaller failure stands and the larger fit is disregarded.  Either way it
 * is recorded as a contradiction for the results file.  No other size is
 * ever tried twice.
 *
 * Life cycle: struct search s; search_init(&s, min, max, step); loop
 * { search_next(&s, &v) -> run v -> search_record(&s, v, fit) } until
 * search_next returns 0; read the answer with search_max_fit() and
 * friends; search_release(&s).  Pure logic: no I/O.
 */
#ifndef AB_SEARCH_H
#define AB_SEARCH_H

#include <stddef.h>

struct search_probe {
    long value;
    int fit;
};

struct search_contradiction {
    long value;     /**< the size that failed below a larger fit */
    long larger_fit;/**< the larger size that had fitted */
    int retest_fit; /**< what the re-test of value said */
};

struct search {
    long min, max, step;   /**< the grid; max is snapped down onto it */
    struct search_probe *probes;
    size_t nprobes, alloc;
    struct search_contradiction *contra;
    size_t ncontra;
};

/** Returns 0, or -1 when min < 1, max < min or step < 1. */
int search_init(struct search *s, long min, long max, long step);
void search_release(struct search *s);

/** Propose the next size: returns 1 and sets *value, or 0 when done. */
int search_next(const struct search *s, long *value);

/** Record what a trial of `value` showed: fit (1) or failed (0). */
void search_record(struct search *s, long value, int fit);

/** Largest size that fitted below every confirmed failure; -1 if none. */
long search_max_fit(const struct search *s);

/** Smallest confirmed failing size; -1 if none. */
long search_min_fail(const struct search *s);

/** 1 when the top of the range fitted: the answer is bounded by MAX. */
int search_bounded(const struct search *s);

#endif
