/* SPDX-License-Identifier: MIT */
/*
 * subcmd: the subcommands beside tuning: config get/set, report,
 * matrix, notify, predict, and the hidden __slurm-follow.  Part of the
 * user-facing layer: it prints errors and warnings itself.  What a run
 * ends with is outputs.h's.
 */
#ifndef AB_SUBCMD_H
#define AB_SUBCMD_H


/**
 * Run argv[1] if it names a subcommand: returns its exit status, or -1
 * when argv[1] is no subcommand (then main tunes).
 */
int subcmd_dispatch(int argc, char **argv);

#endif
