/* SPDX-License-Identifier: MIT */
/*
 * outputs: what a tuning run ends with, and the pieces of it that the
 * subcommands share.  Checked before the first trial (outputs_check),
 * written after the last (outputs_write): the baseline gate, --json, the
 * reports, the GitHub step summary, the webhook.  Part of the
 * user-facing layer: it prints its errors and warnings itself.  Nothing
 * here holds state between calls.
 */
#ifndef AB_OUTPUTS_H
#define AB_OUTPUTS_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#include "output/webhook.h"

struct plan;

/**
 * Check, before the first trial, everything the run's outputs need: no
 * two of --config, --json, --markdown, --junit, --html, --events and
 * --keep-traces naming the same file (by device and inode, or for a new
 * name the directory's realpath and the name; devices and FIFOs may be
 * shared), the --json and report paths writable, --events and --json not both on
 * stdout, the baseline readable (loaded into *baseline, the caller's to
 * json_decref), the webhook URL and format valid; and open the --events
 * stream (not for --dry-run).  Returns 0, or 2 after printing the error.
 */
int outputs_check(const struct plan *plan, json_t **baseline);

/**
 * The same-file check of outputs_check for a config that was not named by
 * --config but found in the command by the preset (known only once the
 * session is open, still before the first trial): 0, or 2 after printing
 * the option and the config that name the same file.
 */
int outputs_check_config(const struct plan *plan, const char *config);

/**
 * After the run: compare with the baseline (returns 6 instead of a 0
 * status on a regression), write --json and the reports from the
 * rendered results, append the Markdown summary to $GITHUB_STEP_SUMMARY,
 * and post to the webhook (a failure warns and spools; it never changes
 * the status; cancel, set by a signal handler, cuts the delivery short).
 * Returns the final exit status.
 */
/** How the final block's "next:" names autobatch: argv[0] as the user
 *  typed it when it has a slash (build/autobatch), else "autobatch". */
void outputs_set_program(const char *argv0);

int outputs_write(const struct plan *plan, json_t *doc, const json_t *baseline, int status,
                  const volatile sig_atomic_t *cancel);

/** Write text to path atomically, or to stdout for NULL, "-" or
 *  /dev/stdout.  0, or -1 after printing the error. */
int outputs_emit(const char *path, const char *text, size_t len);

/** Post doc to url in format (NULL: generic); on failure warn, and keep
 *  it in the spool unless the server refused it for good.  0 when
 *  delivered. */
int outputs_post(const json_t *doc, const char *url, const char *format, int insecure,
                 const volatile sig_atomic_t *cancel);

/** The webhook spool's directory (state, not cache); legacy: where
 *  versions before 0.1.0 kept it, under the cache directory.  0, or -1
 *  when no directory is known (no HOME). */
int outputs_spool_dir(char *out, size_t len, int legacy);

/** Delivery options for url: the defaults, the secret from the
 *  environment, insecure, cancel. */
void outputs_webhook_opts(struct webhook_opts *wo, const char *url, int insecure,
                          const volatile sig_atomic_t *cancel);

#endif
