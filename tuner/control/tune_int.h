/* SPDX-License-Identifier: MIT */
/*
 * tune_int: what the three files of the tuning loop share, and nothing
 * else includes.  tune.h is the contract with the callers; this header
 * is the contract between the parts:
 *
 *   tune.c        the loop: rounds asked of the space, the finalists
 *                 measured again when noise could have chosen, the
 *                 view's lines (tune_view_say)
 *   tune_job.c    one trial: built (its directory, command, environment
 *                 and limits), run here with its output shown, and read
 *                 into the results, the search and the replay guide, with
 *                 the notes and explanations it calls for; Slurm around it
 *   tune_round.c  trials side by side, each in a worker process of its
 *                 own, taken as they end; one may cancel the others
 *
 * A struct tune_job lives in the loop's array from tune_job_prepare to
 * tune_job_finish (or, when it never ran, inject_trial_release and the
 * removal of its directory); it owns its inject_trial and its directory.
 */
#ifndef AB_TUNE_INT_H
#define AB_TUNE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "control/tune.h"
#include "trial/trial.h"
#include "inject.h"

/* A line of the loop's own, through the run's view. */
#define tune_say(r, ...) tune_view_say(&(r)->view, __VA_ARGS__)

/* Has a signal asked us to stop? */
static inline int tune_interrupted(const struct tune_run *r)
{
    return r->interrupt && *r->interrupt;
}

/* One trial: its candidate, files, command and, once run, its result. */
struct tune_job {
    long id;
    size_t ci;
    long value;
    int recording, budget_caps;
    int confirm;                 /* the choice's confirmation run (set before prepare) */
    long round;                  /* 0: not side by side */
    const struct tune_slot *slot;  /* NULL: the whole machine */
    char tdir[4200], report[4300], probe[4300], outdir[4300], wd[4300], recdir[4300];
    struct inject_trial t;
    struct trial_opts to;
    struct trial_result tr;
    int64_t peak;
    /* side by side: the worker process running it */
    pid_t worker;
    int fd;
    size_t got;
    int run_rc, run_errno, cancelled, done, in_worker;
    char slurm_job[64];          /* the array task ("ID_i"), or "" */
};

/* tune_job.c */

/** After the search, the outside check that the batch knob reached the
 *  trainer, for cells the probe could not see: in a cell where every
 *  size fitted, the smallest and the largest fit ran with the same peak
 *  and the same time per step.  Then says so, sets r->status to
 *  AB_EXIT_USAGE and returns 1 (no choice); else 0 (with a warning when
 *  the times were alike but no peak was measured).  Checked at the end,
 *  not after each trial: at small sizes a real knob can change the time
 *  per step by less than its noise (a launch-bound step). */
int tune_knob_check(struct tune_run *r);

/** Build trial j for (ci, value) on slot (NULL: the whole machine) in
 *  round (0: none).  Returns 0; 1 when the budget is spent (no trial);
 *  -1 after an error line (r->status is set). */
int tune_job_prepare(struct tune_run *r, struct tune_job *j, size_t ci, long value,
                     const struct tune_slot *slot, long round);
/** Run trial j here, with its output shown (through r->run_trial when set). */
void tune_job_run(struct tune_run *r, struct tune_job *j);
/** What trial j showed, into the results, the search and the guide.
 *  shared: it ran beside others (its speed is not kept).  Returns 0 to go
 *  on, 1 to stop the search (r->status and the flags say why). */
int tune_job_finish(struct tune_run *r, struct tune_job *j, int shared);
/** The --events line of a trial's start. */
void tune_event_start(const struct tune_run *r, const struct tune_job *j);
/** From a login node: jobs[0..n) out as one job array.  0, or -1 after
 *  an error line. */
int tune_slurm_submit(struct tune_run *r, struct tune_job *jobs, size_t n);
/** The round's shared Slurm files removed (after tune_slurm_submit). */
void tune_slurm_done(const struct tune_run *r, const struct tune_job *jobs);
/** After a trial on Slurm: nothing of it may run on. */
void tune_slurm_after(struct tune_run *r, const struct tune_job *j);

/* tune_round.c */

/** One round of n trials side by side, each on its own slot (r->slots).
 *  Returns 0 to go on, 1 to stop (as tune_job_finish). */
int tune_round(struct tune_run *r, struct tune_job *jobs, size_t n, const size_t *ci,
               const long *micro, long round);

#endif
