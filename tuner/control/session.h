/* SPDX-License-Identifier: MIT */
/*
 * session: one tuning run, from its checked command line to its answer.
 * It holds everything the run acquires (the set-up, the OOM table, the
 * scratch directory, the space, the inject context, the results, the
 * GPUs and slots, the cache key, the replay guide) and checks everything
 * that can be checked before the first trial, so that bad input fails in
 * the first second with one line.  It prints nothing: notes and errors
 * go to the struct tune_view's line it is handed, in the order they
 * arise.
 *
 * Life cycle:
 *   1. struct session s;  session_open(&s, &plan, &view): the set-up (the
 *      preset, configs, knobs), the OOM table, this process as the
 *      subreaper of the trials, the scratch directory (marked ours; what
 *      killed runs left is swept), the in-process probe, the space, and a
 *      dry build of the first trial (a key the config lacks fails here).
 *   2. With --dry-run, stop here: s.ctx builds any cell's trial.
 *   3. session_arm(&s, &view): the results, the GPUs and their slots,
 *      Slurm, emulated memory, the warm start from the cache, the replay
 *      guide.  SESSION_SPLIT: the GPUs are of several models; the caller
 *      searches each apart (cli/per_model.c) and nothing else is run.
 *      SESSION_TARGETS: several --slurm-targets, every option checked;
 *      the caller searches each apart, side by side (cli/targets.c).
 *   4. session_tune(&s, &run): a struct tune_run over s, for tune_loop.
 *   5. session_answer(&s, &run, &view): the choice among the fits, the
 *      run's exit status (DESIGN.md 2.4, control/exit.h), the cache saved.
 *   6. session_close(&s), after any of the above, also a failed one.
 * s must not move between session_open and session_close (its parts
 * point at each other).  The plan is the caller's and outlives s;
 * setup_load may set its batch range from the preset.
 */
#ifndef AB_SESSION_H
#define AB_SESSION_H

#include <limits.h>
#include <signal.h>

#include "control/exit.h"
#include "control/setup.h"
#include "control/tune.h"
#include "output/results.h"
#include "search/cache.h"
#include "search/guide.h"
#include "search/space.h"
#include "trial/gpu.h"
#include "trial/slurm.h"
#include "inject.h"
#include "oom.h"
#include "trainlog.h"

/** What session_open and session_arm return. */
enum session_status {
    SESSION_OK = 0,
    SESSION_BAD,    /**< an error line was said: exit AB_EXIT_USAGE */
    SESSION_SPLIT,  /**< several GPU models: search each apart */
    SESSION_TARGETS, /**< several --slurm-targets: search each apart, side by side */
};

struct session {
    struct plan *plan;
    struct setup setup;
    struct oom_table oom;
    char tmpbase[4096];            /**< $TMPDIR, or /tmp */
    char dir[4160];                /**< this run's scratch directory; "" none */
    int dir_lock;                  /**< holds the lock on dir/owner (leftovers.h); -1 none */
    char probe_dir[4200];          /**< the in-process probe's files, in dir */
    struct trainlog_rules log_rules;
    long accum_default[1];         /**< the command's own accumulation */
    struct space_opts so;
    struct space space;
    int have_space;
    struct inject_ctx ctx;
    struct results res;
    int have_res;
    struct gpu gpu;
    int have_gpu;
    struct tune_slot slots[SPACE_MAX_ROUND];
    long nslots;                   /**< 0: no --gpus */
    int slurm;                     /**< trials are Slurm job steps or array tasks */
    char emulate_lib[PATH_MAX];    /**< --emulate-gpu-memory's preload library, or "" */
    struct cache_key ck;
    int cached;                    /**< the warm start found boundaries */
    struct guide guide;
    int replay;                    /**< the replay guides the search: --replay, or by default */
    int replay_cpu;                /**< the replay measures VmPeak under --trial-memory-limit */
    unsigned skipped;              /**< KNOB_BITs allowed but skipped before the first trial */
    struct slurm_guard guard;      /**< job arrays: the queue's guard (slurm.h) */
    int guarded;                   /**< guard started */
};

/** Steps 1 and 3 above; view->line gets the notes and the error. */
enum session_status session_open(struct session *s, struct plan *plan,
                                 const struct tune_view *view);
enum session_status session_arm(struct session *s, const struct tune_view *view);

/**
 * The loop's run over s: its pointers, the slots, Slurm, the emulation
 * library, t0 now, status 0.  The caller adds the interrupt flag (and a
 * test its trial runner).
 */
struct tune_run session_tune(struct session *s, const struct tune_view *view);

/**
 * After tune_loop, when nothing fitted (micro_batch=1 in no cell) and the
 * memory that does not fit is not the weights' and optimizer's alone:
 * turn the next knob on, in order of cost, and start a new space for the
 * caller to search again with tune_loop.  Checkpointing first, when it
 * was not asked about and the preset places it (it changes no numerics);
 * then bf16 mixed precision, under --allow precision only.  Each is said
 * (a note) and recorded in the results ("knobs.turned_on"); the trials so
 * far stay in the results.  Returns 1 (search again), 0 (nothing more to
 * turn on; without --allow precision a note says what it would try), or
 * -1 (out of memory, said).
 */
int session_escalate(struct session *s, struct tune_run *run, const struct tune_view *v);

/**
 * After tune_loop: the replay guide's findings into the results, each
 * cell's boundary collected, the choice made (res.best, res.runner_up;
 * notes for contradictions re-tested and an unchecked --headroom), the
 * exit status decided from the loop's flags and the signal, the cache
 * saved when the run is whole.  Sets res.wall_s, res.exit_status,
 * res.interrupted; returns the exit status.
 */
int session_answer(struct session *s, const struct tune_run *run, const struct tune_view *view);

/** Remove the scratch directory and free everything s holds. */
void session_close(struct session *s);

#endif
