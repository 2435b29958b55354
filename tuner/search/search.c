/* SPDX-License-Identifier: MIT */
/*
 * search: model jumps, ramp and bisection on a grid of micro-batch sizes
 * (see search.h).
 *
 * The state is the list of probes; every question (what fits, what next)
 * is answered from it afresh.  Lists are a few dozen entries, so the
 * linear scans cost nothing and there is no derived state to keep in step
 * (the model streak and last_how only steer the next proposal).
 */
#include "search/search.h"

#include <math.h>
#include <stdlib.h>

/* The least rise between two fits' figures that makes a slope: the
 * caching allocator rounds small requests up to 20 MiB segments, so a
 * smaller rise may be rounding alone. */
#define SEARCH_MIN_RISE (64.0 * 1024 * 1024)

/* Ramp steps before bisection takes over when they gave the model no
 * line: a ramp costs about log2(boundary) trials more than bisection. */
#ifndef SEARCH_MAX_RAMP
#define SEARCH_MAX_RAMP 2
#endif

/* Trials over bisection's count that the model's proposals may cost in
 * all, counted from the bracket the opening leaves (search.h).  One is
 * not enough: a line that reads one size low (a polled peak, a bent
 * curve) would then hand the rest of the search to bisection; the
 * search bench measures 1..4 (bench/README.md). */
#ifndef SEARCH_SLACK
#define SEARCH_SLACK 4
#endif

int search_init(struct search *s, long min, long max, long step)
{
    struct search zero = { 0 };
    *s = zero;
    s->capacity = -1;
    s->use_model = 1;
    s->gallop = 1;
    s->width[0] = s->width[1] = -1;
    s->proposed = -1;
    s->budget = -1;
    if (min < 1 || max < min || step < 1)
        return -1;
    s->min = min;
    s->step = step;
    s->max = min + (max - min) / step * step;
    return 0;
}

void search_release(struct search *s)
{
    free(s->probes);
    free(s->contra);
    s->probes = NULL;
    s->contra = NULL;
    s->nprobes = s->alloc = s->ncontra = 0;
}

/* How many times value was run, and the latest verdict on it (a run
 * outranks an inference). */
static int search_tries(const struct search *s, long value, int *last_fit)
{
    int n = 0, have_run = 0;
    for (size_t i = 0; i < s->nprobes; i++) {
        const struct search_probe *p = &s->probes[i];
        if (p->value != value || (p->inferred && have_run))
            continue;
        if (!p->inferred) {
            n++;
            have_run = 1;
        }
        *last_fit = p->fit;
    }
    return n;
}

int search_tried(const struct search *s, long value)
{
    int fit;
    return search_tries(s, value, &fit) > 0;
}

int search_known(const struct search *s, long value)
{
    for (size_t i = 0; i < s->nprobes; i++)
        if (s->probes[i].value == value)
            return 1;
    return 0;
}

/* Smallest failure by each size's latest verdict; -1 if none. */
static long search_first_fail(const struct search *s)
{
    long best = -1;
    for (size_t i = 0; i < s->nprobes; i++) {
        long v = s->probes[i].value;
        int fit = 0;
        search_tries(s, v, &fit);
        if (!fit && (best < 0 || v < best))
            best = v;
    }
    return best;
}

/* Largest fit below `below` (any when below < 0); -1 if none. */
static long search_last_fit(const struct search *s, long below)
{
    long best = -1;
    for (size_t i = 0; i < s->nprobes; i++) {
        long v = s->probes[i].value;
        int fit = 0;
        search_tries(s, v, &fit);
        if (fit && (below < 0 || v < below) && v > best)
            best = v;
    }
    return best;
}

long search_min_fail(const struct search *s)
{
    return search_first_fail(s);
}

long search_max_fit(const struct search *s)
{
    return search_last_fit(s, search_first_fail(s));
}

int search_bounded(const struct search *s)
{
    return search_first_fail(s) < 0 && search_max_fit(s) == s->max;
}

/* Trials run here (inferences are not trials). */
static int search_runs(const struct search *s)
{
    int n = 0;
    for (size_t i = 0; i < s->nprobes; i++)
        n += !s->probes[i].inferred;
    return n;
}

