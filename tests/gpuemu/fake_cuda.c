/* SPDX-License-Identifier: MIT */
/*
 * A fake libcuda.so.1 for the tests of the GPU-memory emulation library
 * (probes/gpuemu/gpuemu.c).  It has a few devices whose memory it
 * accounts itself (free = total - used, allocations rounded up to 2 MiB),
 * primary contexts with a per-thread stack of current contexts, and a
 * cuGetProcAddress that maps base names, versions and the per-thread
 * stream flag to its variants as the real driver does.
 *
 * It is linked with -Bsymbolic-functions, so that the addresses it hands
 * out are its own functions even while the emulation library interposes
 * the same names.  Every variant counts its calls (fake_cuda_calls), so a
 * test can tell which real variant a wrapper forwarded to.
 *
 * Environment, read by cuInit:
 *   FAKE_GPU_TOTALS=b0,b1,...  the devices' memory in bytes (at most 4;
 *                              default one device of 8 GiB)
 *   FAKE_CUDA_GPA_THUNKS=1     cuGetProcAddress hands out thunks, not the
 *                              exported functions (a driver whose table
 *                              holds other addresses than its exports)
 *
 * Each device has one memory pool, the current and default one, for the
 * stream-ordered calls (cuMemAllocAsync, cuMemAllocFromPoolAsync with it or
 * NULL): a request its reserve (bytes the pool holds on the device, less
 * those in use) can hold is served from it; otherwise the pool takes the
 * request's size, rounded up to 2 MiB, from the device.  A free returns
 * the memory to the pool, which keeps up to its release threshold
 * (cuMemPoolSetAttribute; default 0: none, as if the stream synchronised
 * at once) and gives the rest back; cuMemPoolTrimTo gives back all but
 * what is asked to keep.
 *
 * Test-only calls: fake_cuda_calls(name) the calls of one exported
 * variant; fake_cuda_used(dev) the bytes in use (a pool's reserve
 * included); fake_cuda_external_use(dev, bytes) memory held by "another
 * process".
 */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "driver_abi.h"

#define EXPORT __attribute__((visibility("default")))

enum { MAXDEV = 4, MAXALLOC = 1024, MAXDEPTH = 8 };
#define GRANULE (2ULL << 20)

