/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/nvml.c, run against tests/fake_nvml: a stand-in
 * libnvidia-ml scripted through FAKE_NVML_* variables.  CMake builds three
 * variants of it and passes their paths: FAKE_NVML_LIB (everything),
 * FAKE_NVML_LIB_NOV3 (no _v3 running-processes call) and
 * FAKE_NVML_LIB_NOV2 (v1 memory call only, no running-processes call).
 *
 * Each test also dlopens the fake itself, which keeps it loaded across
 * nvml_close and lets the test read the fake's call counters.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

#define PROCS_V3 "nvmlDeviceGetComputeRunningProcesses_v3"
#define PROCS_V2 "nvmlDeviceGetComputeRunningProcesses_v2"
#define MEM_V2 "nvmlDeviceGetMemoryInfo_v2"
#define MEM_V1 "nvmlDeviceGetMemoryInfo"

static const char *const fake_vars[] = {
    "FAKE_NVML_INIT_FAIL", "FAKE_NVML_GPUS", "FAKE_NVML_NAME", "FAKE_NVML_TOTAL",
    "FAKE_NVML_RESERVED", "FAKE_NVML_USED", "FAKE_NVML_USED_FILE", "FAKE_NVML_PROCS",
    "FAKE_NVML_PROCS_RACE", "FAKE_NVML_PROCS_FAIL", "FAKE_NVML_MEM_V2_FAIL",
    "FAKE_NVML_MEM_FAIL_AFTER",
};

/* The fake as the test sees it: its path and its counters. */
struct fake {
    const char *path;
    void *dl;
    unsigned long (*calls)(const char *name);
    int (*init_refs)(void);
    void (*rewind)(void);
};

/*
 * What a test has open, so that teardown can close it when the test
 * fails half-way: otherwise the fake would stay initialised and the next
 * test would run against the previous one's script.
 */
static void *live_nvml[4];
static void *live_fake[4];

static void track(void **slots, size_t n, void *p, void *old)
{
    for (size_t i = 0; i < n; i++)
        if (slots[i] == old) {
            slots[i] = p;
            return;
        }
    fail_msg("too many open handles in one test");
}

static struct fake fake_load(const char *var)
{
    struct fake f;
    memset(&f, 0, sizeof f);
    f.path = getenv(var);
    if (!f.path || !*f.path)
        fail_msg("%s is not set: run this test through ctest, or set it to the "
                 "path of the fake libnvidia-ml built from tests/fake_nvml",
                 var);
    f.dl = dlopen(f.path, RTLD_NOW | RTLD_LOCAL);
    if (!f.dl)
        fail_msg("cannot load %s='%s': %s", var, f.path, dlerror());
    track(live_fake, 4, f.dl, NULL);
    void *p;
    p = dlsym(f.dl, "fake_nvml_calls");
    memcpy(&f.calls, &p, sizeof p);
    p = dlsym(f.dl, "fake_nvml_init_refs");
    memcpy(&f.init_refs, &p, sizeof p);
    p = dlsym(f.dl, "fake_nvml_rewind");
    memcpy(&f.rewind, &p, sizeof p);
    assert_non_null(f.calls);
    assert_non_null(f.init_refs);
    assert_non_null(f.rewind);
    return f;
}

static void fake_unload(struct fake *f)
{
    if (f->dl) {
        track(live_fake, 4, NULL, f->dl);
        dlclose(f->dl);
    }
    f->dl = NULL;
}

static void close_nvml(struct nvml *n)
{
    track(live_nvml, 4, NULL, n);
    nvml_close(n);
}

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof fake_vars / sizeof *fake_vars; i++)
        unsetenv(fake_vars[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        nvml_close(live_nvml[i]);
        live_nvml[i] = NULL;
    }
    for (size_t i = 0; i < 4; i++) {
        if (live_fake[i])
            dlclose(live_fake[i]);
        live_fake[i] = NULL;
    }
    return 0;
}

