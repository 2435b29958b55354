/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/replay.c: reading the probe's trace files, the
 * per-allocation fit (linear; quadratic where a third size refutes the
 * line), every reason the model declines, the CPU need (bytes outside
 * the step + peak live bytes) and the GPU need through casim, and the
 * prediction's search over the grid, and every rank of a job of several
 * processes modelled, the largest need deciding (replay_fit_ranks, the
 * guide's results and autobatch predict's engine).  Traces are written here by hand,
 * in the format sitecustomize.py's _Recorder writes; expected figures are
 * worked out in the comments.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sys/stat.h>

#include "replay.h"
#include "search/guide.h"
#include "search/predict.h"
#include "search/space.h"

static char dir[] = "/tmp/ab-replay-XXXXXX";

/* A trace file with the header, then step 1 and step 2 (each the same
 * event text unless step2 is given), then `end N`. */
static const char *trace_file(const char *name, long vm_peak_kb, const char *step1,
                              const char *step2, const char *extra_header)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "autobatch-trace 1\npid 1\nrank 0\nworld 1\ntorch 2.8.0\nvm_peak_kb %ld\n"
               "vm_size_kb 1\ncuda_reserved -1\ncuda_allocated -1\ncuda_outside -1\n%s",
            vm_peak_kb, extra_header ? extra_header : "");
    const char *steps[2] = { step1, step2 ? step2 : step1 };
    long n = 0;
    for (int k = 0; k < 2; k++) {
        fprintf(f, "step %d\n%s", k + 1, steps[k]);
        for (const char *p = steps[k]; *p; p++)
            n += *p == '\n';
    }
    fprintf(f, "end %ld\n", n);
    fclose(f);
    return path;
}

/* One step at micro-batch b: weights 1000 (constant, freed at the end of
 * the step as if made before it), activations 100*b and 50*b, a
 * temporary of 10*b freed at once, then the activations freed. */
static char *step_at(long b)
{
    static char buf[4][512];
    static int k;
    char *s = buf[k++ % 4];
    snprintf(s, 512,
             "a c 1000 1\n"
             "a c %ld 2\n"
             "a c %ld 3\n"
             "a c %ld 4\n"
             "f c %ld 4\n"
             "f c %ld 3\n"
             "f c %ld 2\n"
             "f c 1000 1\n"
             "f c 7 9\n",
             100 * b, 50 * b, 10 * b, 10 * b, 50 * b, 100 * b);
    return s;
}

static void load(const char *path, struct replay_trace *t)
{
    char err[512];
    if (replay_trace_load(path, t, err, sizeof err))
        fail_msg("%s", err);
}

