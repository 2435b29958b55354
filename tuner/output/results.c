/* SPDX-License-Identifier: MIT */
/*
 * results: the run's findings and their JSON rendering (see results.h).
 *
 * jansson builds the document; the file goes through afile so that a
 * results file is never seen half-written.
 */
#include "output/results.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/afile.h"
#include "util/tclean.h"
#include "util/errbuf.h"
#include "preset.h"

int results_init(struct results *r, char *const *argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    r->command = calloc(n + 1, sizeof *r->command);
    if (!r->command)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(r->command[i] = strdup(argv[i])))
            return -1;
    r->started_at = time(NULL);
    if (gethostname(r->hostname, sizeof r->hostname - 1))
        snprintf(r->hostname, sizeof r->hostname, "unknown");
    r->best = r->runner_up = -1;
    r->global_batch = -1;
    r->world_size = 1;
    r->capacity = -1;
    r->headroom_checked = -1;
    r->excluded = -1;
    return 0;
}

void results_release(struct results *r)
{
    for (size_t i = 0; r->command && r->command[i]; i++)
        free(r->command[i]);
    free(r->command);
    for (size_t i = 0; i < r->ntrials; i++) {
        free(r->trials[i].evidence);
        free(r->trials[i].signature);
    }
    free(r->trials);
    free(r->cells);
    free(r->contra);
    free(r->grad_accum);
    free(r->gpus);
    json_decref(r->replay);
    json_decref(r->run_with);
    json_decref(r->trial_env);
    json_decref(r->confirm);
    struct results zero = RESULTS_INIT;
    *r = zero;
}

