/* SPDX-License-Identifier: MIT */
/*
 * slurm: trials on a Slurm cluster, the two ways Slurm users run work.
 *
 * Inside an allocation (salloc, an sbatch script) a trial is a job step:
 * control/tune_job.c (tune_job_env) puts `srun --exact ...` in front of
 * the command, and after the
 * trial slurm_sweep_steps() cancels any step still listed under its name
 * (a srun killed with its process group leaves its step running;
 * `scancel --name` matches jobs, not steps) and waits until Slurm no
 * longer lists it.
 *
 * From a login node (--launcher slurm without SLURM_JOB_ID) a round of
 * trials goes out as one job array: slurm_array_submit() writes one task
 * script per trial (its directory, environment and command, and a
 * watchdog that ends the task when autobatch's heartbeat stops), submits
 * `sbatch --parsable --array=0-(k-1)`, and turns each trial's command
 * into a local follower, `autobatch __slurm-follow JOB OUT BEAT`
 * (slurm_follow()): it copies the task's output file to its own output
 * as it grows, touches the heartbeat, reads the task's state with
 * `scontrol show job -o` (no accounting database needed), and exits when
 * the task ends, saying how: COMPLETED exits 0; FAILED with the task's
 * exit code; OUT_OF_MEMORY, TIMEOUT, PREEMPTED, NODE_FAIL, CANCELLED and
 * the rest print "autobatch: slurm job J ended STATE" (an OOM signature
 * for OUT_OF_MEMORY) and exit 1.  SIGTERM makes it scancel the task and
 * wait (bounded) until Slurm says it ended: the trial runner gives it
 * SLURM_FOLLOW_STOP_S for that, not --kill-grace, which is for the
 * user's processes (on the node Slurm's KillWait is).  So the trial runner
 * supervises a remote task as it does a local process: its output, its
 * OOM lines, its probe and report files (trial directories must then be
 * on a filesystem the compute nodes share: set TMPDIR).
 *
 * Times of the task's lines come from the task, not from the copying:
 * where the node sees the same autobatch binary, the task script pipes
 * the command's output through `autobatch __slurm-follow --stamp - -`,
 * which writes each chunk as a record stamped with the node's monotonic
 * clock, and the follower hands each record on at its stamp plus a fixed
 * offset (the first record's delay plus a second), so the trial runner
 * reads the steps spaced as the task ran them however the shared
 * filesystem and the polling bunch them.  Output without stamps (no
 * binary on the node, Slurm's own lines) is copied as it is found.
 */
#ifndef AB_SLURM_H
#define AB_SLURM_H

#include <stddef.h>
#include <sys/types.h>

#include "util/strvec.h"

/**
 * Seconds a stopped follower may take before the trial runner kills it:
 * Slurm shows a cancelled task COMPLETING for a second or more (1.5 to
 * 2.9 s on the test cluster), and only then has the task's output file
 * its last lines (slurmstepd's "CANCELLED AT" among them).  The follower
 * bounds its own wait (15 s for Slurm, then the paced rest of the
 * output); killed earlier, it would leave those lines unread.
 */
#define SLURM_FOLLOW_STOP_S 20.0

/**
 * Cancel the job steps named `name` that squeue still lists and wait up
 * to max_s for Slurm to stop listing them (cancelling again every 5 s).
 * Returns how many are still listed, 0 when none (or squeue failed).
 */
int slurm_sweep_steps(const char *name, double max_s);

/**
 * Job steps' heartbeat watchdog, as array tasks have (a step's srun killed
 * with autobatch leaves the step running).  Rewrites argv, `srun ... --
 * CMD...` with CMD at cmd_at, into `SELF __slurm-step BEAT -- srun ... --
 * sh -c WATCH autobatch-step-watch BEAT LIMIT CMD...`: locally
 * slurm_step_beat() touches BEAT while srun lives; on the node the step's
 * shell starts a watcher and execs CMD; the watcher ends the step when
 * BEAT is gone or has not changed for LIMIT s (AUTOBATCH_SLURM_HEARTBEAT,
 * 30).  Before the exec the step's shell writes SLURM_STEP_GPUS to
 * SLURM_GPUS_FILE beside BEAT (slurm_trial_gpus).  Returns 0, or -1 out
 * of memory.
 */
int slurm_step_argv(struct strvec *argv, size_t cmd_at, const char *self, const char *beat);

/**
 * `autobatch __slurm-step BEAT -- CMD...` (CMD is srun): creates BEAT,
 * starts CMD with its stderr through a pipe, and forks a beater that
 * touches BEAT once a second while this process lives.  It lives until
 * CMD ended, passing CMD's stderr on as it comes; once autobatch's
 * SIGTERM (or SIGINT, SIGHUP) came, which srun gets too, the routine
 * lines of a step being ended (`srun: forcing job termination`, `srun:
 * Job step aborted ...`, `slurmstepd-N: error: *** STEP J.S ON N
 * CANCELLED AT ... ***`, `srun: error: N: task 0: Killed`, ...) are
 * counted instead and said as one line at the end, `slurm: step ended by
 * autobatch (K routine srun/slurmstepd lines hidden)`; any other line
 * (an OOM, `task 0: Out Of Memory`) is passed on.  Returns CMD's exit
 * status (dies of CMD's signal), 127 when CMD could not be run.
 */
int slurm_step_beat(const char *beat, char *const *argv);

/**
 * Before the first trial inside an allocation: cancel the steps of
 * SLURM_JOB_ID named autobatch-PID-N for a PID that is dead here, whose
 * srun ran on this host (scontrol's SrunHost) and is dead too: what an
 * earlier autobatch killed with SIGKILL left.  Returns how many.
 */
