/* SPDX-License-Identifier: MIT */
/*
 * nvml: per-trial GPU memory from libnvidia-ml, loaded with dlopen.
 *
 * nvml.h is not installed where autobatch is built, so the few types and
 * functions used are declared here by hand, with the layouts and values of
 * the public nvml.h (checked by the static assertions below).  nvml.h
 * maps nvmlInit and friends to their versioned names with macros; a dlsym
 * caller must ask for the versioned symbols itself.
 */
#include "nvml.h"
#include "util/mono.h"
#include "util/errbuf.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* The NVML ABI (from nvml.h)                                          */

typedef int nvmlReturn_t; /* an enum in nvml.h: int-sized */
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* nvmlProcessInfo_t, as taken by the _v2 and _v3 running-processes calls */
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* NVML_VALUE_NOT_AVAILABLE if unknown */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

/* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_NAME_LEN 96

_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version value");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(sizeof(((struct nvml_gpu *)0)->name) == NVML_NAME_LEN, "name size");

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*shutdown_fn)(void);
typedef nvmlReturn_t (*count_fn)(unsigned int *);
typedef nvmlReturn_t (*handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*name_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*mem2_fn)(nvmlDevice_t, nvmlMemory_v2_t *);
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
typedef const char *(*errstr_fn)(nvmlReturn_t);

/* A sanity bound on one GPU's process list, so that a confused library
 * cannot make us allocate without limit. */
#define MAX_PROCS 65536
/* Attempts at the sizing dance before a GPU's attribution is given up:
 * each retry means processes started between two calls. */
#define PROC_ATTEMPTS 5

struct nvml {
    void *dl;
    shutdown_fn shutdown;
    mem_fn mem;     /* set when the v1 call is the one in use */
    mem2_fn mem2;   /* set when the v2 call is the one in use */
    procs_fn procs; /* NULL: no attribution */
    errstr_fn errstr;
    const char *mem_name, *procs_name;

    int ngpu;
    nvmlDevice_t dev[NVML_MAX_GPUS];
    struct nvml_gpu gpu[NVML_MAX_GPUS];

    /* the running-processes buffer, kept between samples so that the
     * steady state is one call per GPU */
    nvmlProcessInfo_t *procbuf;
    unsigned int proccap;

    char err[256];
};

/* ------------------------------------------------------------------ */
/* Helpers                                                             */


static const char *nvml_errstr(const struct nvml *n, nvmlReturn_t r, char *buf, size_t len)
{
    const char *s = n->errstr ? n->errstr(r) : NULL;
    if (s && *s)
        snprintf(buf, len, "%s", s);
    else
        snprintf(buf, len, "NVML error %d", (int)r);
    return buf;
}

/* dlsym returns an object pointer; POSIX guarantees it converts to a
 * function pointer, which memcpy does without a pedantic warning. */
static void *sym(void *dl, const char *name)
{
    dlerror();
    return dlsym(dl, name);
}
#define LOAD(fp, dl, name)                                                      \
    do {                                                                        \
        void *p_ = sym((dl), (name));                                           \
        memcpy(&(fp), &p_, sizeof p_);                                          \
    } while (0)

/* Read GPU i's used bytes with the call chosen at open; total too. */
static nvmlReturn_t read_memory(const struct nvml *n, int i, uint64_t *used, uint64_t *total)
{
    nvmlReturn_t r;
    if (n->mem2) {
        nvmlMemory_v2_t m;
        memset(&m, 0, sizeof m);
        m.version = nvmlMemory_v2;
        r = n->mem2(n->dev[i], &m);
        if (r == NVML_SUCCESS) {
            *used = m.used;
            if (total)
                *total = m.total;
        }
    } else {
        nvmlMemory_t m;
        memset(&m, 0, sizeof m);
        r = n->mem(n->dev[i], &m);
        if (r == NVML_SUCCESS) {
            *used = m.used;
            if (total)
                *total = m.total;
        }
    }
    return r;
}

static void release(struct nvml *n, int initialised)
{
    if (initialised && n->shutdown)
        n->shutdown();
    if (n->dl)
        dlclose(n->dl);
    free(n->procbuf);
    free(n);
}

/* ------------------------------------------------------------------ */
/* Opening and closing                                                 */

