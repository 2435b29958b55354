/*
 * proctree: find and signal every process below us.
 *
 * autobatch makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so a
 * trial's double-forked or daemonised grandchildren are re-parented to
 * autobatch instead of init when their parent exits: they stay inside our
 * subtree, even after setsid() took them out of the trial's process group.
 * Since only one trial runs at a time, "every descendant of autobatch" is
 * exactly "every process of the trial".
 *
 * Descendants are found by scanning /proc/<pid>/stat for parent links.
 * Signalling a pid found that way races with its exit only for processes
 * that are not our direct children (those we reap ourselves, so their pids
 * cannot be reused before we wait for them); the window is a few
 * microseconds and is accepted.
 */
#ifndef AB_PROCTREE_H
#define AB_PROCTREE_H

#include <stddef.h>
#include <sys/types.h>

/** Make the calling process a child subreaper.  Returns 0 or -1 (errno). */
int proctree_become_subreaper(void);

/**
 * Fill out[0..max) with the live descendants of root (not root itself),
 * zombies excluded.  Returns how many there are (may exceed max), or -1
 * when /proc cannot be read.
 */
long proctree_descendants(pid_t root, pid_t *out, size_t max);

/**
 * Send sig to every live descendant of root.  Returns how many were
 * signalled, or -1 when /proc cannot be read.
 */
long proctree_signal(pid_t root, int sig);

/**
 * Reap every exited child of the caller without blocking.  When `watch`
 * is among them its wait status goes to *status and *watched is set to 1.
 * Returns 1 while children remain (alive or not yet exited), 0 when there
 * are none left, or -1 on an unexpected waitpid error.
 */
long proctree_reap(pid_t watch, int *status, int *watched);

#endif
