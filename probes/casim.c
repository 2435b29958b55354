/* SPDX-License-Identifier: MIT */
/*
 * casim: a simulation of PyTorch's CUDA caching allocator (see casim.h).
 *
 * The model follows DeviceCachingAllocator in c10/cuda/
 * CUDACachingAllocator.cpp with its default settings: malloc() rounds the
 * request, picks a pool, looks for the best-fitting cached block
 * (get_free_block), else reserves a segment (alloc_block), else releases
 * the cached whole segments and tries once more (release_cached_blocks);
 * a found block is split when should_split() says so; free() merges the
 * block with its free neighbours (free_block).  Streams, events, CUDA
 * graphs and the optional settings are left out.
 *
 * Blocks live in one growable array and refer to each other by index
 * (0 is "none"), so that growing the array moves nothing that matters.
 * A block is a slice of a segment: prev and next are its neighbours in the
 * segment, and a block with neither is a whole segment.  The cached
 * (free) blocks of each pool form a treap ordered by (size, address), the
 * order of PyTorch's std::set of free blocks, so that best fit is a
 * lower-bound search.  Live blocks are found by the caller's id through an
 * open-addressing hash table.
 */
#include "casim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Hash table: uint64 key -> uint64 value                              */
/* ------------------------------------------------------------------ */

/*
 * Linear probing with backward-shift deletion, so that there are no
 * tombstones and a long replay of allocations and frees does not slowly
 * fill the table.  Kept at most half full.
 */
struct casim_map {
    uint64_t *keys;
    uint64_t *vals;
    unsigned char *used;
    size_t cap;  /* a power of two, or 0 before the first insert */
    size_t len;
};

static size_t map_home(const struct casim_map *m, uint64_t key)
{
    /* splitmix64's finaliser: sequential ids and 512-byte multiples spread */
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ULL;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebULL;
    key ^= key >> 31;
    return (size_t)key & (m->cap - 1);
}

static void map_release(struct casim_map *m)
{
    free(m->keys);
    free(m->vals);
    free(m->used);
    memset(m, 0, sizeof *m);
}

/* The slot holding key, or SIZE_MAX. */
static size_t map_slot(const struct casim_map *m, uint64_t key)
{
    if (!m->cap)
        return SIZE_MAX;
    for (size_t i = map_home(m, key);; i = (i + 1) & (m->cap - 1)) {
        if (!m->used[i])
            return SIZE_MAX;
        if (m->keys[i] == key)
            return i;
    }
}

static int map_get(const struct casim_map *m, uint64_t key, uint64_t *val)
{
    size_t i = map_slot(m, key);
    if (i == SIZE_MAX)
        return 0;
    *val = m->vals[i];
    return 1;
}

static int map_grow(struct casim_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct casim_map n = { calloc(cap, sizeof *n.keys), calloc(cap, sizeof *n.vals),
                           calloc(cap, 1), cap, 0 };
    if (!n.keys || !n.vals || !n.used) {
        map_release(&n);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->used[i])
            continue;
        size_t j = map_home(&n, m->keys[i]);
        while (n.used[j])
            j = (j + 1) & (cap - 1);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.len++;
    }
    map_release(m);
    *m = n;
    return 0;
}

/* Insert or overwrite.  Returns 0, or -1 when memory runs out. */
static int map_put(struct casim_map *m, uint64_t key, uint64_t val)
{
    size_t i = map_slot(m, key);
    if (i != SIZE_MAX) {
        m->vals[i] = val;
        return 0;
    }
    if ((m->len + 1) * 2 > m->cap && map_grow(m))
        return -1;
    for (i = map_home(m, key); m->used[i]; i = (i + 1) & (m->cap - 1))
        ;
    m->used[i] = 1;
    m->keys[i] = key;
    m->vals[i] = val;
    m->len++;
    return 0;
}

static void map_del(struct casim_map *m, uint64_t key)
{
    size_t i = map_slot(m, key);
    if (i == SIZE_MAX)
        return;
    size_t mask = m->cap - 1;
    /*
     * Pull later entries of the probe run back into the hole when their
     * home slot does not lie cyclically within (hole, their slot].
     */
    for (size_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
        size_t k = map_home(m, m->keys[j]);
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        m->keys[i] = m->keys[j];
        m->vals[i] = m->vals[j];
        i = j;
    }
    m->used[i] = 0;
    m->len--;
}

/* ------------------------------------------------------------------ */
/* Blocks and the allocator                                            */
/* ------------------------------------------------------------------ */

