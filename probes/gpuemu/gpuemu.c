/* SPDX-License-Identifier: MIT */
/*
 * gpuemu: an LD_PRELOAD library that makes a big GPU look like a smaller
 * one to any program that reaches the CUDA driver or NVML (PyTorch, JAX,
 * plain C), so that autobatch can tune for a 24 GiB card on an 80 GiB one
 * (--emulate-gpu-memory).
 *
 * Contract.  AUTOBATCH_EMULATE_GPU_MEMORY=<bytes> (decimal) is read once,
 * at load.  Unset, empty or 0: every hook only forwards.  Not a number:
 * the same, after one line on stderr.  Otherwise, with S that size, T a
 * device's real total and F its real free memory at the moment, a device
 * with S < T reads as a card of S bytes with everything the real one has
 * in use:
 *
 *     total = S,  free = max(0, F - (T - S)),  used = total - free
 *
 * which is the real card with T - S bytes held back.  Nothing is counted
 * here: every answer comes from the driver's own numbers of the moment, so
 * the view is right across processes sharing the GPU and across frees we
 * never see.  An allocation is refused with CUDA_ERROR_OUT_OF_MEMORY when
 * its size rounded up to 2 MiB is more than that free memory, and is
 * forwarded otherwise.  A device with S >= T is left as it is.
 *
 * Stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync:
 * PyTorch's backend:cudaMallocAsync) come from a memory pool that keeps
 * what it got from the driver (PyTorch sets its release threshold to the
 * maximum).  That reserve is already held on the card, so the free memory
 * above counts it; a request the pool's reserve can hold (the driver's own
 * counters: RESERVED_MEM_CURRENT less USED_MEM_CURRENT) goes ahead
 * ungated, and only one the pool must get from the driver is judged as
 * above.  The counters are bytes: a reserve too fragmented for a request
 * it could hold by count lets the pool grow past the emulated size.  When
 * the pool cannot be asked, every request is judged.
 * AUTOBATCH_EMULATE_GPU_LOG=<path> appends one line the first time a
 * device is shrunk and one line per refused allocation.
 *
 * How calls reach us.  A program gets a driver function in one of four
 * ways, and each must end in a hook:
 *   1. it calls the exported symbol: the preload interposes it;
 *   2. dlopen("libcuda.so.1") + dlsym(handle, "cuMemAlloc_v2"): we hook
 *      dlsym itself and hand back our wrapper for the names we hook;
 *   3. cuGetProcAddress(_v2)("cuMemAlloc", ver, flags): the driver picks a
 *      variant (cuMemAlloc_v2, cuMemAllocAsync_ptsz...); we find which one
 *      it returned, remember that real pointer in the variant's slot and
 *      hand back the variant's wrapper.  Asked for "cuGetProcAddress", we
 *      hand back our own cuGetProcAddress hook;
 *   4. NVML by dlsym, as in 2.
 * CUDA 13's runtime takes cuGetProcAddress_v2 by dlsym and everything
 * else through it: 2 then 3.
 *
 * Each hooked variant has a slot holding its real function: filled by the
 * real dlsym or cuGetProcAddress answer that we replaced, or looked up on
 * first use (RTLD_NEXT, then the already loaded libcuda.so.1 or
 * libnvidia-ml.so.1 by dlopen(RTLD_NOLOAD), for a driver loaded with
 * RTLD_LOCAL).  Our own functions never enter a slot, so a wrapper cannot
 * call itself.  A missing real function answers CUDA_ERROR_NOT_FOUND or
 * NVML_ERROR_FUNCTION_NOT_FOUND, as the driver would.
 *
 * dlsym(RTLD_NEXT, ...) is resolved relative to the caller, whom glibc
 * finds by its return address; every lookup we do not change is therefore
 * a tail call to the real dlsym (this file is built with -O2 for that;
 * the tests check it), and RTLD_NEXT lookups are never changed: they are
 * how other interposers find what comes after them.
 *
 * This library must not print on stdout, allocate in hooks or abort its
 * host; it is built without sanitizers (their runtime would have to come
 * first in every program it is loaded into) and without the CUDA headers,
 * so it builds everywhere: the few driver declarations it needs are made by
 * hand in driver_abi.h, which the fake driver of the tests shares.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "driver_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* Allocations are judged in the driver's large-page granule. */
