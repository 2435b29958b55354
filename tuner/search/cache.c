/* SPDX-License-Identifier: MIT */
/*
 * cache: the warm-start file (see cache.h).  The key is FNV-1a over the
 * command line with the content of each file it names (regular files up
 * to 16 MiB: an edited script is searched afresh), CUDA_VISIBLE_DEVICES,
 * the config's bytes, the GPUs' fingerprint, the batch grid and the
 * world size.  The file is JSON under the cache directory,
 * named by the key and holding it too; cache_load seeds each cell it
 * lists into the space (its boundary, and the old choice with its
 * measured neighbours) and ignores anything malformed or foreign.
 * cache_save writes it atomically and never through a link
 * (afile_write_nofollow).  The directory is used only when it is ours:
 * a real directory (not a link), owned by us, writable by nobody else
 * (cache_dir_check); a cache in a directory others may write to is one
 * they could plant links or forged boundaries in.  Every file is opened
 * non-blocking and read only when it is a regular file: a FIFO in its
 * place cannot hang the run.
 */
#include "search/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/afile.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s, strlen(s) + 1); /* the NUL separates fields */
}

/* Mix in the content of path when it is a regular file of at most 16 MiB
 * (a script, a small config); anything else leaves h as it is. */
static uint64_t cache_hash_file(uint64_t h, const char *path)
{
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size > (16 << 20))
        return h;
    /* Non-blocking, and checked again once open: a FIFO put in the
     * file's place after the stat must not hang the open. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return h;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return h;
    }
    char buf[65536];
    ssize_t n;
    off_t total = 0;
    while (total <= (16 << 20) && (n = read(fd, buf, sizeof buf)) > 0) {
        h = fnv(h, buf, (size_t)n);
        total += n;
    }
    close(fd);
    return h;
}

int cache_dir(char *out, size_t len)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(out, len, "%s/autobatch", xdg);
    else if (home && *home)
        snprintf(out, len, "%s/.cache/autobatch", home);
    else
        return -1;
    return 0;
}

int state_dir(char *out, size_t len)
{
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(out, len, "%s/autobatch", xdg);
    else if (home && *home)
        snprintf(out, len, "%s/.local/state/autobatch", home);
    else
        return -1;
    return 0;
}

void cache_key_make(struct cache_key *k, char *const *command, const struct cfile *config,
                    const struct space_opts *so, const char *gpu_fingerprint)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; command[i]; i++) {
        h = fnv_str(h, command[i]);
        /* A file the command names (the training script, a data list):
         * its content too, so that an edited script is searched afresh. */
        h = cache_hash_file(h, command[i]);
    }
    /* The devices the run may use. */
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    h = fnv_str(h, vis ? vis : "-");
    h = fnv_str(h, "--config");
    if (config)
        h = fnv(h, config->orig, config->orig_len);
    h = fnv_str(h, gpu_fingerprint ? gpu_fingerprint : "no-gpu");
    char grid[128];
    snprintf(grid, sizeof grid, "%ld:%ld:%ld/%ld", so->batch_min, so->batch_max, so->batch_step,
             so->world_size);
    h = fnv_str(h, grid);
    snprintf(k->hex, sizeof k->hex, "%016llx", (unsigned long long)h);
    char dir[4000];
    if (cache_dir(dir, sizeof dir))
        k->path[0] = '\0';
    else
        snprintf(k->path, sizeof k->path, "%s/%s.json", dir, k->hex);
}

int cache_dir_check(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st)) {
        if (errno == ENOENT)
            return 0; /* made by cache_save, 0700 */
        snprintf(err, errlen, "cannot use the cache '%s': %s", dir, strerror(errno));
        return -1;
    }
    const char *why = S_ISLNK(st.st_mode)          ? "it is a symbolic link"
                    : !S_ISDIR(st.st_mode)         ? "it is not a directory"
                    : st.st_uid != geteuid()       ? "it belongs to another user"
                    : (st.st_mode & (S_IWGRP | S_IWOTH)) ? "others may write to it"
                                                   : NULL;
    if (why) {
        snprintf(err, errlen, "not using the warm-start cache '%s': %s", dir, why);
        return -1;
    }
    return 0;
}

