/* SPDX-License-Identifier: MIT */
/*
 * predict: traces to predictions (predict.h), moved out of
 * tuner/cli/subcmd.c.  predict_scan reads the directory once, keeping per
 * cell the three smallest sizes by insertion, each with every rank's
 * trace; predict_cell loads them, fits a replay model per rank, and
 * predicts from them on the capacity (the smallest answer: the rank that
 * needs the most decides), then on
 * the device when one is given: memory beyond the capacity (less what
 * the model says lies outside PyTorch's allocator) is held back, the
 * model replayed with real allocations, and everything given back.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/predict.h"
#include "casim.h"
#include "devmem.h"
#include "replay.h"

/* Add path to cell c's traces at size b, keeping the three smallest
 * sizes in order.  0, or -1 (ENOMEM). */
static int predict_add(struct predict_cell *c, long b, const char *path)
{
    size_t at = 0;
    while (at < c->n && c->b[at] < b)
        at++;
    if (at >= 3)
        return 0;
    if (at == c->n || c->b[at] != b) {
        /* A new size at `at`: the largest of three drops out. */
        if (c->n == 3) {
            for (size_t i = 0; i < c->npath[2]; i++)
                free(c->path[2][i]);
            free(c->path[2]);
            c->n = 2;
        }
        for (size_t j = c->n; j > at; j--) {
            c->b[j] = c->b[j - 1];
            c->path[j] = c->path[j - 1];
            c->npath[j] = c->npath[j - 1];
        }
        c->b[at] = b;
        c->path[at] = NULL;
        c->npath[at] = 0;
        c->n++;
    }
    char **np = realloc(c->path[at], (c->npath[at] + 1) * sizeof *np);
    if (!np)
        return -1;
    c->path[at] = np;
    if (!(np[c->npath[at]] = strdup(path)))
        return -1;
    c->npath[at]++;
    return 0;
}

long predict_scan(const char *dir, struct predict_cell *cells, size_t max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t ncells = 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        long accum, b, rank = 0;
        char ck[4], tail[8];
        /* accum1-ckptoff-b2.txt, or accum1-ckptoff-b2-rank1.txt */
        if (sscanf(e->d_name, "accum%ld-ckpt%3[onf]-b%ld-rank%ld.tx%7s", &accum, ck, &b, &rank,
                   tail) != 5 &&
            (rank = 0, sscanf(e->d_name, "accum%ld-ckpt%3[onf]-b%ld.tx%7s", &accum, ck, &b,
                              tail) != 4))
            continue;
        if (strcmp(tail, "t") || accum < 1 || b < 1 || rank < 0 ||
            (strcmp(ck, "on") && strcmp(ck, "off")))
            continue;
        int on = !strcmp(ck, "on");
        size_t k = 0;
        while (k < ncells && !(cells[k].accum == accum && cells[k].ckpt == on))
            k++;
        if (k == ncells) {
            if (ncells == max)
                continue;
            cells[ncells++] = (struct predict_cell){ .accum = accum, .ckpt = on };
        }
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = predict_add(&cells[k], b, path);
    }
    closedir(d);
    if (rc) {
        predict_scan_release(cells, ncells);
        errno = ENOMEM;
        return -1;
    }
    return (long)ncells;
}

void predict_scan_release(struct predict_cell *cells, size_t n)
{
    for (size_t c = 0; c < n; c++)
        for (size_t k = 0; k < 3; k++) {
            for (size_t i = 0; k < cells[c].n && i < cells[c].npath[k]; i++)
                free(cells[c].path[k][i]);
            if (k < cells[c].n)
                free(cells[c].path[k]);
            cells[c].path[k] = NULL;
            cells[c].npath[k] = 0;
        }
}

/* One rank's model replayed on the device, held back to stand in for a
 * card of cap bytes: its largest fit (min - 2: failed, why), *need, the
 * bytes held and left.  -1: not held back (why). */
static int predict_on_gpu_one(const struct replay_model *m, const struct devmem_ops *ops,
                              uint64_t cap, long min, long max, long step, long *fit,
                              int64_t *need, uint64_t *held, uint64_t *left, char *why,
                              size_t whylen)
{
    struct devmem_hold h;
    uint64_t outside = m->outside > 0 ? (uint64_t)m->outside : 0;
    uint64_t room = cap > outside ? cap - outside : 0;
    if (devmem_hold(&h, ops, room, why, whylen))
        return -1;
    struct casim_device dev;
    devmem_as_casim(ops, &dev);
    *fit = replay_predict_on(m, min, max, step, &dev, need);
    *held = h.bytes;
    *left = h.free_after;
    devmem_unhold(&h);
    if (*fit == min - 2)
        snprintf(why, whylen, "%s", ops->error(ops->ctx));
    return 0;
}