#define NIL 0u

enum block_state { SLOT_UNUSED = 0, BLOCK_LIVE, BLOCK_CACHED };
enum pool_kind { POOL_SMALL = 0, POOL_LARGE = 1 };

struct casim_block {
    uint64_t addr;   /* simulated device address */
    uint64_t size;
    uint64_t id;     /* caller's handle while live */
    uint32_t prev;   /* neighbours in the segment, NIL at its ends; */
    uint32_t next;   /* for an unused slot, next chains the spare slots */
    uint32_t left;   /* treap children, while cached */
    uint32_t right;
    uint32_t prio;   /* treap heap priority */
    unsigned char state;
    unsigned char pool;
};

struct casim {
    uint64_t capacity;      /* 0: unlimited */
    uint64_t next_addr;     /* where the next segment starts */
    struct casim_block *b;  /* b[0] is unused: index 0 is NIL */
    uint32_t nb;            /* slots in use or spare, including b[0] */
    uint32_t cap;           /* slots allocated */
    uint32_t spare;         /* head of the chain of unused slots */
    uint32_t root[2];       /* cached blocks of each pool */
    uint32_t rng;           /* xorshift state for treap priorities */
    struct casim_map ids;   /* id -> index of the live block */
    const struct casim_device *dev; /* NULL: simulated segments under capacity */
    struct casim_map segs;  /* with dev: segment address -> device handle */
    size_t requests;        /* casim_alloc() calls so far */
    struct casim_config conf;
    uint32_t exp[2];        /* expandable segments: each pool's head block, */
    uint32_t exp_tail[2];   /* and the block at its end */
    struct casim_stats st;
};

/* Where each pool's expandable segment lies: far above the others. */
#define EXP_BASE(pool) ((1ULL << 60) + (uint64_t)(pool) * (1ULL << 59))
#define EXP_PAGE(pool) ((pool) == POOL_SMALL ? CASIM_SMALL_BUF : CASIM_LARGE_BUF)

static uint32_t casim_rand(struct casim *s)
{
    uint32_t x = s->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return s->rng = x;
}

/*
 * Make room for k more slots, so that the slot_get() calls of one request
 * cannot fail half-way through it.  Returns 0, or -1 when memory runs out.
 */
static int slots_reserve(struct casim *s, uint32_t k)
{
    if (s->cap - s->nb >= k)
        return 0;
    /* Doubled until k more fit: a seeded segment may bring thousands of
     * blocks at once (one growth step is not always enough). */
    uint64_t cap = s->cap;
    while (cap - s->nb < k)
        cap *= 2;
    if (cap > UINT32_MAX / 2)
        return -1;
    struct casim_block *nb = realloc(s->b, (size_t)cap * sizeof *nb);
    if (!nb)
        return -1;
    s->b = nb;
    s->cap = cap;
    return 0;
}

/* A fresh slot: a spare one, else one that slots_reserve() made room for. */
static uint32_t slot_get(struct casim *s)
{
    uint32_t i = s->spare;
    if (i != NIL)
        s->spare = s->b[i].next;
    else
        i = s->nb++;
    memset(&s->b[i], 0, sizeof s->b[i]);
    s->b[i].prio = casim_rand(s);
    return i;
}

static void slot_put(struct casim *s, uint32_t i)
{
    s->b[i].state = SLOT_UNUSED;
    s->b[i].next = s->spare;
    s->spare = i;
}

/* ------------------------------------------------------------------ */
/* The free-block trees: a treap per pool ordered by (size, address)   */
/* ------------------------------------------------------------------ */

