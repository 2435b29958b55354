/* SPDX-License-Identifier: MIT */
/*
 * results: everything a run found, and the results file of DESIGN.md 2.5.
 *
 * The controller appends one struct results_trial per trial as it ends
 * and fills the per-cell answers at the end; results_to_json() renders
 * the schema "autobatch.results/1" (the required keys, plus a few extra
 * ones documented in the README), and results_write() writes it
 * atomically, or to stdout for "-".  Unknown numbers are JSON null.
 *
 * Life cycle: struct results r = RESULTS_INIT; results_init(&r, argv);
 * results_add_trial() per trial; results_write(); results_release(&r).
 */
#ifndef AB_RESULTS_H
#define AB_RESULTS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "trial/trial.h"

struct results_trial {
    long id;
    long micro_batch, grad_accum;
    int checkpointing;
    enum trial_outcome outcome;
    int exit_code;          /**< -1: null */
    int signal;             /**< 0: null */
    double wall_s;
    double teardown_s;      /**< <0: null */
    long steps_measured;
    double step_time_s;     /**< <0: null */
    double step_time_mad_s; /**< <0: null */
    double samples_per_s;   /**< <0: null */
    int64_t peak_mem_bytes; /**< <0: null */
    char *evidence;         /**< owned; NULL: null */
    char *signature;        /**< owned; OOM signature name or NULL */
    int retest;             /**< this trial repeated an earlier candidate */
    const char *steps_from; /**< "probe", "report", "log" or NULL (static string) */
    /* What the in-process probe saw; probe_processes 0: it did not load. */
    int probe_processes;
    char probe_torch[32];   /**< torch version */
    char probe_hook[16];    /**< "global" or "wrap" */
    long probe_world;       /**< <0: null */
    long loader_batch;      /**< the training DataLoader's batch size; <0: null */
    long batches_per_step;  /**< DataLoader batches per optimizer step; <0: null */
    int64_t peak_allocated_bytes; /**< <0: null */
    int64_t peak_vm_bytes;  /**< the probe's VmPeak (--replay); <0: null */
    int recorded;           /**< a --replay recording trial (its profiled steps are slower) */
    long round;             /**< --gpus: the round it ran in; 0: trials ran one at a time */
    char devices[128];      /**< --gpus / Slurm: the CUDA_VISIBLE_DEVICES it got, or "" */
    int shared;             /**< it ran beside other trials: its speed is not kept */
    unsigned extra;         /**< knobs turned on beyond the search (KNOB_BIT of
                                 KNOB_PRECISION, KNOB_OPTIM8BIT, KNOB_SHARDING) */
    int memory_only;        /**< a boundary trial that ended at the probe's second
                                 optimizer step: memory only, no speed */
    /* What the model itself got, from the probe (results_trial_seen()); 0: null. */
    long batch_seen;        /**< samples per forward of the outermost module */
    long seen_per_step;     /**< samples per optimizer step */
    long forwards_per_step; /**< forwards per optimizer step */
    int64_t tokens_per_step;/**< padded frames/tokens per optimizer step */
    int64_t elems_max;      /**< most elements of one forward's first tensor */
    struct inproc_worst worst; /**< the batches the trial met first; mode "": null */
    struct inproc_mem mem;  /**< where the memory goes (the probe's "mem" line,
                                 results_trial_seen()); device "": null */
    /* The caching allocator's free-and-retry passes (results_trial_seen());
     * keys "alloc_retries", "alloc_retries_rank" and "at_edge" only when known. */
    int retries_known;      /**< the probe said them (CUDA) */
    long alloc_retries;     /**< the most of one rank, summed over its steps */
    long alloc_retries_rank;/**< that rank; <0: null */
};

/**
 * Copy what the probe saw the model get, and the worst-case record, from
 * a trial's result into its results entry (the keys "batch_seen",
 * "worst_case" and the probe object's "seen_per_step",
 * "forwards_per_step", "tokens_per_step", "elems_max"), where the memory
 * goes ("memory_breakdown"), and the
 * allocator's retries ("alloc_retries", "at_edge": a fit that needed
 * them is at the edge).
 */
void results_trial_seen(struct results_trial *t, const struct trial_result *tr);

/**
 * Where the memory goes (docs/results.md "memory_breakdown"): the parts
 * of a trial's breakdown in the order of results_mem_part_name
 * ("params", "grads", "optimizer", "activations", "cache", "outside",
 * "peak").
 */
