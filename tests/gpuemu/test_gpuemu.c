/* SPDX-License-Identifier: MIT */
/*
 * test_gpuemu: the GPU-memory emulation library (probes/gpuemu/gpuemu.c)
 * against the fake driver of this folder, through every way a program
 * reaches the driver.
 *
 *   test_gpuemu MODE S
 *
 * MODE says what the run must see: `emulated` (libautobatch-gpuemu.so is
 * preloaded with AUTOBATCH_EMULATE_GPU_MEMORY=S), `transparent` (it is
 * preloaded but the variable is unset, 0 or invalid) or `absent` (not
 * preloaded).  In the last two, S is only the size the allocations are
 * made against, so that the same calls that are refused under emulation
 * must succeed.  FAKE_GPU_TOTALS gives the fake devices' sizes, as to the
 * fakes.  With AUTOBATCH_EMULATE_GPU_LOG set, an emulated run checks the
 * log too.  GPUEMU_TEST_NO_OWNER=1: see check_owner.
 *
 * Built twice: test_gpuemu_linked is linked with the fake libcuda.so.1 and
 * libnvidia-ml.so.1 and also calls them directly and by
 * dlsym(RTLD_DEFAULT); test_gpuemu_dlopen only loads them with
 * dlopen(RTLD_LOCAL), as Python extensions and the CUDA runtime do.
 *
 * Prints one line per path on stdout; the first failed check prints
 * "FAIL (path): ..." on stderr and exits 1.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_abi.h"

#define GRANULE (2ULL << 20)
#define MIB (1ULL << 20)
#define NVML_RESERVED (32 * MIB) /* the fake NVML's */

/* ---- checks ---- */

static const char *path = "setup";
static long nchecks;

static void fail(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "FAIL (%s, test_gpuemu.c:%d): ", path, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        nchecks++;                                                                                 \
        if (!(cond))                                                                               \
            fail(__LINE__, __VA_ARGS__);                                                           \
    } while (0)

#define CHECK_EQ(what, got, want)                                                                  \
    do {                                                                                           \
        unsigned long long g_ = (got), w_ = (want);                                                \
        CHECK(g_ == w_, "%s is %llu, expected %llu", (what), g_, w_);                              \
    } while (0)

/* ---- what this run must see ---- */

static int emulated, preloaded;
static uint64_t S;
static int ndev;
static uint64_t T[4];

static uint64_t round_up(uint64_t n)
{
    return (n + GRANULE - 1) / GRANULE * GRANULE;
}

static int shrunk(int dev)
{
    return emulated && S < T[dev];
}

static uint64_t want_total(int dev)
{
    return shrunk(dev) ? S : T[dev];
}

/* Free memory with `used` bytes taken on dev: the emulated or the real. */
static uint64_t want_free(int dev, uint64_t used)
{
    if (shrunk(dev))
        return S > used ? S - used : 0;
    return T[dev] > used ? T[dev] - used : 0;
}

/* ---- the fake driver's own calls, which the library lets through ---- */

static void *hcuda, *hnvml;
static long (*fake_calls)(const char *);
static unsigned long long (*fake_used)(int);
static void (*fake_external_use)(int, unsigned long long);
static void (*fake_nvml_set_used)(unsigned int, unsigned long long);
static PFN(cuMemFree_v2) mem_free;
static PFN(cuMemRelease) mem_release;
static PFN(cuMemFreeAsync) mem_free_async;
static PFN(cuDeviceGetMemPool) get_mem_pool;
static PFN(cuMemPoolGetAttribute) pool_get;
static PFN(cuMemPoolSetAttribute) pool_set;
static PFN(cuMemPoolTrimTo) pool_trim;

static void *need(void *h, const char *name)
{
    void *p = dlsym(h, name);
    CHECK(p, "dlsym('%s'): %s", name, dlerror());
    return p;
}

/* Store the function address p (a void *, as dlsym answers) in fp. */
#define SET_FN(fp, p)                                                                              \
    do {                                                                                           \
        void *p_ = (p);                                                                            \
        memcpy(&(fp), &p_, sizeof p_);                                                             \
    } while (0)

