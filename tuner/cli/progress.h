/* SPDX-License-Identifier: MIT */
/*
 * progress: what the user sees while autobatch works.
 *
 * The style follows stderr.  On a terminal (and TERM is not "dumb") a
 * live status of up to three lines is redrawn in place while a trial
 * runs: the trial and its candidate (micro_batch x grad_accum and the
 * checkpointing knob), "starting" until its first step and then the step
 * and it/s, its time and, once a trial has fitted, about how long a trial
 * takes; the run's elapsed time, the bracket of the candidate's cell
 * (largest fit, smallest failure, the trials bisection would still take)
 * and the time --budget leaves; the fastest fit so far.  Each line holds
 * whole fields only, within the terminal's width.  When the trial ends
 * the status gives way to one line for it, hyperfine-like:
 *
 *     #4     53x1  ckpt off  fit      0.2 s  3017.5 samples/s
 *     #5     54x1  ckpt off  oom      0.1 s  CUDA out of memory. Tried ...
 *
 * a failure's evidence (the OOM line, a crash's last line) cut to the
 * width.  There the command's own output is hidden unless --show-output
 * (the live status then steps aside for it), and so are notes wrapped to
 * the width.  Elsewhere (CI logs, files) plain lines that scripts read,
 * "autobatch: trial N: micro_batch=.. grad_accum=.. checkpointing=.."
 * when a trial starts and the same with " -> OUTCOME (...)" when it ends,
 * an OOM's evidence on one line under it, and the command's output passed
 * through as it arrives.  --quiet hides the command's output everywhere
 * and adds nothing in its place, so it is never louder than the default:
 * a failure is its outcome line and one line of evidence (or, for a
 * failure with no evidence whose output was hidden, its last line of
 * output).  The command's last lines (its traceback) are printed under a
 * failure whose output was hidden only with -v; a crash, a failure
 * autobatch could not classify, has its last lines printed by the tuning
 * loop in every mode.  Those lines are the trainer's, made safe and
 * whole: on a terminal a long one is folded at its width, the rest under
 * a "+ " gutter; notes of autobatch's own wrap at a space.  Nothing written on a
 * terminal is wider than it.  A trial
 * that --budget cut short is "budget", not "timeout" (--trial-timeout's).
 * Colour on a terminal unless NO_COLOR is set.  stdout is kept for the
 * final answer and `--json -`.
 *
 * Life cycle: progress_init() once (no resources are held: nothing to
 * release); per trial progress_bracket() (optional), progress_trial_start(),
 * the trial hooks progress_output() and progress_step() while it runs,
 * progress_tick() from the trial loop's tick, progress_trial_end();
 * progress_note() for any line of autobatch's own at any time.  The tuning
 * loop (control/tune.h) reaches all of these through progress_view().
 */
#ifndef AB_PROGRESS_H
#define AB_PROGRESS_H

#include <stddef.h>

#include "trial/trial.h"

struct progress {
    int tty, color, quiet, verbose;
    int show;          /**< the command's output is passed through */
    int hidden;        /**< the current trial's output was not shown */
    int active;        /**< a trial is running: its live status is wanted */
    int live;          /**< lines of the live status drawn on the terminal now */
    int dirty;         /**< something it shows changed since it was drawn */
    int at_bol;        /**< the last byte we wrote to stderr ended a line */
    long trial_id, micro_batch, grad_accum;
    int checkpointing;
    long step, target;
    double rate;       /**< it/s, <0 unknown */
    double first_step_t; /**< when this trial's first step was seen; 0 none yet */
    long first_step;   /**< ... and which it was */
    const char *unit;  /**< the batch knob's unit, for "N frames/s" */
    double t0;         /**< when the run started (progress_init) */
    double budget_s;   /**< --budget, for the time left; <=0 none */
    double last_draw;  /**< when the live status was last drawn */
    long fit, fail;    /**< the candidate's cell: largest fit, smallest failure; -1 none */
    double best_sps;   /**< the fastest fit so far, samples/s; <=0 none yet */
    long best_micro, best_accum;
    int best_ckpt;
    double trials_s;   /**< wall time of the trials that ended, for an estimate */
    long trials_done;  /**< ... and how many */
    double fits_s;     /**< wall time of the trials that fitted: a whole trial's */
    long fits_done;    /**< ... and how many */
    double trial_t0;   /**< when the current trial started */
    double last_event; /**< when the last --events step line went out */
    long event_trial;  /**< ... and for which trial */
};

/** quiet: --quiet; show_output: --show-output (the two exclude each other). */
void progress_init(struct progress *p, int quiet, int show_output, int verbose);
/** The bracket of the next trial's cell: its largest fit and smallest
 *  failure so far, -1 for none.  Reset by each progress_trial_end(). */
void progress_bracket(struct progress *p, long max_fit, long min_fail);
/** argv NULL: the trial ran elsewhere (a worker) and its output was not
 *  shown; its start is said together with its end. */
void progress_trial_start(struct progress *p, long id, long micro, long accum, int ckpt,
                          long target_steps, char *const *argv);
/** Trial hooks (see trial.h); ctx is the struct progress. */
void progress_output(void *ctx, int stream, const char *data, size_t n);
void progress_step(void *ctx, long step, double rate_it_s);
/** From the trial loop's tick: keeps the live status's clock moving. */
void progress_tick(void);
void progress_trial_end(struct progress *p, const struct trial_result *r, double samples_per_s);
/** A message line of autobatch's own ("autobatch: ..."), on stderr. */
void progress_note(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct tune_view;
/** The tuning loop's view drawn by p: notes through progress_note, errors
 *  as cli_error words them, the trials' start, output, steps and end,
 *  and a tick that also moves queued output along (outq_pump). */
struct tune_view progress_view(struct progress *p);

/**
 * Cut s for a one-line message: at most max bytes, at a word boundary
 * with " ..." when it is longer (mid-word only for a word longer than
 * half of max).  Writes a NUL-terminated result of at most max + 4 bytes
 * to out (size outlen); returns out.
 */
char *progress_clip(const char *s, size_t max, char *out, size_t outlen);

#endif
