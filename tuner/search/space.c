/* SPDX-License-Identifier: MIT */
/*
 * space: cells, their order, and what one cell's trials tell the others
 * (see space.h).
 */
#include "search/space.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Extra throughput trials per cell after its max-fit. */
#ifndef SPACE_MAX_EXTRA
#define SPACE_MAX_EXTRA 4
#endif
/* A step this much slower than the clean line is slowed by memory. */
#define SPACE_SLOW_TOL 0.03
/* The knee is found when its bracket is this narrow (relative). */
#ifndef SPACE_KNEE_REL
#define SPACE_KNEE_REL 0.04
#endif

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
            c->seed_max_fit = c->seed_fastest = -1;
            c->seed_near[0] = c->seed_near[1] = -1;
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
            c->search.open_mid = o->open_mid;
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

/* The grid size at or below v, within the cell's range. */
static long space_snap(const struct cell *c, double v)
{
    const struct search *s = &c->search;
    if (v <= (double)s->min)
        return s->min;
    if (v >= (double)s->max)
        return s->max;
    return s->min + (long)((v - (double)s->min) / (double)s->step) * s->step;
}

/* The fit this cell ran that measured the highest speed; NULL none. */
static const struct search_probe *space_fastest_fit(const struct cell *c)
{
    const struct search_probe *best = NULL;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (!p->inferred && p->fit && p->speed > 0 && (!best || p->speed > best->speed))
            best = p;
    }
    return best;
}

/* The latest fit this cell ran at m that measured a speed; NULL none. */
static const struct search_probe *space_fit_at(const struct cell *c, long m)
{
    const struct search_probe *at = NULL;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (!p->inferred && p->fit && p->value == m && p->speed > 0)
            at = p;
    }
    return at;
}

/* Worth a throughput trial at v: not run here, or run only for its
 * memory (its latest trial here a fit without a speed). */
static int space_untimed(const struct cell *c, long v)
{
    int fit = 0;
    if (!search_tried(&c->search, v))
        return 1;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (!p->inferred && p->value == v)
            fit = p->fit && p->speed <= 0;
    }
    return fit;
}

/* A measured speed of this cell at m; 0 unknown. */
static double space_speed(const struct cell *c, long m)
{
    const struct search_probe *p = space_fit_at(c, m);
    return p ? p->speed : 0;
}

/*
 * The step-time line t(m) = t0 + t1 m of steps that feel no memory
 * pressure: through the cell's smallest measured fit and its largest at
 * most half the max-fit (memory pressure, if any, is near capacity).
 * Returns 0 with the line, -1 without two such points.
 */
static int space_own_line(const struct cell *c, long mf, double *t0, double *t1)
{
    long x1 = -1, x2 = -1;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (p->inferred || !p->fit || p->speed <= 0 || 2 * p->value > mf)
            continue;
        if (x1 < 0 || p->value < x1)
            x1 = p->value;
        if (p->value > x2)
            x2 = p->value;
    }
    if (x1 < 0 || x2 <= x1)
        return -1;
    double y1 = (double)x1 / space_speed(c, x1), y2 = (double)x2 / space_speed(c, x2);
    *t1 = (y2 - y1) / (double)(x2 - x1);
    *t0 = y1 - *t1 * (double)x1;
    return *t1 > 0 && *t0 >= 0 ? 0 : -1;
}

/*
 * The clean line of a cell: its own, or for a cell with checkpointing
 * whose sizes start where the others' end, the line of the cell without
 * it (same accumulation first) scaled by the recompute's cost, as
 * measured at the cell's smallest fit.
 */
static int space_clean_line(const struct space *sp, const struct cell *c, long mf, double *t0,
                            double *t1)
{
    if (!space_own_line(c, mf, t0, t1))
        return 0;
    if (!c->checkpointing)
        return -1;
    /* The recompute's cost at a size far from capacity: at most half the
     * max-fit, unless half of it fits without checkpointing (then the
     * smallest size measured). */
    long x1 = -1, half = c->search.min + (mf / 2 - c->search.min) / c->search.step * c->search.step;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (!p->inferred && p->fit && p->speed > 0 && p->value < mf && (x1 < 0 || p->value < x1))
            x1 = p->value;
    }
    if (x1 < 0 || (x1 > half && !space_fits_off(sp, half)))
        return -1;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sp->ncells; i++) {
            const struct cell *o = &sp->cells[i];
            double a, b;
            if (o->checkpointing || (pass == 0 && o->grad_accum != c->grad_accum) ||
                space_own_line(o, search_max_fit(&o->search), &a, &b))
                continue;
            double f = ((double)x1 / space_speed(c, x1)) / (a + b * (double)x1);
            *t0 = f * a;
            *t1 = f * b;
            return 0;
        }
    return -1;
}