#define GRANULE (2ULL << 20)

/* ---- the table of variants ---- */

/*
 * Every driver function we wrap or call (declared in driver_abi.h), one
 * row per exported variant.  The wrappers, like our dlsym, are exported
 * where they are defined below.
 */
enum variant {
    V_TOTALMEM_V2,
    V_TOTALMEM,
    V_GETINFO_V2,
    V_GETINFO,
    V_ALLOC_V2,
    V_ALLOC,
    V_PITCH_V2,
    V_ASYNC,
    V_ASYNC_PTSZ,
    V_POOL,
    V_POOL_PTSZ,
    V_CREATE,
    V_GPA_V2,
    V_GPA,
    V_NVML_MEM,
    V_NVML_MEM_V2,
    /* called by us, never handed out */
    V_CTX_GET_DEVICE,
    V_PRIMARY_STATE,
    V_PRIMARY_RETAIN,
    V_PRIMARY_RELEASE,
    V_CTX_PUSH,
    V_CTX_POP,
    V_GET_MEMPOOL,
    V_POOL_ATTR,
    V_COUNT
};

enum lib { LIB_CUDA, LIB_NVML };

/*
 * A variant: its exported name, its wrapper (NULL for functions we only
 * call), and for cuGetProcAddress the base name it is asked for with the
 * rule the driver follows to pick it: cudaVersion in [ver_lo, ver_hi) and
 * the per-thread-stream flag (ptsz) set, clear, or either (-1).
 */
struct variant_info {
    const char *name;
    enum lib lib;
    void *hook;
    const char *base;
    int ver_lo, ver_hi, ptsz;
};

