/* SPDX-License-Identifier: MIT */
/*
 * report: Markdown, JUnit and HTML renderings of a results document (see
 * report.h for what each holds).  This file holds the public calls and
 * what the formats share; each format is in a file of its own
 * (report_md.c, report_junit.c, report_html.c with its charts in
 * report_chart.c), and report_int.h is the manual of what they share.
 *
 * The document is first read into plain structs (struct rdoc), with every
 * missing or null value turned into a marker (-1, NAN, NULL), so that the
 * renderers never have to ask jansson whether a key exists.  The facts
 * every format states (the command, host, capacity, search space, ...)
 * are written here once, as plain text, and each format escapes them its
 * own way; XML and HTML share one escaping, Markdown has its own.
 */
#include "output/report.h"
#include "output/report_int.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Reading the document: every absent or null value becomes a marker.   */

const char *const report_oc_name[OC_N] = {
    "fit", "oom", "crash", "timeout", "hang", "interrupted", "spawn_failed", "no_steps",
    "knob_mismatch", "unknown",
};

const char *const report_oc_colour[OC_N] = {
    "#2e8b3e", "#d1402b", "#7b3f00", "#8a55c9", "#c2489b", "#8c8c8c", "#222222", "#b8860b",
    "#1f5f9f", "#222222",
};