/* The cache directory, when it is one we may use (cache_dir_check). */
static int cache_dir_ok(const struct cache_key *k)
{
    char dir[4000], err[256];
    return k->path[0] && !cache_dir(dir, sizeof dir) && !cache_dir_check(dir, err, sizeof err);
}

/* The cache file: never through a link, never blocking (a FIFO in its
 * place), only a regular file of a sane size.  NULL when there is none. */
static json_t *cache_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    json_t *doc = NULL;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
        st.st_size <= (16 << 20)) {
        json_error_t je;
        doc = json_loadfd(fd, 0, &je);
    }
    close(fd);
    return doc;
}

int cache_load(const struct cache_key *k, struct space *sp)
{
    if (!cache_dir_ok(k))
        return 0;
    json_t *doc = cache_read(k->path);
    if (!doc)
        return 0;
    int seeded = 0;
    const char *key = json_string_value(json_object_get(doc, "key"));
    json_t *cells = json_object_get(doc, "cells");
    if (key && !strcmp(key, k->hex) && json_is_array(cells)) {
        size_t i;
        json_t *c;
        json_array_foreach(cells, i, c) {
            json_t *mf = json_object_get(c, "max_fit"), *fail = json_object_get(c, "min_fail");
            if (!json_is_integer(json_object_get(c, "grad_accum")) || !json_is_integer(mf))
                continue;
            space_seed(sp, (long)json_integer_value(json_object_get(c, "grad_accum")),
                       json_is_true(json_object_get(c, "checkpointing")),
                       (long)json_integer_value(mf),
                       json_is_integer(fail) ? (long)json_integer_value(fail) : -1);
            json_t *fast = json_object_get(c, "fastest"), *near = json_object_get(c, "near");
            long nv[2] = { -1, -1 };
            for (size_t j = 0; j < 2 && j < json_array_size(near); j++)
                if (json_is_integer(json_array_get(near, j)))
                    nv[j] = (long)json_integer_value(json_array_get(near, j));
            if (json_is_integer(fast) && json_integer_value(fast) > 0)
                space_seed_fastest(sp, (long)json_integer_value(json_object_get(c, "grad_accum")),
                                   json_is_true(json_object_get(c, "checkpointing")),
                                   (long)json_integer_value(fast), nv);
            seeded++;
        }
    }
    json_decref(doc);
    return seeded;
}

/* mkdir -p for the cache directory; the last part private (0700). */
static int cache_mkdirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) && errno != EEXIST ? -1 : 0;
}

int cache_save(const struct cache_key *k, const struct space *sp, long choice_accum,
               int choice_ckpt, long choice_micro)
{
    char dir[4000];
    if (!k->path[0] || cache_dir(dir, sizeof dir) || cache_mkdirs(dir) || !cache_dir_ok(k))
        return -1;
    json_t *cells = json_array();
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        long mf = search_max_fit(&c->search), fail = search_min_fail(&c->search);
        if (mf < 0 || c->state == CELL_SKIPPED)
            continue;
        long fast = space_fastest(c), near[2];
        if (choice_micro > 0 && c->grad_accum == choice_accum && c->checkpointing == choice_ckpt)
            fast = choice_micro; /* the old choice, whatever won it (a tie, the pooled mean) */
        space_measured_near(c, fast, near);
        json_t *jn = json_array();
        for (int j = 0; j < 2; j++)
            json_array_append_new(jn, near[j] > 0 ? json_integer(near[j]) : json_null());
        json_array_append_new(cells, json_pack("{s:I, s:b, s:I, s:o, s:o, s:o}", "grad_accum",
                                               (json_int_t)c->grad_accum, "checkpointing",
                                               c->checkpointing, "max_fit", (json_int_t)mf,
                                               "min_fail", fail >= 0 ? json_integer(fail) : json_null(),
                                               "fastest", fast > 0 ? json_integer(fast) : json_null(),
                                               "near", jn));
    }
    json_t *doc = json_pack("{s:s, s:s, s:o}", "schema", "autobatch.cache/1", "key", k->hex,
                            "cells", cells);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text)
        return -1;
    char err[256];
    int rc = afile_write_nofollow(k->path, text, strlen(text), 0600, err, sizeof err);
    free(text);
    return rc;
}