static int key_less(const struct casim *s, uint32_t x, uint32_t y)
{
    const struct casim_block *a = &s->b[x], *b = &s->b[y];
    return a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* Split tree t into the nodes ordered before node x (*l) and the rest (*r). */
static void tree_split(struct casim *s, uint32_t t, uint32_t x, uint32_t *l, uint32_t *r)
{
    while (t != NIL) {
        if (key_less(s, t, x)) {
            *l = t;
            l = &s->b[t].right;
            t = s->b[t].right;
        } else {
            *r = t;
            r = &s->b[t].left;
            t = s->b[t].left;
        }
    }
    *l = *r = NIL;
}

/* Join two trees, every node of l ordered before every node of r. */
static uint32_t tree_merge(struct casim *s, uint32_t l, uint32_t r)
{
    uint32_t root = NIL, *at = &root;
    while (l != NIL && r != NIL) {
        if (s->b[l].prio > s->b[r].prio) {
            *at = l;
            at = &s->b[l].right;
            l = s->b[l].right;
        } else {
            *at = r;
            at = &s->b[r].left;
            r = s->b[r].left;
        }
    }
    *at = l != NIL ? l : r;
    return root;
}

static void tree_insert(struct casim *s, uint32_t x)
{
    uint32_t *at = &s->root[s->b[x].pool];
    while (*at != NIL && s->b[*at].prio >= s->b[x].prio)
        at = key_less(s, x, *at) ? &s->b[*at].left : &s->b[*at].right;
    tree_split(s, *at, x, &s->b[x].left, &s->b[x].right);
    *at = x;
}

static void tree_erase(struct casim *s, uint32_t x)
{
    uint32_t *at = &s->root[s->b[x].pool];
    while (*at != x)
        at = key_less(s, x, *at) ? &s->b[*at].left : &s->b[*at].right;
    *at = tree_merge(s, s->b[x].left, s->b[x].right);
    s->b[x].left = s->b[x].right = NIL;
}

/* The first block in (size, address) order whose size is >= size, or NIL. */
static uint32_t tree_lower_bound(const struct casim *s, int pool, uint64_t size)
{
    uint32_t best = NIL;
    for (uint32_t t = s->root[pool]; t != NIL;) {
        if (s->b[t].size >= size) {
            best = t;
            t = s->b[t].left;
        } else {
            t = s->b[t].right;
        }
    }
    return best;
}

/* ------------------------------------------------------------------ */
/* The allocator's rules                                               */
/* ------------------------------------------------------------------ */

/* round_size(): to a multiple of kMinBlockSize, at least one; with
 * roundup_power2_divisions, to the next division of its power-of-two
 * interval. */
static uint64_t casim_round(const struct casim *s, uint64_t size)
{
    if (size < CASIM_MIN_BLOCK)
        return CASIM_MIN_BLOCK;
    uint64_t div = s->conf.roundup_divisions;
    if (div > 1 && size > CASIM_MIN_BLOCK * div) {
        uint64_t floor2 = 1ULL << (63 - __builtin_clzll(size));
        if (floor2 == size)
            return size;
        uint64_t step = floor2 / div;
        if (step == 0)
            return floor2 << 1;
        return (size + step - 1) / step * step;
    }
    return (size + CASIM_MIN_BLOCK - 1) / CASIM_MIN_BLOCK * CASIM_MIN_BLOCK;
}

/* get_allocation_size(): the segment reserved for a rounded request. */
static uint64_t casim_segment_size(uint64_t size)
{
    if (size <= CASIM_SMALL_SIZE)
        return CASIM_SMALL_BUF;
    if (size < CASIM_MIN_LARGE)
        return CASIM_LARGE_BUF;
    return (size + CASIM_ROUND_LARGE - 1) / CASIM_ROUND_LARGE * CASIM_ROUND_LARGE;
}

/* should_split(): a request of size with `remaining` bytes left over. */
static int casim_should_split(const struct casim *s, int pool, uint64_t size, uint64_t remaining)
{
    if (pool == POOL_SMALL)
        return remaining >= CASIM_MIN_BLOCK;
    if (s->conf.max_split && size >= s->conf.max_split)
        return 0;
    return remaining > CASIM_SMALL_SIZE;
}

/* get_free_block() with max_split_size: the best-fitting cached block a
 * request may take, or NIL. */
static uint32_t tree_lower_bound(const struct casim *s, int pool, uint64_t size);
static uint32_t casim_find(const struct casim *s, int pool, uint64_t size)
{
    uint32_t x = tree_lower_bound(s, pool, size);
    uint64_t ms = s->conf.max_split;
    if (x == NIL || !ms || pool == POOL_SMALL)
        return x;
    if (size < ms && s->b[x].size >= ms)
        return NIL; /* an oversize block is not split for a small request */
    if (size >= ms && s->b[x].size >= size + CASIM_LARGE_BUF)
        return NIL; /* nor given whole to a request far below it */
    return x;
}

static int casim_fits(const struct casim *s, uint64_t seg)
{
    uint64_t limit = s->capacity ? s->capacity : UINT64_MAX;
    return seg <= limit && s->st.reserved <= limit - seg;
}

/*
 * Ask for a segment of seg bytes at s->next_addr: from the device when
 * there is one, else against the capacity.  Returns 0, 1 when it does not
 * fit, -2 when the host runs out of memory, -3 on a device error.
 */
static int casim_reserve(struct casim *s, uint64_t seg)
{
    if (!s->dev)
        return casim_fits(s, seg) ? 0 : 1;
    if (map_put(&s->segs, s->next_addr, 0))
        return -2;
    uint64_t handle = 0;
    int r = s->dev->reserve(s->dev->ctx, seg, &handle);
    if (r) {
        map_del(&s->segs, s->next_addr);
        return r == 1 ? 1 : -3;
    }
    map_put(&s->segs, s->next_addr, handle); /* the key is present: cannot fail */
    return 0;
}

/* Give a whole segment starting at addr back to the device, if any. */
static void casim_unreserve(struct casim *s, uint64_t addr)
{
    uint64_t handle;
    if (s->dev && map_get(&s->segs, addr, &handle)) {
        s->dev->release(s->dev->ctx, handle);
        map_del(&s->segs, addr);
    }
}

/* alloc_block(): take the segment casim_reserve() got, as one block;
 * slots must be reserved. */
static uint32_t casim_new_segment(struct casim *s, int pool, uint64_t seg)
{
    uint32_t x = slot_get(s);
    struct casim_block *b = &s->b[x];
    b->addr = s->next_addr;
    b->size = seg;
    b->pool = (unsigned char)pool;
    s->next_addr += seg;
    s->st.reserved += seg;
    s->st.segments++;
    s->st.segment_allocs++;
    if (s->st.reserved > s->st.peak_reserved)
        s->st.peak_reserved = s->st.reserved;
    return x;
}

/*
 * release_cached_blocks(): give back every cached block that is a whole
 * segment, in both pools.  Split segments stay, even when all their blocks
 * are free, which cannot happen here because free blocks always merge.
 */
void casim_empty_cache(struct casim *s)
{
    /* An expandable segment unmaps the whole pages of its free end. */
    for (int p = 0; p < 2; p++) {
        uint32_t t = s->exp_tail[p];
        if (t == NIL || s->b[t].state != BLOCK_CACHED || s->b[t].prev == NIL)
            continue;
        uint64_t page = EXP_PAGE(p), base = s->b[s->exp[p]].addr;
        uint64_t end = s->b[t].addr + s->b[t].size;
        uint64_t from = base + (s->b[t].addr - base + page - 1) / page * page;
        if (from >= end)
            continue;
        tree_erase(s, t);
        s->b[t].size -= end - from;
        s->st.reserved -= end - from;
        if (s->b[t].size) {
            tree_insert(s, t);
        } else {
            s->exp_tail[p] = s->b[t].prev;
            s->b[s->b[t].prev].next = NIL;
            slot_put(s, t);
        }
    }
    for (uint32_t i = 1; i < s->nb; i++) {
        struct casim_block *b = &s->b[i];
        if (b->state != BLOCK_CACHED || b->prev != NIL || b->next != NIL)
            continue;
        if (s->exp[b->pool] == i)
            s->exp[b->pool] = s->exp_tail[b->pool] = NIL;
        tree_erase(s, i);
        casim_unreserve(s, b->addr);
        s->st.reserved -= b->size;
        s->st.segments--;
        s->st.segment_frees++;
        slot_put(s, i);
    }
}

/* garbage_collection_threshold: release the cache before reserved
 * memory would pass the threshold. */
static void casim_gc(struct casim *s, uint64_t more)
{
    double th = s->conf.gc_threshold;
    if (th > 0 && s->capacity &&
        (double)(s->st.reserved + more) > th * (double)s->capacity)
        casim_empty_cache(s);
}

/*
 * Expandable segments: map pages at the end of pool's segment until its
 * free end holds rs bytes; *x is that free block (out of its tree).
 * Slots must be reserved.  Returns 0, 1 when the pages do not fit.
 */
static int casim_expand(struct casim *s, int pool, uint64_t rs, uint32_t *x)
{
    uint64_t page = EXP_PAGE(pool);
    uint32_t t = s->exp_tail[pool];
    uint64_t have = t != NIL && s->b[t].state == BLOCK_CACHED ? s->b[t].size : 0;
    uint64_t map = (rs - have + page - 1) / page * page;
    casim_gc(s, map);
    if (!casim_fits(s, map)) {
        casim_empty_cache(s);
        t = s->exp_tail[pool];
        have = t != NIL && s->b[t].state == BLOCK_CACHED ? s->b[t].size : 0;
        map = (rs - have + page - 1) / page * page;
        if (!casim_fits(s, map))
            return 1;
    }
    if (t == NIL) {
        uint32_t h = slot_get(s);
        s->b[h].addr = EXP_BASE(pool);
        s->b[h].size = map;
        s->b[h].pool = (unsigned char)pool;
        s->exp[pool] = s->exp_tail[pool] = h;
        s->st.segments++;
        s->st.segment_allocs++;
        *x = h;
    } else if (have) {
        tree_erase(s, t);
        s->b[t].size += map;
        *x = t;
    } else {
        uint32_t y = slot_get(s);
        s->b[y].addr = s->b[t].addr + s->b[t].size;
        s->b[y].size = map;
        s->b[y].pool = (unsigned char)pool;
        s->b[y].prev = t;
        s->b[t].next = y;
        s->exp_tail[pool] = y;
        *x = y;
    }
    s->st.reserved += map;
    if (s->st.reserved > s->st.peak_reserved)
        s->st.peak_reserved = s->st.reserved;
    return 0;
}

void casim_configure(struct casim *s, const struct casim_config *c)
{
    s->conf = *c;
    if (c->roundup_divisions & (c->roundup_divisions - 1))
        s->conf.roundup_divisions = 0; /* not a power of two: PyTorch refuses it */
}

int casim_config_parse(const char *conf, struct casim_config *c, char *why, size_t whylen)
{
    memset(c, 0, sizeof *c);
    if (!conf)
        return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", conf);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ')
            kv++;
        char *v = strchr(kv, ':');
        if (!v)
            continue;
        *v++ = '\0';
        char *end;
        if (!strcmp(kv, "backend")) {
            if (strcmp(v, "native")) {
                snprintf(why, whylen, "PYTORCH_CUDA_ALLOC_CONF backend:%s is not PyTorch's caching "
                         "allocator (not modelled)", v);
                return -1;
            }
        } else if (!strcmp(kv, "expandable_segments")) {
            c->expandable = !strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1");
        } else if (!strcmp(kv, "max_split_size_mb")) {
            unsigned long long mb = strtoull(v, &end, 10);
            if (end == v || *end) {
                snprintf(why, whylen, "PYTORCH_CUDA_ALLOC_CONF max_split_size_mb:%s is not a number", v);
                return -1;
            }
            c->max_split = mb > (1ULL << 40) ? 0 : mb << 20;
        } else if (!strcmp(kv, "roundup_power2_divisions")) {
            unsigned long d = strtoul(v, &end, 10);
            if (end == v || *end || d > 1024 || (d & (d - 1))) {
                snprintf(why, whylen, "PYTORCH_CUDA_ALLOC_CONF roundup_power2_divisions:%s (a list "
                         "per interval, or not a power of two) is not modelled", v);
                return -1;
            }
            c->roundup_divisions = (unsigned)d;
        } else if (!strcmp(kv, "garbage_collection_threshold")) {
            double th = strtod(v, &end);
            if (end == v || *end || !(th > 0 && th < 1)) {
                snprintf(why, whylen, "PYTORCH_CUDA_ALLOC_CONF garbage_collection_threshold:%s is "
                         "not a fraction", v);
                return -1;
            }
            c->gc_threshold = th;
        } /* pinned host memory, locking: nothing to model */
    }
    return 0;
}

