/* SPDX-License-Identifier: MIT */
/*
 * fake_nvml: a stand-in libnvidia-ml for tests, scripted by environment.
 *
 * Built as a shared library and handed to probes/nvml.c by path (unit
 * tests) or through AUTOBATCH_NVML_LIB (end-to-end tests).  It exports the
 * NVML symbols autobatch uses, with the real signatures, struct layouts and
 * return codes, and behaves like the real library where it matters: every
 * call but nvmlErrorString fails with NVML_ERROR_UNINITIALIZED outside
 * nvmlInit_v2/nvmlShutdown, the v2 memory struct must carry its version,
 * and the running-processes call answers NVML_ERROR_INSUFFICIENT_SIZE with
 * the needed count when the caller's array is too small (the count-0
 * sizing call included).
 *
 * Variants (compile-time, because a symbol cannot be hidden at run time):
 *   default       memory v1 and v2, running processes _v3 and _v2;
 *   -DFAKE_NO_V3  no nvmlDeviceGetComputeRunningProcesses_v3;
 *   -DFAKE_NO_V2  only the v1 memory call and no running-processes call.
 *
 * Environment, read by nvmlInit_v2 (so each init starts a fresh script):
 *   FAKE_NVML_INIT_FAIL=1     nvmlInit_v2 fails with "Driver Not Loaded"
 *   FAKE_NVML_GPUS=N          number of GPUs (default 1, at most 16)
 *   FAKE_NVML_NAME=text       every GPU's name (default "NVIDIA H100 80GB HBM3");
 *                             "a;b;..." names GPU 0, 1, ... (the last repeats)
 *   FAKE_NVML_TOTAL="t0 t1 .." memory per GPU (default 81559M, an H100's); a
 *                             missing column repeats the last one
 * nvmlDeviceGetUUID answers "GPU-fake-<index>" (8 hex digits).
 *   FAKE_NVML_RESERVED=size   driver-reserved memory (default 0): v2 reports
 *                             it apart, v1's `used` includes it, as drivers do
 *   FAKE_NVML_USED="u0 u1 .." used memory per GPU (default 0); a missing
 *                             column repeats the last one
 *   FAKE_NVML_USED_FILE=path  a script instead: GPU i's k-th memory query
 *                             answers column i of line k (1-based); after
 *                             the last line the last line repeats.  Note
 *                             that autobatch's nvml_open reads each GPU once
 *                             (line 1) for its total.
 *   FAKE_NVML_PROCS="[gpu/]pid:bytes,..."  compute processes (gpu default
 *                             0); bytes "na" is NVML_VALUE_NOT_AVAILABLE
 *   FAKE_NVML_PROCS_RACE=k    the first k INSUFFICIENT_SIZE answers give one
 *                             less than the true count, as if a process had
 *                             started right after the sizing call
 *   FAKE_NVML_PROCS_FAIL=1    the running-processes calls fail (Not Supported)
 *   FAKE_NVML_MEM_V2_FAIL=1   nvmlDeviceGetMemoryInfo_v2 fails (Not Supported)
 *   FAKE_NVML_MEM_FAIL_AFTER=n  after n memory queries (all GPUs, both
 *                             calls) every further one fails (GPU is lost)
 * Sizes are bytes, or a number with K, M, G or T (binary units): "1.5G".
 *
 * For tests that load it themselves, it also exports fake_nvml_calls(name)
 * (calls of an NVML function since nvmlInit_v2, or of the pseudo-names
 * "sizing" (running-processes calls with a count of 0) and "insufficient"
 * (INSUFFICIENT_SIZE answers)), fake_nvml_init_refs() and fake_nvml_rewind()
 * (restart the FAKE_NVML_USED_FILE script at line 1 for every GPU).
 *
 * A test double: its state is global, it is not thread-safe, and it never
 * prints.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ */
/* The NVML ABI, as in nvml.h                                          */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