const json_t *report_jget(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

long long report_jint(const json_t *o, const char *k)
{
    const json_t *v = report_jget(o, k);
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        return (long long)llround(json_real_value(v));
    return -1;
}

double report_jnum(const json_t *o, const char *k)
{
    const json_t *v = report_jget(o, k);
    if (json_is_number(v) && isfinite(json_number_value(v)))
        return json_number_value(v);
    return NAN;
}

const char *report_jstr(const json_t *o, const char *k)
{
    return json_string_value(report_jget(o, k));
}

int report_jbool(const json_t *o, const char *k)
{
    const json_t *v = report_jget(o, k);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static double jpeak(const json_t *o)
{
    double v = report_jnum(o, "peak_mem_bytes");
    return v > 0 ? v : NAN;
}

static enum oc oc_parse(const char *s)
{
    if (!s)
        return OC_UNKNOWN;
    for (int i = 0; i < OC_UNKNOWN; i++)
        if (!strcmp(s, report_oc_name[i]))
            return (enum oc)i;
    return OC_UNKNOWN;
}

static struct rpoint point_read(const json_t *o)
{
    return (struct rpoint){ .mb = report_jint(o, "micro_batch"), .ga = report_jint(o, "grad_accum"),
                            .ckpt = report_jbool(o, "checkpointing"), .sps = report_jnum(o, "samples_per_s"),
                            .peak = jpeak(o) };
}

static void gate_read(struct rgate *g, const json_t *bl)
{
    g->changes = report_jget(bl, "changes");
    g->nchanges = json_array_size(g->changes);
    g->file = report_jstr(bl, "file");
    g->threshold = report_jnum(bl, "threshold");
    g->regression = report_jbool(bl, "regression") == 1;
    for (size_t i = 0; i < g->nchanges; i++) {
        const json_t *c = json_array_get(g->changes, i);
        const char *kind = report_jstr(c, "kind");
        g->other_command |= kind && !strcmp(kind, "command");
        g->nreg += report_jbool(c, "regression") == 1;
    }
}

void report_gate_list(struct sbuf *b, const struct rdoc *d, const char *const mark[3],
               void (*esc)(struct sbuf *, const char *), const char *end)
{
    for (size_t i = 0; i < d->gate.nchanges; i++) {
        const json_t *c = json_array_get(d->gate.changes, i);
        const char *text = report_jstr(c, "text");
        enum change_kind kind = report_jbool(c, "regression") == 1    ? CHANGE_REGRESSION
                                : report_jbool(c, "improvement") == 1 ? CHANGE_IMPROVEMENT
                                                               : CHANGE_NOTE;
        sb_puts(b, mark[kind]);
        esc(b, text ? text : "(no description)");
        sb_puts(b, end);
    }
}

void report_gate_threshold(struct sbuf *b, const struct rdoc *d)
{
    if (!isnan(d->gate.threshold))
        sb_printf(b, " (throughput threshold %g%%)", d->gate.threshold * 100);
}

void rdoc_release(struct rdoc *d)
{
    free(d->t);
    free(d->c);
    free(d->f);
    free(d->x);
    memset(d, 0, sizeof *d);
}

int rdoc_load(struct rdoc *d, const json_t *root, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "the results are not a json object");
        return -1;
    }
    const char *schema = report_jstr(root, "schema");
    if (schema && strncmp(schema, "autobatch.results/", 18)) {
        snprintf(err, errlen, "not an autobatch results file (schema '%.60s')", schema);
        return -1;
    }
    d->root = root;
    d->command = report_jget(root, "command");
    d->host = report_jget(root, "host");
    d->space = report_jget(root, "space");
    d->summary = report_jget(root, "summary");
    d->baseline = json_is_object(report_jget(root, "baseline")) ? report_jget(root, "baseline") : NULL;
    if (d->baseline)
        gate_read(&d->gate, d->baseline);
    d->run_with = json_is_object(report_jget(root, "run_with")) ? report_jget(root, "run_with") : NULL;
    d->capacity = json_is_object(report_jget(root, "capacity")) ? report_jget(root, "capacity") : NULL;
    d->warm = json_is_object(report_jget(root, "warm_start")) ? report_jget(root, "warm_start") : NULL;
    d->settings = json_is_object(report_jget(root, "settings")) ? report_jget(root, "settings") : NULL;
    d->unit = report_jstr(d->space, "unit");
    if (!d->unit || !*d->unit)
        d->unit = "samples";
    /* The unit goes into every format unquoted ("frames/s", table heads,
     * chart labels): only a plain word is taken from the file; anything
     * else (markup, table pipes, newlines) becomes a neutral word. */
    if (strlen(d->unit) > 32 || strspn(d->unit, "abcdefghijklmnopqrstuvwxyz"
                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                                    strlen(d->unit))
        d->unit = "units";
    d->started_at = report_jstr(root, "started_at");
    d->preset = report_jstr(root, "preset");
    if (!d->preset)
        d->preset = report_jstr(d->summary, "preset");
    d->config = report_jstr(root, "config");
    d->exit = report_jint(d->summary, "exit");
    d->interrupted = report_jbool(d->summary, "interrupted") == 1;

    const json_t *trials = report_jget(root, "trials"), *cells = report_jget(root, "max_fit"),
                 *front = report_jget(root, "frontier"), *contra = report_jget(root, "contradictions");
    size_t nt = json_array_size(trials), nc = json_array_size(cells), nf = json_array_size(front),
           nx = json_array_size(contra);
    d->t = calloc(nt ? nt : 1, sizeof *d->t);
    d->c = calloc(nc ? nc : 1, sizeof *d->c);
    d->f = calloc(nf ? nf : 1, sizeof *d->f);
    d->x = calloc(nx ? nx : 1, sizeof *d->x);
    if (!d->t || !d->c || !d->f || !d->x) {
        rdoc_release(d);
        return report_oom(err, errlen);
    }

    const json_t *best = report_jget(root, "best");
    if (json_is_object(best)) {
        d->best = point_read(best);
        d->has_best = 1;
    }

    double wall_sum = 0;
    int any_wall = 0, fits = 0, fits_with_peak = 0, chosen_seen = 0;
    for (size_t i = 0; i < nt; i++) {
        const json_t *o = json_array_get(trials, i);
        if (!json_is_object(o))
            continue;
        struct rtrial *t = &d->t[d->nt++];
        t->id = report_jint(o, "id");
        t->mb = report_jint(o, "micro_batch");
        t->ga = report_jint(o, "grad_accum");
        t->steps = report_jint(o, "steps_measured");
        t->ckpt = report_jbool(o, "checkpointing");
        t->outcome = report_jstr(o, "outcome") ? report_jstr(o, "outcome") : "unknown";
        t->oc = oc_parse(report_jstr(o, "outcome"));
        t->sps = report_jnum(o, "samples_per_s");
        t->peak = jpeak(o);
        t->wall = report_jnum(o, "wall_s");
        if (t->wall < 0)
            t->wall = NAN;
        t->exit_code = report_jint(o, "exit_code");
        t->sig = report_jint(o, "signal");
        t->evidence = report_jstr(o, "evidence");
        t->evlen = t->evidence ? json_string_length(report_jget(o, "evidence")) : 0;
        t->signature = report_jstr(o, "signature");
        t->retest = report_jbool(o, "retest") == 1;
        d->count[t->oc]++;
        if (!isnan(t->wall) && t->wall >= 0) {
            wall_sum += t->wall;
            any_wall = 1;
        }
        if (t->oc == OC_FIT && !isnan(t->sps)) {
            fits++;
            fits_with_peak += !isnan(t->peak);
        }
        if (d->has_best && !chosen_seen && t->oc == OC_FIT && t->mb == d->best.mb && t->ga == d->best.ga &&
            t->ckpt == d->best.ckpt && (isnan(d->best.sps) || t->sps == d->best.sps))
            t->chosen = chosen_seen = 1;
    }
    d->mem_axis = fits > 0 && fits == fits_with_peak;
    d->wall = report_jnum(d->summary, "wall_s");
    if (isnan(d->wall) && any_wall)
        d->wall = wall_sum;

    for (size_t i = 0; i < nc; i++) {
        const json_t *o = json_array_get(cells, i);
        if (!json_is_object(o))
            continue;
        d->c[d->nc++] = (struct rcell){
            .ga = report_jint(o, "grad_accum"), .ckpt = report_jbool(o, "checkpointing"),
            .mb = report_jint(o, "micro_batch"), .fail = report_jint(o, "smallest_fail"),
            .tried = report_jint(o, "largest_tried_fit"), .trials = report_jint(o, "trials"),
            .inferred = report_jbool(o, "inferred") == 1, .bounded_by = report_jstr(o, "bounded_by"),
            .skipped = report_jstr(o, "skipped"),
        };
        const json_t *mm = report_jget(o, "memory_model");
        struct rcell *c = &d->c[d->nc - 1];
        c->model_base = report_jnum(mm, "base_bytes");
        c->model_slope = report_jnum(mm, "bytes_per_unit");
        c->has_model = !isnan(c->model_base) && c->model_slope > 0;
    }
    for (size_t i = 0; i < nf; i++) {
        const json_t *o = json_array_get(front, i);
        if (json_is_object(o))
            d->f[d->nf++] = point_read(o);
    }
    for (size_t i = 0; i < nx; i++) {
        const json_t *o = json_array_get(contra, i);
        if (!json_is_object(o))
            continue;
        d->x[d->nx++] = (struct rcontra){
            .ga = report_jint(o, "grad_accum"), .ckpt = report_jbool(o, "checkpointing"),
            .mb = report_jint(o, "micro_batch"), .larger = report_jint(o, "larger_fit"),
            .retest = report_jstr(o, "retest"),
        };
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Plain-text facts, shared by every format (escaped by the caller).    */

const char *report_fmt_int(char *buf, size_t n, long long v)
{
    if (v < 0)
        return DASH;
    snprintf(buf, n, "%lld", v);
    return buf;
}

const char *report_fmt_rate(char *buf, size_t n, double v)
{
    if (isnan(v))
        return DASH;
    snprintf(buf, n, "%.1f", v);
    return buf;
}

const char *report_fmt_bytes(char *buf, size_t n, double v)
{
    if (isnan(v))
        return DASH;
    if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GiB", v / (1024.0 * 1024 * 1024));
    else if (v >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", v / (1024.0 * 1024));
    else
        snprintf(buf, n, "%.0f KiB", v / 1024.0);
    return buf;
}

const char *report_fmt_secs(char *buf, size_t n, double v)
{
    if (isnan(v))
        return DASH;
    snprintf(buf, n, v < 10 ? "%.2f s" : v < 100 ? "%.1f s" : "%.0f s", v);
    return buf;
}

const char *report_ckpt_word(int c)
{
    return c < 0 ? DASH : c ? "on" : "off";
}

static const char *exit_meaning(long long e)
{
    switch (e) {
    case 0: return "a configuration was chosen";
    case 2: return "bad usage or bad input";
    case 3: return "nothing fits, even the smallest candidate";
    case 4: return "the command failed for a reason other than memory";
    case 5: return "the budget ran out before any candidate fitted";
    case 130: return "interrupted";
    }
    return NULL;
}

/* One word as a shell would take it: quoted only when needed. */
static void text_word(struct sbuf *b, const char *w)
{
    int plain = *w != '\0';
    for (const char *p = w; *p; p++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-", *p))
            plain = 0;
    if (plain) {
        sb_puts(b, w);
        return;
    }
    sb_put(b, "'", 1);
    for (const char *p = w; *p; p++) {
        if (*p == '\'')
            sb_puts(b, "'\\''");
        else
            sb_put(b, p, 1);
    }
    sb_put(b, "'", 1);
}

/* The command as a shell would take it: words quoted only when needed. */
void report_text_command(struct sbuf *b, const json_t *cmd)
{
    if (!json_is_array(cmd) || !json_array_size(cmd)) {
        sb_puts(b, "(unknown)");
        return;
    }
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        const char *w = json_string_value(json_array_get(cmd, i));
        if (i)
            sb_put(b, " ", 1);
        text_word(b, w ? w : "");
    }
}

/*
 * The command that uses the choice, from "run_with": its variables
 * (NAME=value, the value quoted) then its words.  0 when the file does
 * not record it (older files, no choice), and nothing is written.
 */
int report_text_run_with(struct sbuf *b, const struct rdoc *d)
{
    const json_t *cmd = report_jget(d->run_with, "command"), *env = report_jget(d->run_with, "env");
    if (!json_is_array(cmd) || !json_array_size(cmd))
        return 0;
    for (size_t i = 0; i < json_array_size(env); i++) {
        const char *e = json_string_value(json_array_get(env, i));
        size_t name = e ? strcspn(e, "=") : 0;
        if (!e || !e[name] || !name || strspn(e, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                 "0123456789_") != name)
            continue; /* not an assignment a shell would take */
        sb_put(b, e, name + 1);
        text_word(b, e + name + 1);
        sb_put(b, " ", 1);
    }
    report_text_command(b, cmd);
    return 1;
}

void report_text_host(struct sbuf *b, const struct rdoc *d)
{
    const char *hostname = report_jstr(d->host, "hostname");
    const json_t *gpus = report_jget(d->host, "gpus");
    sb_puts(b, hostname && *hostname ? hostname : "unknown host");
    if (!json_is_array(gpus)) {
        sb_puts(b, ", GPUs unknown");
        return;
    }
    size_t n = json_array_size(gpus);
    if (!n) {
        sb_puts(b, ", no GPU");
        return;
    }
    const json_t *g = json_array_get(gpus, 0);
    const char *name = report_jstr(g, "name");
    char mem[32];
    double total = report_jnum(g, "memory_total_bytes");
    sb_puts(b, ", ");
    if (n > 1)
        sb_printf(b, "%zu \xc3\x97 ", n);
    sb_puts(b, name && *name ? name : "unknown GPU");
    if (total > 0)
        sb_printf(b, " (%s)", report_fmt_bytes(mem, sizeof mem, total));
}

/*
 * The smallest device memory the file records (emulated when it was), or
 * NAN; *same (when not NULL): every device recorded has that much.
 */
static double doc_gpu_capacity(const struct rdoc *d, int *same)
{
    const json_t *gpus = report_jget(d->host, "gpus");
    double cap = NAN, top = NAN;
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        double t = report_jnum(json_array_get(gpus, i), "memory_total_bytes");
        if (t > 0 && !(t >= cap))
            cap = t;
        if (t > 0 && !(t <= top))
            top = t;
    }
    if (same)
        *same = cap == top;
    double emu = report_jnum(report_jget(d->host, "emulated_gpu_memory"), "bytes");
    if (emu > 0 && !(emu >= cap))
        cap = emu;
    return cap;
}

double report_capacity(const struct rdoc *d, const char **source)
{
    double rec = report_jnum(d->capacity, "bytes");
    if (source)
        *source = rec > 0 ? report_jstr(d->capacity, "source") : NULL;
    return rec > 0 ? rec : doc_gpu_capacity(d, NULL);
}

double report_headroom(const struct rdoc *d)
{
    double head = report_jnum(d->capacity, "headroom");
    if (isnan(head))
        head = report_jnum(d->space, "headroom");
    return head >= 0 && head < 1 ? head : NAN;
}

int report_best_on_frontier(const struct rdoc *d)
{
    for (size_t i = 0; d->has_best && i < d->nf; i++)
        if (d->f[i].mb == d->best.mb && d->f[i].ga == d->best.ga && d->f[i].ckpt == d->best.ckpt)
            return 1;
    return 0;
}

/* Where the capacity figure came from, in words; NULL for a source that
 * needs none (emulated memory is said after the figure) or is unknown. */
static const char *capacity_source_words(const char *src)
{
    if (!src || !strcmp(src, "emulated"))
        return NULL;
    if (!strcmp(src, "nvml"))
        return "NVML";
    if (!strcmp(src, "cuda"))
        return "CUDA, through the probe";
    if (!strcmp(src, "oom-message"))
        return "from the OOM messages";
    if (!strcmp(src, "trial-memory-limit"))
        return "--trial-memory-limit";
    return src;
}

#define CAP_LIST_MAX 4  /* GPU models, and fits excluded by the headroom, named */

/*
 * The capacity and headroom line: the GPU model(s) and memory (emulated
 * or not), --headroom and which fits it excluded (a fit whose peak is
 * above (1 - headroom) x capacity, the rule the choice applies), and the
 * chosen configuration's peak as a share of the capacity.  Every figure
 * is from the file; what it lacks is said, never guessed.
 */
void report_text_capacity(struct sbuf *b, const struct rdoc *d)
{
    char m1[32], m2[32], m3[32];
    const json_t *gpus = report_jget(d->host, "gpus"), *emu = report_jget(d->host, "emulated_gpu_memory");
    int same;
    const char *src;
    double cap = report_capacity(d, &src);
    doc_gpu_capacity(d, &same);
    size_t n = json_array_size(gpus);
    if (!json_is_array(gpus)) {
        sb_puts(b, "GPUs unknown");
    } else if (!n) {
        sb_puts(b, "no GPU");
    } else {
        /* Models in order of first appearance, with their counts. */
        const char *name[CAP_LIST_MAX];
        size_t count[CAP_LIST_MAX], nn = 0, other = 0;
        for (size_t i = 0; i < n; i++) {
            const char *g = report_jstr(json_array_get(gpus, i), "name");
            size_t k = 0;
            if (!g || !*g)
                g = "unknown GPU";
            while (k < nn && strcmp(name[k], g))
                k++;
            if (k < nn)
                count[k]++;
            else if (nn < CAP_LIST_MAX) {
                name[nn] = g;
                count[nn++] = 1;
            } else {
                other++;
            }
        }
        for (size_t k = 0; k < nn; k++) {
            sb_puts(b, k ? ", " : "");
            if (count[k] > 1)
                sb_printf(b, "%zu \xc3\x97 ", count[k]);
            sb_puts(b, name[k]);
        }
        if (other)
            sb_printf(b, " and %zu more", other);
    }
    if (!isnan(cap))
        sb_printf(b, "%s%s%s", n ? ", " : ": ", report_fmt_bytes(m1, sizeof m1, cap),
                  n < 2 ? "" : same ? " each" : " (the smallest device)");
    else
        sb_puts(b, ": capacity unknown");
    if (!isnan(cap) && capacity_source_words(src))
        sb_printf(b, " (%s)", capacity_source_words(src));
    if (json_is_object(emu)) {
        const char *with = report_jstr(emu, "with");
        double real = report_jnum(emu, "real_total_bytes");
        sb_puts(b, ", emulated");
        if (with && (!strcmp(with, "preload") || !strcmp(with, "probe")))
            sb_printf(b, " with %s", with);
        if (real > 0)
            sb_printf(b, " on %s of real memory", report_fmt_bytes(m2, sizeof m2, real));
    }

    double head = report_headroom(d);
    /* What the run recorded of the headroom rule: the configurations it
     * excluded (-1 unknown), and whether it could check every candidate. */
    long long nexcl = report_jint(d->capacity, "excluded");
    int checked = report_jbool(d->capacity, "headroom_checked");
    if (!isnan(head)) {
        sb_printf(b, "; headroom %.0f%%", head * 100);
        if (head == 0) {
            sb_puts(b, " (none kept free)");
        } else if (isnan(cap)) {
            sb_puts(b, " (what it excluded cannot be told: the capacity is unknown)");
        } else if (checked == 0 && nexcl < 0) {
            /* A capacity the choice did not measure against (the trial
             * memory limit): nothing was excluded by it, so name none. */
            sb_printf(b, ": fits may peak at up to %s; not checked: the choice had no capacity to "
                         "measure against", report_fmt_bytes(m1, sizeof m1, (1 - head) * cap));
        } else {
            double limit = (1 - head) * cap;
            sb_printf(b, ": fits may peak at up to %s", report_fmt_bytes(m1, sizeof m1, limit));
            /* Configurations excluded, once each, in trial order. */
            const struct rtrial *ex[CAP_LIST_MAX];
            size_t nex = 0, more = 0, unmeasured = 0;
            for (size_t i = 0; i < d->nt; i++) {
                const struct rtrial *t = &d->t[i];
                if (t->oc != OC_FIT)
                    continue;
                if (isnan(t->peak)) {
                    unmeasured++;
                    continue;
                }
                if (!(t->peak > limit))
                    continue;
                size_t k = 0;
                while (k < nex && !(ex[k]->mb == t->mb && ex[k]->ga == t->ga && ex[k]->ckpt == t->ckpt))
                    k++;
                if (k < nex)
                    continue;
                if (nex < CAP_LIST_MAX)
                    ex[nex++] = t;
                else
                    more++;
            }
            if (nexcl >= 0) {
                /* The run's own count (the terminal's): configurations,
                 * some judged by the memory line rather than a peak. */
                sb_printf(b, "; it excluded %lld fitting configuration%s", nexcl, nexcl == 1 ? "" : "s");
                if ((long long)nex > nexcl)
                    nex = (size_t)nexcl;
                more = (size_t)nexcl - nex;
                sb_puts(b, nex ? ": " : "");
            } else {
                sb_puts(b, nex ? "; excluded for it: " : "; it excluded no measured fit");
            }
            for (size_t k = 0; k < nex; k++)
                sb_printf(b, "%s%s \xc3\x97 %s%s (peak %s)", k ? ", " : "", report_fmt_int(m1, sizeof m1, ex[k]->mb),
                          report_fmt_int(m2, sizeof m2, ex[k]->ga), ex[k]->ckpt == 1 ? " checkpointing" : "",
                          report_fmt_bytes(m3, sizeof m3, ex[k]->peak));
            if (more && nexcl >= 0)
                sb_printf(b, "%s%zu more", nex ? " and " : "", more);
            else if (more)
                sb_printf(b, " and %zu more trial%s", more, more == 1 ? "" : "s");
            if (checked == 0)
                sb_puts(b, "; not checked for every candidate (some had no memory figure)");
            if (unmeasured && nexcl < 0)
                sb_printf(b, "; %zu fit%s without a measured peak not judged here", unmeasured,
                          unmeasured == 1 ? "" : "s");
        }
    }

    if (d->has_best) {
        if (isnan(d->best.peak))
            sb_puts(b, "; the choice's peak memory was not measured");
        else if (isnan(cap))
            sb_printf(b, "; the choice peaks at %s", report_fmt_bytes(m1, sizeof m1, d->best.peak));
        else
            sb_printf(b, "; the choice peaks at %s, %.1f%% of %s", report_fmt_bytes(m1, sizeof m1, d->best.peak),
                      100 * d->best.peak / cap, report_fmt_bytes(m2, sizeof m2, cap));
    }
}

/* The parts of a breakdown as the results file names them, in words. */
static const char *const mem_part_key[] = {
    "params", "grads", "optimizer", "activations", "cache", "outside",
};
static const char *const mem_part_words[] = {
    "parameters", "gradients", "optimizer state", "activations and temporaries",
    "allocator cache and fragmentation", "outside the allocator",
};

/* A share of the capacity, to a precision that does not round a small
 * part to nothing. */
static void mem_share(struct sbuf *b, double v, double cap)
{
    double pct = 100 * v / cap;
    if (pct > 0 && pct < 0.01)
        sb_puts(b, " (under 0.01%)");
    else
        sb_printf(b, pct < 1 ? " (%.2f%%)" : " (%.1f%%)", pct);
}

/* One entry of "memory_breakdown" (the smallest fit or the choice). */
static void mem_entry_text(struct sbuf *b, const json_t *e, const char *label, double cap)
{
    char x[32], y[32];
    const json_t *parts = report_jget(e, "parts");
    const char *dev = report_jstr(e, "device");
    long long ga = report_jint(e, "grad_accum");
    sb_printf(b, "%s (trial %s, micro-batch %s", label, report_fmt_int(x, sizeof x, report_jint(e, "trial")),
              report_fmt_int(y, sizeof y, report_jint(e, "micro_batch")));
    if (ga > 1)
        sb_printf(b, " \xc3\x97 %lld", ga);
    if (report_jbool(e, "checkpointing") == 1)
        sb_puts(b, ", checkpointing");
    sb_printf(b, ", %s):", dev && !strcmp(dev, "cuda") ? "CUDA" : dev && !strcmp(dev, "cpu") ? "CPU"
                                                                 : "device");
    size_t unknown = 0, n = sizeof mem_part_key / sizeof *mem_part_key;
    for (size_t i = 0; i < n; i++) {
        double v = report_jnum(parts, mem_part_key[i]);
        if (isnan(v) || v < 0) {
            unknown++;
            continue;
        }
        sb_printf(b, "%s %s %s", i ? "," : "", mem_part_words[i], report_fmt_bytes(x, sizeof x, v));
        if (!isnan(cap))
            mem_share(b, v, cap);
    }
    double peak = report_jnum(parts, "peak");
    if (!isnan(peak) && peak >= 0) {
        sb_printf(b, "; peak %s", report_fmt_bytes(x, sizeof x, peak));
        if (!isnan(cap))
            mem_share(b, peak, cap);
    }
    if (unknown) {
        /* Unknown parts are said, never made up. */
        sb_puts(b, "; not measured:");
        for (size_t i = 0, k = 0; i < n; i++) {
            double v = report_jnum(parts, mem_part_key[i]);
            if (isnan(v) || v < 0)
                sb_printf(b, "%s %s", k++ ? "," : "", mem_part_words[i]);
        }
        if (dev && !strcmp(dev, "cpu"))
            sb_puts(b, " (the CPU allocator keeps no counters)");
    }
}

/* One term of the batch-is-not-the-problem sum: the part once
 * allocated, and what of it was when the trial failed. */
static void nofit_term(struct sbuf *b, const char *word, double want, double now)
{
    char x[32];
    sb_printf(b, "%s %s", word, report_fmt_bytes(x, sizeof x, want));
    if (now <= 0 && want > 0)
        sb_puts(b, " (not yet allocated when it failed)");
    else if (now < want)
        sb_printf(b, " (%s allocated when it failed)", report_fmt_bytes(x, sizeof x, now));
}

/* The i-th id of "suggestions", "" when not a string. */
static const char *nofit_id(const json_t *sug, size_t i)
{
    const char *s = json_string_value(json_array_get(sug, i));
    return s ? s : "";
}

/* The words of "suggestions" (results.h results_nofit). */
static const char *nofit_suggestion(const char *id, const char *cls)
{
    if (!strcmp(id, "mixed_precision"))
        return "mixed precision or bf16 weights";
    if (!strcmp(id, "bf16_weights")) /* bf16 autocast was tried and did not do it */
        return "bf16 weights";
    if (!strcmp(id, "8bit_optimizer"))
        return cls && (!strcmp(cls, "AdamW") || !strcmp(cls, "Adam")) ? "an 8-bit Adam (bitsandbytes)"
                                                                      : "an 8-bit optimizer";
    if (!strcmp(id, "sharding"))
        return "sharding the weights, gradients and optimizer state over GPUs (FSDP, DeepSpeed ZeRO)";
    return NULL;
}

int report_nofit_text(const json_t *f, char **what, char **next)
{
    *what = *next = NULL;
    if (!json_is_object(f) || report_jint(f, "micro_batch") < 1 || report_jint(f, "params") < 0)
        return 0;
    struct sbuf b;
    char x[32], y[32];
    long long mb = report_jint(f, "micro_batch");
    const char *cls = report_jstr(f, "optimizer_class");
    double params = report_jnum(f, "params"), grads = report_jnum(f, "grads");
    double optim = report_jnum(f, "optimizer"), optim_now = report_jnum(f, "optimizer_allocated");
    double total = report_jnum(f, "before_activations"), cap = report_jnum(f, "capacity_bytes");
    int exceeds = report_jbool(f, "exceeds_capacity");

    sb_init(&b);
    sb_printf(&b, "micro_batch=%lld does not fit: weights %s + ", mb,
              report_fmt_bytes(x, sizeof x, params));
    nofit_term(&b, "gradients", grads, report_jnum(f, "grads_allocated"));
    if (cls && !isnan(optim)) {
        sb_puts(&b, " + ");
        char word[80];
        snprintf(word, sizeof word, "%s state", cls);
        nofit_term(&b, word, optim, optim_now);
    } else if (cls) { /* not one of torch's own classes: its size is not known */
        sb_printf(&b, " + %s state (its size is not known; %s allocated when it failed)", cls,
                  report_fmt_bytes(x, sizeof x, isnan(optim_now) ? 0 : optim_now));
    }
    sb_printf(&b, " = %s%s", cls && isnan(optim) ? "at least " : "",
              report_fmt_bytes(x, sizeof x, total));
    if (!isnan(cap) && cap > 0)
        sb_printf(&b, " of %s before any activation", report_fmt_bytes(y, sizeof y, cap));
    else
        sb_puts(&b, " before any activation (the capacity is not known)");
    *what = sb_take(&b);

    const json_t *sug = report_jget(f, "suggestions");
    long long least = report_jint(f, "batch_min") > 0 ? report_jint(f, "batch_min") : mb;
    int ckpt = 0;
    sb_init(&b);
    if (exceeds == 1)
        sb_printf(&b, "the batch is not the problem: the weights, gradients and optimizer state "
                      "alone are more than the memory, so no batch size fits (not even "
                      "micro_batch=%lld) and checkpointing cannot help (it saves activations "
                      "only); ", least);
    else
        sb_printf(&b, "the batch is not the problem: micro_batch=%lld is the smallest in --batch; ",
                  least);
    for (size_t i = 0; i < json_array_size(sug); i++)
        ckpt |= !strcmp(nofit_id(sug, i), "checkpointing");
    if (ckpt)
        sb_puts(&b, "try --checkpointing on,off (it saves activations), then ");
    else if (exceeds != 1 && report_jbool(f, "checkpointing_tried") == 1)
        sb_puts(&b, "checkpointing did not make it fit either; ");
    sb_puts(&b, ckpt ? "what autobatch does not try yet: " : "try what autobatch does not try yet: ");
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(sug); i++) {
        const char *w = nofit_suggestion(nofit_id(sug, i), cls);
        if (w)
            n++;
    }
    for (size_t i = 0, k = 0; i < json_array_size(sug); i++) {
        const char *w = nofit_suggestion(nofit_id(sug, i), cls);
        if (!w)
            continue;
        sb_printf(&b, "%s%s", k == 0 ? "" : k + 1 == n ? ", or " : ", ", w);
        k++;
    }
    if (!n)
        sb_puts(&b, "a smaller model");
    *next = sb_take(&b);
    if (!*what || !*next) {
        free(*what);
        free(*next);
        *what = *next = NULL;
        return 0;
    }
    return 1;
}

int report_text_memory(struct sbuf *b, const struct rdoc *d)
{
    const json_t *mb = report_jget(d->root, "memory_breakdown");
    const json_t *small = report_jget(mb, "smallest"), *choice = report_jget(mb, "choice");
    int has_s = json_is_object(small), has_c = json_is_object(choice);
    if (!has_s && !has_c) { /* nothing fitted: where the smallest size's memory went */
        char *what, *next;
        if (!report_nofit_text(report_jget(mb, "failure"), &what, &next))
            return 0;
        sb_printf(b, "%s; %s", what, next);
        free(what);
        free(next);
        return 1;
    }
    char x[32];
    double cap = report_jnum(mb, "capacity_bytes");
    if (isnan(cap) || cap <= 0)
        cap = report_capacity(d, NULL);
    if (!isnan(cap) && cap <= 0)
        cap = NAN;
    long long ts = has_s ? report_jint(small, "trial") : -1, tc = has_c ? report_jint(choice, "trial") : -1;
    if (has_c)
        mem_entry_text(b, choice, ts == tc ? "the choice, also the smallest fit" : "the choice", cap);
    if (has_s && ts != tc) {
        sb_puts(b, has_c ? "; " : "");
        mem_entry_text(b, small, "the smallest fit", cap);
    }
    if (!isnan(cap))
        sb_printf(b, "; shares of %s", report_fmt_bytes(x, sizeof x, cap));
    else
        sb_puts(b, "; no shares: the capacity is unknown");
    return 1;
}

void report_text_space(struct sbuf *b, const struct rdoc *d)
{
    const json_t *batch = report_jget(d->space, "batch");
    char x[32], y[32], z[32];
    if (!d->space) {
        sb_puts(b, "unknown");
        return;
    }
    sb_printf(b, "micro-batch %s to %s (step %s)", report_fmt_int(x, sizeof x, report_jint(batch, "min")),
              report_fmt_int(y, sizeof y, report_jint(batch, "max")), report_fmt_int(z, sizeof z, report_jint(batch, "step")));
    const json_t *ga = report_jget(d->space, "grad_accum"), *ck = report_jget(d->space, "checkpointing");
    if (json_array_size(ga)) {
        sb_puts(b, "; grad-accum ");
        for (size_t i = 0; i < json_array_size(ga); i++)
            sb_printf(b, "%s%s", i ? ", " : "",
                      report_fmt_int(x, sizeof x, json_is_integer(json_array_get(ga, i))
                                               ? (long long)json_integer_value(json_array_get(ga, i))
                                               : -1));
    }
    if (json_array_size(ck)) {
        sb_puts(b, "; checkpointing ");
        for (size_t i = 0; i < json_array_size(ck); i++) {
            const json_t *v = json_array_get(ck, i);
            sb_printf(b, "%s%s", i ? ", " : "", report_ckpt_word(json_is_boolean(v) ? json_is_true(v) : -1));
        }
    }
    long long gb = report_jint(d->space, "global_batch"), ws = report_jint(d->space, "world_size");
    if (gb >= 0)
        sb_printf(b, "; global batch %lld", gb);
    if (ws >= 0)
        sb_printf(b, "; world size %lld", ws);
    double head = report_jnum(d->space, "headroom");
    if (head > 0)
        sb_printf(b, "; headroom %.0f%%", head * 100);
    sb_printf(b, "; unit %s", d->unit);
}

void report_text_trials(struct sbuf *b, const struct rdoc *d)
{
    char w[32];
    sb_printf(b, "%zu", d->nt);
    if (!isnan(d->wall))
        sb_printf(b, " in %s", report_fmt_secs(w, sizeof w, d->wall));
    int first = 1;
    for (int i = 0; i < OC_N; i++) {
        if (!d->count[i])
            continue;
        sb_printf(b, "%s%zu %s", first ? ": " : ", ", d->count[i], report_oc_name[i]);
        first = 0;
    }
}

void report_text_exit(struct sbuf *b, const struct rdoc *d)
{
    const char *m = exit_meaning(d->exit);
    if (d->exit < 0)
        sb_puts(b, "unknown (the run did not finish writing its summary)");
    else if (m)
        sb_printf(b, "%lld (%s)", d->exit, m);
    else
        sb_printf(b, "%lld", d->exit);
}

void report_text_config(struct sbuf *b, const struct rpoint *p)
{
    char x[32], y[32];
    sb_printf(b, "micro-batch %s \xc3\x97 grad-accum %s, checkpointing %s",
              report_fmt_int(x, sizeof x, p->mb), report_fmt_int(y, sizeof y, p->ga), report_ckpt_word(p->ckpt));
}

void report_text_warm_start(struct sbuf *b, const struct rdoc *d)
{
    int used = d->warm ? report_jbool(d->warm, "used") : report_jbool(d->summary, "warm_start");
    int cache = report_jbool(d->settings, "cache");
    if (used < 0) {
        sb_puts(b, "unknown (not recorded)");
        return;
    }
    if (!used) {
        sb_puts(b, cache == 0   ? "not used (--no-cache)"
                   : cache == 1 ? "not used: nothing cached for this command, config, GPUs and batch range"
                                : "not used");
        return;
    }
    const char *key = report_jstr(d->warm, "cache_key"), *file = report_jstr(d->warm, "cache_file");
    long long cells = report_jint(d->warm, "cells_seeded"), saved = report_jint(d->warm, "trials_saved");
    sb_puts(b, "used: the search started from the boundaries cached by an earlier run");
    if (cells > 0)
        sb_printf(b, " (%lld cell%s)", cells, cells == 1 ? "" : "s");
    if (key) {
        sb_puts(b, ", cache entry ");
        sb_puts(b, key);
    }
    if (file) {
        sb_puts(b, key ? " (" : ", cache file ");
        sb_puts(b, file);
        sb_puts(b, key ? ")" : "");
    }
    if (saved >= 0)
        sb_printf(b, "; it saved %lld trial%s", saved, saved == 1 ? "" : "s");
    else if (d->warm)
        sb_puts(b, "; the trials it saved are not known");
}

/* A duration setting: "none" when null or 0. */
static void text_secs_setting(struct sbuf *b, const char *label, const json_t *o, const char *k)
{
    char x[32];
    double v = report_jnum(o, k);
    sb_printf(b, "%s %s", label, v > 0 ? report_fmt_secs(x, sizeof x, v) : "none");
}

void report_text_settings(struct sbuf *b, const struct rdoc *d)
{
    const json_t *st = d->settings, *confirm = report_jget(st, "confirm");
    char x[32], y[32];
    if (!st) {
        sb_puts(b, "not recorded (a results file from before they were kept)");
        return;
    }
    sb_printf(b, "%s measured steps after %s warm-up", report_fmt_int(x, sizeof x, report_jint(st, "steps")),
              report_fmt_int(y, sizeof y, report_jint(st, "warmup")));
    if (json_is_object(confirm)) {
        long long cs = report_jint(confirm, "steps");
        double ct = report_jnum(confirm, "time_s");
        sb_puts(b, "; confirm the choice: ");
        if (cs > 0)
            sb_printf(b, "%lld steps", cs);
        if (ct > 0)
            sb_printf(b, "%s%s", cs > 0 ? " or " : "", report_fmt_secs(x, sizeof x, ct));
        if (!(cs > 0) && !(ct > 0))
            sb_puts(b, "until the trainer stops");
    } else if (json_is_false(confirm)) {
        sb_puts(b, "; no confirmation run (--no-confirm)");
    }
    const char *wc = report_jstr(st, "worst_case");
    if (wc) {
        sb_puts(b, "; worst case ");
        sb_puts(b, wc);
        if (strcmp(wc, "off") && report_jnum(st, "worst_case_scan_s") > 0)
            sb_printf(b, " (scan up to %s)", report_fmt_secs(x, sizeof x, report_jnum(st, "worst_case_scan_s")));
    }
    static const char *const flags[][2] = { { "replay", "replay" }, { "probe", "probe" }, { "cache", "cache" } };
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        int v = report_jbool(st, flags[i][0]);
        if (v >= 0)
            sb_printf(b, "; %s %s", flags[i][1], v ? "on" : "off");
    }
    sb_puts(b, "; ");
    text_secs_setting(b, "trial timeout", st, "trial_timeout_s");
    sb_puts(b, ", ");
    text_secs_setting(b, "hang timeout", st, "hang_timeout_s");
    sb_puts(b, ", ");
    text_secs_setting(b, "kill grace", st, "kill_grace_s");
    sb_puts(b, "; ");
    text_secs_setting(b, "budget", st, "budget_s");
    double lim = report_jnum(st, "trial_memory_limit_bytes");
    sb_printf(b, "; trial memory limit %s", lim > 0 ? report_fmt_bytes(x, sizeof x, lim) : "none");
    const char *gpus = report_jstr(st, "gpus");
    if (gpus) {
        sb_puts(b, "; GPUs ");
        sb_puts(b, gpus);
        sb_printf(b, ", %s per trial", report_fmt_int(x, sizeof x, report_jint(st, "gpus_per_trial")));
    }
}

/* The trial that stopped the search, when one did. */
const struct rtrial *report_failed_trial(const struct rdoc *d)
{
    for (size_t i = 0; i < d->nt; i++) {
        enum oc o = d->t[i].oc;
        if (o == OC_CRASH || o == OC_SPAWN || o == OC_NO_STEPS || o == OC_MISMATCH ||
            o == OC_UNKNOWN)
            return &d->t[i];
    }
    if (d->exit == 4)
        for (size_t i = 0; i < d->nt; i++)
            if (d->t[i].oc == OC_HANG || d->t[i].oc == OC_TIMEOUT)
                return &d->t[i];
    return NULL;
}

/*
 * "exit code 1", "signal 9", or nothing.  Only for outcomes where the
 * command ended by itself: a fit, hang, timeout or interrupted trial's
 * signal is the one autobatch sent to end it.
 */
void report_text_status(struct sbuf *b, const struct rtrial *t)
{
    if (t->oc != OC_CRASH && t->oc != OC_SPAWN && t->oc != OC_UNKNOWN)
        return;
    if (t->exit_code >= 0)
        sb_printf(b, "exit code %lld", t->exit_code);
    else if (t->sig > 0)
        sb_printf(b, "signal %lld", t->sig);
}

int report_text_notes(struct sbuf *b, const struct rtrial *t, const char *chosen)
{
    size_t mark = b->len;
    if (t->chosen)
        sb_puts(b, chosen);
    if (t->retest)
        sb_puts(b, b->len > mark ? "; retest" : "retest");
    if (t->oc != OC_FIT && t->oc != OC_OOM) {
        struct sbuf st = SBUF_INIT;
        report_text_status(&st, t);
        if (st.len)
            sb_printf(b, "%s%s", b->len > mark ? "; " : "", st.p);
        sb_release(&st);
    }
    return b->len > mark;
}

/* The one-line headline: what was chosen, or why nothing was. */
void report_text_headline(struct sbuf *b, const struct rdoc *d, int *good)
{
    char r[32], m[32];
    if (d->has_best) {
        *good = 1;
        report_text_config(b, &d->best);
        sb_printf(b, ": %s %s/s, peak memory ", report_fmt_rate(r, sizeof r, d->best.sps), d->unit);
        sb_puts(b, isnan(d->best.peak) ? "not measured" : report_fmt_bytes(m, sizeof m, d->best.peak));
        if (d->interrupted)
            sb_puts(b, " (interrupted: the best seen so far)");
        return;
    }
    *good = 0;
    const char *why = exit_meaning(d->exit);
    sb_puts(b, "no configuration was chosen");
    if (d->exit > 0 && why)
        sb_printf(b, ": %s", why);
    else if (d->interrupted)
        sb_puts(b, ": interrupted");
    else if (!d->nt)
        sb_puts(b, ": no trial ran");
}

/* Whether report_text_headline() says the run was interrupted. */
int report_headline_interrupted(const struct rdoc *d)
{
    if (d->has_best)
        return d->interrupted;
    if (d->exit > 0 && exit_meaning(d->exit))
        return d->exit == 130;
    return d->interrupted;
}

int report_cell_pruned(const struct rcell *c)
{
    return (c->bounded_by && !strcmp(c->bounded_by, "pruned")) ||
           (c->skipped && !strncmp(c->skipped, "pruned", 6));
}

static const char *bounded_note(const struct rcell *c)
{
    if (report_cell_pruned(c))
        return PRUNED_NOTE;
    if (c->bounded_by && !strcmp(c->bounded_by, "batch.max"))
        return "the top of the range fitted";
    return c->bounded_by;
}

int report_cell_notes(struct sbuf *b, const struct rdoc *d, const struct rcell *c, const char *chosen,
               void (*esc)(struct sbuf *, const char *))
{
    /* A pruned cell's own reason ("pruned: by the step-time line, ...")
     * says the same as PRUNED_NOTE at more length: one of them, not both. */
    const char *skipped = c->skipped && !strncmp(c->skipped, "pruned: ", 8) ? c->skipped + 8
                        : c->skipped && !strcmp(c->skipped, "pruned") ? NULL : c->skipped;
    const char *notes[4] = { bounded_note(c), c->inferred ? "inferred from other cells" : NULL, skipped,
                             chosen && d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt
                                 ? chosen : NULL };
    int first = 1;
    for (int k = 0; k < 4; k++) {
        if (!notes[k])
            continue;
        if (!first)
            sb_puts(b, "; ");
        esc(b, notes[k]);
        first = 0;
    }
    return !first;
}

/* ------------------------------------------------------------------ */
/* Escaping.                                                           */

/* Length of at most max bytes of s[0..n) that does not split a UTF-8 sequence. */
size_t report_utf8_cut(const char *s, size_t n, size_t max)
{
    if (n <= max)
        return n;
    size_t k = max;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
        k--;
    return k;
}

/*
 * XML and HTML text (attr: inside a double-quoted attribute).  XML 1.0
 * cannot carry most control characters even as references, so they show
 * as "\xNN"; malformed UTF-8 and U+FFFE/U+FFFF become U+FFFD.
 */
void report_xml_esc(struct sbuf *b, const char *s, size_t n, int attr)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = u[i];
        if (c < 0x80) {
            switch (c) {
            case '&': sb_puts(b, "&amp;"); break;
            case '<': sb_puts(b, "&lt;"); break;
            case '>': sb_puts(b, "&gt;"); break;
            case '"': sb_puts(b, "&quot;"); break;
            case '\'': sb_puts(b, "&#39;"); break;
            case '\t': sb_puts(b, attr ? "&#9;" : "\t"); break;
            case '\n': sb_puts(b, attr ? "&#10;" : "\n"); break;
            case '\r': sb_puts(b, "&#13;"); break;
            default:
                if (c < 0x20 || c == 0x7f)
                    sb_printf(b, "\\x%02x", c);
                else
                    sb_put(b, (const char *)&u[i], 1);
            }
            i++;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        int whole = len && c < 0xF5 && i + len <= n, ok;
        for (size_t k = 1; whole && k < len; k++)
            whole = (u[i + k] & 0xC0) == 0x80;
        if (!whole) {
            /* a stray byte: replace it alone and resynchronise on the next */
            sb_puts(b, "\xef\xbf\xbd");
            i++;
            continue;
        }
        if (len == 3) {
            unsigned cp = ((c & 0x0Fu) << 12) | ((u[i + 1] & 0x3Fu) << 6) | (u[i + 2] & 0x3Fu);
            ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) && cp != 0xFFFE && cp != 0xFFFF;
        } else if (len == 4) {
            unsigned cp = ((c & 0x07u) << 18) | ((u[i + 1] & 0x3Fu) << 12);
            ok = cp >= 0x10000 && cp <= 0x10FFFF;
        } else {
            ok = 1;
        }
        sb_put(b, ok ? (const char *)&u[i] : "\xef\xbf\xbd", ok ? len : 3);
        i += len;
    }
}