struct casim *casim_new(uint64_t capacity)
{
    struct casim *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cap = 64;
    s->b = calloc(s->cap, sizeof *s->b);
    if (!s->b) {
        free(s);
        return NULL;
    }
    s->nb = 1;
    s->capacity = capacity;
    s->rng = 0x9e3779b9u; /* fixed: the same trace always builds the same trees */
    return s;
}

struct casim *casim_new_on(const struct casim_device *dev)
{
    struct casim *s = casim_new(0);
    if (s)
        s->dev = dev;
    return s;
}

void casim_free(struct casim *s)
{
    if (!s)
        return;
    for (size_t i = 0; s->dev && i < s->segs.cap; i++)
        if (s->segs.used[i])
            s->dev->release(s->dev->ctx, s->segs.vals[i]);
    map_release(&s->segs);
    map_release(&s->ids);
    free(s->b);
    free(s);
}

static int casim_oom(struct casim *s, size_t request)
{
    if (!s->st.oom) {
        s->st.oom = 1;
        s->st.oom_at = request;
    }
    return -1;
}

int casim_alloc(struct casim *s, uint64_t id, uint64_t size)
{
    size_t request = s->requests++;
    uint64_t unused;
    if (map_get(&s->ids, id, &unused))
        return -2;
    if (size > CASIM_REQUEST_MAX)
        return casim_oom(s, request);
    /*
     * Make room in the id table and for two blocks (a new segment and a
     * split-off remainder) first, so that running out of host memory can
     * change nothing; after this nothing below can fail but the device.
     */
    if (map_put(&s->ids, id, NIL))
        return -2;
    if (slots_reserve(s, 2)) {
        map_del(&s->ids, id);
        return -2;
    }

    uint64_t rs = casim_round(s, size);
    int pool = rs <= CASIM_SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
    uint32_t x = casim_find(s, pool, rs);
    if (x != NIL) {
        tree_erase(s, x);
    } else if (s->conf.expandable && !s->dev) {
        int r = casim_expand(s, pool, rs, &x);
        if (r) {
            map_del(&s->ids, id);
            return r == 1 ? casim_oom(s, request) : r;
        }
    } else {
        uint64_t seg = casim_segment_size(rs);
        casim_gc(s, seg);
        int r = casim_reserve(s, seg);
        if (r == 1) {
            casim_empty_cache(s);
            r = casim_reserve(s, seg);
        }
        if (r) {
            map_del(&s->ids, id);
            return r == 1 ? casim_oom(s, request) : r;
        }
        x = casim_new_segment(s, pool, seg);
    }

    struct casim_block *b = &s->b[x];
    uint64_t remaining = b->size - rs;
    if (casim_should_split(s, pool, rs, remaining)) {
        uint32_t r = slot_get(s);
        struct casim_block *rb = &s->b[r];
        rb->addr = b->addr + rs;
        rb->size = remaining;
        rb->pool = b->pool;
        rb->state = BLOCK_CACHED;
        rb->prev = x;
        rb->next = b->next;
        if (b->next != NIL)
            s->b[b->next].prev = r;
        b->next = r;
        b->size = rs;
        tree_insert(s, r);
        if (s->exp_tail[pool] == x)
            s->exp_tail[pool] = r;
    }

    b->state = BLOCK_LIVE;
    b->id = id;
    map_put(&s->ids, id, x); /* the key is present: cannot fail */
    s->st.allocated += b->size;
    s->st.live_blocks++;
    if (s->st.allocated > s->st.peak_allocated)
        s->st.peak_allocated = s->st.allocated;
    return 0;
}

