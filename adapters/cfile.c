/* SPDX-License-Identifier: MIT */
/*
 * cfile: format dispatch and bookkeeping around the two editors (see
 * cfile.h).  The editors never see a path; this file never parses.
 */
#include "cfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/afile.h"
#include "jedit.h"
#include "yedit.h"

/* Config files are small; anything bigger is not one. */
#define CFILE_MAX (64L * 1024 * 1024)

static int cfile_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

enum cfile_format cfile_format_of(const char *path, const char *bytes, size_t len)
{
    if (cfile_ends_with(path, ".json") || cfile_ends_with(path, ".jsonc") ||
        cfile_ends_with(path, ".json5"))
        return CFILE_JSON;
    if (cfile_ends_with(path, ".yaml") || cfile_ends_with(path, ".yml"))
        return CFILE_YAML;
    size_t i = 0;
    if (len >= 3 && !memcmp(bytes, "\xEF\xBB\xBF", 3))
        i = 3;
    while (i < len && strchr(" \t\r\n", bytes[i]))
        i++;
    return i < len && (bytes[i] == '{' || bytes[i] == '[') ? CFILE_JSON : CFILE_YAML;
}

int cfile_load(struct cfile *f, const char *path, char *err, size_t errlen)
{
    struct stat st;
    FILE *fp = NULL;
    if (stat(path, &st)) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot read '%s': not a regular file", path);
        return -1;
    }
    if (st.st_size > CFILE_MAX) {
        snprintf(err, errlen, "'%s' is too large for a config file", path);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    if (!buf || !(fp = fopen(path, "rb"))) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        free(buf);
        return -1;
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, fp);
    int bad = ferror(fp);
    fclose(fp);
    if (bad || n != (size_t)st.st_size) {
        snprintf(err, errlen, "cannot read '%s': short read", path);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    char *copy = malloc(n + 1);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        free(buf);
        return -1;
    }
    memcpy(copy, buf, n + 1);
    f->format = cfile_format_of(path, buf, n);
    f->orig = buf;
    f->orig_len = n;
    f->cur = copy;
    f->cur_len = n;
    return 0;
}

enum cedit_status cfile_get(const struct cfile *f, const char *key, char **value,
                            char *err, size_t errlen)
{
    return f->format == CFILE_JSON ? jedit_get(f->cur, f->cur_len, key, value, err, errlen)
                                   : yedit_get(f->cur, f->cur_len, key, value, err, errlen);
}

enum cedit_status cfile_set(struct cfile *f, const char *key, const char *value,
                            char *err, size_t errlen)
{
    char *out = NULL;
    size_t outlen = 0;
    enum cedit_status st =
        f->format == CFILE_JSON
            ? jedit_set(f->cur, f->cur_len, key, value, &out, &outlen, err, errlen)
            : yedit_set(f->cur, f->cur_len, key, value, &out, &outlen, err, errlen);
    if (st != CEDIT_OK)
        return st;
    free(f->cur);
    f->cur = out;
    f->cur_len = outlen;
    return CEDIT_OK;
}

int cfile_changed(const struct cfile *f)
{
    return f->cur_len != f->orig_len || memcmp(f->cur, f->orig, f->cur_len);
}

int cfile_save(const struct cfile *f, const char *path, char *err, size_t errlen)
{
    mode_t um = umask(0);
    umask(um);
    return cfile_save_mode(f, path, 0666 & ~um, err, errlen);
}

int cfile_save_mode(const struct cfile *f, const char *path, unsigned new_mode, char *err,
                    size_t errlen)
{
    /* A file nobody may write is one its owner does not want changed;
     * replacing it by rename would succeed, so ask first.  (root passes
     * access(W_OK) for any file, hence the mode bits.) */
    struct stat st;
    if (!stat(path, &st) && S_ISREG(st.st_mode) && !(st.st_mode & 0222)) {
        snprintf(err, errlen, "'%s' is read-only; make it writable (chmod u+w) to change it", path);
        return -1;
    }
    return afile_write_mode(path, f->cur, f->cur_len, new_mode, err, errlen);
}

/* The value at key in bytes, tagged for comparison ("=VALUE", or how it
 * is missing), malloc'd; NULL when out of memory. */
static char *cfile_value(enum cfile_format format, const char *bytes, size_t len,
                         const char *key)
{
    char *v = NULL, e[256], *out = NULL;
    enum cedit_status st = format == CFILE_JSON ? jedit_get(bytes, len, key, &v, e, sizeof e)
                                                : yedit_get(bytes, len, key, &v, e, sizeof e);
    const char *why = st == CEDIT_NOT_FOUND    ? "(absent)"
                    : st == CEDIT_NOT_SCALAR   ? "(not a single value)"
                    : st != CEDIT_OK           ? "(unreadable)"
                                               : NULL;
    if (why)
        out = strdup(why);
    else if (asprintf(&out, "=%s", v) < 0)
        out = NULL;
    free(v);
    return out;
}

enum cfile_drift cfile_reread(const struct cfile *f, const char *path, const char *const *keys,
                              struct cfile *now, const char **conflict, char *err,
                              size_t errlen)
{
    *conflict = NULL;
    if (cfile_load(now, path, err, errlen))
        return CFILE_UNREADABLE;
    if (now->orig_len == f->orig_len && !memcmp(now->orig, f->orig, f->orig_len))
        return CFILE_SAME;
    enum cfile_drift d = CFILE_CHANGED;
    for (size_t i = 0; keys[i] && d == CFILE_CHANGED; i++) {
        char *was = cfile_value(f->format, f->orig, f->orig_len, keys[i]);
        char *ours = cfile_value(f->format, f->cur, f->cur_len, keys[i]);
        char *is = cfile_value(now->format, now->orig, now->orig_len, keys[i]);
        if (!was || !ours || !is) {
            snprintf(err, errlen, "out of memory");
            d = CFILE_UNREADABLE;
        } else if (strcmp(is, was) && strcmp(is, ours)) {
            snprintf(err, errlen, "%s is now %s (was %s)", keys[i], is + (is[0] == '='),
                     was + (was[0] == '='));
            *conflict = keys[i];
            d = CFILE_CONFLICT;
        }
        free(was);
        free(ours);
        free(is);
    }
    return d;
}

void cfile_release(struct cfile *f)
{
    free(f->orig);
    free(f->cur);
    struct cfile zero = CFILE_INIT;
    *f = zero;
}
