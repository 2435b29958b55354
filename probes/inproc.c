/* SPDX-License-Identifier: MIT */
/*
 * inproc: writing the in-process probe where trials find it, and reading
 * what it reports (see inproc.h).  The probe's Python source is compiled
 * into the binary from probes/python/sitecustomize.py, so autobatch needs
 * nothing installed beside it.
 */
#include "inproc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/errbuf.h"

extern const char ab_probe_sitecustomize[];
extern const size_t ab_probe_sitecustomize_len;

/* A whole number in [lo, hi], or -1 for null/absent; -2 when out of range. */
static long long inproc_int(json_t *o, const char *key, long long lo, long long hi)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return -1;
    if (!json_is_integer(v))
        return -2;
    long long n = json_integer_value(v);
    return n < lo || n > hi ? -2 : n;
}

int inproc_parse_line(const char *line, size_t len, struct inproc_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->rank = ev->world = ev->batch_size = ev->batch_len = ev->batches = -1;
    ev->reserved = ev->allocated = ev->held = ev->vm_peak_kb = -1;
    ev->step = -1;
    ev->t = -1;
    if (len == 0 || len > 4096 || line[0] != '{')
        return 0;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    const char *kind = json_string_value(json_object_get(o, "ab"));
    long long pid = inproc_int(o, "pid", 1, 1LL << 31);
    int ok = kind && pid > 0;
    if (ok && !strcmp(kind, "torch")) {
        ev->kind = INPROC_TORCH;
        snprintf(ev->text, sizeof ev->text, "%s",
                 json_string_value(json_object_get(o, "version")) ?
                 json_string_value(json_object_get(o, "version")) : "?");
        snprintf(ev->hook, sizeof ev->hook, "%s",
                 json_string_value(json_object_get(o, "hook")) ?
                 json_string_value(json_object_get(o, "hook")) : "?");
        ev->rank = inproc_int(o, "rank", 0, INPROC_MAX_RANK);
        ok = ev->rank >= -1;
    } else if (ok && !strcmp(kind, "error")) {
        ev->kind = INPROC_ERROR;
        const char *w = json_string_value(json_object_get(o, "what"));
        snprintf(ev->text, sizeof ev->text, "%s", w ? w : "?");
    } else if (ok && !strcmp(kind, "step")) {
        ev->kind = INPROC_STEP;
        ev->rank = inproc_int(o, "rank", 0, INPROC_MAX_RANK);
        ev->world = inproc_int(o, "world", 1, INPROC_MAX_RANK + 1);
        ev->step = (long)inproc_int(o, "step", 1, INPROC_MAX_STEP);
        ev->reserved = inproc_int(o, "res", 0, INPROC_MAX_BYTES);
        ev->allocated = inproc_int(o, "alloc", 0, INPROC_MAX_BYTES);
        ev->held = inproc_int(o, "held", 0, INPROC_MAX_BYTES);
        ev->batch_size = (long)inproc_int(o, "bs", 0, INPROC_MAX_STEP);
        ev->batch_len = (long)inproc_int(o, "blen", 0, INPROC_MAX_STEP);
        ev->batches = (long)inproc_int(o, "nb", 0, INPROC_MAX_STEP);
        ev->vm_peak_kb = inproc_int(o, "vm", 0, INPROC_MAX_BYTES / 1024);
        json_t *t = json_object_get(o, "t");
        ev->t = json_is_number(t) ? json_number_value(t) : -1;
        ok = ev->rank >= -1 && ev->world >= -1 && ev->step >= 1 && ev->reserved >= -1 &&
             ev->allocated >= -1 && ev->held >= -1 && ev->batch_size >= -1 && ev->batch_len >= -1 &&
             ev->batches >= -1 && ev->vm_peak_kb >= -1 && isfinite(ev->t) && ev->t >= 0 && ev->t < 1e12;
    } else {
        ok = 0;
    }
    ev->pid = ok ? (long)pid : 0;
    json_decref(o);
    if (!ok)
        ev->kind = INPROC_NONE;
    return ok;
}

int inproc_install(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) && errno != EEXIST)
        return errbuf_set(err, errlen, "cannot make '%s': %s", dir, strerror(errno)), -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return errbuf_set(err, errlen, "cannot write '%s': %s", path, strerror(errno)), -1;
    size_t off = 0;
    while (off < ab_probe_sitecustomize_len) {
        ssize_t n = write(fd, ab_probe_sitecustomize + off, ab_probe_sitecustomize_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            return errbuf_set(err, errlen, "cannot write '%s': %s", path, strerror(e)), -1;
        }
        off += (size_t)n;
    }
    if (close(fd))
        return errbuf_set(err, errlen, "cannot write '%s': %s", path, strerror(errno)), -1;
    return 0;
}
