/* SPDX-License-Identifier: MIT */
/*
 * replay: the trace reader, the per-allocation fit and the replays
 * (see replay.h).
 */
#include "replay.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "casim.h"
#include "util/errbuf.h"

/* ------------------------------------------------------------- reading */

struct evbuf {
    int64_t *v;
    size_t n, cap;
};

static int evbuf_push(struct evbuf *b, int64_t x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        int64_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

void replay_trace_release(struct replay_trace *t)
{
    free(t->ev[0]);
    free(t->ev[1]);
    *t = (struct replay_trace)REPLAY_TRACE_INIT;
}

/* A header value: a whole number, -1 allowed. */
static int replay_num(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || (*end && *end != '\n') || v < -1)
        return -1;
    *out = v;
    return 0;
}

int replay_trace_load(const char *path, struct replay_trace *t, char *err, size_t errlen)
{
    *t = (struct replay_trace)REPLAY_TRACE_INIT;
    struct stat st;
    FILE *f = fopen(path, "re");
    if (!f)
        return errbuf_set(err, errlen, "cannot read trace '%s': %s", path, strerror(errno)), -1;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size > REPLAY_MAX_BYTES) {
        fclose(f);
        return errbuf_set(err, errlen, "trace '%s' is not a regular file of at most 64 MiB", path),
               -1;
    }
    /* Both devices' events are read; the GPU's win when there are any. */
    struct evbuf ev[2][2] = { { { 0 } } }; /* [device c/g][step] */
    char line[256];
    int step = -1, ended = 0, header = 0;
    int64_t count = -1, seen = 0;
    const char *bad = NULL;
    while (!bad && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n') && !feof(f)) {
            bad = "a line is too long";
            break;
        }
        if (!header) {
            header = !strcmp(line, "autobatch-trace 1\n");
            if (!header)
                bad = "not an autobatch trace (no 'autobatch-trace 1' first line)";
            continue;
        }
        if (ended) {
            bad = "text after 'end'";
            break;
        }
        char kind, dev;
        long long size, addr;
        int64_t v;
        char key[32], val[64];
        if (sscanf(line, "%c %c %lld %lld", &kind, &dev, &size, &addr) == 4 &&
            (kind == 'a' || kind == 'f') && line[1] == ' ' && (dev == 'c' || dev == 'g')) {
            if (step < 0 || size < 0) {
                bad = step < 0 ? "an event before 'step 1'" : "a negative size";
                break;
            }
            if (evbuf_push(&ev[dev == 'g'][step], kind == 'a' ? size : -size)) {
                bad = "out of memory";
                break;
            }
            seen++;
        } else if (!strncmp(line, "truncated", 9)) {
            bad = "the probe's trace was cut at its size cap (AUTOBATCH_RECORD_MAX); not trusted";
        } else if (sscanf(line, "%31s %63s", key, val) == 2 && replay_num(val, &v) == 0) {
            if (!strcmp(key, "step")) {
                if (v != step + 2 || v > 2)
                    bad = "steps out of order";
                step = (int)v - 1;
            } else if (!strcmp(key, "end")) {
                ended = 1;
                count = v;
            } else if (!strcmp(key, "vm_peak_kb")) {
                t->vm_peak = v < 0 ? -1 : v * 1024;
            } else if (!strcmp(key, "vm_size_kb")) {
                t->vm_size = v < 0 ? -1 : v * 1024;
            } else if (!strcmp(key, "cuda_reserved")) {
                t->cuda_reserved = v;
            } else if (!strcmp(key, "cuda_allocated")) {
                t->cuda_allocated = v;
            } else if (!strcmp(key, "cuda_outside")) {
                t->cuda_outside = v;
            } else if (!strcmp(key, "rank")) {
                t->rank = (long)v;
            } /* pid, world: for people reading the file */
        } else if (step >= 0 || !strchr(line, ' ')) {
            bad = "a line that is not an event or a header";
        } /* other header lines (torch VERSION, timings): for people */
    }
    int rerr = ferror(f);
    fclose(f);
    if (!bad && rerr)
        bad = "read error";
    if (!bad && (!ended || count != seen || step != 1))
        bad = "cut short (the trial ended before its recording was written whole)";
    int g = ev[1][0].n + ev[1][1].n > 0;
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 2; s++)
            if (bad || d != g)
                free(ev[d][s].v);
    if (bad) {
        *t = (struct replay_trace)REPLAY_TRACE_INIT;
        return errbuf_set(err, errlen, "trace '%s': %s", path, bad), -1;
    }
    t->device = g ? 'g' : 'c';
    for (int s = 0; s < 2; s++) {
        t->ev[s] = ev[g][s].v;
        t->nev[s] = ev[g][s].n;
    }
    return 0;
}

