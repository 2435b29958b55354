/* SPDX-License-Identifier: MIT */
/*
 * bench: how many trials, how much GPU time, and how good an answer each
 * micro-batch search needs on simulated memory curves.
 *
 * Everything runs in this process and is deterministic: a "trial" is a
 * call that looks a size up on a curve and says whether it fits, what
 * memory figure the controller would have seen (NVML peak for a fit, "in
 * use + tried to allocate" from PyTorch's message for an OOM), and how
 * many simulated GPU-seconds it cost.  No sleeping, no subprocesses.
 *
 * Compared: Lightning's scale_batch_size (power, binsearch), Accelerate's
 * find_executable_batch_size (x0.9 now, x0.5 before 2025), a DeepSpeed-
 * autotuning-style predictor, and autobatch's own search, driven through
 * tuner/search/space.c exactly as tuner/control/tune.c drives it.
 * bench/README.md says how the curves, costs and ground truth are defined
 * and what the simulation leaves out.
 *
 * Usage: bench [--detail] [--check]
 *   --detail  one block per curve: every trial of every algorithm
 *   --check   exit 1 when a target of the project's search is missed
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search/search.h"
#include "search/space.h"

#define MIB (1024.0 * 1024.0)
#define NCURVES 40
#define PER_FAMILY 8
#define MAX_TRIALS 200          /* a guard: no algorithm here should come near it */

/* Steps each tool runs per trial (see README "Costs"). */
#define AB_STEPS 7              /* autobatch: --warmup 2 + --steps 5 (its defaults) */
#define LIGHTNING_STEPS 3       /* scale_batch_size(steps_per_trial=3) */
#define DEEPSPEED_STEPS 5       /* autotuning end_profile_step 5 */
#define ACCEL_STEPS 7           /* the real training run; same window as autobatch */
#define OOM_AT_FORWARD 0.3      /* fraction of a step an OOM at forward costs */
#define SLOW_AT 0.90            /* above this share of capacity the allocator thrashes */

/* ------------------------------------------------------------ hashing */

/* splitmix64: the only source of "randomness"; every figure below is a
 * function of a curve's seed and a small integer, so runs are identical. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A number in [0, 1) from (seed, k). */
