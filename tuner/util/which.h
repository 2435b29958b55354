/* SPDX-License-Identifier: MIT */
/*
 * which: is a program reachable by name, as a shell would find it?  Used
 * to refuse before the first trial a command or a launcher tool
 * (srun, sbatch, ...) that is not there.  No state; nothing to release.
 */
#ifndef AB_WHICH_H
#define AB_WHICH_H

/** 1 when name is an executable file (not a directory) in one of PATH's
 *  directories (an empty entry is the current one), else 0. */
int which_found(const char *name);

#endif