int nvml_open(struct nvml **out, const char *libpath, char *err, size_t errlen)
{
    char ebuf[128];
    init_fn init = NULL;
    count_fn count = NULL;
    handle_fn handle = NULL;
    name_fn name = NULL, uuid = NULL;
    procs_fn p3 = NULL, p2 = NULL;
    mem_fn mem1 = NULL;
    mem2_fn mem2 = NULL;
    nvmlReturn_t r;

    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (!libpath || !*libpath)
        libpath = NVML_DEFAULT_LIB;

    struct nvml *n = calloc(1, sizeof *n);
    if (!n) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    n->dl = dlopen(libpath, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl) {
        const char *why = dlerror();
        errbuf_set(err, errlen, "cannot load '%s': %s", libpath, why ? why : "unknown error");
        release(n, 0);
        return -1;
    }

    LOAD(init, n->dl, "nvmlInit_v2");
    LOAD(n->shutdown, n->dl, "nvmlShutdown");
    LOAD(count, n->dl, "nvmlDeviceGetCount_v2");
    LOAD(handle, n->dl, "nvmlDeviceGetHandleByIndex_v2");
    LOAD(name, n->dl, "nvmlDeviceGetName");
    LOAD(uuid, n->dl, "nvmlDeviceGetUUID");
    LOAD(mem2, n->dl, "nvmlDeviceGetMemoryInfo_v2");
    LOAD(mem1, n->dl, "nvmlDeviceGetMemoryInfo");
    LOAD(p3, n->dl, "nvmlDeviceGetComputeRunningProcesses_v3");
    LOAD(p2, n->dl, "nvmlDeviceGetComputeRunningProcesses_v2");
    LOAD(n->errstr, n->dl, "nvmlErrorString");

    const char *missing = NULL;
    if (!init)
        missing = "nvmlInit_v2";
    else if (!n->shutdown)
        missing = "nvmlShutdown";
    else if (!count)
        missing = "nvmlDeviceGetCount_v2";
    else if (!handle)
        missing = "nvmlDeviceGetHandleByIndex_v2";
    else if (!name)
        missing = "nvmlDeviceGetName";
    else if (!mem2 && !mem1)
        missing = "nvmlDeviceGetMemoryInfo";
    if (missing) {
        errbuf_set(err, errlen, "'%s' has no '%s'", libpath, missing);
        release(n, 0);
        return -1;
    }
    if (p3) {
        n->procs = p3;
        n->procs_name = "nvmlDeviceGetComputeRunningProcesses_v3";
    } else if (p2) {
        n->procs = p2;
        n->procs_name = "nvmlDeviceGetComputeRunningProcesses_v2";
    }

    r = init();
    if (r != NVML_SUCCESS) {
        errbuf_set(err, errlen, "nvmlInit_v2 failed: %s", nvml_errstr(n, r, ebuf, sizeof ebuf));
        release(n, 0);
        return -1;
    }

    unsigned int ndev = 0;
    r = count(&ndev);
    if (r != NVML_SUCCESS) {
        errbuf_set(err, errlen, "nvmlDeviceGetCount_v2 failed: %s",
                nvml_errstr(n, r, ebuf, sizeof ebuf));
        release(n, 1);
        return -1;
    }
    if (ndev == 0) {
        errbuf_set(err, errlen, "no NVIDIA GPU found");
        release(n, 1);
        return -1;
    }
    n->ngpu = ndev > NVML_MAX_GPUS ? NVML_MAX_GPUS : (int)ndev;

    for (int i = 0; i < n->ngpu; i++) {
        r = handle((unsigned int)i, &n->dev[i]);
        if (r != NVML_SUCCESS) {
            errbuf_set(err, errlen, "cannot open GPU %d: %s", i, nvml_errstr(n, r, ebuf, sizeof ebuf));
            release(n, 1);
            return -1;
        }
        n->gpu[i].index = i;
        r = name(n->dev[i], n->gpu[i].name, sizeof n->gpu[i].name);
        if (r != NVML_SUCCESS)
            snprintf(n->gpu[i].name, sizeof n->gpu[i].name, "unknown GPU");
        n->gpu[i].name[sizeof n->gpu[i].name - 1] = '\0';
        if (!uuid || uuid(n->dev[i], n->gpu[i].uuid, sizeof n->gpu[i].uuid) != NVML_SUCCESS)
            n->gpu[i].uuid[0] = '\0';
        n->gpu[i].uuid[sizeof n->gpu[i].uuid - 1] = '\0';
    }

    /*
     * Pick the memory call on GPU 0.  A driver may export the _v2 symbol
     * and still refuse it (an older kernel module under a newer library,
     * some virtual GPUs); then v1 is used for every GPU and every sample,
     * so that baselines and samples stay comparable.
     */
    n->mem2 = mem2;
    n->mem_name = "nvmlDeviceGetMemoryInfo_v2";
    if (!mem2) {
        n->mem = mem1;
        n->mem_name = "nvmlDeviceGetMemoryInfo";
    }
    for (int i = 0; i < n->ngpu; i++) {
        uint64_t used, total;
        r = read_memory(n, i, &used, &total);
        if (r != NVML_SUCCESS && i == 0 && n->mem2 && mem1 &&
            (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND ||
             r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)) {
            n->mem2 = NULL;
            n->mem = mem1;
            n->mem_name = "nvmlDeviceGetMemoryInfo";
            r = read_memory(n, i, &used, &total);
        }
        if (r != NVML_SUCCESS) {
            errbuf_set(err, errlen, "%s failed on GPU %d: %s", n->mem_name, i,
                    nvml_errstr(n, r, ebuf, sizeof ebuf));
            release(n, 1);
            return -1;
        }
        n->gpu[i].total_bytes = total;
    }

    *out = n;
    return 0;
}