/* A primary context; CUcontext, opaque in cuda.h, points to one. */
struct CUctx_st {
    int dev;
    int refs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int inited, ndev;
static uint64_t total[MAXDEV], used[MAXDEV], external[MAXDEV];
static struct CUctx_st primary[MAXDEV];
static struct {
    uint64_t size; /* 0: free slot */
    int dev;
} allocs[MAXALLOC];

/* A device's memory pool; CUmemoryPool, opaque in cuda.h, points to one. */
struct CUmemPoolHandle_st {
    int dev;
    uint64_t reserved, used, threshold;
};
static struct CUmemPoolHandle_st pools[MAXDEV];
static struct {
    uint64_t size; /* 0: free slot */
    struct CUmemPoolHandle_st *pool;
} pool_allocs[MAXALLOC];

static __thread struct CUctx_st *stack[MAXDEPTH];
static __thread int depth;

/* ---- call counts, by exported name ---- */

static const char *const counted[] = {
    "cuDeviceTotalMem_v2", "cuDeviceTotalMem", "cuMemGetInfo_v2", "cuMemGetInfo",
    "cuMemAlloc_v2", "cuMemAlloc", "cuMemAllocPitch_v2", "cuMemAllocAsync",
    "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz",
    "cuMemCreate", "cuGetProcAddress", "cuGetProcAddress_v2", "cuMemFreeAsync",
};
#define NCOUNTED (sizeof counted / sizeof *counted)
static long calls[NCOUNTED];

static void count(const char *name)
{
    for (size_t i = 0; i < NCOUNTED; i++)
        if (strcmp(counted[i], name) == 0)
            __atomic_add_fetch(&calls[i], 1, __ATOMIC_SEQ_CST);
}

EXPORT long fake_cuda_calls(const char *name)
{
    for (size_t i = 0; i < NCOUNTED; i++)
        if (strcmp(counted[i], name) == 0)
            return __atomic_load_n(&calls[i], __ATOMIC_SEQ_CST);
    return -1;
}

EXPORT unsigned long long fake_cuda_used(int dev)
{
    pthread_mutex_lock(&lock);
    unsigned long long u = dev >= 0 && dev < ndev ? used[dev] : 0;
    pthread_mutex_unlock(&lock);
    return u;
}

EXPORT void fake_cuda_external_use(int dev, unsigned long long bytes)
{
    pthread_mutex_lock(&lock);
    if (dev >= 0 && dev < ndev) {
        used[dev] = used[dev] - external[dev] + bytes;
        external[dev] = bytes;
    }
    pthread_mutex_unlock(&lock);
}

/* ---- devices and contexts ---- */

EXPORT CUresult cuInit(unsigned int flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    if (!inited) {
        const char *v = getenv("FAKE_GPU_TOTALS");
        char *end;
        ndev = 0;
        while (v && *v && ndev < MAXDEV) {
            total[ndev++] = strtoull(v, &end, 10);
            v = *end == ',' ? end + 1 : NULL;
        }
        if (!ndev)
            total[ndev++] = 8ULL << 30;
        for (int d = 0; d < ndev; d++)
            primary[d].dev = pools[d].dev = d;
        inited = 1;
    }
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static CUresult check_dev(CUdevice dev)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

static struct CUctx_st *current(void)
{
    return depth > 0 ? stack[depth - 1] : NULL;
}

EXPORT CUresult cuDeviceGetCount(int *count_out)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count_out = ndev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    CUresult rc = check_dev(ordinal);
    if (rc == CUDA_SUCCESS)
        *dev = ordinal;
    return rc;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    primary[dev].refs++;
    pthread_mutex_unlock(&lock);
    *ctx = &primary[dev];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    if (primary[dev].refs > 0)
        primary[dev].refs--;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult rc = check_dev(dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    *flags = 0;
    *active = primary[dev].refs > 0;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    if (!ctx) {
        if (depth > 0)
            depth--;
    } else if (depth > 0) {
        stack[depth - 1] = ctx;
    } else {
        stack[depth++] = ctx;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    *ctx = current();
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (!ctx || depth == MAXDEPTH)
        return CUDA_ERROR_INVALID_VALUE;
    stack[depth++] = ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct CUctx_st *c = stack[--depth];
    if (ctx)
        *ctx = c;
    return CUDA_SUCCESS;
}

/* The current context's device in *dev, or the error the driver gives. */
static CUresult ctx_dev(CUdevice *dev)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!current())
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = current()->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    return ctx_dev(dev);
}

/* ---- memory ---- */

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    count("cuDeviceTotalMem_v2");
    CUresult rc = check_dev(dev);
    if (rc == CUDA_SUCCESS)
        *bytes = total[dev];
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    count("cuDeviceTotalMem");
    CUresult rc = check_dev(dev);
    if (rc == CUDA_SUCCESS)
        *bytes = total[dev] > UINT_MAX ? UINT_MAX : (unsigned int)total[dev];
    return rc;
}

