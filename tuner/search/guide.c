/* SPDX-License-Identifier: MIT */
/*
 * guide: recording trials, predictions and their confirmation, per cell
 * (see guide.h).
 */
#include "search/guide.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/afile.h"

int guide_init(struct guide *g, const struct space *sp, int64_t capacity, const char *capacity_from)
{
    g->cells = calloc(sp->ncells ? sp->ncells : 1, sizeof *g->cells);
    g->ncells = sp->ncells;
    g->capacity = capacity;
    g->capacity_from = capacity_from;
    if (!g->cells)
        return -1;
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        struct guide_cell *gc = &g->cells[i];
        gc->models = (struct replay_ranks)REPLAY_RANKS_INIT;
        gc->predicted = gc->first_predicted = -1;
        gc->predicted_need = gc->measured_need = gc->need_at = -1;
        gc->nwant = 2;
        /* Batch 1 takes other code paths (no batch dimension to grow):
         * record from the smallest grid size >= 2. */
        long step = c->search.step, r = c->search.min;
        if (r < 2)
            r += (2 - r + step - 1) / step * step;
        for (int k = 0; k < 3; k++)
            gc->rec[k] = r + k * step;
        if (c->fixed_micro > 0) {
            gc->state = GUIDE_OFF;
            snprintf(gc->why, sizeof gc->why, "one size per cell (--global-batch)");
        } else if (c->seeds[0] >= 0 || c->seeds[1] >= 0) {
            gc->state = GUIDE_OFF;
            snprintf(gc->why, sizeof gc->why, "warm start: the cached boundary is confirmed instead");
        } else if (gc->rec[1] > c->search.max) {
            gc->state = GUIDE_OFF;
            snprintf(gc->why, sizeof gc->why, "the range has no two sizes from 2 to record");
        } else {
            gc->state = GUIDE_RECORDING;
        }
    }
    return 0;
}

static void guide_drop_traces(struct guide_cell *gc, size_t k);
static void guide_drop_models(struct guide_cell *gc);

void guide_release(struct guide *g)
{
    for (size_t i = 0; i < g->ncells; i++) {
        for (size_t k = 0; k < 3; k++)
            guide_drop_traces(&g->cells[i], k);
        guide_drop_models(&g->cells[i]);
    }
    free(g->cells);
    g->cells = NULL;
    g->ncells = 0;
}

int guide_next(struct guide *g, struct space *sp, size_t ci, long *micro)
{
    if (ci >= g->ncells)
        return 0;
    struct guide_cell *gc = &g->cells[ci];
    if (gc->state != GUIDE_RECORDING)
        return 0;
    long want = gc->rec[gc->nrec];
    if (search_tried(&sp->cells[ci].search, want)) {
        /* Already run without recording (a third size the search reached
         * first): no held-out check then. */
        gc->state = gc->nrec >= 2 ? GUIDE_DONE : GUIDE_DECLINED;
        snprintf(gc->why, sizeof gc->why, "micro-batch %ld was run before it could be recorded",
                 want);
        return 0;
    }
    *micro = want;
    return 1;
}

/* Every process's trace in dir (one per rank), loaded into *t (n of
 * them, *paths their files, both malloc'd).  0, or -1 with why: no trace,
 * or one that does not load (a rank's trace cut short declines the
 * cell: that rank's need is unknown). */
