/* SPDX-License-Identifier: MIT */
/*
 * leftovers: find and remove what an earlier autobatch run left behind
 * when it was killed (SIGKILL, a power cut) before it could clean up.
 *
 * Every run makes its scratch directory $TMPDIR/autobatch-XXXXXX and
 * writes an `owner` file in it: the run's pid and its start time in clock
 * ticks since boot (field 22 of /proc/PID/stat), so a recycled pid is not
 * taken for the owner.  Trial copies of a config are named
 * `<stem>.autobatch-trial-<pid>-<trial><ext>` beside the original, and
 * every file autobatch writes passes through a temporary
 * `.<name>.autobatch-tmp-<pid>-XXXXXX` beside it (afile.h).  On start a
 * run sweeps all three: a scratch directory whose owner is not alive, and
 * a trial copy or temporary file whose pid belongs to no live process,
 * are removed (a live pid may be a run beside ours: its files are kept).
 * Directories without an owner file (a run killed in its first
 * microseconds, or another program's), and files that are not ours, not
 * regular, or named otherwise, are left alone.
 *
 * Life cycle: leftovers_mark(dir) once the scratch directory exists;
 * leftovers_sweep() before the first trial.  Never prints.
 */
#ifndef AB_LEFTOVERS_H
#define AB_LEFTOVERS_H

#include <stddef.h>

/** Write DIR/owner for this process.  0, or -1 (errno). */
int leftovers_mark(const char *dir);

/** What a sweep removed. */
struct leftovers_report {
    int dirs;            /**< scratch directories removed */
    int copies;          /**< trial config copies removed */
    int temps;           /**< temporary files of interrupted writes removed */
    char first[512];     /**< the first path removed, for the message */
};

/**
 * Remove dead runs' scratch directories under tmpbase (other than
 * `self`, this run's), and dead runs' trial copies and temporary files in
 * each directory of dirs (NULL-terminated; NULL for none; a directory
 * named twice is swept once): the config's, the output files'.  Fills
 * *rep.  Returns the number of things removed.
 */
int leftovers_sweep(const char *tmpbase, const char *self, const char *const *dirs,
                    struct leftovers_report *rep);

/** rm -rf of a directory autobatch made; links in it are removed, never followed. */
void leftovers_remove_tree(const char *path);

#endif
