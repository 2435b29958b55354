/* SPDX-License-Identifier: MIT */
/*
 * devmem: holding device memory back, and the allocator replay on real
 * segments (see devmem.h).  The CUDA driver binding is devmem_cuda.c.
 */
#include "devmem.h"
#include "util/errbuf.h"

#include <stdlib.h>

static int hold_push(struct devmem_hold *h, uint64_t handle)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        uint64_t *p = realloc(h->handle, cap * sizeof *p);
        if (!p)
            return -1;
        h->handle = p;
        h->cap = cap;
    }
    h->handle[h->n++] = handle;
    return 0;
}

int devmem_hold(struct devmem_hold *h, const struct devmem_ops *ops, uint64_t capacity,
                char *err, size_t errlen)
{
    *h = (struct devmem_hold)DEVMEM_HOLD_INIT;
    h->ops = ops;
    if (err && errlen)
        err[0] = '\0';
    uint64_t free_b, total;
    if (ops->info(ops->ctx, &free_b, &total)) {
        errbuf_set(err, errlen, "cannot read the device's free memory: %s", ops->error(ops->ctx));
        return -1;
    }
    if (free_b < capacity) {
        errbuf_set(err, errlen, "the device has %.2f GiB free, less than the %.2f GiB asked for",
                   (double)free_b / (1 << 30), (double)capacity / (1 << 30));
        return -1;
    }
    uint64_t chunk = DEVMEM_CHUNK;
    /*
     * Each round either holds a chunk or halves the chunk, and the free
     * memory only shrinks, so the loop ends; the bound guards against a
     * device whose free memory does not move.  Another process taking
     * memory meanwhile would make the result wrong: refused.
     */
    for (int round = 0; round < 1 << 20; round++) {
        if (free_b <= capacity) {
            h->free_after = free_b;
            return 0;
        }
        /* Whole granules, the last one rounded up: a granule under at most. */
        uint64_t want = free_b - capacity;
        uint64_t ask = want < chunk ? (want + DEVMEM_GRANULE - 1) / DEVMEM_GRANULE * DEVMEM_GRANULE
                                    : chunk;
        uint64_t handle;
        int r = ops->alloc(ops->ctx, ask, &handle);
        if (r == 0 && hold_push(h, handle)) {
            ops->release(ops->ctx, handle);
            errbuf_set(err, errlen, "out of host memory");
            break;
        }
        if (r == 0) {
            h->bytes += ask;
        } else if (r == 1 && ask > DEVMEM_GRANULE) {
            chunk = ask / 2 / DEVMEM_GRANULE * DEVMEM_GRANULE;
        } else if (r == 1) {
            errbuf_set(err, errlen, "the device refused %.0f MiB with %.2f GiB free",
                       (double)ask / (1 << 20), (double)free_b / (1 << 30));
            break;
        } else {
            errbuf_set(err, errlen, "allocating %.0f MiB on the device failed: %s",
                       (double)ask / (1 << 20), ops->error(ops->ctx));
            break;
        }
        uint64_t before = free_b;
        if (ops->info(ops->ctx, &free_b, &total)) {
            errbuf_set(err, errlen, "cannot read the device's free memory: %s", ops->error(ops->ctx));
            break;
        }
        if (free_b + (r == 0 ? ask : 0) + DEVMEM_GRANULE < before) {
            errbuf_set(err, errlen, "the device's free memory fell by more than autobatch took "
                       "while holding memory back (is another process using it?)");
            break;
        }
    }
    if (err && !err[0])
        errbuf_set(err, errlen, "holding memory back did not converge");
    devmem_unhold(h);
    return -1;
}

void devmem_unhold(struct devmem_hold *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->ops->release(h->ops->ctx, h->handle[i]);
    free(h->handle);
    const struct devmem_ops *ops = h->ops;
    *h = (struct devmem_hold)DEVMEM_HOLD_INIT;
    h->ops = ops;
}

static int seg_reserve(void *ctx, uint64_t size, uint64_t *handle)
{
    const struct devmem_ops *ops = ctx;
    return ops->alloc(ops->ctx, size, handle);
}

static void seg_release(void *ctx, uint64_t handle)
{
    const struct devmem_ops *ops = ctx;
    ops->release(ops->ctx, handle);
}

void devmem_as_casim(const struct devmem_ops *ops, struct casim_device *dev)
{
    *dev = (struct casim_device){ (void *)ops, seg_reserve, seg_release };
}

int devmem_replay(const struct devmem_ops *ops, const int64_t *events, size_t n,
                  struct casim_stats *out)
{
    struct casim_device dev;
    devmem_as_casim(ops, &dev);
    return casim_replay_on(&dev, events, n, out);
}
