/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/devmem.c (holding device memory back, the
 * allocator replay on real segments) and casim's device-backed mode, on
 * a fake device: a byte budget with a granule, an optional largest free
 * piece (fragmentation), and injected failures.  On the CPU the replay on
 * the fake device must agree exactly with casim's own capacity replay;
 * the CUDA binding is checked for a clean refusal where there is no GPU.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "casim.h"
#include "devmem.h"
#include "replay.h"

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)

/* ------------------------------------------------------------------ */
/* The fake device                                                     */

struct fake {
    uint64_t total, used;
    uint64_t granule;     /* allocations round up to this */
    uint64_t largest;     /* 0, or the largest piece one allocation gets */
    int fail_at;          /* the fail_at-th alloc (1-based) errors; 0: never */
    int fail_info;        /* info() errors */
    uint64_t steal;       /* bytes another process takes after the first alloc */
    int allocs, frees, live;
    uint64_t sizes[4096]; /* by handle - 1 */
};

static int fake_info(void *ctx, uint64_t *free_b, uint64_t *total)
{
    struct fake *f = ctx;
    if (f->fail_info)
        return -1;
    *free_b = f->total - f->used;
    *total = f->total;
    return 0;
}

static int fake_alloc(void *ctx, uint64_t size, uint64_t *handle)
{
    struct fake *f = ctx;
    f->allocs++;
    if (f->fail_at && f->allocs == f->fail_at)
        return -1;
    uint64_t r = (size + f->granule - 1) / f->granule * f->granule;
    if (r > f->total - f->used || (f->largest && r > f->largest))
        return 1;
    assert_true(f->allocs <= 4096);
    f->sizes[f->allocs - 1] = r;
    f->used += r;
    f->live++;
    *handle = (uint64_t)f->allocs;
    if (f->steal && f->allocs == 1) {
        f->used += f->steal;
        f->steal = 0;
    }
    return 0;
}

static void fake_release(void *ctx, uint64_t handle)
{
    struct fake *f = ctx;
    assert_true(handle >= 1 && handle <= (uint64_t)f->allocs);
    assert_int_not_equal(f->sizes[handle - 1], 0); /* no double free */
    f->used -= f->sizes[handle - 1];
    f->sizes[handle - 1] = 0;
    f->frees++;
    f->live--;
}

static const char *fake_error(void *ctx)
{
    (void)ctx;
    return "fake device error";
}

static struct devmem_ops fake_ops(struct fake *f)
{
    return (struct devmem_ops){ f, fake_info, fake_alloc, fake_release, fake_error };
}

/* ------------------------------------------------------------------ */
/* Holding back                                                        */

static void test_hold_exact_to_a_granule(void **state)
{
    (void)state;
    static struct fake f = { .total = 80 * GiB, .granule = 2 * MiB };
    f.used = 700 * MiB + 3; /* a context and something odd */
    struct devmem_ops ops = fake_ops(&f);
    struct devmem_hold h;
    char err[256] = "stale";
    uint64_t cap = 24 * GiB + 5 * MiB + 123;
    assert_int_equal(devmem_hold(&h, &ops, cap, err, sizeof err), 0);
    assert_string_equal(err, "");
    uint64_t free_b = f.total - f.used;
    assert_true(free_b <= cap);
    assert_true(cap - free_b < DEVMEM_GRANULE);
    assert_int_equal(h.free_after, free_b);
    assert_int_equal(h.bytes, 80 * GiB - 700 * MiB - 3 - free_b);
    assert_true(f.live > 0 && (size_t)f.live == h.n);
    devmem_unhold(&h);
    assert_int_equal(f.live, 0);
    assert_int_equal(f.used, 700 * MiB + 3);
    assert_int_equal(h.n, 0);
    devmem_unhold(&h); /* twice is fine */
}

