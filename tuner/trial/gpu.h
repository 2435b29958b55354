/* SPDX-License-Identifier: MIT */
/*
 * gpu: the controller's view of GPU memory during trials, on top of the
 * NVML probe (probes/nvml.h).
 *
 * Life cycle: gpu_open() once before the first trial (it records each
 * device's baseline: memory in use before we start anything); per trial
 * gpu_trial_start(), gpu_tick() from the trial loop (samples at most every
 * 100 ms), gpu_trial_peak() after it, gpu_settle() before the next one;
 * gpu_release().  Without NVML (no driver, no GPU) every figure is
 * unknown (-1) and nothing fails.
 *
 * A trial's peak_mem_bytes is the largest, over samples and devices, of
 * the memory NVML attributes to the trial's processes on one device, or,
 * where NVML cannot attribute memory to processes, of the device's use
 * above its baseline.  It is per device because each rank lives on its
 * own device and the smallest device is the limit: capacity is the
 * smallest device's total.
 *
 * One view of the card: when the in-process probe saw CUDA steps, the
 * search's peak is the probe's (each step's peak reserved by PyTorch's
 * caching allocator plus the memory outside it, largest over ranks:
 * gpu_trial_view()), and the capacity is the total CUDA reported
 * (cuMemGetInfo), not NVML's, which counts memory CUDA never shows
 * (H200: 143771 MiB NVML, 143155 MiB CUDA).  NVML's figures steer only
 * trials the probe did not see.  Near the capacity NVML's peak is not
 * monotone in the batch (the cache fills the card); the allocator's is.
 */
#ifndef AB_GPU_H
#define AB_GPU_H

#include <stdint.h>

#define GPU_MAX 16

struct nvml;
struct trial_result;

struct gpu {
    struct nvml *nv;          /**< NULL without NVML */
    int n;                    /**< devices (at most GPU_MAX) */
    uint64_t baseline[GPU_MAX];
    int64_t peak;             /**< this trial's peak, -1 none yet */
    double last;              /**< time of the last sample */
    int scan_all;             /**< the kernel has no children lists: scan /proc */
    unsigned long long mask;  /**< devices in use (bit i: device i); 0 = all */
    uint64_t emulate;         /**< emulated total per device; 0 = the real one */
    uint64_t cuda_total;      /**< the smallest total CUDA reported (probe); 0 = none yet */
    char fingerprint[1024];   /**< "NAME:TOTAL;..." or "no-gpu" */
    char why[256];            /**< why NVML is not in use */
};

/** Open NVML (libpath NULL: libnvidia-ml.so.1) and take the baselines. */
void gpu_open(struct gpu *g, const char *libpath);
void gpu_trial_start(struct gpu *g);
/** The trial loop's tick hook; ctx is the struct gpu. */
void gpu_tick(void *ctx);
/** This trial's peak: NVML's when it saw memory in use, else report_peak (-1 unknown). */
int64_t gpu_trial_peak(const struct gpu *g, int64_t report_peak);
/**
 * The trial's peak for the search, given `peak` (gpu_trial_peak's): the
 * probe's CUDA view (reserved peak + outside, tr->cuda_peak_bytes) when it
 * saw CUDA steps, else `peak`.  Notes the CUDA total the probe reported,
 * so that gpu_capacity() gives CUDA's total from then on.
 */
int64_t gpu_trial_view(struct gpu *g, int64_t peak, const struct trial_result *tr);
/** Wait up to 10 s for memory to return to the baselines: 1 settled (or no NVML), 0 not. */
int gpu_settle(struct gpu *g);
/** The smallest device's total bytes (CUDA's once a probe reported it,
 *  else NVML's; the emulated size when smaller), or -1. */
double gpu_capacity(const struct gpu *g);
/** Device i's name and total (the emulated one when emulating), for the
 *  results file; 0 or -1. */
int gpu_info(const struct gpu *g, int i, const char **name, uint64_t *total);
/** Device i's real total, or 0. */
uint64_t gpu_real_total(const struct gpu *g, int i);
/** Device i's UUID, or "" when NVML gave none. */
const char *gpu_uuid(const struct gpu *g, int i);
/** Sample and size only the devices in mask (bit i: device i; 0: all). */
void gpu_use(struct gpu *g, unsigned long long mask);
/** Every device behaves as one of `bytes` (0: the real size); the
 *  fingerprint says so, so cached boundaries are kept apart. */
void gpu_emulate(struct gpu *g, uint64_t bytes);
void gpu_release(struct gpu *g);

#endif
