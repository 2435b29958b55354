/* SPDX-License-Identifier: MIT */
/*
 * leftovers: find and remove what an earlier autobatch run left behind
 * when it was killed (SIGKILL, a power cut) before it could clean up.
 *
 * Every run makes its scratch directory $TMPDIR/autobatch-XXXXXX and
 * holds an flock(LOCK_EX) on the `owner` file in it for its whole life
 * (the file also records the run's pid and start time).  The descriptor
 * is close-on-exec, so trials never hold the lock: when autobatch dies,
 * however it dies, the kernel releases it.  A sweep removes a scratch
 * directory only when it can take that lock itself (LOCK_EX|LOCK_NB),
 * and holds it while it removes: a run alive in any PID namespace that
 * sees the file (another container sharing /tmp) keeps its directory.
 *
 * Trial copies of a config are named
 * `<stem>.autobatch-trial-<pid>-<trial>-<random><ext>` beside the
 * original, and every file autobatch writes passes through a temporary
 * `.<name>.autobatch-tmp-<pid>-XXXXXX` beside it (afile.h).  The pid in
 * those names is only meaningful in its writer's namespace, so the sweep
 * removes one only when that pid is no live process here and no live
 * run (lock held) recorded it, when it can lock the file itself, and:
 *   - a trial copy (which lives as long as its trial): when this sweep
 *     found the dead scratch directory of a run with that pid;
 *   - a temporary file (which lives for one write): when it is older
 *     than a minute.
 * Directories without an owner file (a run killed in its first
 * microseconds, or another program's), and files that are not ours, not
 * regular, or named otherwise, are left alone.
 *
 * Life cycle: fd = leftovers_mark(dir) once the scratch directory
 * exists; leftovers_sweep() before the first trial; remove the directory,
 * then leftovers_unmark(fd) at the end of the run.  Never prints.
 */
#ifndef AB_LEFTOVERS_H
#define AB_LEFTOVERS_H

#include <stddef.h>

/**
 * Make DIR/owner for this process and lock it (flock LOCK_EX).  Returns
 * the close-on-exec descriptor that holds the lock, which the caller
 * keeps open for the run's life and gives to leftovers_unmark(); -1
 * (errno) when it cannot.
 */
int leftovers_mark(const char *dir);

/** Release the lock of leftovers_mark (closes fd; -1 is fine). */
void leftovers_unmark(int fd);

/** What a sweep removed. */
struct leftovers_report {
    int dirs;            /**< scratch directories removed */
    int copies;          /**< trial config copies removed */
    int temps;           /**< temporary files of interrupted writes removed */
    int kept;            /**< scratch directories and files of runs that may be alive, kept */
    char first[512];     /**< the first path removed, for the message */
};

/**
 * Remove dead runs' (lock not held) scratch directories under tmpbase (other than
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