#define NEED(fp, h, name) SET_FN(fp, need((h), (name)))

/*
 * Whether p is a function of the library whose file name holds `lib`.
 * GPUEMU_TEST_NO_OWNER=1 skips these checks, so that a run without the
 * library must fail on the numbers alone.
 */
static void check_owner(const char *what, void *p, const char *lib)
{
    Dl_info info;
    if (getenv("GPUEMU_TEST_NO_OWNER"))
        return;
    CHECK(p, "%s is NULL", what);
    CHECK(dladdr(p, &info) && info.dli_fname, "dladdr(%s) failed", what);
    CHECK(strstr(info.dli_fname, lib), "%s lives in '%s', expected %s", what, info.dli_fname, lib);
}

/* ---- one way to the driver ---- */

enum kind { K_ALLOC, K_PITCH, K_ASYNC, K_POOL, K_CREATE, K_COUNT };

struct api {
    const char *path;
    const char *owner; /* which library its functions must live in, if known */
    int ptsz;          /* async and pool are the _ptsz variants */
    PFN(cuDeviceTotalMem_v2) totalmem;
    PFN(cuMemGetInfo_v2) getinfo;
    PFN(cuMemAlloc_v2) alloc;
    PFN(cuMemAllocPitch_v2) pitch;
    PFN(cuMemAllocAsync) async;
    PFN(cuMemAllocFromPoolAsync) pool;
    PFN(cuMemCreate) create;
};

static const char *variant_name(const struct api *a, enum kind k)
{
    switch (k) {
    case K_ALLOC:
        return "cuMemAlloc_v2";
    case K_PITCH:
        return "cuMemAllocPitch_v2";
    case K_ASYNC:
        return a->ptsz ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync";
    case K_POOL:
        return a->ptsz ? "cuMemAllocFromPoolAsync_ptsz" : "cuMemAllocFromPoolAsync";
    default:
        return "cuMemCreate";
    }
}

static CUresult do_alloc(const struct api *a, enum kind k, int dev, uint64_t n,
                         unsigned long long *out)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult rc;
    switch (k) {
    case K_ALLOC:
        rc = a->alloc(&p, n);
        break;
    case K_PITCH:
        rc = a->pitch(&p, &pitch, n, 1, 4);
        break;
    case K_ASYNC:
        rc = a->async(&p, n, NULL);
        break;
    case K_POOL:
        rc = a->pool(&p, n, NULL, NULL);
        break;
    default: {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = dev;
        CUmemGenericAllocationHandle h = 0;
        rc = a->create(&h, n, &prop, 0);
        p = h;
    }
    }
    *out = p;
    return rc;
}

static void do_free(enum kind k, unsigned long long h)
{
    CUresult rc = k == K_CREATE ? mem_release(h) : mem_free(h);
    CHECK(rc == 0, "freeing %llu answered %d", h, rc);
}

/*
 * Allocate n bytes on dev with kind k and check the answer: refused with
 * CUDA_ERROR_OUT_OF_MEMORY by the emulation (the fake never called) when
 * it does not fit the emulated free memory, else whatever the fake says.  Keeps the memory
 * in *kept if asked, else frees it.
 */
static CUresult try_alloc(const struct api *a, enum kind k, int dev, uint64_t n,
                          unsigned long long *kept)
{
    const char *name = variant_name(a, k);
    uint64_t room = want_free(dev, fake_used(dev));
    CUresult want = round_up(n) <= room ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    long before = fake_calls(name);
    unsigned long long h;
    CUresult rc = do_alloc(a, k, dev, n, &h);
    char what[128];
    snprintf(what, sizeof what, "%s of %llu bytes on device %d (room %llu): result", name,
             (unsigned long long)n, dev, (unsigned long long)room);
    CHECK_EQ(what, rc, want);
    snprintf(what, sizeof what, "calls of the fake's %s after one of %llu bytes", name,
             (unsigned long long)n);
    CHECK_EQ(what, fake_calls(name), before + (shrunk(dev) && want ? 0 : 1));
    if (rc == 0) {
        if (kept)
            *kept = h;
        else
            do_free(k, h);
    }
    return rc;
}