/* Is the step at m slower than the clean line says, beyond noise (3%,
 * or twice the trial's own step-time spread when that is larger)? */
static int space_slowed(const struct cell *c, long m, double t0, double t1)
{
    const struct search_probe *p = space_fit_at(c, m);
    if (!p)
        return 0;
    double tol = 2 * p->spread > SPACE_SLOW_TOL ? 2 * p->spread : SPACE_SLOW_TOL;
    return (double)m / p->speed > (t0 + t1 * (double)m) * (1 + tol);
}

/* One size near 90% of the max-fit, unless a fit in [80%, 100%) was
 * measured: the second point of a cell without a knee search. */
static long space_below(const struct cell *c, long mf)
{
    long below = space_snap(c, 0.9 * (double)mf);
    long floor80 = (long)(0.8 * (double)mf);
    return below > c->search.min && below < mf && space_untimed(c, below) &&
           !space_measured_in(c, floor80, mf) ? below : 0;
}

/*
 * Where throughput stops improving, for a cell without checkpointing:
 * samples/s grows with the micro-batch until memory pressure (allocator
 * frees and retries near capacity) slows every step; the fastest size is
 * then the largest one below that knee, or the max-fit.  The next size to
 * measure, or 0 when the best is known within SPACE_KNEE_REL:
 *   - without a clean step-time line yet: half the max-fit (a second
 *     point far from capacity);
 *   - max-fit on the line: nothing slows, the max-fit is the fastest;
 *   - else below the break-even size b (where a clean step would be as
 *     fast as the slowed max-fit) nothing can win; measure b first, then
 *     bisect between the largest clean fit and the smallest slowed one.
 */
static long space_knee_next(const struct space *sp, const struct cell *c, long mf)
{
    double t0, t1;
    int gate = c->checkpointing && !sp->o.ckpt_forced;
    if (space_clean_line(sp, c, mf, &t0, &t1)) {
        /* Two points for the line: half the max-fit, then a quarter;
         * below a handful of sizes, every size.  A cell with
         * checkpointing only where the others do not fit. */
        for (int k = 2; k >= 1; k--) {
            long v = space_snap(c, 0.25 * k * (double)mf);
            if (v > c->search.min && v < mf && space_untimed(c, v) &&
                !(gate && space_fits_off(sp, v)))
                return v;
        }
        for (long v = mf - c->search.step; v >= c->search.min && mf <= 4 * c->search.step + c->search.min;
             v -= c->search.step)
            if (space_untimed(c, v) && !(gate && space_fits_off(sp, v)))
                return v;
        return gate ? space_below(c, mf) : 0;
    }
    if (!space_slowed(c, mf, t0, t1))
        return 0;
    long clean = -1, slowed = mf;
    for (size_t i = 0; i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (p->inferred || !p->fit || p->speed <= 0 || p->value > mf)
            continue;
        if (space_slowed(c, p->value, t0, t1)) {
            if (p->value < slowed)
                slowed = p->value;
        } else if (p->value > clean) {
            clean = p->value;
        }
    }
    double s_mf = space_speed(c, mf), den = 1 - s_mf * t1;
    if (den <= 0)
        return 0; /* no clean step could be as fast */
    double be = s_mf * t0 / den;
    long step = c->search.step;
    long b = space_snap(c, be) + step; /* the first size that could win */
    if (b >= slowed)
        return 0;
    /* Bisect for the knee above what is known clean or cannot win. */
    long lo = clean > b - step ? clean : b - step;
    if (slowed - lo <= step || (double)(slowed - lo) <= SPACE_KNEE_REL * (double)slowed)
        return 0;
    long mid = space_snap(c, (double)lo + (double)(slowed - lo) / 2);
    return mid > lo && mid < slowed && space_untimed(c, mid) ? mid : 0;
}

/* The fastest measured speed over the cells other than c; 0 none. */
static double space_best_speed_but(const struct space *sp, const struct cell *c)
{
    double best = 0;
    for (size_t i = 0; i < sp->ncells; i++) {
        if (&sp->cells[i] == c)
            continue;
        const struct search_probe *p = space_fastest_fit(&sp->cells[i]);
        if (p && p->speed > best)
            best = p->speed;
    }
    return best;
}

