/* SPDX-License-Identifier: MIT */
/*
 * cache: the warm start.  After a successful run the boundary of each
 * cell (largest fit, smallest failure) is kept under
 * $XDG_CACHE_HOME/autobatch (default ~/.cache/autobatch), in a file named
 * by a key over everything the boundary depends on: the command line, the
 * config file's bytes, the GPUs (model and memory of each, or "no-gpu";
 * for job arrays from a login node also the Slurm target and the
 * --slurm-arg options, which say where the trials run), the batch grid
 * and the world size.  A later run with the same key tries
 * the cached largest fit and smallest failure of each cell first; when
 * both come out as before, that cell's boundary is confirmed in two
 * trials instead of a search; then the cell's fastest measured size and
 * the measured sizes next to it (the old choice and its neighbours) are
 * measured again, so a warm start compares the same configurations.  Any
 * change to the inputs changes the key,
 * so a stale boundary is never trusted; a boundary that moved anyway is
 * caught by the two confirming trials and searched afresh.
 *
 * The key is FNV-1a (64 bits) over the inputs, separated by NUL bytes:
 * an identity, not a secret.  Library code: returns statuses, prints
 * nothing.
 */
#ifndef AB_CACHE_H
#define AB_CACHE_H

#include "cfile.h"
#include "search/space.h"

struct cache_key {
    char hex[17];     /**< the key, 16 hex digits */
    char path[4096];  /**< the cache file; empty when no cache directory is known */
};

/** Compute the key and the file's path. */
void cache_key_make(struct cache_key *k, char *const *command, const struct cfile *config,
                    const struct space_opts *so, const char *gpu_fingerprint);

/** Seed the space's cells from the cache file: returns cells seeded (0: none). */
int cache_load(const struct cache_key *k, struct space *sp);

/**
 * Store each searched cell's boundary and the sizes to measure again: in
 * the cell of the run's choice (grad_accum, checkpointing, micro; micro
 * <= 0 when nothing was chosen) the chosen micro-batch, elsewhere the
 * cell's fastest, each with the measured sizes next to it.  Returns 0, or
 * -1 (ignored by callers).
 */
int cache_save(const struct cache_key *k, const struct space *sp, long choice_accum,
               int choice_ckpt, long choice_micro);

/**
 * Is dir fit to hold the cache: a real directory (not a link) of ours
 * that no one else may write to?  A directory that does not exist yet is
 * (cache_save makes it 0700).  Returns 0, or -1 with a one-line note;
 * then cache_load reads nothing and cache_save writes nothing.
 */
int cache_dir_check(const char *dir, char *err, size_t errlen);

/** The directory: $XDG_CACHE_HOME/autobatch, else $HOME/.cache/autobatch. */
int cache_dir(char *out, size_t len);

/**
 * autobatch's state directory (what must outlive a run but is not a cache:
 * the webhook spool): $XDG_STATE_HOME/autobatch, else
 * $HOME/.local/state/autobatch.  Returns 0, or -1 with neither set.
 */
int state_dir(char *out, size_t len);

#endif
