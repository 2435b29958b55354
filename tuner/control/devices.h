/* SPDX-License-Identifier: MIT */
/*
 * devices: the GPUs trials run on.  devices_slots() turns --gpus and
 * --gpus-per-trial into slots, one per trial running side by side;
 * devices_emulate_lib() finds the --emulate-gpu-memory preload library.
 * Both are called once, before the first trial; neither prints nor
 * holds anything (the slots are written into the caller's array).
 */
#ifndef AB_DEVICES_H
#define AB_DEVICES_H

#include <stddef.h>

#include "control/tune.h"

struct plan;
struct gpu;

/**
 * --gpus and --gpus-per-trial as slots: groups of K devices, each with
 * its CUDA_VISIBLE_DEVICES (UUIDs where NVML gives them) and NVML mask,
 * at most max of them written to slots.  slurm: trials are Slurm job
 * steps or array tasks, which get their GPUs from Slurm, so only the
 * count matters (each slot's devices read "(Slurm picks)"); without
 * SLURM_JOB_ID (a login node) --gpus must be that count, N (a list or
 * "all" is refused: the tasks' nodes are Slurm's choice).  g: NVML's
 * view (g->n 0 without).
 *
 * Returns the number of slots (0 without --gpus); -1 with a one-line
 * reason in err (a GPU that does not exist or is listed twice, a count
 * that is not a multiple of K); -2 with the two models in err when the
 * GPUs are of several models (a boundary holds for one: search each
 * model apart).
 */
long devices_slots(const struct plan *plan, const struct gpu *g, int slurm,
                   struct tune_slot *slots, size_t max, char *err, size_t errlen);

/**
 * --parallel N as N slots for CPU trials side by side (no devices, no
 * NVML mask: each trial is held by its --trial-memory-limit alone).
 * Refused with a one-line reason in err (-1): without
 * --trial-memory-limit (a search on CPU needs the cap, and the caps must
 * add up), with --gpus, on Slurm, with GPUs in sight (gpus > 0: --gpus
 * runs GPU trials side by side), with more trials than online cores, or
 * when N caps exceed MemAvailable (meminfo: the /proc/meminfo to read,
 * NULL for the real one).  Returns N, or 0 when N <= 1.
 */
long devices_cpu_slots(const struct plan *plan, int gpus, int slurm, const char *meminfo,
                       struct tune_slot *slots, size_t max, char *err, size_t errlen);

/**
 * The --emulate-gpu-memory preload library: $AUTOBATCH_GPUEMU_LIB, else
 * next to this binary in the build tree, beside it, or where cmake
 * --install puts it (AB_GPUEMU_INSTALLED, relative to the binary).
 * Returns 0 with the path in out, or -1 when none is readable.
 */
int devices_emulate_lib(char *out, size_t len);

#endif