static void test_load_and_refuse(void **state)
{
    (void)state;
    struct replay_trace t;
    char err[512];
    load(trace_file("ok.txt", 2000, step_at(2), NULL, NULL), &t);
    assert_int_equal(t.device, 'c');
    assert_int_equal(t.nev[0], 9);
    assert_int_equal(t.ev[1][1], 200);
    assert_int_equal(t.ev[1][4], -20);
    assert_int_equal(t.vm_peak, 2000 * 1024);
    replay_trace_release(&t);

    /* GPU events win over CPU ones. */
    load(trace_file("gpu.txt", 1, "a c 5 1\na g 512 2\nf g 512 2\n", NULL, NULL), &t);
    assert_int_equal(t.device, 'g');
    assert_int_equal(t.nev[1], 2);
    replay_trace_release(&t);

    /* Cut short: no end line, or a count that disagrees. */
    const char *p = trace_file("cut.txt", 1, step_at(2), NULL, NULL);
    FILE *f = fopen(p, "r+");
    assert_non_null(f);
    char all[4096];
    size_t n = fread(all, 1, sizeof all - 1, f);
    all[n] = '\0';
    fclose(f);
    *strstr(all, "end ") = '\0';
    f = fopen(p, "w");
    fputs(all, f);
    fclose(f);
    assert_int_equal(replay_trace_load(p, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "cut short"));
    f = fopen(p, "a");
    fputs("end 3\n", f);
    fclose(f);
    assert_int_equal(replay_trace_load(p, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "cut short"));

    /* Not a trace; a garbage line; no such file. */
    snprintf(all, sizeof all, "%s/not.txt", dir);
    f = fopen(all, "w");
    fputs("hello\n", f);
    fclose(f);
    assert_int_equal(replay_trace_load(all, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an autobatch trace"));
    p = trace_file("junk.txt", 1, "a c 5 1\nx y z\n", NULL, NULL);
    assert_int_equal(replay_trace_load(p, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an event"));
    /* Over the probe's cap: not trusted.  Unknown header lines are kept
     * for people; after the first step they are errors. */
    p = trace_file("trunc.txt", 1, "", NULL, "truncated 2000001\n");
    assert_int_equal(replay_trace_load(p, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "not trusted"));
    load(trace_file("timing.txt", 1, "a c 1 1\n", NULL, "record_step_s 0.1 0.1 0.1\nwrite_s 0.2\n"),
         &t);
    replay_trace_release(&t);
    assert_int_equal(replay_trace_load("/nonexistent/trace", &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot read"));
    assert_null(t.ev[0]);
}

static void fit2(long b0, long b1, struct replay_trace *t, struct replay_model *m)
{
    char name[32], why[512];
    snprintf(name, sizeof name, "t%ld.txt", b0);
    load(trace_file(name, 1, step_at(b0), NULL, NULL), &t[0]);
    snprintf(name, sizeof name, "t%ld.txt", b1);
    load(trace_file(name, 1, step_at(b1), NULL, NULL), &t[1]);
    long batch[2] = { b0, b1 };
    if (replay_fit(t, batch, 2, m, why, sizeof why))
        fail_msg("declined: %s", why);
}

static void test_linear_cpu(void **state)
{
    (void)state;
    struct replay_trace t[2];
    struct replay_model m;
    fit2(2, 3, t, &m);
    assert_int_equal(m.n, 9);
    /* 1000, its free and the 7-byte free are constant; six grow with b. */
    assert_int_equal(m.nconst, 3);
    assert_int_equal(m.nlinear, 6);
    assert_int_equal(m.nquad, 0);
    /* Peak live at b: 1000 + 100b + 50b + 10b = 1000 + 160b (the free of
     * the 7 bytes made before the step comes last); outside is VmSize at
     * the recording's start (1 KiB here), the floor VmPeak before it. */
    int64_t outside = 1024;
    assert_int_equal(m.outside, outside);
    assert_int_equal(m.floor, 1024);
    int fits;
    assert_int_equal(replay_need(&m, 10, INT64_MAX, &fits), outside + 1000 + 1600);
    assert_int_equal(fits, 1);
    assert_int_equal(replay_need(&m, 10, outside + 2599, &fits), outside + 2600);
    assert_int_equal(fits, 0);
    /* The largest b with 1000 + 160b <= cap - outside: cap = outside +
     * 1000 + 160*37 + 159 -> 37; on a grid 1, 5, 9, ... -> 37 too; on
     * 2, 8, 14, ... -> 32. */
    int64_t need;
    int64_t cap = outside + 1000 + 160 * 37 + 159;
    assert_int_equal(replay_predict(&m, 1, 1024, 1, cap, &need), 37);
    assert_int_equal(need, outside + 1000 + 160 * 37);
    assert_int_equal(replay_predict(&m, 1, 1024, 4, cap, &need), 37);
    assert_int_equal(replay_predict(&m, 2, 1024, 6, cap, &need), 32);
    /* The top of the range fits; the bottom does not. */
    assert_int_equal(replay_predict(&m, 1, 20, 1, cap, &need), 20);
    assert_int_equal(replay_predict(&m, 40, 100, 1, cap, &need), 39);
    assert_int_equal(need, outside + 1000 + 160 * 40);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* A B x B matrix: a line through 2 and 3 misses 4; the quadratic through
 * the three is exact. */
static void test_quadratic(void **state)
{
    (void)state;
    struct replay_trace t[3];
    char s[3][128], why[512];
    long batch[3] = { 2, 3, 4 };
    for (int k = 0; k < 3; k++) {
        long b = batch[k];
        snprintf(s[k], sizeof s[k], "a c %ld 1\na c %ld 2\nf c %ld 2\nf c %ld 1\n", 8 * b * b,
                 64 * b + 4, 64 * b + 4, 8 * b * b);
        char name[32];
        snprintf(name, sizeof name, "q%ld.txt", b);
        load(trace_file(name, 1, s[k], NULL, NULL), &t[k]);
    }
    struct replay_model m;
    assert_int_equal(replay_fit(t, batch, 3, &m, why, sizeof why), 0);
    assert_int_equal(m.quadratic, 1);
    assert_int_equal(m.nquad, 2);
    assert_int_equal(m.nlinear, 2);
    /* Peak at b = 10: 800 + 644. */
    int fits;
    assert_int_equal(replay_need(&m, 10, INT64_MAX, &fits) - m.outside, 800 + 644);
    replay_model_release(&m);
    /* With only the first two, the line says 8*(5b-6) at 10: 352. */
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), 0);
    assert_int_equal(m.quadratic, 0);
    assert_int_equal(replay_need(&m, 10, INT64_MAX, &fits) - m.outside, 352 + 644);
    replay_model_release(&m);
    for (int k = 0; k < 3; k++)
        replay_trace_release(&t[k]);
}

static void expect_decline(const char *s0a, const char *s0b, const char *s1, const char *want)
{
    struct replay_trace t[2];
    struct replay_model m;
    char why[512];
    load(trace_file("d0.txt", 1000, s0a, s0b, NULL), &t[0]);
    load(trace_file("d1.txt", 1000, s1, NULL, NULL), &t[1]);
    long batch[2] = { 2, 3 };
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), -1);
    if (!strstr(why, want))
        fail_msg("declined with '%s', wanted '%s'", why, want);
    assert_null(m.a);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

static void test_declines(void **state)
{
    (void)state;
    /* Two steps of one trial differ in more than 8 events: data-dependent
     * shapes (every size of the second step is another). */
    char s1[512] = "", s2[512] = "", s3[512] = "";
    for (int i = 0; i < 6; i++) {
        char e[64];
        snprintf(e, sizeof e, "a c %d 1\nf c %d 1\n", 200 + i, 200 + i);
        strcat(s1, e);
        snprintf(e, sizeof e, "a c %d 1\nf c %d 1\n", 230 + i, 230 + i);
        strcat(s2, e);
        snprintf(e, sizeof e, "a c %d 1\nf c %d 1\n", 300 + i, 300 + i);
        strcat(s3, e);
    }
    expect_decline(s1, s2, s3, "shapes depend on the data");
    /* The trials' steps differ in more than 8 events: one has ten
     * allocations the other lacks. */
    char extra[1024];
    snprintf(extra, sizeof extra, "%s", s3);
    for (int i = 0; i < 10; i++)
        strcat(extra, "a c 5 2\n");
    expect_decline(s1, NULL, extra, "do not align");
    /* A few extra events in one trial are left out, not a reason to decline. */
    struct replay_trace tt[2];
    struct replay_model mm;
    char why2[512];
    load(trace_file("x0.txt", 1000, s1, NULL, NULL), &tt[0]);
    snprintf(extra, sizeof extra, "a c 5 2\n%sf c 5 2\n", s3);
    load(trace_file("x1.txt", 1000, extra, NULL, NULL), &tt[1]);
    long bb[2] = { 2, 3 };
    assert_int_equal(replay_fit(tt, bb, 2, &mm, why2, sizeof why2), 0);
    assert_int_equal(mm.n, 12);
    assert_int_equal(mm.unsteady, 0);
    replay_model_release(&mm);
    replay_trace_release(&tt[0]);
    replay_trace_release(&tt[1]);
    /* Nothing allocated. */
    expect_decline("", NULL, "", "allocated nothing");
    /* Sizes out of order. */
    struct replay_trace t[2];
    struct replay_model m;
    char why[512];
    load(trace_file("o.txt", 1000, "a c 1 1\n", NULL, NULL), &t[0]);
    load(trace_file("o2.txt", 1000, "a c 1 1\n", NULL, NULL), &t[1]);
    long batch[2] = { 3, 2 };
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "out of order"));
    /* The peak before the steps is a floor: with VmPeak 100 KiB before
     * recording, a small size needs that much. */
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
    load(trace_file("f2.txt", 100, "a c 10 1\nf c 10 1\n", NULL, NULL), &t[0]);
    load(trace_file("f3.txt", 1, "a c 15 1\nf c 15 1\n", NULL, NULL), &t[1]);
    batch[0] = 2;
    batch[1] = 3;
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), 0);
    int fits;
    assert_int_equal(replay_need(&m, 4, INT64_MAX, &fits), 100 * 1024);
    assert_int_equal(replay_need(&m, 40000, INT64_MAX, &fits), 1024 + 5 * 40000);
    replay_model_release(&m);
    batch[0] = 3;
    batch[1] = 2;
    /* A CPU trace without VmPeak gives no outside figure. */
    replay_trace_release(&t[0]);
    load(trace_file("novm.txt", -1, "a c 1 1\n", NULL, NULL), &t[0]);
    batch[0] = 1;
    batch[1] = 2;
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "VmPeak"));
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* A few events in one recorded step and not the other (a logging call's
 * small tensors) are left out; the rest is fitted as usual. */