static const struct variant_info variants[V_COUNT] = {
    [V_TOTALMEM_V2] = { "cuDeviceTotalMem_v2", LIB_CUDA, (void *)cuDeviceTotalMem_v2,
                        "cuDeviceTotalMem", 3020, INT_MAX, -1 },
    [V_TOTALMEM] = { "cuDeviceTotalMem", LIB_CUDA, (void *)cuDeviceTotalMem, "cuDeviceTotalMem",
                     0, 3020, -1 },
    [V_GETINFO_V2] = { "cuMemGetInfo_v2", LIB_CUDA, (void *)cuMemGetInfo_v2, "cuMemGetInfo", 3020,
                       INT_MAX, -1 },
    [V_GETINFO] = { "cuMemGetInfo", LIB_CUDA, (void *)cuMemGetInfo, "cuMemGetInfo", 0, 3020, -1 },
    [V_ALLOC_V2] = { "cuMemAlloc_v2", LIB_CUDA, (void *)cuMemAlloc_v2, "cuMemAlloc", 3020, INT_MAX,
                     -1 },
    [V_ALLOC] = { "cuMemAlloc", LIB_CUDA, (void *)cuMemAlloc, "cuMemAlloc", 0, 3020, -1 },
    [V_PITCH_V2] = { "cuMemAllocPitch_v2", LIB_CUDA, (void *)cuMemAllocPitch_v2, "cuMemAllocPitch",
                     3020, INT_MAX, -1 },
    [V_ASYNC] = { "cuMemAllocAsync", LIB_CUDA, (void *)cuMemAllocAsync, "cuMemAllocAsync", 0,
                  INT_MAX, 0 },
    [V_ASYNC_PTSZ] = { "cuMemAllocAsync_ptsz", LIB_CUDA, (void *)cuMemAllocAsync_ptsz,
                       "cuMemAllocAsync", 0, INT_MAX, 1 },
    [V_POOL] = { "cuMemAllocFromPoolAsync", LIB_CUDA, (void *)cuMemAllocFromPoolAsync,
                 "cuMemAllocFromPoolAsync", 0, INT_MAX, 0 },
    [V_POOL_PTSZ] = { "cuMemAllocFromPoolAsync_ptsz", LIB_CUDA,
                      (void *)cuMemAllocFromPoolAsync_ptsz, "cuMemAllocFromPoolAsync", 0, INT_MAX,
                      1 },
    [V_CREATE] = { "cuMemCreate", LIB_CUDA, (void *)cuMemCreate, "cuMemCreate", 0, INT_MAX, -1 },
    [V_GPA_V2] = { "cuGetProcAddress_v2", LIB_CUDA, (void *)cuGetProcAddress_v2,
                   "cuGetProcAddress", 12000, INT_MAX, -1 },
    [V_GPA] = { "cuGetProcAddress", LIB_CUDA, (void *)cuGetProcAddress, "cuGetProcAddress", 0,
                12000, -1 },
    [V_NVML_MEM] = { "nvmlDeviceGetMemoryInfo", LIB_NVML, (void *)nvmlDeviceGetMemoryInfo, NULL,
                     0, 0, -1 },
    [V_NVML_MEM_V2] = { "nvmlDeviceGetMemoryInfo_v2", LIB_NVML, (void *)nvmlDeviceGetMemoryInfo_v2,
                        NULL, 0, 0, -1 },
    [V_CTX_GET_DEVICE] = { "cuCtxGetDevice", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_PRIMARY_STATE] = { "cuDevicePrimaryCtxGetState", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_PRIMARY_RETAIN] = { "cuDevicePrimaryCtxRetain", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_PRIMARY_RELEASE] = { "cuDevicePrimaryCtxRelease_v2", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_CTX_PUSH] = { "cuCtxPushCurrent_v2", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_CTX_POP] = { "cuCtxPopCurrent_v2", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_GET_MEMPOOL] = { "cuDeviceGetMemPool", LIB_CUDA, NULL, NULL, 0, 0, -1 },
    [V_POOL_ATTR] = { "cuMemPoolGetAttribute", LIB_CUDA, NULL, NULL, 0, 0, -1 },
};

static const char *const lib_sonames[] = { "libcuda.so.1", "libnvidia-ml.so.1" };

/* The real function of each variant, once known. */
static _Atomic(void *) real_fn[V_COUNT];

/* ---- state read once at load ---- */

typedef void *(*dlsym_fn)(void *, const char *);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static dlsym_fn real_dlsym_ptr;
static uint64_t emu_size;      /* S; 0: transparent */
static char log_path[4096];    /* empty: no log */
static atomic_ullong logged;   /* bit d: device d's first line is written */

static void init(void)
{
    static const char *const versions[] = { "GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17" };
    for (size_t i = 0; i < sizeof versions / sizeof *versions && !real_dlsym_ptr; i++)
        real_dlsym_ptr = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);

    const char *v = getenv("AUTOBATCH_EMULATE_GPU_MEMORY");
    if (v && *v) {
        uint64_t n = 0;
        const char *p = v;
        for (; *p >= '0' && *p <= '9'; p++) {
            unsigned d = (unsigned)(*p - '0');
            if (n > (UINT64_MAX - d) / 10)
                break;
            n = n * 10 + d;
        }
        if (*p)
            fprintf(stderr,
                    "autobatch-gpuemu: ignoring AUTOBATCH_EMULATE_GPU_MEMORY=%s "
                    "(not a decimal number of bytes)\n", v);
        else
            emu_size = n;
    }
    const char *l = getenv("AUTOBATCH_EMULATE_GPU_LOG");
    if (emu_size && l && strlen(l) < sizeof log_path)
        strcpy(log_path, l);
}

/* Read the environment at load, so that a bad value is reported at once. */
__attribute__((constructor)) static void init_at_load(void)
{
    pthread_once(&init_once, init);
}