static void check_info(const struct api *a)
{
    size_t f = 0, t = 0;
    CHECK(a->getinfo(&f, &t) == 0, "cuMemGetInfo_v2 failed");
    CHECK_EQ("cuMemGetInfo_v2 total", t, want_total(0));
    CHECK_EQ("cuMemGetInfo_v2 free", f, want_free(0, fake_used(0)));
}

/* The cap on device 0: the emulated free memory, or where it would be. */
static uint64_t cap0(void)
{
    uint64_t used = fake_used(0), lim = S < T[0] ? S : T[0];
    return lim > used ? lim - used : 0;
}

static void exercise(const struct api *a, enum kind k)
{
    uint64_t cap = cap0();
    unsigned long long h;
    /* Just above the cap: refused under emulation, fine on the real card. */
    try_alloc(a, k, 0, k == K_CREATE ? cap + GRANULE : cap + 1, NULL);
    /* Exactly the cap fits; then the emulated card is full. */
    CHECK(try_alloc(a, k, 0, cap, &h) == 0, "%s of the whole cap failed", variant_name(a, k));
    check_info(a);
    try_alloc(a, k, 0, GRANULE, NULL);
    /* Freed, the memory is there again. */
    do_free(k, h);
    check_info(a);
    try_alloc(a, k, 0, cap, NULL);
}

/* ---- the stream-ordered pool (backend:cudaMallocAsync) ---- */

static uint64_t pool_attr(CUmemoryPool pool, int attr)
{
    cuuint64_t v = 0;
    CHECK(pool_get(pool, attr, &v) == 0, "cuMemPoolGetAttribute(%d) failed", attr);
    return v;
}

/*
 * n bytes from the pool on device 0 (from_pool: cuMemAllocFromPoolAsync
 * naming it, else cuMemAllocAsync): a request the pool's reserve can hold
 * goes ahead under emulation, whatever the emulated free memory; one the
 * pool must get from the device is judged against that memory (refused
 * without calling the fake), or, on a card left as it is, the fake's own.
 */
static CUresult pool_try(const struct api *a, int from_pool, CUmemoryPool pool, uint64_t n,
                         unsigned long long *kept)
{
    const char *name = variant_name(a, from_pool ? K_POOL : K_ASYNC);
    uint64_t cached = pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) -
                      pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    uint64_t room = want_free(0, fake_used(0));
    int fits = round_up(n) <= cached || round_up(n) <= room;
    long before = fake_calls(name);
    CUdeviceptr p = 0;
    CUresult rc = from_pool ? a->pool(&p, n, pool, NULL) : a->async(&p, n, NULL);
    char what[160];
    snprintf(what, sizeof what, "%s of %llu bytes (pool reserve %llu free, room %llu): result",
             name, (unsigned long long)n, (unsigned long long)cached, (unsigned long long)room);
    CHECK_EQ(what, rc, fits ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY);
    snprintf(what, sizeof what, "calls of the fake's %s after one of %llu bytes", name,
             (unsigned long long)n);
    CHECK_EQ(what, fake_calls(name), before + (shrunk(0) && !fits ? 0 : 1));
    if (rc == 0)
        *kept = p;
    return rc;
}

static void pool_free(unsigned long long p)
{
    CUresult rc = mem_free_async(p, NULL);
    CHECK(rc == 0, "cuMemFreeAsync(%llu) answered %d", p, rc);
}

/*
 * PyTorch's cudaMallocAsync backend: the pool keeps what it got (release
 * threshold at the maximum), so a freed block is still held on the card
 * and a later request is served from it.  Before issue 25, item 7, that
 * request was judged against the card's free memory, which the reserve
 * had already used up, and refused.
 */