static json_t *results_strings(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; a && v && v[i]; i++)
        if (json_array_append_new(a, json_string(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

int results_run_with(struct results *r, char *const *argv, char *const *env)
{
    json_t *o = json_pack("{s:o?, s:o?, s:[]}", "command", results_strings(argv), "env",
                          results_strings(env), "files");
    if (!json_is_array(json_object_get(o, "command")) || !json_is_array(json_object_get(o, "env"))) {
        json_decref(o);
        return -1;
    }
    json_decref(r->run_with);
    r->run_with = o;
    return 0;
}

int results_add_confirm(struct results *r, const struct results_trial *t)
{
    if (!r->confirm && !(r->confirm = json_array()))
        return -1;
    json_t *o = results_trial_json(t);
    return o ? json_array_append_new(r->confirm, o) : -1;
}

int results_trial_env(struct results *r, char *const *vars, const char *const *why, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const char *eq = strchr(vars[i], '=');
        json_t *o = eq ? json_pack("{s:s%, s:s, s:s}", "name", vars[i], (size_t)(eq - vars[i]),
                                   "value", eq + 1, "why", why[i])
                       : NULL;
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return -1;
        }
    }
    if (!a)
        return -1;
    json_decref(r->trial_env);
    r->trial_env = a;
    return 0;
}

int results_run_with_file(struct results *r, const char *path, const char *diff, int written)
{
    json_t *files = json_object_get(r->run_with, "files");
    if (!files)
        return -1;
    return json_array_append_new(files, json_pack("{s:s, s:s?, s:b}", "path", path, "diff", diff,
                                                  "written", written));
}

/* Grow *v (of *n elements of size sz) by one; returns the new slot. */
static void *results_push(void *v, size_t *n, size_t sz, void **out)
{
    char *p = realloc(v, (*n + 1) * sz);
    if (!p)
        return NULL;
    *out = p + *n * sz;
    (*n)++;
    return p;
}

int results_add_trial(struct results *r, const struct results_trial *t)
{
    void *slot;
    char *ev = t->evidence ? strdup(t->evidence) : NULL;
    char *sig = t->signature ? strdup(t->signature) : NULL;
    void *p = NULL;
    if ((!t->evidence || ev) && (!t->signature || sig))
        p = results_push(r->trials, &r->ntrials, sizeof *r->trials, &slot);
    if (!p) {
        free(ev);
        free(sig);
        return -1;
    }
    r->trials = p;
    struct results_trial *n = slot;
    *n = *t;
    n->evidence = ev;
    n->signature = sig;
    return 0;
}

int results_add_cell(struct results *r, const struct results_cell *c)
{
    void *slot, *p = results_push(r->cells, &r->ncells, sizeof *r->cells, &slot);
    if (!p)
        return -1;
    r->cells = p;
    memcpy(slot, c, sizeof *c);
    return 0;
}

int results_add_contradiction(struct results *r, const struct results_contradiction *c)
{
    void *slot, *p = results_push(r->contra, &r->ncontra, sizeof *r->contra, &slot);
    if (!p)
        return -1;
    r->contra = p;
    memcpy(slot, c, sizeof *c);
    return 0;
}

/* ------------------------------------------------------------- frontier */

/* Does a use no more memory than b?  Measured peaks when both have them;
 * otherwise a partial order stands in: a smaller micro-batch, or
 * checkpointing on, uses less (gradient accumulation does not matter).
 * Points that this order cannot compare are both kept. */
static int results_mem_le(const struct results_trial *a, const struct results_trial *b, int *strict)
{
    if (a->peak_mem_bytes >= 0 && b->peak_mem_bytes >= 0) {
        *strict = a->peak_mem_bytes < b->peak_mem_bytes;
        return a->peak_mem_bytes <= b->peak_mem_bytes;
    }
    int le = a->micro_batch <= b->micro_batch && a->checkpointing >= b->checkpointing;
    *strict = le && (a->micro_batch < b->micro_batch || a->checkpointing > b->checkpointing);
    return le;
}

static int results_dominates(const struct results_trial *a, const struct results_trial *b)
{
    int mem_strict;
    if (!results_mem_le(a, b, &mem_strict))
        return 0;
    if (a->samples_per_s < b->samples_per_s)
        return 0;
    return mem_strict || a->samples_per_s > b->samples_per_s;
}

size_t results_frontier(const struct results *r, long *out)
{
    size_t n = 0;
    for (size_t i = 0; i < r->ntrials; i++) {
        const struct results_trial *a = &r->trials[i];
        if (a->outcome != TRIAL_FIT || a->samples_per_s < 0)
            continue;
        int dominated = 0;
        for (size_t j = 0; j < r->ntrials && !dominated; j++) {
            const struct results_trial *b = &r->trials[j];
            if (j == i || b->outcome != TRIAL_FIT || b->samples_per_s < 0)
                continue;
            /* Of two identical points keep the first. */
            int strict;
            int same = b->samples_per_s == a->samples_per_s && results_mem_le(b, a, &strict) &&
                       !strict && results_mem_le(a, b, &strict) && !strict;
            dominated = same ? j < i : results_dominates(b, a);
        }
        if (!dominated)
            out[n++] = (long)i;
    }
    return n;
}

/* --------------------------------------------------------------- render */

static json_t *num_or_null(double v)
{
    return v < 0 ? json_null() : json_real(v);
}

static json_t *int_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* The knobs turned on beyond the search (docs/knobs.md), into o. */
static void results_extra_json(json_t *o, unsigned extra)
{
    if (!o)
        return;
    json_object_set_new(o, "precision",
                        json_string(extra & KNOB_BIT(KNOB_PRECISION) ? "bf16" : "unchanged"));
    json_object_set_new(o, "optim8bit", json_boolean(extra & KNOB_BIT(KNOB_OPTIM8BIT)));
    json_object_set_new(o, "sharding", json_boolean(extra & KNOB_BIT(KNOB_SHARDING)));
}

static json_t *results_point(const struct results_trial *t)
{
    json_t *o = json_pack("{s:I, s:I, s:b, s:o, s:o}",
                          "micro_batch", (json_int_t)t->micro_batch,
                          "grad_accum", (json_int_t)t->grad_accum,
                          "checkpointing", t->checkpointing,
                          "samples_per_s", num_or_null(t->samples_per_s),
                          "peak_mem_bytes", int_or_null(t->peak_mem_bytes));
    results_extra_json(o, t->extra);
    return o;
}

static json_t *pos_or_null(long long v)
{
    return v > 0 ? json_integer(v) : json_null();
}

/* A size in elements or a length: whole numbers as integers. */
static json_t *size_or_null(double v)
{
    if (v < 0)
        return json_null();
    if (v < 9e15 && (double)(long long)v == v)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* The "worst_case" object of a trial, or null when the probe wrote none. */
static json_t *results_worst_json(const struct inproc_worst *w)
{
    if (!w->mode[0])
        return json_null();
    json_t *sizes = json_array();
    for (int i = 0; sizes && i < w->nsizes; i++)
        json_array_append_new(sizes, size_or_null(w->sizes[i]));
    json_t *o = json_pack("{s:s, s:o, s:I, s:I, s:b, s:o, s:o, s:o, s:o, s:I, s:f, s:o}",
                          "mode", w->mode,
                          "signal", w->signal[0] ? json_string(w->signal) : json_null(),
                          "rank", (json_int_t)w->rank,
                          "batches_seen", (json_int_t)w->batches_seen,
                          "whole", w->whole,
                          "elems", size_or_null(w->elems),
                          "longest", size_or_null(w->longest),
                          "position", int_or_null(w->position),
                          "median", size_or_null(w->median),
                          "first", (json_int_t)w->first,
                          "scan_s", w->scan_s,
                          "sizes", sizes ? sizes : json_null());
    return o ? o : json_null();
}

/*
 * Where the memory goes, from a trial's "mem" record: what the probe
 * counted (parameters, gradients, optimizer state) and what follows from
 * the allocator's figures of the same step (CUDA only): activations and
 * temporaries = peak allocated less the three (never below 0), cache and
 * fragmentation = peak reserved less peak allocated, outside = the
 * device's memory outside the allocator, peak = peak reserved + outside
 * (what the parts add up to).  Unknown parts are -1.
 */
struct results_mem_parts {
    long long v[RESULTS_MEM_PARTS];
};

const char *const results_mem_part_name[RESULTS_MEM_PARTS] = {
    "params", "grads", "optimizer", "activations", "cache", "outside", "peak",
};

static int results_mem_split(const struct inproc_mem *m, struct results_mem_parts *p)
{
    if (!m->device[0])
        return 0;
    long long held = m->params + m->grads + m->optim;
    long long act = m->peak_alloc >= 0 ? m->peak_alloc - held : -1;
    p->v[0] = m->params;
    p->v[1] = m->grads;
    p->v[2] = m->optim;
    p->v[3] = m->peak_alloc < 0 ? -1 : act > 0 ? act : 0;
    p->v[4] = m->peak_alloc < 0 || m->peak_res < 0 ? -1
            : m->peak_res > m->peak_alloc ? m->peak_res - m->peak_alloc : 0;
    p->v[5] = m->outside;
    p->v[6] = m->peak_res >= 0 && m->outside >= 0 ? m->peak_res + m->outside : -1;
    return 1;
}

/* A trial's "memory_breakdown": the parts, where they were measured, and
 * the allocator's bytes at the step's end; null when the probe wrote none. */
static json_t *results_mem_json(const struct inproc_mem *m)
{
    struct results_mem_parts p;
    if (!results_mem_split(m, &p))
        return json_null();
    json_t *o = json_pack("{s:s, s:I, s:I}", "device", m->device, "rank", (json_int_t)m->rank,
                          "step", (json_int_t)m->step);
    for (int i = 0; o && i < RESULTS_MEM_PARTS; i++)
        json_object_set_new(o, results_mem_part_name[i], int_or_null(p.v[i]));
    if (o) {
        json_object_set_new(o, "held", int_or_null(m->held));
        json_object_set_new(o, "at", json_string(m->failure ? "failure" : "step"));
    }
    if (o && m->failure) {
        json_object_set_new(o, "grads_expected", int_or_null(m->grads_expected));
        json_object_set_new(o, "optimizer_expected", int_or_null(m->optim_expected));
        json_object_set_new(o, "optimizer_class",
                            m->optim_class[0] ? json_string(m->optim_class) : json_null());
    }
    return o ? o : json_null();
}

json_t *results_trial_json(const struct results_trial *t)
{
    json_t *o = json_pack("{s:I, s:I, s:I, s:b, s:s, s:o, s:o, s:f, s:I, s:o, s:o, s:o}",
                          "id", (json_int_t)t->id,
                          "micro_batch", (json_int_t)t->micro_batch,
                          "grad_accum", (json_int_t)t->grad_accum,
                          "checkpointing", t->checkpointing,
                          "outcome", trial_outcome_name(t->outcome),
                          "exit_code", int_or_null(t->exit_code),
                          "signal", t->signal ? json_integer(t->signal) : json_null(),
                          "wall_s", t->wall_s,
                          "steps_measured", (json_int_t)t->steps_measured,
                          "samples_per_s", num_or_null(t->samples_per_s),
                          "peak_mem_bytes", int_or_null(t->peak_mem_bytes),
                          "evidence", str_or_null(t->evidence));
    if (!o)
        return NULL;
    json_object_set_new(o, "step_time_s", num_or_null(t->step_time_s));
    json_object_set_new(o, "step_time_mad_s", num_or_null(t->step_time_mad_s));
    json_object_set_new(o, "teardown_s", num_or_null(t->teardown_s));
    json_object_set_new(o, "signature", str_or_null(t->signature));
    if (t->retest)
        json_object_set_new(o, "retest", json_true());
    if (t->recorded)
        json_object_set_new(o, "recorded", json_true());
    if (t->round > 0)
        json_object_set_new(o, "round", json_integer(t->round));
    if (t->devices[0])
        json_object_set_new(o, "devices", json_string(t->devices));
    if (t->shared)
        json_object_set_new(o, "shared", json_true());
    if (t->memory_only)
        json_object_set_new(o, "memory_only", json_true());
    results_extra_json(o, t->extra);
    json_object_set_new(o, "steps_from", str_or_null(t->steps_from));
    if (t->probe_processes > 0) {
        json_t *pr = json_pack("{s:s, s:s, s:i, s:o, s:o, s:o, s:o}",
                               "torch", t->probe_torch, "hook", t->probe_hook,
                               "processes", t->probe_processes,
                               "world_size", int_or_null(t->probe_world),
                               "loader_batch_size", int_or_null(t->loader_batch),
                               "batches_per_step", int_or_null(t->batches_per_step),
                               "peak_allocated_bytes", int_or_null(t->peak_allocated_bytes));
        if (pr) {
            json_object_set_new(pr, "peak_vm_bytes", int_or_null(t->peak_vm_bytes));
            json_object_set_new(pr, "seen_per_step", pos_or_null(t->seen_per_step));
            json_object_set_new(pr, "forwards_per_step", pos_or_null(t->forwards_per_step));
            json_object_set_new(pr, "tokens_per_step", pos_or_null(t->tokens_per_step));
            json_object_set_new(pr, "elems_max", pos_or_null(t->elems_max));
        }
        json_object_set_new(o, "probe", pr ? pr : json_null());
    } else {
        json_object_set_new(o, "probe", json_null());
    }
    json_object_set_new(o, "batch_seen", pos_or_null(t->batch_seen));
    json_object_set_new(o, "worst_case", results_worst_json(&t->worst));
    json_object_set_new(o, "memory_breakdown", results_mem_json(&t->mem));
    if (t->retries_known && t->alloc_retries >= 0) {
        /* at the edge: the allocator freed its cache and retried to fit */
        json_object_set_new(o, "alloc_retries", json_integer(t->alloc_retries));
        if (t->alloc_retries > 0)
            json_object_set_new(o, "alloc_retries_rank", int_or_null(t->alloc_retries_rank));
        json_object_set_new(o, "at_edge", json_boolean(t->alloc_retries > 0));
    }
    return o;
}

void results_trial_seen(struct results_trial *t, const struct trial_result *tr)
{
    t->batch_seen = tr->batch_seen;
    t->seen_per_step = tr->probe_seen_per_step;
    t->forwards_per_step = tr->probe_forwards_per_step;
    t->tokens_per_step = tr->probe_tokens_per_step;
    t->elems_max = tr->probe_elems_max;
    t->worst = tr->worst;
    t->mem = tr->mem;
    if (tr->outcome == TRIAL_FIT && t->mem.failure) /* a fit did not fail: no such record */
        memset(&t->mem, 0, sizeof t->mem);
    t->retries_known = tr->alloc_retries >= 0;
    t->alloc_retries = tr->alloc_retries;
    t->alloc_retries_rank = tr->alloc_retries_rank;
}

/* A duration or size of the settings: 0 (none) is null. */
static json_t *pos_real_or_null(double v)
{
    return v > 0 ? json_real(v) : json_null();
}

/*
 * "settings": what shaped the run beyond "space" (results.h's struct
 * results_settings), null when the run did not record it.
 */
static json_t *results_settings_json(const struct results_settings *st)
{
    if (!st->known)
        return json_null();
    json_t *confirm = st->confirm ? json_pack("{s:o, s:o}", "steps", pos_or_null(st->confirm_steps),
                                              "time_s", pos_real_or_null(st->confirm_s))
                                  : json_false();
    json_t *o = json_pack("{s:I, s:I, s:o, s:o, s:o, s:b, s:b, s:b}",
                          "steps", (json_int_t)st->steps, "warmup", (json_int_t)st->warmup,
                          "confirm", confirm ? confirm : json_null(),
                          "worst_case", str_or_null(st->worst_case),
                          "worst_case_scan_s", pos_real_or_null(st->worst_case_scan_s),
                          "replay", st->replay, "probe", st->probe, "cache", st->cache);
    if (!o)
        return json_null();
    json_object_set_new(o, "trial_timeout_s", pos_real_or_null(st->trial_timeout_s));
    json_object_set_new(o, "hang_timeout_s", pos_real_or_null(st->hang_timeout_s));
    json_object_set_new(o, "kill_grace_s", pos_real_or_null(st->grace_s));
    json_object_set_new(o, "budget_s", pos_real_or_null(st->budget_s));
    json_object_set_new(o, "trial_memory_limit_bytes", pos_or_null((long long)st->trial_mem_limit));
    json_object_set_new(o, "gpus", str_or_null(st->gpus && *st->gpus ? st->gpus : NULL));
    json_object_set_new(o, "gpus_per_trial", pos_or_null(st->gpus_per_trial));
    return o;
}

/*
 * "capacity": the device memory the headroom rule measured against and
 * where the figure came from, the headroom and the memory it leaves,
 * whether the rule could be checked, and how many fitting configurations
 * it kept out.  Unknown figures are null.
 */
static json_t *results_capacity_json(const struct results *r)
{
    int known = r->capacity > 0;
    json_t *o = json_pack("{s:o, s:o, s:f, s:o}",
                          "bytes", known ? json_integer((json_int_t)r->capacity) : json_null(),
                          "source", str_or_null(known ? r->capacity_source : NULL),
                          "headroom", r->headroom,
                          "usable_bytes", known ? json_integer((json_int_t)((1 - r->headroom) * r->capacity))
                                                : json_null());
    if (!o)
        return json_null();
    json_object_set_new(o, "headroom_checked",
                        r->headroom_checked < 0 ? json_null() : json_boolean(r->headroom_checked));
    json_object_set_new(o, "excluded", int_or_null(r->excluded));
    json_object_set_new(o, "trial_memory_limit_bytes",
                        pos_or_null((long long)r->settings.trial_mem_limit));
    return o;
}

long results_mem_smallest(const struct results *r)
{
    long k = -1;
    for (size_t i = 0; i < r->ntrials; i++) {
        const struct results_trial *t = &r->trials[i];
        if (t->outcome == TRIAL_FIT && t->mem.device[0] &&
            (k < 0 || t->micro_batch < r->trials[k].micro_batch))
            k = (long)i;
    }
    return k;
}

long results_mem_choice(const struct results *r)
{
    if (r->best < 0 || (size_t)r->best >= r->ntrials)
        return -1;
    const struct results_trial *b = &r->trials[r->best];
    if (b->mem.device[0])
        return r->best;
    for (size_t i = 0; i < r->ntrials; i++)
        if (r->trials[i].outcome == TRIAL_FIT && r->trials[i].mem.device[0] &&
            results_same_config(&r->trials[i], b))
            return (long)i;
    return -1;
}

/* One trial's entry of the top-level "memory_breakdown": which trial,
 * its parts, and each part's share of the capacity (null unknown). */
static json_t *results_mem_entry(const struct results *r, long k)
{
    struct results_mem_parts p;
    if (k < 0 || !results_mem_split(&r->trials[k].mem, &p))
        return json_null();
    const struct results_trial *t = &r->trials[k];
    json_t *o = json_pack("{s:I, s:I, s:I, s:b, s:s, s:o}", "trial", (json_int_t)t->id,
                          "micro_batch", (json_int_t)t->micro_batch,
                          "grad_accum", (json_int_t)t->grad_accum,
                          "checkpointing", t->checkpointing, "device", t->mem.device,
                          "parts", results_mem_json(&t->mem));
    json_t *share = json_object();
    for (int i = 0; share && i < RESULTS_MEM_PARTS; i++)
        json_object_set_new(share, results_mem_part_name[i],
                            p.v[i] >= 0 && r->capacity > 0 ? json_real((double)p.v[i] / r->capacity)
                                                            : json_null());
    if (o)
        json_object_set_new(o, "share", share ? share : json_null());
    else
        json_decref(share);
    return o ? o : json_null();
}

long results_mem_failure(const struct results *r)
{
    if (results_any_fit(r))
        return -1;
    long k = -1;
    for (size_t i = 0; i < r->ntrials; i++) {
        const struct results_trial *t = &r->trials[i];
        if (t->outcome != TRIAL_OOM || !t->mem.device[0] || !t->mem.failure)
            continue;
        if (k < 0 || t->micro_batch < r->trials[k].micro_batch ||
            (t->micro_batch == r->trials[k].micro_batch && t->mem.optim_expected >= 0 &&
             r->trials[k].mem.optim_expected < 0))
            k = (long)i;
    }
    return k;
}

int results_nofit_split(const struct results *r, struct results_nofit *f)
{
    memset(f, 0, sizeof *f);
    long k = results_mem_failure(r);
    if (k < 0)
        return 0;
    const struct results_trial *t = &r->trials[k];
    const struct inproc_mem *m = &t->mem;
    f->trial = k;
    f->params = m->params;
    f->grads_now = m->grads;
    f->grads = m->grads_expected > m->grads ? m->grads_expected : m->grads;
    f->optim_now = m->optim;
    f->optim = m->optim_expected >= 0 ? (m->optim_expected > m->optim ? m->optim_expected : m->optim)
                                      : -1;
    f->total = f->params + f->grads + (f->optim >= 0 ? f->optim : f->optim_now);
    f->capacity = r->capacity > 0 ? (long long)r->capacity : -1;
    f->exceeds = f->capacity > 0 ? f->total > f->capacity : -1;
    for (size_t i = 0; i < r->ntrials; i++) {
        f->ckpt_tried |= r->trials[i].checkpointing;
        f->prec_tried |= (r->trials[i].extra & KNOB_BIT(KNOB_PRECISION)) != 0;
    }
    /* Checkpointing saves activations only: worth a try when the rest
     * leaves room for some, and not tried yet. */
    int n = 0;
    if (f->exceeds != 1 && !f->ckpt_tried)
        f->suggest[n++] = "checkpointing";
    f->suggest[n++] = f->prec_tried ? "bf16_weights" : "mixed_precision";
    if (f->optim != 0)
        f->suggest[n++] = "8bit_optimizer";
    f->suggest[n++] = "sharding";
    f->nsuggest = n;
    return 1;
}

json_t *results_nofit_json(const struct results *r)
{
    struct results_nofit f;
    if (!results_nofit_split(r, &f))
        return json_null();
    const struct results_trial *t = &r->trials[f.trial];
    json_t *o = json_pack("{s:I, s:I, s:I, s:b, s:s, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:o, s:o,"
                          " s:b, s:[]}",
                          "trial", (json_int_t)t->id, "micro_batch", (json_int_t)t->micro_batch,
                          "grad_accum", (json_int_t)t->grad_accum, "checkpointing", t->checkpointing,
                          "device", t->mem.device, "step", (json_int_t)t->mem.step,
                          "params", (json_int_t)f.params, "grads", (json_int_t)f.grads,
                          "grads_allocated", (json_int_t)f.grads_now,
                          "optimizer", int_or_null(f.optim),
                          "optimizer_allocated", (json_int_t)f.optim_now,
                          "optimizer_class", t->mem.optim_class[0] ? json_string(t->mem.optim_class)
                                                                   : json_null(),
                          "before_activations", (json_int_t)f.total,
                          "capacity_bytes", int_or_null(f.capacity),
                          "exceeds_capacity", f.exceeds < 0 ? json_null() : json_boolean(f.exceeds),
                          "checkpointing_tried", f.ckpt_tried, "suggestions");
    if (o)
        json_object_set_new(o, "precision_tried", json_boolean(f.prec_tried));
    if (o)
        json_object_set_new(o, "batch_min", r->batch_min > 0 ? json_integer(r->batch_min) : json_null());
    json_t *sug = o ? json_object_get(o, "suggestions") : NULL;
    for (int i = 0; sug && i < f.nsuggest; i++)
        json_array_append_new(sug, json_string(f.suggest[i]));
    return o ? o : json_null();
}

/* "memory_breakdown": where the memory goes in the smallest fit and in
 * the choice, with the capacity the shares are of; when nothing fits,
 * where it went in the smallest size that failed. */
static json_t *results_mem_top_json(const struct results *r)
{
    json_t *o = json_pack("{s:o, s:o, s:o, s:o}",
                          "capacity_bytes", r->capacity > 0 ? json_integer((json_int_t)r->capacity)
                                                            : json_null(),
                          "smallest", results_mem_entry(r, results_mem_smallest(r)),
                          "choice", results_mem_entry(r, results_mem_choice(r)),
                          "failure", results_nofit_json(r));
    return o ? o : json_null();
}

/* "warm_start": whether the search started from the cache, and from which entry. */
static json_t *results_warm_json(const struct results *r)
{
    json_t *o = json_pack("{s:b, s:o, s:o, s:I, s:n}", "used", r->warm_start,
                          "cache_key", str_or_null(r->cache_key),
                          "cache_file", str_or_null(r->cache_file),
                          "cells_seeded", (json_int_t)(r->warm_start ? r->warm_cells : 0),
                          "trials_saved");
    return o ? o : json_null();
}

static char *results_iso8601(time_t t, char *buf, size_t len)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

int results_any_fit(const struct results *r)
{
    for (size_t i = 0; i < r->ntrials; i++)
        if (r->trials[i].outcome == TRIAL_FIT)
            return 1;
    return 0;
}

int results_same_config(const struct results_trial *a, const struct results_trial *b)
{
    return a->micro_batch == b->micro_batch && a->grad_accum == b->grad_accum &&
           a->checkpointing == b->checkpointing && a->extra == b->extra;
}

double results_speed(const struct results *r, const struct results_trial *t)
{
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < r->ntrials; i++) {
        const struct results_trial *o = &r->trials[i];
        if (o->outcome == TRIAL_FIT && o->samples_per_s > 0 && results_same_config(o, t)) {
            sum += o->samples_per_s;
            n++;
        }
    }
    return n ? sum / n : -1;
}

double results_spread(const struct results_trial *t)
{
    return t->step_time_s > 0 && t->step_time_mad_s >= 0 ? t->step_time_mad_s / t->step_time_s : -1;
}

/*
 * Why the best won: the runner-up (the fastest other candidate that
 * passed the same filters), the margin (best samples/s over the
 * runner-up's, less 1, each pooled over its measurements) and the larger of the two trials' relative spreads
 * (step-time MAD over median).  A margin within the spread is a choice
 * the measurements cannot tell apart.  null when nothing was chosen.
 */
static json_t *results_choice(const struct results *r)
{
    if (r->best < 0)
        return json_null();
    const struct results_trial *b = &r->trials[r->best];
    const struct results_trial *u = r->runner_up >= 0 && (size_t)r->runner_up < r->ntrials
                                    ? &r->trials[r->runner_up] : NULL;
    double vb = results_speed(r, b), vu = u ? results_speed(r, u) : -1;
    double margin = u && vb > 0 && vu > 0 ? vb / vu - 1 : -2;
    double sb = results_spread(b), su = u ? results_spread(u) : -1;
    double spread = sb >= 0 && su >= 0 ? (sb > su ? sb : su) : -1;
    return json_pack("{s:o, s:o, s:o, s:o}",
                     "runner_up", u ? results_point(u) : json_null(),
                     "margin", margin > -2 ? json_real(margin) : json_null(),
                     "spread", spread >= 0 ? json_real(spread) : json_null(),
                     "within_spread", margin > -2 && spread >= 0 ? json_boolean(margin <= spread)
                                                                 : json_null());
}

/* "knobs": what the run may turn on that changes numerics, and what it
 * turned on because micro_batch=1 fitted nowhere without it. */
static json_t *results_knobs_json(const struct results *r)
{
    json_t *allowed = json_array(), *on = json_array();
    for (int i = 0; i < 4 && r->allowed[i]; i++)
        json_array_append_new(allowed, json_string(r->allowed[i]));
    for (int i = 0; i < r->nturned_on; i++)
        json_array_append_new(on, json_pack("{s:s, s:s, s:s?}", "knob", r->turned_on[i].knob,
                                            "why", r->turned_on[i].why, "outcome",
                                            r->turned_on[i].outcome));
    return json_pack("{s:o, s:o, s:o}", "allowed", allowed, "turned_on", on, "skipped",
                     r->skipped[0] ? json_string(r->skipped) : json_null());
}

json_t *results_to_json(const struct results *r)
{
    char when[32];
    json_t *cmd = json_array(), *ga = json_array(), *ck = json_array();
    for (size_t i = 0; r->command && r->command[i]; i++)
        json_array_append_new(cmd, json_string(r->command[i]));
    for (size_t i = 0; i < r->ngrad_accum; i++)
        json_array_append_new(ga, json_integer(r->grad_accum[i]));
    if (r->ckpt_off)
        json_array_append_new(ck, json_false());
    if (r->ckpt_on)
        json_array_append_new(ck, json_true());

    json_t *trials = json_array();
    for (size_t i = 0; i < r->ntrials; i++)
        json_array_append_new(trials, results_trial_json(&r->trials[i]));

    json_t *max_fit = json_array();
    for (size_t i = 0; i < r->ncells; i++) {
        const struct results_cell *c = &r->cells[i];
        json_t *o = json_pack("{s:I, s:b, s:o}", "grad_accum", (json_int_t)c->grad_accum,
                              "checkpointing", c->checkpointing, "micro_batch",
                              c->bounded_by ? json_null() : int_or_null(c->max_fit));
        if (c->bounded_by) {
            /* The top of the range fitted: the true limit is unknown. */
            json_object_set_new(o, "bounded_by", json_string(c->bounded_by));
            json_object_set_new(o, "largest_tried_fit", int_or_null(c->max_fit));
        }
        json_object_set_new(o, "smallest_fail", int_or_null(c->min_fail));
        json_object_set_new(o, "trials", json_integer(c->trials));
        if (c->inferred)
            json_object_set_new(o, "inferred", json_true());
        if (c->skipped)
            json_object_set_new(o, "skipped", json_string(c->skipped));
        if (c->has_model)
            json_object_set_new(o, "memory_model",
                                json_pack("{s:f, s:f}", "base_bytes", c->model_base,
                                          "bytes_per_unit", c->model_slope));
        json_array_append_new(max_fit, o);
    }

    long *idx = malloc((r->ntrials ? r->ntrials : 1) * sizeof *idx);
    json_t *frontier = json_array();
    if (idx) {
        size_t n = results_frontier(r, idx);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(frontier, results_point(&r->trials[idx[i]]));
        free(idx);
    }

    json_t *contra = json_array();
    for (size_t i = 0; i < r->ncontra; i++) {
        const struct results_contradiction *c = &r->contra[i];
        json_array_append_new(contra, json_pack("{s:I, s:b, s:I, s:I, s:s}",
            "grad_accum", (json_int_t)c->grad_accum, "checkpointing", c->checkpointing,
            "micro_batch", (json_int_t)c->micro_batch, "larger_fit", (json_int_t)c->larger_fit,
            "retest", c->retest_fit ? "fit" : "failed again"));
    }

    json_t *best = r->best >= 0 ? results_point(&r->trials[r->best]) : json_null();

    json_t *doc = json_pack("{s:s, s:o, s:s, s:{s:s, s:[]}, s:{s:{s:I, s:I, s:I}, s:o, s:o, s:o, s:I},"
                     " s:o, s:o, s:o, s:o, s:o, s:{s:I, s:f, s:i, s:b}, s:o}",
                     "schema", "autobatch.results/1",
                     "command", cmd,
                     "started_at", results_iso8601(r->started_at, when, sizeof when),
                     "host", "hostname", r->hostname, "gpus",
                     "space", "batch", "min", (json_int_t)r->batch_min, "max",
                     (json_int_t)r->batch_max, "step", (json_int_t)r->batch_step,
                     "grad_accum", ga, "checkpointing", ck,
                     "global_batch", int_or_null(r->global_batch),
                     "world_size", (json_int_t)r->world_size,
                     "trials", trials,
                     "max_fit", max_fit,
                     "frontier", frontier,
                     "best", best,
                     "contradictions", contra,
                     "summary", "trials", (json_int_t)r->ntrials, "wall_s", r->wall_s,
                     "exit", r->exit_status, "interrupted", r->interrupted,
                     "preset", str_or_null(r->preset));
    if (doc) {
        json_object_set_new(doc, "teardown", str_or_null(r->teardown));
        json_object_set_new(json_object_get(doc, "summary"), "slurm_pending",
                            r->slurm_pending[0] ? json_string(r->slurm_pending) : json_null());
        json_object_set_new(json_object_get(doc, "summary"), "slurm_target",
                            str_or_null(r->slurm_target));
        json_object_set_new(json_object_get(doc, "summary"), "warm_start",
                            json_boolean(r->warm_start));
        json_t *space = json_object_get(doc, "space");
        json_object_set_new(space, "unit", json_string(r->unit ? r->unit : "samples"));
        json_object_set_new(space, "headroom", json_real(r->headroom));
        json_t *gpus = json_object_get(json_object_get(doc, "host"), "gpus");
        for (size_t i = 0; i < r->ngpus; i++)
            json_array_append_new(gpus, json_pack("{s:i, s:s, s:I}", "index", r->gpus[i].index,
                                                  "name", r->gpus[i].name, "memory_total_bytes",
                                                  (json_int_t)r->gpus[i].total));
        if (r->emulated)
            json_object_set_new(json_object_get(doc, "host"), "emulated_gpu_memory",
                                json_pack("{s:I, s:s, s:I}", "bytes", (json_int_t)r->emulated,
                                          "with", r->emulated_with ? r->emulated_with : "preload",
                                          "real_total_bytes", (json_int_t)r->emulated_real_total));
        if (r->slots > 1 || (r->launcher && strcmp(r->launcher, "local"))) {
            json_t *sum = json_object_get(doc, "summary");
            json_object_set_new(sum, "launcher", json_string(r->launcher ? r->launcher : "local"));
            json_object_set_new(sum, "slots", json_integer(r->slots));
            json_object_set_new(sum, "rounds", json_integer(r->rounds));
            json_object_set_new(sum, "cancelled", json_integer(r->cancelled));
        }
        json_object_set_new(doc, "config", str_or_null(r->config));
        json_object_set_new(doc, "replay", r->replay ? json_incref(r->replay) : json_null());
        json_object_set_new(doc, "choice", results_choice(r));
        if (r->run_with)
            json_object_set_new(doc, "run_with", json_incref(r->run_with));
        json_object_set_new(doc, "confirm", r->confirm ? json_incref(r->confirm) : json_array());
        json_object_set_new(json_object_get(doc, "summary"), "confirmed",
                            json_boolean(r->confirmed && r->best >= 0));
        json_object_set_new(doc, "trial_env",
                            r->trial_env ? json_incref(r->trial_env) : json_array());
        json_object_set_new(doc, "capacity", results_capacity_json(r));
        json_object_set_new(doc, "memory_breakdown", results_mem_top_json(r));
        json_object_set_new(doc, "warm_start", results_warm_json(r));
        json_object_set_new(doc, "knobs", results_knobs_json(r));
        json_object_set_new(doc, "settings", results_settings_json(&r->settings));
    }
    return doc;
}

int results_write_json(const json_t *doc, const char *path, char *err, size_t errlen)
{
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    if (!text) {
        snprintf(err, errlen, "cannot render results: out of memory");
        return -1;
    }
    size_t len = strlen(text);
    int rc = 0;
    if (!strcmp(path, "-")) {
        if (fwrite(text, 1, len, stdout) != len || fputc('\n', stdout) == EOF ||
            fflush(stdout)) {
            snprintf(err, errlen, "cannot write results to stdout: %s", strerror(errno));
            rc = -1;
        }
    } else {
        char *withnl = malloc(len + 2);
        if (!withnl) {
            snprintf(err, errlen, "cannot render results: out of memory");
            rc = -1;
        } else {
            memcpy(withnl, text, len);
            withnl[len] = '\n';
            rc = afile_write(path, withnl, len + 1, err, errlen);
            free(withnl);
        }
    }
    free(text);
    return rc;
}

int results_write(const struct results *r, const char *path, char *err, size_t errlen)
{
    json_t *doc = results_to_json(r);
    int rc = results_write_json(doc, path, err, errlen);
    json_decref(doc);
    return rc;
}

/* ----------------------------------------------------------------- load */


json_t *results_loadb(const char *buf, size_t len, const char *what, const char *name, char *err,
                      size_t errlen)
{
    if (len > RESULTS_MAX_BYTES) {
        errbuf_set(err, errlen, "%s '%s' is too large (more than %zu MiB)", what, name,
                   RESULTS_MAX_BYTES >> 20);
        return NULL;
    }
    json_error_t je;
    char text[160];
    json_t *doc = json_loadb(buf, len, 0, &je);
    if (!doc) {
        tclean(text, sizeof text, je.text, 120, 0);
        errbuf_set(err, errlen, "cannot parse %s '%s': line %d: %s", what, name, je.line, text);
        return NULL;
    }
    const json_t *schema = json_object_get(doc, "schema");
    if (!json_is_object(doc)) {
        errbuf_set(err, errlen, "%s '%s' is not an autobatch results file (not a json object)",
                   what, name);
        json_decref(doc);
        return NULL;
    }
    if (json_is_string(schema) && strncmp(json_string_value(schema), "autobatch.results/", 18)) {
        tclean(text, sizeof text, json_string_value(schema), 60, 0);
        errbuf_set(err, errlen, "%s '%s' is not an autobatch results file (schema '%s')", what,
                   name, text);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

json_t *results_load(const char *path, const char *what, char *err, size_t errlen)
{
    /* Read to the end rather than trusting st_size, so that a pipe
     * (`autobatch report <(...)`) works too; the cap holds either way. */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errbuf_set(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
        return NULL;
    }
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap);
    int rerr = buf ? 0 : ENOMEM;
    while (!rerr) {
        if (len == cap) {
            if (len > RESULTS_MAX_BYTES)
                break; /* one byte past the cap is enough to refuse it */
            size_t want = cap * 2 > RESULTS_MAX_BYTES + 1 ? RESULTS_MAX_BYTES + 1 : cap * 2;
            char *p = realloc(buf, want);
            if (!p) {
                rerr = ENOMEM;
                break;
            }
            buf = p;
            cap = want;
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rerr = errno;
        else if (n == 0)
            break;
        else
            len += (size_t)n;
    }
    close(fd);
    json_t *doc = NULL;
    if (rerr)
        errbuf_set(err, errlen, "cannot read %s '%s': %s", what, path, strerror(rerr));
    else
        doc = results_loadb(buf, len, what, path, err, errlen);
    free(buf);
    return doc;
}