static void test_hold_through_fragmentation(void **state)
{
    (void)state;
    /* No piece above 300 MiB: chunks of 1 GiB are refused and halved. */
    static struct fake f = { .total = 16 * GiB, .granule = 2 * MiB, .largest = 300 * MiB };
    struct devmem_ops ops = fake_ops(&f);
    struct devmem_hold h;
    char err[256];
    assert_int_equal(devmem_hold(&h, &ops, 4 * GiB, err, sizeof err), 0);
    uint64_t free_b = f.total - f.used;
    assert_true(free_b <= 4 * GiB && 4 * GiB - free_b < DEVMEM_GRANULE);
    devmem_unhold(&h);
    assert_int_equal(f.used, 0);
}

static void test_hold_refusals_hold_nothing(void **state)
{
    (void)state;
    char err[256];
    struct devmem_hold h;

    static struct fake small = { .total = 8 * GiB, .granule = 2 * MiB };
    struct devmem_ops ops = fake_ops(&small);
    assert_int_equal(devmem_hold(&h, &ops, 12 * GiB, err, sizeof err), -1);
    assert_non_null(strstr(err, "less than the 12.00 GiB asked for"));
    assert_int_equal(small.live, 0);

    static struct fake broken = { .total = 8 * GiB, .granule = 2 * MiB, .fail_at = 3 };
    ops = fake_ops(&broken);
    assert_int_equal(devmem_hold(&h, &ops, 1 * GiB, err, sizeof err), -1);
    assert_non_null(strstr(err, "fake device error"));
    assert_int_equal(broken.live, 0);
    assert_int_equal(broken.used, 0);

    static struct fake noinfo = { .total = 8 * GiB, .granule = 2 * MiB, .fail_info = 1 };
    ops = fake_ops(&noinfo);
    assert_int_equal(devmem_hold(&h, &ops, 1 * GiB, err, sizeof err), -1);
    assert_non_null(strstr(err, "free memory"));

    /* Another process takes memory while we hold back: refused, given back. */
    static struct fake busy = { .total = 8 * GiB, .granule = 2 * MiB, .steal = 6 * GiB };
    ops = fake_ops(&busy);
    assert_int_equal(devmem_hold(&h, &ops, 2 * GiB, err, sizeof err), -1);
    assert_non_null(strstr(err, "another process"));
    assert_int_equal(busy.live, 0);
}

/* ------------------------------------------------------------------ */
/* The replay on the device against casim's capacity replay             */

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A training-step-like trace: allocations of mixed sizes, frees of live
 * ones in roughly LIFO order, everything freed at the end. */
static size_t make_trace(int64_t *ev, size_t cap, uint64_t seed)
{
    uint64_t s = seed;
    int64_t live[512];
    size_t nlive = 0, n = 0;
    while (n + nlive < cap - 1) {
        if (nlive < 512 && (nlive == 0 || rnd(&s) % 3)) {
            uint64_t k = rnd(&s) % 10;
            int64_t size = k < 5 ? (int64_t)(rnd(&s) % (1 << 20)) + 1
                         : k < 8 ? (int64_t)(rnd(&s) % (12 * MiB)) + 1
                                 : (int64_t)(rnd(&s) % (200 * MiB)) + 1;
            live[nlive++] = size;
            ev[n++] = size;
        } else {
            size_t j = nlive - 1 - (size_t)(rnd(&s) % (nlive < 4 ? nlive : 4));
            ev[n++] = -live[j];
            live[j] = live[--nlive];
        }
    }
    while (nlive)
        ev[n++] = -live[--nlive];
    return n;
}