int casim_seed_segment(struct casim *s, int small, const uint64_t *sizes, const uint64_t *ids,
                       size_t n)
{
    size_t request = s->requests++;
    uint64_t seg = 0, unused;
    if (n == 0 || n > UINT32_MAX / 4)
        return -2;
    for (size_t k = 0; k < n; k++) {
        if (sizes[k] == 0 || sizes[k] % CASIM_MIN_BLOCK || sizes[k] > CASIM_REQUEST_MAX ||
            seg > CASIM_REQUEST_MAX)
            return -2;
        if (ids[k] != CASIM_SEED_FREE && map_get(&s->ids, ids[k], &unused))
            return -2;
        seg += sizes[k];
    }
    if (slots_reserve(s, (uint32_t)n + 1))
        return -2;
    int r = casim_reserve(s, seg);
    if (r == 1) {
        casim_empty_cache(s);
        r = casim_reserve(s, seg);
    }
    if (r)
        return r == 1 ? casim_oom(s, request) : r;
    int pool = small ? POOL_SMALL : POOL_LARGE;
    /*
     * Under expandable segments the pool's first seeded segment is the
     * one that grows (PyTorch keeps one per pool and stream): it lies
     * where casim_expand() maps pages, and its end is the pool's tail.
     */
    int grows = s->conf.expandable && !s->dev && s->exp[pool] == NIL;
    uint64_t next_addr = s->next_addr;
    if (grows)
        s->next_addr = EXP_BASE(pool);
    uint32_t x = casim_new_segment(s, pool, seg), prev = NIL;
    if (grows) {
        s->next_addr = next_addr;
        s->exp[pool] = x;
    }
    for (size_t k = 0; k < n; k++) {
        int live = ids[k] != CASIM_SEED_FREE;
        if (prev != NIL && !live && s->b[prev].state == BLOCK_CACHED) {
            s->b[prev].size += sizes[k]; /* merged with the cached block before it */
            continue;
        }
        uint32_t y = k == 0 ? x : slot_get(s);
        struct casim_block *b = &s->b[y];
        b->addr = prev == NIL ? s->b[x].addr : s->b[prev].addr + s->b[prev].size;
        b->size = sizes[k];
        b->pool = (unsigned char)pool;
        b->prev = prev;
        b->next = NIL;
        if (prev != NIL)
            s->b[prev].next = y;
        b->state = live ? BLOCK_LIVE : BLOCK_CACHED;
        if (live) {
            b->id = ids[k];
            if (map_get(&s->ids, ids[k], &unused) || map_put(&s->ids, ids[k], y))
                return -2; /* an id given twice */
            s->st.allocated += sizes[k];
            s->st.live_blocks++;
        }
        prev = y;
    }
    /* The cached blocks into their tree, now that their sizes are final. */
    for (uint32_t y = x; y != NIL; y = s->b[y].next)
        if (s->b[y].state == BLOCK_CACHED)
            tree_insert(s, y);
    if (grows)
        s->exp_tail[pool] = prev;
    if (s->st.allocated > s->st.peak_allocated)
        s->st.peak_allocated = s->st.allocated;
    return 0;
}

