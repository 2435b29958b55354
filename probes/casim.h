/* SPDX-License-Identifier: MIT */
/*
 * casim: a simulation of PyTorch's CUDA caching allocator.
 *
 * PyTorch does not hand a tensor's memory back to CUDA when the tensor
 * dies: c10/cuda/CUDACachingAllocator.cpp keeps it cached in "segments"
 * (one cudaMalloc each) and carves later requests out of them.  What a
 * training step needs from the GPU is therefore the allocator's reserved
 * memory, not the sum of its tensors, and whether a step fits depends on
 * the order of its allocations and frees.  casim replays such a sequence
 * with the allocator's rules and reports allocated and reserved bytes,
 * their peaks, and the request at which it would run out of memory.
 *
 * The rules modelled, with PyTorch's constants (the default settings;
 * casim_configure() adds expandable segments, max_split_size,
 * roundup_power2_divisions and, roughly, garbage_collection_threshold;
 * one stream, no CUDA graphs):
 *   - every request is rounded up to a multiple of 512 bytes (0 -> 512);
 *   - requests of at most 1 MiB use the small pool, others the large one;
 *   - a request is served by the smallest cached free block of its pool
 *     that is large enough (best fit); of equal sizes the lowest address
 *     wins.  Addresses are simulated: each new segment lies above every
 *     earlier one, so among equal sizes the oldest segment wins;
 *   - the block is split when the rest is worth keeping: at least 512
 *     bytes in the small pool, more than 1 MiB in the large pool; an
 *     unsplit block is handed out whole and counts whole as allocated;
 *   - a freed block merges with free neighbours in its segment;
 *   - when no cached block fits, a new segment is reserved: 2 MiB for the
 *     small pool, 20 MiB for large requests under 10 MiB, else the request
 *     rounded up to 2 MiB.  If that would exceed the capacity, every
 *     segment that is entirely free (either pool) is released and the
 *     segment is tried once more; if it still does not fit the request
 *     fails: the simulated "CUDA out of memory".
 *
 * Life cycle:
 *   1. struct casim *s = casim_new(capacity);
 *   2. casim_alloc(s, id, size) and casim_release(s, id) in the trainer's
 *      order, casim_stats(s, &st) whenever the figures are wanted;
 *   3. casim_free(s).
 * casim_replay() runs all three over a trace of signed sizes in one call.
 *
 * A real device instead of a capacity: casim_new_on(dev) asks `dev` for
 * every segment and gives each back through it, so that the segments are
 * real device memory (cudaMalloc, in devmem.h) and whether a request
 * fits is the device's answer, fragmentation and granularity included.
 * The rules are the same: a refused segment releases the cached whole
 * segments and is asked for once more.
 *
 * The module never prints.  Costs are O(log n) a request in the number of
 * cached blocks (a treap per pool keyed on size and address) and O(1)
 * expected for finding a live block by id (a hash table); releasing the
 * cached segments on the out-of-memory path walks every block once.
 */
#ifndef AB_CASIM_H
#define AB_CASIM_H

#include <stddef.h>
#include <stdint.h>

/** PyTorch's constants (CUDACachingAllocator.cpp), in bytes. */
#define CASIM_MIN_BLOCK   512ULL                 /**< kMinBlockSize: rounding unit */
#define CASIM_SMALL_SIZE  (1ULL << 20)           /**< kSmallSize: largest small request */
#define CASIM_SMALL_BUF   (2ULL << 20)           /**< kSmallBuffer: small segment */
#define CASIM_LARGE_BUF   (20ULL << 20)          /**< kLargeBuffer: segment for 1-10 MiB */
#define CASIM_MIN_LARGE   (10ULL << 20)          /**< kMinLargeAlloc */
#define CASIM_ROUND_LARGE (2ULL << 20)           /**< kRoundLarge: large segment unit */

/** The largest request casim accepts; a larger one fails as out of memory. */
#define CASIM_REQUEST_MAX (1ULL << 62)

struct casim;