static int guide_load_traces(const char *dir, struct replay_trace **t, size_t *n, char **paths,
                             char *why, size_t whylen)
{
    *t = NULL;
    *paths = NULL;
    *n = 0;
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        snprintf(why, whylen, "the probe wrote no trace (torch not seen, or the trial ended "
                              "before its recording)");
        return -1;
    }
    struct dirent *e;
    size_t cap = 0;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (strncmp(e->d_name, "trace-", 6) || !strstr(e->d_name, ".txt") ||
            strstr(e->d_name, ".tmp"))
            continue;
        char path[4400], err[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 4;
            struct replay_trace *nt = realloc(*t, nc * sizeof *nt);
            if (nt)
                *t = nt;
            char *np = nt ? realloc(*paths, nc * 4400) : NULL;
            if (np)
                *paths = np;
            if (!nt || !np) {
                snprintf(why, whylen, "out of memory");
                rc = -1;
                break;
            }
            cap = nc;
        }
        if (replay_trace_load(path, &(*t)[*n], err, sizeof err)) {
            snprintf(why, whylen, "%.64s: %.400s", e->d_name, err);
            rc = -1;
            break;
        }
        snprintf(*paths + *n * 4400, 4400, "%s", path);
        (*n)++;
    }
    closedir(d);
    if (!rc && !*n) {
        snprintf(why, whylen, "the probe wrote no trace (torch not seen, or the trial ended "
                              "before its recording)");
        rc = -1;
    }
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            replay_trace_release(&(*t)[i]);
        free(*t);
        free(*paths);
        *t = NULL;
        *paths = NULL;
        *n = 0;
    }
    return rc;
}

/* The traces of cell ci's size k: released. */
static void guide_drop_traces(struct guide_cell *gc, size_t k)
{
    for (size_t i = 0; i < gc->ntrace[k]; i++)
        replay_trace_release(&gc->trace[k][i]);
    free(gc->trace[k]);
    gc->trace[k] = NULL;
    gc->ntrace[k] = 0;
}

static void guide_drop_models(struct guide_cell *gc)
{
    replay_ranks_release(&gc->models);
    free(gc->rank_pred);
    free(gc->rank_need);
    gc->rank_pred = NULL;
    gc->rank_need = NULL;
    gc->have_model = 0;
    gc->decider = 0;
}