static void run_pool(const struct api *a, int from_pool)
{
    CUmemoryPool pool;
    CHECK(get_mem_pool(&pool, 0) == 0, "cuDeviceGetMemPool failed");
    cuuint64_t keep_all = UINT64_MAX, none = 0;
    CHECK(pool_set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all) == 0,
          "cuMemPoolSetAttribute failed");
    uint64_t cap = cap0(), half = round_up(cap / 2);
    unsigned long long h, h2, h3;
    /* The whole cap, from the card; freed, the pool keeps it. */
    CHECK(pool_try(a, from_pool, pool, cap, &h) == 0, "the cap from the pool failed");
    pool_free(h);
    CHECK_EQ("the pool's reserve after a free", pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
             round_up(cap));
    check_info(a);
    /* The reserve serves it again, though the emulated card has no free memory. */
    CHECK(pool_try(a, from_pool, pool, cap, &h) == 0, "the cap from the pool's reserve failed");
    /* Nothing left in the reserve or on the emulated card: refused. */
    if (pool_try(a, from_pool, pool, GRANULE, &h2) == 0)
        pool_free(h2);
    pool_free(h);
    /* The reserve counts for other allocations: the emulated card is full. */
    try_alloc(a, K_ALLOC, 0, GRANULE, NULL);
    /* Half the reserve serves half; the rest cannot serve the whole. */
    CHECK(pool_try(a, from_pool, pool, half, &h) == 0, "half the reserve failed");
    if (pool_try(a, from_pool, pool, cap, &h3) == 0)
        pool_free(h3);
    pool_free(h);
    /* Trimmed, the memory is the card's again. */
    CHECK(pool_trim(pool, 0) == 0, "cuMemPoolTrimTo failed");
    CHECK(pool_set(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &none) == 0,
          "cuMemPoolSetAttribute failed");
    CHECK_EQ("the pool's reserve after a trim", pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
             0);
    check_info(a);
    try_alloc(a, K_ALLOC, 0, cap, NULL);
}

static void run_api(const struct api *a)
{
    path = a->path;
    if (a->owner) {
        check_owner("cuDeviceTotalMem_v2", (void *)a->totalmem, a->owner);
        check_owner("cuMemGetInfo_v2", (void *)a->getinfo, a->owner);
        check_owner("cuMemAlloc_v2", (void *)a->alloc, a->owner);
        check_owner("cuMemAllocPitch_v2", (void *)a->pitch, a->owner);
        check_owner(variant_name(a, K_ASYNC), (void *)a->async, a->owner);
        check_owner(variant_name(a, K_POOL), (void *)a->pool, a->owner);
        check_owner("cuMemCreate", (void *)a->create, a->owner);
    }

    for (int d = 0; d < ndev; d++) {
        size_t t = 0;
        CHECK(a->totalmem(&t, d) == 0, "cuDeviceTotalMem_v2(%d) failed", d);
        CHECK_EQ("cuDeviceTotalMem_v2", t, want_total(d));
    }
    check_info(a);
    for (int k = 0; k < K_COUNT; k++)
        exercise(a, (enum kind)k);
    run_pool(a, 0);
    run_pool(a, 1);
    CHECK_EQ("bytes in use after the path", fake_used(0), 0);
    printf("ok: %s\n", a->path);
}

/* ---- the ways to get the functions ---- */

static const char *wrapped_owner(void)
{
    return emulated ? "autobatch-gpuemu" : "libcuda.so";
}

