/* SPDX-License-Identifier: MIT */
/*
 * fake_cuda: a stand-in libcuda.so.1 for tests of the replay on device
 * memory (probes/devmem_cuda.c), scripted by environment.
 *
 * Built as libcuda.so.1 in a folder of its own; a test puts that folder on
 * LD_LIBRARY_PATH and autobatch's dlopen("libcuda.so.1") finds it.  It
 * exports the driver calls devmem uses under their versioned names (the
 * ones cuda.h maps cuMemAlloc and friends to), with the driver's codes:
 * every call but cuInit and cuGetErrorString answers
 * CUDA_ERROR_NOT_INITIALIZED (3) before cuInit, memory calls answer
 * CUDA_ERROR_INVALID_CONTEXT (201) without a current context, a device
 * number past the count CUDA_ERROR_INVALID_DEVICE (101), and an
 * allocation that does not fit CUDA_ERROR_OUT_OF_MEMORY (2).
 *
 * Environment, read by cuInit:
 *   FAKE_CUDA_TOTAL=bytes    the device's memory (default 80 GiB)
 *   FAKE_CUDA_USED=bytes     taken before us (default 0)
 *   FAKE_CUDA_GRANULE=bytes  allocations round up to this (default 2 MiB)
 *   FAKE_CUDA_REPORT=path    at exit, "allocs A frees F live L peak P"
 *                            (P the peak bytes we held)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;

#define EXPORT __attribute__((visibility("default")))

enum { MAXLIVE = 1 << 16 };

static struct {
    int inited;
    int current;
    uint64_t total, used, granule, peak, mine;
    long allocs, frees;
    uint64_t size[MAXLIVE]; /* by slot; the pointer is base + slot's offset */
} g;

static struct fake_ctx { int dummy; } the_ctx;

#define BASE 0x7f0000000000ULL
#define SLOT_SPAN (1ULL << 36)

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static void report(void)
{
    const char *p = getenv("FAKE_CUDA_REPORT");
    FILE *f = p ? fopen(p, "w") : NULL;
    if (!f)
        return;
    long live = 0;
    for (int i = 0; i < MAXLIVE; i++)
        live += g.size[i] != 0;
    fprintf(f, "allocs %ld frees %ld live %ld peak %llu\n", g.allocs, g.frees, live,
            (unsigned long long)g.peak);
    fclose(f);
}

EXPORT CUresult cuInit(unsigned flags)
{
    if (flags)
        return 1; /* CUDA_ERROR_INVALID_VALUE */
    if (!g.inited) {
        g.total = env_u64("FAKE_CUDA_TOTAL", 80ULL << 30);
        g.used = env_u64("FAKE_CUDA_USED", 0);
        g.granule = env_u64("FAKE_CUDA_GRANULE", 2ULL << 20);
        if (!g.granule)
            g.granule = 1;
        atexit(report);
        g.inited = 1;
    }
    return 0;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!g.inited)
        return 3;
    if (ordinal != 0)
        return 101;
    *dev = 0;
    return 0;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    if (!g.inited)
        return 3;
    if (dev != 0)
        return 101;
    *ctx = &the_ctx;
    return 0;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return !g.inited ? 3 : dev != 0 ? 101 : 0;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!g.inited)
        return 3;
    g.current = ctx == &the_ctx;
    return 0;
}

static CUresult ready(void)
{
    return !g.inited ? 3 : !g.current ? 201 : 0;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
    CUresult r = ready();
    if (r)
        return r;
    *free_b = g.total - g.used;
    *total = g.total;
    return 0;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
    CUresult r = ready();
    if (r)
        return r;
    if (size == 0)
        return 1;
    uint64_t rs = ((uint64_t)size + g.granule - 1) / g.granule * g.granule;
    if (rs > g.total - g.used)
        return 2;
    for (int i = 0; i < MAXLIVE; i++) {
        if (g.size[i])
            continue;
        g.size[i] = rs;
        g.used += rs;
        g.mine += rs;
        if (g.mine > g.peak)
            g.peak = g.mine;
        g.allocs++;
        *p = BASE + (uint64_t)i * SLOT_SPAN;
        return 0;
    }
    return 2;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    CUresult r = ready();
    if (r)
        return r;
    uint64_t i = (p - BASE) / SLOT_SPAN;
    if (p < BASE || (p - BASE) % SLOT_SPAN || i >= MAXLIVE || !g.size[i])
        return 1; /* CUDA_ERROR_INVALID_VALUE: not ours, or freed twice */
    g.used -= g.size[i];
    g.mine -= g.size[i];
    g.size[i] = 0;
    g.frees++;
    return 0;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **s)
{
    switch (e) {
    case 0: *s = "no error"; return 0;
    case 1: *s = "invalid argument"; return 0;
    case 2: *s = "out of memory"; return 0;
    case 3: *s = "initialization error"; return 0;
    case 101: *s = "invalid device ordinal"; return 0;
    case 201: *s = "invalid device context"; return 0;
    default: *s = NULL; return 1;
    }
}
