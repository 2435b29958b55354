/* SPDX-License-Identifier: MIT */
/*
 * run: a short helper command (squeue, scontrol, a Python import check)
 * run to its end, its output captured, its exit status returned.  Not
 * for trials (tuner/trial/trial.h supervises those).  No state.
 */
#ifndef AB_RUN_H
#define AB_RUN_H

#include <stddef.h>

/** run_capture() flags. */
enum {
    RUN_ERR_TOO = 1, /**< its stderr with its stdout (else to /dev/null) */
    /** deaf to SIGTERM, SIGINT and SIGHUP: a clean-up (scancel) that a
     *  caller being stopped sends must not be stopped with it (the trial
     *  runner signals every process of a trial's tree) */
    RUN_DEAF = 2,
};

/**
 * Run argv (PATH searched) with stdin from /dev/null; its stdout (and,
 * with RUN_ERR_TOO in flags, its stderr) into out[0..len)
 * NUL-terminated, or discarded when out is NULL.  Returns the exit
 * status (127: it could not be run), or -1 when it could not be started
 * or did not exit.
 */
int run_capture(char *const *argv, char *out, size_t len, int flags);

#endif