static struct nvml *open_ok(const struct fake *f)
{
    struct nvml *n = (struct nvml *)0x1;
    char err[256] = "garbage";
    int rc = nvml_open(&n, f->path, err, sizeof err);
    if (rc != 0)
        fail_msg("nvml_open('%s') failed: %s", f->path, err);
    assert_non_null(n);
    track(live_nvml, 4, n, NULL);
    assert_string_equal(err, "");
    return n;
}

static void expect_open_fails(const char *path, const char *want)
{
    struct nvml *n = (struct nvml *)0x1;
    char err[256] = "";
    int rc = nvml_open(&n, path, err, sizeof err);
    if (rc == 0)
        track(live_nvml, 4, n, NULL);
    assert_int_equal(rc, -1);
    assert_null(n);
    assert_string_equal(err, want);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A temporary file holding text; the caller unlinks it. */
static void write_script(char *path, size_t len, const char *text)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/test_nvml.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* ------------------------------------------------------------------ */
/* Opening                                                             */

static void test_missing_library(void **state)
{
    (void)state;
    struct nvml *n = (struct nvml *)0x1;
    char err[256] = "";
    assert_int_equal(nvml_open(&n, "/nonexistent/libnvidia-ml.so.1", err, sizeof err), -1);
    assert_null(n);
    /* the rest is dlerror's, which differs between C libraries */
    const char *want = "cannot load '/nonexistent/libnvidia-ml.so.1': ";
    if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, "No such file or directory"))
        fail_msg("unexpected reason: %s", err);

    /* a short buffer is truncated, a missing one is ignored */
    char small[8];
    assert_int_equal(nvml_open(&n, "/nonexistent/x.so", small, sizeof small), -1);
    assert_string_equal(small, "cannot ");
    assert_int_equal(nvml_open(&n, "/nonexistent/x.so", NULL, 0), -1);
    assert_null(n);

    /* what a caller does with an unavailable probe must be harmless */
    assert_int_equal(nvml_gpu_count(NULL), 0);
    assert_null(nvml_gpu(NULL, 0));
    assert_null(nvml_memory_call(NULL));
    assert_null(nvml_process_call(NULL));
    assert_string_equal(nvml_last_error(NULL), "");
    uint64_t used[1];
    assert_int_equal(nvml_sample(NULL, NULL, 0, used, NULL), -1);
    nvml_close(NULL);
}

static void test_library_without_nvml(void **state)
{
    (void)state;
    expect_open_fails("libm.so.6", "'libm.so.6' has no 'nvmlInit_v2'");
}

static void test_init_failure(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
    expect_open_fails(f.path, "nvmlInit_v2 failed: Driver Not Loaded");
    assert_int_equal(f.init_refs(), 0);
    fake_unload(&f);
}

static void test_no_gpu(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "0", 1);
    expect_open_fails(f.path, "no NVIDIA GPU found");
    /* initialised, so it must have been shut down again */
    assert_int_equal(f.calls("nvmlInit_v2"), 1);
    assert_int_equal(f.calls("nvmlShutdown"), 1);
    assert_int_equal(f.init_refs(), 0);
    fake_unload(&f);
}

static void test_memory_fails_at_open(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_MEM_FAIL_AFTER", "1", 1);
    expect_open_fails(f.path, "nvmlDeviceGetMemoryInfo_v2 failed on GPU 1: GPU is lost");
    assert_int_equal(f.init_refs(), 0);
    fake_unload(&f);
}

