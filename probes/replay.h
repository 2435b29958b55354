/* SPDX-License-Identifier: MIT */
/*
 * replay: predict the memory a training step needs at any micro-batch
 * from the allocation traces of two or three small trials.
 *
 * The in-process probe records, under AUTOBATCH_RECORD, every allocation
 * and free of two training steps of one process (sitecustomize.py's
 * _Recorder writes the text format read here).  Recorded at micro-batch
 * b1 and b2, a training step makes the same allocations in the same
 * order, only larger: the traces align one to one, and each size is
 * exactly a + k*b (constant tensors have k = 0).  With a third size the
 * linear fit is checked on it and, where it is wrong (a B x B attention
 * matrix), a quadratic through the three is used instead.
 *
 * One exception: a kernel may switch to another code path as the batch
 * grows (PyTorch's reductions take a global buffer and semaphores once
 * the rows are many: a bias gradient at micro-batch 4 and not 2 or 3).
 * The largest recorded size then makes blocks the smaller ones do not.
 * When they are transient (each freed by the step that made it, as a
 * workspace is) and at most 1/8 of the step, they are modelled from the
 * smallest size that makes them on, at the size recorded (such a buffer
 * is bounded by the device's grid, not the batch); otherwise the traces
 * do not align and the model declines.
 *
 * The model declines, with a reason, whenever that premise fails: a
 * trace cut short, two steps of one trial that differ in more than a few
 * events (data-dependent shapes: variable-length batches; the few that a
 * logging call allocates in one step and not the next are left out),
 * traces of different lengths or
 * different allocation/free order, a size that would go negative.  The
 * search then runs as it would without the probe.
 *
 * What a size needs:
 *   - CPU (the capacity is an address-space cap, --trial-memory-limit):
 *     the process's address space when the step starts (VmSize at the
 *     recording's start, the largest of the recorded sizes') plus the
 *     step's peak live bytes at the new size, and at least the peak the
 *     process reached before its steps (start-up, data preparation).  This holds when glibc's
 *     malloc returns freed large blocks at once (a fixed mmap threshold,
 *     one arena), which autobatch sets for such trials;
 *   - CUDA: PyTorch's caching allocator, simulated (casim.h), plus the
 *     device memory outside it measured at record time.  The simulated
 *     allocator starts where the recorded step started: the model's own
 *     memory (weights, optimizer state, buffers, kept gradients: the
 *     blocks live at the recording's start that no recorded step frees)
 *     is seeded first, as the memory-history snapshot laid it out when
 *     the trace has one (`segment`/`block` lines), else as one block of
 *     the header's allocated bytes less the blocks the steps free; then
 *     the blocks the first step frees; then REPLAY_STEPS steps back to
 *     back, every free releasing the block its address names (made in
 *     the same step, the step before, or before the recording), and the
 *     need is the peak reserved over them (the steady state: a step's
 *     fragmentation is left to the next).
 *
 * Pure logic and file reading: no process is run here.
 */
#ifndef AB_REPLAY_H
#define AB_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "casim.h"

/** A block of the layout at the recording's start (a memory-history
 *  snapshot's segments): its address, size, and whether it was live. */
struct replay_block {
    uint64_t addr, size;
    int live;
};

/** A segment of that layout: blocks blk[first .. first + n - 1], in
 *  address order, tiling it. */
struct replay_segment {
    uint64_t addr, size;
    char pool;            /**< 's' small (2 MiB segments) or 'l' large */
    size_t first, n;
};

/** One process's recorded steps: signed sizes (+ alloc, - free) in order. */
struct replay_trace {
    char device;          /**< 'c' (CPU) or 'g' (CUDA): the events kept */
    int64_t *ev[2];       /**< the two steps */
    uint64_t *addr[2];    /**< each event's address (frees pair with allocations by it) */
    size_t nev[2];
    int64_t vm_peak;      /**< VmPeak before recording, bytes; -1 unknown */
    int64_t vm_size;      /**< VmSize when recording started, bytes; -1 unknown */
    int64_t cuda_reserved, cuda_allocated, cuda_outside; /**< at record start; -1 off CUDA */
    int64_t cuda_total, cuda_free;       /**< cuMemGetInfo at record start; -1 unknown */
    int64_t reserved_end, allocated_end; /**< the allocator's figures after the recorded
                                              steps; -1 unknown (no self-check then) */
    char alloc_conf[256]; /**< PYTORCH_CUDA_ALLOC_CONF as the trainer saw it ("" unset) */
    char backend[32];     /**< the allocator backend: "native", "cudaMallocAsync"; "" unknown */
    long streams;         /**< streams the recorded steps allocated on; 0 unknown */
    long graphs;          /**< allocations in CUDA graphs' private pools; 0 none or unknown */
    struct replay_segment *seg; /**< the layout at the recording's start (memory history) */
    size_t nseg;
    struct replay_block *blk;
    size_t nblk;
    long rank;            /**< the process's rank (0 without torch.distributed) */
    long world;           /**< the job's ranks; 0 unknown */
};

