/* SPDX-License-Identifier: MIT */
/*
 * guide: the replay probe in the search (--replay).
 *
 * For each cell of the space (grad_accum x checkpointing) the guide asks
 * for two small recording trials (micro-batch R and R + STEP, R the
 * smallest grid size >= 2: batch 1 takes other code paths), in which the
 * in-process probe records the allocation trace of two training steps
 * (AUTOBATCH_RECORD), one trace per process (rank).  From the two traces
 * of each rank replay.h fits each allocation and predicts the largest
 * size that fits the capacity; P is the smallest over the ranks (the
 * rank that needs the most decides, and the note and the results name
 * it; a rank whose model declines declines the cell).  The prediction
 * is a hint, never a fact: P is seeded into the cell's search and run
 * first (space_seed), then its neighbour: P + STEP when P fitted, P -
 * STEP when it failed (P + STEP would fail too).  So when the prediction
 * is right, or one step off, the cell's boundary is known after four
 * trials.  When it is further off, and only two sizes were recorded, a
 * third size (R + 2 STEP) is recorded as a held-out check (a quadratic
 * replaces the line for the allocations it refutes, and the bytes
 * outside the step are calibrated on three sizes) and the new prediction
 * is tried once more the same way; after that the cell's own search goes
 * on from the bracket as it would without the guide.  A cell whose traces do not align, whose two
 * recorded steps differ, or whose recording trial failed is declined
 * with the reason, and searched without the guide.
 *
 * Cells seeded from the warm-start cache are not guided (the cache is
 * better evidence).  Every prediction, whether the trials confirmed it,
 * and its error go into the results file ("replay").
 *
 * Life cycle: guide_init(); per trial: guide_next() (may change the size
 * to run and says whether the trial records), then guide_record() after
 * it; guide_json() for the results; guide_release().
 */
#ifndef AB_GUIDE_H
#define AB_GUIDE_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"
#include "search/space.h"

struct json_t;

enum guide_state {
    GUIDE_RECORDING,   /**< recording trials remain */
    GUIDE_CONFIRMING,  /**< P and P + STEP seeded */
    GUIDE_DONE,        /**< the prediction was tested; the search goes on alone */
    GUIDE_DECLINED,    /**< no usable model (see why) */
    GUIDE_OFF,         /**< not guided (warm start, range too small) */
};

struct guide_cell {
    enum guide_state state;
    long rec[3];                  /**< sizes to record */
    size_t nrec, nwant;           /**< recorded so far, wanted */
    struct replay_trace *trace[3];  /**< per recorded size, one trace per rank */
    size_t ntrace[3];
    struct replay_ranks models;   /**< one model per rank (replay.h) */
    int have_model;
    size_t decider;               /**< the rank (index in models.m) whose need decided */
    long *rank_pred;              /**< each rank's own largest fit, at the last prediction */
    int64_t *rank_need;           /**< ... and its bytes there */
    long predicted;               /**< P; -1 none */
    long checking;                /**< the size whose trial settles the prediction next */
    long need_at;                 /**< the size of the two figures below; -1 */
    int64_t predicted_need;       /**< bytes need_at needs by the model; -1 */
    int64_t measured_need;        /**< bytes a fitting trial at need_at measured; -1 */
    int rounds;                   /**< predictions made (at most 2) */
    long first_predicted;         /**< the first round's P */
    char why[512];                /**< GUIDE_DECLINED / GUIDE_OFF: the reason */
};

struct guide {
    struct guide_cell *cells;
    size_t ncells;
    int64_t capacity;             /**< bytes the predictions are for */
    const char *capacity_from;    /**< "trial-memory-limit" or "gpu" */
    const char *keep_dir;         /**< --keep-traces: a copy of each trace goes here */
};

/**
 * The name a kept trace has in --keep-traces DIR, which autobatch predict
 * reads back: accum<G>-ckpt<on|off>-b<B>.txt for rank 0 (and a job of
 * one process), accum<G>-ckpt<on|off>-b<B>-rank<R>.txt for the others.
 */
#define GUIDE_TRACE_NAME "accum%ld-ckpt%s-b%ld.txt"
#define GUIDE_TRACE_NAME_RANK "accum%ld-ckpt%s-b%ld-rank%ld.txt"

/** Set up a guide for every cell of sp.  Returns 0, or -1 (ENOMEM). */
int guide_init(struct guide *g, const struct space *sp, int64_t capacity, const char *capacity_from);
void guide_release(struct guide *g);

/**
 * The search proposed *micro for cell ci: the guide may replace it by a
 * recording size.  Returns 1 when this trial must record a trace, else 0.
 */
int guide_next(struct guide *g, struct space *sp, size_t ci, long *micro);

/**
 * After a trial of micro in cell ci: recording (as guide_next said),
 * whether it fitted, the bytes it measured (-1 unknown) and the trace
 * directory (recording trials).  Writes what to tell the user into note
 * (empty: nothing) and may seed the cell's search.
 */
void guide_record(struct guide *g, struct space *sp, size_t ci, long micro, int recording, int fit,
                  int64_t measured_need, const char *trace_dir, char *note, size_t notelen);

/** The results file's "replay" object (see README), or NULL (ENOMEM). */
struct json_t *guide_json(const struct guide *g, const struct space *sp);

#endif
