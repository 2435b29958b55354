/* SPDX-License-Identifier: MIT */
/*
 * dry_run: --dry-run.  Each cell's first trial as it would run (its
 * command line, the environment it gets beyond ours, its working
 * directory) on stdout, as shell; nothing is run.  Other sizes differ
 * only in the knobs' values.
 */
#ifndef AB_DRY_RUN_H
#define AB_DRY_RUN_H

struct session;

/** s opened (session_open), not armed.  Returns 0, or -1 after an error
 *  line (a trial that cannot be built). */
int dry_run_print(struct session *s);

#endif
