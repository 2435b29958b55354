/* SPDX-License-Identifier: MIT */
/*
 * predict: traces to predictions (predict.h), moved out of
 * tuner/cli/subcmd.c.  predict_scan reads the directory once, keeping per
 * cell the three smallest sizes by insertion; predict_cell loads them,
 * fits the replay model, and predicts from it on the capacity, then on
 * the device when one is given: memory beyond the capacity (less what
 * the model says lies outside PyTorch's allocator) is held back, the
 * model replayed with real allocations, and everything given back.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "search/predict.h"
#include "casim.h"
#include "devmem.h"
#include "replay.h"

long predict_scan(const char *dir, struct predict_cell *cells, size_t max)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t ncells = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long accum, b;
        char ck[4], tail[8];
        if (sscanf(e->d_name, "accum%ld-ckpt%3[onf]-b%ld.tx%7s", &accum, ck, &b, tail) != 4 ||
            strcmp(tail, "t") || accum < 1 || b < 1 || (strcmp(ck, "on") && strcmp(ck, "off")))
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
        struct predict_cell *c = &cells[k];
        /* Keep the three smallest sizes, in order. */
        size_t at = c->n;
        while (at > 0 && c->b[at - 1] > b)
            at--;
        if (at >= 3)
            continue;
        for (size_t j = c->n < 3 ? c->n : 2; j > at; j--) {
            c->b[j] = c->b[j - 1];
            memcpy(c->path[j], c->path[j - 1], sizeof c->path[j]);
        }
        c->b[at] = b;
        snprintf(c->path[at], sizeof c->path[at], "%s/%s", dir, e->d_name);
        if (c->n < 3)
            c->n++;
    }
    closedir(d);
    return (long)ncells;
}

/* The model replayed on the device, held back to stand in for a card of
 * cap bytes. */
static void predict_on_gpu(const struct replay_model *m, const struct devmem_ops *ops,
                           uint64_t cap, long min, long max, long step, struct predict_answer *a)
{
    if (m->device != 'g') {
        a->gpu = PREDICT_GPU_CPU_TRACES;
        return;
    }
    struct devmem_hold h;
    uint64_t outside = m->outside > 0 ? (uint64_t)m->outside : 0;
    uint64_t room = cap > outside ? cap - outside : 0;
    if (devmem_hold(&h, ops, room, a->why, sizeof a->why)) {
        a->gpu = PREDICT_GPU_NO_HOLD;
        return;
    }
    struct casim_device dev;
    devmem_as_casim(ops, &dev);
    a->gpu_fit = replay_predict_on(m, min, max, step, &dev, &a->gpu_need);
    a->held = h.bytes;
    a->left = h.free_after;
    devmem_unhold(&h);
    if (a->gpu_fit == min - 2) {
        snprintf(a->why, sizeof a->why, "%s", ops->error(ops->ctx));
        a->gpu = PREDICT_GPU_FAILED;
    } else {
        a->gpu = PREDICT_GPU_DONE;
    }
}

void predict_cell(const struct predict_cell *c, long min, long max, long step, uint64_t capacity,
                  const struct devmem_ops *ops, struct predict_answer *a)
{
    memset(a, 0, sizeof *a);
    struct replay_trace t[3] = { REPLAY_TRACE_INIT, REPLAY_TRACE_INIT, REPLAY_TRACE_INIT };
    struct replay_model m = REPLAY_MODEL_INIT;
    snprintf(a->why, sizeof a->why, "needs traces of two sizes");
    int ok = c->n >= 2;
    for (size_t j = 0; ok && j < c->n; j++)
        ok = !replay_trace_load(c->path[j], &t[j], a->why, sizeof a->why);
    if (ok)
        ok = !replay_fit(t, c->b, c->n, &m, a->why, sizeof a->why);
    a->ok = ok;
    if (ok) {
        a->why[0] = '\0';
        a->fit = replay_predict(&m, min, max, step, (int64_t)capacity, &a->need);
        if (ops)
            predict_on_gpu(&m, ops, capacity, min, max, step, a);
    }
    replay_model_release(&m);
    for (size_t j = 0; j < 3; j++)
        replay_trace_release(&t[j]);
}
