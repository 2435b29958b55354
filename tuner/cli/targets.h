/* SPDX-License-Identifier: MIT */
/*
 * targets: --slurm-targets with several targets.  Each target (a
 * partition, or PARTITION:GRES_TYPE) is searched by this binary run again
 * (/proc/self/exe) with --slurm-targets naming that target alone, all of
 * them side by side, each as its own job arrays; its output lines come
 * back prefixed "[TARGET] ".  Its results go to --json's file suffixed
 * with the target (r.json -> r-a100-a100.json; a temporary file when
 * --json is not given), --baseline's likewise (a baseline per target:
 * b.json -> b-a100-a100.json; a target without one yet is not gated, and
 * says so), --write only to --write-target's run, and no run
 * posts the webhook: once all have ended, the matrix of their results
 * (matrix.h, one row per target) is printed, written next to --json
 * (r-matrix.json) when given, and posted once.  A run dies with this
 * process (parent-death signal SIGTERM: it cancels its queued tasks); a
 * signal here is passed on to every run still going, once.
 */
#ifndef AB_TARGETS_H
#define AB_TARGETS_H

#include <signal.h>

struct plan;

/** argc, argv: this run's command line (its options checked by the
 *  session); interrupted: the signal flag.  Returns 2 when a target's run
 *  refused its input, else the first failing run's exit status in the
 *  order of --slurm-targets, or 0. */
int targets_run(int argc, char **argv, const struct plan *plan, volatile sig_atomic_t *interrupted);

#endif
