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
#include <stdlib.h>
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

/* A number in [0, INPROC_MAX_ELEMS], or -1 for null/absent; -2 otherwise. */
static double inproc_size(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v))
        return -1;
    if (!json_is_number(v))
        return -2;
    double x = json_number_value(v);
    return isfinite(x) && x >= 0 && x <= INPROC_MAX_ELEMS ? x : -2;
}

/* The fields of a "worst" line; 0 when one is out of shape. */
static int inproc_parse_worst(json_t *o, struct inproc_worst *w)
{
    const char *mode = json_string_value(json_object_get(o, "mode"));
    if (!mode || (strcmp(mode, "lengths") && strcmp(mode, "scan") && strcmp(mode, "off") &&
                  strcmp(mode, "none")))
        return 0;
    snprintf(w->mode, sizeof w->mode, "%s", mode);
    const char *sig = json_string_value(json_object_get(o, "signal"));
    snprintf(w->signal, sizeof w->signal, "%s", sig ? sig : "");
    w->rank = (long)inproc_int(o, "rank", 0, INPROC_MAX_RANK);
    w->batches_seen = (long)inproc_int(o, "batches_seen", 0, INPROC_MAX_STEP);
    json_t *whole = json_object_get(o, "whole");
    w->whole = json_is_true(whole);
    w->elems = inproc_size(o, "elems");
    w->longest = inproc_size(o, "longest");
    w->position = (long)inproc_int(o, "position", 0, INPROC_MAX_STEP);
    w->median = inproc_size(o, "median");
    w->first = (long)inproc_int(o, "first", 0, INPROC_MAX_STEP);
    w->scan_s = inproc_size(o, "scan_s");
    json_t *sizes = json_object_get(o, "sizes");
    if (sizes && !json_is_array(sizes) && !json_is_null(sizes))
        return 0;
    for (size_t i = 0; json_is_array(sizes) && i < json_array_size(sizes); i++) {
        json_t *x = json_array_get(sizes, i);
        double v = json_is_number(x) ? json_number_value(x) : -1;
        if (!isfinite(v) || v < 0 || v > INPROC_MAX_ELEMS)
            return 0;
        if (w->nsizes < INPROC_WORST_SIZES)
            w->sizes[w->nsizes++] = v;
    }
    if (w->batches_seen == -1)
        w->batches_seen = 0;
    if (w->first == -1)
        w->first = 0;
    if (w->scan_s == -1)
        w->scan_s = 0;
    return w->rank >= -1 && w->batches_seen >= 0 && w->elems >= -1 && w->longest >= -1 &&
           w->position >= -1 && w->median >= -1 && w->first >= 0 && w->scan_s >= 0 &&
           (json_is_boolean(whole) || !whole || json_is_null(whole));
}

/* The fields of a "mem" line; 0 when one is out of shape. */
static int inproc_parse_mem(json_t *o, struct inproc_mem *m)
{
    const char *dev = json_string_value(json_object_get(o, "device"));
    if (!dev || (strcmp(dev, "cuda") && strcmp(dev, "cpu") && strcmp(dev, "other")))
        return 0;
    snprintf(m->device, sizeof m->device, "%s", dev);
    m->rank = (long)inproc_int(o, "rank", 0, INPROC_MAX_RANK);
    m->step = (long)inproc_int(o, "step", 1, INPROC_MAX_STEP);
    m->params = inproc_int(o, "params", 0, INPROC_MAX_BYTES);
    m->grads = inproc_int(o, "grads", 0, INPROC_MAX_BYTES);
    m->optim = inproc_int(o, "optim", 0, INPROC_MAX_BYTES);
    m->peak_alloc = inproc_int(o, "peak_alloc", 0, INPROC_MAX_BYTES);
    m->peak_res = inproc_int(o, "peak_res", 0, INPROC_MAX_BYTES);
    m->held = inproc_int(o, "held", 0, INPROC_MAX_BYTES);
    m->outside = inproc_int(o, "outside", 0, INPROC_MAX_BYTES);
    /* A process that ended before its second step ("at":"failure", at 0
     * or 1 steps) also says what the gradients and the optimizer's state
     * take once allocated; the optimizer's may be unknown (null). */
    json_t *at = json_object_get(o, "at");
    if (at && !json_is_null(at)) {
        const char *a = json_string_value(at);
        if (!a || strcmp(a, "failure"))
            return 0;
        m->failure = 1;
        m->step = (long)inproc_int(o, "step", 0, 1);
        m->grads_expected = inproc_int(o, "grads_expected", 0, INPROC_MAX_BYTES);
        m->optim_expected = inproc_int(o, "optim_expected", 0, INPROC_MAX_BYTES);
        json_t *cls = json_object_get(o, "optim_class");
        if (json_is_string(cls))
            snprintf(m->optim_class, sizeof m->optim_class, "%s", json_string_value(cls));
        else if (cls && !json_is_null(cls))
            return 0;
        if (m->step < 0 || m->grads_expected < 0 || m->optim_expected < -1)
            return 0;
    }
    /* The probe's own counts are always there; the allocator's may be null. */
    return m->rank >= -1 && m->step >= (m->failure ? 0 : 1) && m->params >= 0 && m->grads >= 0 &&
           m->optim >= 0 && m->peak_alloc >= -1 && m->peak_res >= -1 && m->held >= -1 &&
           m->outside >= -1;
}

