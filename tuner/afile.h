/*
 * afile: replace a file's contents atomically.
 *
 * The new bytes go to a temporary file in the same directory, which is
 * written in full, fsync'd, given the old file's mode (and owner, where we
 * may), and renamed over the original; then the directory is fsync'd.  A
 * reader, or an interrupt at any moment, sees either the old bytes or the
 * new ones.  A symlink is followed, so the link's target is replaced and
 * the link stays a link.  On any error the temporary file is removed and
 * the original is untouched.
 */
#ifndef AB_AFILE_H
#define AB_AFILE_H

#include <stddef.h>

/** Write data to path atomically.  Returns 0, or -1 with a one-line reason. */
int afile_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/** The same, but a file that does not exist yet is made with new_mode
 *  (never wider: it is never readable by anyone at any moment before
 *  that); an existing one keeps its own mode, as with afile_write. */
int afile_write_mode(const char *path, const void *data, size_t len, unsigned new_mode,
                     char *err, size_t errlen);

/**
 * Check, before any work, that afile_write(path) can succeed: the path is
 * not a directory and its directory accepts new files (tested by making
 * and removing a temporary file there).  Returns 0, or -1 with a reason.
 */
int afile_check_writable(const char *path, char *err, size_t errlen);

#endif