static void test_replay_agrees_with_simulation(void **state)
{
    (void)state;
    static int64_t ev[6000];
    int ooms = 0, fits = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        size_t n = make_trace(ev, sizeof ev / sizeof *ev, seed * 0x9e3779b97f4a7c15ULL);
        struct casim_stats sim, big;
        casim_replay(ev, n, 0, &big);
        /* Capacities around the unbounded peak: some fit, some do not. */
        uint64_t cap = big.peak_reserved / 2 + (seed * 37 % 100) * big.peak_reserved / 100;
        int rs = casim_replay(ev, n, cap, &sim);

        static struct fake f;
        memset(&f, 0, sizeof f);
        f.total = cap;
        f.granule = 1; /* exact: the device is the capacity */
        struct devmem_ops ops = fake_ops(&f);
        struct casim_stats dev;
        int rd = devmem_replay(&ops, ev, n, &dev);
        assert_int_equal(rd, rs);
        assert_int_equal(dev.oom, sim.oom);
        assert_int_equal(dev.oom_at, sim.oom_at);
        assert_int_equal(dev.peak_reserved, sim.peak_reserved);
        assert_int_equal(dev.segment_allocs, sim.segment_allocs);
        assert_int_equal(dev.segment_frees, sim.segment_frees);
        /* Every segment reserved was a device allocation, all given back. */
        assert_int_equal(f.frees, (int)sim.segment_allocs);
        assert_int_equal(f.live, 0);
        assert_int_equal(f.used, 0);
        ooms += rs == -1;
        fits += rs == 0;
    }
    print_message("device replay: %d fits, %d out of memory, all equal to the simulation\n",
                  fits, ooms);
    assert_true(ooms > 0 && fits > 0);
}

static void test_device_granule_changes_the_answer(void **state)
{
    (void)state;
    /* Two 1 MiB requests fill one 2 MiB small-pool segment, the third
     * takes a second: 4 MiB, which fit in 6 MiB; a device that hands out
     * 4 MiB pieces has no room for the second segment. */
    int64_t ev[] = { 1 << 20, 1 << 20, 1 << 20 };
    struct casim_stats st;
    assert_int_equal(casim_replay(ev, 3, 6 * MiB, &st), 0);
    assert_int_equal(st.peak_reserved, 4 * MiB);
    static struct fake f = { .total = 6 * MiB, .granule = 4 * MiB };
    struct devmem_ops ops = fake_ops(&f);
    assert_int_equal(devmem_replay(&ops, ev, 3, &st), -1);
    assert_int_equal(st.oom_at, 2);
    assert_int_equal(f.live, 0);
}

static void test_device_error_is_not_oom(void **state)
{
    (void)state;
    int64_t ev[] = { 30 * MiB, 30 * MiB, -30 * (int64_t)MiB };
    static struct fake f = { .total = 1 * GiB, .granule = 2 * MiB, .fail_at = 2 };
    struct devmem_ops ops = fake_ops(&f);
    struct casim_stats st;
    assert_int_equal(devmem_replay(&ops, ev, 3, &st), -3);
    assert_int_equal(f.live, 0);
}

static void test_casim_on_device_checks(void **state)
{
    (void)state;
    /* 15 MiB requests take 16 MiB segments: five fit in 90 MiB, not six. */
    static struct fake f = { .total = 90 * MiB, .granule = 2 * MiB };
    struct casim_device dev = { &f, fake_alloc, fake_release };
    struct casim *s = casim_new_on(&dev);
    assert_non_null(s);
    for (uint64_t id = 1; id <= 5; id++)
        assert_int_equal(casim_alloc(s, id, 15 * MiB), 0);
    assert_int_equal(casim_check(s), 0);
    assert_int_equal(f.live, 5);
    assert_int_equal(casim_alloc(s, 6, 15 * MiB), -1);
    assert_int_equal(casim_release(s, 2), 0);
    assert_int_equal(casim_alloc(s, 7, 15 * MiB), 0); /* the cached block is reused */
    assert_int_equal(f.live, 5);
    assert_int_equal(casim_release(s, 7), 0);
    casim_empty_cache(s);
    assert_int_equal(f.live, 4);
    assert_int_equal(casim_check(s), 0);
    casim_free(s); /* gives back the live segments */
    assert_int_equal(f.live, 0);
    assert_int_equal(f.used, 0);
}

