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
    uint64_t *addr;
    size_t n, cap;
};

static int evbuf_push(struct evbuf *b, int64_t x, uint64_t addr)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        int64_t *v = realloc(b->v, cap * sizeof *v);
        if (!v)
            return -1;
        b->v = v;
        uint64_t *a = realloc(b->addr, cap * sizeof *a);
        if (!a)
            return -1;
        b->addr = a;
        b->cap = cap;
    }
    b->v[b->n] = x;
    b->addr[b->n++] = addr;
    return 0;
}

void replay_trace_release(struct replay_trace *t)
{
    for (int s = 0; s < 2; s++) {
        free(t->ev[s]);
        free(t->addr[s]);
    }
    free(t->seg);
    free(t->blk);
    *t = (struct replay_trace)REPLAY_TRACE_INIT;
}

/* Append to a growable array of n elements of size sz (capacity *cap). */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*v, c * sz);
    if (!p)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

/* A `segment ADDR SIZE POOL` or `block ADDR SIZE a|f` line of the layout
 * at the recording's start.  1 when it was one, 0 when not, -1 bad. */
static int replay_layout_line(const char *line, struct replay_trace *t, size_t *segcap,
                              size_t *blkcap)
{
    unsigned long long addr, size;
    char c;
    if (sscanf(line, "segment %llu %llu %c", &addr, &size, &c) == 3) {
        if ((c != 's' && c != 'l') || size == 0 ||
            grow((void **)&t->seg, segcap, t->nseg, sizeof *t->seg))
            return -1;
        t->seg[t->nseg++] = (struct replay_segment){ addr, size, c, t->nblk, 0 };
        return 1;
    }
    if (sscanf(line, "block %llu %llu %c", &addr, &size, &c) == 3) {
        if ((c != 'a' && c != 'f') || size == 0 || t->nseg == 0 ||
            grow((void **)&t->blk, blkcap, t->nblk, sizeof *t->blk))
            return -1;
        struct replay_segment *g = &t->seg[t->nseg - 1];
        /* Blocks tile their segment, in order. */
        uint64_t at = g->addr;
        if (g->n)
            at = t->blk[t->nblk - 1].addr + t->blk[t->nblk - 1].size;
        if (addr != at || addr + size > g->addr + g->size)
            return -1;
        t->blk[t->nblk++] = (struct replay_block){ addr, size, c == 'a' };
        g->n++;
        return 1;
    }
    return 0;
}

