/* SPDX-License-Identifier: MIT */
/*
 * space: the search space micro-batch x gradient accumulation x
 * activation checkpointing, and the order in which its cells are tried.
 *
 * A cell is one (grad_accum, checkpointing) pair; each has its own
 * micro-batch search (search.h).  What one trial shows is shared with the
 * other cells as inferences, under two assumptions stated in the README:
 * gradient accumulation does not change peak memory (gradients accumulate
 * in place), and checkpointing never uses more memory than not.  So:
 *   - a fit at micro m without checkpointing is a fit at m everywhere;
 *   - a failure at m with checkpointing is a failure at m everywhere;
 *   - otherwise results are shared between cells of the same
 *     checkpointing setting.
 * An inference never replaces a trial: a cell's own trials win, so a
 * framework where accumulation does cost memory is caught by the first
 * measurement that fails.
 *
 * Free mode (no global batch): each cell's boundary is searched (with
 * the inferences, the second and later cells usually need none), then the
 * cell's largest fit is measured and, when it measured a speed, up to
 * SPACE_MAX_EXTRA more sizes find where throughput stops improving (near
 * capacity the allocator frees and retries and every step slows): a
 * step-time line from sizes far below the max-fit, then bisection for the
 * knee where steps leave it.  A later cell of the same checkpointing
 * setting measures the earlier one's fastest size instead; a cell with
 * checkpointing that by the line cannot beat the fastest point measured
 * is pruned.  Checkpointing is measured only at sizes that do not fit
 * without it, unless checkpointing was asked for alone (--checkpointing
 * on).
 *
 * Global-batch mode: micro = global / (grad_accum x world_size) must be a
 * whole number within --batch; each such cell is one candidate, tried in
 * order of increasing micro-batch so that one failure rules out every
 * larger cell.
 *
 * Life cycle: space_init(); loop { space_next() -> run -> space_record() }
 * until space_next() returns 0; read the cells; space_release().  Pure
 * logic: no I/O.
 */
#ifndef AB_SPACE_H
#define AB_SPACE_H

#include <stddef.h>

#include "search/search.h"

enum cell_state {
    CELL_SEARCHING,   /**< its boundary search runs */
    CELL_MEASURING,   /**< boundary known; throughput points remain */
    CELL_DONE,
    CELL_SKIPPED,     /**< nothing to run (see skip_reason) */
};

struct cell {
    long grad_accum;
    int checkpointing;
    long fixed_micro;        /**< global-batch mode: the one size; -1 in free mode */
    struct search search;
    enum cell_state state;
    const char *skip_reason; /**< static text, for CELL_SKIPPED or a pruned cell */
    long seeds[2];           /**< sizes to try first (a cached boundary); -1 none */
    int extra;               /**< throughput trials run after the max-fit */
    int pruned;              /**< its search stopped: it could not beat the fastest point */
    long seed_max_fit;       /**< the cached max-fit; -1 none */
    long seed_fastest;       /**< the cached fastest micro-batch; -1 none */
    long seed_near[2];       /**< the cached sizes measured next to it, below and above; -1 none */
    long remeasured;         /**< the max-fit measured again alone (shared_speeds); 0 none */
};

struct space_opts {
    long batch_min, batch_max, batch_step;
    const long *grad_accum; size_t ngrad_accum;
    int ckpt_off, ckpt_on;   /**< which checkpointing settings to search */
    int ckpt_forced;         /**< measure checkpointing even where it is not needed */
    long global_batch;       /**< <= 0: free mode */
    long world_size;
    int use_model;           /**< allow the memory model's jumps */
    int open_mid;            /**< no memory figures will come: bisect from the middle */
    int shared_speeds;       /**< trials may run side by side: a speed measured then is
                                  not recorded, and the max-fit is measured again alone */
    int memory_only;         /**< boundary trials may measure memory alone
                                  (space_memory_only): the max-fit and the throughput
                                  points are then measured in full trials */
};

#define SPACE_MAX_REQUESTS 4

struct space {
    struct space_opts o;
    struct cell *cells;
    size_t ncells;
    size_t cur;              /**< the cell being worked on */
    struct { size_t cell; long micro; } req[SPACE_MAX_REQUESTS]; /**< repeats asked for */
    size_t nreq;
    int from_request;        /**< the last space_next answered a request */
};

/**
 * Build the cells.  Returns 0, or -1 with a reason (e.g. no cell of a
 * global batch gives a whole micro-batch within the range).
 */
int space_init(struct space *sp, const struct space_opts *o, char *err, size_t errlen);
void space_release(struct space *sp);

/** The next trial: returns 1 with *cell and *micro set, 0 when all is done. */
int space_next(struct space *sp, size_t *cell, long *micro);

#define SPACE_MAX_ROUND 64

/**
 * Up to n trials to run side by side (one round): while a cell searches
 * for its boundary, n sizes of that cell (search_next_n); when it
 * measures throughput, or answers a request, one.  Returns how many were
 * written to cell[] and micro[] (0: all is done).
 */
size_t space_next_round(struct space *sp, size_t n, size_t *cell, long *micro);

/**
 * Ask for one more trial of a size a cell already ran (a noisy
 * measurement measured again); space_next answers requests first.
 * Returns 0, or -1 when the queue is full.
 */
int space_request(struct space *sp, size_t cell, long micro);

/**
 * A size the cell's finished search had taken for a fit failed later (the
 * choice's confirmation run): its boundary search runs again below it.
 * A pruned or skipped cell stays as it is.
 */
void space_reopen(struct space *sp, size_t cell);

/**
 * Is the trial space_next just gave for this cell a memory-only one (a
 * boundary trial whose speed nothing needs)?  0 for the throughput
 * points, the max-fit's measurement, a request, a global-batch cell's one
 * size, and a checkpointing cell's first trial when another cell has a
 * speed (its own speed may prune it, space_cannot_win).
 */
int space_memory_only(const struct space *sp, size_t cell);

/** Record a trial's outcome for a cell; shares it with the other cells. */
void space_record(struct space *sp, size_t cell, const struct search_obs *obs);

/** Seed a cell with a cached boundary: its two sizes are tried first. */
void space_seed(struct space *sp, long grad_accum, int checkpointing, long max_fit, long min_fail);

/**
 * Seed a cell with the cached fastest micro-batch and the measured sizes
 * next to it (near[0] below, near[1] above; -1 none): when the cached
 * boundary is confirmed, these are the cell's throughput points, the old
 * choice and its neighbours measured again (the knee is not searched
 * again).  A size that no longer fits is skipped.
 */
void space_seed_fastest(struct space *sp, long grad_accum, int checkpointing, long fastest,
                        const long near[2]);

/** The micro-batch of the cell's fastest measured fit; -1 none. */
long space_fastest(const struct cell *c);

/**
 * The sizes with a measured speed next to `around` in the cell: near[0]
 * the largest below it, near[1] the smallest above it; -1 none.
 */
void space_measured_near(const struct cell *c, long around, long near[2]);

#endif
