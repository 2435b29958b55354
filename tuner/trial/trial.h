/* SPDX-License-Identifier: MIT */
/*
 * trial: run one candidate configuration of the user's command, watch it,
 * and take its whole process tree down again.
 *
 * Life cycle of a trial, in order:
 *   1. The caller fills a struct trial_spec (argv, environment) and a
 *      struct trial_opts (limits, watchers, hooks).  The caller must have
 *      made this process a child subreaper (proctree_become_subreaper) so
 *      that escaped grandchildren come back to us.
 *   2. trial_run() forks.  The child becomes a process-group leader, gets
 *      stdin from /dev/null, stdout and stderr on two pipes, default
 *      signal handlers and mask, a parent-death signal (SIGKILL), an
 *      optional address-space limit, and execs argv.  An exec failure is
 *      sent back through a close-on-exec pipe and reported as
 *      TRIAL_SPAWN_FAILED with errno.
 *   3. The parent drains both pipes with poll() into capped line buffers
 *      (lbuf), passes raw output to hooks->output as it arrives, and feeds
 *      each line to the watchers: the OOM table and the step parser.  It
 *      also tails the AUTOBATCH_REPORT file when one is named (one that
 *      does not exist yet is looked for every 50 ms, backing off to every
 *      0.4 s, and again when the command exits).
 *   4. The trial is stopped at the first OOM line (from any rank), when
 *      enough steps were seen (a noisy trial, whose step times' median
 *      absolute deviation exceeds noise_rel of their median, runs on
 *      for up to extra_steps more), at the trial timeout, at the hang timeout
 *      (no output and no report line for that long), on *opts->interrupt,
 *      or when the command exits.  Stopping sends SIGTERM to the process
 *      group and to every descendant, then SIGKILL after opts->grace_s,
 *      or after at most 0.5 s when an OOM line decided the trial (ranks
 *      that wait for the failed one often ignore SIGTERM).
 *   5. trial_run() returns only when the output reached EOF and every
 *      process of the tree has been reaped (or, if some process outside
 *      our reach keeps a pipe open, after a final 5 s bound; that is
 *      flagged in result->teardown_incomplete).
 * The module never prints: everything the user may see goes through the
 * hooks, and errors through the return value and result.
 */
#ifndef AB_TRIAL_H
#define AB_TRIAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "inproc.h"
#include "oom.h"
#include "trainlog.h"

enum trial_outcome {
    TRIAL_FIT,          /**< training steps were measured: enough of them, or the
                             command exited 0 after at least one */
    TRIAL_OOM,          /**< an OOM line, or a SIGKILL we did not send */
    TRIAL_CRASH,        /**< failed with no OOM evidence */
    TRIAL_TIMEOUT,      /**< ran past the trial timeout */
    TRIAL_HANG,         /**< no output for the hang timeout */
    TRIAL_INTERRUPTED,  /**< autobatch was asked to stop */
    TRIAL_SPAWN_FAILED, /**< could not start the command (result->spawn_errno) */
    TRIAL_NO_STEPS,     /**< exited 0 with no training step seen: no evidence */
    TRIAL_MISMATCH,     /**< the probe saw the trainer use another batch size */
};

/** Where a trial's steps came from. */
enum trial_steps_from {
    STEPS_FROM_NONE = 0,
    STEPS_FROM_PROBE,   /**< the in-process probe's optimizer steps */
    STEPS_FROM_REPORT,  /**< AUTOBATCH_REPORT lines */
    STEPS_FROM_LOG,     /**< training progress recognised in the output */
};
const char *trial_steps_from_name(enum trial_steps_from f);

/** "fit", "oom", ... as in the results file. */
const char *trial_outcome_name(enum trial_outcome o);

struct trial_spec {
    char *const *argv; /**< NULL-terminated; argv[0] looked up in PATH */
    char *const *envp; /**< NULL-terminated full environment */
    const char *cwd;   /**< working directory, or NULL for ours */
};