/* A layout whose segments are not wholly tiled by their blocks is dropped. */
static int replay_layout_whole(const struct replay_trace *t)
{
    for (size_t i = 0; i < t->nseg; i++) {
        const struct replay_segment *g = &t->seg[i];
        if (!g->n)
            return 0;
        const struct replay_block *last = &t->blk[g->first + g->n - 1];
        if (last->addr + last->size != g->addr + g->size)
            return 0;
    }
    return 1;
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
    char line[512];
    size_t segcap = 0, blkcap = 0;
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
        int rl;
        if (sscanf(line, "%c %c %lld %lld", &kind, &dev, &size, &addr) == 4 &&
            (kind == 'a' || kind == 'f') && line[1] == ' ' && (dev == 'c' || dev == 'g')) {
            if (step < 0 || size < 0) {
                bad = step < 0 ? "an event before 'step 1'" : "a negative size";
                break;
            }
            if (evbuf_push(&ev[dev == 'g'][step], kind == 'a' ? size : -size, (uint64_t)addr)) {
                bad = "out of memory";
                break;
            }
            seen++;
        } else if (step < 0 && !strncmp(line, "alloc_conf ", 11)) {
            snprintf(t->alloc_conf, sizeof t->alloc_conf, "%.*s",
                     (int)(sizeof t->alloc_conf - 1), line + 11);
            t->alloc_conf[strcspn(t->alloc_conf, "\n")] = '\0';
        } else if (step < 0 && sscanf(line, "backend %31s", t->backend) == 1) {
            /* native or cudaMallocAsync */
        } else if (step < 0 && (rl = replay_layout_line(line, t, &segcap, &blkcap)) != 0) {
            if (rl < 0)
                bad = "a segment or block line of the layout that does not tile its segment";
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
            } else if (!strcmp(key, "cuda_total")) {
                t->cuda_total = v;
            } else if (!strcmp(key, "cuda_free")) {
                t->cuda_free = v;
            } else if (!strcmp(key, "cuda_reserved_end")) {
                t->reserved_end = v;
            } else if (!strcmp(key, "cuda_allocated_end")) {
                t->allocated_end = v;
            } else if (!strcmp(key, "streams")) {
                t->streams = (long)v;
            } else if (!strcmp(key, "graph_allocs")) {
                t->graphs = (long)v;
            } else if (!strcmp(key, "rank")) {
                t->rank = (long)v;
            } else if (!strcmp(key, "world")) {
                t->world = v > 0 ? (long)v : 0;
            } /* pid: for people reading the file */
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
            if (bad || d != g) {
                free(ev[d][s].v);
                free(ev[d][s].addr);
            }
    if (bad) {
        replay_trace_release(t);
        return errbuf_set(err, errlen, "trace '%s': %s", path, bad), -1;
    }
    t->device = g ? 'g' : 'c';
    for (int s = 0; s < 2; s++) {
        t->ev[s] = ev[g][s].v;
        t->addr[s] = ev[g][s].addr;
        t->nev[s] = ev[g][s].n;
    }
    if (!replay_layout_whole(t)) {
        free(t->seg);
        free(t->blk);
        t->seg = NULL;
        t->blk = NULL;
        t->nseg = t->nblk = 0;
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
    free(m->pair);
    free(m->seg);
    free(m->blk);
    free(m->from);
    *m = (struct replay_model)REPLAY_MODEL_INIT;
}

/* Event i's size at b: a size that shrinks as the batch grows stops at 0. */
static int64_t replay_size(const struct replay_model *m, size_t i, long b)
{
    if (m->from && b < m->from[i])
        return 0; /* a code path's block that smaller sizes do not make */
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
    if (ratio == 0) { /* x is y's size as predicted: the same within 1/32 or 1 KiB */
        if ((x > 0) != (y > 0))
            return 0;
        double ax = fabs((double)x), d = fabs((double)x - (double)y);
        return d <= 1024 || d <= ax / 32;
    }
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
 * equal (two steps of one trial); 0: when a's predicted size is b's
 * within 1/32; else by replay_match (two trials).
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
static int replay_fit_gpu(const struct replay_trace *t, size_t n, const size_t *raw0,
                          const size_t *s1to2, const size_t *xpair, struct replay_model *m,
                          char *why, size_t whylen);
static int replay_transient(const struct replay_trace *t, const size_t *raw, size_t nev,
                            const unsigned char *extra, size_t *xpair);
static int replay_self_check(struct replay_model *m, const struct replay_trace *t,
                             const long *batch, size_t n, char *why, size_t whylen);

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
        if (t[k].rank != t[0].rank)
            return replay_decline(m, why, whylen, "traces of ranks %ld and %ld: one rank's "
                                  "traces make a model", t[0].rank, t[k].rank);
    }
    /* Each trial's steady step: what its two recorded steps share; then
     * the steady steps of the trials aligned with the first one's. */
    int64_t *ev[3] = { NULL, NULL, NULL };
    size_t nev[3] = { 0, 0, 0 }, cap = 0, L = n - 1;
    for (size_t k = 0; k < n; k++)
        cap = t[k].nev[0] + t[k].nev[1] > cap ? t[k].nev[0] + t[k].nev[1] : cap;
    size_t *ia = malloc((cap + 1) * sizeof *ia), *ib = malloc((cap + 1) * sizeof *ib);
    size_t *keep = calloc(cap + 1, sizeof *keep);      /* ev[0] index -> trials matched */
    size_t *at[3] = { NULL, NULL, NULL };              /* ev[0] index -> ev[k] index */
    /* The first trial's step-1 event -> its step-2 event, and ev[k]'s
     * events -> their step-2 events: for pairing frees by address. */
    size_t *s1to2 = malloc((t[0].nev[0] + 1) * sizeof *s1to2);
    size_t *raw[3] = { NULL, NULL, NULL };
    for (size_t k = 0; k < n; k++)
        raw[k] = malloc((t[k].nev[1] + 1) * sizeof *raw[k]);
    /* The largest trial's events that the first does not make: a code
     * path's transient blocks (see replay.h); xpair: the event that
     * made the block each of those frees. */
    unsigned char *xtra = calloc(cap + 1, 1);
    size_t *xp = malloc((cap + 1) * sizeof *xp), *xpair = NULL;
    size_t nxtra = 0;
    long *from = NULL;
    int rc = ia && ib && keep && s1to2 && raw[0] && raw[1] && (n < 3 || raw[2]) && xtra && xp
                 ? 0
                 : replay_decline(m, why, whylen, "out of memory");
    for (size_t i = 0; !rc && i < t[0].nev[0]; i++)
        s1to2[i] = REPLAY_PAIR_NONE;
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
        for (long i = 0; i < c; i++) {
            ev[k][i] = t[k].ev[1][ib[i]];
            raw[k][i] = ib[i];
            if (k == 0)
                s1to2[ia[i]] = ib[i];
        }
        nev[k] = (size_t)c;
        if (t[k].nev[1] - nev[k] > m->unsteady)
            m->unsteady = t[k].nev[1] - nev[k];
    }
    for (size_t k = 1; k < n && !rc; k++) {
        double ratio = (double)batch[k] / (double)batch[0];
        size_t maxd = replay_maxd(nev[0], nev[k]);
        long c = replay_diff(ev[0], nev[0], ev[k], nev[k], maxd, ratio, ia, ib);
        int switched = 0;
        if (c == -1) {
            /* More apart than a few events: a larger trial's code path
             * that switches on with the size, when what it adds is a
             * bounded number of transient blocks. */
            size_t longer = nev[0] > nev[k] ? nev[0] : nev[k];
            size_t room = longer / REPLAY_SWITCHED_DIV < REPLAY_MAX_SWITCHED
                              ? longer / REPLAY_SWITCHED_DIV
                              : REPLAY_MAX_SWITCHED;
            /* With three sizes, the third aligns against the sizes the
             * first two predict for it: a switched-on block of the same
             * size as another event's there is not taken for it. */
            int64_t *pred = k == 2 && at[1] ? malloc((nev[0] + 1) * sizeof *pred) : NULL;
            for (size_t i = 0; pred && i < nev[0]; i++) {
                int64_t s0 = ev[0][i];
                if (!at[1][i]) {
                    pred[i] = (int64_t)llround((double)s0 * ratio);
                    continue;
                }
                double s1 = (double)ev[1][at[1][i] - 1];
                pred[i] = (int64_t)llround((double)s0 + (s1 - (double)s0) *
                                           (double)(batch[2] - batch[0]) /
                                           (double)(batch[1] - batch[0]));
            }
            c = replay_diff(pred ? pred : ev[0], nev[0], ev[k], nev[k], maxd + room,
                            pred ? 0 : ratio, ia, ib);
            free(pred);
            switched = c >= 0 && nev[0] - (size_t)c <= maxd && nev[k] - (size_t)c <= room;
            if (switched) {
                unsigned char *ex = calloc(nev[k] + 1, 1);
                size_t *pp = malloc((nev[k] + 1) * sizeof *pp);
                if (!ex || !pp) {
                    free(ex);
                    free(pp);
                    rc = replay_decline(m, why, whylen, "out of memory");
                    break;
                }
                memset(ex, 1, nev[k]);
                for (long i = 0; i < c; i++)
                    ex[ib[i]] = 0;
                switched = replay_transient(&t[k], raw[k], nev[k], ex, pp);
                if (switched && k == L) {
                    memcpy(xtra, ex, nev[k]);
                    memcpy(xp, pp, nev[k] * sizeof *pp);
                    nxtra = nev[k] - (size_t)c;
                } else if (switched && nev[k] - (size_t)c > m->unsteady) {
                    m->unsteady = nev[k] - (size_t)c; /* a middle size's: left out */
                }
                free(ex);
                free(pp);
            }
            if (!switched)
                c = -1;
        }
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
    /* The events of the first trial that every other trial has, and in
     * their place among them the largest trial's switched-on ones. */
    size_t len = 0;
    if (!rc && nxtra) {
        size_t nl = nev[L];
        int64_t *mev[3] = { NULL, NULL, NULL };
        size_t *inv = malloc((nl + 1) * sizeof *inv), *pos = malloc((nl + 1) * sizeof *pos);
        size_t *mraw = malloc((nl + 1) * sizeof *mraw);
        xpair = malloc((nl + 1) * sizeof *xpair);
        from = calloc(nl + 1, sizeof *from);
        int ok = inv && pos && mraw && xpair && from;
        for (size_t k = 0; ok && k < n; k++)
            ok = (mev[k] = malloc((nl + 1) * sizeof *mev[k])) != NULL;
        for (size_t j = 0; ok && j < nl; j++)
            inv[j] = pos[j] = REPLAY_PAIR_NONE;
        for (size_t i = 0; ok && i < nev[0]; i++)
            if (at[L][i])
                inv[at[L][i] - 1] = i;
        for (size_t j = 0; ok && j < nl; j++) {
            size_t i = inv[j];
            if (i != REPLAY_PAIR_NONE && keep[i] == n - 1) {
                for (size_t k = 0; k < n; k++)
                    mev[k][len] = k == 0 ? ev[0][i] : ev[k][at[k][i] - 1];
                mraw[len] = raw[0][i];
                xpair[len] = REPLAY_PAIR_NONE;
            } else if (i == REPLAY_PAIR_NONE && xtra[j]) {
                for (size_t k = 0; k < n; k++)
                    mev[k][len] = ev[L][j]; /* the size recorded, at every size */
                mraw[len] = REPLAY_PAIR_NONE;
                from[len] = batch[L];
                pos[j] = len;
                xpair[len] = xp[j]; /* an ev[L] index for now */
            } else {
                continue;
            }
            len++;
        }
        for (size_t q = 0; ok && q < len; q++)
            if (from[q] && xpair[q] != REPLAY_PAIR_NONE)
                xpair[q] = pos[xpair[q]];
        if (ok) {
            for (size_t k = 0; k < n; k++) {
                free(ev[k]);
                ev[k] = mev[k];
                mev[k] = NULL;
            }
            free(raw[0]);
            raw[0] = mraw;
            mraw = NULL;
        } else {
            rc = replay_decline(m, why, whylen, "out of memory");
        }
        for (size_t k = 0; k < n; k++)
            free(mev[k]);
        free(mraw);
        free(inv);
        free(pos);
        if (!rc && nev[0] + nxtra - len > m->unsteady)
            m->unsteady = nev[0] + nxtra - len;
    } else {
        for (size_t i = 0; !rc && i < nev[0]; i++) {
            if (keep[i] != n - 1)
                continue;
            for (size_t k = 1; k < n; k++)
                ev[k][len] = ev[k][at[k][i] - 1];
            raw[0][len] = raw[0][i];
            ev[0][len++] = ev[0][i];
        }
        if (!rc && nev[0] - len > m->unsteady)
            m->unsteady = nev[0] - len;
    }
    free(ia);
    free(ib);
    free(keep);
    free(xtra);
    free(xp);
    for (size_t k = 0; k < 3; k++)
        free(at[k]);
    if (!rc)
        rc = replay_fit_steady(ev, len, t, batch, n, m, why, whylen);
    if (!rc && nxtra) {
        m->from = from; /* the model's now */
        from = NULL;
        m->nswitched = 0;
        for (size_t i = 0; i < len; i++)
            m->nswitched += m->from[i] != 0;
    }
    if (!rc && m->device == 'g')
        rc = replay_fit_gpu(t, n, raw[0], s1to2, xpair, m, why, whylen);
    if (!rc && m->device == 'g')
        rc = replay_self_check(m, t, batch, n, why, whylen);
    if (!rc)
        m->rank = t[0].rank;
    free(from);
    free(xpair);
    free(s1to2);
    for (size_t k = 0; k < 3; k++) {
        free(raw[k]);
        free(ev[k]);
    }
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

/* ---------------------------------------------------- GPU: the set-up */

/* An address -> event table (open addressing with tombstones: the
 * events inserted never exceed half the table). */
struct addrmap {
    uint64_t *key;
    size_t *val;
    unsigned char *st; /* 0 empty, 1 used, 2 deleted */
    size_t cap;
};

static int addrmap_init(struct addrmap *h, size_t n)
{
    h->cap = 16;
    while (h->cap < 2 * n + 2)
        h->cap *= 2;
    h->key = calloc(h->cap, sizeof *h->key);
    h->val = calloc(h->cap, sizeof *h->val);
    h->st = calloc(h->cap, 1);
    return h->key && h->val && h->st ? 0 : -1;
}

static void addrmap_release(struct addrmap *h)
{
    free(h->key);
    free(h->val);
    free(h->st);
}

/* The slot of key, or (insert) of where it goes; SIZE_MAX if absent. */
static size_t addrmap_slot(const struct addrmap *h, uint64_t key, int insert)
{
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (h->cap - 1), hole = SIZE_MAX;
    for (;; i = (i + 1) & (h->cap - 1)) {
        if (h->st[i] == 0)
            return insert ? (hole != SIZE_MAX ? hole : i) : SIZE_MAX;
        if (h->st[i] == 1 && h->key[i] == key)
            return i;
        if (h->st[i] == 2 && hole == SIZE_MAX)
            hole = i;
    }
}

/*
 * Are the events of trial t's steady step marked in extra[] (nev events;
 * raw[j]: event j's index in the recorded step 2) transient: every
 * marked allocation freed in the step by a marked free, every marked
 * free of a marked allocation (paired by address)?  xpair[j], for a
 * marked free, becomes the index of its allocation.  1 yes, 0 no (or no
 * memory).
 */
static int replay_transient(const struct replay_trace *t, const size_t *raw, size_t nev,
                            const unsigned char *extra, size_t *xpair)
{
    size_t nr = t->nev[1];
    size_t *rev = malloc((nr + 1) * sizeof *rev);
    struct addrmap h;
    int ok = rev && !addrmap_init(&h, nr);
    for (size_t r = 0; ok && r < nr; r++)
        rev[r] = SIZE_MAX;
    for (size_t j = 0; ok && j < nev; j++) {
        rev[raw[j]] = j;
        xpair[j] = REPLAY_PAIR_NONE;
    }
    for (size_t r = 0; ok && r < nr; r++) {
        uint64_t a = t->addr[1][r];
        int x = rev[r] != SIZE_MAX && extra[rev[r]];
        if (t->ev[1][r] >= 0) {
            size_t k = addrmap_slot(&h, a, 1);
            h.st[k] = 1;
            h.key[k] = a;
            h.val[k] = r;
            continue;
        }
        size_t k = addrmap_slot(&h, a, 0);
        if (k == SIZE_MAX) {
            ok = !x; /* a switched-on free of a block made before the step */
            continue;
        }
        size_t q = h.val[k];
        int xq = rev[q] != SIZE_MAX && extra[rev[q]];
        h.st[k] = 2;
        if (x != xq)
            ok = 0;
        else if (x)
            xpair[rev[r]] = rev[q];
    }
    for (size_t k = 0; ok && k < h.cap; k++)
        if (h.st[k] == 1 && rev[h.val[k]] != SIZE_MAX && extra[rev[h.val[k]]])
            ok = 0; /* a switched-on block that outlives the step */
    if (rev)
        addrmap_release(&h);
    free(rev);
    return ok;
}

/* The allocator rounds every request up to 512 bytes. */
static int64_t round512(int64_t v)
{
    return v <= 512 ? 512 : (v + 511) / 512 * 512;
}

/*
 * Pair the frees of trace t's two steps with their allocations by
 * address: pr[s][i], for a free, is i' (step 1's event i') or nev[0] + i'
 * (step 2's), or REPLAY_PAIR_BEFORE when the block was made before the
 * recording.  *before: those blocks' bytes.  Returns 0, 1 when a free's
 * size is not its allocation's (the addresses do not pair: a trace
 * without real addresses), -1 on ENOMEM.
 */
static int replay_pair_raw(const struct replay_trace *t, size_t *pr[2], int64_t *before)
{
    struct addrmap h;
    size_t n0 = t->nev[0];
    *before = 0;
    if (addrmap_init(&h, n0 + t->nev[1])) {
        addrmap_release(&h);
        return -1;
    }
    int rc = 0;
    for (int s = 0; s < 2 && !rc; s++) {
        for (size_t i = 0; i < t->nev[s]; i++) {
            int64_t v = t->ev[s][i];
            uint64_t a = t->addr[s][i];
            if (v >= 0) {
                size_t k = addrmap_slot(&h, a, 1);
                h.st[k] = 1;
                h.key[k] = a;
                h.val[k] = (size_t)s * n0 + i;
                pr[s][i] = REPLAY_PAIR_NONE;
                continue;
            }
            size_t k = addrmap_slot(&h, a, 0);
            if (k == SIZE_MAX) {
                pr[s][i] = REPLAY_PAIR_BEFORE;
                *before += round512(-v);
                continue;
            }
            size_t q = h.val[k];
            int64_t made = q < n0 ? t->ev[0][q] : t->ev[1][q - n0];
            if (made != -v) {
                rc = 1;
                break;
            }
            pr[s][i] = q;
            h.st[k] = 2;
        }
    }
    addrmap_release(&h);
    return rc;
}

/*
 * The model's GPU set-up from the traces: each free paired with its
 * allocation by address (the first trace's; model event i is its step-2
 * event raw0[i], step-1 event e its step-2 event s1to2[e]), the bytes
 * that live across the steps without being freed by them (the header's
 * allocated bytes less the blocks the recorded steps free), and the
 * persistent segments of the layout at the recording's start.
 */
static int replay_fit_gpu(const struct replay_trace *t, size_t n, const size_t *raw0,
                          const size_t *s1to2, const size_t *xpair, struct replay_model *m,
                          char *why, size_t whylen)
{
    m->rank = t[0].rank;
    m->cuda_total = t[0].cuda_total;
    for (size_t k = 1; k < n; k++)
        if (t[k].cuda_total > 0 && (m->cuda_total <= 0 || t[k].cuda_total < m->cuda_total))
            m->cuda_total = t[k].cuda_total;
    snprintf(m->conf, sizeof m->conf, "%s", t[0].alloc_conf);
    /* What the simulated allocator does not model declines. */
    for (size_t k = 0; k < n; k++) {
        if (t[k].backend[0] && strcmp(t[k].backend, "native"))
            return replay_decline(m, why, whylen, "the trainer used the %s allocator backend, "
                                  "not PyTorch's caching allocator (not modelled)", t[k].backend);
        if (t[k].streams > 1)
            return replay_decline(m, why, whylen, "the recorded steps allocated on %ld streams "
                                  "(blocks are cached per stream: not modelled)", t[k].streams);
        if (t[k].graphs > 0)
            return replay_decline(m, why, whylen, "the recorded steps allocated in CUDA graphs' "
                                  "private pools (not modelled)");
        if (strcmp(t[k].alloc_conf, t[0].alloc_conf))
            return replay_decline(m, why, whylen, "the traces were recorded under different "
                                  "PYTORCH_CUDA_ALLOC_CONF settings");
    }
    char cwhy[256];
    if (casim_config_parse(m->conf, &m->cfg, cwhy, sizeof cwhy))
        return replay_decline(m, why, whylen, "%s", cwhy);
    m->persistent = 0;
    int paired = 1;
    size_t *pr[2] = { NULL, NULL }, *r2m = NULL;
    for (size_t k = 0; k < n; k++) {
        size_t *p[2] = { malloc((t[k].nev[0] + 1) * sizeof **p),
                         malloc((t[k].nev[1] + 1) * sizeof **p) };
        int64_t before = 0;
        int r = p[0] && p[1] ? replay_pair_raw(&t[k], p, &before) : -1;
        if (r < 0) {
            free(p[0]);
            free(p[1]);
            free(pr[0]);
            free(pr[1]);
            return replay_decline(m, why, whylen, "out of memory");
        }
        if (r > 0)
            paired = 0;
        if (t[k].cuda_allocated >= 0 && t[k].cuda_allocated - before > m->persistent)
            m->persistent = t[k].cuda_allocated - before;
        if (k == 0) {
            pr[0] = p[0];
            pr[1] = p[1];
        } else {
            free(p[0]);
            free(p[1]);
        }
    }
    size_t n0 = t[0].nev[0], n1 = t[0].nev[1];
    r2m = paired ? malloc((n1 + 1) * sizeof *r2m) : NULL;
    m->pair = paired ? malloc((m->n + 1) * sizeof *m->pair) : NULL;
    if (paired && (!r2m || !m->pair)) {
        free(pr[0]);
        free(pr[1]);
        free(r2m);
        return replay_decline(m, why, whylen, "out of memory");
    }
    for (size_t i = 0; paired && i < n1; i++)
        r2m[i] = REPLAY_PAIR_NONE;
    for (size_t i = 0; paired && i < m->n; i++)
        if (raw0[i] != REPLAY_PAIR_NONE)
            r2m[raw0[i]] = i;
    for (size_t i = 0; paired && i < m->n; i++) {
        if (!m->frees[i]) {
            m->pair[i] = REPLAY_PAIR_NONE;
            continue;
        }
        if (raw0[i] == REPLAY_PAIR_NONE) { /* a switched-on block: made in the step */
            m->pair[i] = xpair ? xpair[i] : REPLAY_PAIR_NONE;
            continue;
        }
        size_t q = pr[1][raw0[i]], j = REPLAY_PAIR_NONE;
        if (q == REPLAY_PAIR_BEFORE) {
            m->pair[i] = REPLAY_PAIR_BEFORE;
        } else if (q >= n0) { /* made in the same step */
            j = r2m[q - n0];
            m->pair[i] = j;
        } else { /* made in the step before: the same event of this step, if any */
            size_t e = s1to2[q];
            j = e == REPLAY_PAIR_NONE ? REPLAY_PAIR_NONE : r2m[e];
            m->pair[i] = j == REPLAY_PAIR_NONE ? REPLAY_PAIR_BEFORE : m->n + j;
        }
    }
    /* The layout: the segments holding a block that no recorded step
     * frees, those blocks live, every other block free. */
    if (paired && t[0].nseg) {
        struct addrmap fr;
        int ok = !addrmap_init(&fr, n0 + n1);
        for (int s = 0; ok && s < 2; s++)
            for (size_t i = 0; i < t[0].nev[s]; i++)
                if (t[0].ev[s][i] < 0 && pr[s][i] == REPLAY_PAIR_BEFORE) {
                    size_t k = addrmap_slot(&fr, t[0].addr[s][i], 1);
                    fr.st[k] = 1;
                    fr.key[k] = t[0].addr[s][i];
                }
        m->seg = ok ? malloc(t[0].nseg * sizeof *m->seg) : NULL;
        m->blk = ok ? malloc(t[0].nblk * sizeof *m->blk) : NULL;
        ok = m->seg && m->blk;
        for (size_t g = 0; ok && g < t[0].nseg; g++) {
            const struct replay_segment *sg = &t[0].seg[g];
            size_t first = m->nblk, kept = 0;
            for (size_t k = 0; k < sg->n; k++) {
                struct replay_block b = t[0].blk[sg->first + k];
                b.live = b.live && addrmap_slot(&fr, b.addr, 0) == SIZE_MAX;
                kept += (size_t)b.live;
                m->blk[m->nblk++] = b;
            }
            if (!kept) {
                m->nblk = first;
                continue;
            }
            m->seg[m->nseg] = *sg;
            m->seg[m->nseg++].first = first;
        }
        addrmap_release(&fr);
        if (!ok) {
            free(pr[0]);
            free(pr[1]);
            free(r2m);
            return replay_decline(m, why, whylen, "out of memory");
        }
    }
    free(pr[0]);
    free(pr[1]);
    free(r2m);
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

/* Ids of the blocks in a replay of `steps` steps: event i of step t
 * (0: the step before the first, whose blocks the first frees) is
 * t * n + i; then the blocks made before the recording, then the
 * layout's, then the persistent bytes. */
#define ID_EVENT(m, t, i) ((uint64_t)(t) * (m)->n + (i))
#define ID_BEFORE(m, i) ID_EVENT(m, REPLAY_STEPS + 1, i)
#define ID_LAYOUT(m, k) (ID_EVENT(m, REPLAY_STEPS + 2, 0) + (k))
#define ID_PERSISTENT UINT64_MAX

/* Without addresses (a model made by hand): each free takes the newest
 * live block of its size in the step, or one made before it. */
static int replay_pair_by_size(const struct replay_model *m, long b, size_t *pair)
{
    struct sizecount h = { NULL, NULL, 1 };
    while (h.cap < 2 * m->n + 2)
        h.cap *= 2;
    h.key = calloc(h.cap, sizeof *h.key);
    h.val = calloc(h.cap, sizeof *h.val);  /* size -> 1 + its newest live event */
    size_t *below = malloc((m->n + 1) * sizeof *below);
    int ok = h.key && h.val && below;
    for (size_t i = 0; ok && i < m->n; i++) {
        int64_t sz = replay_size(m, i, b);
        pair[i] = REPLAY_PAIR_NONE;
        if (sz == 0)
            continue;
        long *top = sizecount_at(&h, sz);
        if (!m->frees[i]) {
            below[i] = (size_t)*top;
            *top = (long)i + 1;
        } else if (*top) {
            pair[i] = (size_t)*top - 1;
            *top = (long)below[pair[i]];
        } else {
            pair[i] = REPLAY_PAIR_BEFORE;
        }
    }
    free(h.key);
    free(h.val);
    free(below);
    return ok ? 0 : -2;
}

/*
 * Replay b's steps on s: the layout at the step's start seeded (the
 * persistent segments, or the persistent bytes as one block; the blocks
 * the first step frees), then the steps back to back.  Returns 0, or the
 * first failing casim call's result (-1 out of memory).
 */
static int replay_run(const struct replay_model *m, long b, struct casim *s)
{
    if (!s)
        return -2;
    size_t *own = m->pair ? NULL : malloc((m->n + 1) * sizeof *own);
    const size_t *pair = m->pair ? m->pair : own;
    int steps = m->pair ? REPLAY_STEPS : 1, rc = 0;
    casim_configure(s, &m->cfg);
    if (!pair || (own && replay_pair_by_size(m, b, own))) {
        free(own);
        return -2;
    }
    uint64_t *sizes = NULL, *ids = NULL;
    if (m->nseg) {
        sizes = malloc(m->nblk * sizeof *sizes);
        ids = malloc(m->nblk * sizeof *ids);
        if (!sizes || !ids)
            rc = -2;
    }
    for (size_t g = 0; !rc && g < m->nseg; g++) {
        const struct replay_segment *sg = &m->seg[g];
        for (size_t k = 0; k < sg->n; k++) {
            sizes[k] = m->blk[sg->first + k].size;
            ids[k] = m->blk[sg->first + k].live ? ID_LAYOUT(m, sg->first + k) : CASIM_SEED_FREE;
        }
        rc = casim_seed_segment(s, sg->pool == 's', sizes, ids, sg->n);
    }
    free(sizes);
    free(ids);
    if (!rc && !m->nseg && m->persistent > 0)
        rc = casim_alloc(s, ID_PERSISTENT, (uint64_t)m->persistent);
    /* The blocks the first step frees: made before the recording, then
     * by the step before, in its order. */
    for (size_t i = 0; !rc && i < m->n; i++) {
        int64_t sz = replay_size(m, i, b);
        if (m->frees[i] && pair[i] == REPLAY_PAIR_BEFORE && sz > 0)
            rc = casim_alloc(s, ID_BEFORE(m, i), (uint64_t)sz);
    }
    unsigned char *carried = rc ? NULL : calloc(m->n + 1, 1);
    if (!rc && !carried)
        rc = -2;
    for (size_t i = 0; !rc && i < m->n; i++)
        if (m->frees[i] && pair[i] != REPLAY_PAIR_BEFORE && pair[i] != REPLAY_PAIR_NONE &&
            pair[i] >= m->n)
            carried[pair[i] - m->n] = 1;
    for (size_t j = 0; !rc && j < m->n; j++) {
        int64_t sz = replay_size(m, j, b);
        if (carried[j] && sz > 0)
            rc = casim_alloc(s, ID_EVENT(m, 0, j), (uint64_t)sz);
    }
    free(carried);
    for (int t = 1; !rc && t <= steps; t++) {
        for (size_t i = 0; !rc && i < m->n; i++) {
            int64_t sz = replay_size(m, i, b);
            size_t p = pair[i];
            if (!m->frees[i]) {
                if (sz > 0)
                    rc = casim_alloc(s, ID_EVENT(m, t, i), (uint64_t)sz);
            } else if (p == REPLAY_PAIR_BEFORE) {
                if (t == 1)
                    casim_release(s, ID_BEFORE(m, i));
            } else if (p != REPLAY_PAIR_NONE) {
                /* a free of a block that was never made (size 0) is nothing */
                casim_release(s, p < m->n ? ID_EVENT(m, t, p) : ID_EVENT(m, t - 1, p - m->n));
            }
        }
    }
    free(own);
    return rc;
}

/* The segment casim reserves for the model's largest request at b. */
static int64_t replay_largest_segment(const struct replay_model *m, long b)
{
    int64_t big = 0;
    for (size_t i = 0; i < m->n; i++) {
        int64_t sz = replay_size(m, i, b);
        if (!m->frees[i] && sz > big)
            big = sz;
    }
    big = round512(big);
    if (big < (int64_t)CASIM_MIN_LARGE)
        return (int64_t)CASIM_LARGE_BUF;
    return (big + (int64_t)CASIM_ROUND_LARGE - 1) / (int64_t)CASIM_ROUND_LARGE *
           (int64_t)CASIM_ROUND_LARGE;
}

static double replay_mib(int64_t v)
{
    return (double)v / 1048576.0;
}

/*
 * The self-check: replayed at each recorded size, the allocator must end
 * up holding what the trainer's did after the recorded steps (the
 * probe's cuda_reserved_end), within one segment (the largest request's,
 * at least 20 MiB).  A replay that misses its own recording would not
 * predict another size either: it declines with the difference.
 */
static int replay_self_check(struct replay_model *m, const struct replay_trace *t,
                             const long *batch, size_t n, char *why, size_t whylen)
{
    for (size_t k = 0; k < n; k++) {
        if (t[k].reserved_end < 0)
            continue; /* an older probe's trace: nothing to check against */
        struct casim *s = casim_new(0);
        int rc = replay_run(m, batch[k], s);
        struct casim_stats st;
        if (s)
            casim_stats(s, &st);
        casim_free(s);
        if (rc)
            return replay_decline(m, why, whylen, "the replay at micro-batch %ld failed "
                                  "(out of host memory)", batch[k]);
        int64_t got = (int64_t)st.reserved, want = t[k].reserved_end, diff = got - want;
        int64_t tol = replay_largest_segment(m, batch[k]);
        if (diff > tol || -diff > tol)
            return replay_decline(m, why, whylen,
                                  "replayed at micro-batch %ld the allocator reserves %.1f MiB, "
                                  "the trainer reserved %.1f MiB (%+.1f MiB, more than one "
                                  "segment of %.0f MiB): the replay does not reproduce its "
                                  "recording", batch[k], replay_mib(got), replay_mib(want),
                                  replay_mib(diff), replay_mib(tol));
    }
    return 0;
}

int64_t replay_capacity(const struct replay_model *m, int64_t nvml)
{
    if (m->device == 'g' && m->cuda_total > 0 && (nvml <= 0 || m->cuda_total < nvml))
        return m->cuda_total;
    return nvml;
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
    /* Under the capacity when it fits; unbounded (the whole need) when not. */
    struct casim_stats st;
    int64_t room = capacity - m->outside;
    struct casim *s = room > 0 ? casim_new((uint64_t)room) : NULL;
    int rc = s ? replay_run(m, b, s) : -1;
    if (rc == 0)
        casim_stats(s, &st);
    casim_free(s);
    if (rc == -1 || !s) {
        s = casim_new(0);
        rc = replay_run(m, b, s);
        if (rc == 0)
            casim_stats(s, &st);
        casim_free(s);
        if (rc)
            return -1;
    } else if (rc) {
        return -1;
    } else {
        *fits = 1;
    }
    return m->outside + (int64_t)st.peak_reserved;
}

int64_t replay_need_on(const struct replay_model *m, long b, const struct casim_device *dev,
                       int *fits)
{
    *fits = 0;
    if (m->device != 'g')
        return -1;
    struct casim *s = casim_new_on(dev);
    int rc = replay_run(m, b, s);
    struct casim_stats st;
    if (s)
        casim_stats(s, &st);
    casim_free(s);
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


/* ------------------------------------------------------------ ranks */

void replay_ranks_release(struct replay_ranks *rs)
{
    for (size_t r = 0; r < rs->n; r++)
        replay_model_release(&rs->m[r]);
    free(rs->m);
    rs->m = NULL;
    rs->n = 0;
}

/* The trace of rank in t[0 .. n-1], or NULL. */
static const struct replay_trace *rank_trace(const struct replay_trace *t, size_t n, long rank)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].rank == rank)
            return &t[i];
    return NULL;
}