/** The figures PyTorch's torch.cuda.memory_stats() would show, in bytes. */
struct casim_stats {
    uint64_t allocated;      /**< live blocks' sizes (rounded, whole if unsplit) */
    uint64_t reserved;       /**< sizes of the segments held */
    uint64_t peak_allocated; /**< highest `allocated` so far */
    uint64_t peak_reserved;  /**< highest `reserved` so far */
    uint64_t segments;       /**< segments held now */
    uint64_t segment_allocs; /**< segments reserved so far ("cudaMalloc" calls) */
    uint64_t segment_frees;  /**< segments released so far ("cudaFree" calls) */
    uint64_t live_blocks;    /**< blocks allocated and not yet released */
    int oom;                 /**< 1 once a request has failed, else 0 */
    /**
     * Where the first failure was, when oom is 1 (else 0).  From
     * casim_stats(): the 0-based number of the casim_alloc() call, counting
     * every call.  From casim_replay(): the index of the event.
     */
    size_t oom_at;
    /** casim_replay() only: frees that matched no live block (skipped). */
    size_t unmatched_frees;
};

/**
 * A new, empty allocator for a device of `capacity` bytes (0: unlimited).
 * The capacity bounds reserved memory, as the free memory of the GPU
 * bounds cudaMalloc.  Returns NULL when memory runs out.
 */
struct casim *casim_new(uint64_t capacity);

/**
 * The allocator's settings (PYTORCH_CUDA_ALLOC_CONF) that casim models;
 * all 0 is the default allocator.
 *   - expandable: expandable_segments:True.  One segment per pool grows
 *     by mapping pages (20 MiB large, 2 MiB small) at its end when no
 *     cached block fits, instead of a new segment per miss; releasing the
 *     cache unmaps the whole pages of the free block at its end (free
 *     pages inside it stay mapped: a simplification).  Simulated only: a
 *     device-backed allocator (casim_new_on) ignores it.
 *   - max_split: max_split_size_mb in bytes: blocks of at least this size
 *     are not split, a smaller request does not take one, a larger request
 *     takes none more than 20 MiB above its size.
 *   - roundup_divisions: roundup_power2_divisions (one number, a power of
 *     two): requests round up to the next of that many divisions of their
 *     power-of-two interval.
 *   - gc_threshold: garbage_collection_threshold: before a segment would
 *     take reserved memory above this fraction of the capacity, the cached
 *     whole segments are released (PyTorch frees the oldest first, and
 *     only under a per-process memory fraction: an approximation).
 */
struct casim_config {
    int expandable;
    uint64_t max_split;
    unsigned roundup_divisions;
    double gc_threshold;
};

/**
 * Read PYTORCH_CUDA_ALLOC_CONF's text ("key:value,..."; NULL or "" is
 * the default) into *c.  Returns 0, or -1 with why when it names what
 * casim does not model (backend:cudaMallocAsync, per-interval roundup
 * lists, a value it cannot read).  Keys about pinned host memory and
 * unknown ones are ignored.
 */
int casim_config_parse(const char *conf, struct casim_config *c, char *why, size_t whylen);

/** Use settings c from now on (set before the first request). */
void casim_configure(struct casim *s, const struct casim_config *c);

/**
 * Where a device-backed allocator's segments come from.  reserve() gets
 * `size` bytes and a handle for them: 0 on success, 1 when the device is
 * out of memory, -1 on any other error.  release() gives a segment back.
 */
struct casim_device {
    void *ctx;
    int (*reserve)(void *ctx, uint64_t size, uint64_t *handle);
    void (*release)(void *ctx, uint64_t handle);
};

/**
 * A new, empty allocator whose segments are reserved from `dev` (kept by
 * pointer: it must outlive the allocator).  casim_free() gives back every
 * segment still held.  Returns NULL when memory runs out.
 */
struct casim *casim_new_on(const struct casim_device *dev);

/** Free the allocator and everything in it; NULL is fine. */
void casim_free(struct casim *s);