/* ------------------------------------------------------------- fitting */

void replay_model_release(struct replay_model *m)
{
    free(m->a);
    free(m->b);
    free(m->c);
    free(m->frees);
    *m = (struct replay_model)REPLAY_MODEL_INIT;
}

/* Event i's size at b: a size that shrinks as the batch grows stops at 0. */
static int64_t replay_size(const struct replay_model *m, size_t i, long b)
{
    double bb = (double)b;
    double s = m->a[i] + m->b[i] * bb + m->c[i] * bb * bb;
    return s < 0 ? 0 : (int64_t)llround(s);
}

/* The step's peak live bytes on CPU at b; -1 when a size goes negative. */
static int64_t replay_peak_live(const struct replay_model *m, long b)
{
    int64_t live = 0, peak = 0;
    for (size_t i = 0; i < m->n; i++) {
        int64_t sz = replay_size(m, i, b);
        if (sz < 0)
            return -1; /* the model does not reach b */
        live += m->frees[i] ? -sz : sz;
        if (live > peak)
            peak = live;
    }
    return peak;
}

static int replay_decline(struct replay_model *m, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int replay_decline(struct replay_model *m, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    replay_model_release(m);
    return -1;
}

/* Do event x (of a trace at micro-batch b0) and y (at b1 = ratio x b0)
 * correspond?  The same sign, and sizes no further apart than the
 * batches are (plus 64 KiB for an intercept). */
static int replay_match(int64_t x, int64_t y, double ratio)
{
    if (ratio == 1 || x == y)
        return x == y;
    if ((x > 0) != (y > 0))
        return 0;
    double ax = (double)(x < 0 ? -x : x), ay = (double)(y < 0 ? -y : y);
    return ay <= ratio * ax + 65536 && ax <= ratio * ay + 65536;
}

/*
 * Align a and b (Myers' O((n+m)D) diff): the pairs of events they share,
 * in order, into ia[] and ib[] (room for min(na, nb) each), when at most
 * maxd events are in one and not the other.  ratio 1: events match when
 * equal (two steps of one trial); else by replay_match (two trials).
 * Returns the number of pairs, -1 when more than maxd differ, -2 ENOMEM.
 */
static long replay_diff(const int64_t *a, size_t na, const int64_t *b, size_t nb, size_t maxd,
                        double ratio, size_t *ia, size_t *ib)
{
    long N = (long)na, M = (long)nb, D = (long)maxd, W = 2 * D + 3, off = D + 1;
    long *hist = calloc((size_t)((D + 1) * W), sizeof *hist);
    long *v = calloc((size_t)W, sizeof *v);
    if (!hist || !v) {
        free(hist);
        free(v);
        return -2;
    }
    long found = -1, fx = 0, fy = 0;
    for (long d = 0; d <= D && found < 0; d++) {
        for (long k = -d; k <= d; k += 2) {
            long x = k == -d || (k != d && v[off + k - 1] < v[off + k + 1]) ? v[off + k + 1]
                                                                          : v[off + k - 1] + 1;
            long y = x - k;
            while (x < N && y < M && replay_match(a[x], b[y], ratio))
                x++, y++;
            v[off + k] = x;
            if (x >= N && y >= M) {
                found = d;
                fx = x;
                fy = y;
                break;
            }
        }
        memcpy(hist + d * W, v, (size_t)W * sizeof *v);
    }
    free(v);
    if (found < 0) {
        free(hist);
        return -1;
    }
    /* Walk back, collecting the diagonal runs (the pairs) in reverse. */
    size_t cnt = 0;
    long x = fx, y = fy;
    for (long d = found; d > 0; d--) {
        const long *pv = hist + (d - 1) * W;
        long k = x - y;
        long pk = k == -d || (k != d && pv[off + k - 1] < pv[off + k + 1]) ? k + 1 : k - 1;
        long px = pv[off + pk], py = px - pk;
        long sx = pk == k + 1 ? px : px + 1;
        while (x > sx) {
            ia[cnt] = (size_t)--x;
            ib[cnt++] = (size_t)--y;
        }
        x = px;
        y = py;
    }
    while (x > 0) {
        ia[cnt] = (size_t)--x;
        ib[cnt++] = (size_t)--y;
    }
    free(hist);
    for (size_t i = 0; i < cnt / 2; i++) {
        size_t t1 = ia[i], t2 = ib[i];
        ia[i] = ia[cnt - 1 - i];
        ib[i] = ib[cnt - 1 - i];
        ia[cnt - 1 - i] = t1;
        ib[cnt - 1 - i] = t2;
    }
    return (long)cnt;
}

/* How many events may differ between two sequences of these lengths. */
static size_t replay_maxd(size_t n0, size_t n1)
{
    size_t longer = n0 > n1 ? n0 : n1;
    return longer / 50 > REPLAY_MAX_UNSTEADY ? REPLAY_MAX_UNSTEADY : longer / 50 > 8 ? longer / 50 : 8;
}

static int replay_fit_steady(int64_t *const *ev, size_t len, const struct replay_trace *t,
                             const long *batch, size_t n, struct replay_model *m, char *why,
                             size_t whylen);

int replay_fit(const struct replay_trace *t, const long *batch, size_t n, struct replay_model *m,
               char *why, size_t whylen)
{
    *m = (struct replay_model)REPLAY_MODEL_INIT;
    if (n < 2 || n > 3)
        return replay_decline(m, why, whylen, "needs two or three recorded sizes");
    for (size_t k = 0; k < n; k++) {
        if (k && batch[k] <= batch[k - 1])
            return replay_decline(m, why, whylen, "recorded sizes out of order");
        if (t[k].device != t[0].device)
            return replay_decline(m, why, whylen, "one trace is of the GPU, another of the CPU");
    }
    /* Each trial's steady step: what its two recorded steps share; then
     * the steady steps of the trials aligned with the first one's. */
    int64_t *ev[3] = { NULL, NULL, NULL };
    size_t nev[3] = { 0, 0, 0 }, cap = 0;
    for (size_t k = 0; k < n; k++)
        cap = t[k].nev[0] + t[k].nev[1] > cap ? t[k].nev[0] + t[k].nev[1] : cap;
    size_t *ia = malloc((cap + 1) * sizeof *ia), *ib = malloc((cap + 1) * sizeof *ib);
    size_t *keep = calloc(cap + 1, sizeof *keep);      /* ev[0] index -> trials matched */
    size_t *at[3] = { NULL, NULL, NULL };              /* ev[0] index -> ev[k] index */
    int rc = ia && ib && keep ? 0 : replay_decline(m, why, whylen, "out of memory");
    for (size_t k = 0; k < n && !rc; k++) {
        size_t maxd = replay_maxd(t[k].nev[0], t[k].nev[1]);
        long c = replay_diff(t[k].ev[0], t[k].nev[0], t[k].ev[1], t[k].nev[1], maxd, 1, ia, ib);
        ev[k] = c >= 0 ? malloc(((size_t)c + 1) * sizeof *ev[k]) : NULL;
        if (c == -1) {
            rc = replay_decline(m, why, whylen,
                                "two steps at micro-batch %ld allocate differently (%zu and %zu "
                                "allocations and frees, more than %zu apart): shapes depend on "
                                "the data; a worst-case batch (longest samples) makes them steady",
                                batch[k], t[k].nev[0], t[k].nev[1], maxd);
            break;
        }
        if (!ev[k]) {
            rc = replay_decline(m, why, whylen, "out of memory");
            break;
        }
        for (long i = 0; i < c; i++)
            ev[k][i] = t[k].ev[1][ib[i]];
        nev[k] = (size_t)c;
        if (t[k].nev[1] - nev[k] > m->unsteady)
            m->unsteady = t[k].nev[1] - nev[k];
    }
    for (size_t k = 1; k < n && !rc; k++) {
        size_t maxd = replay_maxd(nev[0], nev[k]);
        long c = replay_diff(ev[0], nev[0], ev[k], nev[k], maxd,
                             (double)batch[k] / (double)batch[0], ia, ib);
        at[k] = c >= 0 ? calloc(nev[0] + 1, sizeof *at[k]) : NULL;
        if (c == -1 || !at[k]) {
            rc = replay_decline(m, why, whylen,
                                c == -1 ? "the traces at micro-batch %ld and %ld do not align "
                                          "(%zu and %zu allocations and frees per step)"
                                        : "out of memory", batch[0], batch[k], nev[0], nev[k]);
            break;
        }
        for (long i = 0; i < c; i++) {
            keep[ia[i]]++;
            at[k][ia[i]] = ib[i] + 1;
        }
    }
    /* The events of the first trial that every other trial has. */
    size_t len = 0;
    for (size_t i = 0; !rc && i < nev[0]; i++) {
        if (keep[i] != n - 1)
            continue;
        for (size_t k = 1; k < n; k++)
            ev[k][len] = ev[k][at[k][i] - 1];
        ev[0][len++] = ev[0][i];
    }
    if (!rc && nev[0] - len > m->unsteady)
        m->unsteady = nev[0] - len;
    free(ia);
    free(ib);
    free(keep);
    for (size_t k = 0; k < 3; k++)
        free(at[k]);
    if (!rc)
        rc = replay_fit_steady(ev, len, t, batch, n, m, why, whylen);
    for (size_t k = 0; k < 3; k++)
        free(ev[k]);
    return rc;
}

/* replay_fit on the steady steps ev[k] (len events each). */
static int replay_fit_steady(int64_t *const *ev, size_t len, const struct replay_trace *t,
                             const long *batch, size_t n, struct replay_model *m, char *why,
                             size_t whylen)
{
    size_t unsteady = m->unsteady;
    if (len == 0)
        return replay_decline(m, why, whylen, "the recorded steps allocated nothing");
    m->device = t[0].device;
    m->n = len;
    m->unsteady = unsteady;
    m->a = calloc(len, sizeof *m->a);
    m->b = calloc(len, sizeof *m->b);
    m->c = calloc(len, sizeof *m->c);
    m->frees = calloc(len, 1);
    if (!m->a || !m->b || !m->c || !m->frees)
        return replay_decline(m, why, whylen, "out of memory");
    double x0 = (double)batch[0], x1 = (double)batch[1];
    for (size_t i = 0; i < len; i++) {
        int64_t s0 = ev[0][i], s1 = ev[1][i];
        if ((s0 > 0) != (s1 > 0))
            return replay_decline(m, why, whylen,
                                  "the traces at micro-batch %ld and %ld do not align (event %zu "
                                  "allocates in one and frees in the other)", batch[0], batch[1], i);
        m->frees[i] = s0 < 0;
        s0 = s0 < 0 ? -s0 : s0;
        s1 = s1 < 0 ? -s1 : s1;
        m->b[i] = (double)(s1 - s0) / (x1 - x0);
        m->a[i] = (double)s0 - m->b[i] * x0;
    }
    /* A third size checks the line; where it misses, a quadratic through
     * the three points replaces it. */
    if (n == 3) {
        double x2 = (double)batch[2];
        for (size_t i = 0; i < len; i++) {
            int64_t s0 = ev[0][i], s1 = ev[1][i], s2 = ev[2][i];
            if ((s2 > 0) != (s0 > 0))
                return replay_decline(m, why, whylen,
                                      "the traces at micro-batch %ld and %ld do not align (event "
                                      "%zu)", batch[0], batch[2], i);
            s0 = s0 < 0 ? -s0 : s0;
            s1 = s1 < 0 ? -s1 : s1;
            s2 = s2 < 0 ? -s2 : s2;
            if (fabs(m->a[i] + m->b[i] * x2 - (double)s2) < 0.5)
                continue;
            /* Newton's divided differences. */
            double d01 = (double)(s1 - s0) / (x1 - x0), d12 = (double)(s2 - s1) / (x2 - x1);
            double c = (d12 - d01) / (x2 - x0);
            m->c[i] = c;
            m->b[i] = d01 - c * (x0 + x1);
            m->a[i] = (double)s0 - m->b[i] * x0 - c * x0 * x0;
            m->quadratic = 1;
        }
    }
    for (size_t i = 0; i < len; i++) {
        if (m->c[i] != 0)
            m->nquad++;
        else if (m->b[i] != 0)
            m->nlinear++;
        else
            m->nconst++;
    }
    for (size_t k = 0; k < n; k++)
        m->rec[m->nrec++] = batch[k];

    /* What lies outside the step, from the recorded trials. */
    m->outside = 0;
    for (size_t k = 0; k < n; k++) {
        if (m->device == 'g') {
            if (t[k].cuda_outside < 0)
                return replay_decline(m, why, whylen, "a GPU trace without the memory outside "
                                                      "the caching allocator");
            if (t[k].cuda_outside > m->outside)
                m->outside = t[k].cuda_outside;
            continue;
        }
        if (t[k].vm_peak < 0 || t[k].vm_size < 0)
            return replay_decline(m, why, whylen, "a CPU trace without the process's VmPeak "
                                                  "and VmSize");
        if (t[k].vm_size > m->outside)
            m->outside = t[k].vm_size;
        if (k == 0)
            m->floor = t[k].vm_peak; /* the smallest size's: least of the steps in it */
    }
    return 0;
}

/* ------------------------------------------------------------ replaying */

/* A size -> live-count table, for finding the frees of blocks made
 * before the step (open addressing; sizes are never 0 here). */
struct sizecount {
    int64_t *key;
    long *val;
    size_t cap;
};

static long *sizecount_at(struct sizecount *h, int64_t key)
{
    size_t i = (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 20) & (h->cap - 1);
    while (h->key[i] && h->key[i] != key)
        i = (i + 1) & (h->cap - 1);
    h->key[i] = key;
    return &h->val[i];
}

/* The step's events at b as casim_replay takes them (+ alloc, - free),
 * with the blocks the step frees but did not allocate (made before it)
 * allocated first, so that casim_replay can pair every free.  Zero-byte
 * events are left out (casim rounds them to 512 bytes but so would both
 * sides).  NULL on ENOMEM or a negative size. */
static int64_t *replay_gpu_events(const struct replay_model *m, long b, size_t *n)
{
    struct sizecount h = { NULL, NULL, 1 };
    while (h.cap < 2 * m->n + 2)
        h.cap *= 2;
    h.key = calloc(h.cap, sizeof *h.key);
    h.val = calloc(h.cap, sizeof *h.val);
    int64_t *ev = malloc((2 * m->n + 1) * sizeof *ev);
    size_t pre = 0, k = 0;
    int ok = h.key && h.val && ev;
    /* First pass: count the frees that find no live block of their size. */
    for (size_t i = 0; ok && i < m->n; i++) {
        int64_t s = replay_size(m, i, b);
        if (s < 0) {
            ok = 0;
            break;
        }
        if (s == 0)
            continue;
        long *live = sizecount_at(&h, s);
        if (!m->frees[i])
            ++*live;
        else if (*live > 0)
            --*live;
        else
            ev[pre++] = s; /* made before the step */
    }
    for (size_t i = 0; ok && i < m->n; i++) {
        int64_t s = replay_size(m, i, b);
        if (s > 0)
            ev[pre + k++] = m->frees[i] ? -s : s;
    }
    free(h.key);
    free(h.val);
    if (!ok) {
        free(ev);
        return NULL;
    }
    *n = pre + k;
    return ev;
}

int64_t replay_need(const struct replay_model *m, long b, int64_t capacity, int *fits)
{
    *fits = 0;
    if (m->device != 'g') {
        int64_t peak = replay_peak_live(m, b);
        if (peak < 0)
            return -1;
        int64_t need = m->outside + peak > m->floor ? m->outside + peak : m->floor;
        *fits = need <= capacity;
        return need;
    }
    size_t n;
    int64_t *ev = replay_gpu_events(m, b, &n);
    if (!ev)
        return -1;
    /* Under the capacity when it fits; unbounded (the whole need) when not. */
    struct casim_stats st;
    int64_t room = capacity - m->outside;
    int ok = room > 0 && casim_replay(ev, n, (uint64_t)room, &st) == 0;
    if (!ok)
        casim_replay(ev, n, 0, &st);
    free(ev);
    *fits = ok;
    return m->outside + (int64_t)st.peak_reserved;
}

int64_t replay_need_on(const struct replay_model *m, long b, const struct casim_device *dev,
                       int *fits)
{
    *fits = 0;
    size_t n;
    int64_t *ev = m->device == 'g' ? replay_gpu_events(m, b, &n) : NULL;
    if (!ev)
        return -1;
    struct casim_stats st;
    int rc = casim_replay_on(dev, ev, n, &st);
    free(ev);
    if (rc == -1)
        return 0;
    if (rc)
        return -3;
    *fits = 1;
    return m->outside + (int64_t)st.peak_reserved;
}

/* Does b fit: on the device when there is one, else in the simulation. */
static int64_t need_at(const struct replay_model *m, long b, int64_t capacity,
                       const struct casim_device *dev, int *fits)
{
    return dev ? replay_need_on(m, b, dev, fits) : replay_need(m, b, capacity, fits);
}

static long predict_by(const struct replay_model *m, long min, long max, long step,
                       int64_t capacity, const struct casim_device *dev, int64_t *need)
{
    int fits;
    *need = need_at(m, min, capacity, dev, &fits);
    if (*need < -1)
        return min - 2;
    if (!fits)
        return min - 1;
    /* Binary search on the grid: lo fits, hi (if any) does not. */
    long lo = 0, hi = (max - min) / step + 1;
    int64_t lo_need = *need;
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        int64_t nd = need_at(m, min + mid * step, capacity, dev, &fits);
        if (nd < -1) {
            *need = nd;
            return min - 2;
        }
        if (fits) {
            lo = mid;
            lo_need = nd;
        } else {
            hi = mid;
        }
    }
    *need = lo_need;
    return min + lo * step;
}

long replay_predict(const struct replay_model *m, long min, long max, long step, int64_t capacity,
                    int64_t *need)
{
    return predict_by(m, min, max, step, capacity, NULL, need);
}

long replay_predict_on(const struct replay_model *m, long min, long max, long step,
                       const struct casim_device *dev, int64_t *need)
{
    return predict_by(m, min, max, step, 0, dev, need);
}
