/* SPDX-License-Identifier: MIT */
/*
 * inproc: the C side of the in-process probe (probes/python/).
 *
 * Every Python process of a trial runs probes/python/sitecustomize.py at
 * start-up (autobatch puts its directory first on PYTHONPATH).  When torch
 * is imported it appends one JSON object per line to the trial's probe
 * file (AUTOBATCH_PROBE): a "torch" line once per process, a "step" line
 * after each real optimizer step, a "mem" line (where the memory goes) at
 * a process's second optimizer step or at its end when it fails before
 * that ("at":"failure"), a "worst" line when it put a loader's
 * largest batches first, an "error" line when it could not hook
 * something (the lines' shapes are documented at the top of
 * sitecustomize.py).  This module writes the probe's source where trials
 * find it, parses its lines, and sums up what the model got per step
 * (struct inproc_seen).  It never prints.
 */
#ifndef AB_INPROC_H
#define AB_INPROC_H

#include <stddef.h>
#include <stdint.h>

enum inproc_kind { INPROC_NONE = 0, INPROC_TORCH, INPROC_STEP, INPROC_ERROR, INPROC_WORST,
                   INPROC_MEM };

/* Bounds on what a line may claim; anything outside makes it no event. */
#define INPROC_MAX_STEP 1000000000L
#define INPROC_MAX_RANK 65535L
#define INPROC_MAX_BYTES (1LL << 56)
#define INPROC_MAX_ELEMS 1e18 /**< a batch's size in elements or a length */
#define INPROC_WORST_SIZES 8

/**
 * The worst case first (a "worst" line): which of a DataLoader's batches
 * the trial met first.  All zero (mode "") when no line was seen; the
 * numbers below are meaningful only when mode is "lengths" or "scan".
 */
struct inproc_worst {
    char mode[8];         /**< "lengths", "scan", "off", "none"; "" no record */
    char signal[64];      /**< where the lengths came from ("dataset.lengths"), or "" */
    long rank;            /**< the rank that planned it */
    long batches_seen;    /**< batches looked at */
    int whole;            /**< that was the whole iteration (epoch) */
    double elems;         /**< the largest batch's size in elements; <0 unknown */
    double longest;       /**< its longest sample; <0 unknown */
    long position;        /**< its place in the loader's own order, from 0; <0 unknown */
    double median;        /**< the median size of the batches seen; <0 unknown */
    long first;           /**< batches moved to the front */
    double scan_s;        /**< seconds spent planning */
    double sizes[INPROC_WORST_SIZES]; /**< the largest sizes seen, largest first */
    int nsizes;
};

/**
 * Where the memory goes (a "mem" line): one process's breakdown at the
 * end of its second optimizer step, or (failure) when it ended before
 * that step: then also what the gradients and the optimizer's state take
 * once allocated.  device "" when no line was seen.  Byte counts are -1
 * when unknown: the peaks, held and outside are known on CUDA only.
 */
struct inproc_mem {
    char device[8];       /**< "cuda", "cpu", "other"; "" no record */
    long rank;            /**< the rank that said it; -1 unknown */
    long step;            /**< the optimizer step it was taken at */
    long long params;     /**< distinct storages of the parameters on the device */
    long long grads;      /**< ... of their gradients */
    long long optim;      /**< ... of the optimizer's state tensors */
    long long peak_alloc; /**< the step's peak allocated (CUDA); -1 unknown */
    long long peak_res;   /**< the step's peak reserved (CUDA); -1 unknown */
    long long held;       /**< allocated at the step's end (CUDA); -1 unknown */
    long long outside;    /**< device memory outside the allocator (CUDA); -1 unknown */
    /* "at":"failure" lines only (failure 0: these are 0 and "") */
    int failure;          /**< said when the process ended before its second step */
    long long grads_expected; /**< the gradients once all exist; -1 unknown */
    long long optim_expected; /**< the optimizer's state once allocated; -1 unknown class */
    char optim_class[48]; /**< the optimizer's class ("Adam+SGD" for two); "" none seen */
};