/**
 * Allocate a block for a request of `size` bytes and remember it as `id`,
 * the caller's handle, which must not name a live block.
 *
 * Returns 0 on success; -1 when the request does not fit (the simulated
 * out-of-memory error: stats' oom is set and, for the first failure,
 * oom_at; the allocator stays usable, with its entirely free segments
 * already released, as PyTorch leaves it); -2 when `id` is already live
 * or the host runs out of memory, with nothing changed; -3 when a device's
 * reserve() fails with an error other than out of memory.
 */
int casim_alloc(struct casim *s, uint64_t id, uint64_t size);

/** In casim_seed_segment(): a block that is cached (free), not live. */
#define CASIM_SEED_FREE UINT64_MAX

/**
 * Reserve one segment laid out as given, as it was found in a running
 * allocator (a memory-history snapshot): n blocks of sizes[k] bytes
 * (multiples of 512) tiling it in address order, block k live as ids[k]
 * or cached when ids[k] is CASIM_SEED_FREE (neighbouring cached blocks
 * merge).  small: the segment is in the small pool.  The segment is
 * reserved like any other (capacity or device, the cached whole segments
 * released once when it does not fit).  Under expandable segments
 * (simulated), a pool's first seeded segment is the one that grows: later
 * pages are mapped at its end.  Returns 0; -1 when it does not
 * fit (stats' oom set); -2 on a live id, a bad size or no host memory
 * (the allocator may then be part-seeded: free it); -3 on a device error.
 */
int casim_seed_segment(struct casim *s, int small, const uint64_t *sizes, const uint64_t *ids,
                       size_t n);

/**
 * Free the live block `id`: it is cached, merged with free neighbours in
 * its segment, and never given back to the device by itself.  Returns 0,
 * or -1 when no live block has that id.
 */
int casim_release(struct casim *s, uint64_t id);

/**
 * Release every cached segment that is entirely free, as
 * torch.cuda.empty_cache() does.  Live blocks are untouched.
 */
void casim_empty_cache(struct casim *s);

/** Copy the current figures into *out. */
void casim_stats(const struct casim *s, struct casim_stats *out);

/**
 * Where live block `id` lies: its simulated address and its size (the
 * rounded request, or the whole block when it was not split).  Either
 * pointer may be NULL.  Returns 0, or -1 when no live block has that id.
 */
int casim_block_info(const struct casim *s, uint64_t id, uint64_t *addr, uint64_t *size);

/**
 * Check the allocator's internal consistency: every segment's blocks tile
 * it, no two free neighbours are left unmerged, every free block is in its
 * pool's tree and only those, and the totals agree with the blocks.
 * Returns 0 when all hold, else a negative number saying which failed.
 * Meant for tests: it walks everything.
 */
int casim_check(const struct casim *s);

/**
 * Replay a trace of `n` events on a fresh allocator of `capacity` bytes
 * (0: unlimited) and leave the final figures in *out (may be NULL).
 *
 * An event is a signed size, in the order the trainer made them: v > 0
 * allocates a new block of v bytes; v < 0 frees the most recently
 * allocated block still live whose requested size is exactly -v (a trace
 * taken on the CPU has sizes only, no addresses, and the latest tensor of
 * a size is the likeliest to die first).  A free that matches no live
 * block is skipped and counted in unmatched_frees; 0 is skipped, as
 * PyTorch never calls its allocator for an empty tensor.
 *
 * Returns 0 when every event ran; -1 at the first request that does not
 * fit, with out->oom = 1 and out->oom_at its index (the figures are those
 * just after the failure); -2 when the host runs out of memory.
 */
int casim_replay(const int64_t *events, size_t n, uint64_t capacity, struct casim_stats *out);

/**
 * casim_replay() on a fresh allocator whose segments come from `dev`;
 * every segment is given back before it returns.  Returns as
 * casim_replay() does, or -3 when the device failed otherwise than by
 * running out of memory.
 */
int casim_replay_on(const struct casim_device *dev, const int64_t *events, size_t n,
                    struct casim_stats *out);

#endif
