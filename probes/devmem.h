/* SPDX-License-Identifier: MIT */
/*
 * devmem: real device memory for the allocator replay, and memory held
 * back so that a large card stands in for a smaller one.
 *
 * casim.h simulates PyTorch's caching allocator under a capacity.  The
 * simulation cannot see what the device itself does: the driver's
 * allocation granularity, the memory a fragmented device cannot hand out
 * in one piece, the card's own reservations.  devmem replays the same
 * allocator with real segments instead: every segment casim reserves is
 * a real allocation on the device (cuMemAlloc, the call under
 * cudaMalloc), so "out of memory" is the device's answer.  To answer for
 * a smaller card, devmem first holds back memory in chunks until the
 * device's free memory is the smaller card's capacity.
 *
 * The device is a table of four calls (struct devmem_ops): the CUDA
 * driver's, loaded with dlopen by devmem_cuda_open() in a build that found
 * the CUDA toolkit, or a test's fake.  Everything above the table is the
 * same code either way, so the hold-back and replay logic is tested on
 * machines without a GPU.
 *
 * Life cycle:
 *   1. devmem_cuda_open(0, &ops, err, errlen) (or a fake table);
 *   2. devmem_hold(&h, &ops, capacity, err, errlen): free memory is now
 *      capacity (to within one granule);
 *   3. devmem_replay(&ops, events, n, &stats) as often as needed;
 *   4. devmem_unhold(&h), then devmem_cuda_close(&ops).
 */
#ifndef AB_DEVMEM_H
#define AB_DEVMEM_H

#include "casim.h"

#include <stddef.h>
#include <stdint.h>

/** A device, as the four calls devmem needs. */
struct devmem_ops {
    void *ctx;
    /** Free and total memory, bytes: 0, or -1 on an error. */
    int (*info)(void *ctx, uint64_t *free, uint64_t *total);
    /** Allocate size bytes: 0 and *handle, 1 when out of memory, -1 on another error. */
    int (*alloc)(void *ctx, uint64_t size, uint64_t *handle);
    void (*release)(void *ctx, uint64_t handle);
    /** The last error in words (never NULL). */
    const char *(*error)(void *ctx);
};

/** The driver's allocation granularity: holding back is exact to this. */
#define DEVMEM_GRANULE (2ULL << 20)
/** The largest single allocation devmem_hold() asks for. */
#define DEVMEM_CHUNK   (1ULL << 30)

/** Memory held back: the allocations devmem_hold() made. */
struct devmem_hold {
    const struct devmem_ops *ops;
    uint64_t *handle;
    size_t n, cap;
    uint64_t bytes;      /**< held back */
    uint64_t free_after; /**< the device's free memory once held back */
};

#define DEVMEM_HOLD_INIT { NULL, NULL, 0, 0, 0, 0 }

/**
 * Hold back memory until the device's free memory is at most `capacity`
 * bytes and less than DEVMEM_GRANULE below it, largest chunks first
 * (halved when the device refuses one: free memory may be fragmented).
 * Returns 0; -1 with a one-line reason when the device already has less
 * free than capacity or fails, with nothing held.
 */
int devmem_hold(struct devmem_hold *h, const struct devmem_ops *ops, uint64_t capacity,
                char *err, size_t errlen);

/** Give back everything devmem_hold() held; a held-nothing h is fine. */
void devmem_unhold(struct devmem_hold *h);

/** The device as casim's segment source (casim_new_on(), replay_need_on()):
 *  dev refers to ops, which must outlive it. */
void devmem_as_casim(const struct devmem_ops *ops, struct casim_device *dev);

/**
 * casim_replay() of `events` with every segment a real allocation on the
 * device (all given back before it returns).  Returns as casim_replay_on():
 * 0 fits, -1 out of memory at out->oom_at, -2 host out of memory, -3 a
 * device error (ops->error says which).
 */
int devmem_replay(const struct devmem_ops *ops, const int64_t *events, size_t n,
                  struct casim_stats *out);

/**
 * The CUDA driver's calls, from libcuda.so.1 by dlopen, on device
 * `ordinal` (its primary context made current).  Returns 0; -1 with a
 * one-line reason (no driver, no such device, a build without the CUDA
 * toolkit), with nothing to close.
 */
int devmem_cuda_open(int ordinal, struct devmem_ops *ops, char *err, size_t errlen);

/** Release what devmem_cuda_open() took; ops is emptied. */
void devmem_cuda_close(struct devmem_ops *ops);

#endif