static void test_gpus(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_TOTAL", "80G", 1);
    struct nvml *n = open_ok(&f);

    assert_int_equal(nvml_gpu_count(n), 2);
    for (int i = 0; i < 2; i++) {
        const struct nvml_gpu *g = nvml_gpu(n, i);
        assert_non_null(g);
        assert_int_equal(g->index, i);
        assert_string_equal(g->name, "NVIDIA H100 80GB HBM3");
        assert_int_equal(g->total_bytes, 85899345920ULL);
    }
    assert_null(nvml_gpu(n, 2));
    assert_null(nvml_gpu(n, -1));
    assert_string_equal(nvml_memory_call(n), MEM_V2);
    assert_string_equal(nvml_process_call(n), PROCS_V3);
    assert_string_equal(nvml_last_error(n), "");
    assert_int_equal(f.init_refs(), 1);

    close_nvml(n);
    assert_int_equal(f.init_refs(), 0);
    assert_int_equal(f.calls("nvmlShutdown"), 1);
    fake_unload(&f);
}

static void test_default_gpu(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_NAME", "NVIDIA A100-SXM4-40GB", 1);
    struct nvml *n = open_ok(&f);
    assert_int_equal(nvml_gpu_count(n), 1);
    assert_string_equal(nvml_gpu(n, 0)->name, "NVIDIA A100-SXM4-40GB");
    assert_int_equal(nvml_gpu(n, 0)->total_bytes, 81559ULL * MiB);
    close_nvml(n);
    fake_unload(&f);
}

/* ------------------------------------------------------------------ */
/* Sampling                                                            */

static void test_sample_attribution(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_USED", "10G 20G", 1);
    setenv("FAKE_NVML_PROCS", "0/100:3G,0/101:1G,1/100:5G,0/200:7G,1/300:2G,1/0:6G", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[2];
    int64_t attr[2];

    const pid_t trial[] = { 100, 101 };
    assert_int_equal(nvml_sample(n, trial, 2, used, attr), 0);
    assert_int_equal(used[0], 10 * GiB);
    assert_int_equal(used[1], 20 * GiB);
    assert_int_equal(attr[0], 4 * GiB);
    assert_int_equal(attr[1], 5 * GiB);

    const pid_t other[] = { 200, 999, 0, -1 };
    assert_int_equal(nvml_sample(n, other, 4, used, attr), 0);
    assert_int_equal(attr[0], 7 * GiB);
    assert_int_equal(attr[1], 0);

    assert_int_equal(nvml_sample(n, NULL, 0, used, attr), 0);
    assert_int_equal(attr[0], 0);
    assert_int_equal(attr[1], 0);

    /* no attributed array: no running-processes call at all */
    unsigned long before = f.calls(PROCS_V3);
    assert_int_equal(nvml_sample(n, trial, 2, used, NULL), 0);
    assert_int_equal(used[1], 20 * GiB);
    assert_int_equal(f.calls(PROCS_V3), before);
    assert_int_equal(f.calls(PROCS_V2), 0);

    close_nvml(n);
    fake_unload(&f);
}

static void test_sizing_dance(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_PROCS", "100:1G,101:2G,102:4G", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1];
    const pid_t pids[] = { 100, 102 };

    /* first sample: count 0 and no array, then an array of 3 */
    assert_int_equal(nvml_sample(n, pids, 2, used, attr), 0);
    assert_int_equal(attr[0], 5 * GiB);
    assert_int_equal(f.calls(PROCS_V3), 2);
    assert_int_equal(f.calls("sizing"), 1);
    assert_int_equal(f.calls("insufficient"), 1);

    /* the array is kept: one call per sample from then on */
    assert_int_equal(nvml_sample(n, pids, 2, used, attr), 0);
    assert_int_equal(attr[0], 5 * GiB);
    assert_int_equal(f.calls(PROCS_V3), 3);
    assert_int_equal(f.calls("sizing"), 1);
    assert_int_equal(f.calls("insufficient"), 1);

    close_nvml(n);
    fake_unload(&f);
}

static void test_sizing_race(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_PROCS", "100:1G,101:2G,102:4G", 1);
    setenv("FAKE_NVML_PROCS_RACE", "1", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1];
    const pid_t pids[] = { 102 };

    /* sizing says 2, a third process "appears", the array grows to 3 */
    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(attr[0], 4 * GiB);
    assert_int_equal(f.calls(PROCS_V3), 3);
    assert_int_equal(f.calls("insufficient"), 2);

    close_nvml(n);
    fake_unload(&f);
}

static void test_no_processes(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1] = { -7 };
    const pid_t pids[] = { 100 };

    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(attr[0], 0);
    assert_int_equal(f.calls(PROCS_V3), 1); /* the sizing call says 0 */
    assert_int_equal(f.calls("insufficient"), 0);

    close_nvml(n);
    fake_unload(&f);
}

