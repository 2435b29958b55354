/* SPDX-License-Identifier: MIT */
/*
 * webhook_spool: the payloads a webhook could not deliver, kept as files
 * until `autobatch notify` sends them (webhook_spool_save() and
 * webhook_spool_flush() in webhook.h, which also gives the file format).
 *
 * A spool file holds the full URL, whose path is often a token, so the
 * directory is 0700 and the files 0600, written to a dot-file and renamed
 * so that a reader never sees half a file.  Flushing sends each file with
 * webhook_send() (webhook_deliver.c), signing again with the caller's
 * secret, which is never written here.
 *
 * Library code: returns statuses, prints nothing, reads no environment
 * variable.
 */
#include "output/webhook.h"
#include "output/webhook_int.h"
#include "util/afile.h"
#include "util/errbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SPOOL_SCHEMA "autobatch.webhook-spool/1"
#define SPOOL_FILE_MAX (64u << 20)

/* mkdir -p, new directories 0700. */
static int mkdirs(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errbuf_set(err, errlen, "spool directory name too long");
        return -1;
    }
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0700) == 0) {
                /* The spool holds webhook URLs, which carry tokens: 0700
                 * whatever the umask. */
                chmod(path, 0700);
            } else if (errno != EEXIST) {
                errbuf_set(err, errlen, "cannot create '%s': %s", path, strerror(errno));
                return -1;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errbuf_set(err, errlen, "spool '%s' is not a directory", dir);
        return -1;
    }
    return 0;
}

int webhook_spool_save_delivery(const char *dir, const char *url, const char *body, size_t len,
                                const char *delivery_id, char *err, size_t errlen)
{
    char id[WEBHOOK_UUID_LEN];
    if (!url || !*url) {
        errbuf_set(err, errlen, "no webhook url to spool the payload for");
        return -1;
    }
    if (delivery_id && webhook_uuid_shaped(delivery_id))
        snprintf(id, sizeof id, "%s", delivery_id);
    else if (webhook_uuid4(id, err, errlen) < 0)
        return -1;

    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32], iso[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);

    json_t *doc = json_object(), *jb = json_stringn(body, len);
    int bad = !jb;
    webhook_put(doc, "schema", json_string(SPOOL_SCHEMA), &bad);
    webhook_put(doc, "url", json_string(url), &bad);
    webhook_put(doc, "delivery_id", json_string(id), &bad);
    webhook_put(doc, "created_at", json_string(iso), &bad);
    webhook_put(doc, "body", jb, &bad);
    char *text = bad ? NULL : json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    if (!text) {
        errbuf_set(err, errlen, "cannot spool the webhook payload: not utf-8, or out of memory");
        return -1;
    }
    if (mkdirs(dir, err, errlen) < 0) {
        free(text);
        return -1;
    }

    char path[4200], tmpp[4200];
    snprintf(path, sizeof path, "%s/%s-%s.json", dir, stamp, id);
    snprintf(tmpp, sizeof tmpp, "%s/.%s-%s.tmp", dir, stamp, id);
    int fd = open(tmpp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = -1;
    if (fd < 0) {
        errbuf_set(err, errlen, "cannot create '%s': %s", tmpp, strerror(errno));
    } else if (fchmod(fd, 0600) < 0 || afile_write_all(fd, text, strlen(text)) < 0 ||
               afile_write_all(fd, "\n", 1) < 0 || fsync(fd) < 0) {
        errbuf_set(err, errlen, "cannot write '%s': %s", tmpp, strerror(errno));
    } else if (close(fd) < 0) {
        fd = -1;
        errbuf_set(err, errlen, "cannot write '%s': %s", tmpp, strerror(errno));
    } else if (fd = -1, rename(tmpp, path) < 0) {
        errbuf_set(err, errlen, "cannot rename '%s' to '%s': %s", tmpp, path, strerror(errno));
    } else {
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmpp);
    free(text);
    return rc;
}