/* Trials bisection needs at most to close a bracket of w grid steps (its
 * w - 1 sizes unknown): ceil(log2 w). */
static int search_bisect_cost(long w)
{
    int n = 0;
    for (long span = 1; span < w; span *= 2)
        n++;
    return n;
}

/* The largest fit below the first failure that carries a memory figure,
 * run here or inferred; NULL if none. */
static const struct search_probe *search_top_point(const struct search *s, long fail)
{
    const struct search_probe *top = NULL;
    for (size_t i = 0; i < s->nprobes; i++) {
        const struct search_probe *p = &s->probes[i];
        if (p->fit && p->need_bytes >= 0 && (fail < 0 || p->value < fail) &&
            (!top || p->value > top->value || (p->value == top->value && !p->inferred)))
            top = p;
    }
    return top;
}

int search_model(const struct search *s, double *a, double *b)
{
    long fail = search_first_fail(s);
    const struct search_probe *top = search_top_point(s, fail);
    if (!top)
        return -1;
    double x2 = (double)top->value, y2 = top->need_bytes;
    /* The probe's figure: what a step holds between steps is the line's
     * value at size 0, so one fit gives the line (a small fit's rounding
     * makes it steep, and its proposal's fit then corrects it).  Else
     * another cell's intercept (the same weights and optimizer state). */
    double base = s->base > 0 ? s->base : s->base_hint;
    if (base > 0 && y2 > base) {
        *a = base;
        *b = (y2 - base) / x2;
        return 0;
    }
    /* Else the secant to the nearest smaller fit that is far enough
     * below: at most 15/16 of the top and, since the caching allocator
     * rounds small requests up to 20 MiB segments, at least
     * SEARCH_MIN_RISE lower.  Near, because real lines bend. */
    const struct search_probe *low = NULL;
    for (size_t i = 0; i < s->nprobes; i++) {
        const struct search_probe *p = &s->probes[i];
        if (!p->fit || p->need_bytes < 0 || 16 * p->value > 15 * top->value ||
            y2 - p->need_bytes < SEARCH_MIN_RISE)
            continue;
        if (!low || p->value > low->value)
            low = p;
    }
    if (!low)
        return -1;
    double x1 = (double)low->value, y1 = low->need_bytes;
    *b = (y2 - y1) / (x2 - x1);
    *a = y2 - *b * x2;
    return *b > 0 ? 0 : -1; /* memory that does not grow with the batch is no model */
}

/* The grid size at or below v. */
static long search_snap(const struct search *s, double v)
{
    if (v <= (double)s->min)
        return s->min;
    if (v >= (double)s->max)
        return s->max;
    return s->min + (long)((v - (double)s->min) / (double)s->step) * s->step;
}

/* The model's proposal inside the open bracket (lo, hi), hi the first
 * failure or MAX+STEP; 0 when the model has none or the safeguard refuses
 * it.  width: the bracket in grid steps. */