static void test_bytes_not_available(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_PROCS", "100:na,101:1G", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1];

    const pid_t known[] = { 101 };
    assert_int_equal(nvml_sample(n, known, 1, used, attr), 0);
    assert_int_equal(attr[0], 1 * GiB);

    const pid_t both[] = { 100, 101 };
    assert_int_equal(nvml_sample(n, both, 2, used, attr), 0);
    assert_int_equal(attr[0], -1);

    close_nvml(n);
    fake_unload(&f);
}

static void test_process_call_fails(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_USED", "3G", 1);
    setenv("FAKE_NVML_PROCS", "100:1G", 1);
    setenv("FAKE_NVML_PROCS_FAIL", "1", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1];
    const pid_t pids[] = { 100 };

    /* attribution lost, the sample itself is fine */
    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(used[0], 3 * GiB);
    assert_int_equal(attr[0], -1);
    assert_string_equal(nvml_last_error(n), "");

    close_nvml(n);
    fake_unload(&f);
}

static void test_sample_failure(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_MEM_FAIL_AFTER", "3", 1); /* open reads 2, GPU 0 the 3rd */
    struct nvml *n = open_ok(&f);
    uint64_t used[2];
    int64_t attr[2];

    assert_int_equal(nvml_sample(n, NULL, 0, used, attr), -1);
    assert_string_equal(nvml_last_error(n),
                        "nvmlDeviceGetMemoryInfo_v2 failed on GPU 1: GPU is lost");

    close_nvml(n);
    fake_unload(&f);
}

static void test_used_script(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    char path[256];
    write_script(path, sizeof path, "1G 2G\n3G 4096M\n\n5G\n");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_USED_FILE", path, 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[2];
    static const uint64_t want[][2] = {
        { 1 * GiB, 2 * GiB }, { 3 * GiB, 4 * GiB }, { 5 * GiB, 5 * GiB }, { 5 * GiB, 5 * GiB },
    };

    /* nvml_open read line 1 for the totals */
    assert_int_equal(nvml_sample(n, NULL, 0, used, NULL), 0);
    assert_int_equal(used[0], 3 * GiB);
    assert_int_equal(used[1], 4 * GiB);

    f.rewind();
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        assert_int_equal(nvml_sample(n, NULL, 0, used, NULL), 0);
        assert_int_equal(used[0], want[k][0]);
        assert_int_equal(used[1], want[k][1]);
    }

    close_nvml(n);
    unlink(path);
    fake_unload(&f);
}

/* ------------------------------------------------------------------ */
/* Fallbacks                                                           */

static void test_fallback_no_v2(void **state)
{
    (void)state;
    setenv("FAKE_NVML_RESERVED", "512M", 1);
    setenv("FAKE_NVML_USED", "1G", 1);
    setenv("FAKE_NVML_PROCS", "100:1G", 1);
    const pid_t pids[] = { 100 };
    uint64_t used[1];
    int64_t attr[1];

    /* the full library: v2 memory leaves the reservation out */
    struct fake full = fake_load("FAKE_NVML_LIB");
    struct nvml *n = open_ok(&full);
    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(used[0], 1 * GiB);
    assert_int_equal(attr[0], 1 * GiB);
    close_nvml(n);
    fake_unload(&full);

    /* v1 only: its used includes the reservation; no attribution */
    struct fake f = fake_load("FAKE_NVML_LIB_NOV2");
    n = open_ok(&f);
    assert_string_equal(nvml_memory_call(n), MEM_V1);
    assert_null(nvml_process_call(n));
    assert_int_equal(nvml_gpu(n, 0)->total_bytes, 81559ULL * MiB);
    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(used[0], 1 * GiB + 512 * MiB);
    assert_int_equal(attr[0], -1);
    assert_int_equal(f.calls(MEM_V1), 2);
    close_nvml(n);
    fake_unload(&f);
}