/** Callbacks for the user-facing layer; any may be NULL. */
struct trial_hooks {
    void *ctx;
    /** raw bytes as they arrive; stream is 1 or 2 */
    void (*output)(void *ctx, int stream, const char *data, size_t n);
    /** a new highest step was seen; rate_it_s < 0 when unknown */
    void (*step)(void *ctx, long step, double rate_it_s);
    void *tick_ctx;
    /** called about every 50 ms while the trial runs (GPU sampling) */
    void (*tick)(void *tick_ctx);
};

/** How the trial's processes are held together (see trial_run). */
enum trial_isolation {
    TRIAL_ISOLATE_AUTO = 0, /**< a PID namespace when the kernel allows it */
    TRIAL_ISOLATE_NEVER,    /**< always the plain process tree */
};
enum trial_isolated {
    TRIAL_ISOLATED_TREE = 0, /**< own process group + subreaper bookkeeping */
    TRIAL_ISOLATED_PIDNS,    /**< a PID namespace whose init is ours */
};
const char *trial_isolated_name(enum trial_isolated i);

struct trial_opts {
    const struct oom_table *oom; /**< signatures; required */
    enum trial_isolation isolation;
    long target_steps;   /**< stop as a fit once this many steps were seen; 0 = never */
    long warmup_steps;   /**< steps left out of the timing */
    long extra_steps;    /**< a noisy trial may run this many more steps; 0 = never */
    /** a memory-only trial: past this many of the probe's optimizer
     *  steps, the first step over which the probe's CUDA memory figure
     *  (the reserved peak, with what lies outside the allocator) did not
     *  grow makes it a fit; its tree is then killed at once (SIGKILL, no grace, no
     *  extension) and it measures no speed.  Until then it is a full
     *  trial.  0 = a full trial.  Steps from anything but the probe, or a
     *  probe without memory figures, ignore it (NVML's sampler and a
     *  report file may lag). */
    long memory_steps;
    double noise_rel;    /**< noisy: step-time MAD above this share of the median */
    double trial_timeout_s; /**< 0 = none */
    /** stop as a fit at the first step after this many seconds from the
     *  start, once a step past the warm-up was seen (a soak bounded in
     *  time); 0 = never */
    double soak_s;
    double hang_timeout_s;  /**< 0 = none */
    double grace_s;      /**< SIGTERM to SIGKILL (at most 0.5 s after an OOM line) */
    uint64_t mem_limit;  /**< RLIMIT_AS for the command; 0 = none */
    const char *report_path; /**< AUTOBATCH_REPORT file to tail, or NULL */
    const char *probe_path;  /**< AUTOBATCH_PROBE file to tail, or NULL */
    /** the candidate's micro-batch in samples, checked against the batch
     *  size of the trainer's DataLoader that the probe sees; 0 = no check */
    long expect_batch;
    const struct trainlog_rules *log_rules; /**< the preset's progress rules, or NULL */
    volatile sig_atomic_t *interrupt; /**< set by a signal handler; may be NULL */
    struct trial_hooks hooks;
};

#define TRIAL_TAIL_LINES 20
#define TRIAL_LINE_MAX 1024