/* try_merge_blocks(): absorb neighbour n of block x if n is cached. */
static void casim_merge(struct casim *s, uint32_t x, uint32_t n)
{
    if (n == NIL || s->b[n].state != BLOCK_CACHED)
        return;
    tree_erase(s, n);
    struct casim_block *b = &s->b[x], *nb = &s->b[n];
    if (nb->next == x) { /* [n x] */
        b->addr = nb->addr;
        b->prev = nb->prev;
        if (b->prev != NIL)
            s->b[b->prev].next = x;
    } else { /* [x n] */
        b->next = nb->next;
        if (b->next != NIL)
            s->b[b->next].prev = x;
    }
    b->size += nb->size;
    if (s->exp_tail[b->pool] == n)
        s->exp_tail[b->pool] = x;
    if (s->exp[b->pool] == n)
        s->exp[b->pool] = x;
    slot_put(s, n);
}

int casim_release(struct casim *s, uint64_t id)
{
    uint64_t v;
    if (!map_get(&s->ids, id, &v))
        return -1;
    uint32_t x = (uint32_t)v;
    map_del(&s->ids, id);
    s->st.allocated -= s->b[x].size;
    s->st.live_blocks--;
    s->b[x].state = BLOCK_CACHED;
    casim_merge(s, x, s->b[x].prev);
    casim_merge(s, x, s->b[x].next);
    tree_insert(s, x);
    return 0;
}

