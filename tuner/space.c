/*
 * space: cells, their order, and what one cell's trials tell the others
 * (see space.h).
 */
#include "space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int space_init(struct space *sp, const struct space_opts *o, char *err, size_t errlen)
{
    memset(sp, 0, sizeof *sp);
    sp->o = *o;
    size_t max = o->ngrad_accum * 2;
    sp->cells = calloc(max ? max : 1, sizeof *sp->cells);
    if (!sp->cells) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    long world = o->world_size > 0 ? o->world_size : 1;
    for (int ck = 0; ck < 2; ck++) {
        if ((ck == 0 && !o->ckpt_off) || (ck == 1 && !o->ckpt_on))
            continue;
        for (size_t i = 0; i < o->ngrad_accum; i++) {
            struct cell *c = &sp->cells[sp->ncells];
            memset(c, 0, sizeof *c);
            c->grad_accum = o->grad_accum[i];
            c->checkpointing = ck;
            c->fixed_micro = -1;
            c->seeds[0] = c->seeds[1] = -1;
            long lo = o->batch_min, hi = o->batch_max, step = o->batch_step;
            if (o->global_batch > 0) {
                long per = c->grad_accum * world;
                long m = o->global_batch / per;
                if (o->global_batch % per || m < o->batch_min || m > o->batch_max ||
                    (m - o->batch_min) % o->batch_step)
                    continue; /* no whole micro-batch on the grid: not a cell */
                c->fixed_micro = lo = hi = m;
                step = 1;
            }
            if (search_init(&c->search, lo, hi, step)) {
                snprintf(err, errlen, "bad batch range");
                space_release(sp);
                return -1;
            }
            c->search.use_model = o->use_model;
            sp->ncells++;
        }
    }
    if (!sp->ncells) {
        snprintf(err, errlen, o->global_batch > 0
                 ? "no cell gives a whole micro-batch within --batch: global batch %ld / "
                   "(grad_accum x world size %ld) must divide evenly; adjust --grad-accum or --batch"
                 : "the search space is empty", o->global_batch, world);
        space_release(sp);
        return -1;
    }
    if (o->global_batch > 0) {
        /* Increasing micro-batch within each checkpointing setting, so one
         * failure rules out every larger cell. */
        for (size_t i = 1; i < sp->ncells; i++)
            for (size_t j = i; j > 0; j--) {
                struct cell *a = &sp->cells[j - 1], *b = &sp->cells[j];
                if (a->checkpointing < b->checkpointing ||
                    (a->checkpointing == b->checkpointing && a->fixed_micro <= b->fixed_micro))
                    break;
                struct cell t = *a;
                *a = *b;
                *b = t;
            }
    }
    return 0;
}

void space_release(struct space *sp)
{
    for (size_t i = 0; i < sp->ncells; i++)
        search_release(&sp->cells[i].search);
    free(sp->cells);
    sp->cells = NULL;
    sp->ncells = 0;
}

/* Does micro m fit without checkpointing, by any off cell's knowledge? */
static int space_fits_off(const struct space *sp, long m)
{
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        if (c->checkpointing)
            continue;
        long mf = search_max_fit(&c->search);
        if (mf >= m)
            return 1;
    }
    return 0;
}

/* Has this cell run any size in [lo, hi) that fitted? */
static int space_measured_in(const struct cell *c, long lo, long hi)
{
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (!p->inferred && p->fit && p->value >= lo && p->value < hi)
            return 1;
    }
    return 0;
}

static int space_ran_any(const struct cell *c)
{
    for (size_t i = 0; i < c->search.nprobes; i++)
        if (!c->search.probes[i].inferred)
            return 1;
    return 0;
}

/* The next size for cell c, or 0 when the cell is finished. */
static int space_cell_next(struct space *sp, struct cell *c, long *micro)
{
    int gate = c->checkpointing && !sp->o.ckpt_forced;
    for (int k = 0; k < 2; k++) {
        /* A cached size is confirmed unless this run already knows it. */
        long v = c->seeds[k];
        c->seeds[k] = -1;
        if (v >= c->search.min && v <= c->search.max && !search_known(&c->search, v) &&
            !(gate && space_fits_off(sp, v))) {
            *micro = v;
            return 1;
        }
    }
    if (c->state == CELL_SEARCHING) {
        long v;
        if (search_next(&c->search, &v)) {
            *micro = v;
            return 1;
        }
        c->state = CELL_MEASURING;
    }
    if (c->state != CELL_MEASURING)
        return 0;
    long mf = search_max_fit(&c->search);
    if (mf < 0) {
        c->state = space_ran_any(c) ? CELL_DONE : CELL_SKIPPED;
        c->skip_reason = "a smaller micro-batch already failed with no more memory per sample";
        return 0;
    }
    if (gate && space_fits_off(sp, mf)) {
        /* Checkpointing would only cost time at a size that fits without it. */
        c->state = space_ran_any(c) ? CELL_DONE : CELL_SKIPPED;
        c->skip_reason = "fits without checkpointing, which is faster";
        return 0;
    }
    if (!search_tried(&c->search, mf)) {
        *micro = mf;
        return 1;
    }
    if (c->fixed_micro < 0) {
        long below = c->search.min +
                     ((long)(0.9 * (double)mf) - c->search.min) / c->search.step * c->search.step;
        long floor80 = (long)(0.8 * (double)mf);
        if (below > c->search.min && below < mf && !search_tried(&c->search, below) &&
            !space_measured_in(c, floor80, mf) && !(gate && space_fits_off(sp, below))) {
            *micro = below;
            return 1;
        }
    }
    c->state = CELL_DONE;
    return 0;
}

int space_next(struct space *sp, size_t *cell, long *micro)
{
    for (; sp->cur < sp->ncells; sp->cur++) {
        struct cell *c = &sp->cells[sp->cur];
        if (c->state == CELL_DONE || c->state == CELL_SKIPPED)
            continue;
        if (space_cell_next(sp, c, micro)) {
            *cell = sp->cur;
            return 1;
        }
    }
    return 0;
}

void space_record(struct space *sp, size_t i, const struct search_obs *obs)
{
    struct cell *src = &sp->cells[i];
    search_record(&src->search, obs);
    if (src->state == CELL_MEASURING && !obs->fit)
        src->state = CELL_SEARCHING; /* the boundary moved: search again */
    for (size_t j = 0; j < sp->ncells; j++) {
        struct cell *c = &sp->cells[j];
        if (j == i)
            continue;
        int shares = c->checkpointing == src->checkpointing ||
                     (obs->fit && !src->checkpointing) || (!obs->fit && src->checkpointing);
        if (!shares)
            continue;
        struct search_obs o = *obs;
        if (c->checkpointing != src->checkpointing)
            o.need_bytes = -1; /* a different memory line: no model point */
        if (c->fixed_micro > 0) {
            /* One size per cell: a failure below it or a fit above it decides it. */
            if ((!obs->fit && obs->value <= c->fixed_micro) || (obs->fit && obs->value >= c->fixed_micro)) {
                o.value = c->fixed_micro;
                o.need_bytes = -1;
            } else {
                continue;
            }
        }
        search_infer(&c->search, &o);
    }
}

void space_seed(struct space *sp, long grad_accum, int checkpointing, long max_fit, long min_fail)
{
    for (size_t i = 0; i < sp->ncells; i++) {
        struct cell *c = &sp->cells[i];
        if (c->grad_accum == grad_accum && c->checkpointing == checkpointing) {
            c->seeds[0] = max_fit;
            c->seeds[1] = min_fail;
        }
    }
}