struct trial_result {
    enum trial_outcome outcome;
    int exit_code;       /**< -1 when it did not exit normally */
    int signal;          /**< signal that ended the command (0: none) */
    int spawn_errno;     /**< for TRIAL_SPAWN_FAILED */
    double wall_s;       /**< start to fully reaped */
    double teardown_s;   /**< stop decision to fully reaped; 0 when it exited by itself */
    int teardown_incomplete; /**< a pipe stayed open past every bound */
    enum trial_isolated isolation; /**< what held the trial's processes */
    int kernel_oom;      /**< the OOM evidence is a SIGKILL we did not send */
    int extended;        /**< ran extra steps because the timing was noisy */
    int memory_only;     /**< ended at opts->memory_steps: a fit, no speed */
    long steps_seen;     /**< highest step number seen */
    long steps_measured; /**< steps between the first step boundary at or after the
                              warm-up and the last one seen */
    double step_time_s;  /**< the time between those two boundaries over
                              steps_measured; <0 unknown */
    double step_time_mad_s; /**< median absolute deviation of the per-step times of
                                 the intervals between them; <0 unknown */
    int64_t peak_mem_bytes; /**< from report lines or the probe (reserved); -1 unknown */
    enum trial_steps_from steps_from; /**< the evidence the step counts come from */
    /* What the in-process probe saw (probe_processes 0: it did not load). */
    int probe_processes;      /**< processes that imported torch with the probe */
    char probe_torch[32];     /**< torch version */
    char probe_hook[16];      /**< "global" or "wrap" */
    char probe_error[160];    /**< the first thing it could not do, or "" */
    long probe_world;         /**< world size the trainer runs with; -1 unknown */
    long probe_ranks;         /**< distinct ranks that stepped */
    long loader_batch;        /**< the training DataLoader's batch size; -1 unknown */
    long loader_batches_per_step; /**< median batches fetched per optimizer step; -1 unknown */
    /* What the model itself got (the probe's outermost-module forwards), as
     * medians over the counting process's steps after warm-up (all of its
     * steps when none came after); 0 unknown. */
    long probe_seen_per_step;     /**< samples per optimizer step (micro-batch x accumulation) */
    long probe_forwards_per_step; /**< forwards per optimizer step */
    long batch_seen;              /**< samples per forward: the micro-batch the model got */
    int64_t probe_tokens_per_step; /**< padded frames/tokens per step (samples x length); 0 unknown */
    int64_t probe_elems_max;      /**< most elements of one forward's first tensor, any rank */
    /** the batches the trial met first (the lowest rank's "worst" line,
     *  the last one it wrote); worst.mode "" when the probe wrote none */
    struct inproc_worst worst;
    /** where the memory goes: the lowest rank's "mem" line (its second
     *  optimizer step; else, mem.failure, the line of a process that
     *  ended before it); mem.device "" when the probe wrote none */
    struct inproc_mem mem;
    int64_t peak_allocated_bytes; /**< CUDA peak allocated over ranks; -1 unknown */
    int64_t held_bytes;  /**< CUDA bytes allocated at a step's end, largest over ranks; -1 unknown */
    int64_t peak_vm_bytes;  /**< largest VmPeak of a process (probe, AUTOBATCH_VMPEAK); -1 unknown */
    /* The probe's CUDA view, one view of the card (all from CUDA, none from
     * NVML): each step's peak reserved plus the memory outside the
     * caching allocator at its end (the CUDA context, other libraries). */
    int64_t cuda_peak_bytes;  /**< largest over ranks and steps; -1: no CUDA step said both */
    long cuda_peak_rank;      /**< the rank it came from; -1 unknown */
    int64_t cuda_outside_bytes; /**< largest memory outside the allocator; -1 unknown */
    int64_t cuda_total_bytes; /**< the smallest device total CUDA reported; -1 unknown */
    /** the allocator's free-and-retry passes, summed over a rank's steps,
     *  the largest over ranks (a fit that needed them is at the edge and
     *  usually slower); -1 unknown (no CUDA step said) */
    long alloc_retries;
    long alloc_retries_rank;  /**< the rank with the most; -1 unknown */
    char log_seen[256];       /**< what the output showed, when no step was found */
    char tail_note[300];      /**< a report/probe file given up on, or "" */
    char evidence[TRIAL_LINE_MAX]; /**< the OOM line, or the crash's last line */
    const char *oom_name; /**< signature name for TRIAL_OOM by message */
    struct oom_numbers oom_numbers; /**< numbers parsed from the OOM line */
    /** the command's last lines, oldest first (for a crash report); in
     *  order once trial_run returned */
    char tail[TRIAL_TAIL_LINES][TRIAL_LINE_MAX];
    int tail_count;
};

/**
 * Run one trial to completion (see the life cycle above).  Returns 0 with
 * *r filled, including for TRIAL_SPAWN_FAILED; -1 only when the pipes or
 * fork could not be made (errno set), in which case nothing was started.
 */
int trial_run(const struct trial_spec *spec, const struct trial_opts *opts,
              struct trial_result *r);

#endif