/* Through dlsym(handle) of the exported, versioned names. */
static struct api api_dlsym(const char *p, void *h, int ptsz)
{
    struct api a = { p, h == RTLD_DEFAULT && preloaded ? "autobatch-gpuemu" : wrapped_owner(),
                     ptsz, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
    NEED(a.totalmem, h, "cuDeviceTotalMem_v2");
    NEED(a.getinfo, h, "cuMemGetInfo_v2");
    NEED(a.alloc, h, "cuMemAlloc_v2");
    NEED(a.pitch, h, "cuMemAllocPitch_v2");
    NEED(a.async, h, ptsz ? "cuMemAllocAsync_ptsz" : "cuMemAllocAsync");
    NEED(a.pool, h, ptsz ? "cuMemAllocFromPoolAsync_ptsz" : "cuMemAllocFromPoolAsync");
    NEED(a.create, h, "cuMemCreate");
    return a;
}

/* One cuGetProcAddress, v1 or v2, asked with a version and flags. */
struct gpa {
    PFN(cuGetProcAddress) v1;
    PFN(cuGetProcAddress_v2) v2;
    int version;
    unsigned long long flags;
};

static void *gpa_get(const struct gpa *g, const char *base)
{
    void *p = NULL;
    CUresult rc;
    if (g->v2) {
        int status = -1;
        rc = g->v2(base, &p, g->version, g->flags, &status);
        CHECK(rc == 0 && status == CU_GET_PROC_ADDRESS_SUCCESS && p,
              "cuGetProcAddress_v2('%s', %d, %llu): %d, status %d", base, g->version, g->flags, rc,
              status);
    } else {
        rc = g->v1(base, &p, g->version, g->flags);
        CHECK(rc == 0 && p, "cuGetProcAddress('%s', %d, %llu): %d", base, g->version, g->flags, rc);
    }
    return p;
}

#define GPA(fp, g, base) SET_FN(fp, gpa_get((g), (base)))

static struct api api_gpa(const char *p, const struct gpa *g)
{
    int ptsz = (g->flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    struct api a = { p, wrapped_owner(), ptsz, NULL, NULL, NULL, NULL, NULL, NULL, NULL };
    GPA(a.totalmem, g, "cuDeviceTotalMem");
    GPA(a.getinfo, g, "cuMemGetInfo");
    GPA(a.alloc, g, "cuMemAlloc");
    GPA(a.pitch, g, "cuMemAllocPitch");
    GPA(a.async, g, "cuMemAllocAsync");
    GPA(a.pool, g, "cuMemAllocFromPoolAsync");
    GPA(a.create, g, "cuMemCreate");
    return a;
}

/* Run the common path on the functions cuGetProcAddress answers. */
static void run_gpa(const char *p, const struct gpa *g)
{
    struct api a = api_gpa(p, g);
    run_api(&a);
}

#ifdef GPUEMU_TEST_LINKED
static struct api api_direct(const char *p, int ptsz)
{
    /* No owner: a function's address in a program need not be the callee's. */
    struct api a = { p, NULL, ptsz,
                     cuDeviceTotalMem_v2, cuMemGetInfo_v2, cuMemAlloc_v2, cuMemAllocPitch_v2,
                     ptsz ? cuMemAllocAsync_ptsz : cuMemAllocAsync,
                     ptsz ? cuMemAllocFromPoolAsync_ptsz : cuMemAllocFromPoolAsync, cuMemCreate };
    return a;
}
#endif

/* ---- the paths beyond the common one ---- */

/* cuGetProcAddress asked for a version before 3.2: the 32-bit v1 calls. */
static void run_v1_calls(const struct gpa *g)
{
    PFN(cuDeviceTotalMem) totalmem;
    PFN(cuMemGetInfo) getinfo;
    PFN(cuMemAlloc) alloc;
    struct gpa old = *g;
    old.version = 3000;
    GPA(totalmem, &old, "cuDeviceTotalMem");
    GPA(getinfo, &old, "cuMemGetInfo");
    GPA(alloc, &old, "cuMemAlloc");
    check_owner("cuDeviceTotalMem", (void *)totalmem, wrapped_owner());
    check_owner("cuMemGetInfo", (void *)getinfo, wrapped_owner());
    check_owner("cuMemAlloc", (void *)alloc, wrapped_owner());

    unsigned int t = 0, f = 0;
    CHECK(totalmem(&t, 0) == 0, "cuDeviceTotalMem failed");
    CHECK_EQ("cuDeviceTotalMem", t, want_total(0) > UINT_MAX ? UINT_MAX : want_total(0));
    CHECK(getinfo(&f, &t) == 0, "cuMemGetInfo failed");
    CHECK_EQ("cuMemGetInfo total", t, want_total(0) > UINT_MAX ? UINT_MAX : want_total(0));
    uint64_t wf = want_free(0, fake_used(0));
    CHECK_EQ("cuMemGetInfo free", f, wf > UINT_MAX ? UINT_MAX : wf);

    uint64_t cap = cap0();
    if (cap + 1 > UINT_MAX)
        return; /* the cap does not fit the 32-bit call */
    long before = fake_calls("cuMemAlloc");
    unsigned int p;
    CUresult rc = alloc(&p, (unsigned int)(cap + 1));
    CHECK_EQ("cuMemAlloc just above the cap", rc,
             shrunk(0) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS);
    CHECK_EQ("calls of the fake's cuMemAlloc", fake_calls("cuMemAlloc"), before + !shrunk(0));
    if (rc == 0)
        do_free(K_ALLOC, p);
    CHECK(alloc(&p, (unsigned int)cap) == 0, "cuMemAlloc of the cap failed");
    do_free(K_ALLOC, p);
}

/* Another process takes memory: the emulated card loses it too, down to 0. */
static void run_external_use(const struct api *a)
{
    path = "memory used by another process";
    fake_external_use(0, 1ULL << 30);
    check_info(a);
    exercise(a, K_ALLOC);
    fake_external_use(0, S + GRANULE);
    check_info(a);
    try_alloc(a, K_ALLOC, 0, GRANULE, NULL);
    fake_external_use(0, 0);
    check_info(a);
    printf("ok: %s\n", path);
}

/* cuMemCreate names its device, which need not be the current one. */
static void run_other_devices(const struct api *a)
{
    path = "cuMemCreate on devices other than the current one";
    for (int d = 1; d < ndev; d++) {
        uint64_t lim = S < T[d] ? S : T[d], cap = lim - fake_used(d);
        unsigned long long h;
        try_alloc(a, K_CREATE, d, cap + GRANULE, NULL);
        CHECK(try_alloc(a, K_CREATE, d, cap, &h) == 0, "cuMemCreate of the cap on %d failed", d);
        try_alloc(a, K_CREATE, d, GRANULE, NULL);
        do_free(K_CREATE, h);
    }
    printf("ok: %s\n", path);
}

static void run_nvml(const char *p, const char *owner, PFN(nvmlDeviceGetMemoryInfo) mem,
                     PFN(nvmlDeviceGetMemoryInfo_v2) mem2,
                     PFN(nvmlDeviceGetHandleByIndex_v2) handle)
{
    path = p;
    if (owner) {
        check_owner("nvmlDeviceGetMemoryInfo", (void *)mem, owner);
        check_owner("nvmlDeviceGetMemoryInfo_v2", (void *)mem2, owner);
    }
    for (int d = 0; d < ndev; d++) {
        uint64_t in_use = 100 * MIB;
        fake_nvml_set_used((unsigned)d, in_use);
        nvmlDevice_t dev;
        CHECK(handle((unsigned)d, &dev) == 0, "nvmlDeviceGetHandleByIndex_v2(%d) failed", d);
        uint64_t wt = want_total(d), wf = want_free(d, NVML_RESERVED + in_use);
        nvmlMemory_t m;
        CHECK(mem(dev, &m) == 0, "nvmlDeviceGetMemoryInfo failed");
        CHECK_EQ("nvmlDeviceGetMemoryInfo total", m.total, wt);
        CHECK_EQ("nvmlDeviceGetMemoryInfo free", m.free, wf);
        CHECK_EQ("nvmlDeviceGetMemoryInfo used", m.used, wt - wf);
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = nvmlMemory_v2;
        CHECK(mem2(dev, &m2) == 0, "nvmlDeviceGetMemoryInfo_v2 failed");
        CHECK_EQ("nvmlDeviceGetMemoryInfo_v2 total", m2.total, wt);
        CHECK_EQ("nvmlDeviceGetMemoryInfo_v2 reserved", m2.reserved, NVML_RESERVED);
        CHECK_EQ("nvmlDeviceGetMemoryInfo_v2 free", m2.free, wf);
        CHECK_EQ("nvmlDeviceGetMemoryInfo_v2 used (what is really in use)", m2.used, in_use);
    }
    printf("ok: %s\n", path);
}

/* The emulation's log: one line per shrunk device, one per refusal. */
static void check_log(const char *log)
{
    path = "the log";
    char want[256], buf[1 << 16];
    FILE *f = fopen(log, "r");
    CHECK(f, "cannot read the log '%s'", log);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    snprintf(want, sizeof want, "emulating %llu of %llu bytes on cuda device 0",
             (unsigned long long)S, (unsigned long long)T[0]);
    CHECK(strstr(buf, want), "the log lacks '%s':\n%s", want, buf);
    CHECK(strstr(buf, "refused cuMemAlloc_v2 of "), "the log lacks a refused cuMemAlloc_v2:\n%s",
          buf);
    CHECK(strstr(buf, "through nvml"), "the log lacks the nvml line:\n%s", buf);
    for (int d = 0; d < ndev; d++) {
        snprintf(want, sizeof want, "bytes on cuda device %d\n", d);
        const char *first = strstr(buf, want);
        CHECK(!shrunk(d) ? !first : first && !strstr(first + 1, want),
              "device %d should be logged %s:\n%s", d, shrunk(d) ? "once" : "never", buf);
    }
    printf("ok: %s\n", path);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "emulated") && strcmp(argv[1], "transparent") &&
                      strcmp(argv[1], "absent"))) {
        fprintf(stderr, "usage: test_gpuemu emulated|transparent|absent BYTES\n");
        return 2;
    }
    emulated = strcmp(argv[1], "emulated") == 0;
    preloaded = strcmp(argv[1], "absent") != 0;
    S = strtoull(argv[2], NULL, 10);
    const char *log = emulated ? getenv("AUTOBATCH_EMULATE_GPU_LOG") : NULL;
    if (log && *log) {
        FILE *f = fopen(log, "w"); /* the library appends; start it empty */
        CHECK(f, "cannot write the log '%s'", log);
        fclose(f);
    }
    const char *v = getenv("FAKE_GPU_TOTALS");
    for (char *end; v && *v && ndev < 4; v = *end == ',' ? end + 1 : NULL)
        T[ndev++] = strtoull(v, &end, 10);
    CHECK(ndev >= 1 && S, "set FAKE_GPU_TOTALS and BYTES");

    /* A lookup relative to the caller must stay so through our dlsym. */
    path = "dlsym(RTLD_NEXT)";
    check_owner("dlsym(RTLD_NEXT, 'dlsym')", dlsym(RTLD_NEXT, "dlsym"),
                preloaded ? "autobatch-gpuemu" : "libc.so");

    path = "setup";
    hcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(hcuda, "dlopen('libcuda.so.1'): %s", dlerror());
    hnvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(hnvml, "dlopen('libnvidia-ml.so.1'): %s", dlerror());
    NEED(fake_calls, hcuda, "fake_cuda_calls");
    NEED(fake_used, hcuda, "fake_cuda_used");
    NEED(fake_external_use, hcuda, "fake_cuda_external_use");
    NEED(fake_nvml_set_used, hnvml, "fake_nvml_set_used");
    NEED(mem_free, hcuda, "cuMemFree_v2");
    NEED(mem_release, hcuda, "cuMemRelease");
    NEED(mem_free_async, hcuda, "cuMemFreeAsync");
    NEED(get_mem_pool, hcuda, "cuDeviceGetMemPool");
    NEED(pool_get, hcuda, "cuMemPoolGetAttribute");
    NEED(pool_set, hcuda, "cuMemPoolSetAttribute");
    NEED(pool_trim, hcuda, "cuMemPoolTrimTo");
    PFN(cuInit) init;
    PFN(cuDevicePrimaryCtxRetain) retain;
    PFN(cuCtxSetCurrent) set_current;
    NEED(init, hcuda, "cuInit");
    NEED(retain, hcuda, "cuDevicePrimaryCtxRetain");
    NEED(set_current, hcuda, "cuCtxSetCurrent");
    CHECK(init(0) == 0, "cuInit failed");
    CUcontext ctx;
    /* Every device's primary context is active; device 0's is current. */
    for (int d = ndev - 1; d >= 0; d--)
        CHECK(retain(&ctx, d) == 0, "cuDevicePrimaryCtxRetain(%d) failed", d);
    CHECK(set_current(ctx) == 0, "cuCtxSetCurrent failed");

    struct api a;