/* The current device's free and total bytes, uncounted. */
static CUresult mem_info(uint64_t *free, uint64_t *total_out)
{
    int dev;
    CUresult rc = ctx_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    *free = used[dev] < total[dev] ? total[dev] - used[dev] : 0;
    *total_out = total[dev];
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total_out)
{
    count("cuMemGetInfo_v2");
    uint64_t f, t;
    CUresult rc = mem_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free = f;
        *total_out = t;
    }
    return rc;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total_out)
{
    count("cuMemGetInfo");
    uint64_t f, t;
    CUresult rc = mem_info(&f, &t);
    if (rc == CUDA_SUCCESS) {
        *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total_out = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

/* Take `bytes` on dev; *id is the allocation's slot, from 1. */
static CUresult take(int dev, uint64_t bytes, unsigned long long *id)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t need = (bytes + GRANULE - 1) / GRANULE * GRANULE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    if (need <= total[dev] && used[dev] <= total[dev] - need) {
        for (int i = 0; i < MAXALLOC; i++) {
            if (!allocs[i].size) {
                allocs[i].size = need;
                allocs[i].dev = dev;
                used[dev] += need;
                *id = (unsigned long long)i + 1;
                rc = CUDA_SUCCESS;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* A pool keeps up to its threshold of what is not in use; lock held. */
static void pool_release(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t floor = p->used > keep ? p->used : keep;
    if (p->reserved > floor) {
        used[p->dev] -= p->reserved - floor;
        p->reserved = floor;
    }
}

/* Take `bytes` from pool p; *id is the allocation's slot, from MAXALLOC + 1. */
static CUresult pool_take(struct CUmemPoolHandle_st *p, uint64_t bytes, unsigned long long *id)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t need = (bytes + GRANULE - 1) / GRANULE * GRANULE;
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&lock);
    int dev = p->dev, cached = p->reserved - p->used >= need;
    if (cached || (need <= total[dev] && used[dev] <= total[dev] - need)) {
        for (int i = 0; i < MAXALLOC; i++) {
            if (!pool_allocs[i].size) {
                pool_allocs[i].size = need;
                pool_allocs[i].pool = p;
                if (!cached) {
                    used[dev] += need;
                    p->reserved += need;
                }
                p->used += need;
                *id = (unsigned long long)(MAXALLOC + 1 + i);
                rc = CUDA_SUCCESS;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static CUresult give_back(unsigned long long id)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if (id > MAXALLOC && id <= 2 * MAXALLOC && pool_allocs[id - MAXALLOC - 1].size) {
        struct CUmemPoolHandle_st *p = pool_allocs[id - MAXALLOC - 1].pool;
        p->used -= pool_allocs[id - MAXALLOC - 1].size;
        pool_allocs[id - MAXALLOC - 1].size = 0;
        pool_release(p, p->threshold);
        rc = CUDA_SUCCESS;
    } else if (id >= 1 && id <= MAXALLOC && allocs[id - 1].size) {
        used[allocs[id - 1].dev] -= allocs[id - 1].size;
        allocs[id - 1].size = 0;
        rc = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Device pointers are the slot shifted past 2 MiB: small enough for v1. */
#define PTR_SHIFT 21

static CUresult alloc_here(CUdeviceptr *dptr, uint64_t bytes)
{
    int dev;
    unsigned long long id;
    CUresult rc = ctx_dev(&dev);
    if (rc == CUDA_SUCCESS)
        rc = take(dev, bytes, &id);
    if (rc == CUDA_SUCCESS)
        *dptr = id << PTR_SHIFT;
    return rc;
}

/* An allocation on the current device by exported variant `name`. */
static CUresult counted_alloc(const char *name, CUdeviceptr *dptr, uint64_t bytes)
{
    count(name);
    return alloc_here(dptr, bytes);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    return counted_alloc("cuMemAlloc_v2", dptr, bytesize);
}

EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    CUdeviceptr p;
    CUresult rc = counted_alloc("cuMemAlloc", &p, bytesize);
    if (rc == CUDA_SUCCESS)
        *dptr = (unsigned int)p;
    return rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elemsize)
{
    count("cuMemAllocPitch_v2");
    (void)elemsize;
    size_t p = (width + 511) / 512 * 512;
    if (height && p > SIZE_MAX / height)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = alloc_here(dptr, (uint64_t)p * height);
    if (rc == CUDA_SUCCESS)
        *pitch = p;
    return rc;
}

/* A stream-ordered allocation by exported variant `name` from pool (NULL:
 * the current device's). */
static CUresult pool_alloc(const char *name, CUdeviceptr *dptr, uint64_t bytes,
                           CUmemoryPool pool)
{
    count(name);
    int dev;
    unsigned long long id;
    CUresult rc = ctx_dev(&dev);
    if (rc == CUDA_SUCCESS)
        rc = pool_take(pool ? pool : &pools[dev], bytes, &id);
    if (rc == CUDA_SUCCESS)
        *dptr = id << PTR_SHIFT;
    return rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    (void)stream;
    return pool_alloc("cuMemAllocAsync", dptr, bytesize, NULL);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    (void)stream;
    return pool_alloc("cuMemAllocAsync_ptsz", dptr, bytesize, NULL);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream stream)
{
    (void)stream;
    return pool_alloc("cuMemAllocFromPoolAsync", dptr, bytesize, pool);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream)
{
    (void)stream;
    return pool_alloc("cuMemAllocFromPoolAsync_ptsz", dptr, bytesize, pool);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    return give_back(dptr >> PTR_SHIFT);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    (void)stream;
    count("cuMemFreeAsync");
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    unsigned long long id = dptr >> PTR_SHIFT;
    return id > MAXALLOC ? give_back(id) : CUDA_ERROR_INVALID_VALUE;
}

/* ---- memory pools ---- */

EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult rc = check_dev(dev);
    if (rc == CUDA_SUCCESS)
        *pool = &pools[dev];
    return rc;
}

EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetMemPool(pool, dev);
}

EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !value)
        return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v;
    pthread_mutex_lock(&lock);
    v = attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ? pool->threshold
      : attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT ? pool->reserved
      : attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? pool->used : UINT64_MAX;
    pthread_mutex_unlock(&lock);
    if (v == UINT64_MAX && attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(value, &v, sizeof v);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool || !value || attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    memcpy(&pool->threshold, value, sizeof pool->threshold);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    pool_release(pool, keep);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    count("cuMemCreate");
    if (!prop || flags || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_dev(prop->location.id);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (size % GRANULE)
        return CUDA_ERROR_INVALID_VALUE; /* not a multiple of the granularity */
    return take(prop->location.id, size, handle);
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    if (!inited)
        return CUDA_ERROR_NOT_INITIALIZED;
    return give_back(handle);
}

/* ---- cuGetProcAddress ---- */

/* The thunks of FAKE_CUDA_GPA_THUNKS: the same work at other addresses. */
static CUresult thunk_totalmem_v2(size_t *b, CUdevice d) { return cuDeviceTotalMem_v2(b, d); }
static CUresult thunk_totalmem(unsigned int *b, CUdevice d) { return cuDeviceTotalMem(b, d); }
static CUresult thunk_getinfo_v2(size_t *f, size_t *t) { return cuMemGetInfo_v2(f, t); }
static CUresult thunk_getinfo(unsigned int *f, unsigned int *t) { return cuMemGetInfo(f, t); }
static CUresult thunk_alloc_v2(CUdeviceptr *p, size_t n) { return cuMemAlloc_v2(p, n); }
static CUresult thunk_alloc(unsigned int *p, unsigned int n) { return cuMemAlloc(p, n); }
static CUresult thunk_pitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e)
{
    return cuMemAllocPitch_v2(p, pitch, w, h, e);
}
static CUresult thunk_async(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }
static CUresult thunk_async_ptsz(CUdeviceptr *p, size_t n, CUstream s)
{
    return cuMemAllocAsync_ptsz(p, n, s);
}
static CUresult thunk_pool(CUdeviceptr *p, size_t n, CUmemoryPool m, CUstream s)
{
    return cuMemAllocFromPoolAsync(p, n, m, s);
}
static CUresult thunk_pool_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool m, CUstream s)
{
    return cuMemAllocFromPoolAsync_ptsz(p, n, m, s);
}
static CUresult thunk_create(CUmemGenericAllocationHandle *h, size_t n,
                             const CUmemAllocationProp *prop, unsigned long long f)
{
    return cuMemCreate(h, n, prop, f);
}
static CUresult thunk_gpa_v2(const char *s, void **p, int v, cuuint64_t f, int *st)
{
    return cuGetProcAddress_v2(s, p, v, f, st);
}
static CUresult thunk_gpa(const char *s, void **p, int v, cuuint64_t f)
{
    return cuGetProcAddress(s, p, v, f);
}

/*
 * The driver's table: base name, the versions [lo, hi) a variant answers,
 * the per-thread-stream flag it needs (-1: either), and the thunk.
 */
static const struct entry {
    const char *base;
    int lo, hi, ptsz;
    void *fn, *thunk;
} table[] = {
    { "cuInit", 0, INT_MAX, -1, (void *)cuInit, NULL },
    { "cuDeviceGet", 0, INT_MAX, -1, (void *)cuDeviceGet, NULL },
    { "cuDeviceGetCount", 0, INT_MAX, -1, (void *)cuDeviceGetCount, NULL },
    { "cuDevicePrimaryCtxRetain", 0, INT_MAX, -1, (void *)cuDevicePrimaryCtxRetain, NULL },
    { "cuDevicePrimaryCtxRelease", 11000, INT_MAX, -1, (void *)cuDevicePrimaryCtxRelease_v2, NULL },
    { "cuDevicePrimaryCtxGetState", 0, INT_MAX, -1, (void *)cuDevicePrimaryCtxGetState, NULL },
    { "cuCtxSetCurrent", 0, INT_MAX, -1, (void *)cuCtxSetCurrent, NULL },
    { "cuCtxGetCurrent", 0, INT_MAX, -1, (void *)cuCtxGetCurrent, NULL },
    { "cuCtxPushCurrent", 4000, INT_MAX, -1, (void *)cuCtxPushCurrent_v2, NULL },
    { "cuCtxPopCurrent", 4000, INT_MAX, -1, (void *)cuCtxPopCurrent_v2, NULL },
    { "cuCtxGetDevice", 0, INT_MAX, -1, (void *)cuCtxGetDevice, NULL },
    { "cuDeviceTotalMem", 3020, INT_MAX, -1, (void *)cuDeviceTotalMem_v2, (void *)thunk_totalmem_v2 },
    { "cuDeviceTotalMem", 0, 3020, -1, (void *)cuDeviceTotalMem, (void *)thunk_totalmem },
    { "cuMemGetInfo", 3020, INT_MAX, -1, (void *)cuMemGetInfo_v2, (void *)thunk_getinfo_v2 },
    { "cuMemGetInfo", 0, 3020, -1, (void *)cuMemGetInfo, (void *)thunk_getinfo },
    { "cuMemAlloc", 3020, INT_MAX, -1, (void *)cuMemAlloc_v2, (void *)thunk_alloc_v2 },
    { "cuMemAlloc", 0, 3020, -1, (void *)cuMemAlloc, (void *)thunk_alloc },
    { "cuMemAllocPitch", 3020, INT_MAX, -1, (void *)cuMemAllocPitch_v2, (void *)thunk_pitch_v2 },
    { "cuMemFree", 3020, INT_MAX, -1, (void *)cuMemFree_v2, NULL },
    { "cuMemFreeAsync", 11020, INT_MAX, -1, (void *)cuMemFreeAsync, NULL },
    { "cuDeviceGetMemPool", 11020, INT_MAX, -1, (void *)cuDeviceGetMemPool, NULL },
    { "cuDeviceGetDefaultMemPool", 11020, INT_MAX, -1, (void *)cuDeviceGetDefaultMemPool, NULL },
    { "cuMemPoolGetAttribute", 11020, INT_MAX, -1, (void *)cuMemPoolGetAttribute, NULL },
    { "cuMemPoolSetAttribute", 11020, INT_MAX, -1, (void *)cuMemPoolSetAttribute, NULL },
    { "cuMemPoolTrimTo", 11020, INT_MAX, -1, (void *)cuMemPoolTrimTo, NULL },
    { "cuMemAllocAsync", 11020, INT_MAX, 0, (void *)cuMemAllocAsync, (void *)thunk_async },
    { "cuMemAllocAsync", 11020, INT_MAX, 1, (void *)cuMemAllocAsync_ptsz, (void *)thunk_async_ptsz },
    { "cuMemAllocFromPoolAsync", 11020, INT_MAX, 0, (void *)cuMemAllocFromPoolAsync,
      (void *)thunk_pool },
    { "cuMemAllocFromPoolAsync", 11020, INT_MAX, 1, (void *)cuMemAllocFromPoolAsync_ptsz,
      (void *)thunk_pool_ptsz },
    { "cuMemCreate", 10020, INT_MAX, -1, (void *)cuMemCreate, (void *)thunk_create },
    { "cuMemRelease", 10020, INT_MAX, -1, (void *)cuMemRelease, NULL },
    { "cuGetProcAddress", 12000, INT_MAX, -1, (void *)cuGetProcAddress_v2, (void *)thunk_gpa_v2 },
    { "cuGetProcAddress", 0, 12000, -1, (void *)cuGetProcAddress, (void *)thunk_gpa },
};

static void *lookup(const char *symbol, int version, cuuint64_t flags)
{
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const char *t = getenv("FAKE_CUDA_GPA_THUNKS");
    int thunks = t && strcmp(t, "1") == 0;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const struct entry *e = &table[i];
        if (strcmp(e->base, symbol) == 0 && version >= e->lo && version < e->hi &&
            (e->ptsz < 0 || e->ptsz == ptsz))
            return thunks && e->thunk ? e->thunk : e->fn;
    }
    return NULL;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, int *symbolStatus)
{
    count("cuGetProcAddress_v2");
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = lookup(symbol, cudaVersion, flags);
    if (symbolStatus)
        *symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    count("cuGetProcAddress");
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = lookup(symbol, cudaVersion, flags);
    return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
