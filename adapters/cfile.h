/* SPDX-License-Identifier: MIT */
/*
 * cfile: a user's config file in memory, edited with the editor its
 * format needs (yedit for YAML, jedit for JSON and JSON with comments).
 *
 * The format comes from the extension (.json, .json5, .jsonc -> JSON;
 * .yaml, .yml -> YAML); for any other name, from the first non-blank
 * byte ('{' or '[' -> JSON, else YAML).  cfile_set() edits the in-memory
 * bytes only; cfile_save() writes them back atomically (afile).  The
 * original bytes are kept, so callers can diff or restore.
 *
 * Life cycle: struct cfile f = CFILE_INIT; cfile_load(&f, path, ...);
 * cfile_get/cfile_set ...; cfile_save(&f, path, ...) or not;
 * cfile_release(&f).
 */
#ifndef AB_CFILE_H
#define AB_CFILE_H

#include <stddef.h>

#include "cedit.h"

enum cfile_format { CFILE_YAML, CFILE_JSON };

struct cfile {
    enum cfile_format format;
    char *orig;      /**< the bytes as read */
    size_t orig_len;
    char *cur;       /**< the bytes after the edits so far */
    size_t cur_len;
};
#define CFILE_INIT { CFILE_YAML, NULL, 0, NULL, 0 }

/** Read path.  Returns 0, or -1 with a one-line reason naming the file. */
int cfile_load(struct cfile *f, const char *path, char *err, size_t errlen);

/** Decide the format from the name and the bytes. */
enum cfile_format cfile_format_of(const char *path, const char *bytes, size_t len);

/** Get the scalar at key (malloc'd into *value). */
enum cedit_status cfile_get(const struct cfile *f, const char *key, char **value,
                            char *err, size_t errlen);

/** Set key=value in the current bytes; on failure they are unchanged. */
enum cedit_status cfile_set(struct cfile *f, const char *key, const char *value,
                            char *err, size_t errlen);

/** 1 when the current bytes differ from the original. */
int cfile_changed(const struct cfile *f);

/** Write the current bytes to path atomically (see afile.h); a file with
 * no write permission bits at all is refused. */
int cfile_save(const struct cfile *f, const char *path, char *err, size_t errlen);

/** cfile_save, with a new file made with new_mode (a trial's copy gets
 *  its original's mode: a 0600 config's copies are 0600 from the start). */
int cfile_save_mode(const struct cfile *f, const char *path, unsigned new_mode, char *err,
                    size_t errlen);

/** What cfile_reread() found. */
enum cfile_drift {
    CFILE_UNREADABLE = -1, /**< the file cannot be read now (err says why) */
    CFILE_SAME = 0,        /**< it still holds f->orig, byte for byte */
    CFILE_CHANGED,         /**< other bytes, but every key as it was (or as f->cur has it) */
    CFILE_CONFLICT,        /**< a key's value was changed to another one */
};

/**
 * Read path again (for a write-back at the end of a long run, under the
 * file's afile_lock) and compare it with f, which was loaded from it at
 * the start and has since been edited in memory at keys (NULL-terminated
 * key paths).  A key conflicts when its value now (or its absence) is
 * neither the one in f->orig nor the one in f->cur: someone else changed
 * a value that f is about to set.
 *
 * On CFILE_CHANGED and CFILE_CONFLICT the new bytes are in *now (which is
 * CFILE_INIT on entry; the caller releases it either way), so that f's
 * edits can be made again on them.  On CFILE_CONFLICT *conflict is that
 * key (one of keys) and err says "KEY is now X (was Y)".
 */
enum cfile_drift cfile_reread(const struct cfile *f, const char *path, const char *const *keys,
                              struct cfile *now, const char **conflict, char *err,
                              size_t errlen);

void cfile_release(struct cfile *f);

#endif