static int search_model_next(struct search *s, long lo, long hi, long width, long *value,
                             int spare)
{
    double a, b;
    s->confirm = 0;
    if (!s->use_model || s->capacity <= 0 || search_model(s, &a, &b))
        return 0;
    int failed = hi <= s->max;
    /* Brent's safeguard, after the fact: when a model trial was among the
     * last two, those two must have cut the bracket to a quarter, as two
     * bisections would.  (Only between two real ends: while nothing has
     * failed, the ramp is the alternative, and the gallop below is as
     * fast.) */
    if (failed && s->width_failed[0] && (s->how_hist[0] == SEARCH_MODEL ||
                                         s->how_hist[1] == SEARCH_MODEL) &&
        s->width[0] > 0 && 4 * width > s->width[0])
        return 0;
    double pred = (s->capacity - a) / b; /* the largest size that fits, by the line */
    if (!isfinite(pred))
        return 0;
    /* A line that says the failing size fits is refuted by it: a failure
     * adds no point that could correct it, so bisect. */
    if (failed && pred >= (double)hi)
        return 0;
    long v = search_snap(s, pred), plan;
    if (v <= lo) {
        s->confirm = 1; /* the line says lo is the boundary: confirm above it */
        v = lo + s->gallop * s->step;
        plan = s->gallop;
    } else {
        plan = 1; /* the size, then its neighbour */
    }
    if (v >= hi)
        v = hi - s->step;
    if (v <= lo)
        v = lo + s->step;
    /* The size and its neighbour are both to be run when the line is
     * right; the first is the one whose expected verdict cuts off more of
     * the bracket, so that a wrong line costs at most one trial over
     * bisection (search.h): the neighbour, expected to fail, when the
     * prediction lies in the lower half. */
    if (!s->confirm && v + s->step < hi && 2 * v + s->step < lo + hi &&
        !search_known(s, v + s->step))
        v += s->step;
    /* ... and before: the plan must leave at most a quarter of the
     * bracket, else bisection does at least as well. */
    if (4 * plan > width || v <= lo || v >= hi || v > s->max || search_known(s, v))
        return 0;
    if (!spare) {
        /* Out of budget: the line only picks a size among those that
         * leave bisection's count as it is, where neither side of the
         * bracket is wider than half the power of two that covers it. */
        long half = 1L << (search_bisect_cost(width) - 1);
        if (v < hi - half * s->step)
            v = hi - half * s->step;
        if (v > lo + half * s->step)
            v = lo + half * s->step;
        if (search_known(s, v))
            return 0;
    }
    *value = v;
    return 1;
}

/* Do the two largest fits run here read the same memory (within the
 * allocator's 2 MiB granularity)?  Then the first sizes all land in the
 * same segments, and doubling again would likely read the same: the
 * ramp gives the model no line. */
static int search_flat(const struct search *s)
{
    const struct search_probe *a = NULL, *b = NULL;
    for (size_t i = 0; i < s->nprobes; i++) {
        const struct search_probe *p = &s->probes[i];
        if (p->inferred || !p->fit || p->need_bytes < 0)
            continue;
        if (!a || p->value > a->value) {
            b = a;
            a = p;
        } else if (!b || p->value > b->value) {
            b = p;
        }
    }
    return a && b && a->value != b->value && a->need_bytes - b->need_bytes < 2.0 * 1024 * 1024;
}

/* The middle of the grid sizes strictly between lo and hi. */
static long search_mid(const struct search *s, long lo, long hi)
{
    long ilo = (lo - s->min) / s->step, ihi = (hi - s->min) / s->step;
    return s->min + (ilo + (ihi - ilo) / 2) * s->step;
}

/* search_next's choice; spare: the budget allows a guess (not bisection). */
static int search_choose(struct search *s, long *value, int spare)
{
    long below = s->min - s->step, above = s->max + s->step; /* virtual ends */
    if (!s->nprobes) {
        /* With memory figures to come, MIN: a cheap fit whose figure the
         * model extrapolates from.  Without, the middle: bisection. */
        s->last_how = s->open_mid ? SEARCH_BISECT : SEARCH_START;
        *value = s->open_mid ? search_mid(s, below, above) : s->min;
        return 1;
    }
    long fail = search_first_fail(s);
    long fit_any = search_last_fit(s, -1);
    if (fail >= 0 && fit_any > fail) {
        /* A size failed below a larger fit: re-test it, once. */
        int last;
        if (search_tries(s, fail, &last) == 1) {
            s->last_how = SEARCH_RETEST;
            *value = fail;
            return 1;
        }
    }
    long lo = search_last_fit(s, fail);
    if (lo < 0) {
        if (fail == s->min)
            return 0; /* the smallest size failed: nothing fits */
        if ((s->open_mid || !spare) && fail > s->min) {
            s->last_how = SEARCH_BISECT;
            *value = search_mid(s, below, fail);
            return 1;
        }
        if (search_tried(s, s->min))
            return 0;
        s->last_how = SEARCH_START;
        *value = s->min; /* start (again) from the bottom of the ramp */
        return 1;
    }
    if (fail < 0 && lo == s->max)
        return 0; /* bounded by the range */
    if (fail >= 0 && (fail - lo) / s->step <= 1)
        return 0; /* the boundary is found */
    long hi = fail >= 0 ? fail : above;
    long width = (hi - lo) / s->step;
    if (search_model_next(s, lo, hi, width, value, spare)) {
        s->last_how = SEARCH_MODEL;
        return 1;
    }
    s->confirm = 0;
    /* The ramp only while figures are expected for the model: without
     * them no search beats bisection on every boundary, so bisect. */
    if (spare && fail < 0 && !s->open_mid && s->use_model && s->nramp < SEARCH_MAX_RAMP &&
        !(s->nramp && search_flat(s))) {
        long v = search_snap(s, 2.0 * (double)lo);
        if (v <= lo)
            v = lo + s->step;
        *value = v > s->max ? s->max : v;
        s->last_how = SEARCH_RAMP;
        s->nramp++;
        return 1;
    }
    if (spare && !search_runs(s)) {
        /* Only inferences so far (another cell's max-fit, e.g. the cell
         * without checkpointing for the one with it): twice that size
         * first, small enough that one trial's speed can show that the
         * cell cannot win (space.c prunes it then). */
        long v = search_snap(s, 2.0 * (double)lo);
        if (v > lo && v < hi && !search_known(s, v)) {
            *value = v;
            s->last_how = SEARCH_RAMP;
            return 1;
        }
    }
    *value = search_mid(s, lo, hi);
    s->last_how = SEARCH_BISECT;
    return 1;
}

