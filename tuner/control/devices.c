/* SPDX-License-Identifier: MIT */
/*
 * devices: which GPUs a trial gets (devices.h).  --gpus is read as a list
 * of indices or UUIDs checked against what NVML sees, or "all" (NVML's
 * count, or under Slurm the allocation's), or from a login node (job
 * arrays) as a count; it is cut into slots of
 * --gpus-per-trial devices, each named for CUDA_VISIBLE_DEVICES by UUID
 * where NVML gives one and sampled through an NVML mask.  The
 * --emulate-gpu-memory preload library is looked up beside the binary.
 * --parallel N makes N slots for CPU trials, checked against the cores
 * and the free memory.  Nothing here prints: errors come back as one line.
 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/devices.h"
#include "control/plan.h"
#include "trial/gpu.h"
#include "trial/slurm.h"

/* Count the entries of a comma-separated list. */
static size_t devices_list_count(const char *s)
{
    size_t n = *s ? 1 : 0;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

/* MemAvailable from a /proc/meminfo, in bytes; -1 unknown. */
static double devices_mem_available(const char *path)
{
    FILE *f = fopen(path ? path : "/proc/meminfo", "re");
    char line[256];
    double kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

long devices_cpu_slots(const struct plan *plan, int gpus, int slurm, const char *meminfo,
                       struct tune_slot *slots, size_t max, char *err, size_t errlen)
{
    long n = plan->parallel;
    if (n <= 1)
        return 0;
    const double gib = 1024.0 * 1024 * 1024;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double avail = devices_mem_available(meminfo);
    double caps = (double)n * (double)plan->trial_mem_limit;
    if (plan->gpus[0])
        snprintf(err, errlen, "--parallel runs CPU trials side by side; --gpus already does "
                              "so on GPUs: keep one");
    else if (slurm)
        snprintf(err, errlen, "--parallel runs trials on this machine; drop it with --launcher "
                              "slurm (use --gpus N there)");
    else if (gpus > 0)
        snprintf(err, errlen, "--parallel is for CPU trials, and %d GPU(s) are in sight: use "
                              "--gpus to run GPU trials side by side", gpus);
    else if (!plan->trial_mem_limit)
        snprintf(err, errlen, "--parallel %ld needs --trial-memory-limit SIZE: each CPU trial "
                              "needs its cap, and the caps must fit in free memory", n);
    else if ((size_t)n > max)
        snprintf(err, errlen, "--parallel %ld: at most %zu trials run side by side", n, max);
    else if (cores > 0 && n > cores)
        snprintf(err, errlen, "--parallel %ld: this machine has %ld cores online; give "
                              "--parallel %ld or less", n, cores, cores);
    else if (avail > 0 && caps > avail)
        snprintf(err, errlen, "--parallel %ld x --trial-memory-limit = %.2f GiB, more than the "
                              "%.2f GiB available; give --parallel %ld or a smaller limit",
                 n, caps / gib, avail / gib,
                 (long)(avail / (double)plan->trial_mem_limit) > 1
                     ? (long)(avail / (double)plan->trial_mem_limit) : 1);
    else {
        for (long i = 0; i < n; i++)
            slots[i] = (struct tune_slot){ .devices = "", .mask = 0 };
        return n;
    }
    return -1;
}

long devices_slots(const struct plan *plan, const struct gpu *g, int slurm,
                   struct tune_slot *slots, size_t max, char *err, size_t errlen)
{
    if (!plan->gpus[0])
        return 0;
    long k = plan->gpus_per_trial;
    int dev[GPU_MAX * 4];
    long num[GPU_MAX * 4]; /* an index as written, -1 for a UUID */
    char label[GPU_MAX * 4][100];
    size_t n = 0;
    if (slurm && !getenv("SLURM_JOB_ID")) {
        /* From a login node each trial is an array task that asks for
         * --gres=gpu:K on whatever node Slurm picks: there are no GPUs
         * here to list or to take "all" of, only how many. */
        char *end;
        long count = strtol(plan->gpus, &end, 10);
        if (!*end && plan->gpus[0] >= '0' && plan->gpus[0] <= '9' && count >= 1 &&
            count <= GPU_MAX * 4) {
            n = (size_t)count;
        } else {
            snprintf(err, errlen, "--gpus '%s' from a login node: each trial is a job array "
                     "task given --gres=gpu:%ld on a node Slurm picks, so name no GPUs; give "
                     "how many, e.g. --gpus 4 (--gpus-per-trial K each), or run inside an "
                     "allocation (salloc)", plan->gpus, k);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            dev[i] = -1;
            snprintf(label[i], sizeof label[i], "%zu", i);
        }
    } else if (!strcmp(plan->gpus, "all")) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        long sg = slurm && getenv("SLURM_JOB_ID") ? slurm_alloc_gpus() : 0;
        if (sg > 0) {
            n = (size_t)sg;
        } else if (slurm && cvd && *cvd) {
            n = devices_list_count(cvd);
        } else if (g->n > 0) {
            n = (size_t)g->n;
        } else {
            snprintf(err, errlen, "--gpus all: no GPU seen through NVML (%s); list them, e.g. "
                                  "--gpus 0,1", g->why);
            return -1;
        }
        for (size_t i = 0; i < n && i < sizeof dev / sizeof *dev; i++) {
            dev[i] = slurm ? -1 : (int)i;
            snprintf(label[i], sizeof label[i], "%zu", i);
        }
    } else {
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", plan->gpus);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n >= sizeof dev / sizeof *dev) {
                snprintf(err, errlen, "--gpus: at most %zu GPUs", sizeof dev / sizeof *dev);
                return -1;
            }
            int found = -1;
            char *end;
            long idx = strtol(t, &end, 10);
            if (!strncmp(t, "GPU-", 4) || !strncmp(t, "MIG-", 4)) {
                for (int i = 0; i < g->n; i++)
                    if (!strcmp(gpu_uuid(g, i), t))
                        found = i;
                /* NVML lists whole GPUs, not MIG instances; under Slurm the
                 * GPUs are the allocation's, not this node's. */
                if (found < 0 && g->n > 0 && !slurm && !strncmp(t, "GPU-", 4)) {
                    snprintf(err, errlen, "--gpus: %s is not a GPU that NVML sees; "
                                          "`nvidia-smi -L` lists their UUIDs", t);
                    return -1;
                }
                idx = -1;
            } else if (*t && !*end && idx >= 0 && idx < 1000) {
                if (g->n > 0 && idx >= g->n) {
                    snprintf(err, errlen, "--gpus: GPU %ld does not exist (NVML sees %d); "
                                          "use 0 to %d", idx, g->n, g->n - 1);
                    return -1;
                }
                found = g->n > 0 ? (int)idx : -1;
            } else {
                snprintf(err, errlen, "--gpus '%s': '%s' is neither an index nor a GPU UUID",
                         plan->gpus, t);
                return -1;
            }
            /* Twice: as written, as the same index ("0" and "00"), or as
             * the same device (an index and its UUID). */
            for (size_t i = 0; i < n; i++)
                if (!strcmp(label[i], t) || (idx >= 0 && num[i] == idx) ||
                    (found >= 0 && dev[i] == found)) {
                    snprintf(err, errlen, "--gpus '%s': GPU %s is listed twice%s%s%s", plan->gpus,
                             t, strcmp(label[i], t) ? " (as " : "",
                             strcmp(label[i], t) ? label[i] : "", strcmp(label[i], t) ? ")" : "");
                    return -1;
                }
            dev[n] = found;
            num[n] = idx;
            snprintf(label[n++], sizeof label[0], "%s", t);
        }
    }
    if (n % (size_t)k || n < (size_t)k) {
        snprintf(err, errlen, "--gpus gives %zu GPUs, not a multiple of --gpus-per-trial %ld; "
                              "list %ld, %ld, ... GPUs", n, k, k, 2 * k);
        return -1;
    }
    /* One model and size only: a boundary holds for one kind of GPU
     * (the caller then searches each model apart: cli/per_model.c). */
    for (size_t i = 1; i < n; i++) {
        const char *a, *b;
        uint64_t ta, tb;
        if (dev[0] >= 0 && dev[i] >= 0 && !gpu_info(g, dev[0], &a, &ta) &&
            !gpu_info(g, dev[i], &b, &tb) && (strcmp(a, b) || ta != tb)) {
            snprintf(err, errlen, "--gpus mixes GPU models (%s and %s)", a, b);
            return -2;
        }
    }
    size_t ns = n / (size_t)k;
    if (ns > max)
        ns = max;
    for (size_t s = 0; s < ns; s++) {
        size_t off = 0;
        slots[s].mask = 0;
        slots[s].devices[0] = '\0';
        for (size_t i = s * (size_t)k; i < (s + 1) * (size_t)k; i++) {
            const char *id = dev[i] >= 0 && gpu_uuid(g, dev[i])[0] ? gpu_uuid(g, dev[i]) : label[i];
            /* Slurm gives the GPUs when the trial starts (the results
             * take them from the trial: slurm_trial_gpus) */
            if (slurm)
                id = "(Slurm picks)";
            if (off < sizeof slots[s].devices)
                off += (size_t)snprintf(slots[s].devices + off, sizeof slots[s].devices - off,
                                        "%s%s", off ? "," : "", id);
            if (dev[i] >= 0)
                slots[s].mask |= 1ULL << dev[i];
            if (slurm)
                break;
        }
    }
    return (long)ns;
}

int devices_emulate_lib(char *out, size_t len)
{
    const char *env = getenv("AUTOBATCH_GPUEMU_LIB");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) ? -1 : 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *dir = dirname(exe);
    /* the build tree, beside the binary, and where cmake --install puts it */
    const char *where[] = { "probes/gpuemu/libautobatch-gpuemu.so", "libautobatch-gpuemu.so",
                            AB_GPUEMU_INSTALLED };
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        snprintf(out, len, "%s/%s", dir, where[i]);
        if (!access(out, R_OK))
            return 0;
    }
    return -1;
}
