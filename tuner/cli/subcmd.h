/* SPDX-License-Identifier: MIT */
/*
 * subcmd: the subcommands beside tuning: config get/set, report,
 * matrix, notify, predict, presets, help, and the hidden __slurm-follow
 * and __slurm-step.  Part of the user-facing layer: it prints errors and
 * warnings itself.  What a run ends with is outputs.h's.
 *
 * Every subcommand but the hidden ones prints its own help for --help or
 * -h anywhere among its words (exit 0, nothing else done); `autobatch
 * help TOPIC` prints the same text, and `autobatch help presets` the
 * list `autobatch presets` prints.
 */
#ifndef AB_SUBCMD_H
#define AB_SUBCMD_H


/**
 * Run argv[1] if it names a subcommand: returns its exit status, or -1
 * when argv[1] is no subcommand (then main tunes; cli_parse guesses at a
 * misspelled one).
 */
int subcmd_dispatch(int argc, char **argv);

#endif