static void test_fallback_no_v3(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB_NOV3");
    setenv("FAKE_NVML_PROCS", "100:1G,101:2G", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];
    int64_t attr[1];
    const pid_t pids[] = { 101 };

    assert_string_equal(nvml_memory_call(n), MEM_V2);
    assert_string_equal(nvml_process_call(n), PROCS_V2);
    assert_int_equal(nvml_sample(n, pids, 1, used, attr), 0);
    assert_int_equal(attr[0], 2 * GiB);
    assert_int_equal(f.calls(PROCS_V2), 2);

    close_nvml(n);
    fake_unload(&f);
}

static void test_fallback_v2_refused(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_MEM_V2_FAIL", "1", 1);
    setenv("FAKE_NVML_RESERVED", "256M", 1);
    setenv("FAKE_NVML_USED", "2G", 1);
    setenv("FAKE_NVML_TOTAL", "40G", 1);
    struct nvml *n = open_ok(&f);
    uint64_t used[1];

    assert_string_equal(nvml_memory_call(n), MEM_V1);
    assert_int_equal(nvml_gpu(n, 0)->total_bytes, 40 * GiB);
    assert_int_equal(nvml_sample(n, NULL, 0, used, NULL), 0);
    assert_int_equal(used[0], 2 * GiB + 256 * MiB);
    /* v2 was tried once, at open, and never again */
    assert_int_equal(f.calls(MEM_V2), 1);
    assert_int_equal(f.calls(MEM_V1), 2);

    close_nvml(n);
    fake_unload(&f);
}

/* ------------------------------------------------------------------ */
/* Peaks                                                               */

