/* SPDX-License-Identifier: MIT */
/*
 * inproc: the C side of the in-process probe (probes/python/).
 *
 * Every Python process of a trial runs probes/python/sitecustomize.py at
 * start-up (autobatch puts its directory first on PYTHONPATH).  When torch
 * is imported it appends one JSON object per line to the trial's probe
 * file (AUTOBATCH_PROBE): a "torch" line once per process, a "step" line
 * after each real optimizer step, an "error" line when it could not hook
 * something.  This module writes the probe's source where trials find it
 * and parses its lines.  It never prints.
 */
#ifndef AB_INPROC_H
#define AB_INPROC_H

#include <stddef.h>

enum inproc_kind { INPROC_NONE = 0, INPROC_TORCH, INPROC_STEP, INPROC_ERROR };

/* Bounds on what a line may claim; anything outside makes it no event. */
#define INPROC_MAX_STEP 1000000000L
#define INPROC_MAX_RANK 65535L
#define INPROC_MAX_BYTES (1LL << 56)

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
    char text[160];        /**< torch version ("torch"), or what failed ("error") */
    char hook[16];         /**< "global" or "wrap" ("torch") */
};

/**
 * Parse one line of the probe file.  Returns 1 with *ev filled for a
 * well-formed line whose numbers are in range, else 0 (ev->kind NONE).
 */
int inproc_parse_line(const char *line, size_t len, struct inproc_event *ev);

/**
 * Write the probe's source into DIR/sitecustomize.py (DIR is made, 0700).
 * Returns 0, or -1 with a reason in err.
 */
int inproc_install(const char *dir, char *err, size_t errlen);

#endif