/*
 * Can a cell with checkpointing not beat the fastest point another cell
 * measured, at any size up to top?  (Its own points are no rival: a cell
 * searched alone, --checkpointing on, is never pruned.)  Its clean step-time line (the line without
 * checkpointing times the recompute's measured cost) bounds its speed,
 * which grows with the size, so the bound is at top.  1: prune it.
 */
static int space_cannot_win(const struct space *sp, const struct cell *c, long top)
{
    double t0, t1, best = space_best_speed_but(sp, c);
    if (!c->checkpointing || c->fixed_micro > 0 || best <= 0 || top < c->search.min ||
        space_clean_line(sp, c, top, &t0, &t1))
        return 0;
    return (double)top / (t0 + t1 * (double)top) <= best;
}

/*
 * The next throughput point of a cell past its max-fit, or 0.  The first
 * cell of each checkpointing setting looks for the knee (without
 * checkpointing) or measures one size below its max-fit (with it); a
 * later cell of the same setting (another accumulation: the same memory,
 * about the same speed per micro-batch) measures the micro-batch that was
 * fastest in the earlier ones, instead of repeating their search.
 */
static long space_points_next(const struct space *sp, const struct cell *c, long mf)
{
    long best = -1;
    double best_speed = 0;
    for (const struct cell *o = sp->cells; o < c; o++) {
        const struct search_probe *p = o->checkpointing == c->checkpointing ? space_fastest_fit(o)
                                                                           : NULL;
        if (p && p->speed > best_speed) {
            best_speed = p->speed;
            best = p->value;
        }
    }
    if (best > 0)
        return best < mf && space_untimed(c, best) ? best : 0;
    if (space_cannot_win(sp, c, mf))
        return 0; /* no size of this cell can beat the fastest point */
    if (c->seed_fastest > 0 && c->seed_max_fit == mf) {
        /* A confirmed warm start: the old choice and its neighbours. */
        long want[3] = { c->seed_fastest, c->seed_near[0], c->seed_near[1] };
        for (int i = 0; i < 3; i++)
            if (want[i] > 0 && want[i] < mf && space_untimed(c, want[i]))
                return want[i];
        return 0;
    }
    return space_knee_next(sp, c, mf);
}

static int space_ran_any(const struct cell *c)
{
    for (size_t i = 0; i < c->search.nprobes; i++)
        if (!c->search.probes[i].inferred)
            return 1;
    return 0;
}

/* Cell c's boundary search: up to n sizes to run side by side into
 * micro (the cached sizes first, both in one round); 0 when the search
 * is over (the cell is then measuring, pruned or finished). */
static int space_cell_search(struct space *sp, struct cell *c, int n, long *micro)
{
    int gate = c->checkpointing && !sp->o.ckpt_forced, k = 0;
    for (int i = 0; i < 2; i++) {
        /* A cached size is confirmed unless this run already knows it. */
        long v = c->seeds[i];
        if (k >= n)
            break;
        c->seeds[i] = -1;
        if (v >= c->search.min && v <= c->search.max && !search_known(&c->search, v) &&
            !(gate && space_fits_off(sp, v)))
            micro[k++] = v;
    }
    if (k || c->state != CELL_SEARCHING)
        return k;
    long fail = search_min_fail(&c->search);
    long top = fail >= 0 ? fail - c->search.step : c->search.max;
    if (space_cannot_win(sp, c, top)) {
        c->state = space_ran_any(c) ? CELL_DONE : CELL_SKIPPED;
        c->pruned = 1;
        c->skip_reason = "pruned: by the step-time line, no size it could fit would beat the "
                         "fastest point measured";
        return 0;
    }
    k = n > 1 ? search_next_n(&c->search, n, micro) : search_next(&c->search, micro);
    if (!k)
        c->state = CELL_MEASURING;
    return k;
}

/* The next size for cell c, or 0 when the cell is finished. */
static int space_cell_next(struct space *sp, struct cell *c, long *micro)
{
    int gate = c->checkpointing && !sp->o.ckpt_forced;
    if (space_cell_search(sp, c, 1, micro))
        return 1;
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
    /* Its trial ran beside others (--gpus), which share the CPU and the
     * host, or measured its memory alone: its speed is measured now,
     * alone, in a full trial. */
    if (space_speed(c, mf) <= 0 && (sp->o.shared_speeds || sp->o.memory_only) &&
        c->remeasured != mf) {
        c->remeasured = mf;
        *micro = mf;
        return 1;
    }
    /* Throughput points, when the max-fit's own trial measured a speed
     * (without one there is nothing to compare). */
    if (c->fixed_micro < 0 && c->extra < SPACE_MAX_EXTRA && space_speed(c, mf) > 0) {
        long v = space_points_next(sp, c, mf);
        if (v > 0 && !(gate && space_fits_off(sp, v))) {
            c->extra++;
            *micro = v;
            return 1;
        }
    }
    c->state = CELL_DONE;
    return 0;
}

