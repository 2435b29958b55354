/* SPDX-License-Identifier: MIT */
/*
 * nvml: per-trial GPU memory, read from NVIDIA's management library.
 *
 * libnvidia-ml is loaded at run time with dlopen, so autobatch builds and
 * runs where no driver (and no nvml.h) is installed; there, and wherever
 * anything about NVML fails at start-up, the probe is simply unavailable
 * and a trial's memory numbers are null.  The controller samples about ten
 * times a second while a trial runs and feeds the samples to a peak
 * tracker (struct nvml_peak below); between trials it waits for the
 * previous trial's memory to be released (nvml_wait_baseline).
 *
 * Life cycle:
 *   1. struct nvml *n;  nvml_open(&n, getenv("AUTOBATCH_NVML_LIB"), err,
 *      sizeof err): a NULL path means "libnvidia-ml.so.1".  -1 means "no
 *      numbers": log the reason, carry on without GPU memory.
 *   2. nvml_gpu_count(n) and nvml_gpu(n, i) describe the GPUs (for the
 *      results file's host.gpus).
 *   3. Before a trial: nvml_sample(n, NULL, 0, baseline, NULL) gives each
 *      GPU's used bytes, the trial's baseline; nvml_peak_reset(&p, count,
 *      baseline).
 *   4. While it runs, every ~100 ms: nvml_sample(n, pids, npids, used,
 *      attributed) with the pids of the trial's process tree, then
 *      nvml_peak_add(&p, used, attributed) when the sample succeeded.
 *   5. After it: nvml_peak_bytes(&p, &src) is the trial's peak_mem_bytes;
 *      nvml_wait_baseline(n, baseline, tolerance, timeout) before the
 *      next trial (warn when it returns 0).
 *   6. nvml_close(n) at exit (NULL is fine).
 *
 * Which "used" is read.  The device-wide figure comes from
 * nvmlDeviceGetMemoryInfo_v2 when the driver has it (its `used` excludes
 * the memory the driver reserves for itself and matches nvidia-smi), else
 * from nvmlDeviceGetMemoryInfo, whose `used` includes that reservation.
 * The choice is made once, in nvml_open, so a baseline and the samples
 * compared with it always come from the same call.
 *
 * Attribution.  The bytes NVML charges to each process with a CUDA context
 * (nvmlDeviceGetComputeRunningProcesses_v3, else _v2): the context itself
 * plus whatever the process's allocator holds (for PyTorch: reserved, not
 * merely allocated, memory), i.e. what nvidia-smi lists per process.  NVML
 * reports pids as the host kernel sees them: inside a container with its
 * own pid namespace the trial's pids never match and attribution reads 0;
 * the peak tracker then falls back to device-wide numbers (see
 * nvml_peak_bytes).
 *
 * GPU indices are NVML's (PCI bus order), which is CUDA's order only under
 * CUDA_DEVICE_ORDER=PCI_BUS_ID; sums over all GPUs do not care.
 *
 * The module never prints and never exits; it keeps no global state (a
 * struct nvml holds the library handle).  A struct nvml is not thread-safe.
 */
#ifndef AB_NVML_H
#define AB_NVML_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/** The library nvml_open loads when given no path. */
#define NVML_DEFAULT_LIB "libnvidia-ml.so.1"

/** At most this many GPUs are used; further ones are ignored. */
#define NVML_MAX_GPUS 64

/** One GPU as nvml_open found it. */
struct nvml_gpu {
    int index;            /**< NVML index, 0-based */
    char name[96];        /**< e.g. "NVIDIA H100 80GB HBM3" */
    char uuid[96];        /**< "GPU-..." for CUDA_VISIBLE_DEVICES; "" when NVML has none */
    uint64_t total_bytes; /**< physical memory of the device */
};

/** A loaded and initialised libnvidia-ml, with its GPUs. */
struct nvml;

/**
 * Load libnvidia-ml from `libpath` (NULL or "" for NVML_DEFAULT_LIB),
 * initialise it, and list its GPUs with their names and total memory.
 *
 * Returns 0 and sets *out, to be freed with nvml_close.  Returns -1 and
 * sets *out to NULL when NVML is unavailable: the library cannot be
 * loaded, lacks a required symbol, nvmlInit_v2 fails (no driver, no
 * permission), there is no GPU, or a GPU cannot be queried.  err then
 * holds a one-line reason such as "cannot load 'libnvidia-ml.so.1': ..."
 * or "nvmlInit_v2 failed: Driver Not Loaded".  That is not an error for
 * the caller: it only means that memory numbers are null.
 *
 * Required symbols: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName, and one of
 * nvmlDeviceGetMemoryInfo_v2 / nvmlDeviceGetMemoryInfo.  _v2 is used
 * unless missing or refused by the driver on GPU 0.  Optional:
 * nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (else attribution is
 * unavailable), nvmlErrorString.  nvmlInit_v2 may take a second or two
 * on a machine without persistence mode.
 */
int nvml_open(struct nvml **out, const char *libpath, char *err, size_t errlen);

/** Number of GPUs, >= 1 for an open struct nvml; 0 for NULL. */
int nvml_gpu_count(const struct nvml *n);

/** GPU i (0 <= i < nvml_gpu_count), or NULL when i is out of range. */
const struct nvml_gpu *nvml_gpu(const struct nvml *n, int i);

