/* SPDX-License-Identifier: MIT */
/*
 * run: a short helper command (squeue, scontrol, a Python import check)
 * run to its end, its output captured, its exit status returned.  Not
 * for trials (tuner/trial/trial.h supervises those).  No state.
 */
#ifndef AB_RUN_H
#define AB_RUN_H

#include <stddef.h>

/**
 * Run argv (PATH searched) with stdin from /dev/null; its stdout (and,
 * with err_too, its stderr) into out[0..len) NUL-terminated, or
 * discarded when out is NULL; stderr otherwise to /dev/null.  Returns the
 * exit status (127: it could not be run), or -1 when it could not be
 * started or did not exit.
 */
int run_capture(char *const *argv, char *out, size_t len, int err_too);

#endif