int space_memory_only(const struct space *sp, size_t cell)
{
    if (!sp->o.memory_only || cell >= sp->ncells || sp->from_request)
        return 0;
    const struct cell *c = &sp->cells[cell];
    if (c->state != CELL_SEARCHING || c->fixed_micro > 0)
        return 0;
    /* A cell with checkpointing that another cell may beat: its first
     * speed decides whether it is searched at all. */
    if (c->checkpointing && !sp->o.ckpt_forced && !space_fastest_fit(c) &&
        space_best_speed_but(sp, c) > 0)
        return 0;
    return 1;
}

void space_reopen(struct space *sp, size_t cell)
{
    if (cell >= sp->ncells)
        return;
    struct cell *c = &sp->cells[cell];
    if (c->pruned || c->state == CELL_SKIPPED || c->state == CELL_SEARCHING)
        return;
    c->state = CELL_SEARCHING;
    c->extra = 0;
    if (sp->cur > cell)
        sp->cur = cell; /* the cells are visited in order: come back to it */
}

int space_request(struct space *sp, size_t cell, long micro)
{
    if (sp->nreq >= SPACE_MAX_REQUESTS || cell >= sp->ncells)
        return -1;
    sp->req[sp->nreq].cell = cell;
    sp->req[sp->nreq].micro = micro;
    sp->nreq++;
    return 0;
}

size_t space_next_round(struct space *sp, size_t n, size_t *cell, long *micro)
{
    if (n <= 1 || sp->nreq)
        return (size_t)space_next(sp, cell, micro);
    sp->from_request = 0;
    if (n > SPACE_MAX_ROUND)
        n = SPACE_MAX_ROUND;
    for (; sp->cur < sp->ncells; sp->cur++) {
        struct cell *c = &sp->cells[sp->cur];
        if (c->state == CELL_DONE || c->state == CELL_SKIPPED)
            continue;
        int k = space_cell_search(sp, c, (int)n, micro);
        if (!k && space_cell_next(sp, c, micro))
            k = 1; /* measuring: one at a time */
        if (k) {
            for (int i = 0; i < k; i++)
                cell[i] = sp->cur;
            return (size_t)k;
        }
    }
    return 0;
}

int space_next(struct space *sp, size_t *cell, long *micro)
{
    sp->from_request = 0;
    if (sp->nreq) {
        *cell = sp->req[0].cell;
        *micro = sp->req[0].micro;
        memmove(sp->req, sp->req + 1, --sp->nreq * sizeof sp->req[0]);
        sp->from_request = 1;
        return 1;
    }
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
    /* Checkpointing changes the activations, not the weights and the
     * optimizer's state: the line without it lends its intercept to the
     * cells with it, so one figure there gives their line too. */
    double a, b;
    if (!src->checkpointing && !search_model(&src->search, &a, &b) && a > 0)
        for (size_t j = 0; j < sp->ncells; j++)
            if (sp->cells[j].checkpointing)
                sp->cells[j].search.base_hint = a;
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
            c->seeds[0] = c->seed_max_fit = max_fit;
            c->seeds[1] = min_fail;
        }
    }
}

void space_seed_fastest(struct space *sp, long grad_accum, int checkpointing, long fastest,
                        const long near[2])
{
    for (size_t i = 0; i < sp->ncells; i++) {
        struct cell *c = &sp->cells[i];
        if (c->grad_accum == grad_accum && c->checkpointing == checkpointing) {
            c->seed_fastest = fastest;
            c->seed_near[0] = near[0];
            c->seed_near[1] = near[1];
        }
    }
}

void space_measured_near(const struct cell *c, long around, long near[2])
{
    near[0] = near[1] = -1;
    for (size_t i = 0; around > 0 && i < c->search.nprobes; i++) {
        const struct search_probe *p = &c->search.probes[i];
        if (p->inferred || !p->fit || p->speed <= 0)
            continue;
        if (p->value < around && p->value > near[0])
            near[0] = p->value;
        if (p->value > around && (near[1] < 0 || p->value < near[1]))
            near[1] = p->value;
    }
}

long space_fastest(const struct cell *c)
{
    const struct search_probe *p = space_fastest_fit(c);
    return p ? p->value : -1;
}