struct inproc_event {
    enum inproc_kind kind;
    long pid;
    long rank;             /**< -1 unknown */
    long world;            /**< -1 unknown */
    long step;             /**< this process's optimizer steps so far */
    double t;              /**< CLOCK_MONOTONIC seconds at the step's end */
    long long reserved;    /**< CUDA peak bytes reserved in the step; -1 unknown */
    long long allocated;   /**< CUDA peak bytes allocated in the step; -1 unknown */
    long long held;        /**< CUDA bytes allocated at the step's end; -1 unknown */
    long batch_size;       /**< the training DataLoader's batch size; -1 unknown */
    long batch_len;        /**< leading dimension of the last batch; -1 unknown */
    long batches;          /**< batches fetched since the previous step; -1 unknown */
    long long vm_peak_kb;  /**< the process's VmPeak (AUTOBATCH_VMPEAK set); -1 unknown */
    /* What the model got since the previous step (the outermost module's forwards). */
    long seen;             /**< leading dimensions of the first tensor argument summed; -1 unknown */
    long forwards;         /**< forwards of the outermost module; 0 none seen or unknown */
    long long elems;       /**< most elements of one forward's first tensor; -1 unknown */
    long long tokens;      /**< leading x second dimension summed (padded frames/tokens); -1 unknown */
    /* CUDA, from the caching allocator and cuMemGetInfo at the step's end. */
    long long retries;     /**< allocator free-and-retry passes during the step; -1 unknown */
    long long outside;     /**< device memory outside the allocator (total - free - reserved); -1 unknown */
    long long cuda_total;  /**< the device's total as CUDA sees it (first CUDA step); -1 unknown */
    struct inproc_worst worst; /**< a "worst" line */
    struct inproc_mem mem;     /**< a "mem" line */
    char text[160];        /**< torch version ("torch"), or what failed ("error") */
    char hook[16];         /**< "global" or "wrap" ("torch") */
};

/**
 * Parse one line of the probe file.  Returns 1 with *ev filled for a
 * well-formed line whose numbers are in range, else 0 (ev->kind NONE).
 */
int inproc_parse_line(const char *line, size_t len, struct inproc_event *ev);

/**
 * What the model got per optimizer step, from the "step" lines of the
 * process whose steps count: zero-initialise (INPROC_SEEN_INIT), add each
 * step with inproc_seen_add(), read the medians with inproc_seen_median(),
 * free with inproc_seen_release().  Steps whose forwards were not all
 * seen are left out.  At most INPROC_SEEN_MAX steps are kept.
 */
#define INPROC_SEEN_MAX 100000
struct inproc_seen_step {
    long step, seen, forwards;
    long long tokens; /**< -1 unknown */
};
struct inproc_seen {
    struct inproc_seen_step *v;
    size_t n, alloc;
};
#define INPROC_SEEN_INIT { NULL, 0, 0 }

/** Add one "step" event (others are ignored); -1 when out of memory. */
int inproc_seen_add(struct inproc_seen *s, const struct inproc_event *ev);

struct inproc_seen_summary {
    long steps;            /**< steps the medians are taken over; 0: nothing known */
    long seen_per_step;    /**< median samples the model got per optimizer step */
    long forwards_per_step;/**< median forwards per optimizer step */
    long per_forward;      /**< median samples per forward (the micro-batch it got) */
    long long tokens_per_step; /**< median padded frames/tokens per step; -1 unknown */
};

/**
 * Medians over the steps after the first `warmup` (over all of them when
 * none is after it).  Fills *out (all zero, tokens -1, when no step is
 * known); returns out->steps.
 */
long inproc_seen_median(const struct inproc_seen *s, long warmup, struct inproc_seen_summary *out);

void inproc_seen_release(struct inproc_seen *s);

/**
 * Write the probe's source into DIR/sitecustomize.py (DIR is made, 0700).
 * Returns 0, or -1 with a reason in err.
 */
int inproc_install(const char *dir, char *err, size_t errlen);

#endif