#ifdef GPUEMU_TEST_LINKED
    a = api_direct("direct calls", 0);
    run_api(&a);
    a = api_direct("direct calls, _ptsz", 1);
    run_api(&a);
    a = api_dlsym("dlsym(RTLD_DEFAULT)", RTLD_DEFAULT, 0);
    run_api(&a);
#endif
    a = api_dlsym("dlopen + dlsym", hcuda, 0);
    run_api(&a);
    run_external_use(&a);
    run_other_devices(&a);
    a = api_dlsym("dlopen + dlsym, _ptsz", hcuda, 1);
    run_api(&a);

    struct gpa g1 = { NULL, NULL, 12000, 0 };
    NEED(g1.v1, hcuda, "cuGetProcAddress");
    check_owner("cuGetProcAddress", (void *)g1.v1, wrapped_owner());
    run_gpa("cuGetProcAddress", &g1);
    path = "cuGetProcAddress, version 3000";
    run_v1_calls(&g1);

    struct gpa g2 = { NULL, NULL, 12080, 0 };
    NEED(g2.v2, hcuda, "cuGetProcAddress_v2");
    check_owner("cuGetProcAddress_v2", (void *)g2.v2, wrapped_owner());
    run_gpa("cuGetProcAddress_v2", &g2);
    g2.flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    run_gpa("cuGetProcAddress_v2, per-thread stream", &g2);

    /* CUDA 13's runtime: cuGetProcAddress_v2 by dlsym, itself through it. */
    path = "CUDA 13 runtime";
    struct gpa g13 = { NULL, NULL, 13000, 0 };
    NEED(g13.v2, hcuda, "cuGetProcAddress_v2");
    GPA(g13.v2, &g13, "cuGetProcAddress");
    check_owner("cuGetProcAddress through itself", (void *)g13.v2, wrapped_owner());
    run_gpa("CUDA 13 runtime: all through cuGetProcAddress_v2", &g13);
    g13.flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    run_gpa("CUDA 13 runtime, per-thread stream", &g13);
    path = "cuGetProcAddress v1 through cuGetProcAddress_v2";
    struct gpa g11 = { NULL, g13.v2, 11080, 0 }, old = { NULL, NULL, 11080, 0 };
    GPA(old.v1, &g11, "cuGetProcAddress");
    check_owner("cuGetProcAddress for CUDA 11", (void *)old.v1, wrapped_owner());
    run_gpa("cuGetProcAddress for CUDA 11, through cuGetProcAddress_v2", &old);

    PFN(nvmlInit_v2) nvml_init;
    PFN(nvmlDeviceGetHandleByIndex_v2) handle;
    PFN(nvmlDeviceGetMemoryInfo) mem;
    PFN(nvmlDeviceGetMemoryInfo_v2) mem2;
    NEED(nvml_init, hnvml, "nvmlInit_v2");
    NEED(handle, hnvml, "nvmlDeviceGetHandleByIndex_v2");
    CHECK(nvml_init() == 0, "nvmlInit_v2 failed");
#ifdef GPUEMU_TEST_LINKED
    run_nvml("nvml, direct calls", NULL, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_v2,
             nvmlDeviceGetHandleByIndex_v2);
#endif
    NEED(mem, hnvml, "nvmlDeviceGetMemoryInfo");
    NEED(mem2, hnvml, "nvmlDeviceGetMemoryInfo_v2");
    run_nvml("nvml, dlopen + dlsym", emulated ? "autobatch-gpuemu" : "libnvidia-ml.so", mem, mem2,
             handle);

    if (log && *log && shrunk(0))
        check_log(log);
    printf("all %ld checks passed (%s)\n", nchecks, argv[1]);
    return 0;
}
