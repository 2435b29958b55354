/* SPDX-License-Identifier: MIT */
/*
 * baseline: compare a run with an earlier results file and store what
 * changed (see baseline.h for the rules and the stored object).
 *
 * Each side's per-cell answer is reduced to three facts: the largest size
 * seen to fit (exact, or a lower bound when the range's top fitted), and
 * the smallest size seen to fail.  A regression is a size that fitted
 * before and fails now; an improvement is a size that failed before and
 * fits now.  Everything else that differs is reported without a verdict.
 */
#include "output/baseline.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/results.h"

static const json_t *bl_get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static long long bl_int(const json_t *o, const char *k)
{
    const json_t *v = bl_get(o, k);
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        return (long long)llround(json_real_value(v));
    return -1;
}

static double bl_num(const json_t *o, const char *k)
{
    const json_t *v = bl_get(o, k);
    return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : NAN;
}

static int bl_results_doc(const json_t *doc)
{
    if (!json_is_object(doc))
        return 0;
    const char *schema = json_string_value(bl_get(doc, "schema"));
    return !schema || !strncmp(schema, "autobatch.results/", 18);
}

json_t *baseline_load(const char *path, char *err, size_t errlen)
{
    json_t *doc = results_load(path, "baseline", err, errlen);
    if (doc && !json_is_string(bl_get(doc, "schema"))) {
        json_decref(doc);
        snprintf(err, errlen, "baseline '%s' is not an autobatch results file (no \"schema\": "
                 "\"autobatch.results/1\")", path);
        return NULL;
    }
    return doc;
}

/* ------------------------------------------------------------------ */

/* A growable sentence. */
struct line {
    char buf[1024];
    size_t len;
};

static void line_add(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(struct line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, sizeof l->buf - l->len, fmt, ap);
    va_end(ap);
    if (n <= 0)
        return;
    if (l->len + (size_t)n < sizeof l->buf) {
        l->len += (size_t)n;
        return;
    }
    /* Cut off: drop a UTF-8 sequence that lost its tail, so the text stays valid. */
    size_t len = sizeof l->buf - 1, p = len;
    while (p > 0 && ((unsigned char)l->buf[p - 1] & 0xC0) == 0x80)
        p--;
    if (p > 0 && (unsigned char)l->buf[p - 1] >= 0xC0) {
        unsigned char lead = (unsigned char)l->buf[p - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        if (p - 1 + want > len)
            len = p - 1;
    }
    l->len = len;
    l->buf[len] = '\0';
}

/* The command as one line, words with spaces quoted. */
static void line_command(struct line *l, const json_t *cmd)
{
    if (!json_is_array(cmd)) {
        line_add(l, "(unknown)");
        return;
    }
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        const char *w = json_string_value(json_array_get(cmd, i));
        w = w ? w : "";
        line_add(l, strpbrk(w, " \t'\"") || !*w ? "%s'%s'" : "%s%s", i ? " " : "", w);
    }
}

static void line_config(struct line *l, const json_t *best)
{
    long long mb = bl_int(best, "micro_batch"), ga = bl_int(best, "grad_accum");
    const json_t *ck = bl_get(best, "checkpointing");
    if (mb >= 0)
        line_add(l, "micro-batch %lld", mb);
    else
        line_add(l, "micro-batch unknown");
    if (ga >= 0)
        line_add(l, " \xc3\x97 grad-accum %lld", ga);
    if (json_is_boolean(ck))
        line_add(l, ", checkpointing %s", json_is_true(ck) ? "on" : "off");
}

static json_t *config_json(const json_t *best)
{
    if (!json_is_object(best))
        return json_null();
    json_t *o = json_object();
    const char *keys[] = { "micro_batch", "grad_accum", "checkpointing" };
    for (int i = 0; i < 3; i++) {
        const json_t *v = bl_get(best, keys[i]);
        json_object_set_new(o, keys[i], v ? json_deep_copy(v) : json_null());
    }
    return o;
}

