/* SPDX-License-Identifier: MIT */
/*
 * cli: the command line, parsed into a plan (struct plan,
 * tuner/control/plan.h: what the layers below read).
 *
 * Options come from one sorted table (name, kind, short letter); each
 * kind (flag, string, count, duration, range) has one handler.  Both
 * `--opt value` and `--opt=value` work.  The command to tune follows
 * `--` (or starts at the first argument that is not an option).  cli.c
 * talks to the user: a bad option prints one line saying what is wrong and
 * how to fix it, then "try 'autobatch --help'".  A misspelled option, a
 * misspelled --preset name, or a first word that is no program but close
 * to a subcommand's name gets one line with "did you mean" instead
 * (hint.h), before anything starts.  One of autobatch's own options that
 * trainers rarely take, written after the command, gets a warning and
 * still goes to the command.
 */
#ifndef AB_CLI_H
#define AB_CLI_H

#include <stdio.h>

#include "control/plan.h"

enum cli_status {
    CLI_RUN,   /**< the plan is ready: tune */
    CLI_DONE,  /**< --help or --version was printed: exit 0 */
    CLI_USAGE, /**< an error was printed: exit 2 */
};

/** Fill *p from argv (defaults first).  Prints errors itself. */
enum cli_status cli_parse(int argc, char **argv, struct plan *p);

/** Parse MIN:MAX[:STEP] as --batch does.  Returns 0, or -1 after printing
 *  the one-line error (named "--batch"). */
int cli_batch_range(const char *arg, long *min, long *max, long *step);

/** The subcommands, NULL-terminated: those `autobatch help TOPIC` knows,
 *  and those a misspelled first word is compared with. */
extern const char *const cli_subcommands[];

/** Write autobatch's help (what --help prints) to f. */
void cli_help(FILE *f);

/** Print the one-line error format: "autobatch: error: ..." to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