/* Copy a trace into the --keep-traces directory.  0, or -1 with why. */
static int guide_keep(const char *dir, const char *path, const struct cell *c, long micro,
                      long rank, char *why, size_t whylen)
{
    char name[160], dst[4400];
    if (rank == 0)
        snprintf(name, sizeof name, GUIDE_TRACE_NAME, c->grad_accum,
                 c->checkpointing ? "on" : "off", micro);
    else
        snprintf(name, sizeof name, GUIDE_TRACE_NAME_RANK, c->grad_accum,
                 c->checkpointing ? "on" : "off", micro, rank);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = f ? open_memstream(&buf, &len) : NULL;
    char chunk[65536];
    size_t n;
    while (m && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, m);
    int rc = -1;
    if (!m) {
        snprintf(why, whylen, "cannot keep trace '%s': %s", path, strerror(errno));
    } else if (fclose(m) == 0 && buf) {
        rc = afile_write(dst, buf, len, why, whylen);
    }
    m = NULL;
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

static double guide_gib(int64_t b)
{
    return (double)b / (1024.0 * 1024.0 * 1024.0);
}

/* The capacity a cell's model predicts for: on a GPU seen through NVML,
 * the card as CUDA sees it (the traces' cuda_total), one view with the
 * free and outside bytes the probe measured (issue 25, item 4). */
static int guide_cuda_view(const struct guide *g)
{
    return !strcmp(g->capacity_from, "gpu");
}

static int64_t guide_capacity(const struct guide *g, const struct replay_model *m)
{
    if (!guide_cuda_view(g))
        return g->capacity;
    return replay_capacity(m, g->capacity);
}

/* Which rank decided, for the note: empty for a job of one process. */
static void guide_ranks_note(const struct guide_cell *gc, long min, char *out, size_t len)
{
    out[0] = '\0';
    const struct replay_ranks *rs = &gc->models;
    if (rs->n < 2)
        return;
    /* The runner-up: the smallest answer among the other ranks. */
    size_t next = gc->decider ? 0 : 1;
    for (size_t r = 0; r < rs->n; r++)
        if (r != gc->decider && gc->rank_pred[r] < gc->rank_pred[next])
            next = r;
    long p = gc->rank_pred[next];
    char pn[48];
    if (p < min)
        snprintf(pn, sizeof pn, "nothing");
    else
        snprintf(pn, sizeof pn, "%ld", p);
    snprintf(out, len, "; rank %ld of %zu decides (rank %ld alone: %s%s)",
             rs->m[gc->decider].rank, rs->n, rs->m[next].rank, pn,
             p == gc->rank_pred[gc->decider] ? ", the same" : "");
}

/* Fit the cell's traces, predict, seed P and P + step; the note says so. */
static void guide_predict(struct guide *g, struct space *sp, size_t ci, char *note, size_t len)
{
    struct guide_cell *gc = &g->cells[ci];
    struct cell *c = &sp->cells[ci];
    char why[512];
    guide_drop_models(gc);
    const struct replay_trace *tr[3] = { gc->trace[0], gc->trace[1], gc->trace[2] };
    if (replay_fit_ranks(tr, gc->ntrace, gc->rec, gc->nrec, &gc->models, why, sizeof why) == 0) {
        gc->rank_pred = calloc(gc->models.n, sizeof *gc->rank_pred);
        gc->rank_need = calloc(gc->models.n, sizeof *gc->rank_need);
        if (!gc->rank_pred || !gc->rank_need) {
            guide_drop_models(gc);
            snprintf(why, sizeof why, "out of memory");
        } else {
            gc->have_model = 1;
        }
    }
    if (!gc->have_model) {
        gc->state = gc->rounds ? GUIDE_DONE : GUIDE_DECLINED;
        snprintf(gc->why, sizeof gc->why, "%s", why);
        snprintf(note, len, "replay (accum %ld, ckpt %s): declined: %s; searching without it",
                 c->grad_accum, c->checkpointing ? "on" : "off", why);
        return;
    }
    int64_t need;
    long p = replay_predict_ranks(&gc->models, c->search.min, c->search.max, c->search.step,
                                  g->capacity, guide_cuda_view(g), &need, &gc->decider,
                                  gc->rank_pred, gc->rank_need);
    const struct replay_model *m = &gc->models.m[gc->decider];
    int64_t cap = guide_capacity(g, m);
    char ranks[160];
    guide_ranks_note(gc, c->search.min, ranks, sizeof ranks);
    gc->rounds++;
    gc->predicted = p >= c->search.min ? p : -1;
    gc->predicted_need = need;
    gc->measured_need = -1;
    gc->need_at = gc->predicted >= 0 ? gc->predicted : -1;
    if (gc->rounds == 1)
        gc->first_predicted = gc->predicted;
    gc->state = GUIDE_CONFIRMING;
    gc->checking = p >= c->search.min ? p : c->search.min;
    space_seed(sp, c->grad_accum, c->checkpointing, gc->checking, -1);
    char sizes[64];
    if (gc->nrec == 3)
        snprintf(sizes, sizeof sizes, "%ld, %ld and %ld", gc->rec[0], gc->rec[1], gc->rec[2]);
    else
        snprintf(sizes, sizeof sizes, "%ld and %ld", gc->rec[0], gc->rec[1]);
    int n = snprintf(note, len,
                     "replay (accum %ld, ckpt %s): traces at %s align (%zu allocations and frees "
                     "a step: %zu constant, %zu linear, %zu quadratic); ",
                     c->grad_accum, c->checkpointing ? "on" : "off", sizes, m->n, m->nconst,
                     m->nlinear, m->nquad);
    if (n < 0 || (size_t)n >= len)
        return;
    if (p < c->search.min)
        snprintf(note + n, len - n, "predicted: nothing fits (%ld needs %.2f GiB of %.2f GiB%s)%s",
                 c->search.min, guide_gib(need), guide_gib(cap),
                 cap != g->capacity ? ", the card as CUDA sees it" : "", ranks);
    else
        snprintf(note + n, len - n, "predicted largest fit %ld (%.2f GiB of %.2f GiB%s)%s; "
                 "confirming it", p, guide_gib(need), guide_gib(cap),
                 cap != g->capacity ? ", the card as CUDA sees it" : "", ranks);
}

void guide_record(struct guide *g, struct space *sp, size_t ci, long micro, int recording, int fit,
                  int64_t measured_need, const char *trace_dir, char *note, size_t notelen)
{
    note[0] = '\0';
    if (ci >= g->ncells)
        return;
    struct guide_cell *gc = &g->cells[ci];
    struct cell *c = &sp->cells[ci];
    if (recording) {
        char why[512], *paths = NULL;
        size_t k = gc->nrec;
        guide_drop_traces(gc, k);
        if (!fit) {
            snprintf(why, sizeof why, "the recording trial at micro-batch %ld did not fit (recording "
                     "needs memory of its own: the size is tried again without it)", micro);
        } else if (guide_load_traces(trace_dir, &gc->trace[k], &gc->ntrace[k], &paths, why,
                                     sizeof why) == 0) {
            for (size_t i = 0; g->keep_dir && i < gc->ntrace[k]; i++)
                if (guide_keep(g->keep_dir, paths + i * 4400, c, micro, gc->trace[k][i].rank, why,
                               sizeof why))
                    snprintf(note, notelen, "replay: warning: %s", why);
            free(paths);
            gc->nrec++;
            if (gc->nrec == gc->nwant && note[0]) /* the prediction's note wins */
                note[0] = '\0';
            if (gc->nrec == gc->nwant)
                guide_predict(g, sp, ci, note, notelen);
            return;
        }
        gc->state = gc->rounds ? GUIDE_DONE : GUIDE_DECLINED;
        snprintf(gc->why, sizeof gc->why, "%s", why);
        snprintf(note, notelen, "replay (accum %ld, ckpt %s): declined: %s; searching without it",
                 c->grad_accum, c->checkpointing ? "on" : "off", gc->why);
        return;
    }
    if (gc->state != GUIDE_CONFIRMING)
        return;
    long p = gc->predicted, step = c->search.step;
    const struct search *s = &c->search;
    /* The model's error in bytes, at the prediction or the neighbour
     * that settled it: a size that fitted (a failed trial's peak is only
     * where it stopped). */
    if (fit && micro == gc->checking && gc->have_model && measured_need > 0) {
        int f;
        size_t most;
        gc->need_at = micro;
        gc->predicted_need = replay_need_ranks(&gc->models, micro, g->capacity,
                                               guide_cuda_view(g), &f, &most);
        gc->measured_need = measured_need;
    }
    const char *ck = c->checkpointing ? "on" : "off";
    /* Is the cell's boundary known exactly now? */
    long mf = search_max_fit(s), fail = search_min_fail(s);
    if ((mf >= 0 && (mf + step > s->max || fail == mf + step)) || (mf < 0 && fail == s->min)) {
        gc->state = GUIDE_DONE;
        if (mf == p || (mf < 0 && p < 0))
            snprintf(note, notelen, "replay (accum %ld, ckpt %s): confirmed: %ld is the largest "
                     "fit", c->grad_accum, ck, mf);
        else
            snprintf(note, notelen, "replay (accum %ld, ckpt %s): the largest fit is %ld, %ld "
                     "step%s %s the prediction", c->grad_accum, ck, mf,
                     labs(mf - p) / step, labs(mf - p) == step ? "" : "s", mf > p ? "above" : "below");
        return;
    }
    if (micro != gc->checking)
        return;
    /* The one neighbour that settles a prediction one step off: above a
     * fit, below a failure (the size above a failure fails too). */
    long next = fit ? micro + step : micro - step;
    if (micro == p && next >= s->min && next <= s->max && !search_known(s, next)) {
        gc->checking = next;
        space_seed(sp, c->grad_accum, c->checkpointing, next, -1);
        return;
    }
    if (gc->rounds == 1 && gc->rec[2] <= s->max && !search_tried(s, gc->rec[2])) {
        gc->state = GUIDE_RECORDING;
        gc->nwant = 3;
        snprintf(note, notelen, "replay (accum %ld, ckpt %s): the trials disagree with %ld; "
                 "recording micro-batch %ld as a held-out check", c->grad_accum, ck, p,
                 gc->rec[2]);
        return;
    }
    gc->state = GUIDE_DONE;
    snprintf(note, notelen, "replay (accum %ld, ckpt %s): the trials disagree with %ld; the "
             "search goes on from what they showed", c->grad_accum, ck, p);
}

static json_t *guide_int(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

json_t *guide_json(const struct guide *g, const struct space *sp)
{
    static const char *const names[] = { "recording", "confirming", "done", "declined", "off" };
    json_t *cells = json_array();
    for (size_t i = 0; cells && i < g->ncells; i++) {
        const struct guide_cell *gc = &g->cells[i];
        const struct cell *c = &sp->cells[i];
        const struct search *s = &c->search;
        long mf = search_max_fit(s);
        int exact = mf >= 0 && (search_bounded(s) || search_min_fail(s) == mf + s->step);
        json_t *rec = json_array();
        for (size_t k = 0; rec && k < gc->nrec; k++)
            json_array_append_new(rec, json_integer(gc->rec[k]));
        json_t *o = json_pack("{s:I, s:b, s:s, s:o, s:o}", "grad_accum", (json_int_t)c->grad_accum,
                              "checkpointing", c->checkpointing, "state", names[gc->state],
                              "why", gc->why[0] ? json_string(gc->why) : json_null(),
                              "recorded", rec ? rec : json_null());
        if (!o)
            continue;
        const struct replay_model *m = gc->have_model ? &gc->models.m[gc->decider] : NULL;
        json_object_set_new(o, "model", m ?
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "device",
                      m->device == 'g' ? "cuda" : "cpu",
                      "events", (json_int_t)m->n, "constant", (json_int_t)m->nconst,
                      "linear", (json_int_t)m->nlinear, "quadratic", (json_int_t)m->nquad,
                      "switched", (json_int_t)m->nswitched,
                      "outside_bytes", (json_int_t)m->outside,
                      "capacity_bytes", (json_int_t)guide_capacity(g, m),
                      "rank", (json_int_t)m->rank, "ranks", (json_int_t)gc->models.n)
            : json_null());
        /* Every rank's own answer; the smallest decided ("decided_by_rank"). */
        json_t *ranks = m ? json_array() : NULL;
        for (size_t r = 0; ranks && r < gc->models.n; r++)
            json_array_append_new(ranks, json_pack("{s:I, s:o, s:o}", "rank",
                                                   (json_int_t)gc->models.m[r].rank,
                                                   "predicted_max_fit",
                                                   guide_int(gc->rank_pred[r] >= s->min ?
                                                             gc->rank_pred[r] : -1),
                                                   "need_bytes", guide_int(gc->rank_need[r])));
        json_object_set_new(o, "ranks", ranks ? ranks : json_null());
        json_object_set_new(o, "decided_by_rank", m ? json_integer(m->rank) : json_null());
        json_object_set_new(o, "predicted_max_fit", guide_int(gc->predicted));
        json_object_set_new(o, "first_prediction", guide_int(gc->first_predicted));
        json_object_set_new(o, "need_at", guide_int(gc->need_at));
        json_object_set_new(o, "predicted_need_bytes", guide_int(gc->predicted_need));
        json_object_set_new(o, "measured_need_bytes", guide_int(gc->measured_need));
        json_object_set_new(o, "need_error_pct",
                            gc->predicted_need > 0 && gc->measured_need > 0 ?
                            json_real(100.0 * (double)(gc->predicted_need - gc->measured_need) /
                                      (double)gc->measured_need) : json_null());
        /* The boundary the trials found, when they found it exactly. */
        json_object_set_new(o, "max_fit", exact ? json_integer(mf) : json_null());
        json_object_set_new(o, "confirmed", gc->predicted >= 0 && exact ?
                            json_boolean(gc->predicted == mf) : json_null());
        json_object_set_new(o, "error_steps", gc->predicted >= 0 && exact ?
                            json_integer((gc->predicted - mf) / s->step) : json_null());
        json_array_append_new(cells, o);
    }
    if (!cells)
        return NULL;
    json_t *doc = json_pack("{s:I, s:s, s:o}", "capacity_bytes", (json_int_t)g->capacity,
                            "capacity_from", g->capacity_from, "cells", cells);
    return doc;
}