static uint64_t size_wanted(void)
{
    pthread_once(&init_once, init);
    return emu_size;
}

static dlsym_fn real_dlsym(void)
{
    pthread_once(&init_once, init);
    return real_dlsym_ptr;
}

/* ---- the log ---- */

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...)
{
    if (!log_path[0])
        return;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "autobatch-gpuemu: pid %ld: ", (long)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if ((size_t)n >= sizeof buf - 1)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    /* O_APPEND: lines from the processes of one trial do not overwrite each other. */
    int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, buf, (size_t)n);
    (void)w;
    close(fd);
}

/* Say once per device (NVML's handles are all device -1) that it is shrunk. */
static void log_active(int dev, uint64_t real_total)
{
    unsigned long long bit = 1ULL << (dev >= 0 && dev < 63 ? dev : 63);
    if (atomic_fetch_or(&logged, bit) & bit)
        return;
    if (dev >= 0)
        log_line("emulating %llu of %llu bytes on cuda device %d", (unsigned long long)emu_size,
                 (unsigned long long)real_total, dev);
    else
        log_line("emulating %llu of %llu bytes through nvml", (unsigned long long)emu_size,
                 (unsigned long long)real_total);
}

/* ---- finding the real functions ---- */

static int is_ours(const void *p)
{
    if (p == (void *)dlsym)
        return 1;
    for (int v = 0; v < V_COUNT; v++)
        if (variants[v].hook && variants[v].hook == p)
            return 1;
    return 0;
}

/* The real function of variant v, or NULL where the driver has none. */
static void *resolve(enum variant v)
{
    void *p = atomic_load_explicit(&real_fn[v], memory_order_acquire);
    if (p)
        return p;
    dlsym_fn look = real_dlsym();
    if (!look)
        return NULL;
    p = look(RTLD_NEXT, variants[v].name);
    if (!p || is_ours(p)) {
        /* A driver loaded with RTLD_LOCAL is not after us, but is loaded. */
        void *h = dlopen(lib_sonames[variants[v].lib], RTLD_LAZY | RTLD_NOLOAD);
        p = h ? look(h, variants[v].name) : NULL;
        if (h)
            dlclose(h);
    }
    if (!p || is_ours(p))
        return NULL;
    atomic_store_explicit(&real_fn[v], p, memory_order_release);
    return p;
}

/* Remember p as variant v's real function and answer v's wrapper. */
static void *take_over(enum variant v, void *p)
{
    if (!is_ours(p))
        atomic_store_explicit(&real_fn[v], p, memory_order_release);
    return variants[v].hook;
}

/* The real function of variant v, as a pointer to driver function f. */
#define REAL(v, f) ((PFN(f))resolve(v))

/* ---- the emulated view ---- */

/*
 * Shrink a device of real total T with F free to the emulated size S:
 * returns 0 and leaves the numbers alone when S >= T (or no emulation).
 */
static int shrink(uint64_t real_total, uint64_t real_free, uint64_t *total, uint64_t *free)
{
    uint64_t s = size_wanted();
    if (!s || s >= real_total)
        return 0;
    uint64_t held = real_total - s;
    *total = s;
    *free = real_free > held ? real_free - held : 0;
    return 1;
}

/* The device of the current context; -1 if there is none. */
static CUdevice current_device(void)
{
    PFN(cuCtxGetDevice) get = REAL(V_CTX_GET_DEVICE, cuCtxGetDevice);
    CUdevice d;
    return get && get(&d) == CUDA_SUCCESS ? d : -1;
}

/*
 * Device dev's real free bytes.  Another device than the current one is
 * asked through its primary context, and only when that context is
 * already active: making one would take hundreds of MiB behind the
 * program's back.  Returns -1 when it cannot tell.
 */