void casim_stats(const struct casim *s, struct casim_stats *out)
{
    *out = s->st;
}

int casim_block_info(const struct casim *s, uint64_t id, uint64_t *addr, uint64_t *size)
{
    uint64_t v;
    if (!map_get(&s->ids, id, &v))
        return -1;
    if (addr)
        *addr = s->b[v].addr;
    if (size)
        *size = s->b[v].size;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Consistency check                                                   */
/* ------------------------------------------------------------------ */

/* Nodes in tree t, or (size_t)-1 when it is not a treap of cached blocks
 * of `pool` ordered by (size, address) with heap-ordered priorities. */
static size_t tree_check(const struct casim *s, uint32_t t, int pool, uint32_t lo, uint32_t hi)
{
    if (t == NIL)
        return 0;
    if (t >= s->nb)
        return (size_t)-1;
    const struct casim_block *b = &s->b[t];
    if (b->state != BLOCK_CACHED || b->pool != pool)
        return (size_t)-1;
    if ((lo != NIL && !key_less(s, lo, t)) || (hi != NIL && !key_less(s, t, hi)))
        return (size_t)-1;
    if ((b->left != NIL && s->b[b->left].prio > b->prio) ||
        (b->right != NIL && s->b[b->right].prio > b->prio))
        return (size_t)-1;
    size_t l = tree_check(s, b->left, pool, lo, t);
    size_t r = tree_check(s, b->right, pool, t, hi);
    if (l == (size_t)-1 || r == (size_t)-1)
        return (size_t)-1;
    return l + r + 1;
}

int casim_check(const struct casim *s)
{
    uint64_t allocated = 0, reserved = 0, segments = 0, live = 0;
    size_t cached[2] = { 0, 0 }, used = 0, walked = 0;

    for (uint32_t i = 1; i < s->nb; i++) {
        const struct casim_block *b = &s->b[i];
        if (b->state == SLOT_UNUSED)
            continue;
        used++;
        if (b->state == BLOCK_CACHED) {
            cached[b->pool]++;
        } else {
            uint64_t v;
            if (!map_get(&s->ids, b->id, &v) || v != i)
                return -1; /* a live block its id does not find */
            allocated += b->size;
            live++;
        }
        if (b->prev != NIL)
            continue;
        /* i heads a segment: walk it */
        segments++;
        for (uint32_t c = i; c != NIL; c = s->b[c].next) {
            const struct casim_block *cb = &s->b[c];
            uint32_t n = cb->next;
            if (++walked > s->nb)
                return -3; /* a cycle */
            if (cb->state == SLOT_UNUSED || cb->pool != b->pool || cb->size == 0)
                return -2; /* a dead or foreign block in a segment */
            reserved += cb->size;
            if (n == NIL)
                continue;
            if (s->b[n].prev != c || s->b[n].addr != cb->addr + cb->size)
                return -3; /* the blocks do not tile the segment */
            if (cb->state == BLOCK_CACHED && s->b[n].state == BLOCK_CACHED)
                return -4; /* free neighbours left unmerged */
        }
    }
    if (walked != used || live != s->ids.len)
        return -5; /* blocks outside any segment, or stale ids */
    for (int p = 0; p < 2; p++)
        if (tree_check(s, s->root[p], p, NIL, NIL) != cached[p])
            return -6; /* the free trees are not the cached blocks */
    if (allocated != s->st.allocated || reserved != s->st.reserved ||
        segments != s->st.segments || live != s->st.live_blocks)
        return -7; /* the totals disagree with the blocks */
    if (s->st.peak_allocated < allocated || s->st.peak_reserved < reserved ||
        s->st.segment_allocs - s->st.segment_frees != segments)
        return -8;
    if (s->capacity && reserved > s->capacity)
        return -9;
    if (s->dev && s->segs.len != segments)
        return -10; /* a segment without its device handle, or a handle kept */
    return 0;
}

/* ------------------------------------------------------------------ */
/* Replay of a trace of signed sizes                                   */
/* ------------------------------------------------------------------ */

#define NONE UINT64_MAX

static int replay_on(struct casim *s, const int64_t *events, size_t n, struct casim_stats *out);

int casim_replay(const int64_t *events, size_t n, uint64_t capacity, struct casim_stats *out)
{
    return replay_on(casim_new(capacity), events, n, out);
}

int casim_replay_on(const struct casim_device *dev, const int64_t *events, size_t n,
                    struct casim_stats *out)
{
    return replay_on(casim_new_on(dev), events, n, out);
}

/* The replay on a fresh allocator s (NULL: the host ran out), freed here. */
static int replay_on(struct casim *s, const int64_t *events, size_t n, struct casim_stats *out)
{
    /*
     * Each requested size has a stack of its live blocks, newest on top:
     * `top` maps the size to the event index of the top block, and
     * below[i] is the block under event i's.  Frees only ever pop, so the
     * stacks hold exactly the live blocks.
     */
    uint64_t *below = malloc((n ? n : 1) * sizeof *below);
    struct casim_map top = { 0 };
    size_t unmatched = 0, oom_at = 0;
    int rc = 0;

    if (!s || !below) {
        rc = -2;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t v = events[i];
        if (v > 0) {
            uint64_t size = (uint64_t)v, head;
            int r = casim_alloc(s, i, size);
            if (r) {
                rc = r;
                oom_at = i;
                break;
            }
            below[i] = map_get(&top, size, &head) ? head : NONE;
            if (map_put(&top, size, i)) {
                rc = -2;
                break;
            }
        } else if (v < 0) {
            uint64_t head;
            /* -INT64_MIN does not exist, and no block can have its size */
            if (v == INT64_MIN || !map_get(&top, (uint64_t)-v, &head)) {
                unmatched++;
                continue;
            }
            casim_release(s, head);
            if (below[head] == NONE)
                map_del(&top, (uint64_t)-v);
            else
                map_put(&top, (uint64_t)-v, below[head]); /* present: cannot fail */
        }
    }

done:
    if (out) {
        if (s) {
            casim_stats(s, out);
        } else {
            memset(out, 0, sizeof *out);
        }
        out->oom = rc == -1;
        out->oom_at = rc == -1 ? oom_at : 0;
        out->unmatched_frees = unmatched;
    }
    map_release(&top);
    free(below);
    casim_free(s);
    return rc;
}