void report_xml_str(struct sbuf *b, const char *s, int attr)
{
    report_xml_esc(b, s, strlen(s), attr);
}

/* ------------------------------------------------------------------ */
/* Handing a rendering over.                                           */

int report_oom(char *err, size_t errlen)
{
    snprintf(err, errlen, "cannot render the report: out of memory");
    return -1;
}

int report_finish(struct sbuf *b, char **out, size_t *len, char *err, size_t errlen)
{
    size_t n = b->len;
    char *s = sb_take(b);
    if (!s)
        return report_oom(err, errlen);
    *out = s;
    if (len)
        *len = n;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The public calls.                                                   */

int report_format_parse(const char *s, enum report_format *f)
{
    if (!s)
        return -1;
    if (!strcmp(s, "markdown") || !strcmp(s, "md"))
        *f = REPORT_MARKDOWN;
    else if (!strcmp(s, "html"))
        *f = REPORT_HTML;
    else if (!strcmp(s, "junit"))
        *f = REPORT_JUNIT;
    else
        return -1;
    return 0;
}

const char *report_format_name(enum report_format f)
{
    switch (f) {
    case REPORT_MARKDOWN: return "markdown";
    case REPORT_HTML: return "html";
    case REPORT_JUNIT: return "junit";
    }
    return "unknown";
}

int report_render(const json_t *results, enum report_format f, char **out, size_t *len, char *err,
                  size_t errlen)
{
    struct rdoc d;
    *out = NULL;
    if (rdoc_load(&d, results, err, errlen) < 0)
        return -1;
    int rc;
    switch (f) {
    case REPORT_MARKDOWN: rc = report_render_markdown(&d, SIZE_MAX, out, len, err, errlen); break;
    case REPORT_HTML: rc = report_render_html(&d, out, len, err, errlen); break;
    case REPORT_JUNIT: rc = report_render_junit(&d, out, len, err, errlen); break;
    default:
        snprintf(err, errlen, "unknown report format %d", (int)f);
        rc = -1;
    }
    rdoc_release(&d);
    return rc;
}

int report_summary_markdown(const json_t *results, size_t max_bytes, char **out, size_t *len, char *err,
                            size_t errlen)
{
    struct rdoc d;
    *out = NULL;
    if (rdoc_load(&d, results, err, errlen) < 0)
        return -1;
    int rc = report_render_markdown(&d, max_bytes, out, len, err, errlen);
    rdoc_release(&d);
    return rc;
}