#define RESULTS_MEM_PARTS 7
extern const char *const results_mem_part_name[RESULTS_MEM_PARTS];

/** One (grad_accum, checkpointing) cell's answer. */
struct results_cell {
    long grad_accum;
    int checkpointing;
    long max_fit;           /**< -1: null */
    long min_fail;          /**< -1: none seen */
    const char *bounded_by; /**< "batch.max" when the range's top fitted, else NULL */
    const char *skipped;    /**< why the cell ran no trial, or NULL */
    int inferred;           /**< max_fit was not established by this cell's own trials */
    long trials;            /**< trials run in this cell */
    /** The cell's memory line (the search's model): a fit of micro-batch m
     *  needs model_base + model_slope * m bytes; "memory_model" only when
     *  has_model. */
    int has_model;
    double model_base, model_slope;
};

/**
 * Everything on the command line that shaped the search and is not
 * already in "space" (the batch range, grad-accum list, checkpointing,
 * global batch, world size and headroom are): the results file's
 * "settings".  Durations are seconds; a zero duration or size is "none"
 * and becomes null.  known 0 (RESULTS_INIT): not recorded, "settings" is
 * null.  Strings are borrowed and must outlive the results.
 */
struct results_settings {
    int known;
    long steps, warmup;          /**< --steps, --warmup */
    int confirm;                 /**< 0: --no-confirm */
    long confirm_steps;          /**< --confirm's step bound; 0: none */
    double confirm_s;            /**< --confirm's time bound; 0: none */
    const char *worst_case;      /**< --worst-case off|auto|scan */
    double worst_case_scan_s;    /**< --worst-case-scan */
    int replay, probe, cache;    /**< --replay; not --no-probe; not --no-cache */
    double trial_timeout_s, hang_timeout_s, grace_s, budget_s; /**< 0: none */
    unsigned long long trial_mem_limit; /**< --trial-memory-limit bytes; 0: none */
    const char *gpus;            /**< --gpus, or NULL: one trial at a time */
    long gpus_per_trial;
};

struct results_contradiction {
    long grad_accum;
    int checkpointing;
    long micro_batch, larger_fit;
    int retest_fit;
};

struct results {
    char **command;          /**< owned copy, NULL-terminated */
    time_t started_at;
    char hostname[256];
    const char *preset;
    const char *unit;        /**< the batch knob's unit ("samples", "frames") */
    const char *config;      /**< --config path, or NULL */
    long batch_min, batch_max, batch_step;
    long *grad_accum; size_t ngrad_accum;
    int ckpt_off, ckpt_on;   /**< which checkpointing settings are searched */
    long global_batch;       /**< -1: null */
    long world_size;
    double headroom;         /**< --headroom as a fraction */
    struct results_gpu { int index; char name[96]; long long total; } *gpus;
    unsigned long long emulated; /**< --emulate-gpu-memory bytes; 0: real memory */
    const char *emulated_with;   /**< "preload" or "probe" when emulated */
    long long emulated_real_total; /**< the smallest real device's total when emulated */
    const char *launcher;    /**< "local" or "slurm" */
    long slots;              /**< trials run side by side (--gpus); 1 otherwise */
    long rounds;             /**< rounds of side-by-side trials; 0 without --gpus */
    long cancelled;          /**< side-by-side trials cancelled as pointless */
    /** Knobs beyond the batch ("knobs" in the results): which of those
     *  that change numerics the user allowed (--allow), and which the run
     *  turned on because micro_batch=1 fitted nowhere without them, in
     *  order, each with why (session_escalate). */
    const char *allowed[4];  /**< the knobs --allow gave, by name; NULL-ended */
    char skipped[512];       /**< allowed knobs skipped before the first trial, and why; "" none */
    struct results_turned {
        const char *knob;
        char why[512];
        const char *outcome; /**< "fits", "nothing fits", "command failed" */
    } turned_on[4];
    int nturned_on;
    int warm_start;          /**< the search started from the cache's boundaries */
    const char *cache_key;   /**< the warm start's cache entry (16 hex digits), or NULL */
    const char *cache_file;  /**< ... and its file, or NULL */
    long warm_cells;         /**< cells the cache seeded; 0 none */
    /** The capacity the headroom rule measured against (choose_capacity())
     *  and where it came from: "nvml", "cuda" (the probe's cuMemGetInfo),
     *  "emulated" (--emulate-gpu-memory), "oom-message" (PyTorch's OOM
     *  text), "trial-memory-limit"; capacity <= 0: unknown (source NULL). */
    double capacity;
    const char *capacity_source;
    int headroom_checked;    /**< -1: no headroom asked; 0: could not be checked for every
                                  candidate; 1: checked */
    long excluded;           /**< fitting configurations the headroom kept out; -1 unknown */
    struct results_settings settings;
    size_t ngpus;
    struct results_trial *trials; size_t ntrials;
    struct results_cell *cells; size_t ncells;
    struct results_contradiction *contra; size_t ncontra;
    const char *teardown;    /**< "pid-namespace" or "process-tree" (static), or NULL */
    struct json_t *replay;   /**< --replay's predictions (guide_json; owned), or NULL */
    struct json_t *run_with; /**< how to use the choice (results_run_with(); owned), or NULL */
    struct json_t *confirm;  /**< the choice's confirmation runs (results_add_confirm();
                                  owned), or NULL: none ran */
    int confirmed;           /**< the choice passed its confirmation run */
    struct json_t *trial_env; /**< what trials ran with beyond the user's environment
                                   (results_trial_env(); owned), or NULL */
    long best;               /**< index into trials, -1 when nothing chosen */
    long runner_up;          /**< the fastest other candidate, -1 none (results_init sets it) */
    double wall_s;
    int exit_status;
    int interrupted;
    char slurm_pending[128]; /**< why Slurm kept a trial pending past --slurm-pending; "" none */
    const char *slurm_target; /**< --slurm-targets, this run's one (PARTITION[:GRES_TYPE]); NULL none */
};
#define RESULTS_INIT { 0 }