int search_next(struct search *s, long *value)
{
    /* The budget: when set (at the first proposal, or after a trial the
     * search did not propose), the trials run plus what bisection needs
     * from that bracket, plus SEARCH_SLACK.  A guess is made only while
     * the same sum now stays below it; a guess raises the sum by one at
     * most and bisection never does, so the search's own trials never
     * exceed bisection's count by more than SEARCH_SLACK. */
    long fail = search_first_fail(s), lo = search_last_fit(s, fail);
    long lo_end = lo >= 0 ? lo : s->min - s->step, hi_end = fail >= 0 ? fail : s->max + s->step;
    int phi = search_runs(s) + search_bisect_cost((hi_end - lo_end) / s->step);
    if (s->budget < 0)
        s->budget = phi + SEARCH_SLACK;
    if (!search_choose(s, value, phi < s->budget)) {
        s->proposed = -1;
        return 0;
    }
    s->proposed = *value;
    if (s->last_how == SEARCH_START || s->last_how == SEARCH_RAMP)
        s->budget = -1; /* the opening: the budget is set where it ends */
    return 1;
}

/* Add v to the round's sizes when it lies strictly inside (lo, hi), is
 * not known yet and not already in the round. */
static void search_round_add(const struct search *s, long lo, long hi, long v, long *values,
                             int *k)
{
    if (v <= lo || v >= hi || v < s->min || v > s->max || search_known(s, v))
        return;
    for (int i = 0; i < *k; i++)
        if (values[i] == v)
            return;
    values[(*k)++] = v;
}

static int cmp_long_asc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int search_next_n(struct search *s, int n, long *values)
{
    long v;
    if (n < 1 || !search_next(s, &v))
        return 0;
    int k = 0;
    long fail = search_first_fail(s);
    long lo = search_last_fit(s, fail);
    long hi = fail >= 0 ? fail : s->max + s->step;
    if (lo < 0)
        lo = s->min - s->step;
    /* What search_next chose stays, except a bisection, which the
     * (N+1)-ary cuts below replace; a model's prediction takes the size
     * above it along, so that a right model is confirmed in one round. */
    if (s->last_how != SEARCH_BISECT)
        values[k++] = v;
    if (n == 1 || s->last_how == SEARCH_RETEST) {
        if (!k)
            values[k++] = v;
        return k;
    }
    if (s->last_how == SEARCH_MODEL)
        search_round_add(s, lo, hi, v + s->step, values, &k);
    /* The rest cut the open gaps of the bracket so that the widest part
     * left is as narrow as it can be: each slot goes to the gap whose
     * parts would otherwise be widest, and each gap is cut evenly. */
    long ends[66];
    int ne = 0;
    ends[ne++] = lo;
    ends[ne++] = hi;
    for (int i = 0; i < k; i++)
        ends[ne++] = values[i];
    qsort(ends, (size_t)ne, sizeof *ends, cmp_long_asc);
    int cuts[65] = { 0 };
    int left = n - k > 64 ? 64 : n - k;
    for (int r = 0; r < left; r++) {
        int best = -1;
        double widest = 0;
        for (int g = 0; g + 1 < ne; g++) {
            double part = (double)(ends[g + 1] - ends[g]) / s->step / (cuts[g] + 1);
            if (part > widest && (ends[g + 1] - ends[g]) / s->step > cuts[g] + 1) {
                widest = part;
                best = g;
            }
        }
        if (best < 0)
            break;
        cuts[best]++;
    }
    for (int g = 0; g + 1 < ne; g++) {
        long steps = (ends[g + 1] - ends[g]) / s->step;
        for (int c = 1; c <= cuts[g]; c++)
            search_round_add(s, lo, hi, ends[g] + steps * c / (cuts[g] + 1) * s->step, values, &k);
    }
    if (!k)
        values[k++] = v; /* every cut was known: the search's own choice */
    return k;
}

