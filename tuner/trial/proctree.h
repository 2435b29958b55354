/* SPDX-License-Identifier: MIT */
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
 * Descendants are found by scanning /proc/<pid>/stat for parent links,
 * in O(n log n) for n processes on the host (proctree_descendants: what
 * teardown uses, as it sees every process), or by walking down from the
 * root through the kernel's /proc/<pid>/task/<tid>/children lists, at a
 * cost that grows with the subtree only (proctree_subtree: what the
 * per-tick GPU attribution uses, so that a busy host costs nothing).
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
 * Descendants of root (not root itself) found by walking down the
 * kernel's children lists: cost proportional to the subtree, not to the
 * host's process count.  Zombies are included; a process forked or
 * reparented during the walk may be missed (proc(5)), so teardown does
 * not rely on it.  Counts up to 4096 or max, whichever is larger.
 * Returns the count, -1 when root cannot be read, or -2 when this kernel
 * has no children lists (CONFIG_PROC_CHILDREN): use proctree_descendants.
 */
long proctree_subtree(pid_t root, pid_t *out, size_t max);

/** A process as the /proc scan sees it. */
struct proctree_entry {
    pid_t pid, ppid;
    char state; /**< /proc/<pid>/stat's state letter */
};

/**
 * The marking behind proctree_descendants, on a given table (reordered):
 * out[0..max) gets the descendants of root that are not zombies ('Z',
 * 'X'), breadth first.  Returns how many (may exceed max), -1 on ENOMEM.
 * O(n log n).  Exposed for tests.
 */
long proctree_mark(struct proctree_entry *v, long n, pid_t root, pid_t *out, size_t max);

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