struct nvmlDevice_st {
    int index;
};
typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define NVML_STRUCT_VERSION(data, ver) \
    (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(nvmlMemory_v2 == 0x02000028u, "nvmlMemory_v2 version value");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");

/* ------------------------------------------------------------------ */
/* State                                                               */

#define FAKE_MAX_GPUS 16
#define FAKE_MAX_PROCS 64
#define FAKE_MAX_LINES 1024

enum counter {
    C_INIT, C_SHUTDOWN, C_COUNT, C_HANDLE, C_NAME, C_MEM, C_MEM2, C_PROCS3, C_PROCS2,
    C_SIZING, C_INSUFFICIENT, C_N
};
static const char *const counter_names[C_N] = {
    "nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
    "sizing", "insufficient",
};

struct fake_proc {
    int gpu;
    unsigned int pid;
    unsigned long long bytes;
};

static struct {
    int refs;
    int ngpu;
    char name[FAKE_MAX_GPUS][96];
    unsigned long long total_of[FAKE_MAX_GPUS], reserved;
    /* used[line][gpu]; one line when not scripted */
    unsigned long long used[FAKE_MAX_LINES][FAKE_MAX_GPUS];
    size_t nlines;
    size_t cursor[FAKE_MAX_GPUS];
    struct fake_proc procs[FAKE_MAX_PROCS];
    int nprocs;
    int race, procs_fail, mem2_fail;
    long mem_fail_after; /* -1: never */
    unsigned long calls[C_N];
} F;

static struct nvmlDevice_st devices[FAKE_MAX_GPUS];

/* ------------------------------------------------------------------ */
/* Parsing the script                                                  */

/* "123", "80G", "1.5G", "512M"; returns 0, or -1 when not a size. */
static int parse_size(const char *s, const char **end, unsigned long long *out)
{
    char *e;
    double v = strtod(s, &e);
    if (e == s || v < 0)
        return -1;
    double mul = 1;
    switch (*e) {
    case 'K': case 'k': mul = 1024.0; e++; break;
    case 'M': case 'm': mul = 1024.0 * 1024; e++; break;
    case 'G': case 'g': mul = 1024.0 * 1024 * 1024; e++; break;
    case 'T': case 't': mul = 1024.0 * 1024 * 1024 * 1024; e++; break;
    default: break;
    }
    *out = (unsigned long long)(v * mul + 0.5);
    if (end)
        *end = e;
    return 0;
}

static unsigned long long env_size(const char *name, unsigned long long dflt)
{
    const char *s = getenv(name);
    unsigned long long v;
    return s && *s && parse_size(s, NULL, &v) == 0 ? v : dflt;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* One line "u0 u1 ..." into row; a missing column repeats the last one. */
static void parse_used_line(const char *s, unsigned long long *row)
{
    int i = 0;
    unsigned long long v = 0;
    while (i < FAKE_MAX_GPUS) {
        while (*s == ' ' || *s == '\t')
            s++;
        const char *e;
        if (parse_size(s, &e, &v))
            break;
        row[i++] = v;
        s = e;
    }
    for (; i < FAKE_MAX_GPUS; i++)
        row[i] = v;
}

static void load_used(void)
{
    const char *path = getenv("FAKE_NVML_USED_FILE");
    F.nlines = 0;
    if (path && *path) {
        FILE *f = fopen(path, "r");
        char line[4096];
        while (f && F.nlines < FAKE_MAX_LINES && fgets(line, sizeof line, f)) {
            if (line[strspn(line, " \t\r\n")] == '\0')
                continue; /* blank lines are not samples */
            parse_used_line(line, F.used[F.nlines++]);
        }
        if (f)
            fclose(f);
    }
    if (F.nlines == 0) {
        const char *s = getenv("FAKE_NVML_USED");
        parse_used_line(s ? s : "0", F.used[0]);
        F.nlines = 1;
    }
}

/* "[gpu/]pid:bytes,..." */
static void load_procs(void)
{
    const char *s = getenv("FAKE_NVML_PROCS");
    F.nprocs = 0;
    while (s && *s && F.nprocs < FAKE_MAX_PROCS) {
        struct fake_proc p = { 0, 0, 0 };
        char *e;
        unsigned long a = strtoul(s, &e, 10);
        if (*e == '/') {
            p.gpu = (int)a;
            s = e + 1;
            a = strtoul(s, &e, 10);
        }
        p.pid = (unsigned int)a;
        if (*e != ':')
            break;
        s = e + 1;
        if (strncmp(s, "na", 2) == 0) {
            p.bytes = NVML_VALUE_NOT_AVAILABLE;
            s += 2;
        } else {
            const char *end;
            if (parse_size(s, &end, &p.bytes))
                break;
            s = end;
        }
        F.procs[F.nprocs++] = p;
        if (*s != ',')
            break;
        s++;
    }
}

static int valid(nvmlDevice_t d)
{
    return d >= devices && d < devices + F.ngpu && d == &devices[d->index];
}

/* ------------------------------------------------------------------ */
/* NVML                                                                */

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    if (env_long("FAKE_NVML_INIT_FAIL", 0))
        return NVML_ERROR_DRIVER_NOT_LOADED;
    if (F.refs++ > 0) {
        F.calls[C_INIT]++;
        return NVML_SUCCESS;
    }
    memset(F.calls, 0, sizeof F.calls);
    F.calls[C_INIT] = 1;
    long n = env_long("FAKE_NVML_GPUS", 1);
    F.ngpu = n < 0 ? 0 : n > FAKE_MAX_GPUS ? FAKE_MAX_GPUS : (int)n;
    for (int i = 0; i < FAKE_MAX_GPUS; i++) {
        devices[i].index = i;
        F.cursor[i] = 0;
    }
    const char *name = getenv("FAKE_NVML_NAME");
    name = name ? name : "NVIDIA H100 80GB HBM3";
    for (int i = 0; i < FAKE_MAX_GPUS; i++) {
        size_t len = strcspn(name, ";");
        snprintf(F.name[i], sizeof F.name[i], "%.*s", (int)len, name);
        if (name[len] == ';')
            name += len + 1;
    }
    const char *totals = getenv("FAKE_NVML_TOTAL");
    F.total_of[0] = 81559ULL << 20;
    parse_used_line(totals && *totals ? totals : "81559M", F.total_of);
    F.reserved = env_size("FAKE_NVML_RESERVED", 0);
    load_used();
    load_procs();
    F.race = (int)env_long("FAKE_NVML_PROCS_RACE", 0);
    F.procs_fail = env_long("FAKE_NVML_PROCS_FAIL", 0) != 0;
    F.mem2_fail = env_long("FAKE_NVML_MEM_V2_FAIL", 0) != 0;
    F.mem_fail_after = env_long("FAKE_NVML_MEM_FAIL_AFTER", -1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    F.refs--;
    F.calls[C_SHUTDOWN]++;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    F.calls[C_COUNT]++;
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)F.ngpu;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    F.calls[C_HANDLE]++;
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= (unsigned int)F.ngpu)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    F.calls[C_NAME]++;
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || !name)
        return NVML_ERROR_INVALID_ARGUMENT;
    const char *n = F.name[device->index];
    if (length < strlen(n) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(name, n, strlen(n) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || !uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (length < 18)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(uuid, length, "GPU-fake-%08x", (unsigned)device->index);
    return NVML_SUCCESS;
}

/* Common part of both memory calls: the script's next used value. */
static nvmlReturn_t next_used(nvmlDevice_t device, unsigned long long *used)
{
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (F.mem_fail_after >= 0) {
        if (F.mem_fail_after == 0)
            return NVML_ERROR_GPU_IS_LOST;
        F.mem_fail_after--;
    }
    int i = device->index;
    size_t line = F.cursor[i] < F.nlines ? F.cursor[i] : F.nlines - 1;
    F.cursor[i]++;
    *used = F.used[line][i];
    if (*used > F.total_of[i] - F.reserved)
        *used = F.total_of[i] - F.reserved;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned long long used;
    F.calls[C_MEM]++;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = next_used(device, &used);
    if (r != NVML_SUCCESS)
        return r;
    memory->total = F.total_of[device->index];
    memory->used = used + F.reserved;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

#ifndef FAKE_NO_V2
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned long long used;
    F.calls[C_MEM2]++;
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (F.mem2_fail)
        return NVML_ERROR_NOT_SUPPORTED;
    nvmlReturn_t r = next_used(device, &used);
    if (r != NVML_SUCCESS)
        return r;
    memory->total = F.total_of[device->index];
    memory->reserved = F.reserved;
    memory->used = used;
    memory->free = memory->total - F.reserved - used;
    return NVML_SUCCESS;
}

static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *count,
                                      nvmlProcessInfo_t *infos)
{
    if (F.refs <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid(device) || !count || (*count > 0 && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (F.procs_fail)
        return NVML_ERROR_NOT_SUPPORTED;
    if (*count == 0)
        F.calls[C_SIZING]++;
    unsigned int need = 0;
    for (int k = 0; k < F.nprocs; k++)
        need += F.procs[k].gpu == device->index;
    if (*count < need) {
        F.calls[C_INSUFFICIENT]++;
        *count = need;
        if (F.race > 0 && need > 0) {
            F.race--;
            *count = need - 1;
        }
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (int k = 0; k < F.nprocs; k++) {
        if (F.procs[k].gpu != device->index)
            continue;
        infos[n].pid = F.procs[k].pid;
        infos[n].usedGpuMemory = F.procs[k].bytes;
        infos[n].gpuInstanceId = 0xFFFFFFFFu; /* no MIG */
        infos[n].computeInstanceId = 0xFFFFFFFFu;
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                           unsigned int *infoCount,
                                                           nvmlProcessInfo_t *infos)
{
    F.calls[C_PROCS2]++;
    return running_processes(device, infoCount, infos);
}

#ifndef FAKE_NO_V3
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                           unsigned int *infoCount,
                                                           nvmlProcessInfo_t *infos)
{
    F.calls[C_PROCS3]++;
    return running_processes(device, infoCount, infos);
}
#endif
#endif /* FAKE_NO_V2 */

/* ------------------------------------------------------------------ */
/* For tests                                                           */

EXPORT unsigned long fake_nvml_calls(const char *name)
{
    for (int c = 0; c < C_N; c++)
        if (strcmp(name, counter_names[c]) == 0)
            return F.calls[c];
    return ULONG_MAX;
}

EXPORT int fake_nvml_init_refs(void)
{
    return F.refs;
}

EXPORT void fake_nvml_rewind(void)
{
    for (int i = 0; i < FAKE_MAX_GPUS; i++)
        F.cursor[i] = 0;
}
