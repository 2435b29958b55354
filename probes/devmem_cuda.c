/* SPDX-License-Identifier: MIT */
/*
 * devmem_cuda: the CUDA driver as a devmem device (see devmem.h).
 *
 * Built against the toolkit's cuda.h when CMake found the toolkit
 * (AB_HAVE_CUDA_H), so that the types and the versioned symbol names
 * (cuda.h maps cuMemAlloc to cuMemAlloc_v2 with a macro) are the
 * toolkit's own; libcuda.so.1 itself is loaded with dlopen, so the
 * binary runs on machines without a GPU or driver and says so.  Without
 * the toolkit, devmem_cuda_open() only says that the build has no CUDA.
 */
#include "devmem.h"
#include "util/errbuf.h"

#include <string.h>

#ifndef AB_HAVE_CUDA_H

int devmem_cuda_open(int ordinal, struct devmem_ops *ops, char *err, size_t errlen)
{
    (void)ordinal;
    memset(ops, 0, sizeof *ops);
    errbuf_set(err, errlen, "this autobatch was built without the CUDA toolkit; rebuild it where "
                            "nvcc is found to replay on a GPU");
    return -1;
}

void devmem_cuda_close(struct devmem_ops *ops)
{
    memset(ops, 0, sizeof *ops);
}

#else

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define CU_NAME_(f) #f
#define CU_NAME(f) CU_NAME_(f) /* the versioned name cuda.h maps f to */

struct cudev {
    void *dl;
    CUdevice dev;
    int retained;
    CUresult last;
    char msg[160];
    __typeof__(cuInit) *init;
    __typeof__(cuDeviceGet) *device_get;
    __typeof__(cuDevicePrimaryCtxRetain) *retain;
    __typeof__(cuDevicePrimaryCtxRelease) *release_ctx;
    __typeof__(cuCtxSetCurrent) *set_current;
    __typeof__(cuMemGetInfo) *mem_info;
    __typeof__(cuMemAlloc) *mem_alloc;
    __typeof__(cuMemFree) *mem_free;
    __typeof__(cuGetErrorString) *error_string;
};

static const char *cudev_error(void *ctx)
{
    struct cudev *c = ctx;
    const char *s = NULL;
    if (c->error_string && c->error_string(c->last, &s) != CUDA_SUCCESS)
        s = NULL;
    snprintf(c->msg, sizeof c->msg, "%s (CUresult %d)", s ? s : "CUDA error", (int)c->last);
    return c->msg;
}

static int cudev_info(void *ctx, uint64_t *free_b, uint64_t *total)
{
    struct cudev *c = ctx;
    size_t f = 0, t = 0;
    c->last = c->mem_info(&f, &t);
    *free_b = f;
    *total = t;
    return c->last == CUDA_SUCCESS ? 0 : -1;
}

static int cudev_alloc(void *ctx, uint64_t size, uint64_t *handle)
{
    struct cudev *c = ctx;
    CUdeviceptr p = 0;
    c->last = c->mem_alloc(&p, (size_t)size);
    if (c->last == CUDA_ERROR_OUT_OF_MEMORY)
        return 1;
    if (c->last != CUDA_SUCCESS)
        return -1;
    *handle = (uint64_t)p;
    return 0;
}

static void cudev_release(void *ctx, uint64_t handle)
{
    struct cudev *c = ctx;
    c->mem_free((CUdeviceptr)handle);
}

static void cudev_free(struct cudev *c)
{
    if (c->retained)
        c->release_ctx(c->dev);
    if (c->dl)
        dlclose(c->dl);
    free(c);
}

int devmem_cuda_open(int ordinal, struct devmem_ops *ops, char *err, size_t errlen)
{
    memset(ops, 0, sizeof *ops);
    struct cudev *c = calloc(1, sizeof *c);
    if (!c) {
        errbuf_set(err, errlen, "out of memory");
        return -1;
    }
    c->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->dl) {
        const char *why = dlerror();
        errbuf_set(err, errlen, "no CUDA driver: cannot load libcuda.so.1 (%s); run where a GPU "
                   "and its driver are", why ? why : "unknown error");
        cudev_free(c);
        return -1;
    }
#define LOAD(field, f) (*(void **)&c->field = dlsym(c->dl, CU_NAME(f)))
    if (!LOAD(init, cuInit) || !LOAD(device_get, cuDeviceGet) ||
        !LOAD(retain, cuDevicePrimaryCtxRetain) || !LOAD(release_ctx, cuDevicePrimaryCtxRelease) ||
        !LOAD(set_current, cuCtxSetCurrent) || !LOAD(mem_info, cuMemGetInfo) ||
        !LOAD(mem_alloc, cuMemAlloc) || !LOAD(mem_free, cuMemFree)) {
        errbuf_set(err, errlen, "libcuda.so.1 lacks a call autobatch needs; update the NVIDIA driver");
        cudev_free(c);
        return -1;
    }
    LOAD(error_string, cuGetErrorString);
#undef LOAD
    CUcontext ctx = NULL;
    const char *step = "cuInit";
    if ((c->last = c->init(0)) == CUDA_SUCCESS) {
        step = "cuDeviceGet";
        if ((c->last = c->device_get(&c->dev, ordinal)) == CUDA_SUCCESS) {
            step = "cuDevicePrimaryCtxRetain";
            if ((c->last = c->retain(&ctx, c->dev)) == CUDA_SUCCESS) {
                c->retained = 1;
                step = "cuCtxSetCurrent";
                c->last = c->set_current(ctx);
            }
        }
    }
    if (c->last != CUDA_SUCCESS) {
        errbuf_set(err, errlen, "GPU %d: %s failed: %s", ordinal, step, cudev_error(c));
        cudev_free(c);
        return -1;
    }
    *ops = (struct devmem_ops){ c, cudev_info, cudev_alloc, cudev_release, cudev_error };
    return 0;
}

void devmem_cuda_close(struct devmem_ops *ops)
{
    if (ops->ctx)
        cudev_free(ops->ctx);
    memset(ops, 0, sizeof *ops);
}

#endif