static void test_unsteady_few(void **state)
{
    (void)state;
    struct replay_trace t[2];
    struct replay_model m;
    char why[512], extra[600];
    snprintf(extra, sizeof extra, "%sa c 16 7\nf c 16 7\n", step_at(2));
    load(trace_file("u2.txt", 1, step_at(2), extra, NULL), &t[0]);
    snprintf(extra, sizeof extra, "a c 8 7\n%sf c 8 7\n", step_at(3));
    load(trace_file("u3.txt", 1, extra, step_at(3), NULL), &t[1]);
    long batch[2] = { 2, 3 };
    if (replay_fit(t, batch, 2, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.n, 9);
    assert_int_equal(m.unsteady, 2);
    int fits;
    assert_int_equal(replay_need(&m, 10, INT64_MAX, &fits) - m.outside, 1000 + 1600);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* A size that shrinks with b stops at 0: a shrinking tensor (or a pair
 * the alignment matched loosely) never makes a larger batch need less
 * than nothing, nor stops the prediction. */
static void test_negative_size(void **state)
{
    (void)state;
    struct replay_trace t[2];
    struct replay_model m;
    char why[512];
    load(trace_file("n2.txt", 1, "a c 100 1\na c 20 2\n", NULL, NULL), &t[0]);
    load(trace_file("n3.txt", 1, "a c 90 1\na c 30 2\n", NULL, NULL), &t[1]);
    long batch[2] = { 2, 3 };
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), 0);
    int fits;
    assert_int_equal(replay_need(&m, 12, INT64_MAX, &fits) - m.outside, 120);
    assert_int_equal(replay_need(&m, 13, INT64_MAX, &fits) - m.outside, 130);
    assert_int_equal(fits, 1);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* On the GPU the need is the caching allocator's peak reserved plus what
 * lies outside it: a 3 MiB*b block gets a 20 MiB segment while it is
 * under 10 MiB, then its size rounded up to 2 MiB. */
static void test_gpu(void **state)
{
    (void)state;
    struct replay_trace t[2];
    char s[2][128], why[512];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        snprintf(s[k], sizeof s[k], "a g %ld 1\nf g %ld 1\n", 3L * 1048576 * batch[k],
                 3L * 1048576 * batch[k]);
        char name[32];
        snprintf(name, sizeof name, "g%ld.txt", batch[k]);
        load(trace_file(name, 1, s[k], NULL, "cuda_outside 500000000\n"), &t[k]);
    }
    struct replay_model m;
    assert_int_equal(replay_fit(t, batch, 2, &m, why, sizeof why), 0);
    assert_int_equal(m.device, 'g');
    assert_int_equal(m.outside, 500000000);
    int fits;
    const int64_t MiB = 1048576;
    assert_int_equal(replay_need(&m, 3, INT64_MAX / 2, &fits), 500000000 + 20 * MiB);
    assert_int_equal(replay_need(&m, 4, INT64_MAX / 2, &fits), 500000000 + 12 * MiB);
    assert_int_equal(replay_need(&m, 5, INT64_MAX / 2, &fits), 500000000 + 16 * MiB);
    /* Capacity 500000000 + 100 MiB: 3b MiB rounded up to 2 MiB <= 100 MiB
     * -> b = 33 (99 -> 100 MiB); 34 needs 102. */
    int64_t need;
    assert_int_equal(replay_predict(&m, 1, 1024, 1, 500000000 + 100 * MiB, &need), 33);
    assert_int_equal(need, 500000000 + 100 * MiB);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* ------------------------------------------------ GPU: the model's memory */

static const int64_t MB = 1048576;

/* A GPU trace: the header's CUDA figures (cuda_* lines given in full by
 * `head`), steps s1 and s2. */
static void gpu_trace(const char *name, const char *head, const char *s1, const char *s2,
                      struct replay_trace *t)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "autobatch-trace 1\npid 1\nrank 0\nworld 1\ntorch 2.8.0\nvm_peak_kb 1\n"
               "vm_size_kb 1\n%s", head);
    long n = 0;
    const char *st[2] = { s1, s2 };
    for (int k = 0; k < 2; k++) {
        fprintf(f, "step %d\n%s", k + 1, st[k]);
        for (const char *p = st[k]; *p; p++)
            n += *p == '\n';
    }
    fprintf(f, "end %ld\n", n);
    fclose(f);
    load(path, t);
}

/* A segment's size for a rounded request of v bytes (PyTorch's rules). */
static int64_t seg_for(int64_t v)
{
    if (v <= MB)
        return 2 * MB;
    if (v < 10 * MB)
        return 20 * MB;
    return (v + 2 * MB - 1) / (2 * MB) * (2 * MB);
}

/* The largest b in 1..max with need(b) <= cap, by counting (the
 * independent calculation the model's binary search is held to). */
static long largest(int64_t (*need)(long, const void *), const void *arg, int64_t cap, long max)
{
    long best = 0;
    for (long b = 1; b <= max; b++)
        if (need(b, arg) <= cap)
            best = b;
    return best;
}

static int64_t need_persistent(long b, const void *arg)
{
    (void)arg;
    /* 10 GiB in one segment of its own, then the step's 3b MiB. */
    return 500000000 + 10240 * MB + seg_for(3 * MB * b);
}