int slurm_sweep_dead_steps(void);

/**
 * Cancel a job (or array task) and wait up to max_s for Slurm to say it
 * ended (COMPLETING included: its processes may still live).  0 ended,
 * -1 still there.
 */
int slurm_cancel_wait(const char *job, double max_s);

/** The GPUs of the allocation SLURM_JOB_ID (scontrol), or 0 unknown. */
long slurm_alloc_gpus(void);

/** At most this many --slurm-arg options reach sbatch or srun (and a
 *  target's --partition before them). */
#define SLURM_MAX_ARGS 16

/**
 * Check one --slurm-arg option before the first trial: a long option
 * (`--name=value`, or `--flag`), one per argument, none that autobatch
 * sets itself (--array, --output, --job-name, --ntasks, --export, ...)
 * nor, with SLURM_ARG_GPUS (--gpus given) or SLURM_ARG_TYPE (a target's
 * GRES type), a GPU request (--gres, --gpus*), nor, with SLURM_ARG_TARGET
 * (--slurm-targets), --partition.  Returns 0, or -1 with a one-line
 * error that names the fix.
 */
enum { SLURM_ARG_GPUS = 1, SLURM_ARG_TARGET = 2, SLURM_ARG_TYPE = 4 };
int slurm_arg_check(const char *arg, int flags, char *err, size_t errlen);

/**
 * Whether a checked --slurm-arg applies to job steps too (srun inside an
 * allocation): 0 for options of a job as a whole (--partition, --account,
 * --qos, --reservation, --mail-*, --begin, ...), which only sbatch gets.
 */
int slurm_arg_for_step(const char *arg);

/**
 * The GPUs Slurm gave a trial, as its job step or array task saw them on
 * the node (SLURM_STEP_GPUS; SLURM_JOB_GPUS for a task): the step's
 * watchdog and the task's script write them to DIR/SLURM_GPUS_FILE before
 * the command starts.  Returns 0 with indices such as "0,1" in out; -1
 * with out empty when unknown (no GPUs, or a node that does not share
 * the trial directory).
 */
#define SLURM_GPUS_FILE "slurm-gpus"
int slurm_trial_gpus(const char *dir, char *out, size_t len);

/** One trial of an array: what to run, and where its files go. */
struct slurm_task {
    struct strvec *argv;   /**< the command; replaced by the follower */
    char *const *envp;     /**< its environment */
    const char *cwd;       /**< NULL: ours */
    const char *dir;       /**< the trial's directory (script, output, heartbeat) */
};

/**
 * Submit tasks[0..n) as one job array named `name` (its script and the
 * tasks' output files in `rounddir`, which must outlive the round), each
 * task with
 * `gres` (e.g. "gpu:1", or NULL) and a time limit of `minutes` (0: the
 * partition's), and the user's options extra[0..nextra) (--slurm-arg,
 * checked; after autobatch's own, so that theirs win), then point each
 * task's argv at the follower (`self`, the autobatch binary).  Returns 0;
 * -1 with a one-line reason in err (sbatch's own error when it refused).
 */
int slurm_array_submit(struct slurm_task *tasks, size_t n, const char *rounddir, const char *name,
                       const char *gres, long minutes, const char *const *extra, size_t nextra,
                       const char *self, double pending_s, char *err, size_t errlen);

/**
 * A task still PENDING pending_s seconds after its follower started
 * (--slurm-pending, passed to the follower as a fourth argument) is
 * cancelled: the follower says "autobatch: slurm job J still pending
 * (REASON) after Ns; cancelled", leaves SLURM_PENDING_FILE (holding the
 * reason) in the trial's directory (the heartbeat's) and exits 1.
 */
#define SLURM_PENDING_FILE "slurm-pending"

/** The reason the follower left when it gave up on a pending task: 0
 *  with it in out; -1 with out empty when it did not. */
int slurm_trial_pending(const char *dir, char *out, size_t len);

/**
 * The follower, `autobatch __slurm-follow JOB OUT BEAT [PENDING_S]` (see above): job
 * the array task ("ID_i"), out its output file, beat the heartbeat file.
 * Its stdout is the trial's output: the task's output copied as it grows
 * (stamped records at their times), and its own "autobatch: slurm job
 * ..." lines, which the trial runner reads like any other.  Returns the
 * exit status.  With job "--stamp" it is the task's stamper instead:
 * stdin to stdout as stamped records until EOF, deaf to SIGTERM, SIGINT
 * and SIGHUP so that the command's last lines still get out.
 */
int slurm_follow(const char *job, const char *out, const char *beat, double pending_s);

/**
 * The queue's guard (from a login node): a job array that has not started
 * runs no watchdog, so if autobatch is killed outright (SIGKILL) its
 * pending tasks would stay queued.  slurm_guard_start() starts a process
 * in a session of its own, not a child of ours (trials reap and signal
 * every process below autobatch), that holds the read end of a pipe
 * whose write end only autobatch holds (close-on-exec); when that end
 * closes, however autobatch ends, the guard runs `scancel --name=NAME`
 * (the arrays' job name) and exits.  slurm_guard_stop() closes the pipe
 * and waits (at most 5 s) until the guard and its scancel have exited, so
 * a normal run leaves nothing behind.  Returns 0, or -1 with no guard.
 */
struct slurm_guard {
    pid_t pid; /**< -1: none */
    int fd;    /**< the pipe's write end: closed, the guard cancels */
    int done;  /**< EOF once the guard and its scancel have exited */
};
int slurm_guard_start(struct slurm_guard *g, const char *name);
void slurm_guard_stop(struct slurm_guard *g);

#endif
