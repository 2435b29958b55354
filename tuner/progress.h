/* SPDX-License-Identifier: MIT */
/*
 * progress: what the user sees while autobatch works.
 *
 * The style follows stderr: on a terminal one live line per trial
 * (candidate, step, samples/s) that is redrawn in place and replaced by
 * the outcome when the trial ends, with colour unless NO_COLOR is set or
 * TERM=dumb; elsewhere (CI logs, files) plain lines, one when a trial
 * starts and one when it ends.  The command's own output is passed through
 * to stderr as it arrives unless --quiet, which hides only that output;
 * the live line steps aside for it.
 * stdout is kept for the final answer and `--json -`.
 */
#ifndef AB_PROGRESS_H
#define AB_PROGRESS_H

#include <stddef.h>

#include "trial.h"

struct progress {
    int tty, color, quiet, verbose;
    int live;          /**< a live line is drawn on the terminal now */
    int at_bol;        /**< the last byte we wrote to stderr ended a line */
    long trial_id, micro_batch, grad_accum;
    int checkpointing;
    long step, target;
    double rate;       /**< it/s, <0 unknown */
    const char *unit;  /**< the batch knob's unit, for "N frames/s" */
    double last_event; /**< when the last --events step line went out */
    long event_trial;  /**< ... and for which trial */
};

void progress_init(struct progress *p, int quiet, int verbose);
void progress_trial_start(struct progress *p, long id, long micro, long accum, int ckpt,
                          long target_steps, char *const *argv);
/** Trial hooks (see trial.h); ctx is the struct progress. */
void progress_output(void *ctx, int stream, const char *data, size_t n);
void progress_step(void *ctx, long step, double rate_it_s);
void progress_trial_end(struct progress *p, const struct trial_result *r, double samples_per_s);
/** A message line of autobatch's own ("autobatch: ..."), on stderr. */
void progress_note(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