void nvml_close(struct nvml *n)
{
    if (n)
        release(n, 1);
}

int nvml_gpu_count(const struct nvml *n)
{
    return n ? n->ngpu : 0;
}

const struct nvml_gpu *nvml_gpu(const struct nvml *n, int i)
{
    if (!n || i < 0 || i >= n->ngpu)
        return NULL;
    return &n->gpu[i];
}

const char *nvml_memory_call(const struct nvml *n)
{
    return n ? n->mem_name : NULL;
}

const char *nvml_process_call(const struct nvml *n)
{
    return n ? n->procs_name : NULL;
}

const char *nvml_last_error(const struct nvml *n)
{
    return n ? n->err : "";
}

/* ------------------------------------------------------------------ */
/* Sampling                                                            */

/*
 * List GPU i's compute processes into n->procbuf.  The buffer is offered
 * at its current size (zero the first time: the sizing call, with a NULL
 * array); NVML_ERROR_INSUFFICIENT_SIZE returns the needed count, the
 * buffer grows to it and the call is repeated.  Processes can start
 * between the two calls, hence the loop.  Returns the count, or -1.
 */
static long list_procs(struct nvml *n, int i)
{
    for (int attempt = 0; attempt < PROC_ATTEMPTS; attempt++) {
        unsigned int cnt = n->proccap;
        nvmlReturn_t r = n->procs(n->dev[i], &cnt, n->proccap ? n->procbuf : NULL);
        if (r == NVML_SUCCESS)
            return cnt <= n->proccap ? (long)cnt : -1;
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            return -1;
        if (cnt <= n->proccap) /* a confused answer: grow anyway */
            cnt = n->proccap + 1;
        if (cnt > MAX_PROCS)
            return -1;
        nvmlProcessInfo_t *nb = realloc(n->procbuf, cnt * sizeof *nb);
        if (!nb)
            return -1;
        n->procbuf = nb;
        n->proccap = cnt;
    }
    return -1;
}

static int pid_listed(unsigned int pid, const pid_t *pids, size_t npids)
{
    for (size_t k = 0; k < npids; k++)
        if (pids[k] > 0 && (unsigned long)pids[k] == (unsigned long)pid)
            return 1;
    return 0;
}

static int64_t attribute(struct nvml *n, int i, const pid_t *pids, size_t npids)
{
    if (!n->procs)
        return -1;
    long cnt = list_procs(n, i);
    if (cnt < 0)
        return -1;
    uint64_t sum = 0;
    for (long k = 0; k < cnt; k++) {
        const nvmlProcessInfo_t *p = &n->procbuf[k];
        if (!pid_listed(p->pid, pids, npids))
            continue;
        if (p->usedGpuMemory == NVML_VALUE_NOT_AVAILABLE)
            return -1;
        sum = p->usedGpuMemory > UINT64_MAX - sum ? UINT64_MAX : sum + p->usedGpuMemory;
    }
    return sum > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)sum;
}