static int real_free(CUdevice dev, uint64_t *free)
{
    PFN(cuMemGetInfo_v2) info = REAL(V_GETINFO_V2, cuMemGetInfo_v2);
    if (!info)
        return -1;
    size_t f, t;
    if (current_device() == dev)
        return info(&f, &t) == CUDA_SUCCESS ? (*free = f, 0) : -1;

    PFN(cuDevicePrimaryCtxGetState) state = REAL(V_PRIMARY_STATE, cuDevicePrimaryCtxGetState);
    PFN(cuDevicePrimaryCtxRetain) retain = REAL(V_PRIMARY_RETAIN, cuDevicePrimaryCtxRetain);
    PFN(cuDevicePrimaryCtxRelease_v2) release =
        REAL(V_PRIMARY_RELEASE, cuDevicePrimaryCtxRelease_v2);
    PFN(cuCtxPushCurrent_v2) push = REAL(V_CTX_PUSH, cuCtxPushCurrent_v2);
    PFN(cuCtxPopCurrent_v2) pop = REAL(V_CTX_POP, cuCtxPopCurrent_v2);
    unsigned int flags;
    int active = 0;
    CUcontext ctx, popped;
    if (!state || !retain || !release || !push || !pop ||
        state(dev, &flags, &active) != CUDA_SUCCESS || !active)
        return -1;
    if (retain(&ctx, dev) != CUDA_SUCCESS)
        return -1;
    int rc = -1;
    if (push(ctx) == CUDA_SUCCESS) {
        if (info(&f, &t) == CUDA_SUCCESS) {
            *free = f;
            rc = 0;
        }
        pop(&popped);
    }
    release(dev);
    return rc;
}

/*
 * Whether `call` may allocate `bytes` on device dev (-1: the current
 * context's): CUDA_SUCCESS to go ahead, CUDA_ERROR_OUT_OF_MEMORY when the
 * emulated card has no room.  When the numbers cannot be read the call
 * goes ahead and the driver answers it.
 */
