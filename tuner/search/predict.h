/* SPDX-License-Identifier: MIT */
/*
 * predict: `autobatch predict`'s engine.  The traces --keep-traces kept
 * (accum<G>-ckpt<on|off>-b<B>.txt, guide.h) are grouped by cell; each
 * cell's two or three smallest sizes fit a replay model per rank
 * (probes/replay.h; a job of several processes keeps one trace per rank
 * and size, the others named ...-b<B>-rank<R>.txt) that predicts the
 * largest micro-batch for a capacity no trial ran on, the rank that needs
 * the most deciding,
 * and, with a GPU, the model is replayed there with real cudaMalloc
 * while memory is held back down to that capacity (probes/devmem.h).
 * Predictions only: nothing is run, and nothing here prints; the
 * subcommand words the answers (tuner/cli/subcmd.c).
 *
 * Life cycle: predict_scan() fills an array of struct predict_cell
 * (released by predict_scan_release()); predict_cell() answers one into
 * a struct predict_answer (plain values, nothing to release).
 */
#ifndef AB_PREDICT_H
#define AB_PREDICT_H

#include <stddef.h>
#include <stdint.h>

struct devmem_ops;

/** One cell's kept traces: up to three sizes, smallest first, each with
 *  every rank's trace (the rank is read from the trace itself). */
struct predict_cell {
    long accum;
    int ckpt;
    long b[3];
    char **path[3];       /**< npath[k] files at b[k] (malloc'd) */
    size_t npath[3];
    size_t n;
};

/**
 * The cells of the traces in dir, at most max of them (further cells are
 * left out), each with its three smallest sizes.  Returns the number of
 * cells (0: no trace files), or -1 with errno when dir cannot be read or
 * memory runs out.
 */
long predict_scan(const char *dir, struct predict_cell *cells, size_t max);
void predict_scan_release(struct predict_cell *cells, size_t n);

/** What the GPU replay of a cell's model showed. */
enum predict_gpu {
    PREDICT_GPU_NONE = 0,   /**< not asked for (no ops) */
    PREDICT_GPU_CPU_TRACES, /**< not replayed: the traces were recorded on the CPU */
    PREDICT_GPU_NO_HOLD,    /**< not replayed: memory could not be held back (why) */
    PREDICT_GPU_FAILED,     /**< the replay failed (why) */
    PREDICT_GPU_DONE,       /**< gpu_fit, gpu_need, held, left */
};

/** One cell's answer. */
struct predict_answer {
    int ok;               /**< a model was fitted; else why */
    char why[512];
    long fit;             /**< the largest grid size that fits; < min: none */
    int64_t need;         /**< its bytes (min's when none fits) */
    size_t ranks;         /**< ranks modelled (1: a job of one process) */
    long rank;            /**< the rank whose need decided fit */
    long next_rank;       /**< with ranks > 1: the rank with the next smallest answer */
    long next_fit;        /**< ... and that answer */
    enum predict_gpu gpu;
    long gpu_fit;         /**< replayed on the GPU: as fit (the smallest over ranks) */
    long gpu_rank;        /**< the rank that decided gpu_fit */
    int64_t gpu_need;     /**< peak reserved + outside, bytes */
    uint64_t held, left;  /**< bytes held back, and left to the allocator */
};

/**
 * c's model fitted and asked for the largest size of min..max (by step)
 * within capacity; with ops (an opened device, devmem_cuda_open) also
 * replayed there.  Fills *a; c needs two sizes or more.
 */
void predict_cell(const struct predict_cell *c, long min, long max, long step, uint64_t capacity,
                  const struct devmem_ops *ops, struct predict_answer *a);

#endif