int inproc_parse_line(const char *line, size_t len, struct inproc_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->rank = ev->world = ev->batch_size = ev->batch_len = ev->batches = -1;
    ev->reserved = ev->allocated = ev->held = ev->vm_peak_kb = -1;
    ev->step = -1;
    ev->t = -1;
    ev->seen = ev->elems = ev->tokens = -1;
    ev->retries = ev->outside = ev->cuda_total = -1;
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
        ev->seen = (long)inproc_int(o, "seen", 0, INPROC_MAX_STEP);
        ev->forwards = (long)inproc_int(o, "fw", 0, INPROC_MAX_STEP);
        ev->elems = inproc_int(o, "elems", 0, INPROC_MAX_BYTES);
        ev->tokens = inproc_int(o, "tok", 0, INPROC_MAX_BYTES);
        ev->retries = inproc_int(o, "retries", 0, INPROC_MAX_STEP);
        ev->outside = inproc_int(o, "outside", 0, INPROC_MAX_BYTES);
        ev->cuda_total = inproc_int(o, "ctotal", 1, INPROC_MAX_BYTES);
        json_t *t = json_object_get(o, "t");
        ev->t = json_is_number(t) ? json_number_value(t) : -1;
        ok = ev->rank >= -1 && ev->world >= -1 && ev->step >= 1 && ev->reserved >= -1 &&
             ev->allocated >= -1 && ev->held >= -1 && ev->batch_size >= -1 && ev->batch_len >= -1 &&
             ev->batches >= -1 && ev->vm_peak_kb >= -1 && isfinite(ev->t) && ev->t >= 0 && ev->t < 1e12 &&
             ev->seen >= -1 && ev->forwards >= -1 && ev->elems >= -1 && ev->tokens >= -1 &&
             ev->retries >= -1 && ev->outside >= -1 && ev->cuda_total >= -1;
        if (ev->forwards < 0 || ev->seen < 0) /* absent (an older probe) or not all seen */
            ev->forwards = 0;
        if (!ev->forwards)
            ev->seen = ev->elems = ev->tokens = -1;
    } else if (ok && !strcmp(kind, "mem")) {
        ev->kind = INPROC_MEM;
        ok = inproc_parse_mem(o, &ev->mem);
        ev->rank = ev->mem.rank;
        ev->step = ev->mem.step;
    } else if (ok && !strcmp(kind, "worst")) {
        ev->kind = INPROC_WORST;
        ok = inproc_parse_worst(o, &ev->worst);
        ev->rank = ev->worst.rank;
    } else {
        ok = 0;
    }
    ev->pid = ok ? (long)pid : 0;
    json_decref(o);
    if (!ok)
        ev->kind = INPROC_NONE;
    return ok;
}

int inproc_seen_add(struct inproc_seen *s, const struct inproc_event *ev)
{
    if (ev->kind != INPROC_STEP || ev->forwards <= 0 || ev->seen <= 0 || s->n >= INPROC_SEEN_MAX)
        return 0;
    if (s->n == s->alloc) {
        size_t na = s->alloc ? 2 * s->alloc : 64;
        struct inproc_seen_step *nv = realloc(s->v, na * sizeof *nv);
        if (!nv)
            return -1;
        s->v = nv;
        s->alloc = na;
    }
    s->v[s->n++] = (struct inproc_seen_step){ ev->step, ev->seen, ev->forwards, ev->tokens };
    return 0;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts it); the lower middle for an even n. */
static long long median_ll(long long *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_ll);
    return v[(n - 1) / 2];
}

long inproc_seen_median(const struct inproc_seen *s, long warmup, struct inproc_seen_summary *out)
{
    memset(out, 0, sizeof *out);
    out->tokens_per_step = -1;
    size_t after = 0;
    for (size_t i = 0; i < s->n; i++)
        after += s->v[i].step > warmup;
    long from = after ? warmup : 0; /* none after the warm-up: all of them */
    size_t n = after ? after : s->n;
    if (!n)
        return 0;
    long long *a = malloc(4 * n * sizeof *a);
    if (!a)
        return 0;
    long long *seen = a, *fw = a + n, *per = a + 2 * n, *tok = a + 3 * n;
    size_t k = 0, nt = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct inproc_seen_step *x = &s->v[i];
        if (x->step <= from)
            continue;
        seen[k] = x->seen;
        fw[k] = x->forwards;
        per[k] = (x->seen + x->forwards / 2) / x->forwards;
        k++;
        if (x->tokens >= 0)
            tok[nt++] = x->tokens;
    }
    out->steps = (long)k;
    out->seen_per_step = (long)median_ll(seen, k);
    out->forwards_per_step = (long)median_ll(fw, k);
    out->per_forward = (long)median_ll(per, k);
    if (nt == k)
        out->tokens_per_step = median_ll(tok, nt);
    free(a);
    return out->steps;
}

void inproc_seen_release(struct inproc_seen *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
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