static void test_peak_tracking(void **state)
{
    (void)state;
    enum nvml_peak_source src = NVML_PEAK_DEVICE_DELTA;
    struct nvml_peak p = NVML_PEAK_INIT;
    assert_int_equal(nvml_peak_bytes(&p, &src), -1);
    assert_int_equal(src, NVML_PEAK_NONE);

    const uint64_t base[] = { 1 * GiB, 2 * GiB };
    nvml_peak_reset(&p, 2, base);
    assert_int_equal(nvml_peak_bytes(&p, &src), -1);
    assert_int_equal(src, NVML_PEAK_NONE);

    const uint64_t u1[] = { 3 * GiB, 2 * GiB }, u2[] = { 2 * GiB, 6 * GiB },
                   u3[] = { 512 * MiB, 2 * GiB };
    const int64_t a1[] = { 3 * GiB / 2, 0 }, a2[] = { GiB / 2, 7 * GiB / 2 }, a3[] = { 0, 0 };
    nvml_peak_add(&p, u1, a1);
    nvml_peak_add(&p, u2, a2);
    nvml_peak_add(&p, u3, a3);

    assert_int_equal(p.samples, 3);
    assert_int_equal(p.attributed_samples, 3);
    assert_int_equal(p.used_max[0], 3 * GiB);
    assert_int_equal(p.used_max[1], 6 * GiB);
    assert_int_equal(p.attributed_max[0], 3 * GiB / 2);
    assert_int_equal(p.attributed_max[1], 7 * GiB / 2);
    /* per sample: 1.5+0, 0.5+3.5, 0+0 */
    assert_int_equal(p.attributed_sum_max, 4 * GiB);
    /* per sample: 2+0, 1+4, 0 (below the baseline counts as 0) + 0 */
    assert_int_equal(p.delta_sum_max, 5 * GiB);
    assert_int_equal(nvml_peak_bytes(&p, &src), 4 * GiB);
    assert_int_equal(src, NVML_PEAK_ATTRIBUTED);
    assert_int_equal(nvml_peak_bytes(&p, NULL), 4 * GiB);

    /* one sample without attribution on one GPU: device-wide for the trial */
    const uint64_t u4[] = { 1 * GiB, 2 * GiB };
    const int64_t a4[] = { -1, 8 * GiB };
    nvml_peak_add(&p, u4, a4);
    assert_int_equal(p.samples, 4);
    assert_int_equal(p.attributed_samples, 3);
    assert_int_equal(p.attributed_max[1], 8 * GiB);
    assert_int_equal(p.attributed_sum_max, 4 * GiB);
    assert_int_equal(nvml_peak_bytes(&p, &src), 5 * GiB);
    assert_int_equal(src, NVML_PEAK_DEVICE_DELTA);

    /* attribution that never sees the trial (pid namespace): device-wide */
    nvml_peak_reset(&p, 2, base);
    assert_int_equal(p.samples, 0);
    assert_int_equal(p.attributed_max[0], -1);
    assert_int_equal(p.attributed_sum_max, -1);
    const uint64_t u5[] = { 4 * GiB, 2 * GiB };
    const int64_t zero[] = { 0, 0 };
    nvml_peak_add(&p, u5, zero);
    assert_int_equal(nvml_peak_bytes(&p, &src), 3 * GiB);
    assert_int_equal(src, NVML_PEAK_DEVICE_DELTA);

    /* no attribution at all, no baseline */
    nvml_peak_reset(&p, 2, NULL);
    nvml_peak_add(&p, u5, NULL);
    assert_int_equal(p.attributed_samples, 0);
    assert_int_equal(nvml_peak_bytes(&p, &src), 6 * GiB);
    assert_int_equal(src, NVML_PEAK_DEVICE_DELTA);

    nvml_peak_reset(&p, 1000, NULL);
    assert_int_equal(p.ngpu, NVML_MAX_GPUS);
    nvml_peak_reset(&p, -3, NULL);
    assert_int_equal(p.ngpu, 0);
}

/* A whole trial: baseline, samples, peak, through the fake. */
static void run_trial(const char *var, const char *script, int64_t want,
                      enum nvml_peak_source want_src)
{
    struct fake f = fake_load(var);
    char path[256];
    write_script(path, sizeof path, script);
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_USED_FILE", path, 1);
    setenv("FAKE_NVML_PROCS", "0/100:3G,1/101:2G,1/555:9G", 1);
    struct nvml *n = open_ok(&f);
    f.rewind();

    uint64_t baseline[2], used[2];
    int64_t attr[2];
    const pid_t trial[] = { 100, 101 };
    struct nvml_peak p;
    enum nvml_peak_source src;

    assert_int_equal(nvml_sample(n, NULL, 0, baseline, NULL), 0);
    nvml_peak_reset(&p, nvml_gpu_count(n), baseline);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(nvml_sample(n, trial, 2, used, attr), 0);
        nvml_peak_add(&p, used, attr);
    }
    assert_int_equal(p.used_max[0], 6 * GiB);
    assert_int_equal(p.used_max[1], 4 * GiB);
    assert_int_equal(p.delta_sum_max, 8 * GiB);
    assert_int_equal(nvml_peak_bytes(&p, &src), want);
    assert_int_equal(src, want_src);

    close_nvml(n);
    unlink(path);
    fake_unload(&f);
}