/* Every rank's model replayed on the device; the smallest fit decides. */
static void predict_on_gpu(const struct replay_ranks *rs, const struct devmem_ops *ops,
                           uint64_t cap, long min, long max, long step, struct predict_answer *a)
{
    if (rs->m[0].device != 'g') {
        a->gpu = PREDICT_GPU_CPU_TRACES;
        return;
    }
    for (size_t r = 0; r < rs->n; r++) {
        long fit;
        int64_t need;
        uint64_t held, left;
        char why[480];
        if (predict_on_gpu_one(&rs->m[r], ops, cap, min, max, step, &fit, &need, &held, &left,
                               why, sizeof why)) {
            snprintf(a->why, sizeof a->why, "%s", why);
            a->gpu = PREDICT_GPU_NO_HOLD;
            return;
        }
        if (fit == min - 2) {
            if (rs->n > 1)
                snprintf(a->why, sizeof a->why, "rank %ld: %s", rs->m[r].rank, why);
            else
                snprintf(a->why, sizeof a->why, "%s", why);
            a->gpu = PREDICT_GPU_FAILED;
            return;
        }
        if (r == 0 || fit < a->gpu_fit || (fit == a->gpu_fit && need > a->gpu_need)) {
            a->gpu_fit = fit;
            a->gpu_need = need;
            a->gpu_rank = rs->m[r].rank;
            a->held = held;
            a->left = left;
        }
    }
    a->gpu = PREDICT_GPU_DONE;
}

void predict_cell(const struct predict_cell *c, long min, long max, long step, uint64_t capacity,
                  const struct devmem_ops *ops, struct predict_answer *a)
{
    memset(a, 0, sizeof *a);
    struct replay_trace *t[3] = { NULL, NULL, NULL };
    size_t nt[3] = { 0, 0, 0 };
    struct replay_ranks rs = REPLAY_RANKS_INIT;
    snprintf(a->why, sizeof a->why, "needs traces of two sizes");
    int ok = c->n >= 2;
    for (size_t k = 0; ok && k < c->n; k++) {
        t[k] = calloc(c->npath[k] ? c->npath[k] : 1, sizeof *t[k]);
        if (!t[k]) {
            snprintf(a->why, sizeof a->why, "out of memory");
            ok = 0;
        }
        for (size_t i = 0; ok && i < c->npath[k]; i++) {
            char err[480];
            ok = !replay_trace_load(c->path[k][i], &t[k][i], err, sizeof err);
            if (ok)
                nt[k]++;
            else if (c->npath[k] > 1)
                snprintf(a->why, sizeof a->why, "%s: %s", strrchr(c->path[k][i], '/') + 1, err);
            else
                snprintf(a->why, sizeof a->why, "%s", err);
        }
    }
    if (ok) {
        const struct replay_trace *ct[3] = { t[0], t[1], t[2] };
        ok = !replay_fit_ranks(ct, nt, c->b, c->n, &rs, a->why, sizeof a->why);
    }
    a->ok = ok;
    if (ok) {
        a->why[0] = '\0';
        long pred[64];
        int64_t rneed[64];
        size_t d;
        int keep = rs.n <= 64;
        a->fit = replay_predict_ranks(&rs, min, max, step, (int64_t)capacity, 0, &a->need, &d,
                                      keep ? pred : NULL, keep ? rneed : NULL);
        a->ranks = rs.n;
        a->rank = rs.m[d].rank;
        a->next_rank = -1;
        for (size_t r = 0; keep && r < rs.n; r++)
            if (r != d && (a->next_rank < 0 || pred[r] < a->next_fit)) {
                a->next_rank = rs.m[r].rank;
                a->next_fit = pred[r];
            }
        if (ops)
            predict_on_gpu(&rs, ops, capacity, min, max, step, a);
    }
    replay_ranks_release(&rs);
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < nt[k]; i++)
            replay_trace_release(&t[k][i]);
        free(t[k]);
    }
}
