/* SPDX-License-Identifier: MIT */
/*
 * exit: autobatch's exit statuses, DESIGN.md 2.4, in one place for every
 * layer that decides one (the session, the loop, the baseline gate, the
 * subcommands).  Constants only.
 */
#ifndef AB_EXIT_H
#define AB_EXIT_H

enum ab_exit {
    AB_EXIT_OK = 0,
    /** bad input, a trial that could not start, or --write refused
     *  because the config changed during the run in a value the choice
     *  sets (nothing was written) */
    AB_EXIT_USAGE = 2,
    AB_EXIT_NOTHING_FITS = 3,
    AB_EXIT_CRASH = 4,
    AB_EXIT_BUDGET = 5,
    AB_EXIT_REGRESSION = 6, /**< the baseline gate (cli/outputs.c) */
    /** the run finished, but the results file or a report could not be
     *  written (a full disk, a directory gone): not bad input; the
     *  message says which file (cli/outputs.c) */
    AB_EXIT_UNWRITTEN = 7,
    AB_EXIT_INTERRUPTED = 130,
};

#endif