/* ------------------------------------------------------------------ */
/* Prediction on the device                                             */

static void test_predict_on_device_matches_simulation(void **state)
{
    (void)state;
    /* A step of a model: a constant 50 MiB weight update, an activation
     * of 3 MiB a sample kept to the end, a 1 MiB-a-sample temporary. */
    enum { N = 6 };
    double a[N] = { 50.0 * MiB, 0, 0, 0, 0, 50.0 * MiB };
    double b[N] = { 0, 3.0 * MiB, 1.0 * MiB, 1.0 * MiB, 3.0 * MiB, 0 };
    double c[N] = { 0 };
    unsigned char frees[N] = { 0, 0, 0, 1, 1, 1 };
    struct replay_model m = REPLAY_MODEL_INIT;
    m.device = 'g';
    m.n = N;
    m.a = a;
    m.b = b;
    m.c = c;
    m.frees = frees;
    m.outside = 500 * MiB;
    for (uint64_t cap_mib = 600; cap_mib <= 2000; cap_mib += 175) {
        int64_t need_sim, need_dev;
        long p_sim = replay_predict(&m, 1, 1000, 1, (int64_t)(cap_mib * MiB), &need_sim);
        /* The device stands for the card less what lives outside the allocator. */
        static struct fake f;
        memset(&f, 0, sizeof f);
        f.total = cap_mib * MiB - 500 * MiB;
        f.granule = 1;
        struct casim_device seg = { &f, fake_alloc, fake_release };
        long p_dev = replay_predict_on(&m, 1, 1000, 1, &seg, &need_dev);
        assert_int_equal(p_dev, p_sim);
        if (p_sim >= 1)
            assert_int_equal(need_dev, need_sim);
        assert_int_equal(f.live, 0);
    }
    /* A CPU model has no device replay. */
    m.device = 'c';
    static struct fake f2 = { .total = 1 * GiB, .granule = 1 };
    struct casim_device seg2 = { &f2, fake_alloc, fake_release };
    int fits = 1;
    assert_int_equal(replay_need_on(&m, 2, &seg2, &fits), -1);
    assert_int_equal(fits, 0);
}

/* ------------------------------------------------------------------ */
/* The CUDA binding                                                    */

static void test_cuda_open_refuses_cleanly_without_gpu(void **state)
{
    (void)state;
    struct devmem_ops ops;
    char err[512] = "";
    int rc = devmem_cuda_open(0, &ops, err, sizeof err);
    if (rc == 0) {
        /* A GPU is here: its memory figures must make sense. */
        uint64_t free_b = 0, total = 0;
        assert_int_equal(ops.info(ops.ctx, &free_b, &total), 0);
        assert_true(total > 0 && free_b <= total);
        print_message("GPU 0: %.2f GiB free of %.2f GiB\n", (double)free_b / GiB,
                      (double)total / GiB);
        devmem_cuda_close(&ops);
        return;
    }
    assert_int_equal(rc, -1);
    assert_null(ops.ctx);
    assert_true(strlen(err) > 10);
    assert_null(strchr(err, '\n'));
    print_message("no GPU here: %s\n", err);
    /* A device number that cannot exist is refused either way. */
    assert_int_equal(devmem_cuda_open(999, &ops, err, sizeof err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_exact_to_a_granule),
        cmocka_unit_test(test_hold_through_fragmentation),
        cmocka_unit_test(test_hold_refusals_hold_nothing),
        cmocka_unit_test(test_replay_agrees_with_simulation),
        cmocka_unit_test(test_device_granule_changes_the_answer),
        cmocka_unit_test(test_device_error_is_not_oom),
        cmocka_unit_test(test_casim_on_device_checks),
        cmocka_unit_test(test_predict_on_device_matches_simulation),
        cmocka_unit_test(test_cuda_open_refuses_cleanly_without_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
