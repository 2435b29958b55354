/* SPDX-License-Identifier: MIT */
/*
 * gpu: per-trial GPU memory peaks and the settle-before-next-trial wait
 * (see gpu.h), on top of probes/nvml.
 */
#include "trial/gpu.h"
#include "util/mono.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml.h"
#include "trial/proctree.h"
#include "trial/trial.h"

/* Memory a device may still hold above its baseline after a trial without
 * a warning: the driver and caching allocators release lazily. */
#define GPU_SETTLE_TOLERANCE (256ULL << 20)
#define GPU_SETTLE_S 10.0
#define GPU_TICK_S 0.1

void gpu_open(struct gpu *g, const char *libpath)
{
    memset(g, 0, sizeof *g);
    g->peak = -1;
    snprintf(g->fingerprint, sizeof g->fingerprint, "no-gpu");
    if (nvml_open(&g->nv, libpath, g->why, sizeof g->why)) {
        g->nv = NULL;
        return;
    }
    int n = nvml_gpu_count(g->nv);
    g->n = n > GPU_MAX ? GPU_MAX : n;
    uint64_t used[GPU_MAX];
    if (g->n <= 0 || nvml_sample(g->nv, NULL, 0, used, NULL)) {
        snprintf(g->why, sizeof g->why, "NVML found no usable GPU");
        nvml_close(g->nv);
        g->nv = NULL;
        g->n = 0;
        return;
    }
    size_t off = 0;
    g->fingerprint[0] = '\0';
    for (int i = 0; i < g->n; i++) {
        const struct nvml_gpu *d = nvml_gpu(g->nv, i);
        g->baseline[i] = used[i];
        off += (size_t)snprintf(g->fingerprint + off, off < sizeof g->fingerprint
                                ? sizeof g->fingerprint - off : 0, "%s:%llu;", d->name,
                                (unsigned long long)d->total_bytes);
    }
}

void gpu_trial_start(struct gpu *g)
{
    g->peak = -1;
    g->last = 0;
}

void gpu_tick(void *ctx)
{
    struct gpu *g = ctx;
    double now = mono_now();
    if (!g->nv || now - g->last < GPU_TICK_S)
        return;
    g->last = now;
    pid_t pids[1024];
    /* Our subtree only: a host with thousands of processes costs nothing.
     * A kernel without children lists says so once; then the whole scan. */
    long n = -2;
    if (!g->scan_all && (n = proctree_subtree(getpid(), pids, sizeof pids / sizeof *pids)) == -2)
        g->scan_all = 1;
    if (g->scan_all)
        n = proctree_descendants(getpid(), pids, sizeof pids / sizeof *pids);
    if (n < 0)
        n = 0;
    if (n > (long)(sizeof pids / sizeof *pids))
        n = sizeof pids / sizeof *pids;
    uint64_t used[GPU_MAX];
    int64_t attr[GPU_MAX];
    if (nvml_sample(g->nv, pids, (size_t)n, used, attr))
        return;
    for (int i = 0; i < g->n; i++) {
        if (g->mask && !(g->mask & (1ULL << i)))
            continue;
        int64_t v = attr[i] >= 0 ? attr[i]
                  : used[i] > g->baseline[i] ? (int64_t)(used[i] - g->baseline[i]) : 0;
        if (v > g->peak)
            g->peak = v;
    }
}

int64_t gpu_trial_peak(const struct gpu *g, int64_t report_peak)
{
    /* NVML's figure when it saw the trial use memory; else a trainer's
     * own report (NVML saw nothing: no attribution, a CPU job); else
     * NVML's zero, which is a measurement too. */
    if (g->nv && g->peak > 0)
        return g->peak;
    return report_peak >= 0 ? report_peak : g->nv ? g->peak : -1;
}

int64_t gpu_trial_view(struct gpu *g, int64_t peak, const struct trial_result *tr)
{
    if (tr->cuda_total_bytes > 0 && (!g->cuda_total || (uint64_t)tr->cuda_total_bytes < g->cuda_total))
        g->cuda_total = (uint64_t)tr->cuda_total_bytes;
    return tr->cuda_peak_bytes > 0 ? tr->cuda_peak_bytes : peak;
}

int gpu_settle(struct gpu *g)
{
    if (!g->nv)
        return 1;
    return nvml_wait_baseline(g->nv, g->baseline, GPU_SETTLE_TOLERANCE, GPU_SETTLE_S);
}

double gpu_capacity(const struct gpu *g)
{
    if (g->cuda_total) /* one view: CUDA's, as the peaks that steer the search */
        return (double)(g->emulate && g->emulate < g->cuda_total ? g->emulate : g->cuda_total);
    double cap = -1;
    for (int i = 0; g->nv && i < g->n; i++) {
        if (g->mask && !(g->mask & (1ULL << i)))
            continue;
        double t = (double)nvml_gpu(g->nv, i)->total_bytes;
        if (g->emulate && t > (double)g->emulate)
            t = (double)g->emulate;
        if (cap < 0 || t < cap)
            cap = t;
    }
    return cap;
}

int gpu_info(const struct gpu *g, int i, const char **name, uint64_t *total)
{
    if (!g->nv || i < 0 || i >= g->n)
        return -1;
    const struct nvml_gpu *d = nvml_gpu(g->nv, i);
    *name = d->name;
    *total = g->emulate && d->total_bytes > g->emulate ? g->emulate : d->total_bytes;
    return 0;
}

void gpu_release(struct gpu *g)
{
    nvml_close(g->nv);
    g->nv = NULL;
}

uint64_t gpu_real_total(const struct gpu *g, int i)
{
    return g->nv && i >= 0 && i < g->n ? nvml_gpu(g->nv, i)->total_bytes : 0;
}

const char *gpu_uuid(const struct gpu *g, int i)
{
    return g->nv && i >= 0 && i < g->n ? nvml_gpu(g->nv, i)->uuid : "";
}

void gpu_use(struct gpu *g, unsigned long long mask)
{
    g->mask = mask;
}

void gpu_emulate(struct gpu *g, uint64_t bytes)
{
    g->emulate = bytes;
    size_t off = strlen(g->fingerprint);
    if (bytes && off < sizeof g->fingerprint)
        snprintf(g->fingerprint + off, sizeof g->fingerprint - off, "emulated:%llu;",
                 (unsigned long long)bytes);
}
