/*
 * search: ramp-then-bisect on a grid of micro-batch sizes (see search.h).
 *
 * The state is only the list of probes; every question (what fits, what
 * next) is answered from it afresh.  Lists are a few dozen entries, so
 * the linear scans cost nothing and there is no derived state to keep in
 * step.
 */
#include "search.h"

#include <stdlib.h>

int search_init(struct search *s, long min, long max, long step)
{
    struct search zero = { 0 };
    *s = zero;
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

/* How many times value was tried, and what the last try said. */
static int search_tries(const struct search *s, long value, int *last_fit)
{
    int n = 0;
    for (size_t i = 0; i < s->nprobes; i++) {
        if (s->probes[i].value == value) {
            n++;
            *last_fit = s->probes[i].fit;
        }
    }
    return n;
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

int search_next(const struct search *s, long *value)
{
    if (!s->nprobes) {
        *value = s->min;
        return 1;
    }
    long fail = search_first_fail(s);
    long fit_any = search_last_fit(s, -1);
    if (fail >= 0 && fit_any > fail) {
        /* A size failed below a larger fit: re-test it, once. */
        int last;
        if (search_tries(s, fail, &last) == 1) {
            *value = fail;
            return 1;
        }
    }
    long lo = search_last_fit(s, fail);
    if (lo < 0) {
        if (fail == s->min)
            return 0; /* the smallest size failed: nothing fits */
        *value = s->min; /* start (again) from the bottom of the ramp */
        return 1;
    }
    if (fail < 0) {
        if (lo == s->max)
            return 0; /* bounded by the range */
        long target = 2 * lo;
        long v = s->min + (target - s->min) / s->step * s->step;
        if (v <= lo)
            v = lo + s->step;
        *value = v > s->max ? s->max : v;
        return 1;
    }
    long ilo = (lo - s->min) / s->step, ihi = (fail - s->min) / s->step;
    if (ihi - ilo <= 1)
        return 0;
    *value = s->min + (ilo + (ihi - ilo) / 2) * s->step;
    return 1;
}

void search_record(struct search *s, long value, int fit)
{
    int last = 0;
    int before = search_tries(s, value, &last);
    long larger = search_last_fit(s, -1);
    if (s->nprobes == s->alloc) {
        size_t na = s->alloc ? 2 * s->alloc : 16;
        struct search_probe *p = realloc(s->probes, na * sizeof *p);
        if (!p)
            return; /* the probe is lost; search_next proposes it again */
        s->probes = p;
        s->alloc = na;
    }
    s->probes[s->nprobes].value = value;
    s->probes[s->nprobes].fit = fit;
    s->nprobes++;
    if (before == 1 && !last && larger > value) {
        /* This was the re-test of a contradiction: remember it. */
        struct search_contradiction *c =
            realloc(s->contra, (s->ncontra + 1) * sizeof *c);
        if (c) {
            s->contra = c;
            s->contra[s->ncontra].value = value;
            s->contra[s->ncontra].larger_fit = larger;
            s->contra[s->ncontra].retest_fit = fit;
            s->ncontra++;
        }
    }
}
