/* SPDX-License-Identifier: MIT */
/*
 * writeback: show the choice as a change to the user's command and
 * config files, and with --write apply it.
 *
 * Call sequence: after the choice (choose.h), with the struct setup of
 * the run (setup.h) and the inject context its trials used,
 *     struct writeback_out o = { my_line, my_ctx };
 *     rc = writeback_choice(&plan, &setup, &ctx, &best, &res, &o);
 * writeback_choice applies the choice to the loaded config files in
 * memory (setup's cfiles are edited), records "run_with" in res
 * (results_run_with, results_run_with_file), and with plan->write saves
 * each changed file under its lock, against the file as it is now: a
 * file the user edited meanwhile in a value the choice sets is left
 * alone and reported as an error.
 *
 * Library code: nothing here prints.  Every line for the user goes to
 * o->line, in the order it is to be shown (the caller prints SAY lines
 * as "autobatch: TEXT", ERROR lines as errors, DIFF text as it is);
 * text is valid during the call only.
 */
#ifndef AB_WRITEBACK_H
#define AB_WRITEBACK_H

#include "control/setup.h"
#include "inject.h"

struct results;

enum writeback_kind {
    WRITEBACK_SAY,   /**< one line, without "autobatch: " and newline */
    WRITEBACK_ERROR, /**< one line, without "error: " and newline */
    WRITEBACK_DIFF,  /**< a unified diff, newlines included */
};

struct writeback_out {
    void (*line)(void *ctx, enum writeback_kind kind, const char *text);
    void *ctx;
};

/**
 * Show (and with plan->write, apply) best.  Returns 0, or -1 when a file
 * could not take the choice or was not written (the reason went to
 * o->line as an error; the caller exits 2).
 */
int writeback_choice(const struct plan *plan, struct setup *s, struct inject_ctx *ctx,
                     const struct inject_candidate *best, struct results *res,
                     const struct writeback_out *o);

#endif