static double unit(uint64_t seed, uint64_t k)
{
    return (double)(mix(seed ^ mix(k)) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ curves */

enum family { F_AFFINE, F_ROUNDED, F_NOISY, F_NONMONO, F_SPIKE, NFAMILIES };

static const char *const family_name[NFAMILIES] = {
    "affine", "rounded", "noisy", "nonmono", "spike",
};

struct curve {
    int id;
    enum family fam;
    uint64_t seed;
    double cap;          /**< device total, bytes */
    double base;         /**< weights, optimizer state, context: bytes at micro-batch 0 */
    double slope;        /**< activation bytes per sample */
    long range_max;      /**< the search range is 1..range_max */
    double noise_amp;    /**< smooth jitter, a fraction of slope*m (noisy family) */
    double meas_under;   /**< NVML may read up to this share of activations low */
    long dip[4];         /**< sizes above the first failure that fit anyway */
    int ndips;
    int spike_step;      /**< 1-based step of the long batch; 0 none */
    double spike_mult;   /**< its activations, relative to a normal step */
    double startup_s;    /**< process start, model load, compile */
    double t0, t1;       /**< step time t0 + t1*m seconds ... */
    double slow;         /**< ... times this above SLOW_AT of capacity */
    double w1;           /**< held at step 1's forward: weights and context, no optimizer state yet */
    int nchunks;         /**< activation allocations per forward (an OOM names one of them) */
    double ck_act;       /**< activations with checkpointing, a share of those without */
    double ck_time;      /**< step time with checkpointing, a multiple of that without */
    /* ground truth */
    long truth;          /**< largest m with every m' <= m fitting */
    long opt_m;          /**< fastest safe size */
    double opt_speed;
    long truth_ck;       /**< the same with checkpointing (joint curves) */
    long opt_m_ck;
    double opt_speed_ck;
};

/* What the caching allocator reserves for one request (FACTS.md):
 * small requests come from 2 MiB segments, medium ones from 20 MiB
 * segments, large ones are rounded up to 2 MiB. */
static double alloc_round(double bytes)
{
    if (bytes <= 0)
        return 0;
    if (bytes < 1 * MIB)
        return 2 * MIB;
    if (bytes < 10 * MIB)
        return 20 * MIB;
    return ceil(bytes / (2 * MIB)) * 2 * MIB;
}

/* Smooth jitter in [-amp, amp]: value noise over 4*log2(m), linearly
 * interpolated.  Smooth on purpose: its slope stays well under the
 * curve's own, so fit/fail stays monotone and the ground truth is
 * findable; what it breaks is the straight line a model assumes. */
static double smooth_noise(const struct curve *c, long m)
{
    if (c->noise_amp <= 0)
        return 0;
    double x = 4.0 * log2((double)m);
    double k = floor(x), f = x - k;
    double v0 = 2 * unit(c->seed, 1000 + (uint64_t)k) - 1;
    double v1 = 2 * unit(c->seed, 1001 + (uint64_t)k) - 1;
    return c->noise_amp * (v0 + (v1 - v0) * f);
}

static int is_dip(const struct curve *c, long m)
{
    for (int i = 0; i < c->ndips; i++)
        if (c->dip[i] == m)
            return 1;
    return 0;
}

/* Activation bytes of one step at micro-batch m, before the allocator
 * rounds them; ck: with activation checkpointing. */
static double act_bytes(const struct curve *c, long m, int spike, int ck)
{
    double act = c->slope * (double)m * (1 + smooth_noise(c, m));
    if (spike)
        act *= c->spike_mult;
    return ck ? act * c->ck_act : act;
}

/* Peak device memory of one step at micro-batch m: the activations are
 * one allocation at forward, rounded like the allocator. */
static double need_step(const struct curve *c, long m, int spike, int ck)
{
    if (is_dip(c, m) && !ck) {
        /* A size that, against the trend, fits: just under capacity. */
        return c->base + (floor((c->cap - c->base) / (2 * MIB)) - 1) * 2 * MIB;
    }
    return c->base + alloc_round(act_bytes(c, m, spike, ck));
}

/* Whether m survives a whole training run (the long batch included). */
static int fits_training(const struct curve *c, long m, int ck)
{
    if (need_step(c, m, 0, ck) > c->cap)
        return 0;
    return !c->spike_step || need_step(c, m, 1, ck) <= c->cap;
}

static double step_time(const struct curve *c, long m, int ck)
{
    double t = c->t0 + c->t1 * (double)m;
    if (ck)
        t *= c->ck_time; /* the forward runs again in the backward */
    if (need_step(c, m, 0, ck) > SLOW_AT * c->cap)
        t *= c->slow; /* free-and-retry in the allocator */
    return t;
}

static double speed(const struct curve *c, long m, int ck)
{
    return (double)m / step_time(c, m, ck);
}

static long first_failure(const struct curve *c, int ck)
{
    for (long m = 1; m <= c->range_max; m++)
        if (!fits_training(c, m, ck))
            return m;
    return -1;
}

static void curve_truth(struct curve *c)
{
    for (int ck = 0; ck < 2; ck++) {
        long f = first_failure(c, ck), truth = f < 0 ? c->range_max : f - 1, opt_m = -1;
        double opt = 0;
        for (long m = 1; m <= truth; m++)
            if (speed(c, m, ck) > opt) {
                opt = speed(c, m, ck);
                opt_m = m;
            }
        if (ck) {
            c->truth_ck = truth, c->opt_m_ck = opt_m, c->opt_speed_ck = opt;
        } else {
            c->truth = truth, c->opt_m = opt_m, c->opt_speed = opt;
        }
    }
}

static long pow2_at_least(double v)
{
    long p = 1;
    while ((double)p < v)
        p *= 2;
    return p;
}

/*
 * Curve i: family i / 8; within a family the target max-fit T runs
 * log-uniformly over 3..4000 (20..4000 for "rounded"), one stratum per
 * curve, so every family covers tiny and huge boundaries.
 */
static void curve_make(struct curve *c, int i, int joint)
{
    static const double caps_gb[8] = { 16, 24, 32, 40, 48, 80, 94, 141 };
    memset(c, 0, sizeof *c);
    c->id = i + 1;
    c->fam = (enum family)(i / PER_FAMILY);
    int k = i % PER_FAMILY;
    uint64_t s = c->seed = mix((joint ? 0xab1000ULL : 0xab0000ULL) + (uint64_t)i);

    double tlo = c->fam == F_ROUNDED ? 20 : 3, thi = joint ? 150 : 4000;
    double T = tlo * pow(thi / tlo, (k + unit(s, 1)) / PER_FAMILY);
    c->cap = caps_gb[(k * 3 + c->fam) % 8] * 1e9;
    c->base = (0.05 + 0.65 * unit(s, 2)) * c->cap;

    /* The range: 1..a power of two at least 1.5 T, sometimes wider. */
    c->range_max = pow2_at_least(1.5 * T) << (mix(s + 3) % 3);
    if (c->range_max < 512)
        c->range_max = 512;
    if (c->range_max > 8192)
        c->range_max = 8192;
    if (joint)
        c->range_max = 512; /* the joint search's range: 1:512 */
    int bounded = !joint && k == 5 && (c->fam == F_AFFINE || c->fam == F_ROUNDED);
    if (bounded) {
        /* Everything in the range fits: the answer is the range's top. */
        c->range_max = 512;
        T = fmax(T, 700);
    }

    switch (c->fam) {
    case F_AFFINE:
    case F_NOISY:
    case F_NONMONO:
        c->slope = (c->cap - c->base) / (T + 0.5);
        break;
    case F_ROUNDED: {
        /* A few hundred KiB to 1.5 MiB per sample: the 2 MiB blocks make
         * a staircase, and small batches land in 20 MiB segments. */
        double per = (0.3 + 1.2 * unit(s, 4)) * MIB;
        if (per * T < 40 * MIB)
            per = 40 * MIB / T;
        c->slope = per;
        c->base = c->cap - per * (T + 0.5);
        break;
    }
    case F_SPIKE:
        c->spike_mult = 1.2 + 0.5 * unit(s, 5);
        c->spike_step = 2 + (int)(mix(s + 6) % 6); /* steps 2..7 */
        c->slope = (c->cap - c->base) / ((T + 0.5) * c->spike_mult);
        break;
    default:
        break;
    }
    if (c->fam == F_NOISY) {
        c->noise_amp = 0.02 + 0.03 * unit(s, 7);
        c->meas_under = 0.01;
    }
    if (c->fam == F_NONMONO) {
        long f0 = first_failure(c, 0);
        unsigned mask = (unsigned)(mix(s + 8) % 15) + 1; /* a non-empty subset of +1..+4 */
        for (int d = 1; d <= 4; d++)
            if ((mask >> (d - 1)) & 1u && f0 > 0 && f0 + d <= c->range_max)
                c->dip[c->ndips++] = f0 + d;
    }

    c->startup_s = 20 + 40 * unit(s, 9);
    double t_at_T = 0.3 + 1.7 * unit(s, 10);
    c->t0 = t_at_T * (0.05 + 0.35 * unit(s, 11));
    c->t1 = (t_at_T - c->t0) / T;
    c->slow = 1.15 + 0.15 * unit(s, 12);
    /* Step 1's forward runs before the optimizer's state exists (Adam
     * allocates it at the first step): weights and context only, about a
     * quarter to a half of the steady base. */
    c->w1 = (0.3 + 0.2 * unit(s, 13)) * c->base;
    c->nchunks = 8 + (int)(40 * unit(s, 14));
    c->ck_act = 0.15 + 0.3 * unit(s, 15);
    c->ck_time = 1.2 + 0.15 * unit(s, 16);
    curve_truth(c);
}

/* ------------------------------------------------------------ trials */

/* What autobatch sees of a trial's memory (bench --figures). */
enum figures {
    FIG_NVML,   /**< a fit's peak polled by NVML (may read low); OOM figures */
    FIG_PROBE,  /**< the in-process probe: a fit's exact peak and what a step holds; OOM figures */
    FIG_NONE,   /**< no fit figures and no capacity until an OOM message names it */
};
static enum figures g_figures = FIG_NVML;
static const char *const figures_name[] = { "nvml", "probe", "none" };

struct trial {
    long m;
    int ck;            /**< with activation checkpointing */
    int fit;
    int oom_step;      /**< 0 for a fit */
    double need;       /**< what the controller sees: a fit's peak, an OOM's in use + tried; -1 none */
    double base;       /**< the probe's memory held between steps; 0 unknown */
    double speed;      /**< samples/s measured (fits only) */
    char how;          /**< autobatch only: S start, R ramp, B bisect, M model, T retest, P measure */
};

struct run {
    const char *alg;
    struct trial t[MAX_TRIALS];
    int n;
    int guard_hit;
    double launch_s;   /**< every trial a fresh launch */
    double native_s;   /**< the tool's own protocol (in-process ones start once) */
    long max_fit;      /**< the algorithm's answer to "largest size that fits"; -1 none */
    long choice;       /**< the size it would train with; -1 none */
    int choice_ck;     /**< ... with checkpointing */
    int search_n;      /**< autobatch: trials of the boundary search (not throughput points) */
    long max_fit_ck;   /**< autobatch, joint: the checkpointing cell's max-fit */
    int pruned_ck;     /**< autobatch, joint: that cell's search was pruned */
};

/*
 * The figure autobatch reads from a real PyTorch OOM message: device
 * memory in use (total - free) plus the allocation that failed.  The
 * forward allocates its activations in nchunks pieces and fails at the
 * first that does not fit, so the figure is just above capacity and below
 * the step's need: a lower bound, not a point on the memory line.  At
 * step 1 the optimizer's state does not exist yet (fixed = w1).
 */
static double oom_figure(const struct curve *c, long m, int spike, int ck, int step)
{
    double used = step == 1 ? c->w1 : c->base;
    double chunk = alloc_round(act_bytes(c, m, spike, ck) / c->nchunks);
    for (int k = 0; k < c->nchunks && used <= c->cap; k++)
        used += chunk;
    return used;
}

/* Run m for `steps` steps on curve c and book the cost.  in_process:
 * the tool retries inside one process, so start-up is paid once. */
static struct trial *run_trial_ck(struct run *r, const struct curve *c, long m, int ck, int steps,
                                  int in_process)
{
    if (r->n >= MAX_TRIALS) {
        r->guard_hit = 1;
        return NULL;
    }
    struct trial *t = &r->t[r->n];
    memset(t, 0, sizeof *t);
    t->m = m;
    t->ck = ck;
    double st = step_time(c, m, ck), cost;
    double normal = need_step(c, m, 0, ck);
    int spike_seen = c->spike_step > 0 && c->spike_step <= steps;
    if (normal > c->cap && c->w1 + alloc_round(act_bytes(c, m, 0, ck)) > c->cap) {
        /* OOM at the first forward, before the optimizer's state exists. */
        t->oom_step = 1;
        t->need = oom_figure(c, m, 0, ck, 1);
        cost = OOM_AT_FORWARD * st;
    } else if (normal > c->cap && steps >= 2) {
        /* Step 1 fitted without the optimizer's state; step 2's forward
         * does not fit with it. */
        t->oom_step = 2;
        t->need = oom_figure(c, m, 0, ck, 2);
        cost = (1 + OOM_AT_FORWARD) * st;
    } else if (spike_seen && need_step(c, m, 1, ck) > c->cap) {
        /* The long batch: the steps before it ran, then the OOM. */
        t->oom_step = c->spike_step;
        t->need = oom_figure(c, m, 1, ck, c->spike_step);
        cost = (c->spike_step - 1 + OOM_AT_FORWARD) * st;
    } else {
        t->fit = 1;
        double peak = spike_seen ? fmax(normal, need_step(c, m, 1, ck)) : normal;
        if (g_figures == FIG_NVML) {
            /* NVML is polled: on noisy curves it may miss up to 1% of
             * the activations' peak (never reads high). */
            peak -= c->meas_under * unit(c->seed, 7000 + (uint64_t)m) * (peak - c->base);
        }
        t->need = g_figures == FIG_NONE ? -1 : peak;
        t->base = g_figures == FIG_PROBE ? c->base : 0;
        t->speed = speed(c, m, ck);
        cost = steps * st;
    }
    r->launch_s += c->startup_s + cost;
    r->native_s += (in_process && r->n > 0 ? 0 : c->startup_s) + cost;
    r->n++;
    return t;
}

static struct trial *run_trial(struct run *r, const struct curve *c, long m, int steps,
                               int in_process)
{
    return run_trial_ck(r, c, m, 0, steps, in_process);
}

static void run_init(struct run *r, const char *alg)
{
    memset(r, 0, sizeof *r);
    r->alg = alg;
    r->max_fit = r->choice = -1;
}

/* Bisect between lo (fits, or 0) and hi (fails), each trial `steps`
 * steps in its own launch; returns the largest size seen to fit (lo if
 * none, or where the trial guard stopped it). */
static long bisect_sizes(struct run *r, const struct curve *c, long lo, long hi, int steps)
{
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        const struct trial *t = run_trial(r, c, mid, steps, 0);
        if (!t)
            break;
        if (t->fit)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ------------------------------------------------------------ anchors */

/*
 * Lightning 2.6 (pytorch-lightning@7f0c3436, bench/README.md cites the
 * lines): defaults init_val 2, max_trials 25, steps_per_trial 3,
 * max_val 8192, margin 0.05.  Before each trial, a size >= max_val ends
 * the loop and is returned untested.  The doubling helper caps at 8192.
 */
#define LIGHTNING_MAX_VAL 8192

/*
 * mode="power", _run_power_scaling: double after a fit; after an OOM
 * halve, and stop if anything had fitted (else keep halving); every pass
 * counts toward max_trials.
 */
static void alg_lightning_power(struct run *r, const struct curve *c)
{
    run_init(r, "Lightning power");
    long size = 2, last_ok = 2;
    int any_success = 0;
    for (int i = 0; i < 25 && size >= 1; i++) {
        if (size >= LIGHTNING_MAX_VAL)
            break; /* returned untested */
        const struct trial *t = run_trial(r, c, size, LIGHTNING_STEPS, 1);
        if (!t)
            break;
        if (t->fit) {
            last_ok = size;
            if (i + 1 >= 25) {
                size = last_ok;
                break;
            }
            long next = size * 2 > LIGHTNING_MAX_VAL ? LIGHTNING_MAX_VAL : size * 2;
            int changed = next != size;
            size = next;
            if (!changed)
                break;
            any_success = 1;
        } else {
            size = (long)((double)size * 0.5);
            if (any_success)
                break;
        }
    }
    r->max_fit = r->choice = size >= 1 ? size : -1;
}

/*
 * mode="binsearch", _run_binsearch_scaling: double from 2 until an OOM,
 * then bisect between the last fit (low, 1 at first) and the failure
 * (high); stop when high - low <= 1; only fits count toward max_trials.
 * The size it ends on, tested or not, is the max-fit; it trains with
 * max(1, int(size * 0.95)) (the margin, binsearch only).
 */
static void alg_lightning_binsearch(struct run *r, const struct curve *c)
{
    run_init(r, "Lightning binsearch");
    long size = 2, low = 1, high = 0, last_ok = 2;
    int count = 0;
    for (;;) {
        if (size >= LIGHTNING_MAX_VAL)
            break; /* returned untested */
        const struct trial *t = run_trial(r, c, size, LIGHTNING_STEPS, 1);
        if (!t)
            break;
        if (t->fit) {
            last_ok = size;
            if (++count >= 25) {
                size = last_ok;
                break;
            }
            low = size;
            long next;
            if (high) {
                if (high - low <= 1)
                    break;
                next = (high + low) / 2;
            } else {
                next = size * 2;
            }
            if (next > LIGHTNING_MAX_VAL)
                next = LIGHTNING_MAX_VAL;
            int changed = next != size;
            size = next;
            if (!changed)
                break;
        } else {
            high = size;
            size = (high + low) / 2;
            if (high - low <= 1)
                break;
        }
    }
    r->max_fit = size;
    long used = (long)((double)size * 0.95);
    r->choice = used < 1 ? 1 : used;
}

/*
 * Accelerate find_executable_batch_size (accelerate@16cb6eb8,
 * utils/memory.py): start at starting_batch_size, 128 by default, and
 * rerun the whole function on OOM with int(size * 0.9) (v1.9.0 on) or
 * size // 2 (before); 0 is an error; the first size that runs is the
 * answer.  The "trial" is the real training run, so it runs the full
 * window and sees every long batch; the retries happen in one process.
 * (HF Trainer's auto_find_batch_size starts at per_device_train_batch_size
 * instead: the user's own guess.)
 */
static void alg_accelerate(struct run *r, const struct curve *c, int halve)
{
    run_init(r, halve ? "Accelerate x0.5 (<1.9)" : "Accelerate x0.9");
    long b = 128;
    while (b > 0) {
        const struct trial *t = run_trial(r, c, b, ACCEL_STEPS, 1);
        if (!t)
            break;
        if (t->fit) {
            r->max_fit = r->choice = b;
            return;
        }
        b = halve ? b / 2 : (long)((double)b * 0.9);
    }
}

/*
 * DeepSpeed-autotuning style: one profiling run at micro-batch 1; model
 * states are known (DeepSpeed computes them from the parameter count and
 * ZeRO stage: here the curve's base), so activation memory per sample is
 * peak(1) - base.  Prediction: floor((capacity - base) / per-sample).
 * Probe int(1.05 p), p and int(0.95 p) (clamped to the range, distinct);
 * the largest that fits is the max-fit; if none fits, bisect between 1
 * and the smallest failing probe.  Each experiment is its own launch and
 * runs to end_profile_step 5.  The choice: go through the measured fits
 * by increasing size; a larger one replaces the best only if it is at
 * least 5% faster.
 */
static void alg_deepspeed(struct run *r, const struct curve *c)
{
    run_init(r, "DeepSpeed-style");
    const struct trial *p1 = run_trial(r, c, 1, DEEPSPEED_STEPS, 0);
    if (!p1 || !p1->fit)
        return;
    double per = p1->need - c->base;
    long pred = per > 0 ? (long)floor((c->cap - c->base) / per) : c->range_max;
    if (pred < 1)
        pred = 1;
    if (pred > c->range_max)
        pred = c->range_max;
    long probes[3] = { (long)((double)pred * 1.05), pred, (long)((double)pred * 0.95) };
    long lo = 1, hi = -1;
    for (int i = 0; i < 3; i++) {
        long v = probes[i] < 1 ? 1 : probes[i] > c->range_max ? c->range_max : probes[i];
        int dup = v == 1; /* the profile run already measured 1 */
        for (int j = 0; j < r->n; j++)
            dup |= r->t[j].m == v;
        if (dup)
            continue;
        const struct trial *t = run_trial(r, c, v, DEEPSPEED_STEPS, 0);
        if (!t)
            return;
        if (t->fit && v > lo)
            lo = v;
        if (!t->fit && (hi < 0 || v < hi))
            hi = v;
    }
    int probe_fit = 0;
    for (int j = 1; j < r->n; j++)
        probe_fit |= r->t[j].fit;
    if (!probe_fit && hi > 0)
        lo = bisect_sizes(r, c, lo, hi, DEEPSPEED_STEPS);
    r->max_fit = lo;
    /* Throughput rule over the experiments (the profile run only when
     * nothing else fitted), by increasing size. */
    long best = -1;
    double best_speed = 0;
    for (long m = 1; m <= c->range_max; m++) {
        for (int j = 0; j < r->n; j++) {
            const struct trial *t = &r->t[j];
            if (t->m != m || !t->fit || (j == 0 && probe_fit))
                continue;
            if (best < 0 || t->speed >= 1.05 * best_speed) {
                best = m;
                best_speed = t->speed;
            }
            break;
        }
    }
    r->choice = best;
}

/* ------------------------------------------------------------ autobatch */

/*
 * The project's search through tuner/search/space.c, one cell in free mode,
 * driven like tuner/control/tune.c: space_next, run, space_record with the
 * memory figure the trial produced.  The choice mirrors choose_best() with
 * --headroom 0: the fastest measured fit; speeds within 1% of each other
 * are a tie that goes to the smaller measured memory.  Like choose_best it
 * looks at every fitting trial, including any fit above a failure.
 */
static void alg_autobatch_as(struct run *r, const struct curve *c, const char *name,
                             int use_model, int joint)
{
    run_init(r, name);
    long accum[1] = { 1 };
    struct space_opts so = {
        .batch_min = 1, .batch_max = c->range_max, .batch_step = 1,
        .grad_accum = accum, .ngrad_accum = 1, .ckpt_off = 1, .ckpt_on = joint,
        .ckpt_forced = 0, .global_batch = 0, .world_size = 1, .use_model = use_model,
        .open_mid = g_figures == FIG_NONE, /* no NVML: the session knows before the first trial */
    };
    struct space sp;
    char err[256];
    if (space_init(&sp, &so, err, sizeof err)) {
        fprintf(stderr, "bench: space_init: %s\n", err);
        exit(2);
    }
    size_t ci;
    long v;
    while (space_next(&sp, &ci, &v)) {
        static const char hows[] = { 'S', 'R', 'B', 'M', 'T' };
        const struct cell *cell = &sp.cells[ci];
        char how = cell->state == CELL_SEARCHING ? hows[cell->search.last_how] : 'P';
        struct trial *t = run_trial_ck(r, c, v, cell->checkpointing, AB_STEPS, 0);
        if (!t)
            break;
        t->how = how;
        r->search_n += how != 'P';
        /* Without NVML the capacity is known only from an OOM message. */
        struct search_obs obs = {
            .value = v, .fit = t->fit, .need_bytes = t->need,
            .capacity_bytes = g_figures == FIG_NONE && t->fit ? -1 : c->cap,
            .base_bytes = t->base, .speed = t->fit ? t->speed : 0,
        };
        space_record(&sp, ci, &obs);
    }
    r->max_fit = search_max_fit(&sp.cells[0].search);
    r->max_fit_ck = joint ? search_max_fit(&sp.cells[1].search) : -1;
    r->pruned_ck = joint && sp.cells[1].pruned;
    long best = -1;
    for (int i = 0; i < r->n; i++) {
        const struct trial *t = &r->t[i];
        if (!t->fit)
            continue;
        if (best < 0) {
            best = i;
            continue;
        }
        const struct trial *b = &r->t[best];
        int tie = t->speed <= b->speed * 1.01 && b->speed <= t->speed * 1.01;
        int less = t->need >= 0 && b->need >= 0 ? t->need < b->need
                 : t->m != b->m ? t->m < b->m : t->ck > b->ck;
        if (tie ? less : t->speed > b->speed)
            best = i;
    }
    r->choice = best >= 0 ? r->t[best].m : -1;
    r->choice_ck = best >= 0 ? r->t[best].ck : 0;
    space_release(&sp);
}

static void alg_autobatch(struct run *r, const struct curve *c)
{
    alg_autobatch_as(r, c, "autobatch", 1, 0);
}

/*
 * The references a search must not lose to: plain bisection of the whole
 * range (lo 0, hi R+1: it opens in the middle), and the classic
 * ramp-then-bisect (double from 1 until a failure, then bisect), which was
 * this project's search without figures and is Lightning's binsearch
 * from 1.  Both count only the boundary search.
 */
static void alg_bisect_between(struct run *r, const struct curve *c, long lo, long hi)
{
    lo = bisect_sizes(r, c, lo, hi, AB_STEPS);
    r->max_fit = lo > 0 ? lo : -1;
    r->choice = r->max_fit;
    r->search_n = r->n;
}

static void alg_plain_bisection(struct run *r, const struct curve *c)
{
    run_init(r, "bisection of 1..R");
    alg_bisect_between(r, c, 0, c->range_max + 1);
}

static void alg_ramp_bisect(struct run *r, const struct curve *c)
{
    run_init(r, "ramp+bisect");
    long lo = 0, v = 1;
    for (;;) {
        const struct trial *t = run_trial(r, c, v, AB_STEPS, 0);
        if (!t || !t->fit)
            break;
        lo = v;
        if (v == c->range_max) {
            r->max_fit = r->choice = v;
            r->search_n = r->n;
            return;
        }
        v = 2 * v > c->range_max ? c->range_max : 2 * v;
    }
    alg_bisect_between(r, c, lo, v);
}

/* ------------------------------------------------------------ scoring */

enum { A_POWER, A_BINSEARCH, A_ACCEL9, A_ACCEL5, A_DEEPSPEED, A_AUTOBATCH, NALGS };

/* Algorithms that do not try to land on the exact max-fit. */
static const int not_exact_aim[NALGS] = { 1, 0, 1, 1, 1, 0 };

static void run_all(struct run *runs, const struct curve *c)
{
    alg_lightning_power(&runs[A_POWER], c);
    alg_lightning_binsearch(&runs[A_BINSEARCH], c);
    alg_accelerate(&runs[A_ACCEL9], c, 0);
    alg_accelerate(&runs[A_ACCEL5], c, 1);
    alg_deepspeed(&runs[A_DEEPSPEED], c);
    alg_autobatch(&runs[A_AUTOBATCH], c);
}

/* Throughput of the choice over the best safe throughput; 0 when the
 * choice is unsafe (above the true max-fit: the run OOMs or sits above a
 * failing size) or there is none. */
static double score(const struct run *r, const struct curve *c)
{
    if (r->choice < 1 || r->choice > (r->choice_ck ? c->truth_ck : c->truth))
        return 0;
    return speed(c, r->choice, r->choice_ck) / c->opt_speed;
}

/* The same over both checkpointing settings (joint curves). */
static double score_joint(const struct run *r, const struct curve *c)
{
    if (r->choice < 1 || r->choice > (r->choice_ck ? c->truth_ck : c->truth))
        return 0;
    return speed(c, r->choice, r->choice_ck) / fmax(c->opt_speed, c->opt_speed_ck);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void print_sequence(const struct run *r, int with_how)
{
    for (int i = 0; i < r->n; i++) {
        const struct trial *t = &r->t[i];
        if (with_how)
            printf(" %c:%ld", t->how, t->m);
        else
            printf(" %ld", t->m);
        if (t->fit)
            putchar('+');
        else if (t->oom_step > 1)
            printf("!%d", t->oom_step);
        else
            putchar('x');
    }
}

static void print_curve_head(const struct curve *c)
{
    int gb = c->slope >= 1e9;
    printf("#%02d %-7s cap %3.0f GB  base %4.1f%%  %.3g %s/sample  range 1:%-5ld  truth %ld  "
           "optimum %ld", c->id, family_name[c->fam], c->cap / 1e9, 100 * c->base / c->cap,
           gb ? c->slope / 1e9 : c->slope / 1e6, gb ? "GB" : "MB", c->range_max, c->truth,
           c->opt_m);
    if (c->spike_step)
        printf("  spike step %d x%.2f", c->spike_step, c->spike_mult);
    if (c->ndips) {
        printf("  fits anyway:");
        for (int i = 0; i < c->ndips; i++)
            printf(" %ld", c->dip[i]);
    }
    if (c->noise_amp > 0)
        printf("  jitter %.1f%%", 100 * c->noise_amp);
    putchar('\n');
}

static void print_detail(const struct curve *c, const struct run *runs)
{
    print_curve_head(c);
    printf("    start-up %.0fs, step %.3f + %.2g m s, x%.2f slower above 90%% of capacity\n",
           c->startup_s, c->t0, c->t1, c->slow);
    for (int a = 0; a < NALGS; a++) {
        const struct run *r = &runs[a];
        printf("    %-24s %3d trials %6.3f GPU-h  max-fit %5ld%s  choice %5ld%s  thr %.3f |",
               r->alg, r->n, r->launch_s / 3600, r->max_fit,
               r->max_fit == c->truth ? " exact" : "      ", r->choice,
               r->choice > c->truth ? " UNSAFE" : "       ", score(r, c));
        print_sequence(r, a == A_AUTOBATCH);
        putchar('\n');
    }
}

/* ------------------------------------------------------------ summaries */

struct stats {
    double med, mean;
    int max;
};

static struct stats stats_of(const double *v, int n)
{
    double tmp[NCURVES], sum = 0;
    int mx = 0;
    for (int i = 0; i < n; i++) {
        tmp[i] = v[i];
        sum += v[i];
        mx = v[i] > mx ? (int)v[i] : mx;
    }
    struct stats st = { median(tmp, n), sum / n, mx };
    return st;
}

/*
 * The search under each kind of memory figure, against the references a
 * model must not lose to.  Counts are the boundary search's trials (the
 * throughput points come after and are the same for every search).
 * Returns the targets: [0] never more search trials than ramp+bisect, in
 * every mode; [1] without fit figures, median trials at most 0.6 of
 * Lightning binsearch's.
 */
static void summary_figures(const struct curve *curves, int *never_worse, int *ratio_ok)
{
    static struct run ab, ref, bis, lb;
    enum figures keep = g_figures;
    printf("search by memory figures: boundary-search trials over the %d curves, median/mean/max\n"
           "(nvml: a fit's polled peak; probe: its exact peak and what a step holds; none: no fit\n"
           "figures, capacity only from an OOM message; OOM figures in every mode as PyTorch prints\n"
           "them; 'worse': curves where autobatch ran more trials, or was exact where the other was)\n",
           NCURVES);
    printf("%-6s %14s %6s %7s %7s %14s %14s %14s %8s\n", "", "autobatch", "exact", "worse",
           "worse", "bisect 1..R", "ramp+bisect", "Lightning bin", "ab/bin");
    printf("%-6s %14s %6s %7s %7s %14s %14s %14s %8s\n", "", "", "", "bisect", "ramp", "", "", "",
           "median");
    *never_worse = 1;
    *ratio_ok = 1;
    for (int f = 0; f < 3; f++) {
        g_figures = (enum figures)f;
        double ta[NCURVES], tr[NCURVES], tb[NCURVES], tl[NCURVES];
        int exact = 0, worse_b = 0, worse_r = 0;
        for (int i = 0; i < NCURVES; i++) {
            const struct curve *c = &curves[i];
            alg_autobatch_as(&ab, c, "autobatch", 1, 0);
            alg_ramp_bisect(&ref, c);
            alg_plain_bisection(&bis, c);
            alg_lightning_binsearch(&lb, c);
            ta[i] = ab.search_n;
            tr[i] = ref.search_n;
            tb[i] = bis.search_n;
            tl[i] = lb.n;
            int ex = ab.max_fit == c->truth;
            exact += ex;
            int bex = bis.max_fit == c->truth, rex = ref.max_fit == c->truth;
            worse_b += (ab.search_n > bis.search_n && (bex || !ex)) || (!ex && bex);
            worse_r += (ab.search_n > ref.search_n && (rex || !ex)) || (!ex && rex);
        }
        struct stats sa = stats_of(ta, NCURVES), sr = stats_of(tr, NCURVES);
        struct stats sb = stats_of(tb, NCURVES), sl = stats_of(tl, NCURVES);
        char a[32], r[32], b[32], l[32], e[16];
        snprintf(a, sizeof a, "%.1f/%.2f/%d", sa.med, sa.mean, sa.max);
        snprintf(r, sizeof r, "%.1f/%.2f/%d", sr.med, sr.mean, sr.max);
        snprintf(b, sizeof b, "%.1f/%.2f/%d", sb.med, sb.mean, sb.max);
        snprintf(l, sizeof l, "%.1f/%.2f/%d", sl.med, sl.mean, sl.max);
        snprintf(e, sizeof e, "%d/%d", exact, NCURVES);
        printf("%-6s %14s %6s %7d %7d %14s %14s %14s %8.2f\n", figures_name[f], a, e, worse_b,
               worse_r, b, r, l, sa.med / sl.med);
        if (g_figures == FIG_NONE) {
            *never_worse = worse_b == 0;
            *ratio_ok = sa.med <= 0.6 * sl.med;
        }
    }
    g_figures = keep;
    putchar('\n');
}

/* Trials bisection of 1..n from the middle needs for boundary t. */
static int bisect_count(long n, long t)
{
    long lo = 0, hi = n + 1;
    int k = 0;
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        k++;
        if (mid <= t)
            lo = mid;
        else
            hi = mid;
    }
    return k;
}

/*
 * The boundary search against per-cell bisection of 1..R, by family and
 * by kind of memory figure: median and worst trials of each, the curves
 * where the search ran more trials than bisection, and by how many at
 * most.  Returns the number of such curves in the modes with figures
 * (without, the search is bisection) and the worst excess there.
 */
static void summary_families(const struct curve *curves, int *nworse, int *excess)
{
    static struct run ab;
    enum figures keep = g_figures;
    printf("boundary search against per-cell bisection of 1..R, by family (trials med/max;\n"
           "'more': curves where autobatch ran more trials than bisection; 'by': the most by which)\n");
    printf("%-6s %-8s %10s %10s %6s %4s\n", "", "", "autobatch", "bisection", "more", "by");
    *nworse = 0;
    *excess = 0;
    for (int f = 0; f < 3; f++) {
        g_figures = (enum figures)f;
        int tot_more = 0, tot_by = 0;
        for (int fam = 0; fam < NFAMILIES; fam++) {
            double ta[PER_FAMILY], tb[PER_FAMILY];
            int n = 0, more = 0, by = 0, amax = 0, bmax = 0;
            for (int i = 0; i < NCURVES; i++) {
                const struct curve *c = &curves[i];
                if (c->fam != (enum family)fam)
                    continue;
                alg_autobatch_as(&ab, c, "autobatch", 1, 0);
                int b = bisect_count(c->range_max, c->truth);
                ta[n] = ab.search_n;
                tb[n] = b;
                amax = ab.search_n > amax ? ab.search_n : amax;
                bmax = b > bmax ? b : bmax;
                if (ab.search_n > b) {
                    more++;
                    by = ab.search_n - b > by ? ab.search_n - b : by;
                }
                n++;
            }
            char a[24], bs[24];
            snprintf(a, sizeof a, "%.1f/%d", median(ta, n), amax);
            snprintf(bs, sizeof bs, "%.1f/%d", median(tb, n), bmax);
            printf("%-6s %-8s %10s %10s %6d %4d\n", fam ? "" : figures_name[f], family_name[fam],
                   a, bs, more, by);
            tot_more += more;
            tot_by = by > tot_by ? by : tot_by;
        }
        printf("%-6s %-8s %10s %10s %6d %4d\n", "", "all", "", "", tot_more, tot_by);
        if (g_figures != FIG_NONE) {
            *nworse += tot_more;
            *excess = tot_by > *excess ? tot_by : *excess;
        }
    }
    g_figures = keep;
    putchar('\n');
}

/*
 * Joint search: checkpointing off and on over 1:512, on 40 curves the
 * search was not tuned on.  Counts every trial (throughput points too);
 * thr/opt is over the best safe size of either setting.  Returns the
 * worst trial count in the figures mode given, and the worst thr/opt.
 */
static void summary_joint(int *max_trials, double *min_thr, int *probe_max, int detail)
{
    static struct curve jc[NCURVES];
    static struct run ab[NCURVES];
    enum figures keep = g_figures;
    printf("joint search, checkpointing off and on, --batch 1:512, %d held-out curves (every trial)\n",
           NCURVES);
    printf("(exact on: of the checkpointing cells not pruned, i.e. stopped because by the step-time\n"
           "line no size of theirs could beat the fastest point measured)\n");
    printf("(boundary: trials of the boundary searches; points: throughput points; bisection:\n"
           "per-cell bisection of 1:512 for both cells' boundaries, no points)\n");
    printf("%-6s %16s %10s %8s %10s %10s %10s %8s %10s %10s\n", "", "trials", "boundary", "points",
           "bisection", "exact off", "exact on", "pruned", "thr/opt", "thr/opt");
    printf("%-6s %16s %10s %8s %10s %10s %10s %8s %10s %10s\n", "", "med/mean/max", "med/max",
           "med/max", "med/max", "", "", "", "median", "min");
    for (int i = 0; i < NCURVES; i++)
        curve_make(&jc[i], i, 1);
    for (int f = 0; f < 3; f++) {
        g_figures = (enum figures)f;
        double tr[NCURVES], sc[NCURVES], tsr[NCURVES], tpt[NCURVES], tbi[NCURVES];
        int ex0 = 0, ex1 = 0, pruned = 0;
        for (int i = 0; i < NCURVES; i++) {
            alg_autobatch_as(&ab[i], &jc[i], "autobatch", 1, 1);
            tr[i] = ab[i].n;
            tsr[i] = ab[i].search_n;
            tpt[i] = ab[i].n - ab[i].search_n;
            tbi[i] = bisect_count(jc[i].range_max, jc[i].truth) +
                     bisect_count(jc[i].range_max, jc[i].truth_ck);
            sc[i] = score_joint(&ab[i], &jc[i]);
            ex0 += ab[i].max_fit == jc[i].truth;
            ex1 += !ab[i].pruned_ck && ab[i].max_fit_ck == jc[i].truth_ck;
            pruned += ab[i].pruned_ck;
        }
        struct stats st = stats_of(tr, NCURVES);
        double smin = sc[0];
        for (int i = 1; i < NCURVES; i++)
            smin = fmin(smin, sc[i]);
        char t[32], e0[32], e1[32], bd[32], pt[32], bi[32];
        snprintf(t, sizeof t, "%.1f/%.2f/%d", st.med, st.mean, st.max);
        struct stats ss = stats_of(tsr, NCURVES), sp = stats_of(tpt, NCURVES);
        struct stats sb = stats_of(tbi, NCURVES);
        snprintf(bd, sizeof bd, "%.1f/%d", ss.med, ss.max);
        snprintf(pt, sizeof pt, "%.1f/%d", sp.med, sp.max);
        snprintf(bi, sizeof bi, "%.1f/%d", sb.med, sb.max);
        snprintf(e0, sizeof e0, "%d/%d", ex0, NCURVES);
        snprintf(e1, sizeof e1, "%d/%d", ex1, NCURVES - pruned);
        double sorted[NCURVES];
        memcpy(sorted, sc, sizeof sorted); /* median() sorts */
        printf("%-6s %16s %10s %8s %10s %10s %10s %8d %10.3f %10.3f\n", figures_name[f], t, bd, pt,
               bi, e0, e1, pruned, median(sorted, NCURVES), smin);
        if (g_figures == FIG_PROBE)
            *probe_max = st.max;
        if (g_figures == keep) {
            *max_trials = st.max;
            *min_thr = smin;
        }
        if (detail && g_figures == keep) {
            for (int i = 0; i < NCURVES; i++) {
                const struct curve *c = &jc[i];
                printf("    #%02d %-7s truth %ld / ckpt %ld, optimum %ld%s; %d trials, choice %ld%s "
                       "thr %.3f%s |", c->id, family_name[c->fam], c->truth, c->truth_ck,
                       c->opt_speed_ck > c->opt_speed ? c->opt_m_ck : c->opt_m,
                       c->opt_speed_ck > c->opt_speed ? " ckpt" : "", ab[i].n, ab[i].choice,
                       ab[i].choice_ck ? " ckpt" : "", sc[i], ab[i].pruned_ck ? " (ckpt pruned)" : "");
                for (int k = 0; k < ab[i].n; k++) {
                    const struct trial *t = &ab[i].t[k];
                    printf(" %c:%ld%s%s", t->how, t->m, t->ck ? "c" : "", t->fit ? "+" : "x");
                }
                putchar('\n');
            }
        }
    }
    g_figures = keep;
    putchar('\n');
}

int main(int argc, char **argv)
{
    int detail = 0, check = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--detail")) {
            detail = 1;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else if (!strcmp(argv[i], "--figures") && i + 1 < argc) {
            const char *f = argv[++i];
            int k = !strcmp(f, "nvml") ? FIG_NVML : !strcmp(f, "probe") ? FIG_PROBE
                  : !strcmp(f, "none") ? FIG_NONE : -1;
            if (k < 0) {
                fprintf(stderr, "bench: --figures takes nvml, probe or none\n");
                return 2;
            }
            g_figures = (enum figures)k;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench [--detail] [--check] [--figures nvml|probe|none]\n"
                   "  --detail   every trial of every algorithm on every curve\n"
                   "  --check    exit 1 when a target of the project's search is missed\n"
                   "  --figures  what autobatch sees of memory in the main table (default nvml)\n");
            return 0;
        } else {
            fprintf(stderr, "bench: unknown option '%s'; try 'bench --help'\n", argv[i]);
            return 2;
        }
    }

    static struct curve curves[NCURVES];
    static struct run runs[NCURVES][NALGS];
    for (int i = 0; i < NCURVES; i++) {
        curve_make(&curves[i], i, 0);
        if (curves[i].truth < 1) {
            fprintf(stderr, "bench: curve %d has no fitting size; fix the generator\n", i + 1);
            return 2;
        }
        run_all(runs[i], &curves[i]);
    }

    printf("autobatch search bench: %d simulated memory curves (%d per family: %s, %s, %s, "
           "%s, %s)\n", NCURVES, PER_FAMILY, family_name[0], family_name[1], family_name[2],
           family_name[3], family_name[4]);
    long tmin = -1, tmax = 0;
    for (int i = 0; i < NCURVES; i++) {
        if (tmin < 0 || curves[i].truth < tmin)
            tmin = curves[i].truth;
        if (curves[i].truth > tmax)
            tmax = curves[i].truth;
    }
    printf("true max-fit %ld..%ld; ranges 1:512..1:8192; capacities 16..141 GB\n\n", tmin, tmax);

    printf("%-24s %7s %6s %4s %8s %8s %8s %7s %8s %8s\n", "algorithm", "trials", "mean",
           "max", "GPU-h", "GPU-h", "exact", "unsafe", "thr/opt", "thr/opt");
    printf("%-24s %7s %6s %4s %8s %8s %8s %7s %8s %8s\n", "", "median", "", "", "launch",
           "native", "max-fit", "choice", "median", "min");
    double med_trials[NALGS];
    int exact[NALGS];
    for (int a = 0; a < NALGS; a++) {
        double tr[NCURVES], sc[NCURVES], sum = 0, hl = 0, hn = 0;
        int mx = 0, unsafe = 0;
        exact[a] = 0;
        for (int i = 0; i < NCURVES; i++) {
            const struct run *r = &runs[i][a];
            tr[i] = r->n;
            sum += r->n;
            if (r->n > mx)
                mx = r->n;
            hl += r->launch_s / 3600;
            hn += r->native_s / 3600;
            exact[a] += r->max_fit == curves[i].truth;
            unsafe += r->choice > curves[i].truth;
            sc[i] = score(r, &curves[i]);
        }
        med_trials[a] = median(tr, NCURVES);
        double smin = sc[0];
        for (int i = 1; i < NCURVES; i++)
            smin = fmin(smin, sc[i]);
        char ex[32];
        snprintf(ex, sizeof ex, "%d/%d%s", exact[a], NCURVES, not_exact_aim[a] ? "*" : "");
        printf("%-24s %7.1f %6.2f %4d %8.2f %8.2f %8s %7d %8.3f %8.3f\n", runs[0][a].alg,
               med_trials[a], sum / NCURVES, mx, hl, hn, ex, unsafe, median(sc, NCURVES), smin);
    }
    printf("\n* does not aim at the exact max-fit (power: powers of two; Accelerate: first fit "
           "going down\n  by x0.9 or x0.5 from 128, its default start; DeepSpeed-style: +-5%% around one "
           "prediction).\n"
           "GPU-h launch: every trial a fresh process (start-up each time); native: Lightning "
           "and\n  Accelerate retry in one process and pay start-up once.  Lightning's max-fit "
           "is the\n  size it searched; it trains with int(0.95 x that).  thr/opt: throughput of "
           "the chosen\n  size over the best safe size; an unsafe choice (above the true "
           "max-fit) scores 0.\n\n");

    /* ---- by family: where the project's search spends its trials */
    printf("by family     median trials          autobatch\n");
    printf("%-8s %10s %10s %10s %10s\n", "", "autobatch", "binsearch", "exact", "thr/opt");
    for (int f = 0; f < NFAMILIES; f++) {
        double ta[PER_FAMILY], tb[PER_FAMILY], sc[PER_FAMILY];
        int n = 0, ex = 0;
        for (int i = 0; i < NCURVES; i++) {
            if (curves[i].fam != (enum family)f)
                continue;
            ta[n] = runs[i][A_AUTOBATCH].n;
            tb[n] = runs[i][A_BINSEARCH].n;
            sc[n] = score(&runs[i][A_AUTOBATCH], &curves[i]);
            ex += runs[i][A_AUTOBATCH].max_fit == curves[i].truth;
            n++;
        }
        char exs[32];
        snprintf(exs, sizeof exs, "%d/%d", ex, n);
        printf("%-8s %10.1f %10.1f %10s %10.3f\n", family_name[f], median(ta, n),
               median(tb, n), exs, median(sc, n));
    }
    putchar('\n');

    int never_worse = 0, ratio_none = 0, joint_max = 0, joint_probe = 0, nmore = 0, more_by = 0;
    double joint_thr = 0;
    summary_figures(curves, &never_worse, &ratio_none);
    summary_families(curves, &nmore, &more_by);
    summary_joint(&joint_max, &joint_thr, &joint_probe, detail);

    /* ---- the targets */
    double ab_search[NCURVES];
    for (int i = 0; i < NCURVES; i++)
        ab_search[i] = runs[i][A_AUTOBATCH].search_n;
    double med_search = median(ab_search, NCURVES);
    double ratio = med_search / med_trials[A_BINSEARCH];
    int ok_trials = ratio <= 0.5, ok_exact = exact[A_AUTOBATCH] == NCURVES;
    double thr_min = 1;
    for (int i = 0; i < NCURVES; i++)
        thr_min = fmin(thr_min, score(&runs[i][A_AUTOBATCH], &curves[i]));
    int ok_joint = joint_max <= 16, ok_choice = thr_min >= 0.97 && joint_thr >= 0.97;
    printf("autobatch median boundary-search trials / Lightning binsearch median trials = "
           "%.1f / %.1f = %.2f\n(figures: %s; with autobatch's throughput points, which "
           "Lightning does not measure: %.1f / %.1f = %.2f)\n", med_search,
           med_trials[A_BINSEARCH], ratio, figures_name[g_figures], med_trials[A_AUTOBATCH],
           med_trials[A_BINSEARCH], med_trials[A_AUTOBATCH] / med_trials[A_BINSEARCH]);
    printf("target: median boundary-search trials at most half of Lightning binsearch's: %s\n",
           ok_trials ? "met" : "MISSED");
    printf("target: exact max-fit on all curves: %s (%d/%d)\n", ok_exact ? "met" : "MISSED",
           exact[A_AUTOBATCH], NCURVES);
    printf("target: without fit figures, never worse than bisection of the range: %s\n",
           never_worse ? "met" : "MISSED");
    printf("target: without fit figures, median search trials at most 0.6 of Lightning "
           "binsearch's: %s\n", ratio_none ? "met" : "MISSED");
    printf("target: joint search with checkpointing over 1:512 in at most 16 trials: %s "
           "(worst %d)\n", ok_joint ? "met" : "MISSED", joint_max);
    printf("target: ... the same with probe figures: %s (worst %d)\n",
           joint_probe <= 16 ? "met" : "MISSED", joint_probe);
    printf("target: with memory figures, never more boundary trials than per-cell bisection on "
           "any curve: %s", nmore ? "MISSED" : "met");
    if (nmore)
        printf(" (%d of %d curve runs, by at most %d)", nmore, 2 * NCURVES, more_by);
    putchar('\n');
    printf("target: the choice at least 0.97 of the best throughput on every curve: %s "
           "(worst %.3f; joint %.3f)\n", ok_choice ? "met" : "MISSED", thr_min, joint_thr);

    /* ---- where the project's search is not exact, slow, or loses speed */
    int shown = 0;
    for (int i = 0; i < NCURVES; i++) {
        const struct curve *c = &curves[i];
        const struct run *ab = &runs[i][A_AUTOBATCH], *bs = &runs[i][A_BINSEARCH];
        int inexact = ab->max_fit != c->truth;
        int slow = ab->n > bs->n || ab->n >= 2 * med_trials[A_AUTOBATCH];
        if (!inexact && !slow && !ab->guard_hit)
            continue;
        if (!shown++)
            printf("\nautobatch: curves where the search is not exact, needs more trials than "
                   "Lightning\nbinsearch, or at least twice its own median:\n");
        printf("  #%02d %-7s truth %ld, found %ld%s; %d trials (binsearch %d)%s\n     ", c->id,
               family_name[c->fam], c->truth, ab->max_fit, inexact ? " NOT EXACT" : "", ab->n,
               bs->n, ab->guard_hit ? "; stopped by the trial guard" : "");
        print_sequence(ab, 1);
        putchar('\n');
    }
    if (!shown)
        printf("\nautobatch: exact on every curve, never more trials than Lightning binsearch "
               "nor twice its median\n");
    shown = 0;
    for (int i = 0; i < NCURVES; i++) {
        const struct curve *c = &curves[i];
        const struct run *ab = &runs[i][A_AUTOBATCH];
        double sc = score(ab, c);
        if (sc >= 0.95)
            continue;
        if (!shown++)
            printf("\nautobatch: choice below 0.95 of the best safe throughput (curve: chosen "
                   "size / fastest size, ratio):\n ");
        printf(" #%02d: %ld/%ld %.2f%s", c->id, ab->choice, c->opt_m, sc, shown % 5 ? "" : "\n ");
    }
    if (shown)
        printf("%s", shown % 5 ? "\n" : "");
    if (detail) {
        printf("\nper curve (trials: size then + fit, x OOM at forward, !k OOM at step k;\n"
               "autobatch's trials are tagged S start, R ramp, M model, B bisect, T re-test, "
               "P throughput point)\n\n");
        for (int i = 0; i < NCURVES; i++) {
            print_detail(&curves[i], runs[i]);
            putchar('\n');
        }
    }

    return check && !(ok_trials && ok_exact && never_worse && ok_joint && ok_choice) ? 1 : 0;
}