/* The case: 10 GiB of weights and optimizer state live across
 * the steps (the header's allocated bytes), a 3 MiB-a-sample step.  The
 * old replay counted only the step: 3936 in 12 GiB; the card holds 523. */
static void test_gpu_persistent(void **state)
{
    (void)state;
    struct replay_trace t[2];
    char step[2][128], head[256], why[512];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        snprintf(step[k], sizeof step[k], "a g %ld 1\nf g %ld 1\n", 3 * MB * batch[k],
                 3 * MB * batch[k]);
        snprintf(head, sizeof head, "cuda_reserved %ld\ncuda_allocated %ld\n"
                 "cuda_outside 500000000\n", 10260 * MB, 10240 * MB);
        gpu_trace(k ? "p3.txt" : "p2.txt", head, step[k], step[k], &t[k]);
    }
    struct replay_model m;
    if (replay_fit(t, batch, 2, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.persistent, 10240 * MB);
    int64_t cap = 12288 * MB, need;
    long want = largest(need_persistent, NULL, cap, 8192);
    assert_int_equal(want, 523);
    assert_int_equal(replay_predict(&m, 1, 8192, 1, cap, &need), want);
    assert_int_equal(need, need_persistent(want, NULL));
    /* On a grid of 8: within one step. */
    long p8 = replay_predict(&m, 1, 8192, 8, cap, &need);
    assert_true(p8 <= want && p8 > want - 8);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

static int64_t need_update(long b, const void *arg)
{
    (void)arg;
    /* 1 GiB kept, the weights' old and new copies (100 MiB each, in
     * segments of their own), the activation. */
    return 500000000 + 1024 * MB + 200 * MB + seg_for(3 * MB * b);
}

/* Frees pair with their allocations by address: the optimizer makes the
 * weights' new copy before it frees the old one, which the step before
 * made.  Paired by size (the newest block of that size), the free would
 * take the new copy and the step would need one copy less. */
static void test_gpu_address_pairs(void **state)
{
    (void)state;
    struct replay_trace t[2];
    char s1[256], s2[256], head[256], why[512];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        int64_t a = 3 * MB * batch[k];
        /* step 1 frees the copy at 7 (made before the recording) and
         * makes one at 8; step 2 frees that one and makes one at 7 */
        snprintf(s1, sizeof s1, "a g %ld 1\na g %ld 8\nf g %ld 7\nf g %ld 1\n", a, 100 * MB,
                 100 * MB, a);
        snprintf(s2, sizeof s2, "a g %ld 1\na g %ld 7\nf g %ld 8\nf g %ld 1\n", a, 100 * MB,
                 100 * MB, a);
        snprintf(head, sizeof head, "cuda_reserved %ld\ncuda_allocated %ld\n"
                 "cuda_outside 500000000\n", 1124 * MB, 1124 * MB);
        gpu_trace(k ? "u3.txt" : "u2.txt", head, s1, s2, &t[k]);
    }
    struct replay_model m;
    if (replay_fit(t, batch, 2, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    /* 1124 MiB allocated at the start, less the copy step 1 frees. */
    assert_int_equal(m.persistent, 1024 * MB);
    assert_non_null(m.pair);
    assert_int_equal(m.pair[2], m.n + 1); /* the free of the step before's copy */
    assert_int_equal(m.pair[3], 0);
    int fits;
    for (long b = 4; b < 400; b += 37)
        assert_int_equal(replay_need(&m, b, INT64_MAX / 2, &fits), need_update(b, NULL));
    int64_t cap = 2000 * MB, need;
    long want = largest(need_update, NULL, cap, 4096);
    assert_int_equal(replay_predict(&m, 1, 4096, 1, cap, &need), want);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

static int64_t need_layout(long b, const void *arg)
{
    (void)arg;
    /* The 40 MiB segment with 8 MiB of weights holds a request of up to
     * 32 MiB in its free part; a larger one gets a segment of its own. */
    int64_t a = 3 * MB * b;
    return 500000000 + 40 * MB + (a <= 32 * MB ? 0 : seg_for(a));
}

/* With the layout at the recording's start (a memory-history snapshot),
 * the persistent segments are seeded as they were: their free parts
 * serve the step; a segment that held only the step's blocks is left
 * out (the cache of another size). */
static void test_gpu_layout(void **state)
{
    (void)state;
    struct replay_trace t[2];
    char head[512], why[512];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        int64_t a = 3 * MB * batch[k];
        snprintf(head, sizeof head,
                 "cuda_reserved %ld\ncuda_allocated %ld\ncuda_outside 500000000\n"
                 "segment %ld %ld l\nblock %ld %ld a\nblock %ld %ld f\n"
                 "segment %ld %ld l\nblock %ld %ld a\nblock %ld %ld f\n",
                 60 * MB, 8 * MB + a,
                 100 * MB, 40 * MB, 100 * MB, 8 * MB, 108 * MB, 32 * MB,
                 1000 * MB, 20 * MB, 1000 * MB, a, 1000 * MB + a, 20 * MB - a);
        /* Each step frees the block the step before made at 1000 MiB and
         * makes it again there: the segment at 1000 MiB held only that. */
        char s1[128];
        snprintf(s1, sizeof s1, "f g %ld %ld\na g %ld %ld\n", a, 1000 * MB, a, 1000 * MB);
        gpu_trace(k ? "l3.txt" : "l2.txt", head, s1, s1, &t[k]);
    }
    struct replay_model m;
    if (replay_fit(t, batch, 2, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.nseg, 1);
    assert_int_equal(m.seg[0].size, 40 * MB);
    int fits;
    for (long b = 1; b < 100; b += 3)
        assert_int_equal(replay_need(&m, b, INT64_MAX / 2, &fits), need_layout(b, NULL));
    int64_t cap = 500000000 + 140 * MB, need;
    long want = largest(need_layout, NULL, cap, 1024);
    assert_int_equal(replay_predict(&m, 1, 1024, 1, cap, &need), want);
    assert_int_equal(want, 33);
    replay_model_release(&m);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
}

/* Two traces of the 3 MiB-a-sample step over `kept` MiB of the model's
 * own memory, with extra header lines (the same at both sizes, or
 * extra_b3 for the second), fitted into *m: 0, or -1 with why. */
static int fit_kept(long kept, const char *extra, const char *extra_b3, struct replay_model *m,
                    char *why, size_t whylen)
{
    struct replay_trace t[2];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        char step[128], head[1024];
        snprintf(step, sizeof step, "a g %ld 1\nf g %ld 1\n", 3 * MB * batch[k],
                 3 * MB * batch[k]);
        snprintf(head, sizeof head, "cuda_reserved %ld\ncuda_allocated %ld\n"
                 "cuda_outside 500000000\n%s", (kept + 20) * MB, kept * MB,
                 k && extra_b3 ? extra_b3 : extra);
        gpu_trace(k ? "k3.txt" : "k2.txt", head, step, step, &t[k]);
    }
    int rc = replay_fit(t, batch, 2, m, why, whylen);
    replay_trace_release(&t[0]);
    replay_trace_release(&t[1]);
    return rc;
}

static int64_t need_expandable(long b, const void *arg)
{
    (void)arg;
    /* One growing segment: the 1000 MiB kept (50 pages of 20 MiB), then
     * the step's 3b MiB in whole pages of 20 MiB. */
    int64_t a = 3 * MB * b;
    return 500000000 + 1000 * MB + (a + 20 * MB - 1) / (20 * MB) * (20 * MB);
}

static int64_t need_default_1000(long b, const void *arg)
{
    (void)arg;
    return 500000000 + 1000 * MB + seg_for(3 * MB * b);
}

/* expandable_segments:True maps 20 MiB pages instead of reserving
 * segments rounded to 2 MiB: under the same card, another boundary. */
static void test_gpu_expandable(void **state)
{
    (void)state;
    struct replay_model m;
    char why[512];
    if (fit_kept(1000, "alloc_conf expandable_segments:True\nbackend native\n", NULL, &m, why,
                 sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.cfg.expandable, 1);
    int fits;
    for (long b = 1; b < 300; b += 7)
        assert_int_equal(replay_need(&m, b, INT64_MAX / 2, &fits), need_expandable(b, NULL));
    int64_t cap = 500000000 + 1590 * MB, need;
    long want = largest(need_expandable, NULL, cap, 4096);
    assert_int_equal(want, 193);
    assert_int_equal(replay_predict(&m, 1, 4096, 1, cap, &need), want);
    replay_model_release(&m);
    /* The default allocator fits more there: 196. */
    if (fit_kept(1000, "", NULL, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    want = largest(need_default_1000, NULL, cap, 4096);
    assert_int_equal(want, 196);
    assert_int_equal(replay_predict(&m, 1, 4096, 1, cap, &need), want);
    replay_model_release(&m);
}

/* The self-check: replayed at its recorded size, the model must hold
 * what the trainer's allocator held after the recorded steps, within one
 * segment; else the replay declines with the difference. */
static void test_gpu_self_check(void **state)
{
    (void)state;
    struct replay_model m;
    char why[512], e2[128], e3[128];
    /* 1000 MiB + a 20 MiB segment for 6 and 9 MiB: reproduced. */
    snprintf(e2, sizeof e2, "cuda_reserved_end %ld\n", 1020 * MB);
    snprintf(e3, sizeof e3, "cuda_reserved_end %ld\n", 1030 * MB);
    if (fit_kept(1000, e2, e3, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    replay_model_release(&m);
    /* The trainer held 200 MiB more at micro-batch 3 (say, an allocation
     * the recording missed): declines, saying by how much. */
    snprintf(e3, sizeof e3, "cuda_reserved_end %ld\n", 1220 * MB);
    assert_int_equal(fit_kept(1000, e2, e3, &m, why, sizeof why), -1);
    if (!strstr(why, "does not reproduce") || !strstr(why, "-200.0 MiB"))
        fail_msg("%s", why);
    assert_null(m.a);
}

/*
 * A code path that switches on with the size (PyTorch's reductions take a
 * global buffer once the rows are many: the H200 GPT-with-checkpointing
 * traces make 192 more events at micro-batch 4 than at 2 and 3, a
 * transient buffer and 24-96 bytes of semaphores per bias gradient).
 * Here 40 layers each make an activation and a temporary of 10b MiB; at
 * b >= `on` the step ends with `nsw` 500 MiB workspaces and 24-byte ones,
 * each freed at once (or, `leak`, the workspaces freed in the next step).
 * The model keeps them from the largest size on.
 */
static char *switched_step(long b, long on, int nsw, int leak, int step)
{
    static char buf[16384];
    size_t at = 0;
    int64_t S = 10 * MB * b;
    if (leak && step == 2 && b >= on)
        for (int l = 0; l < nsw; l++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "f g %ld %d\n", 500 * MB, 3000 + l);
    for (int l = 0; l < 40; l++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "a g %ld %d\na g %ld %d\nf g %ld %d\n",
                               (long)S, 1000 + l, (long)S, 2000 + l, (long)S, 2000 + l);
    for (int l = 0; l < 40; l++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "f g %ld %d\n", (long)S, 1000 + l);
    for (int l = 0; b >= on && l < nsw; l++) {
        at += (size_t)snprintf(buf + at, sizeof buf - at, "a g %ld %d\na g 24 %d\nf g 24 %d\n",
                               500 * MB, 3000 + l, 4000 + l, 4000 + l);
        if (!leak)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "f g %ld %d\n", 500 * MB, 3000 + l);
    }
    return buf;
}

static int fit_switched(const long *batch, size_t n, long on, int nsw, int leak,
                        struct replay_model *m, char *why, size_t whylen)
{
    struct replay_trace t[3];
    for (size_t k = 0; k < n; k++) {
        char name[32], s1[16384];
        snprintf(name, sizeof name, "sw%ld.txt", batch[k]);
        snprintf(s1, sizeof s1, "%s", switched_step(batch[k], on, nsw, leak, 1));
        gpu_trace(name, "cuda_reserved 1048576000\ncuda_allocated 1048576000\n"
                  "cuda_outside 500000000\n", s1, switched_step(batch[k], on, nsw, leak, 2), &t[k]);
    }
    int rc = replay_fit(t, batch, n, m, why, whylen);
    for (size_t k = 0; k < n; k++)
        replay_trace_release(&t[k]);
    return rc;
}

static int64_t need_switched(long b, const void *arg)
{
    long on = *(const long *)arg;
    /* 1000 MiB kept; 41 blocks of 10b MiB (each layer's activation, the
     * temporary taken by the next layer's, one more for the last); from
     * `on`, one 500 MiB workspace (the step's blocks, cached, are
     * segments of 10b < 500 MiB: b < 50; the workspace's, cached, is not
     * split by them, for 41 of theirs are free whenever they ask) and a
     * 2 MiB small segment for the 24 bytes. */
    return 500000000 + 1000 * MB + 41 * 10 * MB * b + (b >= on ? 502 * MB : 0);
}

static void test_gpu_switched(void **state)
{
    (void)state;
    struct replay_model m;
    char why[512];
    int fits;
    /* Three sizes, the path on at the third: 16 of 176 events. */
    long b3[3] = { 2, 3, 4 }, on = 4;
    if (fit_switched(b3, 3, on, 4, 0, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.nswitched, 16);
    assert_int_equal(m.n, 160 + 16);
    for (long b = 1; b < 80; b++)
    for (long b = 1; b < 50; b++)
        assert_int_equal(replay_need(&m, b, INT64_MAX / 2, &fits), need_switched(b, &on));
    /* (Under a capacity the allocator's free-and-retry gives the cached
     * workspace back for the step's blocks: no closed form; the peaks
     * above are what the search compares.) */
    replay_model_release(&m);
    /* Two sizes, on at the second. */
    long b2[2] = { 2, 4 };
    if (fit_switched(b2, 2, on, 4, 0, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.nswitched, 16);
    for (long b = 1; b < 50; b += 3)
        assert_int_equal(replay_need(&m, b, INT64_MAX / 2, &fits), need_switched(b, &on));
    replay_model_release(&m);
    /* On at the second of three: its extra events are left out as
     * unsteady, the third's are the model's, from 4 (one size late). */
    on = 3;
    if (fit_switched(b3, 3, on, 4, 0, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.nswitched, 16);
    assert_int_equal(replay_need(&m, 3, INT64_MAX / 2, &fits), need_switched(3, &(long){ 4 }));
    assert_int_equal(replay_need(&m, 40, INT64_MAX / 2, &fits), need_switched(40, &on));
    replay_model_release(&m);
    /* Blocks that outlive the step (freed by the next) are not a
     * workspace: the traces do not align. */
    if (!fit_switched(b3, 3, 4, 4, 1, &m, why, sizeof why))
        fail_msg("a workspace that outlives its step was taken");
    assert_non_null(strstr(why, "do not align"));
    /* More than 1/8 of the step: do not align. */
    if (!fit_switched(b3, 3, 4, 20, 0, &m, why, sizeof why))
        fail_msg("80 switched-on events of 240 were taken");
    assert_non_null(strstr(why, "do not align"));
}

/* One view of the card (issue 25, item 4): NVML's total is not what
 * CUDA can give; a CUDA model recorded with cuMemGetInfo's total
 * predicts for the smaller.  The H200's figures: NVML 143771 MiB, CUDA
 * 143155 MiB; 1000 MiB kept, 3 MiB a sample, 500000000 bytes outside. */
static void test_gpu_capacity_view(void **state)
{
    (void)state;
    struct replay_model m;
    char why[512], head[128];
    int64_t nvml = 143771 * MB, cuda = 143155 * MB, need;
    snprintf(head, sizeof head, "cuda_total %ld\ncuda_free %ld\n", (long)cuda,
             (long)(cuda - 2000 * MB));
    if (fit_kept(1000, head, NULL, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.cuda_total, cuda);
    int64_t cap = replay_capacity(&m, nvml);
    assert_int_equal(cap, cuda);
    assert_int_equal(replay_capacity(&m, 16384 * MB), 16384 * MB); /* an emulated card: smaller */
    long want = largest(need_default_1000, NULL, cuda, 1 << 17);
    assert_int_equal(replay_predict(&m, 1, 1 << 17, 1, cap, &need), want);
    /* (NVML's total would have said 616 MiB more: 205 samples.) */
    long over = largest(need_default_1000, NULL, nvml, 1 << 17);
    assert_int_equal(over - want, 205);
    replay_model_release(&m);
    /* A trace without cuda_total (an older probe), or a CPU model: unchanged. */
    if (fit_kept(1000, "", NULL, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(replay_capacity(&m, nvml), nvml);
    replay_model_release(&m);
}

/* What casim does not model declines, with the reason. */
static void test_gpu_not_modelled(void **state)
{
    (void)state;
    struct replay_model m;
    char why[512];
    assert_int_equal(fit_kept(100, "backend cudaMallocAsync\n", NULL, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "cudaMallocAsync"));
    assert_int_equal(fit_kept(100, "alloc_conf backend:cudaMallocAsync\n", NULL, &m, why,
                              sizeof why), -1);
    assert_non_null(strstr(why, "cudaMallocAsync"));
    assert_int_equal(fit_kept(100, "streams 2\n", NULL, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "2 streams"));
    assert_int_equal(fit_kept(100, "graph_allocs 5\n", NULL, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "CUDA graphs"));
    assert_int_equal(fit_kept(100, "alloc_conf roundup_power2_divisions:[256:1,>:4]\n", NULL, &m,
                              why, sizeof why), -1);
    assert_non_null(strstr(why, "not modelled"));
    /* Modelled settings are read. */
    if (fit_kept(100, "alloc_conf max_split_size_mb:128,roundup_power2_divisions:4,"
                 "garbage_collection_threshold:0.6\n", NULL, &m, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(m.cfg.max_split, 128 * MB);
    assert_int_equal(m.cfg.roundup_divisions, 4);
    assert_true(m.cfg.gc_threshold > 0.59 && m.cfg.gc_threshold < 0.61);
    replay_model_release(&m);
}


/* ------------------------------------------------ every rank (item 5) */

/* Bytes rank 0 (3 MiB a sample) and rank 1 (arg: MiB a sample) need at
 * b over 1000 MiB kept: the independent calculation. */
static int64_t need_mib_per_sample(long b, const void *arg)
{
    long per = *(const long *)arg;
    return 500000000 + 1000 * MB + seg_for(per * MB * b);
}

/* Rank `rank` of `world`'s trace at micro-batch b: 1000 MiB of the
 * model's own memory, a step of `per` MiB a sample, written to
 * sub/name (sub made). */
static void rank_file(const char *sub, const char *name, long rank, long world, long b, long per)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "autobatch-trace 1\npid %ld\nrank %ld\nworld %ld\ntorch 2.8.0\nvm_peak_kb 1\n"
               "vm_size_kb 1\ncuda_reserved %ld\ncuda_allocated %ld\ncuda_outside 500000000\n",
            100 + rank, rank, world, (long)(1020 * MB), (long)(1000 * MB));
    for (int k = 0; k < 2; k++)
        fprintf(f, "step %d\na g %ld 1\nf g %ld 1\n", k + 1, per * MB * b, per * MB * b);
    fprintf(f, "end 4\n");
    fclose(f);
}

/* Two ranks' traces at sizes 2 and 3 (per[r] MiB a sample), fitted. */
static int fit_two_ranks(const long per[2], struct replay_ranks *rs, char *why, size_t whylen)
{
    struct replay_trace t[2][2];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2; r++) {
            char name[64], path[512];
            /* rank 1 first in the array: the order of a directory */
            snprintf(name, sizeof name, "r%d-b%ld.txt", 1 - r, batch[k]);
            rank_file("ranks", name, 1 - r, 2, batch[k], per[1 - r]);
            snprintf(path, sizeof path, "%s/ranks/%s", dir, name);
            load(path, &t[k][r]);
        }
    const struct replay_trace *tp[2] = { t[0], t[1] };
    size_t nt[2] = { 2, 2 };
    int rc = replay_fit_ranks(tp, nt, batch, 2, rs, why, whylen);
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2; r++)
            replay_trace_release(&t[k][r]);
    return rc;
}

/* Uneven shards: rank 1 gets 4 MiB a sample, rank 0 3 MiB.  Each rank is
 * modelled; rank 1's answer is the prediction, and it says so. */
static void test_ranks_uneven(void **state)
{
    (void)state;
    struct replay_ranks rs;
    char why[512];
    long per[2] = { 3, 4 };
    if (fit_two_ranks(per, &rs, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(rs.n, 2);
    assert_int_equal(rs.m[0].rank, 0);
    assert_int_equal(rs.m[1].rank, 1);
    int64_t cap = 500000000 + 1600 * MB, need;
    long want0 = largest(need_mib_per_sample, &per[0], cap, 4096);
    long want1 = largest(need_mib_per_sample, &per[1], cap, 4096);
    assert_int_equal(want0, 200);
    assert_int_equal(want1, 150);
    size_t d;
    long pred[2];
    int64_t rneed[2];
    assert_int_equal(replay_predict_ranks(&rs, 1, 4096, 1, cap, 0, &need, &d, pred, rneed), want1);
    assert_int_equal(d, 1);
    assert_int_equal(rs.m[d].rank, 1);
    assert_int_equal(need, need_mib_per_sample(want1, &per[1]));
    assert_int_equal(pred[0], want0);
    assert_int_equal(pred[1], want1);
    /* On a grid of 8 (1, 9, ...): within one step of rank 1's boundary. */
    long p8 = replay_predict_ranks(&rs, 1, 4096, 8, cap, 1, &need, &d, NULL, NULL);
    assert_true(p8 <= want1 && p8 > want1 - 8);
    assert_int_equal(rs.m[d].rank, 1);
    /* The need at one size: rank 1's, and whether every rank fits. */
    int fits;
    assert_int_equal(replay_need_ranks(&rs, 151, cap, 0, &fits, &d),
                     need_mib_per_sample(151, &per[1]));
    assert_false(fits);
    assert_int_equal(rs.m[d].rank, 1);
    replay_ranks_release(&rs);

    /* Equal ranks: the answer of one alone; the lowest rank named. */
    long same[2] = { 3, 3 };
    if (fit_two_ranks(same, &rs, why, sizeof why))
        fail_msg("declined: %s", why);
    assert_int_equal(replay_predict_ranks(&rs, 1, 4096, 1, cap, 0, &need, &d, pred, rneed),
                     want0);
    assert_int_equal(pred[0], pred[1]);
    assert_int_equal(rneed[0], rneed[1]);
    assert_int_equal(rs.m[d].rank, 0);
    replay_ranks_release(&rs);
}

/* A rank whose model declines declines the whole, with its reason; a
 * rank missing at one size, or twice at one, declines too. */
static void test_ranks_decline(void **state)
{
    (void)state;
    struct replay_trace t[2][2];
    struct replay_ranks rs;
    char why[512], path[512];
    long batch[2] = { 2, 3 };
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "d0-b%ld.txt", batch[k]);
        rank_file("decl", name, 0, 2, batch[k], 3);
        snprintf(path, sizeof path, "%s/decl/%s", dir, name);
        load(path, &t[k][0]);
    }
    /* Rank 1 allocates another way at size 3: its traces do not align. */
    rank_file("decl", "d1-b2.txt", 1, 2, 2, 3);
    snprintf(path, sizeof path, "%s/decl/d1-b2.txt", dir);
    load(path, &t[0][1]);
    gpu_trace("d1-b3.txt", "cuda_reserved 1069547520\ncuda_allocated 1048576000\n"
              "cuda_outside 500000000\n", "a g 5 1\na g 6 2\nf g 6 2\nf g 5 1\n",
              "a g 5 1\na g 6 2\nf g 6 2\nf g 5 1\n", &t[1][1]);
    t[1][1].rank = 1;
    t[1][1].world = 2;
    const struct replay_trace *tp[2] = { t[0], t[1] };
    size_t nt[2] = { 2, 2 };
    assert_int_equal(replay_fit_ranks(tp, nt, batch, 2, &rs, why, sizeof why), -1);
    assert_non_null(strstr(why, "rank 1: "));
    assert_null(rs.m);
    /* Rank 1 absent at size 3 (world 2). */
    nt[1] = 1;
    assert_int_equal(replay_fit_ranks(tp, nt, batch, 2, &rs, why, sizeof why), -1);
    assert_string_equal(why, "rank 1 of 2 wrote no trace at micro-batch 3");
    /* Rank 0 twice at size 3. */
    struct replay_trace dup[2] = { t[1][0], t[1][0] };
    tp[1] = dup;
    nt[1] = 2;
    assert_int_equal(replay_fit_ranks(tp, nt, batch, 2, &rs, why, sizeof why), -1);
    assert_non_null(strstr(why, "two processes recorded as rank 0"));
    for (int k = 0; k < 2; k++)
        for (int r = 0; r < 2; r++)
            replay_trace_release(&t[k][r]);
}

/* The guide (--replay) on a job of two ranks, rank 1 with the larger
 * shard: both ranks' traces are read from the trial's trace directory,
 * the prediction is rank 1's, the results' "replay" object names rank 1,
 * --keep-traces keeps both, and autobatch predict's engine reads them
 * back to the same answer. */
static void test_ranks_guide_and_predict(void **state)
{
    (void)state;
    long accum[1] = { 1 }, per[2] = { 3, 4 };
    struct space_opts o = { .batch_min = 1, .batch_max = 4096, .batch_step = 4,
                            .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1,
                            .global_batch = 0, .world_size = 2 };
    struct space sp;
    char err[512], keep[300], note[1024];
    assert_int_equal(space_init(&sp, &o, err, sizeof err), 0);
    int64_t cap = 500000000 + 1600 * MB;
    struct guide g;
    assert_int_equal(guide_init(&g, &sp, cap, "gpu"), 0);
    snprintf(keep, sizeof keep, "%s/kept", dir);
    mkdir(keep, 0700);
    g.keep_dir = keep;
    for (int k = 0; k < 2; k++) {
        long micro = 1;
        assert_int_equal(guide_next(&g, &sp, 0, &micro), 1);
        assert_int_equal(micro, 5 + 4 * k); /* 5 and 9: the grid from 2 */
        char sub[32], tdir[300];
        snprintf(sub, sizeof sub, "trial%d", k);
        rank_file(sub, "trace-101.txt", 1, 2, micro, per[1]);
        rank_file(sub, "trace-100.txt", 0, 2, micro, per[0]);
        snprintf(tdir, sizeof tdir, "%s/%s", dir, sub);
        guide_record(&g, &sp, 0, micro, 1, 1, -1, tdir, note, sizeof note);
    }
    long want1 = largest(need_mib_per_sample, &per[1], cap, 4096);
    long p = g.cells[0].predicted;
    assert_true(p <= want1 && p > want1 - 4); /* one grid step of 4 */
    assert_int_equal((p - 1) % 4, 0);
    assert_non_null(strstr(note, "rank 1 of 2 decides"));
    assert_non_null(strstr(note, "(rank 0 alone: 197)"));
    json_t *doc = guide_json(&g, &sp);
    assert_non_null(doc);
    json_t *c0 = json_array_get(json_object_get(doc, "cells"), 0);
    assert_int_equal(json_integer_value(json_object_get(c0, "decided_by_rank")), 1);
    assert_int_equal(json_integer_value(json_object_get(c0, "predicted_max_fit")), p);
    json_t *model = json_object_get(c0, "model");
    assert_int_equal(json_integer_value(json_object_get(model, "rank")), 1);
    assert_int_equal(json_integer_value(json_object_get(model, "ranks")), 2);
    json_t *ranks = json_object_get(c0, "ranks");
    assert_int_equal(json_array_size(ranks), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ranks, 0),
                                                        "predicted_max_fit")), 197);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ranks, 1),
                                                        "predicted_max_fit")), p);
    json_decref(doc);
    guide_release(&g);
    space_release(&sp);

    /* Kept: rank 0 by the plain name, rank 1 with its rank. */
    char path[512];
    struct stat st;
    const char *kept[4] = { "accum1-ckptoff-b5.txt", "accum1-ckptoff-b5-rank1.txt",
                            "accum1-ckptoff-b9.txt", "accum1-ckptoff-b9-rank1.txt" };
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", keep, kept[i]);
        assert_int_equal(stat(path, &st), 0);
    }
    struct predict_cell cells[4];
    assert_int_equal(predict_scan(keep, cells, 4), 1);
    assert_int_equal(cells[0].n, 2);
    assert_int_equal(cells[0].npath[0], 2);
    assert_int_equal(cells[0].npath[1], 2);
    struct predict_answer a;
    predict_cell(&cells[0], 1, 4096, 1, (uint64_t)cap, NULL, &a);
    if (!a.ok)
        fail_msg("no prediction: %s", a.why);
    assert_int_equal(a.fit, want1);
    assert_int_equal(a.ranks, 2);
    assert_int_equal(a.rank, 1);
    assert_int_equal(a.next_rank, 0);
    assert_int_equal(a.next_fit, largest(need_mib_per_sample, &per[0], cap, 4096));
    predict_scan_release(cells, 1);

    /* Without rank 1's trace at 9 (world 2): no prediction, and why. */
    snprintf(path, sizeof path, "%s/%s", keep, kept[3]);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(predict_scan(keep, cells, 4), 1);
    predict_cell(&cells[0], 1, 4096, 1, (uint64_t)cap, NULL, &a);
    assert_false(a.ok);
    assert_string_equal(a.why, "rank 1 of 2 wrote no trace at micro-batch 9");
    predict_scan_release(cells, 1);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_and_refuse),
        cmocka_unit_test(test_linear_cpu),
        cmocka_unit_test(test_quadratic),
        cmocka_unit_test(test_declines),
        cmocka_unit_test(test_unsteady_few),
        cmocka_unit_test(test_negative_size),
        cmocka_unit_test(test_gpu),
        cmocka_unit_test(test_gpu_persistent),
        cmocka_unit_test(test_gpu_address_pairs),
        cmocka_unit_test(test_gpu_layout),
        cmocka_unit_test(test_gpu_expandable),
        cmocka_unit_test(test_gpu_self_check),
        cmocka_unit_test(test_gpu_not_modelled),
        cmocka_unit_test(test_gpu_switched),
        cmocka_unit_test(test_gpu_capacity_view),
        cmocka_unit_test(test_ranks_uneven),
        cmocka_unit_test(test_ranks_decline),
        cmocka_unit_test(test_ranks_guide_and_predict),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
}
