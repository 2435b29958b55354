/* SPDX-License-Identifier: MIT */
/*
 * timing: the linearity check shared by the renderer and editor tests.
 *
 * A quadratic loop hidden in a renderer or editor passes every functional
 * test and then takes hours on a hostile or just large input.  The check
 * times the same operation at size n and at 8n in one run (timings only
 * compare within one run and one machine) and gives the ratio: about 8
 * for linear work (a little more for n log n), 64 for quadratic.  Callers
 * assert it is below 24 (8 x 3, room for noise and caches).
 *
 * n starts at the caller's n0 and doubles until the n run takes at least
 * 20 ms of CPU time, so that the ratio is not dominated by noise on a fast
 * machine; each size runs twice and the faster run counts.  CPU time of
 * the process (not wall-clock) keeps a busy CI machine's other jobs out
 * of it.  Include after <cmocka.h>.
 */
#ifndef AB_TEST_TIMING_H
#define AB_TEST_TIMING_H

#include <stddef.h>
#include <time.h>

static inline double timing_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* run(n, ctx) builds an input of size n, and returns the CPU seconds that
 * the operation under test took on it (building the input not counted). */
typedef double (*timing_fn)(size_t n, void *ctx);

static inline double timing_best(timing_fn run, size_t n, void *ctx)
{
    double a = run(n, ctx), b = run(n, ctx);
    return a < b ? a : b;
}

/*
 * The ratio of the time at 8n to the time at n (n found as above, at most
 * n_max), with both times in *t1 and *t8 and n in *n_used; printed through
 * cmocka so that a test log shows what was measured.
 */
static inline double timing_ratio(const char *what, timing_fn run, void *ctx, size_t n0,
                                  size_t n_max, size_t *n_used, double *t1, double *t8)
{
    size_t n = n0;
    double a = timing_best(run, n, ctx);
    while (a < 0.020 && n * 2 <= n_max) {
        n *= 2;
        a = timing_best(run, n, ctx);
    }
    double b = timing_best(run, 8 * n, ctx);
    if (a < 1e-6)
        a = 1e-6;
    print_message("%s: n=%zu %.1f ms, 8n=%zu %.1f ms, ratio %.1f\n", what, n, a * 1e3, 8 * n,
                  b * 1e3, b / a);
    if (n_used)
        *n_used = n;
    if (t1)
        *t1 = a;
    if (t8)
        *t8 = b;
    return b / a;
}

/* The bound callers assert: 8 x 3. */
#define TIMING_MAX_RATIO 24.0

#endif