/** Copy argv and note the start time and host.  Returns 0 or -1 (ENOMEM). */
int results_init(struct results *r, char *const *argv);
void results_release(struct results *r);

/** Append a trial (copies the strings).  Returns 0 or -1 (ENOMEM). */
int results_add_trial(struct results *r, const struct results_trial *t);
int results_add_cell(struct results *r, const struct results_cell *c);
/**
 * Append a confirmation run of the choice (--confirm) to the results
 * file's "confirm" list, apart from "trials".  Returns 0 or -1 (ENOMEM).
 */
int results_add_confirm(struct results *r, const struct results_trial *t);
int results_add_contradiction(struct results *r, const struct results_contradiction *c);

/**
 * Record how to use the choice, as the results file's optional
 * "run_with": argv is the command with the choice's knobs set (flags and
 * Hydra overrides), env the "NAME=value" variables it sets (both
 * NULL-terminated; env may be NULL).  Replaces an earlier record.
 * Returns 0 or -1 (ENOMEM; nothing recorded).
 */
int results_run_with(struct results *r, char *const *argv, char *const *env);

/**
 * Record the variables a trial ran with that the user's environment does
 * not have (or has with another value), besides autobatch's own
 * AUTOBATCH_* and the preset's knobs: names[i] "NAME=value", why[i] the
 * reason (static text), n entries.  The results file's "trial_env" lists
 * them, so that a reader can tell what else a trial saw (DESIGN.md 2.2).
 * Returns 0 or -1 (ENOMEM; nothing recorded).
 */
int results_trial_env(struct results *r, char *const *vars, const char *const *why, size_t n);

/**
 * Add a config file the choice is written into to "run_with" (after
 * results_run_with()): its path, the unified diff that applies the choice
 * (NULL: the file already holds it), and whether --write wrote it.
 * Returns 0, or -1 (ENOMEM, or no results_run_with() before).
 */
int results_run_with_file(struct results *r, const char *path, const char *diff, int written);

/** Two trials of one configuration (micro-batch, accumulation, checkpointing)? */
int results_same_config(const struct results_trial *a, const struct results_trial *b);

/** The index of the fit with a breakdown and the smallest micro-batch
 *  (the first of equals), or -1. */
long results_mem_smallest(const struct results *r);

/** The index of the choice's breakdown: the chosen trial's, else another
 *  fit of its configuration that has one; -1 none. */
long results_mem_choice(const struct results *r);

/** When no trial fits: the index of the trial that ran out of memory
 *  with the probe's breakdown at its failure and the smallest
 *  micro-batch (of equals, the first whose optimizer's state is known),
 *  or -1. */
long results_mem_failure(const struct results *r);

/**
 * Batch is not the problem (docs/results.md "memory_breakdown.failure"):
 * what the smallest size that failed held before any activation, from
 * results_mem_failure()'s trial.  Byte counts -1 unknown.
 */