static void search_push(struct search *s, const struct search_obs *o, int inferred)
{
    if (s->nprobes == s->alloc) {
        size_t na = s->alloc ? 2 * s->alloc : 16;
        struct search_probe *p = realloc(s->probes, na * sizeof *p);
        if (!p)
            return; /* the probe is lost; search_next proposes it again */
        s->probes = p;
        s->alloc = na;
    }
    /* An OOM's figure is a lower bound, not a point on the line. */
    s->probes[s->nprobes++] = (struct search_probe){
        o->value, o->fit, inferred, o->fit ? o->need_bytes : -1,
        o->fit ? o->base_bytes : 0, o->fit ? o->speed : 0, o->fit ? o->spread : 0,
    };
    if (o->fit && o->base_bytes > 0)
        s->base = o->base_bytes;
}

void search_record(struct search *s, const struct search_obs *o)
{
    int last = 0;
    int before = search_tries(s, o->value, &last);
    long larger = search_last_fit(s, -1);
    /* The bracket before this trial, for the safeguard. */
    long fail = search_first_fail(s), lo = search_last_fit(s, fail);
    long hi = fail >= 0 ? fail : s->max + s->step;
    s->width[0] = s->width[1];
    s->how_hist[0] = s->how_hist[1];
    s->width_failed[0] = s->width_failed[1];
    s->width[1] = lo >= 0 ? (hi - lo) / s->step : -1;
    s->width_failed[1] = fail >= 0;
    s->how_hist[1] = (int)s->last_how;
    /* A refuted confirmation above lo: the model is low by more than the
     * gallop, which doubles.  A model trial that failed refuted the line
     * through the current top point. */
    if (s->last_how == SEARCH_MODEL && s->confirm > 0 && o->fit)
        s->gallop *= 2;
    else if (s->last_how == SEARCH_MODEL && !s->confirm)
        s->gallop = 1;

    /* A trial the search did not propose (a cached size, a replay
     * prediction, a throughput point, one of a round's cuts): the budget
     * is set again from the bracket it leaves. */
    if (o->value != s->proposed)
        s->budget = -1;
    s->proposed = -1;

    if (o->capacity_bytes > s->capacity)
        s->capacity = o->capacity_bytes;
    search_push(s, o, 0);
    if (before == 1 && !last && larger > o->value) {
        /* This was the re-test of a contradiction: remember it. */
        struct search_contradiction *c = realloc(s->contra, (s->ncontra + 1) * sizeof *c);
        if (c) {
            s->contra = c;
            s->contra[s->ncontra].value = o->value;
            s->contra[s->ncontra].larger_fit = larger;
            s->contra[s->ncontra].retest_fit = o->fit;
            s->ncontra++;
        }
    }
}

void search_record_fit(struct search *s, long value, int fit)
{
    struct search_obs o = { value, fit, -1, -1, 0, 0, 0 };
    search_record(s, &o);
}

void search_infer(struct search *s, const struct search_obs *o)
{
    if (o->capacity_bytes > s->capacity)
        s->capacity = o->capacity_bytes;
    if (o->value < s->min || o->value > s->max || (o->value - s->min) % s->step)
        return;
    search_push(s, o, 1);
}