static void test_peak_from_samples(void **state)
{
    (void)state;
    /* baseline, then three samples; the trial holds 3G + 2G throughout */
    const char *script = "1G 1G\n4G 2G\n6G 4G\n2G 1G\n";
    run_trial("FAKE_NVML_LIB", script, 5 * GiB, NVML_PEAK_ATTRIBUTED);
    run_trial("FAKE_NVML_LIB_NOV2", script, 8 * GiB, NVML_PEAK_DEVICE_DELTA);
}

/* ------------------------------------------------------------------ */
/* Waiting for the baseline                                            */

static void test_wait_settles(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    char path[256];
    write_script(path, sizeof path, "5G\n5G\n3G\n1G\n");
    setenv("FAKE_NVML_USED_FILE", path, 1);
    struct nvml *n = open_ok(&f);
    f.rewind();
    unsigned long before = f.calls(MEM_V2);
    const uint64_t base[] = { 1 * GiB };

    double t0 = now_s();
    assert_int_equal(nvml_wait_baseline(n, base, 64 * MiB, 0.9), 1);
    double dt = now_s() - t0;
    /* four reads: at once, then after three 100 ms pauses (returning 1
     * already proves it did not wait for the whole 0.9 s) */
    assert_int_equal(f.calls(MEM_V2) - before, 4);
    if (dt < 0.29)
        fail_msg("settled after %.3f s, want about 0.3 s", dt);

    close_nvml(n);
    unlink(path);
    fake_unload(&f);
}

static void test_wait_times_out(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_USED", "5G", 1);
    struct nvml *n = open_ok(&f);
    const uint64_t base[] = { 1 * GiB };

    double t0 = now_s();
    assert_int_equal(nvml_wait_baseline(n, base, 64 * MiB, 0.35), 0);
    double dt = now_s() - t0;
    /* generous above: a loaded CI machine oversleeps */
    if (dt < 0.35 || dt > 2.0)
        fail_msg("gave up after %.3f s, want 0.35 s", dt);

    close_nvml(n);
    fake_unload(&f);
}

static void test_wait_tolerance(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_GPUS", "2", 1);
    setenv("FAKE_NVML_USED", "1040M 1G", 1);
    struct nvml *n = open_ok(&f);
    /* GPU 0 16M above its baseline, GPU 1 below its own */
    const uint64_t base[] = { 1 * GiB, 2 * GiB };
    unsigned long before = f.calls(MEM_V2);

    assert_int_equal(nvml_wait_baseline(n, base, 16 * MiB, 10.0), 1);
    assert_int_equal(f.calls(MEM_V2) - before, 2);
    /* 1 byte less tolerance: not settled; a zero timeout checks once */
    assert_int_equal(nvml_wait_baseline(n, base, 16 * MiB - 1, 0), 0);
    assert_int_equal(f.calls(MEM_V2) - before, 4);

    close_nvml(n);
    fake_unload(&f);
}

static void test_wait_error(void **state)
{
    (void)state;
    struct fake f = fake_load("FAKE_NVML_LIB");
    setenv("FAKE_NVML_USED", "5G", 1);
    setenv("FAKE_NVML_MEM_FAIL_AFTER", "2", 1); /* open, one poll, then lost */
    struct nvml *n = open_ok(&f);
    const uint64_t base[] = { 1 * GiB };

    assert_int_equal(nvml_wait_baseline(n, base, 0, 0.9), -1);
    assert_string_equal(nvml_last_error(n),
                        "nvmlDeviceGetMemoryInfo_v2 failed on GPU 0: GPU is lost");

    close_nvml(n);
    fake_unload(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_missing_library, setup, teardown),
        cmocka_unit_test_setup_teardown(test_library_without_nvml, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_fails_at_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpus, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_attribution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizing_dance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sizing_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bytes_not_available, setup, teardown),
        cmocka_unit_test_setup_teardown(test_process_call_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sample_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_used_script, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_no_v2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_no_v3, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_v2_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peak_tracking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peak_from_samples, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_settles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_tolerance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