#define REPLAY_TRACE_INIT                                                                   \
    { .device = 'c', .vm_peak = -1, .vm_size = -1, .cuda_reserved = -1,                     \
      .cuda_allocated = -1, .cuda_outside = -1, .cuda_total = -1, .cuda_free = -1,          \
      .reserved_end = -1, .allocated_end = -1 }

/** The largest trace file read (a few hundred thousand events). */
#define REPLAY_MAX_BYTES ((size_t)64 * 1024 * 1024)

/**
 * Read a trace file.  GPU events are kept when there are any, else the
 * CPU ones.  Returns 0, or -1 with a one-line reason (unreadable, not a
 * trace, cut short: no `end` line or a count that disagrees).
 */
int replay_trace_load(const char *path, struct replay_trace *t, char *err, size_t errlen);
void replay_trace_release(struct replay_trace *t);

/** A free's allocation in the model (replay_model.pair): below n, event
 *  pair[i] of the same step; n + j, event j of the step before; these
 *  two mark blocks that lived before the step (made before the
 *  recording), and frees whose allocation the model left out. */
#define REPLAY_PAIR_BEFORE ((size_t)-1)
#define REPLAY_PAIR_NONE ((size_t)-2)

/** Steps replayed back to back on the GPU: the peak of the last is steady. */
#define REPLAY_STEPS 3

struct replay_model {
    char device;
    size_t n;               /**< events of one step */
    double *a, *b, *c;      /**< |size(B)| = a + b*B + c*B*B */
    unsigned char *frees;   /**< event i frees (else it allocates) */
    int quadratic;          /**< a third size refuted the linear fit */
    size_t nconst, nlinear, nquad;
    long rec[3];            /**< the recorded micro-batches */
    size_t nrec;
    int64_t outside;        /**< bytes outside the step (see above) */
    int64_t floor;          /**< CPU: VmPeak before recording at the smallest recorded size
                                 (start-up, data preparation, two small steps) */
    size_t unsteady;        /**< events of a recorded step left out: in one step, not the other */
    /** Events only the largest recorded size makes: transient blocks (each
     *  freed in the step that made it) of a code path that switches on as
     *  the batch grows (a reduction's global buffer, a kernel's workspace).
     *  They are kept at their size there, for b >= from[i]; from is NULL
     *  when there are none (every event at every size). */
    long *from;
    size_t nswitched;
    /* GPU */
    size_t *pair;           /**< frees: their allocations by address (REPLAY_PAIR_*);
                                 NULL: a free takes the newest live block of its size */
    int64_t persistent;     /**< bytes live across the steps and not freed by them
                                 (weights, optimizer state), laid out as one block when
                                 there is no layout below */
    struct replay_segment *seg; /**< the persistent segments at the recording's start,
                                     their blocks live when persistent (else free) */
    size_t nseg;
    struct replay_block *blk;
    size_t nblk;
    long rank;              /**< the rank whose trace this is */
    int64_t cuda_total;     /**< the recording card's total as CUDA sees it; -1 unknown */
    char conf[256];         /**< PYTORCH_CUDA_ALLOC_CONF, as recorded */
    struct casim_config cfg; /**< what casim makes of it */
};

/** At most this many events (and 2% of a step's) may differ between the
 *  two recorded steps of one trial; they are left out of the model. */
#define REPLAY_MAX_UNSTEADY 64
/** Between trials, a larger one may make up to this fraction of its step
 *  (1/REPLAY_SWITCHED_DIV) in transient blocks the smaller one does not:
 *  a code path that switches on with the size (see replay_model.from). */
#define REPLAY_SWITCHED_DIV 8
/** ... and at most this many events. */
#define REPLAY_MAX_SWITCHED 1024

#define REPLAY_MODEL_INIT { .device = 'c', .cuda_total = -1 }

/**
 * Fit a model on n (2 or 3) traces recorded at batch[0] < batch[1] (<
 * batch[2]).  Returns 0, or -1 with the reason in why (the model
 * declined; m is left empty).
 */
int replay_fit(const struct replay_trace *t, const long *batch, size_t n, struct replay_model *m,
               char *why, size_t whylen);