int webhook_spool_save(const char *dir, const char *url, const char *body, size_t len,
                       char *err, size_t errlen)
{
    return webhook_spool_save_delivery(dir, url, body, len, NULL, err, errlen);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of spool files in dir, sorted (oldest first). */
static int list_spool(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        errbuf_set(err, errlen, "cannot read spool '%s': %s", dir, strerror(errno));
        return -1;
    }
    size_t alloc = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
            continue;
        if (*n == alloc) {
            size_t na = alloc ? alloc * 2 : 16;
            char **nn = realloc(*names, na * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            *names = nn;
            alloc = na;
        }
        if (!((*names)[*n] = strdup(de->d_name))) {
            rc = -1;
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (rc < 0)
        errbuf_set(err, errlen, "cannot read spool '%s': out of memory", dir);
    else if (*n)
        qsort(*names, *n, sizeof **names, cmp_names);
    return rc;
}

/* Read and check one spool file; the caller decrefs. */
static json_t *read_spool_file(const char *path, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO in the spool would otherwise hang this open
     * forever, before the check below could refuse it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        errbuf_set(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > SPOOL_FILE_MAX) {
        errbuf_set(err, errlen, "'%s' is not a spool file (too large or not a file)", path);
        close(fd);
        return NULL;
    }
    json_error_t je;
    json_t *doc = json_loadfd(fd, 0, &je);
    close(fd);
    if (!doc) {
        errbuf_set(err, errlen, "cannot parse '%s': %s", path, je.text);
        return NULL;
    }
    const json_t *schema = json_object_get(doc, "schema");
    if (!json_is_string(schema) || strcmp(json_string_value(schema), SPOOL_SCHEMA) ||
        !json_is_string(json_object_get(doc, "url")) ||
        !json_is_string(json_object_get(doc, "body"))) {
        errbuf_set(err, errlen, "'%s' is not a spool file (schema " SPOOL_SCHEMA ")", path);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* The flush of webhook_spool_flush(): one per call, across its directories. */
struct flush {
    const struct webhook_opts *o;
    const char *only_url;
    /* URLs that failed for a reason other than a refusal in this flush:
     * their other payloads wait for the next one, so that a webhook that
     * is down costs one series of retries, not one per payload or per
     * directory. */
    char **down;
    size_t ndown, alloc;
    int sent, left, have_err;
    char *err;
    size_t errlen;
};

static int flush_is_down(const struct flush *f, const char *url)
{
    for (size_t k = 0; k < f->ndown; k++)
        if (!strcmp(f->down[k], url))
            return 1;
    return 0;
}

static void flush_mark_down(struct flush *f, const char *url)
{
    if (f->ndown == f->alloc) {
        size_t na = f->alloc ? f->alloc * 2 : 8;
        char **nd = realloc(f->down, na * sizeof *nd);
        if (!nd)
            return;     /* then only the next payload for url is tried again */
        f->down = nd;
        f->alloc = na;
    }
    if ((f->down[f->ndown] = strdup(url)))
        f->ndown++;
}

/* The first failure of the flush is the one err names. */
static void flush_fail(struct flush *f, const char *msg)
{
    if (!f->have_err++)
        errbuf_set(f->err, f->errlen, "%s", msg);
}

/* One spool file: sent to the URL it was kept for, removed once delivered. */
static void flush_one(struct flush *f, const char *dir, const char *name)
{
    char path[4200], msg[1024], why[5300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (f->o->cancel && *f->o->cancel) {
        f->left++;
        return;
    }
    json_t *doc = read_spool_file(path, msg, sizeof msg);
    if (!doc) {
        f->left++;
        flush_fail(f, msg);
        return;
    }
    /* The payload goes to its own URL and nowhere else: a kept payload
     * is one project's results, and another URL is another channel. */
    const char *url = json_string_value(json_object_get(doc, "url"));
    if (f->only_url && strcmp(url, f->only_url)) {
        json_decref(doc);
        return;
    }
    if (flush_is_down(f, url)) {
        f->left++;
        json_decref(doc);
        return;
    }
    struct webhook_opts one = *f->o;
    one.url = url;
    const json_t *id = json_object_get(doc, "delivery_id");
    one.delivery_id = json_is_string(id) ? json_string_value(id) : NULL;
    const json_t *body = json_object_get(doc, "body");
    struct webhook_result r;
    if (webhook_send(&one, json_string_value(body), json_string_length(body), &r, msg,
                     sizeof msg) == 0) {
        f->sent++;
        if (unlink(path) < 0) {
            snprintf(why, sizeof why, "delivered '%s' but cannot remove it: %s", path,
                     strerror(errno));
            flush_fail(f, why);
        }
    } else {
        f->left++;
        snprintf(why, sizeof why, "'%s': %s", path, msg);
        flush_fail(f, why);
        if (!r.permanent)
            flush_mark_down(f, url);
    }
    json_decref(doc);
}

int webhook_spool_flush(const char *const *dirs, size_t ndirs, const struct webhook_opts *o,
                        const char *only_url, int *sent, int *left, char *err, size_t errlen)
{
    struct flush f = { .o = o, .only_url = only_url, .err = err, .errlen = errlen };
    for (size_t d = 0; d < ndirs; d++) {
        char **names;
        size_t n;
        char msg[1024];
        if (list_spool(dirs[d], &names, &n, msg, sizeof msg) < 0) {
            flush_fail(&f, msg);
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            flush_one(&f, dirs[d], names[i]);
            free(names[i]);
        }
        free(names);
    }
    for (size_t k = 0; k < f.ndown; k++)
        free(f.down[k]);
    free(f.down);
    *sent = f.sent;
    *left = f.left;
    if (f.left && !f.have_err)
        errbuf_set(err, errlen, "%d kept payload%s not sent", f.left, f.left == 1 ? "" : "s");
    return f.left || f.have_err ? -1 : 0;
}