int nvml_sample(struct nvml *n, const pid_t *pids, size_t npids,
                uint64_t *used, int64_t *attributed)
{
    char ebuf[128];
    if (!n || !used)
        return -1;
    if (!pids)
        npids = 0;
    n->err[0] = '\0';
    for (int i = 0; i < n->ngpu; i++) {
        nvmlReturn_t r = read_memory(n, i, &used[i], NULL);
        if (r != NVML_SUCCESS) {
            snprintf(n->err, sizeof n->err, "%s failed on GPU %d: %s", n->mem_name, i,
                     nvml_errstr(n, r, ebuf, sizeof ebuf));
            return -1;
        }
        if (attributed)
            attributed[i] = attribute(n, i, pids, npids);
    }
    return 0;
}

static void sleep_s(double s)
{
    if (s <= 0)
        return;
    struct timespec ts, rem;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    /* A signal (SIGCHLD from a dying trial) must not cut the wait short. */
    while (nanosleep(&ts, &rem) == -1 && errno == EINTR)
        ts = rem;
}

int nvml_wait_baseline(struct nvml *n, const uint64_t *baseline,
                       uint64_t tolerance_bytes, double timeout_s)
{
    uint64_t used[NVML_MAX_GPUS];
    if (!n || !baseline)
        return -1;
    const double poll = 0.1;
    double deadline = mono_now() + (timeout_s > 0 ? timeout_s : 0);
    for (;;) {
        if (nvml_sample(n, NULL, 0, used, NULL))
            return -1;
        int settled = 1;
        for (int i = 0; i < n->ngpu && settled; i++) {
            uint64_t limit = baseline[i] > UINT64_MAX - tolerance_bytes
                                 ? UINT64_MAX
                                 : baseline[i] + tolerance_bytes;
            if (used[i] > limit)
                settled = 0;
        }
        if (settled)
            return 1;
        double left = deadline - mono_now();
        if (left <= 0)
            return 0;
        sleep_s(left < poll ? left : poll);
    }
}

/* ------------------------------------------------------------------ */
/* Peak tracking                                                       */

void nvml_peak_reset(struct nvml_peak *p, int ngpu, const uint64_t *baseline)
{
    memset(p, 0, sizeof *p);
    if (ngpu < 0)
        ngpu = 0;
    if (ngpu > NVML_MAX_GPUS)
        ngpu = NVML_MAX_GPUS;
    p->ngpu = ngpu;
    for (int i = 0; i < NVML_MAX_GPUS; i++) {
        p->baseline[i] = baseline && i < ngpu ? baseline[i] : 0;
        p->attributed_max[i] = -1;
    }
    p->attributed_sum_max = -1;
}

void nvml_peak_add(struct nvml_peak *p, const uint64_t *used, const int64_t *attributed)
{
    uint64_t delta_sum = 0;
    int64_t attr_sum = 0;
    int full = 1;

    for (int i = 0; i < p->ngpu; i++) {
        if (used[i] > p->used_max[i])
            p->used_max[i] = used[i];
        if (used[i] > p->baseline[i])
            delta_sum += used[i] - p->baseline[i];
        int64_t a = attributed ? attributed[i] : -1;
        if (a < 0) {
            full = 0;
            continue;
        }
        if (a > p->attributed_max[i])
            p->attributed_max[i] = a;
        attr_sum = a > INT64_MAX - attr_sum ? INT64_MAX : attr_sum + a;
    }
    p->samples++;
    if (delta_sum > p->delta_sum_max)
        p->delta_sum_max = delta_sum;
    if (full) {
        p->attributed_samples++;
        if (attr_sum > p->attributed_sum_max)
            p->attributed_sum_max = attr_sum;
    }
}

int64_t nvml_peak_bytes(const struct nvml_peak *p, enum nvml_peak_source *src)
{
    enum nvml_peak_source s;
    int64_t v;
    if (p->samples == 0) {
        s = NVML_PEAK_NONE;
        v = -1;
    } else if (p->attributed_samples == p->samples && p->attributed_sum_max > 0) {
        s = NVML_PEAK_ATTRIBUTED;
        v = p->attributed_sum_max;
    } else {
        s = NVML_PEAK_DEVICE_DELTA;
        v = p->delta_sum_max > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)p->delta_sum_max;
    }
    if (src)
        *src = s;
    return v;
}