void replay_model_release(struct replay_model *m);

/**
 * The card's capacity as CUDA sees it, for a search whose capacity came
 * from NVML (`nvml`, bytes): a CUDA model recorded with cuMemGetInfo's
 * total (cuda_total) takes the smaller of the two, so that capacity, free
 * memory and the outside bytes are one view of the card (an H200: NVML
 * 143771 MiB, CUDA 143155 MiB: 616 MiB that do not exist).  Otherwise
 * nvml unchanged.
 */
int64_t replay_capacity(const struct replay_model *m, int64_t nvml);

/**
 * Bytes that micro-batch b needs, judged against capacity (bytes; for
 * CUDA the caching allocator runs under it).  *fits says whether it fits.
 * Returns the bytes (the peak reserved on CUDA, the peak address space
 * on CPU), or -1 when the model does not extend to b (a size below 0).
 */
int64_t replay_need(const struct replay_model *m, long b, int64_t capacity, int *fits);

/**
 * The largest grid size (min, min+step, ... <= max) predicted to fit in
 * capacity; *need its bytes.  Returns min - 1 when even min does not fit
 * (then *need is min's).  Sizes are assumed to need more as b grows.
 */
long replay_predict(const struct replay_model *m, long min, long max, long step, int64_t capacity,
                    int64_t *need);

struct casim_device;

/**
 * replay_need() on a real device: b's step replayed by the caching
 * allocator with its segments reserved from dev (devmem.h), whose free
 * memory stands for the capacity less the model's outside bytes.  CUDA
 * models only.  Returns outside + peak reserved with *fits = 1; 0 with
 * *fits = 0 when the device ran out; -1 when the model does not extend
 * to b or is not a CUDA model; -3 on a device error.
 */
int64_t replay_need_on(const struct replay_model *m, long b, const struct casim_device *dev,
                       int *fits);

/**
 * replay_predict() with replay_need_on(): the largest grid size that fits
 * on the device.  Returns min - 1 when min does not fit, min - 2 on a
 * device error or a model that does not extend (then *need is < 0).
 */
long replay_predict_on(const struct replay_model *m, long min, long max, long step,
                       const struct casim_device *dev, int64_t *need);

/*
 * Every rank (issue 25, item 5).  A job of several processes records one
 * trace per process, and its ranks need not need the same memory: uneven
 * shards, logging or evaluation on rank 0, pipeline stages.  Each rank's
 * traces fit a model of their own, and the largest need decides: the
 * prediction is the smallest of the ranks' largest fits, and the answer
 * says which rank gave it.  A rank whose model declines makes the whole
 * replay decline with that rank's reason (its need is unknown, and
 * leaving it out could predict a size it cannot hold).
 */
struct replay_ranks {
    struct replay_model *m; /**< one per rank, lowest rank first */
    size_t n;
};

#define REPLAY_RANKS_INIT { NULL, 0 }

/**
 * Fit one model per rank.  t[k] holds nt[k] traces recorded at batch[k]
 * (k < n: two or three sizes, smallest first), one per rank in any order.
 * Every size must hold the same ranks, each once, and every rank below
 * the traces' world; otherwise, or when one rank's replay_fit declines,
 * returns -1 with the reason ("rank R: ...") and rs left empty.
 * Returns 0.
 */
int replay_fit_ranks(const struct replay_trace *const *t, const size_t *nt, const long *batch,
                     size_t n, struct replay_ranks *rs, char *why, size_t whylen);
void replay_ranks_release(struct replay_ranks *rs);

/**
 * replay_predict() for every rank; the smallest answer wins (the rank
 * that needs the most).  cuda_view: each rank's capacity is
 * replay_capacity(its model, capacity) (a capacity from NVML), else
 * capacity itself.  *decider: the index in rs->m of the rank that
 * decided (of ranks with the same answer, the one that needs the most
 * there, then the lowest); *need its bytes at the answer (at min when
 * nothing fits).  pred (NULL, or rs->n entries) gets each rank's answer
 * and rneed its bytes.
 */
long replay_predict_ranks(const struct replay_ranks *rs, long min, long max, long step,
                          int64_t capacity, int cuda_view, int64_t *need, size_t *decider,
                          long *pred, int64_t *rneed);

/**
 * replay_need() for every rank at b: the largest need, *fits when every
 * rank fits, *decider the index of the rank that needs the most.
 * Returns -1 when a model does not extend to b.
 */
int64_t replay_need_ranks(const struct replay_ranks *rs, long b, int64_t capacity, int cuda_view,
                          int *fits, size_t *decider);

#endif
