/*
 * search: model jumps, ramp and bisection on a grid of micro-batch sizes
 * (see search.h).
 *
 * The state is the list of probes; every question (what fits, what next)
 * is answered from it afresh.  Lists are a few dozen entries, so the
 * linear scans cost nothing and there is no derived state to keep in step
 * (the model streak and last_how only steer the next proposal).
 */
#include "search.h"

#include <math.h>
#include <stdlib.h>

int search_init(struct search *s, long min, long max, long step)
{
    struct search zero = { 0 };
    *s = zero;
    s->capacity = -1;
    s->use_model = 1;
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

int search_model(const struct search *s, double *a, double *b)
{
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, xmin = INFINITY, xmax = -INFINITY;
    for (size_t i = 0; i < s->nprobes; i++) {
        const struct search_probe *p = &s->probes[i];
        if (p->need_bytes < 0)
            continue;
        double x = (double)p->value, y = p->need_bytes;
        n++, sx += x, sy += y, sxx += x * x, sxy += x * y;
        xmin = fmin(xmin, x);
        xmax = fmax(xmax, x);
    }
    double den = n * sxx - sx * sx;
    if (n < 2 || xmax <= xmin || den <= 0)
        return -1;
    *b = (n * sxy - sx * sy) / den;
    *a = (sy - *b * sx) / n;
    return *b > 0 ? 0 : -1; /* memory that shrinks with the batch is no model */
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

/* The model's proposal inside the open bracket (lo, hi), hi < 0 meaning
 * "above MAX"; 0 when the model has none. */
/* The memory figure of the latest run of value; -1 if none. */
static double search_need(const struct search *s, long value)
{
    double need = -1;
    for (size_t i = 0; i < s->nprobes; i++)
        if (s->probes[i].value == value && !s->probes[i].inferred && s->probes[i].need_bytes >= 0)
            need = s->probes[i].need_bytes;
    return need;
}

static int search_model_next(struct search *s, long lo, long hi, long *value)
{
    double a, b, pred;
    if (!s->use_model || s->capacity <= 0 || s->model_streak >= 2 || s->model_refuted)
        return 0;
    /* Inside a bracket whose two ends both carry memory figures, the line
     * through them: distant points (allocator rounding at small sizes, a
     * curve that bends) would bias a global fit.  Elsewhere the global
     * least-squares line. */
    double nlo = hi > 0 ? search_need(s, lo) : -1, nhi = hi > 0 ? search_need(s, hi) : -1;
    if (nlo >= 0 && nhi > nlo)
        pred = (double)lo + (s->capacity - nlo) / (nhi - nlo) * (double)(hi - lo);
    else if (!search_model(s, &a, &b))
        pred = (s->capacity - a) / b; /* largest size that fits, by the line */
    else
        return 0;
    if (!isfinite(pred))
        return 0;
    long top = hi < 0 ? s->max : hi - s->step;
    long low = lo + s->step;
    if (top < low)
        return 0;
    long v = search_snap(s, pred);
    s->model_clamped = v < low || v > top;
    if (v < low)
        v = low;
    if (v > top)
        v = top;
    /* Never a size already known here: the nearest unknown one. */
    long base = v;
    for (long d = 1; search_known(s, v); d++) {
        long up = base + s->step * d, down = base - s->step * d;
        if (up > top && down < low)
            return 0;
        if (up <= top && !search_known(s, up))
            v = up;
        else if (down >= low && !search_known(s, down))
            v = down;
    }
    *value = v;
    return 1;
}

int search_next(struct search *s, long *value)
{
    if (!s->nprobes) {
        s->last_how = SEARCH_START;
        *value = s->min;
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
    /* A clamped guess that was refuted only moved the bracket by one
     * size: do not repeat it, bisect once. */
    s->model_refuted = s->last_how == SEARCH_MODEL && s->model_clamped;
    if (search_model_next(s, lo, fail, value)) {
        s->model_streak++;
        s->last_how = SEARCH_MODEL;
        return 1;
    }
    s->model_streak = 0;
    if (fail < 0) {
        long v = search_snap(s, 2.0 * (double)lo);
        if (v <= lo)
            v = lo + s->step;
        *value = v > s->max ? s->max : v;
        s->last_how = SEARCH_RAMP;
        return 1;
    }
    long ilo = (lo - s->min) / s->step, ihi = (fail - s->min) / s->step;
    *value = s->min + (ilo + (ihi - ilo) / 2) * s->step;
    s->last_how = SEARCH_BISECT;
    return 1;
}

static void search_push(struct search *s, long value, int fit, int inferred, double need)
{
    if (s->nprobes == s->alloc) {
        size_t na = s->alloc ? 2 * s->alloc : 16;
        struct search_probe *p = realloc(s->probes, na * sizeof *p);
        if (!p)
            return; /* the probe is lost; search_next proposes it again */
        s->probes = p;
        s->alloc = na;
    }
    s->probes[s->nprobes++] = (struct search_probe){ value, fit, inferred, need };
}

void search_record(struct search *s, const struct search_obs *o)
{
    int last = 0;
    int before = search_tries(s, o->value, &last);
    long larger = search_last_fit(s, -1);
    if (o->capacity_bytes > s->capacity)
        s->capacity = o->capacity_bytes;
    search_push(s, o->value, o->fit, 0, o->need_bytes);
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
    struct search_obs o = { value, fit, -1, -1 };
    search_record(s, &o);
}

void search_infer(struct search *s, const struct search_obs *o)
{
    if (o->capacity_bytes > s->capacity)
        s->capacity = o->capacity_bytes;
    if (o->value < s->min || o->value > s->max || (o->value - s->min) % s->step)
        return;
    search_push(s, o->value, o->fit, 1, o->need_bytes);
}
