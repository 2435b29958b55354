/* SPDX-License-Identifier: MIT */
/*
 * tune: the tuning loop.  Ask the space for the next candidates, build
 * each as a trial (its directory, command, environment and limits), run
 * it here or, with --gpus, side by side in worker processes (or as Slurm
 * job steps and array tasks), and feed what it showed into the results,
 * the search and the replay guide, until the search is done, the budget
 * is spent, the command crashes, or we are interrupted.  The finalists
 * are measured once more when noise could have decided between them.
 *
 * It prints nothing: what happens as it happens (a trial's start, its
 * output and steps, its end, a note, an error) goes to the struct
 * tune_view it is handed, which the command line draws (progress_view,
 * tuner/cli/progress.h) and a test records.  The session
 * (tuner/control/session.h) prepares everything a run needs (the set-up,
 * the space, the results, the GPUs) and builds the run (session_tune);
 * the parts of the loop share tuner/control/tune_int.h.
 *
 * Life cycle:
 *   1. The caller fills a struct tune_run: the pointers to what it owns
 *      (none is freed here), the scratch directory, t0 = mono_now() (util/mono.h),
 *      status 0, the view, and for tests a trial runner (run_trial).
 *   2. tune_loop(&run) runs the trials; it appends them to run.res and
 *      records them in run.space (and run.guide with --replay).
 *   3. The caller reads run.status and the flags (budget_hit, crashed,
 *      timeouts, no_steps) and chooses; *run.interrupt says whether a
 *      signal cut the run short.
 */
#ifndef AB_TUNE_H
#define AB_TUNE_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>

#include "control/exit.h"

struct plan;
struct setup;
struct inject_ctx;
struct space;
struct results;
struct gpu;
struct guide;
struct oom_table;
struct trainlog_rules;
struct trial_spec;
struct trial_opts;
struct trial_result;


/** One group of GPUs a trial runs on (--gpus). */
struct tune_slot {
    char devices[128];        /**< CUDA_VISIBLE_DEVICES: UUIDs, or indices */
    unsigned long long mask;  /**< NVML indices, for sampling */
};

/**
 * Runs one trial in place of trial_run (tuner/trial/trial.h), with the
 * same arguments and the same contract: 0 with *out filled, or -1 with
 * errno when nothing could be started.  ctx is tune_run.trial_ctx.
 */
typedef int tune_trial_fn(void *ctx, const struct trial_spec *spec, const struct trial_opts *opts,
                          struct trial_result *out);

/** What a line of the loop's is (struct tune_view's line). */
enum tune_line {
    TUNE_NOTE,  /**< a note of autobatch's own ("autobatch: TEXT") */
    TUNE_ERROR, /**< bad input or a trial that could not start: the loop stops */
    TUNE_TAIL,  /**< one of a crashed command's last lines, under the note before it */
};

/**
 * What the loop shows as it runs.  The loop calls these, in order, from
 * the controller's process only (never from a worker); the caller words
 * and draws them.  Any member may be NULL (not shown).  text and argv are
 * the loop's: copy what must outlive the call.
 */
struct tune_view {
    void *ctx;
    /** One line: a note, an error, a crashed command's tail line. */
    void (*line)(void *ctx, enum tune_line kind, const char *text);
    /** The next trial's cell: its largest fit, smallest failure, -1 none. */
    void (*bracket)(void *ctx, long max_fit, long min_fail);
    /** A trial starts here (argv: its command), or ended in a worker
     *  (argv NULL: its start is shown with its end). */
    void (*trial_start)(void *ctx, long id, long micro, long accum, int ckpt, long target_steps,
                        char *const *argv);
    /** A trial here: its output bytes, and a new highest step (trial.h's hooks). */
    void (*output)(void *ctx, int stream, const char *data, size_t n);
    void (*step)(void *ctx, long step, double rate_it_s);
    /** About every 50 ms while a trial runs here. */
    void (*tick)(void *ctx);
    /** A trial ended; samples_per_s < 0 unless it fitted and was timed alone. */
    void (*trial_end)(void *ctx, const struct trial_result *r, double samples_per_s);
};

/** A line worded as printf would, handed to v->line (nothing when it is
 *  NULL); "out of memory" when it cannot be worded. */
/** 1 when the command runs Python (python*, a *.py script, or accelerate,
 *  torchrun or deepspeed): the in-process probe can load. */
int tune_looks_python(char *const *cmd);

void tune_view_say(const struct tune_view *v, enum tune_line kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Everything a trial needs from the controller, and what trials change. */
struct tune_run {
    /* What the caller prepared and owns; the loop reads them, and writes
     * res, space, guide and ctx (the trial's paths), and gpu's samples. */
    const struct plan *plan;
    struct setup *setup;
    struct inject_ctx *ctx;
    struct space *space;
    struct results *res;
    struct gpu *gpu;
    struct guide *guide;
    struct tune_view view;       /**< what is shown as it runs (copied in) */
    const struct oom_table *oom;
    const struct trainlog_rules *log_rules;
    const char *dir;             /**< this run's scratch directory: trial-N go there */
    int replay;                  /**< the replay guides the search (--replay, or by default) */
    int replay_cpu;              /**< the replay measures VmPeak under --trial-memory-limit */
    double t0;                   /**< mono_now() at the start, for --budget */
    /** Set by the caller's signal handler (async-signal-safe: the loop
     *  only reads it); NULL: never interrupted. */
    volatile sig_atomic_t *interrupt;
    /** NULL: the real trial_run.  Honoured by the serial path only (one
     *  trial at a time: no --gpus, no Slurm); trials side by side always
     *  run trial_run in their workers. */
    tune_trial_fn *run_trial;
    void *trial_ctx;             /**< run_trial's ctx */
    /* What the trials did: the last trial's id, AB_EXIT_USAGE or 0, and why
     * the loop stopped. */
    long id;
    int status, budget_hit, crashed, timeouts, no_steps;
    int pending;                 /**< Slurm kept a trial pending past --slurm-pending */
    int noted_world, noted_probe, noted_probe_error;
    int noted_seen;              /**< said once that the model got another batch size */
    int noted_outside;           /**< said once that the knob is checked from outside */
    int noted_unverified;        /**< said once that the outside check had no memory figures */
    int knob_unseen;             /**< the batch knob showed no effect: exit 2, no choice */
    const struct tune_slot *slots; /**< NULL: no --gpus */
    size_t nslots;
    int slurm;                   /**< trials are Slurm job steps (or array tasks) */
    int slurm_array;             /**< ... array tasks, submitted from a login node */
    char self[PATH_MAX];         /**< this binary, for the array tasks' followers */
    const char *emulate_lib;     /**< --emulate-gpu-memory's preload library, or NULL */
};

/**
 * Run the search's trials until it is done, the budget is spent, a trial
 * crashed or showed bad input, or *r->interrupt is set.  Returns 0 (the
 * outcome is in r's flags and status), or -1 after an "out of memory"
 * error line (no trial ran).
 */
int tune_loop(struct tune_run *r);

#endif