struct results_nofit {
    long trial;             /**< its index in trials */
    long long params;       /**< the parameters */
    long long grads;        /**< their gradients, once all exist */
    long long grads_now;    /**< ... allocated when it failed */
    long long optim;        /**< the optimizer's state once allocated; -1 unknown class */
    long long optim_now;    /**< ... allocated when it failed */
    long long total;        /**< params + grads + optim (optim_now when unknown: a floor) */
    long long capacity;     /**< the run's capacity; -1 unknown */
    int exceeds;            /**< total > capacity: 1, 0, -1 unknown */
    int ckpt_tried;         /**< a trial ran with checkpointing on */
    int prec_tried;         /**< a trial ran with bf16 mixed precision on */
    const char *suggest[4]; /**< what to try next, in order: "checkpointing",
                                 "mixed_precision", "8bit_optimizer", "sharding" */
    int nsuggest;
};

/** Fill f; 0 (f zeroed) when results_mem_failure() finds no trial. */
int results_nofit_split(const struct results *r, struct results_nofit *f);

/** "memory_breakdown.failure" (new reference): results_nofit_split() as
 *  JSON with the trial's id and configuration; json null when it finds
 *  no trial. */
struct json_t *results_nofit_json(const struct results *r);

/** Did any trial fit? */
int results_any_fit(const struct results *r);

/**
 * A fit's samples/s pooled over every measured fit of its configuration
 * (the mean: a size measured again because it was noisy decides once, not
 * by its luckiest run); -1 unknown.
 */
double results_speed(const struct results *r, const struct results_trial *t);

/** A trial's relative spread: step-time MAD over its median; -1 unknown. */
double results_spread(const struct results_trial *t);

/**
 * Indices (into r->trials) of the Pareto frontier over fitting trials:
 * samples/s up, peak memory down (the micro-batch, then checkpointing on,
 * stand in for memory when it was not measured).  Fills out (room for
 * r->ntrials) and returns the count.
 */
size_t results_frontier(const struct results *r, long *out);

/** One trial as in the results file's trials[] (also --events).  Caller
 *  json_decref()s.  NULL on ENOMEM. */
struct json_t *results_trial_json(const struct results_trial *t);

/** Render the results file.  Caller json_decref()s.  NULL on ENOMEM. */
struct json_t *results_to_json(const struct results *r);

/** Write a rendered results document to path ("-": stdout), atomically.
 *  0, or -1 with a reason. */
int results_write_json(const struct json_t *doc, const char *path, char *err, size_t errlen);

/** Write the results file to path ("-": stdout).  0, or -1 with a reason. */
int results_write(const struct results *r, const char *path, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* Reading a results file back (autobatch report, matrix, notify and   */
/* --baseline all start here).                                         */

/** The largest results file read: a 100k-trial run writes about 70 MiB. */
#define RESULTS_MAX_BYTES ((size_t)256 * 1024 * 1024)

/**
 * Parse the bytes of a results file.  what ("results", "baseline") and
 * name (the path) only word the messages.  Returns the document (the
 * caller json_decref()s it), or NULL with err filled in one line:
 *
 *   cannot parse WHAT 'NAME': line L: REASON     not JSON (jansson's reason)
 *   WHAT 'NAME' is not an autobatch results file (...)
 *                                                not an object, or a "schema"
 *                                                string that does not start
 *                                                "autobatch.results/"
 *   WHAT 'NAME' is too large (more than 256 MiB) len > RESULTS_MAX_BYTES
 *
 * A document without "schema" is taken (files from before the key).
 * Text quoted from the file (the reason, the schema) is cut to a few
 * dozen bytes and every byte that is not printable UTF-8 text shows as
 * \xNN, so that a hostile file cannot put escape sequences on the
 * user's terminal through an error message.  Nesting is bounded by
 * jansson (JSON_PARSER_MAX_DEPTH), so the document can be walked
 * recursively.
 */
struct json_t *results_loadb(const char *buf, size_t len, const char *what, const char *name,
                             char *err, size_t errlen);

/**
 * Read path and results_loadb() it.  Besides the messages above:
 * "cannot read WHAT 'PATH': REASON" (missing, unreadable, not a regular
 * file).  The size is checked before anything is read.
 */
struct json_t *results_load(const char *path, const char *what, char *err, size_t errlen);

#endif
