/* SPDX-License-Identifier: MIT */
/*
 * subcmd: the subcommands beside tuning (config, report, matrix, notify)
 * and the outputs a tuning run ends with (reports, the GitHub step
 * summary, the webhook).  Part of the user-facing layer with main.c,
 * cli.c and progress.c: it prints errors and warnings itself.
 */
#ifndef AB_SUBCMD_H
#define AB_SUBCMD_H

#include <jansson.h>
#include <signal.h>

#include "cli/cli.h"

/**
 * Run argv[1] if it names a subcommand: returns its exit status, or -1
 * when argv[1] is no subcommand (then main tunes).
 */
int subcmd_dispatch(int argc, char **argv);

/**
 * Check, before the first trial, everything the run's outputs need:
 * report paths writable, the baseline readable (loaded into *baseline),
 * the webhook format valid.  Returns 0, or 2 after printing the error.
 */
int subcmd_outputs_check(const struct plan *plan, json_t **baseline);

/**
 * After the run: compare with the baseline (returns 6 instead of a 0
 * status on a regression), write --json and the reports from the
 * rendered results, append the Markdown summary to $GITHUB_STEP_SUMMARY,
 * and post to the webhook (a failure warns and spools; it never changes
 * the status; cancel, set by a signal handler, cuts the delivery short).
 * Returns the final exit status.
 */
int subcmd_outputs_write(const struct plan *plan, json_t *doc, const json_t *baseline, int status,
                         const volatile sig_atomic_t *cancel);

#endif