static CUresult admit(const char *call, CUdevice dev, uint64_t bytes)
{
    if (!size_wanted())
        return CUDA_SUCCESS;
    if (dev < 0 && (dev = current_device()) < 0)
        return CUDA_SUCCESS;
    PFN(cuDeviceTotalMem_v2) totalmem = REAL(V_TOTALMEM_V2, cuDeviceTotalMem_v2);
    size_t t;
    uint64_t f, total, free;
    if (!totalmem || totalmem(&t, dev) != CUDA_SUCCESS || real_free(dev, &f) != 0 ||
        !shrink(t, f, &total, &free))
        return CUDA_SUCCESS;
    log_active(dev, t);
    uint64_t need = bytes > UINT64_MAX - (GRANULE - 1) ? UINT64_MAX
                                                       : (bytes + GRANULE - 1) / GRANULE * GRANULE;
    if (need <= free)
        return CUDA_SUCCESS;
    log_line("refused %s of %llu bytes on cuda device %d: %llu of %llu bytes free", call,
             (unsigned long long)bytes, dev, (unsigned long long)free,
             (unsigned long long)total);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * admit() for a stream-ordered allocation from `pool` (NULL: the current
 * device's current pool, as cuMemAllocAsync uses): a request the pool's
 * reserve can hold takes nothing more from the card and goes ahead; any
 * other is judged by admit().
 */
static CUresult admit_pool(const char *call, CUmemoryPool pool, uint64_t bytes)
{
    if (!size_wanted())
        return CUDA_SUCCESS;
    CUdevice dev = current_device();
    if (dev < 0)
        return CUDA_SUCCESS;
    PFN(cuDeviceGetMemPool) getpool = REAL(V_GET_MEMPOOL, cuDeviceGetMemPool);
    PFN(cuMemPoolGetAttribute) attr = REAL(V_POOL_ATTR, cuMemPoolGetAttribute);
    if (!pool && (!getpool || getpool(&pool, dev) != CUDA_SUCCESS))
        pool = NULL;
    cuuint64_t reserved = 0, used = 0;
    if (pool && attr && attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
        attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS && reserved > used &&
        bytes <= reserved - used)
        return CUDA_SUCCESS;
    return admit(call, dev, bytes);
}

/* ---- memory queries ---- */

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    PFN(cuDeviceTotalMem_v2) real = REAL(V_TOTALMEM_V2, cuDeviceTotalMem_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(bytes, dev);
    uint64_t total, free;
    if (rc == CUDA_SUCCESS && bytes && shrink(*bytes, 0, &total, &free)) {
        log_active(dev, *bytes);
        *bytes = total;
    }
    return rc;
}

EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    PFN(cuDeviceTotalMem) real = REAL(V_TOTALMEM, cuDeviceTotalMem);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(bytes, dev);
    size_t t;
    if (rc == CUDA_SUCCESS && bytes && size_wanted() && cuDeviceTotalMem_v2(&t, dev) == CUDA_SUCCESS)
        *bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return rc;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    PFN(cuMemGetInfo_v2) real = REAL(V_GETINFO_V2, cuMemGetInfo_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(free, total);
    uint64_t t, f;
    if (rc == CUDA_SUCCESS && free && total && shrink(*total, *free, &t, &f)) {
        log_active(current_device(), *total);
        *free = f;
        *total = t;
    }
    return rc;
}

EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    PFN(cuMemGetInfo) real = REAL(V_GETINFO, cuMemGetInfo);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(free, total);
    size_t f, t;
    if (rc == CUDA_SUCCESS && free && total && size_wanted() &&
        cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS) {
        *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
        *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    }
    return rc;
}

/* ---- allocations ---- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    PFN(cuMemAlloc_v2) real = REAL(V_ALLOC_V2, cuMemAlloc_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit("cuMemAlloc_v2", -1, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize) : rc;
}

EXPORT CUresult cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    PFN(cuMemAlloc) real = REAL(V_ALLOC, cuMemAlloc);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit("cuMemAlloc", -1, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize) : rc;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elemsize)
{
    PFN(cuMemAllocPitch_v2) real = REAL(V_PITCH_V2, cuMemAllocPitch_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    uint64_t bytes = height && width > UINT64_MAX / height ? UINT64_MAX : (uint64_t)width * height;
    CUresult rc = admit("cuMemAllocPitch_v2", -1, bytes);
    return rc == CUDA_SUCCESS ? real(dptr, pitch, width, height, elemsize) : rc;
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    PFN(cuMemAllocAsync) real = REAL(V_ASYNC, cuMemAllocAsync);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit_pool("cuMemAllocAsync", NULL, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize, stream) : rc;
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream stream)
{
    PFN(cuMemAllocAsync_ptsz) real = REAL(V_ASYNC_PTSZ, cuMemAllocAsync_ptsz);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit_pool("cuMemAllocAsync_ptsz", NULL, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize, stream) : rc;
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream stream)
{
    PFN(cuMemAllocFromPoolAsync) real = REAL(V_POOL, cuMemAllocFromPoolAsync);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit_pool("cuMemAllocFromPoolAsync", pool, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize, pool, stream) : rc;
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream stream)
{
    PFN(cuMemAllocFromPoolAsync_ptsz) real = REAL(V_POOL_PTSZ, cuMemAllocFromPoolAsync_ptsz);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = admit_pool("cuMemAllocFromPoolAsync_ptsz", pool, bytesize);
    return rc == CUDA_SUCCESS ? real(dptr, bytesize, pool, stream) : rc;
}

/* PyTorch's expandable segments map memory made here; it names its device. */
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    PFN(cuMemCreate) real = REAL(V_CREATE, cuMemCreate);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = CUDA_SUCCESS;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id >= 0)
        rc = admit("cuMemCreate", prop->location.id, size);
    return rc == CUDA_SUCCESS ? real(handle, size, prop, flags) : rc;
}

/* ---- cuGetProcAddress ---- */