int replay_fit_ranks(const struct replay_trace *const *t, const size_t *nt, const long *batch,
                     size_t n, struct replay_ranks *rs, char *why, size_t whylen)
{
    *rs = (struct replay_ranks)REPLAY_RANKS_INIT;
    if (n < 2 || n > 3) {
        snprintf(why, whylen, "needs two or three recorded sizes");
        return -1;
    }
    /* The same ranks at every size, each once, none missing below the
     * world the traces name. */
    long world = 0;
    for (size_t k = 0; k < n; k++) {
        if (!nt[k]) {
            snprintf(why, whylen, "no trace at micro-batch %ld", batch[k]);
            return -1;
        }
        for (size_t i = 0; i < nt[k]; i++) {
            if (t[k][i].world > world)
                world = t[k][i].world;
            for (size_t j = 0; j < i; j++)
                if (t[k][j].rank == t[k][i].rank) {
                    snprintf(why, whylen, "two processes recorded as rank %ld at micro-batch %ld",
                             t[k][i].rank, batch[k]);
                    return -1;
                }
        }
    }
    for (size_t k = 0; k < n; k++) {
        for (long r = 0; r < world; r++)
            if (!rank_trace(t[k], nt[k], r)) {
                snprintf(why, whylen, "rank %ld of %ld wrote no trace at micro-batch %ld", r,
                         world, batch[k]);
                return -1;
            }
        for (size_t i = 0; k && i < nt[k]; i++)
            if (!rank_trace(t[0], nt[0], t[k][i].rank)) {
                snprintf(why, whylen, "rank %ld wrote no trace at micro-batch %ld", t[k][i].rank,
                         batch[0]);
                return -1;
            }
        for (size_t i = 0; k && i < nt[0]; i++)
            if (!rank_trace(t[k], nt[k], t[0][i].rank)) {
                snprintf(why, whylen, "rank %ld wrote no trace at micro-batch %ld", t[0][i].rank,
                         batch[k]);
                return -1;
            }
    }
    rs->m = calloc(nt[0], sizeof *rs->m);
    if (!rs->m) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    /* Lowest rank first. */
    long prev = -1;
    for (size_t r = 0; r < nt[0]; r++) {
        long rank = -1;
        for (size_t i = 0; i < nt[0]; i++)
            if (t[0][i].rank > prev && (rank < 0 || t[0][i].rank < rank))
                rank = t[0][i].rank;
        prev = rank;
        struct replay_trace one[3];
        for (size_t k = 0; k < n; k++)
            one[k] = *rank_trace(t[k], nt[k], rank);
        char w[512];
        if (replay_fit(one, batch, n, &rs->m[r], w, sizeof w)) {
            if (nt[0] > 1)
                snprintf(why, whylen, "rank %ld: %s", rank, w);
            else
                snprintf(why, whylen, "%s", w);
            replay_ranks_release(rs);
            return -1;
        }
        rs->n++;
    }
    return 0;
}

