/* SPDX-License-Identifier: MIT */
/*
 * afile: write a file autobatch produces or edits, without ever leaving
 * it half-written, and without replacing what is not a file.
 *
 * A regular file (or a name that does not exist yet) is replaced
 * atomically: the new bytes go to a temporary file in the same directory,
 * which is written in full, fsync'd, given the old file's mode (and
 * owner, where we may), and renamed over the original; then the directory
 * is fsync'd.  A reader, or an interrupt at any moment, sees either the
 * old bytes or the new ones.  A symlink is followed, so the link's target
 * is replaced and the link stays a link.  On any error the temporary file
 * is removed and the original is untouched.
 *
 * The temporary file is `.NAME.autobatch-tmp-PID-XXXXXX` beside NAME (PID
 * the writer's, XXXXXX six characters from getrandom()), made with
 * O_CREAT|O_EXCL|O_NOFOLLOW: nothing planted under a temporary name is
 * ever opened, let alone written through.  One left by a writer killed with SIGKILL belongs to no
 * live process, and leftovers.c sweeps it on the next run
 * (afile_tmp_pid() reads the PID back).
 *
 * What exists and is not a regular file is never replaced:
 *   - a character device (/dev/null, a terminal) is written through:
 *     opened O_WRONLY, never created or truncated;
 *   - a FIFO is written through too, if it has a reader (it is opened
 *     non-blocking, so a FIFO nobody reads is refused at once instead of
 *     hanging the run; the write itself then blocks as usual);
 *   - /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N name an
 *     open descriptor of ours: written through whatever it is (a regular
 *     file behind one is appended to, as the shell's `>` file would be);
 *   - a directory, a socket or a block device is refused.
 *
 * Writers of a user's file coordinate with afile_lock(): an advisory
 * flock() on the file itself (no lock file beside it).  Because a write
 * replaces the file's inode, the lock holder must re-read the file after
 * taking the lock, and release it only after its write.
 */
#ifndef AB_AFILE_H
#define AB_AFILE_H

#include <stddef.h>

/** Write data to path as described above.  Returns 0, or -1 with a one-line reason. */
int afile_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/** The same, but a file that does not exist yet is made with new_mode
 *  (never wider: it is never readable by anyone at any moment before
 *  that); an existing one keeps its own mode, as with afile_write. */
int afile_write_mode(const char *path, const void *data, size_t len, unsigned new_mode,
                     char *err, size_t errlen);

/**
 * Check, before any work, that afile_write(path) can succeed: a regular
 * file or a new name must have a directory that accepts new files (tested
 * by making and removing a temporary file there); a character device or
 * FIFO must be writable (a FIFO is not opened: that would end its
 * reader's input); a directory, socket or block device is refused.
 * Returns 0, or -1 with a reason.
 */
int afile_check_writable(const char *path, char *err, size_t errlen);

/** Write all len bytes of data to fd, retrying on EINTR.  Returns 0, or
 *  -1 (errno set, or 0 when write() wrote nothing). */
int afile_write_all(int fd, const void *data, size_t len);

/** Random characters in the names afile_create() makes. */
#define AFILE_RANDOM_LEN 12

/**
 * Make a new file dir/PREFIX<nrand random characters>SUFFIX (at most 64
 * characters, from getrandom()) with O_CREAT|O_EXCL|O_NOFOLLOW and mode
 * (less the umask), trying another name when one exists.  Nothing that
 * was there before, a planted symlink least of all, is opened.  Returns
 * the descriptor (write-only; the caller closes it; the name in out), or
 * -1 with a reason.
 */
int afile_open_new(const char *dir, const char *prefix, size_t nrand, const char *suffix,
                   unsigned mode, char *out, size_t outlen, char *err, size_t errlen);

/**
 * Create a new file holding data, named as afile_open_new() names it with
 * AFILE_RANDOM_LEN random characters, with exactly mode (past the umask):
 * for the trial copies of a user's config, beside it.  The name goes to
 * out; the caller unlinks the file.  Returns 0, or -1 with a reason
 * (nothing is left behind).
 */
int afile_create(const char *dir, const char *prefix, const char *suffix, const void *data,
                 size_t len, unsigned mode, char *out, size_t outlen, char *err, size_t errlen);

/**
 * Replace path atomically like afile_write(), but never through a link
 * and never writing through a device or FIFO: the temporary file is
 * renamed onto the name path itself, so whatever was there (a planted
 * symlink included) is replaced, and its target is untouched.  For
 * autobatch's own files (the warm-start cache).  mode is the new file's.
 * Returns 0, or -1 with a reason.
 */
int afile_write_nofollow(const char *path, const void *data, size_t len, unsigned mode,
                         char *err, size_t errlen);

/** How long afile_lock() waits for another writer, in seconds. */
#define AFILE_LOCK_WAIT_S 30

/**
 * Take the advisory write lock (flock LOCK_EX) of the regular file at
 * path, waiting up to AFILE_LOCK_WAIT_S for another holder.  The lock is
 * on the file as it is once locked: if a writer replaced it while we
 * waited, the new file is locked instead.
 *
 * Call sequence: fd = afile_lock(path); read the file; afile_write() it;
 * afile_unlock(fd).  Returns the descriptor that holds the lock, or -1
 * with a reason (no such file, not a regular file, still locked).
 */
int afile_lock(const char *path, char *err, size_t errlen);

/** Release a lock from afile_lock (closes fd; -1 is fine). */
void afile_unlock(int fd);

/** The writer's pid in the name (no directory) of one of afile's
 *  temporary files, or 0 when name is not one. */
long afile_tmp_pid(const char *name);

#endif
