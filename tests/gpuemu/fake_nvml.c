/* SPDX-License-Identifier: MIT */
/*
 * A fake libnvidia-ml.so.1 for the tests of the GPU-memory emulation
 * library (probes/gpuemu/gpuemu.c): the devices of FAKE_GPU_TOTALS (as
 * the fake libcuda reads it), each with a driver reserve of 32 MiB and
 * the bytes in use that the test sets with fake_nvml_set_used.  As real
 * NVML does, the v1 call counts the reserve in `used` and the v2 call
 * reports it apart: total = reserved + used + free.
 */
#include <stdint.h>
#include <stdlib.h>

#include "driver_abi.h"

#define EXPORT __attribute__((visibility("default")))

#define RESERVED (32ULL << 20)
enum { MAXDEV = 4 };

/* A device; nvmlDevice_t, opaque in nvml.h, points to one. */
static struct nvmlDevice_st {
    uint64_t total, used;
} devs[MAXDEV];
static int ndev, inited;

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    const char *v = getenv("FAKE_GPU_TOTALS");
    char *end;
    ndev = 0;
    while (v && *v && ndev < MAXDEV) {
        devs[ndev++].total = strtoull(v, &end, 10);
        v = *end == ',' ? end + 1 : NULL;
    }
    if (!ndev)
        devs[ndev++].total = 8ULL << 30;
    inited = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    inited = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned int)ndev;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= (unsigned int)ndev || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

/* Test-only: device `index` has `bytes` in use besides the reserve. */
EXPORT void fake_nvml_set_used(unsigned int index, unsigned long long bytes)
{
    if (index < MAXDEV)
        devs[index].used = bytes;
}

static uint64_t free_of(const struct nvmlDevice_st *d)
{
    return d->total > RESERVED + d->used ? d->total - RESERVED - d->used : 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || !memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = device->total;
    memory->free = free_of(device);
    memory->used = device->total - memory->free;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    if (!inited)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || !memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = device->total;
    memory->reserved = RESERVED;
    memory->free = free_of(device);
    memory->used = device->total - RESERVED - memory->free;
    return NVML_SUCCESS;
}