/**
 * Names of the NVML functions in use, for logs: the memory call
 * ("nvmlDeviceGetMemoryInfo_v2" or "nvmlDeviceGetMemoryInfo") and the
 * running-processes call ("nvmlDeviceGetComputeRunningProcesses_v3" or
 * "..._v2", or NULL when attribution is unavailable).
 */
const char *nvml_memory_call(const struct nvml *n);
const char *nvml_process_call(const struct nvml *n);

/**
 * Take one sample.  `used` and (unless NULL) `attributed` are arrays of
 * nvml_gpu_count(n) elements.  For each GPU i:
 *
 *   used[i]        device-wide used bytes (see "Which used" above);
 *   attributed[i]  the sum of the bytes NVML charges to the processes
 *                  whose pid is in pids[0..npids) (0 when none of them
 *                  has a context on GPU i), or -1 when that is unknown:
 *                  no running-processes call, the call failed for this
 *                  GPU, or NVML gave "not available" for one of them.
 *
 * `attributed` NULL skips the running-processes call (cheaper: use it for
 * baselines); pids may be NULL when npids is 0.  Pids <= 0 never match.
 *
 * Returns 0, or -1 when a memory query failed (the arrays are then
 * unspecified and the reason is in nvml_last_error).
 */
int nvml_sample(struct nvml *n, const pid_t *pids, size_t npids,
                uint64_t *used, int64_t *attributed);

/**
 * Wait until every GPU's used bytes are at most baseline[i] +
 * tolerance_bytes: the previous trial's memory is back.  Below the
 * baseline counts as settled (someone else freed memory).  Checks at once,
 * then every 100 ms, for at most timeout_s seconds (<= 0: check once).
 *
 * Returns 1 when it settled, 0 when the bound passed first (the caller
 * warns and goes on), -1 when a sample failed (reason in nvml_last_error).
 */
int nvml_wait_baseline(struct nvml *n, const uint64_t *baseline,
                       uint64_t tolerance_bytes, double timeout_s);

/** The reason for the last -1 from nvml_sample/nvml_wait_baseline ("" if none). */
const char *nvml_last_error(const struct nvml *n);

/** nvmlShutdown, dlclose, free.  NULL is fine. */
void nvml_close(struct nvml *n);

/* ------------------------------------------------------------------ */

/** Where nvml_peak_bytes took its number from. */
enum nvml_peak_source {
    NVML_PEAK_NONE = 0,     /**< no sample: peak_mem_bytes is null */
    NVML_PEAK_ATTRIBUTED,   /**< bytes charged to the trial's processes */
    NVML_PEAK_DEVICE_DELTA, /**< device-wide growth over the baseline */
};

/**
 * The peaks of one trial.  Every field is a maximum over the samples
 * given to nvml_peak_add since nvml_peak_reset; "delta" of GPU i in a
 * sample is max(used[i] - baseline[i], 0).
 *
 * Life cycle: nvml_peak_reset at the start of each trial; nvml_peak_add
 * per successful sample; nvml_peak_bytes at the end.  Nothing to release.
 * NVML_PEAK_INIT is an empty tracker for zero GPUs (nvml_peak_bytes: -1),
 * for a trial run without NVML.
 */
struct nvml_peak {
    int ngpu;                              /**< GPUs per sample */
    uint64_t baseline[NVML_MAX_GPUS];      /**< used bytes before the trial */
    uint64_t used_max[NVML_MAX_GPUS];      /**< max of used[i] */
    int64_t attributed_max[NVML_MAX_GPUS]; /**< max of attributed[i] >= 0; -1 if never known */
    uint64_t delta_sum_max;      /**< max over samples of the sum over GPUs of delta */
    int64_t attributed_sum_max;  /**< max over fully attributed samples of the sum over
                                      GPUs of attributed[i]; -1 if there was none */
    unsigned long samples;            /**< samples added */
    unsigned long attributed_samples; /**< samples with attributed[i] >= 0 for every i */
};
#define NVML_PEAK_INIT { 0 }

/**
 * Start a trial: ngpu GPUs (clamped to 0..NVML_MAX_GPUS) whose used bytes
 * before it were baseline[0..ngpu) (NULL: all 0).  Clears every maximum.
 */
void nvml_peak_reset(struct nvml_peak *p, int ngpu, const uint64_t *baseline);

/**
 * Fold in one successful sample (arrays of p->ngpu elements, as filled by
 * nvml_sample; attributed may be NULL, meaning all unknown).
 */
void nvml_peak_add(struct nvml_peak *p, const uint64_t *used, const int64_t *attributed);

/**
 * The trial's peak_mem_bytes, with its source in *src (may be NULL):
 *
 *   - -1 (NVML_PEAK_NONE) when no sample was added;
 *   - attributed_sum_max (NVML_PEAK_ATTRIBUTED) when every sample was
 *     fully attributed and the trial's processes were seen holding memory
 *     (attributed_sum_max > 0): the most memory the trial's own processes
 *     held at one time, summed over GPUs, unaffected by other users;
 *   - otherwise delta_sum_max (NVML_PEAK_DEVICE_DELTA): the most the
 *     GPUs' used memory, summed, grew above the baseline at one time;
 *     this counts other processes' growth too.  A trial whose pids NVML
 *     cannot see (pid namespaces) lands here, as does one where any
 *     sample lacked attribution, so that one trial never mixes the two.
 */
int64_t nvml_peak_bytes(const struct nvml_peak *p, enum nvml_peak_source *src);

#endif