/*
 * The variant that cuGetProcAddress answered `got` for base name `symbol`:
 * the one whose exported function it is, else the one the driver's rule
 * picks for that version and flags; -1 for a name we leave alone.
 */
static int variant_of(const char *symbol, const void *got, int version, cuuint64_t flags)
{
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int by_rule = -1, named = 0;
    for (int v = 0; v < V_COUNT; v++) {
        const struct variant_info *in = &variants[v];
        if (!in->base || strcmp(in->base, symbol) != 0)
            continue;
        named = 1;
        if (resolve((enum variant)v) == got)
            return v;
        if (version >= in->ver_lo && version < in->ver_hi && (in->ptsz < 0 || in->ptsz == ptsz))
            by_rule = v;
    }
    return named ? by_rule : -1;
}

static void *hand_out(const char *symbol, void *got, int version, cuuint64_t flags)
{
    if (!symbol || !got || !size_wanted())
        return got;
    int v = variant_of(symbol, got, version, flags);
    return v < 0 ? got : take_over((enum variant)v, got);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, int *symbolStatus)
{
    PFN(cuGetProcAddress_v2) real = REAL(V_GPA_V2, cuGetProcAddress_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = hand_out(symbol, *pfn, cudaVersion, flags);
    return rc;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    PFN(cuGetProcAddress) real = REAL(V_GPA, cuGetProcAddress);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult rc = real(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && pfn)
        *pfn = hand_out(symbol, *pfn, cudaVersion, flags);
    return rc;
}

/* ---- NVML ---- */

/*
 * Shrink the total and free of an NVML answer in place, as shrink() does;
 * returns 0 and leaves them alone when the device stays as it is.
 */
static int shrink_nvml(unsigned long long *total, unsigned long long *free)
{
    uint64_t t, f;
    if (!shrink(*total, *free, &t, &f))
        return 0;
    log_active(-1, *total);
    *total = t;
    *free = f;
    return 1;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    PFN(nvmlDeviceGetMemoryInfo) real = REAL(V_NVML_MEM, nvmlDeviceGetMemoryInfo);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory && shrink_nvml(&memory->total, &memory->free))
        memory->used = memory->total - memory->free;
    return rc;
}

/*
 * In the v2 struct total = reserved + used + free: the driver's reserve
 * stays as it is, and `used` keeps meaning what is really in use.
 */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    PFN(nvmlDeviceGetMemoryInfo_v2) real = REAL(V_NVML_MEM_V2, nvmlDeviceGetMemoryInfo_v2);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t rc = real(device, memory);
    if (rc == NVML_SUCCESS && memory && shrink_nvml(&memory->total, &memory->free)) {
        unsigned long long in_use = memory->total - memory->free;
        memory->used = in_use > memory->reserved ? in_use - memory->reserved : 0;
    }
    return rc;
}

/* ---- dlsym ---- */

/* The variant exported under `symbol`, if we wrap it; -1 otherwise. */
static int hooked_name(const char *symbol)
{
    if (!symbol || (symbol[0] != 'c' && symbol[0] != 'n'))
        return -1;
    for (int v = 0; v < V_COUNT; v++)
        if (variants[v].hook && strcmp(variants[v].name, symbol) == 0)
            return v;
    return -1;
}

/* The slow path of dlsym, for names we wrap: not sensitive to its caller. */
static __attribute__((noinline)) void *dlsym_wrapped(dlsym_fn real, void *handle,
                                                     const char *symbol, int v)
{
    void *p = real(handle, symbol);
    return p ? take_over((enum variant)v, p) : NULL;
}

EXPORT void *dlsym(void *handle, const char *symbol)
{
    dlsym_fn real = real_dlsym();
    if (!real)
        return NULL;
    int v = handle != RTLD_NEXT && size_wanted() ? hooked_name(symbol) : -1;
    if (v >= 0)
        return dlsym_wrapped(real, handle, symbol, v);
    /* A tail call: glibc must see our caller's return address, not ours. */
    return real(handle, symbol);
}