static int same_config(const json_t *a, const json_t *b)
{
    const char *keys[] = { "micro_batch", "grad_accum", "checkpointing" };
    for (int i = 0; i < 3; i++) {
        const json_t *x = bl_get(a, keys[i]), *y = bl_get(b, keys[i]);
        if (!(x && y ? json_equal((json_t *)x, (json_t *)y) : x == y))
            return 0;
    }
    return 1;
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *int_or_null(long long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

/* Append a change; kind and text first, then the numbers in extra (stolen). */
static int add_change(json_t *changes, const char *kind, const struct line *text, int regression,
                      int improvement, json_t *extra)
{
    json_t *c = json_pack("{s:s, s:s, s:b, s:b}", "kind", kind, "text", text->buf, "regression",
                          regression, "improvement", improvement);
    if (!c || (extra && json_object_update(c, extra) < 0) || json_array_append_new(changes, c) < 0) {
        json_decref(extra);
        return -1;
    }
    json_decref(extra);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Throughput of the choice.                                           */

/* The mean samples/s of the fits of configuration cfg in a results
 * document (a noisy configuration measured twice counts both), and in
 * *spread the larger relative step-time spread (MAD over median) among
 * them; NAN when the document has no measured fit of it. */
static double config_speed(const json_t *doc, const json_t *cfg, double *spread)
{
    const json_t *trials = bl_get(doc, "trials");
    double sum = 0;
    int n = 0;
    *spread = 0;
    for (size_t i = 0; json_is_array(trials) && i < json_array_size(trials); i++) {
        const json_t *t = json_array_get(trials, i);
        const json_t *o = bl_get(t, "outcome");
        double v = bl_num(t, "samples_per_s");
        if (!json_is_string(o) || strcmp(json_string_value(o), "fit") || isnan(v) || v <= 0 ||
            !same_config(t, cfg))
            continue;
        sum += v;
        n++;
        double st = bl_num(t, "step_time_s"), mad = bl_num(t, "step_time_mad_s");
        if (!isnan(st) && !isnan(mad) && st > 0 && mad / st > *spread)
            *spread = mad / st;
    }
    return n ? sum / n : NAN;
}

/*
 * Like with like: the baseline's chosen configuration against the same
 * configuration in this run (the mean of its measured fits) when this run
 * measured it (the choice may
 * move between near-equal configurations from one night to the next,
 * which says nothing about speed), else against this run's choice.  A drop
 * is a regression when it is more than the threshold and more than the
 * step times' measured spread of either run (noise is not a regression),
 * and this run found nothing at least as fast as the baseline's choice.
 */
static int compare_throughput(json_t *changes, const json_t *cur, const json_t *base, double thr)
{
    const json_t *cb = bl_get(cur, "best"), *bb = bl_get(base, "best");
    int has_c = json_is_object(cb), has_b = json_is_object(bb);
    double c = has_c ? bl_num(cb, "samples_per_s") : NAN, b = has_b ? bl_num(bb, "samples_per_s") : NAN;
    double best_now = c, spread = 0, sb = 0, sc = 0;
    struct line l = { .len = 0 };
    int regression = 0, improvement = 0, like = 0;
    double change = NAN;
    if (!has_c && !has_b)
        return 0;
    if (has_c && has_b) {
        /* the baseline as it reported its choice; its spread from its trials */
        config_speed(base, bb, &sb);
        double cs = config_speed(cur, bb, &sc);
        if (!isnan(cs) && !same_config(cb, bb)) {
            c = cs;
            like = 1;
        }
        spread = sb > sc ? sb : sc;
    }
    if (!has_c) {
        regression = 1;
        line_add(&l, "no configuration was chosen; the baseline chose ");
        line_config(&l, bb);
        if (!isnan(b))
            line_add(&l, " at %.1f samples/s", b);
    } else if (!has_b) {
        improvement = 1;
        line_add(&l, "a configuration was chosen (");
        line_config(&l, cb);
        if (!isnan(c))
            line_add(&l, " at %.1f samples/s", c);
        line_add(&l, "); the baseline chose none");
    } else if (isnan(c) || isnan(b) || b <= 0) {
        line_add(&l, "throughput of the chosen configuration cannot be compared: it was not measured in %s",
                 isnan(c) && (isnan(b) || b <= 0) ? "either run" : isnan(c) ? "this run" : "the baseline");
    } else {
        change = (c - b) / b;
        /* A hair of tolerance so that exactly the threshold is not a regression. */
        int beyond = -change > thr + 1e-12;
        int noise = beyond && -change <= spread;
        int found = !isnan(best_now) && best_now >= b * (1 - thr);
        regression = beyond && !noise && !found;
        improvement = change > thr + 1e-12;
        const char *what = like ? "the baseline's choice" : "the chosen configuration";
        if (c == b)
            line_add(&l, "throughput of %s is unchanged at %.1f samples/s", what, c);
        else
            line_add(&l, "throughput of %s %s %.1f%%, from %.1f to %.1f samples/s%s%g%%%s", what,
                     change < 0 ? "fell" : "rose", fabs(change) * 100, b, c,
                     beyond ? ", more than the " : !improvement ? ", within the " : ", above the ",
                     thr * 100, " threshold");
        if (noise)
            line_add(&l, " but within the step times' measured spread (%.1f%%): not a regression",
                     spread * 100);
        else if (beyond && found)
            line_add(&l, "; this run's choice, at %.1f samples/s, is as fast as the baseline's was",
                     best_now);
    }
    if (has_c && has_b && !same_config(cb, bb)) {
        line_add(&l, "; the choice changed from ");
        line_config(&l, bb);
        line_add(&l, " to ");
        line_config(&l, cb);
    }
    json_t *extra = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "baseline", num_or_null(b),
                              "current", num_or_null(c), "change", num_or_null(change),
                              "baseline_config", config_json(bb), "current_config", config_json(cb),
                              "spread", num_or_null(has_c && has_b ? spread : NAN),
                              "like_with_like", like);
    if (!extra)
        return -1;
    return add_change(changes, "throughput", &l, regression, improvement, extra);
}

/* ------------------------------------------------------------------ */
/* Per-cell largest fits.                                              */

struct cell {
    long long ga;
    int ckpt;
    long long lo;     /* largest size seen to fit, -1: none */
    int bounded;      /* lo is only a lower bound: the range's top fitted */
    long long fail;   /* smallest size seen to fail, -1: none */
    const json_t *j;
    size_t idx;       /* its place in the file's max_fit */
};

static int cell_read(const json_t *o, struct cell *c)
{
    const json_t *ck = bl_get(o, "checkpointing");
    c->ga = bl_int(o, "grad_accum");
    if (c->ga < 0 || !json_is_boolean(ck))
        return -1;
    c->ckpt = json_is_true(ck);
    c->bounded = json_is_string(bl_get(o, "bounded_by"));
    c->lo = c->bounded ? bl_int(o, "largest_tried_fit") : bl_int(o, "micro_batch");
    c->fail = bl_int(o, "smallest_fail");
    c->j = o;
    return 0;
}

/* A file's readable max_fit entries, sorted for lookup (see cells_find). */
struct cells {
    struct cell *v;
    size_t n;
};

static int cell_cmp(const void *a, const void *b)
{
    const struct cell *x = a, *y = b;
    if (x->ckpt != y->ckpt)
        return x->ckpt - y->ckpt;
    if (x->ga != y->ga)
        return x->ga < y->ga ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Sort once, look up by binary search: comparing two files cell by cell
 * with a scan per lookup would be quadratic in a hostile file's cells.
 * Returns 0, or -1 on ENOMEM.
 */
static int cells_index(const json_t *arr, struct cells *ix)
{
    size_t m = json_array_size(arr);
    ix->n = 0;
    ix->v = malloc((m ? m : 1) * sizeof *ix->v);
    if (!ix->v)
        return -1;
    for (size_t i = 0; i < m; i++)
        if (cell_read(json_array_get(arr, i), &ix->v[ix->n]) == 0)
            ix->v[ix->n++].idx = i;
    qsort(ix->v, ix->n, sizeof *ix->v, cell_cmp);
    return 0;
}

/* The file's first entry (in file order) for the cell, or NULL. */
static const struct cell *cells_find(const struct cells *ix, long long ga, int ckpt)
{
    struct cell key = { .ga = ga, .ckpt = ckpt, .idx = 0 };
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cell_cmp(&ix->v[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ix->n && ix->v[lo].ga == ga && ix->v[lo].ckpt == ckpt ? &ix->v[lo] : NULL;
}

static void line_cell_value(struct line *l, const struct cell *c)
{
    if (c->lo >= 0)
        line_add(l, c->bounded ? "at least %lld (the top of its range)" : "%lld", c->lo);
    else if (c->fail >= 0)
        line_add(l, "none (micro-batch %lld fails)", c->fail);
    else
        line_add(l, "unknown");
}

static json_t *cell_numbers(const struct cell *b, const struct cell *c, long long ga, int ckpt)
{
    return json_pack("{s:I, s:b, s:o, s:o, s:b, s:b, s:o, s:o}", "grad_accum", (json_int_t)ga,
                     "checkpointing", ckpt, "baseline", b ? int_or_null(b->lo) : json_null(), "current",
                     c ? int_or_null(c->lo) : json_null(), "baseline_bounded", b && b->bounded,
                     "current_bounded", c && c->bounded, "baseline_smallest_fail",
                     b ? int_or_null(b->fail) : json_null(), "current_smallest_fail",
                     c ? int_or_null(c->fail) : json_null());
}

static int compare_cell(json_t *changes, const struct cell *c, const struct cell *b)
{
    if (c->lo == b->lo && c->bounded == b->bounded && c->fail == b->fail)
        return 0;
    /* A size the baseline fitted now fails; or both runs know the exact limit and it went down. */
    int regression = (c->fail >= 0 && b->lo >= 0 && c->fail <= b->lo) ||
                     (!c->bounded && !b->bounded && c->lo >= 0 && b->lo >= 0 && c->lo < b->lo);
    int improvement = !regression && ((b->fail >= 0 && c->lo >= b->fail) ||
                                      (!c->bounded && !b->bounded && c->lo >= 0 && b->lo >= 0 && c->lo > b->lo));
    if (!regression && !improvement && c->lo == b->lo && c->bounded == b->bounded)
        return 0; /* only a failure further up was seen (or not): the largest fit is the same */
    struct line l = { .len = 0 };
    line_add(&l, "largest micro-batch for grad-accum %lld, checkpointing %s %s from ", c->ga,
             c->ckpt ? "on" : "off", regression ? "shrank" : improvement ? "grew" : "changed");
    line_cell_value(&l, b);
    line_add(&l, " to ");
    line_cell_value(&l, c);
    if (!regression && !improvement)
        line_add(&l, "; not comparable, the search range differs");
    json_t *extra = cell_numbers(b, c, c->ga, c->ckpt);
    if (!extra)
        return -1;
    return add_change(changes, "max_fit", &l, regression, improvement, extra);
}

static int compare_cells(json_t *changes, const json_t *cur, const json_t *base)
{
    const json_t *cc = bl_get(cur, "max_fit"), *bc = bl_get(base, "max_fit");
    struct cells ci = { NULL, 0 }, bi = { NULL, 0 };
    int rc = -1;
    if (cells_index(cc, &ci) || cells_index(bc, &bi))
        goto out;
    for (size_t i = 0; i < json_array_size(cc); i++) {
        struct cell c;
        if (cell_read(json_array_get(cc, i), &c) < 0)
            continue;
        const struct cell *b = cells_find(&bi, c.ga, c.ckpt);
        if (b) {
            if (compare_cell(changes, &c, b) < 0)
                goto out;
            continue;
        }
        if (!json_is_array(bc))
            continue; /* a baseline without per-cell answers: nothing to say */
        struct line l = { .len = 0 };
        line_add(&l, "grad-accum %lld, checkpointing %s was not searched in the baseline; its largest "
                 "micro-batch is ", c.ga, c.ckpt ? "on" : "off");
        line_cell_value(&l, &c);
        json_t *extra = cell_numbers(NULL, &c, c.ga, c.ckpt);
        if (!extra || add_change(changes, "cell_added", &l, 0, 0, extra) < 0)
            goto out;
    }
    for (size_t i = 0; json_is_array(cc) && i < json_array_size(bc); i++) {
        struct cell b;
        if (cell_read(json_array_get(bc, i), &b) < 0 || cells_find(&ci, b.ga, b.ckpt))
            continue;
        struct line l = { .len = 0 };
        line_add(&l, "grad-accum %lld, checkpointing %s was searched in the baseline (largest micro-batch ",
                 b.ga, b.ckpt ? "on" : "off");
        line_cell_value(&l, &b);
        line_add(&l, ") but not in this run");
        json_t *extra = cell_numbers(&b, NULL, b.ga, b.ckpt);
        if (!extra || add_change(changes, "cell_removed", &l, 0, 0, extra) < 0)
            goto out;
    }
    rc = 0;
out:
    free(ci.v);
    free(bi.v);
    return rc;
}

/* ------------------------------------------------------------------ */

int baseline_compare(json_t *current, const json_t *baseline, const char *baseline_path,
                     double threshold, char *err, size_t errlen)
{
    if (!bl_results_doc(current)) {
        snprintf(err, errlen, "the current results are not an autobatch results document");
        return -1;
    }
    if (!bl_results_doc(baseline)) {
        snprintf(err, errlen, "baseline '%s' is not an autobatch results file",
                 baseline_path ? baseline_path : "(unnamed)");
        return -1;
    }
    if (!(threshold >= 0 && threshold <= 1)) {
        snprintf(err, errlen, "the regression threshold must be a fraction from 0 to 1, not %g", threshold);
        return -1;
    }

    json_t *changes = json_array();
    if (!changes)
        goto oom;
    const json_t *cc = bl_get(current, "command"), *bc = bl_get(baseline, "command");
    int other_command = !(cc && bc && json_equal((json_t *)cc, (json_t *)bc));
    if (other_command) {
        struct line l = { .len = 0 };
        line_add(&l, "the baseline is for a different command: ");
        line_command(&l, bc);
        line_add(&l, " (this run: ");
        line_command(&l, cc);
        line_add(&l, ")");
        json_t *extra = json_pack("{s:O, s:O}", "baseline", bc ? (json_t *)bc : json_null(), "current",
                                  cc ? (json_t *)cc : json_null());
        if (!extra || add_change(changes, "command", &l, 0, 0, extra) < 0)
            goto oom;
    }
    if (compare_throughput(changes, current, baseline, threshold) < 0 ||
        compare_cells(changes, current, baseline) < 0)
        goto oom;

    int regression = 0;
    for (size_t i = 0; i < json_array_size(changes); i++)
        regression |= json_is_true(json_object_get(json_array_get(changes, i), "regression"));
    const char *started = json_string_value(bl_get(baseline, "started_at"));
    json_t *file = baseline_path ? json_string(baseline_path) : NULL; /* NULL too when not UTF-8 */
    json_t *verdict = json_pack("{s:o, s:f, s:b, s:b, s:o, s:o}", "file", file ? file : json_null(), "threshold",
                                threshold, "regression", regression, "different_command", other_command,
                                "started_at", started ? json_string(started) : json_null(), "changes",
                                changes);
    changes = NULL;
    if (!verdict || json_object_set_new(current, "baseline", verdict) < 0)
        goto oom;
    return regression;

oom:
    json_decref(changes);
    snprintf(err, errlen, "cannot compare with the baseline: out of memory");
    return -1;
}