static int64_t rank_capacity(const struct replay_model *m, int64_t capacity, int cuda_view)
{
    return cuda_view ? replay_capacity(m, capacity) : capacity;
}

long replay_predict_ranks(const struct replay_ranks *rs, long min, long max, long step,
                          int64_t capacity, int cuda_view, int64_t *need, size_t *decider,
                          long *pred, int64_t *rneed)
{
    long best = min - 1;
    *need = -1;
    *decider = 0;
    for (size_t r = 0; r < rs->n; r++) {
        int64_t nd;
        long p = replay_predict(&rs->m[r], min, max, step,
                                rank_capacity(&rs->m[r], capacity, cuda_view), &nd);
        if (pred)
            pred[r] = p;
        if (rneed)
            rneed[r] = nd;
        if (r == 0 || p < best || (p == best && nd > *need)) {
            best = p;
            *need = nd;
            *decider = r;
        }
    }
    return best;
}

int64_t replay_need_ranks(const struct replay_ranks *rs, long b, int64_t capacity, int cuda_view,
                          int *fits, size_t *decider)
{
    int64_t most = -1;
    *fits = 1;
    *decider = 0;
    for (size_t r = 0; r < rs->n; r++) {
        int f;
        int64_t nd = replay_need(&rs->m[r], b, rank_capacity(&rs->m[r], capacity, cuda_view), &f);
        if (nd < 0)
            return -1;
        *fits = *fits && f;
        if (nd > most) {
            most = nd;
            *decider = r;
        }
    }
    return most;
}
