/* SPDX-License-Identifier: MIT */
/*
 * report: Markdown, JUnit and HTML renderings of a results document (see
 * report.h for what each holds).
 *
 * The document is first read into plain structs (struct rdoc), with every
 * missing or null value turned into a marker (-1, NAN, NULL), so that the
 * renderers below never have to ask jansson whether a key exists.  The
 * Markdown renderer builds the report as pieces (fixed text, and table
 * rows tagged with their table) so that the byte-budgeted summary can drop
 * rows without rendering twice.
 */
#include "output/report.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Reading the document: every absent or null value becomes a marker.   */

enum oc {
    OC_FIT, OC_OOM, OC_CRASH, OC_TIMEOUT, OC_HANG, OC_INTERRUPTED, OC_SPAWN, OC_NO_STEPS,
    OC_MISMATCH, OC_UNKNOWN, OC_N
};

static const char *const oc_name[OC_N] = {
    "fit", "oom", "crash", "timeout", "hang", "interrupted", "spawn_failed", "no_steps",
    "knob_mismatch", "unknown",
};

/* Outcome colours, shared by the timeline, its legend and the tables. */
static const char *const oc_colour[OC_N] = {
    "#2e8b3e", "#d1402b", "#7b3f00", "#8a55c9", "#c2489b", "#8c8c8c", "#222222", "#b8860b",
    "#1f5f9f", "#222222",
};

struct rtrial {
    long long id, mb, ga, steps;  /* -1: unknown */
    int ckpt;                     /* -1: unknown */
    enum oc oc;
    const char *outcome;          /* the file's word ("unknown" when absent) */
    double sps, peak, wall;       /* NAN: unknown; a peak <= 0 is unknown too */
    long long exit_code, sig;     /* -1: null */
    const char *evidence;         /* NULL: null */
    size_t evlen;
    const char *signature;
    int retest;
    int chosen;                   /* the first trial that matches "best" */
};

struct rcell {
    long long ga, mb, fail, tried, trials; /* -1: unknown */
    int ckpt;
    int inferred;
    const char *bounded_by, *skipped;
};

struct rpoint {
    long long mb, ga;
    int ckpt;
    double sps, peak;
};

struct rcontra {
    long long ga, mb, larger;
    int ckpt;
    const char *retest;
};

struct rdoc {
    struct rtrial *t;
    size_t nt;
    struct rcell *c;
    size_t nc;
    struct rpoint *f;
    size_t nf;
    struct rcontra *x;
    size_t nx;
    struct rpoint best;
    int has_best;
    const json_t *root, *command, *host, *space, *summary, *baseline;
    const json_t *run_with;       /* "run_with" when it is an object, else NULL */
    const char *unit;             /* "samples" unless the file says */
    double wall;                  /* summary.wall_s, else the trials' sum, else NAN */
    long long exit;               /* -1: unknown */
    int interrupted;
    const char *preset, *config, *started_at;
    size_t count[OC_N];
    int mem_axis;                 /* every fitting trial has a peak memory figure */
};

static const json_t *jget(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static long long jint(const json_t *o, const char *k)
{
    const json_t *v = jget(o, k);
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        return (long long)llround(json_real_value(v));
    return -1;
}

static double jnum(const json_t *o, const char *k)
{
    const json_t *v = jget(o, k);
    if (json_is_number(v) && isfinite(json_number_value(v)))
        return json_number_value(v);
    return NAN;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(jget(o, k));
}

static int jbool(const json_t *o, const char *k)
{
    const json_t *v = jget(o, k);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

static double jpeak(const json_t *o)
{
    double v = jnum(o, "peak_mem_bytes");
    return v > 0 ? v : NAN;
}

static enum oc oc_parse(const char *s)
{
    if (!s)
        return OC_UNKNOWN;
    for (int i = 0; i < OC_UNKNOWN; i++)
        if (!strcmp(s, oc_name[i]))
            return (enum oc)i;
    return OC_UNKNOWN;
}

static struct rpoint point_read(const json_t *o)
{
    return (struct rpoint){ .mb = jint(o, "micro_batch"), .ga = jint(o, "grad_accum"),
                            .ckpt = jbool(o, "checkpointing"), .sps = jnum(o, "samples_per_s"),
                            .peak = jpeak(o) };
}

static void rdoc_release(struct rdoc *d)
{
    free(d->t);
    free(d->c);
    free(d->f);
    free(d->x);
    memset(d, 0, sizeof *d);
}

static int rdoc_load(struct rdoc *d, const json_t *root, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    if (!json_is_object(root)) {
        snprintf(err, errlen, "the results are not a json object");
        return -1;
    }
    const char *schema = jstr(root, "schema");
    if (schema && strncmp(schema, "autobatch.results/", 18)) {
        snprintf(err, errlen, "not an autobatch results file (schema '%.60s')", schema);
        return -1;
    }
    d->root = root;
    d->command = jget(root, "command");
    d->host = jget(root, "host");
    d->space = jget(root, "space");
    d->summary = jget(root, "summary");
    d->baseline = json_is_object(jget(root, "baseline")) ? jget(root, "baseline") : NULL;
    d->run_with = json_is_object(jget(root, "run_with")) ? jget(root, "run_with") : NULL;
    d->unit = jstr(d->space, "unit");
    if (!d->unit || !*d->unit)
        d->unit = "samples";
    /* The unit goes into every format unquoted ("frames/s", table heads,
     * chart labels): only a plain word is taken from the file; anything
     * else (markup, table pipes, newlines) becomes a neutral word. */
    if (strlen(d->unit) > 32 || strspn(d->unit, "abcdefghijklmnopqrstuvwxyz"
                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                                    strlen(d->unit))
        d->unit = "units";
    d->started_at = jstr(root, "started_at");
    d->preset = jstr(root, "preset");
    if (!d->preset)
        d->preset = jstr(d->summary, "preset");
    d->config = jstr(root, "config");
    d->exit = jint(d->summary, "exit");
    d->interrupted = jbool(d->summary, "interrupted") == 1;

    const json_t *trials = jget(root, "trials"), *cells = jget(root, "max_fit"),
                 *front = jget(root, "frontier"), *contra = jget(root, "contradictions");
    size_t nt = json_array_size(trials), nc = json_array_size(cells), nf = json_array_size(front),
           nx = json_array_size(contra);
    d->t = calloc(nt ? nt : 1, sizeof *d->t);
    d->c = calloc(nc ? nc : 1, sizeof *d->c);
    d->f = calloc(nf ? nf : 1, sizeof *d->f);
    d->x = calloc(nx ? nx : 1, sizeof *d->x);
    if (!d->t || !d->c || !d->f || !d->x) {
        rdoc_release(d);
        snprintf(err, errlen, "cannot render the report: out of memory");
        return -1;
    }

    const json_t *best = jget(root, "best");
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
        t->id = jint(o, "id");
        t->mb = jint(o, "micro_batch");
        t->ga = jint(o, "grad_accum");
        t->steps = jint(o, "steps_measured");
        t->ckpt = jbool(o, "checkpointing");
        t->outcome = jstr(o, "outcome") ? jstr(o, "outcome") : "unknown";
        t->oc = oc_parse(jstr(o, "outcome"));
        t->sps = jnum(o, "samples_per_s");
        t->peak = jpeak(o);
        t->wall = jnum(o, "wall_s");
        if (t->wall < 0)
            t->wall = NAN;
        t->exit_code = jint(o, "exit_code");
        t->sig = jint(o, "signal");
        t->evidence = jstr(o, "evidence");
        t->evlen = t->evidence ? json_string_length(jget(o, "evidence")) : 0;
        t->signature = jstr(o, "signature");
        t->retest = jbool(o, "retest") == 1;
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
    d->wall = jnum(d->summary, "wall_s");
    if (isnan(d->wall) && any_wall)
        d->wall = wall_sum;

    for (size_t i = 0; i < nc; i++) {
        const json_t *o = json_array_get(cells, i);
        if (!json_is_object(o))
            continue;
        d->c[d->nc++] = (struct rcell){
            .ga = jint(o, "grad_accum"), .ckpt = jbool(o, "checkpointing"),
            .mb = jint(o, "micro_batch"), .fail = jint(o, "smallest_fail"),
            .tried = jint(o, "largest_tried_fit"), .trials = jint(o, "trials"),
            .inferred = jbool(o, "inferred") == 1, .bounded_by = jstr(o, "bounded_by"),
            .skipped = jstr(o, "skipped"),
        };
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
            .ga = jint(o, "grad_accum"), .ckpt = jbool(o, "checkpointing"),
            .mb = jint(o, "micro_batch"), .larger = jint(o, "larger_fit"),
            .retest = jstr(o, "retest"),
        };
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Plain-text facts, shared by every format (escaped by the caller).    */

#define DASH "\xe2\x80\x94" /* an em dash: an unknown value */

static const char *fmt_int(char *buf, size_t n, long long v)
{
    if (v < 0)
        return DASH;
    snprintf(buf, n, "%lld", v);
    return buf;
}

static const char *fmt_rate(char *buf, size_t n, double v)
{
    if (isnan(v))
        return DASH;
    snprintf(buf, n, "%.1f", v);
    return buf;
}

static const char *fmt_bytes(char *buf, size_t n, double v)
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

static const char *fmt_secs(char *buf, size_t n, double v)
{
    if (isnan(v))
        return DASH;
    snprintf(buf, n, v < 10 ? "%.2f s" : v < 100 ? "%.1f s" : "%.0f s", v);
    return buf;
}

static const char *ckpt_word(int c)
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
static void text_command(struct sbuf *b, const json_t *cmd)
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
static int text_run_with(struct sbuf *b, const struct rdoc *d)
{
    const json_t *cmd = jget(d->run_with, "command"), *env = jget(d->run_with, "env");
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
    text_command(b, cmd);
    return 1;
}

static void text_host(struct sbuf *b, const struct rdoc *d)
{
    const char *hostname = jstr(d->host, "hostname");
    const json_t *gpus = jget(d->host, "gpus");
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
    const char *name = jstr(g, "name");
    char mem[32];
    double total = jnum(g, "memory_total_bytes");
    sb_puts(b, ", ");
    if (n > 1)
        sb_printf(b, "%zu \xc3\x97 ", n);
    sb_puts(b, name && *name ? name : "unknown GPU");
    if (total > 0)
        sb_printf(b, " (%s)", fmt_bytes(mem, sizeof mem, total));
}

/*
 * The smallest device memory the file records (emulated when it was), or
 * NAN; *same (when not NULL): every device recorded has that much.
 */
static double doc_capacity(const struct rdoc *d, int *same)
{
    const json_t *gpus = jget(d->host, "gpus");
    double cap = NAN, top = NAN;
    for (size_t i = 0; i < json_array_size(gpus); i++) {
        double t = jnum(json_array_get(gpus, i), "memory_total_bytes");
        if (t > 0 && !(t >= cap))
            cap = t;
        if (t > 0 && !(t <= top))
            top = t;
    }
    if (same)
        *same = cap == top;
    double emu = jnum(jget(d->host, "emulated_gpu_memory"), "bytes");
    if (emu > 0 && !(emu >= cap))
        cap = emu;
    return cap;
}

#define CAP_LIST_MAX 4  /* GPU models, and fits excluded by the headroom, named */

/*
 * The capacity and headroom line: the GPU model(s) and memory (emulated
 * or not), --headroom and which fits it excluded (a fit whose peak is
 * above (1 - headroom) x capacity, the rule the choice applies), and the
 * chosen configuration's peak as a share of the capacity.  Every figure
 * is from the file; what it lacks is said, never guessed.
 */
static void text_capacity(struct sbuf *b, const struct rdoc *d)
{
    char m1[32], m2[32], m3[32];
    const json_t *gpus = jget(d->host, "gpus"), *emu = jget(d->host, "emulated_gpu_memory");
    int same;
    double cap = doc_capacity(d, &same);
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
            const char *g = jstr(json_array_get(gpus, i), "name");
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
        sb_printf(b, "%s%s%s", n ? ", " : ": ", fmt_bytes(m1, sizeof m1, cap),
                  n < 2 ? "" : same ? " each" : " (the smallest device)");
    else
        sb_puts(b, ": capacity unknown");
    if (json_is_object(emu)) {
        const char *with = jstr(emu, "with");
        double real = jnum(emu, "real_total_bytes");
        sb_puts(b, ", emulated");
        if (with && (!strcmp(with, "preload") || !strcmp(with, "probe")))
            sb_printf(b, " with %s", with);
        if (real > 0)
            sb_printf(b, " on %s of real memory", fmt_bytes(m2, sizeof m2, real));
    }

    double head = jnum(d->space, "headroom");
    if (head >= 0 && head < 1) {
        sb_printf(b, "; headroom %.0f%%", head * 100);
        if (head == 0) {
            sb_puts(b, " (none kept free)");
        } else if (isnan(cap)) {
            sb_puts(b, " (what it excluded cannot be told: the capacity is unknown)");
        } else {
            double limit = (1 - head) * cap;
            sb_printf(b, ": fits may peak at up to %s", fmt_bytes(m1, sizeof m1, limit));
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
            sb_puts(b, nex ? "; excluded for it: " : "; it excluded no measured fit");
            for (size_t k = 0; k < nex; k++)
                sb_printf(b, "%s%s \xc3\x97 %s%s (peak %s)", k ? ", " : "", fmt_int(m1, sizeof m1, ex[k]->mb),
                          fmt_int(m2, sizeof m2, ex[k]->ga), ex[k]->ckpt == 1 ? " checkpointing" : "",
                          fmt_bytes(m3, sizeof m3, ex[k]->peak));
            if (more)
                sb_printf(b, " and %zu more trial%s", more, more == 1 ? "" : "s");
            if (unmeasured)
                sb_printf(b, "; %zu fit%s without a measured peak not judged here", unmeasured,
                          unmeasured == 1 ? "" : "s");
        }
    }

    if (d->has_best) {
        if (isnan(d->best.peak))
            sb_puts(b, "; the choice's peak memory was not measured");
        else if (isnan(cap))
            sb_printf(b, "; the choice peaks at %s", fmt_bytes(m1, sizeof m1, d->best.peak));
        else
            sb_printf(b, "; the choice peaks at %s, %.1f%% of %s", fmt_bytes(m1, sizeof m1, d->best.peak),
                      100 * d->best.peak / cap, fmt_bytes(m2, sizeof m2, cap));
    }
}

static void text_space(struct sbuf *b, const struct rdoc *d)
{
    const json_t *batch = jget(d->space, "batch");
    char x[32], y[32], z[32];
    if (!d->space) {
        sb_puts(b, "unknown");
        return;
    }
    sb_printf(b, "micro-batch %s to %s (step %s)", fmt_int(x, sizeof x, jint(batch, "min")),
              fmt_int(y, sizeof y, jint(batch, "max")), fmt_int(z, sizeof z, jint(batch, "step")));
    const json_t *ga = jget(d->space, "grad_accum"), *ck = jget(d->space, "checkpointing");
    if (json_array_size(ga)) {
        sb_puts(b, "; grad-accum ");
        for (size_t i = 0; i < json_array_size(ga); i++)
            sb_printf(b, "%s%s", i ? ", " : "",
                      fmt_int(x, sizeof x, json_is_integer(json_array_get(ga, i))
                                               ? (long long)json_integer_value(json_array_get(ga, i))
                                               : -1));
    }
    if (json_array_size(ck)) {
        sb_puts(b, "; checkpointing ");
        for (size_t i = 0; i < json_array_size(ck); i++) {
            const json_t *v = json_array_get(ck, i);
            sb_printf(b, "%s%s", i ? ", " : "", ckpt_word(json_is_boolean(v) ? json_is_true(v) : -1));
        }
    }
    long long gb = jint(d->space, "global_batch"), ws = jint(d->space, "world_size");
    if (gb >= 0)
        sb_printf(b, "; global batch %lld", gb);
    if (ws >= 0)
        sb_printf(b, "; world size %lld", ws);
    double head = jnum(d->space, "headroom");
    if (head > 0)
        sb_printf(b, "; headroom %.0f%%", head * 100);
    sb_printf(b, "; unit %s", d->unit);
}

static void text_trials(struct sbuf *b, const struct rdoc *d)
{
    char w[32];
    sb_printf(b, "%zu", d->nt);
    if (!isnan(d->wall))
        sb_printf(b, " in %s", fmt_secs(w, sizeof w, d->wall));
    int first = 1;
    for (int i = 0; i < OC_N; i++) {
        if (!d->count[i])
            continue;
        sb_printf(b, "%s%zu %s", first ? ": " : ", ", d->count[i], oc_name[i]);
        first = 0;
    }
}

static void text_exit(struct sbuf *b, const struct rdoc *d)
{
    const char *m = exit_meaning(d->exit);
    if (d->exit < 0)
        sb_puts(b, "unknown (the run did not finish writing its summary)");
    else if (m)
        sb_printf(b, "%lld (%s)", d->exit, m);
    else
        sb_printf(b, "%lld", d->exit);
}

static void text_config(struct sbuf *b, const struct rpoint *p)
{
    char x[32], y[32];
    sb_printf(b, "micro-batch %s \xc3\x97 grad-accum %s, checkpointing %s",
              fmt_int(x, sizeof x, p->mb), fmt_int(y, sizeof y, p->ga), ckpt_word(p->ckpt));
}

/* The trial that stopped the search, when one did. */
static const struct rtrial *failed_trial(const struct rdoc *d)
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
static void text_status(struct sbuf *b, const struct rtrial *t)
{
    if (t->oc != OC_CRASH && t->oc != OC_SPAWN && t->oc != OC_UNKNOWN)
        return;
    if (t->exit_code >= 0)
        sb_printf(b, "exit code %lld", t->exit_code);
    else if (t->sig > 0)
        sb_printf(b, "signal %lld", t->sig);
}

/* The one-line headline: what was chosen, or why nothing was. */
static void text_headline(struct sbuf *b, const struct rdoc *d, int *good)
{
    char r[32], m[32];
    if (d->has_best) {
        *good = 1;
        text_config(b, &d->best);
        sb_printf(b, ": %s %s/s, peak memory ", fmt_rate(r, sizeof r, d->best.sps), d->unit);
        sb_puts(b, isnan(d->best.peak) ? "not measured" : fmt_bytes(m, sizeof m, d->best.peak));
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

/* Whether text_headline() says the run was interrupted. */
static int headline_interrupted(const struct rdoc *d)
{
    if (d->has_best)
        return d->interrupted;
    if (d->exit > 0 && exit_meaning(d->exit))
        return d->exit == 130;
    return d->interrupted;
}

static const char *bounded_note(const struct rcell *c)
{
    if (c->bounded_by && !strcmp(c->bounded_by, "batch.max"))
        return "the top of the range fitted";
    if (c->bounded_by && !strcmp(c->bounded_by, "pruned"))
        return "its search was pruned: it could not beat the fastest point";
    return c->bounded_by;
}

/* ------------------------------------------------------------------ */
/* Escaping.                                                           */

/* Length of at most max bytes of s[0..n) that does not split a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t n, size_t max)
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
static void xml_esc(struct sbuf *b, const char *s, size_t n, int attr)
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

static void xml_str(struct sbuf *b, const char *s, int attr)
{
    xml_esc(b, s, strlen(s), attr);
}

/*
 * Markdown inline text inside a table cell or a list item: characters
 * that would start emphasis, code, links or end a cell are
 * backslash-escaped, HTML is neutralised with entities, and every control
 * character becomes a space so a line break cannot end the table.  At
 * most max bytes of s are shown, then an ellipsis.
 */
static void md_esc(struct sbuf *b, const char *s, size_t n, size_t max)
{
    size_t m = utf8_cut(s, n, max);
    for (size_t i = 0; i < m; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            sb_put(b, " ", 1);
        else if (c == '<')
            sb_puts(b, "&lt;");
        else if (c == '>')
            sb_puts(b, "&gt;");
        else if (c == '&')
            sb_puts(b, "&amp;");
        else if (strchr("\\`*_[]|~", c)) {
            sb_put(b, "\\", 1);
            sb_put(b, &s[i], 1);
        } else
            sb_put(b, &s[i], 1);
    }
    if (m < n)
        sb_puts(b, "\xe2\x80\xa6");
}

static void md_str(struct sbuf *b, const char *s)
{
    md_esc(b, s, strlen(s), (size_t)-1);
}

/* A code span holding s: delimited by one more backtick than s's longest run. */
static void md_code(struct sbuf *b, const char *s, size_t n, size_t max)
{
    size_t m = utf8_cut(s, n, max), run = 0, longest = 0;
    for (size_t i = 0; i < m; i++) {
        run = s[i] == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    for (size_t i = 0; i <= longest; i++)
        sb_put(b, "`", 1);
    if (longest || (m && s[0] == ' '))
        sb_put(b, " ", 1);
    for (size_t i = 0; i < m; i++)
        sb_put(b, (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? " " : &s[i], 1);
    if (m < n)
        sb_puts(b, "\xe2\x80\xa6");
    if (longest || (m && s[m - 1] == '`'))
        sb_put(b, " ", 1);
    for (size_t i = 0; i <= longest; i++)
        sb_put(b, "`", 1);
}

#define EVIDENCE_MD_MAX 200   /* bytes of evidence in a Markdown table cell */
#define COMMAND_MD_MAX 1000   /* bytes of the command in the Markdown summary */

/* ------------------------------------------------------------------ */
/* Markdown, as pieces: fixed text, and table rows that may be dropped. */

struct md_piece {
    char *s;
    size_t len;
    int table;   /* -1: fixed text; else the table this row (or note slot) belongs to */
    int note;    /* the slot after a table's rows where "N more ..." goes */
};

struct md_table {
    const char *noun;
    size_t nrows, shown;
};

struct md {
    struct sbuf cur;          /* fixed text not yet made a piece */
    struct md_piece *p;
    size_t np, cap;
    struct md_table t[8];
    int nt;
    int oom;
};

static void md_push(struct md *m, char *s, size_t len, int table, int note)
{
    if (m->np == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        struct md_piece *p = realloc(m->p, cap * sizeof *p);
        if (!p) {
            free(s);
            m->oom = 1;
            return;
        }
        m->p = p;
        m->cap = cap;
    }
    m->p[m->np++] = (struct md_piece){ s, len, table, note };
}

static void md_flush(struct md *m)
{
    if (m->cur.oom)
        m->oom = 1;
    if (m->cur.len) {
        md_push(m, m->cur.p, m->cur.len, -1, 0);
        m->cur = (struct sbuf)SBUF_INIT;
    }
}

static int md_table_begin(struct md *m, const char *noun)
{
    md_flush(m);
    int id = m->nt < 8 ? m->nt++ : 7;
    m->t[id] = (struct md_table){ noun, 0, 0 };
    return id;
}

/* The row being built is in *row; it becomes a piece of table id. */
static void md_row_end(struct md *m, int id, struct sbuf *row)
{
    if (row->oom)
        m->oom = 1;
    md_push(m, row->p, row->len, id, 0);
    m->t[id].nrows++;
    *row = (struct sbuf)SBUF_INIT;
}

static void md_table_end(struct md *m, int id)
{
    md_flush(m);
    md_push(m, NULL, 0, id, 1);
}

static void md_release(struct md *m)
{
    for (size_t i = 0; i < m->np; i++)
        free(m->p[i].s);
    free(m->p);
    sb_release(&m->cur);
}

/* "N more ... not shown"; the advice where to find them only with the
 * first such note (advise), so a summary with several shortened tables
 * does not repeat it. */
static void md_note(struct sbuf *b, size_t more, const char *noun, int advise)
{
    sb_printf(b, "\n_%zu more %s not shown%s._\n", more, noun,
              advise ? "; the results file has them all (autobatch report)" : "");
}

static void md_regression_gate(struct md *m, const struct rdoc *d)
{
    struct sbuf *b = &m->cur;
    const json_t *bl = d->baseline, *changes = jget(bl, "changes");
    const char *file = jstr(bl, "file");
    double thr = jnum(bl, "threshold");
    int regression = jbool(bl, "regression") == 1;
    sb_puts(b, "\n## Regression gate\n\n");
    sb_puts(b, regression ? "**Regression** against " : "No regression against ");
    if (file)
        md_code(b, file, strlen(file), COMMAND_MD_MAX);
    else
        sb_puts(b, "the baseline");
    if (!isnan(thr))
        sb_printf(b, " (throughput threshold %g%%)", thr * 100);
    sb_puts(b, ".\n");
    int other_command = 0;
    for (size_t i = 0; i < json_array_size(changes); i++) {
        const char *kind = jstr(json_array_get(changes, i), "kind");
        other_command |= kind && !strcmp(kind, "command");
    }
    if (other_command)
        sb_puts(b, "\n> **Different command:** the baseline was recorded for another command, so "
                   "the numbers below may not be comparable.\n");
    if (json_array_size(changes))
        sb_puts(b, "\n");
    for (size_t i = 0; i < json_array_size(changes); i++) {
        const json_t *c = json_array_get(changes, i);
        const char *text = jstr(c, "text");
        sb_puts(b, "- ");
        if (jbool(c, "regression") == 1)
            sb_puts(b, "**regression:** ");
        else if (jbool(c, "improvement") == 1)
            sb_puts(b, "improvement: ");
        md_str(b, text ? text : "(no description)");
        sb_puts(b, "\n");
    }
    if (!json_array_size(changes))
        sb_puts(b, "\nNothing changed.\n");
}

/* Frontier points by peak memory (then micro-batch), or by micro-batch
 * when memory was not measured; faster first on a tie. */
static int cmp_point_key(const struct rpoint *a, const struct rpoint *b, int mem)
{
    double ka = mem ? a->peak : (double)a->mb, kb = mem ? b->peak : (double)b->mb;
    if (ka != kb)
        return ka < kb ? -1 : 1;
    if (a->mb != b->mb)
        return a->mb < b->mb ? -1 : 1;
    return (a->sps < b->sps) - (a->sps > b->sps);
}

static int cmp_point_mem(const void *x, const void *y)
{
    return cmp_point_key(*(const struct rpoint *const *)x, *(const struct rpoint *const *)y, 1);
}

static int cmp_point_mb(const void *x, const void *y)
{
    return cmp_point_key(*(const struct rpoint *const *)x, *(const struct rpoint *const *)y, 0);
}

/* "Run with" when the choice changes the command line, and each config
 * file the choice goes into (its diff is in the results file and the
 * HTML report). */
static void md_run_with(struct sbuf *b, const struct rdoc *d)
{
    struct sbuf run = SBUF_INIT, cmd = SBUF_INIT;
    if (text_run_with(&run, d)) {
        text_command(&cmd, d->command);
        if (run.len != cmd.len || memcmp(run.p, cmd.p, run.len)) {
            sb_puts(b, "\n- **Run with:** ");
            md_code(b, run.p, run.len, COMMAND_MD_MAX);
        }
    }
    sb_release(&run);
    sb_release(&cmd);
    const json_t *files = jget(d->run_with, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i);
        const char *path = jstr(f, "path");
        int written = jbool(f, "written");
        sb_puts(b, "\n- **Config:** ");
        md_code(b, path ? path : "(unknown)", strlen(path ? path : "(unknown)"), COMMAND_MD_MAX);
        sb_puts(b, !json_is_string(jget(f, "diff")) ? " already holds the choice"
                   : written == 1 ? " written with the choice (--write)"
                   : written == 0 ? " not written: add --write, or apply the diff in the results file"
                                  : " changed by the choice");
    }
}

static void md_build(struct md *m, const struct rdoc *d)
{
    struct sbuf *b = &m->cur, line = SBUF_INIT;
    char x[32], y[32], z[32], w[32];
    int good;

    sb_puts(b, "# autobatch results\n\n");
    text_headline(&line, d, &good);
    /* a notice the headline gives is not given again below it */
    int said_interrupted = headline_interrupted(d);
    sb_puts(b, good ? "**Chosen:** " : "**");
    if (!good && line.len) /* "no configuration..." capitalised */
        line.p[0] = 'N';
    md_esc(b, line.p ? line.p : "", line.len, (size_t)-1);
    sb_puts(b, good ? "\n" : "**\n");
    sb_release(&line);

    const struct rtrial *bad = failed_trial(d);
    if (bad) {
        sb_printf(b, "\nThe command failed in trial %s (", fmt_int(x, sizeof x, bad->id));
        md_str(b, bad->outcome);
        text_status(&line, bad);
        if (line.len)
            sb_printf(b, ", %s", line.p);
        sb_release(&line);
        sb_puts(b, bad->evidence ? "): " : ").");
        if (bad->evidence)
            md_code(b, bad->evidence, bad->evlen, EVIDENCE_MD_MAX * 2);
        sb_puts(b, "\n");
    }

    sb_puts(b, "\n- **Command:** ");
    text_command(&line, d->command);
    md_code(b, line.p ? line.p : "", line.len, COMMAND_MD_MAX);
    sb_release(&line);
    md_run_with(b, d);
    sb_puts(b, "\n- **Host:** ");
    text_host(&line, d);
    md_str(b, line.p ? line.p : "");
    sb_release(&line);
    sb_puts(b, "\n- **Capacity:** ");
    text_capacity(&line, d);
    md_str(b, line.p ? line.p : "");
    sb_release(&line);
    sb_puts(b, "\n- **Started:** ");
    md_str(b, d->started_at ? d->started_at : DASH);
    sb_puts(b, "\n- **Search space:** ");
    text_space(&line, d);
    md_str(b, line.p ? line.p : "");
    sb_release(&line);
    if (d->preset || d->config) {
        sb_puts(b, "\n- **Preset:** ");
        md_str(b, d->preset ? d->preset : DASH);
        if (d->config) {
            sb_puts(b, ", config ");
            md_code(b, d->config, strlen(d->config), COMMAND_MD_MAX);
        }
    }
    sb_puts(b, "\n- **Trials:** ");
    text_trials(&line, d);
    md_str(b, line.p ? line.p : "");
    sb_release(&line);
    sb_puts(b, "\n- **Exit:** ");
    text_exit(&line, d);
    md_str(b, line.p ? line.p : "");
    sb_release(&line);
    sb_puts(b, "\n");
    if (d->interrupted && !said_interrupted)
        sb_puts(b, "\nThe search was interrupted before it finished.\n");

    if (d->baseline)
        md_regression_gate(m, d);

    /* Per-cell answers. */
    if (d->nc) {
        sb_puts(b, "\n## Largest micro-batch per cell\n\n"
                   "| grad-accum | checkpointing | largest fit | smallest failure | trials | note |\n"
                   "|---:|:---|---:|---:|---:|:---|\n");
        int id = md_table_begin(m, "cells");
        for (size_t i = 0; i < d->nc; i++) {
            const struct rcell *c = &d->c[i];
            sb_printf(&line, "| %s | %s | ", fmt_int(x, sizeof x, c->ga), ckpt_word(c->ckpt));
            if (c->bounded_by)
                sb_printf(&line, "\xe2\x89\xa5 %s", fmt_int(y, sizeof y, c->tried));
            else
                sb_puts(&line, fmt_int(y, sizeof y, c->mb));
            sb_printf(&line, " | %s | %s | ", fmt_int(z, sizeof z, c->fail), fmt_int(w, sizeof w, c->trials));
            const char *notes[4] = { bounded_note(c), c->inferred ? "inferred from other cells" : NULL,
                                     c->skipped,
                                     d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt
                                         ? "the chosen configuration's cell" : NULL };
            int first = 1;
            for (int k = 0; k < 4; k++) {
                if (!notes[k])
                    continue;
                if (!first)
                    sb_puts(&line, "; ");
                md_str(&line, notes[k]);
                first = 0;
            }
            sb_puts(&line, first ? "|\n" : " |\n");
            md_row_end(m, id, &line);
        }
        md_table_end(m, id);
    }

    /* The frontier. */
    sb_puts(b, "\n## Pareto frontier\n\n");
    if (!d->nf) {
        sb_puts(b, "Empty: no trial fitted.\n");
    } else {
        sb_printf(b, "Throughput against %s; **chosen** marks the choice.\n\n",
                  d->mem_axis ? "peak memory" : "micro-batch (peak memory was not measured)");
        sb_printf(b, "| micro-batch | grad-accum | checkpointing | %s/s | peak memory | |\n"
                     "|---:|---:|:---|---:|---:|:---|\n", d->unit);
        /* along the memory axis, the way the frontier is read */
        const struct rpoint **order = malloc(d->nf * sizeof *order);
        for (size_t i = 0; order && i < d->nf; i++)
            order[i] = &d->f[i];
        if (order)
            qsort(order, d->nf, sizeof *order, d->mem_axis ? cmp_point_mem : cmp_point_mb);
        int id = md_table_begin(m, "frontier points");
        for (size_t i = 0; i < d->nf; i++) {
            const struct rpoint *p = order ? order[i] : &d->f[i];
            int chosen = d->has_best && p->mb == d->best.mb && p->ga == d->best.ga &&
                         p->ckpt == d->best.ckpt;
            sb_printf(&line, "| %s | %s | %s | %s | %s | %s|\n", fmt_int(x, sizeof x, p->mb),
                      fmt_int(y, sizeof y, p->ga), ckpt_word(p->ckpt), fmt_rate(z, sizeof z, p->sps),
                      fmt_bytes(w, sizeof w, p->peak), chosen ? "**chosen** " : "");
            md_row_end(m, id, &line);
        }
        md_table_end(m, id);
        free(order);
    }

    if (d->nx) {
        sb_puts(b, "\n## Contradictions\n\nSizes that failed below a larger fit, and what their re-test said.\n\n"
                   "| grad-accum | checkpointing | failed at | larger fit | re-test |\n"
                   "|---:|:---|---:|---:|:---|\n");
        int id = md_table_begin(m, "contradictions");
        for (size_t i = 0; i < d->nx; i++) {
            const struct rcontra *c = &d->x[i];
            sb_printf(&line, "| %s | %s | %s | %s | ", fmt_int(x, sizeof x, c->ga), ckpt_word(c->ckpt),
                      fmt_int(y, sizeof y, c->mb), fmt_int(z, sizeof z, c->larger));
            md_str(&line, c->retest ? c->retest : DASH);
            sb_puts(&line, " |\n");
            md_row_end(m, id, &line);
        }
        md_table_end(m, id);
    }

    sb_puts(b, "\n## Trials\n\n");
    if (!d->nt) {
        sb_puts(b, "No trial ran.\n");
    } else {
        /* folded: a GitHub step summary shows the answer first */
        sb_printf(b, "<details><summary>%zu trial%s</summary>\n\n", d->nt, d->nt == 1 ? "" : "s");
        sb_printf(b, "| # | micro-batch | grad-accum | checkpointing | outcome | %s/s | peak memory | time | notes |\n"
                     "|---:|---:|---:|:---|:---|---:|---:|---:|:---|\n", d->unit);
        int id = md_table_begin(m, "trials");
        for (size_t i = 0; i < d->nt; i++) {
            const struct rtrial *t = &d->t[i];
            char v[32];
            sb_printf(&line, "| %s | %s | %s | %s | ", fmt_int(x, sizeof x, t->id), fmt_int(y, sizeof y, t->mb),
                      fmt_int(z, sizeof z, t->ga), ckpt_word(t->ckpt));
            md_str(&line, t->outcome);
            sb_printf(&line, " | %s | %s | %s | ", fmt_rate(x, sizeof x, t->sps),
                      fmt_bytes(y, sizeof y, t->peak), fmt_secs(v, sizeof v, t->wall));
            size_t mark = line.len;
            if (t->chosen)
                sb_puts(&line, "**chosen**");
            if (t->retest)
                sb_puts(&line, line.len > mark ? "; retest" : "retest");
            if (t->oc != OC_FIT && t->oc != OC_OOM) {
                struct sbuf st = SBUF_INIT;
                text_status(&st, t);
                if (st.len)
                    sb_printf(&line, "%s%s", line.len > mark ? "; " : "", st.p);
                sb_release(&st);
            }
            if (t->evidence) {
                if (line.len > mark)
                    sb_puts(&line, ": ");
                md_esc(&line, t->evidence, t->evlen, EVIDENCE_MD_MAX);
            }
            sb_puts(&line, line.len > mark ? " |\n" : "|\n");
            md_row_end(m, id, &line);
        }
        md_table_end(m, id);
        sb_puts(b, "\n</details>\n");
    }
    md_flush(m);
    sb_release(&line);
}

static int md_assemble(struct md *m, size_t max_bytes, char **out, size_t *len, char *err,
                       size_t errlen)
{
    size_t total = 0, fixed = 0;
    for (size_t i = 0; i < m->np; i++) {
        total += m->p[i].len;
        if (m->p[i].table < 0)
            fixed += m->p[i].len;
    }
    for (int k = 0; k < m->nt; k++)
        m->t[k].shown = m->t[k].nrows;
    if (total > max_bytes) {
        /* Reserve room for every table's note at its longest, then give
         * rows the rest, table by table in document order. */
        for (int k = 0; k < m->nt; k++) {
            struct sbuf note = SBUF_INIT;
            md_note(&note, m->t[k].nrows, m->t[k].noun, 1);
            fixed += note.len;
            sb_release(&note);
        }
        if (fixed > max_bytes) {
            snprintf(err, errlen, "the summary needs at least %zu bytes; only %zu are allowed", fixed,
                     max_bytes);
            return -1;
        }
        size_t room = max_bytes - fixed;
        int full[8] = { 0 };
        for (int k = 0; k < m->nt; k++)
            m->t[k].shown = 0;
        for (size_t i = 0; i < m->np; i++) {
            struct md_piece *p = &m->p[i];
            if (p->table < 0 || p->note || full[p->table])
                continue;
            if (p->len <= room) {
                room -= p->len;
                m->t[p->table].shown++;
            } else {
                full[p->table] = 1;
            }
        }
    }
    struct sbuf b = SBUF_INIT;
    size_t seen[8] = { 0 };
    int advised = 0;
    sb_put(&b, "", 0);
    for (size_t i = 0; i < m->np; i++) {
        struct md_piece *p = &m->p[i];
        if (p->table < 0) {
            sb_put(&b, p->s, p->len);
        } else if (p->note) {
            struct md_table *t = &m->t[p->table];
            if (t->shown < t->nrows)
                md_note(&b, t->nrows - t->shown, t->noun, !advised++);
        } else if (seen[p->table]++ < m->t[p->table].shown) {
            sb_put(&b, p->s, p->len);
        }
    }
    if (b.oom) {
        sb_release(&b);
        snprintf(err, errlen, "cannot render the report: out of memory");
        return -1;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

static int render_markdown(const struct rdoc *d, size_t max_bytes, char **out, size_t *len,
                           char *err, size_t errlen)
{
    struct md m = { .cur = SBUF_INIT };
    md_build(&m, d);
    int rc;
    if (m.oom) {
        snprintf(err, errlen, "cannot render the report: out of memory");
        rc = -1;
    } else {
        rc = md_assemble(&m, max_bytes, out, len, err, errlen);
    }
    md_release(&m);
    return rc;
}

/* ------------------------------------------------------------------ */
/* JUnit XML.                                                          */

#define EVIDENCE_ATTR_MAX 500 /* bytes of evidence in a message="" attribute */

/* A testcase is named by its configuration, not its trial number, so that
 * CI history follows a size from one night to the next; a configuration
 * run again (a re-test, a noisy finalist) is "(run 2)", ... */
static void junit_trial(struct sbuf *b, const struct rdoc *d, const struct rtrial *t)
{
    char x[32], y[32], z[32], again[32] = "";
    int runs = 1;
    for (const struct rtrial *o = d->t; o < t; o++)
        runs += o->mb == t->mb && o->ga == t->ga && o->ckpt == t->ckpt;
    if (runs > 1)
        snprintf(again, sizeof again, " (run %d)", runs);
    sb_printf(b, "    <testcase name=\"micro_batch=%s grad_accum=%s checkpointing=%s%s\" "
                 "classname=\"autobatch.grad_accum_%s.checkpointing_%s\" time=\"%.3f\"",
              t->mb < 0 ? "null" : fmt_int(y, sizeof y, t->mb),
              t->ga < 0 ? "null" : fmt_int(z, sizeof z, t->ga), t->ckpt < 0 ? "null" : ckpt_word(t->ckpt),
              again, t->ga < 0 ? "null" : z, t->ckpt < 0 ? "null" : ckpt_word(t->ckpt),
              isnan(t->wall) || t->wall < 0 ? 0.0 : t->wall);
    fmt_int(x, sizeof x, t->id);
    const char *elem = NULL, *why = NULL;
    switch (t->oc) {
    case OC_FIT:
        sb_printf(b, ">\n      <system-out>trial %s: fit: ", x);
        sb_printf(b, "%s %s/s over %s measured steps, peak memory %s%s</system-out>\n"
                     "    </testcase>\n",
                  fmt_rate(x, sizeof x, t->sps), d->unit, fmt_int(y, sizeof y, t->steps),
                  fmt_bytes(z, sizeof z, t->peak), t->chosen ? " (chosen)" : "");
        return;
    case OC_OOM: elem = "skipped"; why = "out of memory"; break;
    case OC_INTERRUPTED: elem = "skipped"; why = "interrupted"; break;
    case OC_CRASH: elem = "error"; why = "the command failed for a reason other than memory"; break;
    case OC_SPAWN: elem = "error"; why = "the command could not be started"; break;
    case OC_TIMEOUT: elem = "failure"; why = "ran past the trial timeout"; break;
    case OC_HANG: elem = "failure"; why = "printed nothing for the hang timeout"; break;
    case OC_NO_STEPS: elem = "error"; why = "no training step was seen"; break;
    case OC_MISMATCH: elem = "error"; why = "the batch-size knob did not reach the trainer"; break;
    default: elem = "error"; why = "unknown outcome"; break;
    }
    sb_printf(b, ">\n      <%s", elem);
    if (strcmp(elem, "skipped")) {
        sb_puts(b, " type=\"");
        xml_str(b, t->outcome, 1);
        sb_puts(b, "\"");
    }
    sb_printf(b, " message=\"%s", why);
    if (t->oc == OC_UNKNOWN) {
        sb_puts(b, " &#39;");
        xml_str(b, t->outcome, 1);
        sb_puts(b, "&#39;");
    }
    struct sbuf st = SBUF_INIT;
    text_status(&st, t);
    if (st.len && t->oc != OC_OOM && t->oc != OC_INTERRUPTED)
        sb_printf(b, " (%s)", st.p);
    sb_release(&st);
    if (t->evidence) {
        size_t cut = utf8_cut(t->evidence, t->evlen, EVIDENCE_ATTR_MAX);
        sb_puts(b, ": ");
        xml_esc(b, t->evidence, cut, 1);
        if (cut < t->evlen)
            sb_puts(b, "\xe2\x80\xa6");
    }
    sb_puts(b, "\"");
    if (!t->evidence && !t->signature) {
        sb_puts(b, "/>\n    </testcase>\n");
        return;
    }
    sb_puts(b, ">");
    if (t->signature) {
        sb_puts(b, "signature: ");
        xml_str(b, t->signature, 0);
        sb_puts(b, "\n");
    }
    if (t->evidence)
        xml_esc(b, t->evidence, t->evlen, 0);
    sb_printf(b, "</%s>\n    </testcase>\n", elem);
}

static int render_junit(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen)
{
    size_t failures = 0, errors = 0, skipped = 0, tests = d->nt;
    double time = 0;
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        if (!isnan(t->wall) && t->wall > 0)
            time += t->wall;
        switch (t->oc) {
        case OC_FIT: break;
        case OC_OOM: case OC_INTERRUPTED: skipped++; break;
        case OC_TIMEOUT: case OC_HANG: failures++; break;
        default: errors++; break;
        }
    }
    if (!isnan(d->wall) && d->wall > time)
        time = d->wall;
    int regression = d->baseline && jbool(d->baseline, "regression") == 1;
    if (d->baseline) {
        tests++;
        failures += regression;
    }

    struct sbuf b = SBUF_INIT, cmd = SBUF_INIT, line = SBUF_INIT;
    text_command(&cmd, d->command);
    sb_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    /* <testsuites> takes no skipped="" in the common junit schema
     * (tests/data/junit.xsd); <testsuite> does */
    sb_printf(&b, "<testsuites name=\"autobatch\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
                  "time=\"%.3f\">\n", tests, failures, errors, time);
    sb_puts(&b, "  <testsuite name=\"autobatch: ");
    xml_esc(&b, cmd.p ? cmd.p : "", cmd.len, 1);
    sb_printf(&b, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\"",
              tests, failures, errors, skipped, time);
    if (d->started_at) {
        sb_puts(&b, " timestamp=\"");
        xml_str(&b, d->started_at, 1);
        sb_puts(&b, "\"");
    }
    const char *hostname = jstr(d->host, "hostname");
    if (hostname) {
        sb_puts(&b, " hostname=\"");
        xml_str(&b, hostname, 1);
        sb_puts(&b, "\"");
    }
    sb_puts(&b, ">\n    <properties>\n      <property name=\"command\" value=\"");
    xml_esc(&b, cmd.p ? cmd.p : "", cmd.len, 1);
    sb_puts(&b, "\"/>\n      <property name=\"host\" value=\"");
    text_host(&line, d);
    xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    int good;
    sb_puts(&b, "\"/>\n      <property name=\"result\" value=\"");
    text_headline(&line, d, &good);
    xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    sb_puts(&b, "\"/>\n      <property name=\"exit\" value=\"");
    text_exit(&line, d);
    xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    sb_puts(&b, "\"/>\n    </properties>\n");

    for (size_t i = 0; i < d->nt; i++)
        junit_trial(&b, d, &d->t[i]);

    if (d->baseline) {
        const json_t *changes = jget(d->baseline, "changes");
        const char *file = jstr(d->baseline, "file");
        size_t nreg = 0;
        for (size_t i = 0; i < json_array_size(changes); i++)
            nreg += jbool(json_array_get(changes, i), "regression") == 1;
        for (size_t i = 0; i < json_array_size(changes); i++) {
            const char *text = jstr(json_array_get(changes, i), "text");
            int r = jbool(json_array_get(changes, i), "regression") == 1;
            sb_printf(&line, "%s%s\n", r ? "regression: " : "", text ? text : "(no description)");
        }
        sb_puts(&b, "    <testcase name=\"regression gate\" classname=\"autobatch.baseline\" time=\"0.000\">\n");
        if (regression) {
            sb_printf(&b, "      <failure type=\"regression\" message=\"%zu regression%s against ", nreg,
                      nreg == 1 ? "" : "s");
            xml_str(&b, file ? file : "the baseline", 1);
            sb_puts(&b, "\">");
            xml_esc(&b, line.p ? line.p : "", line.len, 0);
            sb_puts(&b, "</failure>\n");
        } else {
            sb_puts(&b, "      <system-out>no regression against ");
            xml_str(&b, file ? file : "the baseline", 0);
            sb_puts(&b, "\n");
            xml_esc(&b, line.p ? line.p : "", line.len, 0);
            sb_puts(&b, "</system-out>\n");
        }
        sb_puts(&b, "    </testcase>\n");
        sb_release(&line);
    }
    sb_puts(&b, "  </testsuite>\n</testsuites>\n");
    sb_release(&cmd);
    if (b.oom) {
        sb_release(&b);
        snprintf(err, errlen, "cannot render the report: out of memory");
        return -1;
    }
    *out = b.p;
    if (len)
        *len = b.len;
    return 0;
}

/* ------------------------------------------------------------------ */
/* HTML and its SVG charts.                                            */

#define SVG_W 760
#define COLOUR_MAIN "#3b6ea8"
#define COLOUR_LIGHT "#a9c4e2"
#define COLOUR_CHOICE "#e8740c"

struct axis {
    double lo, hi;       /* data range shown */
    double p0, p1;       /* pixel positions of lo and hi */
    int log2;            /* log2 scale (lo, hi > 0) */
    double ticks[16];
    int nticks;
};

static double ax_map(const struct axis *a, double v)
{
    if (a->log2) {
        double l = log2(a->lo), h = log2(a->hi);
        v = v > 0 ? log2(v) : l;
        return a->p0 + (v - l) / (h - l) * (a->p1 - a->p0);
    }
    return a->p0 + (v - a->lo) / (a->hi - a->lo) * (a->p1 - a->p0);
}

/*
 * A linear axis from lo to a round number at or above hi, with about
 * five ticks; integer: no tick between whole numbers (micro-batches).
 */
static void ax_linear(struct axis *a, double lo, double hi, double p0, double p1, int integer)
{
    if (!(hi > lo))
        hi = lo + 1;
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
    double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
    if (integer && step < 1)
        step = 1;
    a->lo = floor(lo / step) * step;
    a->hi = ceil(hi / step - 1e-9) * step;
    if (a->hi <= a->lo)
        a->hi = a->lo + step;
    a->p0 = p0;
    a->p1 = p1;
    a->log2 = 0;
    a->nticks = 0;
    for (double v = a->lo; v <= a->hi + step / 2 && a->nticks < 16; v += step)
        a->ticks[a->nticks++] = fabs(v) < step / 1e6 ? 0 : v;
}

/* A log2 axis over powers of two, for micro-batches spanning a wide range. */
static void ax_log2(struct axis *a, double lo, double hi, double p0, double p1)
{
    int e0 = (int)floor(log2(lo)), e1 = (int)ceil(log2(hi));
    if (e1 <= e0)
        e1 = e0 + 1;
    int every = (e1 - e0 + 9) / 10;
    a->lo = ldexp(1, e0);
    a->hi = ldexp(1, e1);
    a->p0 = p0;
    a->p1 = p1;
    a->log2 = 1;
    a->nticks = 0;
    for (int e = e0; e <= e1 && a->nticks < 16; e += every)
        a->ticks[a->nticks++] = ldexp(1, e);
}

static void fmt_tick(char *buf, size_t n, double v, const struct axis *a)
{
    double step = a->nticks > 1 ? a->ticks[1] - a->ticks[0] : 1;
    if (a->log2 || step >= 1 || v == 0)
        snprintf(buf, n, "%.0f", v);
    else
        snprintf(buf, n, "%.*f", (int)ceil(-log10(step) - 1e-9), v);
}

/* Plot area of every chart. */
#define PL 72.0
#define PR (SVG_W - 20.0)
#define PT 40.0

static void svg_axes(struct sbuf *b, const struct axis *x, const struct axis *y, double pb, const char *xlabel,
                     const char *ylabel)
{
    char t[32];
    sb_printf(b, "<g class=\"axes\" font-size=\"11\" fill=\"#333\">\n");
    for (int i = 0; i < y->nticks; i++) {
        double py = ax_map(y, y->ticks[i]);
        fmt_tick(t, sizeof t, y->ticks[i], y);
        sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                  PL, py, PR, py, PL - 6, py + 4, t);
    }
    if (x) {
        for (int i = 0; i < x->nticks; i++) {
            double px = ax_map(x, x->ticks[i]);
            fmt_tick(t, sizeof t, x->ticks[i], x);
            sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                      px, pb, px, pb + 4, px, pb + 17, t);
        }
    }
    sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>"
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\"/>\n",
              PL, PT, PL, pb, PL, pb, PR, pb);
    if (xlabel) {
        sb_printf(b, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">",
                  (PL + PR) / 2, pb + 36);
        xml_str(b, xlabel, 0);
        sb_puts(b, "</text>\n");
    }
    sb_printf(b, "<text class=\"ylabel\" transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" "
                 "font-size=\"12\">", (PT + pb) / 2);
    xml_str(b, ylabel, 0);
    sb_puts(b, "</text>\n</g>\n");
}

/* Legend entries in the top margin, left to right. */
struct legend {
    struct sbuf *b;
    double x;
};

static void legend_item(struct legend *l, const char *shape, const char *label)
{
    /* shape: an SVG fragment drawn around (0,0) */
    sb_printf(l->b, "<g transform=\"translate(%.1f 16)\">%s<text x=\"10\" y=\"4\" font-size=\"11\">",
              l->x, shape);
    xml_str(l->b, label, 0);
    sb_puts(l->b, "</text></g>\n");
    l->x += 28 + 5.9 * (double)strlen(label);
}

static void svg_open(struct sbuf *b, const char *id, double h, const char *title)
{
    sb_printf(b, "<svg id=\"%s\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" role=\"img\" "
                 "font-family=\"inherit\">\n<title>", id, SVG_W, h, SVG_W, h);
    xml_str(b, title, 0);
    sb_printf(b, "</title>\n<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#ffffff\"/>\n", SVG_W, h);
}

static void svg_empty(struct sbuf *b, double pb, const char *what)
{
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666\">%s</text>\n",
              (PL + PR) / 2, (PT + pb) / 2, what);
}

static double trial_x(const struct rdoc *d, long long mb, double peak)
{
    return d->mem_axis ? peak / (1024.0 * 1024 * 1024) : (double)mb;
}

static int point_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Frontier points ordered by configuration, then throughput (NaN last). */
static int rpoint_cmp(const void *a, const void *b)
{
    const struct rpoint *x = a, *y = b;
    if (x->mb != y->mb)
        return x->mb < y->mb ? -1 : 1;
    if (x->ga != y->ga)
        return x->ga < y->ga ? -1 : 1;
    if (x->ckpt != y->ckpt)
        return x->ckpt < y->ckpt ? -1 : 1;
    if (isnan(x->sps) || isnan(y->sps))
        return isnan(x->sps) - isnan(y->sps);
    return x->sps < y->sps ? -1 : x->sps > y->sps;
}

/*
 * Whether trial t is one of the frontier's points (its configuration and
 * throughput), by binary search in the sorted copy `sorted` of d->f: a
 * scan per trial would make a file with many trials and a long frontier
 * quadratic.
 */
static int on_frontier(const struct rpoint *sorted, size_t n, const struct rtrial *t)
{
    struct rpoint key = { .mb = t->mb, .ga = t->ga, .ckpt = t->ckpt, .sps = t->sps };
    return !isnan(t->sps) && sorted && bsearch(&key, sorted, n, sizeof *sorted, rpoint_cmp);
}

static void svg_scatter(struct sbuf *b, const struct rdoc *d)
{
    const double h = 330, pb = h - 50;
    char xl[96], yl[64];
    snprintf(xl, sizeof xl, "%s", d->mem_axis ? "peak memory (GiB)" : "micro-batch (peak memory not measured)");
    snprintf(yl, sizeof yl, "throughput (%.40s/s)", d->unit);
    svg_open(b, "scatter", h, "throughput against peak memory");

    double xmax = 0, ymax = 0;
    size_t npts = 0;
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        double x = trial_x(d, t->mb, t->peak);
        if (t->oc != OC_FIT || isnan(t->sps) || isnan(x) || x < 0)
            continue;
        xmax = x > xmax ? x : xmax;
        ymax = t->sps > ymax ? t->sps : ymax;
        npts++;
    }
    /* The frontier and the choice are drawn from their own entries: keep them inside too. */
    for (size_t i = 0; npts && i <= d->nf; i++) {
        const struct rpoint *p = i < d->nf ? &d->f[i] : d->has_best ? &d->best : NULL;
        double x = p ? trial_x(d, p->mb, p->peak) : NAN;
        if (isnan(x) || x < 0 || isnan(p->sps))
            continue;
        xmax = x > xmax ? x : xmax;
        ymax = p->sps > ymax ? p->sps : ymax;
    }
    struct axis ax, ay;
    ax_linear(&ax, 0, xmax > 0 ? xmax * 1.04 : 1, PL, PR, !d->mem_axis);
    ax_linear(&ay, 0, ymax > 0 ? ymax * 1.04 : 1, pb, PT, 0);
    if (!npts)
        ax.nticks = ay.nticks = 0; /* no scale to read on an empty chart */
    svg_axes(b, &ax, &ay, pb, xl, yl);

    struct legend lg = { b, PL };
    int has_on = 0, has_off = 0;
    for (size_t i = 0; i < d->nt; i++)
        if (d->t[i].oc == OC_FIT) {
            has_on |= d->t[i].ckpt == 1;
            has_off |= d->t[i].ckpt != 1;
        }
    if (has_off || !has_on)
        legend_item(&lg, "<circle r=\"4\" fill=\"" COLOUR_LIGHT "\" stroke=\"" COLOUR_MAIN "\"/>",
                    has_on ? "fitting trial, checkpointing off" : "fitting trial");
    if (has_on)
        legend_item(&lg, "<rect x=\"-4\" y=\"-4\" width=\"8\" height=\"8\" transform=\"rotate(45)\" fill=\""
                    COLOUR_LIGHT "\" stroke=\"" COLOUR_MAIN "\"/>", "checkpointing on");
    legend_item(&lg, "<line x1=\"-7\" y1=\"0\" x2=\"7\" y2=\"0\" stroke=\"" COLOUR_MAIN "\" stroke-width=\"2\"/>",
                "Pareto frontier");
    legend_item(&lg, "<circle r=\"6\" fill=\"none\" stroke=\"" COLOUR_CHOICE "\" stroke-width=\"2.5\"/>",
                "chosen");

    if (!npts) {
        svg_empty(b, pb, "no trial fitted: nothing to plot");
        sb_puts(b, "</svg>\n");
        return;
    }

    /* The frontier line, by increasing x. */
    double *fp = malloc((d->nf ? d->nf : 1) * 2 * sizeof *fp);
    size_t nfp = 0;
    for (size_t i = 0; fp && i < d->nf; i++) {
        double x = trial_x(d, d->f[i].mb, d->f[i].peak);
        if (isnan(x) || x < 0 || isnan(d->f[i].sps))
            continue;
        fp[2 * nfp] = x;
        fp[2 * nfp + 1] = d->f[i].sps;
        nfp++;
    }
    if (fp && nfp) {
        qsort(fp, nfp, 2 * sizeof *fp, point_cmp);
        sb_puts(b, "<polyline class=\"frontier\" fill=\"none\" stroke=\"" COLOUR_MAIN
                   "\" stroke-width=\"2\" points=\"");
        for (size_t i = 0; i < nfp; i++)
            sb_printf(b, "%s%.1f,%.1f", i ? " " : "", ax_map(&ax, fp[2 * i]), ax_map(&ay, fp[2 * i + 1]));
        sb_puts(b, "\"/>\n");
    }
    free(fp);

    char r[32], m[32], g[32], x1[32], x2[32];
    struct rpoint *sorted = malloc((d->nf ? d->nf : 1) * sizeof *sorted);
    if (sorted) {
        memcpy(sorted, d->f, d->nf * sizeof *sorted);
        qsort(sorted, d->nf, sizeof *sorted, rpoint_cmp);
    } else {
        b->oom = 1;
    }
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        double x = trial_x(d, t->mb, t->peak);
        if (t->oc != OC_FIT || isnan(t->sps) || isnan(x) || x < 0)
            continue;
        int on_front = on_frontier(sorted, d->nf, t);
        double px = ax_map(&ax, x), py = ax_map(&ay, t->sps);
        const char *fill = on_front ? COLOUR_MAIN : COLOUR_LIGHT;
        sb_printf(b, "<g class=\"point\" data-trial=\"%s\">", fmt_int(x1, sizeof x1, t->id));
        if (t->ckpt == 1)
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" transform=\"rotate(45 %.1f %.1f)\" "
                         "fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>", px - 4, py - 4, px, py, fill);
        else
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>",
                      px, py, fill);
        sb_printf(b, "<title>trial %s: micro-batch %s \xc3\x97 %s, checkpointing %s: %s %s/s, peak memory %s</title></g>\n",
                  fmt_int(x1, sizeof x1, t->id), fmt_int(x2, sizeof x2, t->mb), fmt_int(g, sizeof g, t->ga),
                  ckpt_word(t->ckpt), fmt_rate(r, sizeof r, t->sps), d->unit,
                  fmt_bytes(m, sizeof m, t->peak));
    }
    free(sorted);

    if (d->has_best) {
        double x = trial_x(d, d->best.mb, d->best.peak);
        if (!isnan(x) && x >= 0 && !isnan(d->best.sps)) {
            double px = ax_map(&ax, x), py = ax_map(&ay, d->best.sps);
            int left = px > (PL + PR) / 2;
            sb_printf(b, "<g class=\"choice\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"9\" fill=\"none\" stroke=\""
                         COLOUR_CHOICE "\" stroke-width=\"2.5\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"12\" font-weight=\"bold\" "
                         "fill=\"" COLOUR_CHOICE "\">chosen: %s \xc3\x97 %s%s</text></g>\n",
                      px, py, left ? px - 13 : px + 13, py < PT + 20 ? py + 18 : py - 10, left ? "end" : "start",
                      fmt_int(x1, sizeof x1, d->best.mb), fmt_int(x2, sizeof x2, d->best.ga),
                      d->best.ckpt == 1 ? ", checkpointing" : "");
        }
    }
    sb_puts(b, "</svg>\n");
}

static void svg_cells(struct sbuf *b, const struct rdoc *d)
{
    const double h = 300, pb = h - 56;
    char yl[96], t1[32];
    snprintf(yl, sizeof yl, "largest micro-batch (%.40s)", d->unit);
    svg_open(b, "cells", h, "largest fitting micro-batch per cell");

    double vmax = 0;
    int any_bounded = 0;
    for (size_t i = 0; i < d->nc; i++) {
        const struct rcell *c = &d->c[i];
        long long v = c->bounded_by ? c->tried : c->mb;
        vmax = (double)v > vmax ? (double)v : vmax;
        any_bounded |= c->bounded_by != NULL;
    }
    struct axis ay;
    ax_linear(&ay, 0, vmax > 0 ? vmax * 1.08 : 1, pb, PT, 1);
    if (!(vmax > 0))
        ay.nticks = 0;
    svg_axes(b, NULL, &ay, pb, NULL, yl);

    struct legend lg = { b, PL };
    legend_item(&lg, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"" COLOUR_MAIN "\"/>",
                "largest fit");
    if (d->has_best)
        legend_item(&lg, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"" COLOUR_CHOICE "\"/>",
                    "the chosen configuration's cell");
    if (any_bounded)
        legend_item(&lg, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"" COLOUR_LIGHT
                    "\" stroke=\"" COLOUR_MAIN "\" stroke-dasharray=\"3 2\"/>",
                    "top of the range fitted (limit not found)");
    if (!d->nc) {
        svg_empty(b, pb, "no cell was searched");
        sb_puts(b, "</svg>\n");
        return;
    }

    double slot = (PR - PL) / (double)d->nc, bw = slot * 0.6 > 64 ? 64 : slot * 0.6;
    int fs = slot < 40 ? 8 : slot < 60 ? 10 : 11;
    for (size_t i = 0; i < d->nc; i++) {
        const struct rcell *c = &d->c[i];
        double cx = PL + slot * ((double)i + 0.5);
        long long v = c->bounded_by ? c->tried : c->mb;
        int chosen = d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt;
        sb_puts(b, "<g class=\"cell\">");
        if (v > 0) {
            double top = ax_map(&ay, (double)v);
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s>"
                         "<title>grad-accum %s, checkpointing %s: %s%lld</title></rect>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">%s%lld</text>",
                      cx - bw / 2, top, bw, pb - top,
                      chosen ? COLOUR_CHOICE : c->bounded_by ? COLOUR_LIGHT : COLOUR_MAIN,
                      c->bounded_by ? " stroke=\"" COLOUR_MAIN "\" stroke-dasharray=\"3 2\"" : "",
                      fmt_int(t1, sizeof t1, c->ga), ckpt_word(c->ckpt), c->bounded_by ? "at least " : "", v,
                      cx, top - 4, fs, c->bounded_by ? "\xe2\x89\xa5" : "", v);
        } else {
            const char *why = c->skipped && c->fail < 0 ? "skipped" : c->fail > 0 ? "none fits" : "not measured";
            sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\" fill=\"#a33\">%s</text>",
                      cx, pb - 6, fs, why);
        }
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">accum %s</text>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">ckpt %s</text></g>\n",
                  cx, pb + 16, fs, fmt_int(t1, sizeof t1, c->ga), cx, pb + 30, fs, ckpt_word(c->ckpt));
    }
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">"
                 "cell: gradient-accumulation steps and activation checkpointing</text>\n",
              (PL + PR) / 2, pb + 50);
    sb_puts(b, "</svg>\n");
}

static void svg_timeline(struct sbuf *b, const struct rdoc *d)
{
    const double h = 280, pb = h - 50;
    svg_open(b, "timeline", h, "trial timeline");

    double total = 0, mbmin = 0, mbmax = 0;
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        total += isnan(t->wall) || t->wall < 0 ? 0 : t->wall;
        if (t->mb > 0) {
            mbmin = mbmin == 0 || (double)t->mb < mbmin ? (double)t->mb : mbmin;
            mbmax = (double)t->mb > mbmax ? (double)t->mb : mbmax;
        }
    }
    struct axis ax, ay;
    ax_linear(&ax, 0, total > 0 ? total : 1, PL, PR, 0);
    if (mbmax > 0 && mbmax / mbmin >= 16)
        ax_log2(&ay, mbmin, mbmax, pb - 8, PT + 6);
    else
        ax_linear(&ay, 0, mbmax > 0 ? mbmax * 1.04 : 1, pb - 8, PT + 6, 1);
    if (!d->nt)
        ax.nticks = ay.nticks = 0;
    svg_axes(b, &ax, &ay, pb, "elapsed time (s), trials back to back",
             ay.log2 ? "micro-batch (log scale)" : "micro-batch");

    struct legend lg = { b, PL };
    for (int o = 0; o < OC_N; o++) {
        if (!d->count[o])
            continue;
        char shape[128];
        snprintf(shape, sizeof shape, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"%s\"/>", oc_colour[o]);
        legend_item(&lg, shape, oc_name[o]);
    }
    if (!d->nt) {
        svg_empty(b, pb, "no trial ran");
        sb_puts(b, "</svg>\n");
        return;
    }

    double start = 0;
    char x1[32], x2[32], x3[32], x4[32];
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        double wall = isnan(t->wall) || t->wall < 0 ? 0 : t->wall;
        double px = ax_map(&ax, start), pw = ax_map(&ax, start + wall) - px;
        double py = t->mb > 0 ? ax_map(&ay, (double)t->mb) : pb - 8;
        if (pw < 2)
            pw = 2;
        /* Exactly one class="trial" element per trial: the page's counting contract. */
        sb_printf(b, "<rect class=\"trial\" data-outcome=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" "
                     "fill=\"%s\"%s><title>trial %s: micro-batch %s \xc3\x97 %s, checkpointing %s: ",
                  oc_name[t->oc], px, py - 5, pw, oc_colour[t->oc],
                  t->chosen ? " stroke=\"" COLOUR_CHOICE "\" stroke-width=\"2\""
                  : pw >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.5\"" : "",
                  fmt_int(x1, sizeof x1, t->id), fmt_int(x2, sizeof x2, t->mb), fmt_int(x3, sizeof x3, t->ga),
                  ckpt_word(t->ckpt));
        xml_str(b, t->outcome, 0);
        sb_printf(b, ", %s%s</title></rect>\n", fmt_secs(x4, sizeof x4, isnan(t->wall) ? NAN : wall),
                  t->chosen ? " (chosen)" : "");
        start += wall;
    }
    sb_puts(b, "</svg>\n");
}

static const char html_style[] =
    "html{background:#ffffff;color:#1a1a1a}\n"
    "body{margin:0;background:#ffffff;font-family:\"DejaVu Sans\",\"Liberation Sans\",Arial,Helvetica,sans-serif;"
    "font-size:14px;line-height:1.4}\n"
    /* As wide as the window up to 1800 px (a 800 px window: the old 760 px column) */
    "main{box-sizing:border-box;min-width:360px;max-width:1800px;margin:0 auto;padding:16px 20px 32px 20px}\n"
    "h1{font-size:22px;margin:0 0 8px 0}\n"
    "h2{font-size:16px;margin:22px 0 6px 0;border-bottom:1px solid #ddd;padding-bottom:3px}\n"
    "code{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",Menlo,Consolas,monospace;font-size:12px;"
    "background:#f3f3f3;padding:1px 3px;word-break:break-all}\n"
    ".verdict{padding:8px 12px;margin:8px 0;border-left:5px solid;font-size:15px}\n"
    ".good{border-color:#2e8b3e;background:#eef7ef}\n"
    ".bad{border-color:#d1402b;background:#fbeeec}\n"
    ".warn{border-color:#e8740c;background:#fdf3e8}\n"
    "table{border-collapse:collapse;font-size:12px;margin:4px 0;width:100%}\n"
    "th,td{border-bottom:1px solid #e2e2e2;padding:3px 6px;text-align:right;vertical-align:top}\n"
    "th{background:#f6f6f6}\n"
    "td.l,th.l{text-align:left}\n"
    "table.facts{width:100%}\ntable.facts th{text-align:left;background:none;width:110px}\n"
    "table.facts td{text-align:left}\n"
    "td.ev{text-align:left;word-break:break-word;font-size:11px}\n"
    "tr.chosen td{background:#fdf3e8;font-weight:bold}\n"
    /* charts side by side when the window has room for two, each scaled to its column */
    ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,640px),1fr));column-gap:24px}\n"
    "svg{display:block;margin:4px 0;width:100%;height:auto;max-width:1100px}\n"
    "pre{font-family:\"DejaVu Sans Mono\",\"Liberation Mono\",Menlo,Consolas,monospace;font-size:12px;"
    "background:#f6f6f6;padding:6px 8px;margin:4px 0;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\n"
    "pre span.add{color:#1d6b2b}\npre span.del{color:#a3301f}\n"
    ".sw{display:inline-block;width:9px;height:9px;margin-right:4px}\n";

static void html_text(struct sbuf *b, const char *s)
{
    xml_str(b, s, 0);
}

static void html_regression_gate(struct sbuf *b, const struct rdoc *d)
{
    const json_t *bl = d->baseline, *changes = jget(bl, "changes");
    const char *file = jstr(bl, "file");
    double thr = jnum(bl, "threshold");
    int regression = jbool(bl, "regression") == 1, other = 0;
    for (size_t i = 0; i < json_array_size(changes); i++) {
        const char *kind = jstr(json_array_get(changes, i), "kind");
        other |= kind && !strcmp(kind, "command");
    }
    sb_puts(b, "<h2>Regression gate</h2>\n");
    sb_printf(b, "<div class=\"verdict %s\"><b>%s</b> against <code>", regression ? "bad" : "good",
              regression ? "Regression" : "No regression");
    html_text(b, file ? file : "the baseline");
    sb_puts(b, "</code>");
    if (!isnan(thr))
        sb_printf(b, " (throughput threshold %g%%)", thr * 100);
    sb_puts(b, "</div>\n");
    if (other)
        sb_puts(b, "<div class=\"verdict warn\"><b>Different command:</b> the baseline was recorded for "
                   "another command, so the numbers below may not be comparable.</div>\n");
    if (!json_array_size(changes)) {
        sb_puts(b, "<p>Nothing changed.</p>\n");
        return;
    }
    sb_puts(b, "<ul>\n");
    for (size_t i = 0; i < json_array_size(changes); i++) {
        const json_t *c = json_array_get(changes, i);
        const char *text = jstr(c, "text");
        sb_puts(b, "<li>");
        if (jbool(c, "regression") == 1)
            sb_puts(b, "<b style=\"color:#d1402b\">regression:</b> ");
        else if (jbool(c, "improvement") == 1)
            sb_puts(b, "<b style=\"color:#2e8b3e\">improvement:</b> ");
        html_text(b, text ? text : "(no description)");
        sb_puts(b, "</li>\n");
    }
    sb_puts(b, "</ul>\n");
}

static void html_fact(struct sbuf *b, const char *label, struct sbuf *val, int code)
{
    sb_printf(b, "<tr><th>%s</th><td>%s", label, code ? "<code>" : "");
    xml_esc(b, val->p ? val->p : "", val->len, 0);
    sb_printf(b, "%s</td></tr>\n", code ? "</code>" : "");
    sb_release(val);
}

/* A unified diff in <pre>, its added and removed lines coloured. */
static void html_diff(struct sbuf *b, const char *diff, size_t n)
{
    sb_puts(b, "<pre class=\"diff\">");
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(diff + i, '\n', n - i);
        size_t end = nl ? (size_t)(nl - diff) + 1 : n;
        int head = end - i >= 3 && (!memcmp(diff + i, "+++", 3) || !memcmp(diff + i, "---", 3));
        const char *cls = head ? NULL : diff[i] == '+' ? "add" : diff[i] == '-' ? "del" : NULL;
        if (cls)
            sb_printf(b, "<span class=\"%s\">", cls);
        xml_esc(b, diff + i, end - i, 0);
        if (cls)
            sb_puts(b, "</span>");
        i = end;
    }
    sb_puts(b, "</pre>\n");
}

/*
 * How to use the choice: the command with its knobs set and the diff of
 * each config file it goes into, from "run_with"; a file without that
 * key (older, or a run that chose nothing) gets the knob values and the
 * command as it was run.  Nothing when nothing was chosen.
 */
static void html_run_with(struct sbuf *b, const struct rdoc *d)
{
    struct sbuf v = SBUF_INIT;
    if (!d->has_best)
        return;
    sb_puts(b, "<h2>Run with</h2>\n");
    if (text_run_with(&v, d)) {
        struct sbuf cmd = SBUF_INIT;
        text_command(&cmd, d->command);
        if (v.len == cmd.len && !memcmp(v.p, cmd.p, v.len))
            sb_puts(b, "<p>The command as it was run (the choice goes into the config below):</p>\n<pre>");
        else
            sb_puts(b, "<p>The command with the chosen knobs set:</p>\n<pre>");
        sb_release(&cmd);
        xml_esc(b, v.p ? v.p : "", v.len, 0);
        sb_puts(b, "</pre>\n");
    } else {
        text_config(&v, &d->best);
        sb_puts(b, "<p>The choice: ");
        xml_esc(b, v.p ? v.p : "", v.len, 0);
        sb_release(&v);
        sb_puts(b, ", set in the command above (this results file does not record the command "
                   "with the knobs set).</p>\n");
        if (d->config) {
            sb_puts(b, "<p>Config <code>");
            html_text(b, d->config);
            sb_puts(b, "</code>: its diff is not recorded.</p>\n");
        }
    }
    sb_release(&v);
    const json_t *files = jget(d->run_with, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i), *diff = jget(f, "diff");
        const char *path = jstr(f, "path");
        int written = jbool(f, "written");
        sb_puts(b, "<p>Config <code>");
        html_text(b, path ? path : "(unknown)");
        sb_puts(b, "</code>: ");
        if (!json_is_string(diff))
            sb_puts(b, "it already holds the choice.</p>\n");
        else
            sb_puts(b, written == 1 ? "written with this change (--write):</p>\n"
                       : written == 0 ? "not written; this change applies the choice (add --write, or "
                                        "<code>patch -p0</code>):</p>\n"
                                      : "this change applies the choice:</p>\n");
        if (json_is_string(diff))
            html_diff(b, json_string_value(diff), json_string_length(diff));
    }
}

static int render_html(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen)
{
    struct sbuf b = SBUF_INIT, v = SBUF_INIT;
    char x[32], y[32], z[32], w[32];
    int good;

    text_command(&v, d->command);
    sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>autobatch: ");
    xml_esc(&b, v.p ? v.p : "", utf8_cut(v.p ? v.p : "", v.len, 120), 0);
    sb_release(&v);
    sb_printf(&b, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<h1>autobatch results</h1>\n", html_style);

    text_headline(&v, d, &good);
    if (!good && v.len)
        v.p[0] = 'N';
    sb_printf(&b, "<div class=\"verdict %s\"><b>%s</b>", good ? "good" : "bad", good ? "Chosen: " : "");
    xml_esc(&b, v.p ? v.p : "", v.len, 0);
    sb_release(&v);
    sb_puts(&b, "</div>\n");
    const struct rtrial *bad = failed_trial(d);
    if (bad) {
        sb_printf(&b, "<div class=\"verdict bad\">The command failed in trial %s (", fmt_int(x, sizeof x, bad->id));
        html_text(&b, bad->outcome);
        text_status(&v, bad);
        if (v.len)
            sb_printf(&b, ", %s", v.p);
        sb_release(&v);
        sb_puts(&b, bad->evidence ? "): <code>" : ").");
        if (bad->evidence) {
            xml_esc(&b, bad->evidence, bad->evlen, 0);
            sb_puts(&b, "</code>");
        }
        sb_puts(&b, "</div>\n");
    }

    sb_puts(&b, "<table class=\"facts\">\n");
    text_command(&v, d->command);
    html_fact(&b, "Command", &v, 1);
    text_host(&v, d);
    html_fact(&b, "Host", &v, 0);
    text_capacity(&v, d);
    html_fact(&b, "Capacity", &v, 0);
    sb_puts(&v, d->started_at ? d->started_at : DASH);
    html_fact(&b, "Started", &v, 0);
    text_space(&v, d);
    html_fact(&b, "Search space", &v, 0);
    if (d->preset || d->config) {
        sb_puts(&v, d->preset ? d->preset : DASH);
        if (d->config)
            sb_printf(&v, ", config %s", d->config);
        html_fact(&b, "Preset", &v, 0);
    }
    text_trials(&v, d);
    html_fact(&b, "Trials", &v, 0);
    text_exit(&v, d);
    html_fact(&b, "Exit", &v, 0);
    sb_puts(&b, "</table>\n");
    if (d->interrupted)
        sb_puts(&b, "<p>The search was interrupted before it finished.</p>\n");

    html_run_with(&b, d);

    if (d->baseline)
        html_regression_gate(&b, d);

    sb_printf(&b, "<div class=\"charts\">\n<div>\n<h2>Throughput against %s</h2>\n",
              d->mem_axis ? "peak memory" : "micro-batch");
    svg_scatter(&b, d);
    sb_puts(&b, "</div>\n<div>\n<h2>Largest fitting micro-batch per cell</h2>\n");
    svg_cells(&b, d);
    sb_puts(&b, "</div>\n<div>\n<h2>Trial timeline</h2>\n");
    svg_timeline(&b, d);
    sb_puts(&b, "</div>\n</div>\n");

    if (d->nc) {
        sb_puts(&b, "<h2>Largest micro-batch per cell</h2>\n<table>\n<tr><th>grad-accum</th><th class=\"l\">"
                    "checkpointing</th><th>largest fit</th><th>smallest failure</th><th>trials</th>"
                    "<th class=\"l\">note</th></tr>\n");
        for (size_t i = 0; i < d->nc; i++) {
            const struct rcell *c = &d->c[i];
            int chosen = d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt;
            sb_printf(&b, "<tr%s><td>%s</td><td class=\"l\">%s</td><td>", chosen ? " class=\"chosen\"" : "",
                      fmt_int(x, sizeof x, c->ga), ckpt_word(c->ckpt));
            if (c->bounded_by)
                sb_printf(&b, "\xe2\x89\xa5 %s", fmt_int(y, sizeof y, c->tried));
            else
                sb_puts(&b, fmt_int(y, sizeof y, c->mb));
            sb_printf(&b, "</td><td>%s</td><td>%s</td><td class=\"l\">", fmt_int(z, sizeof z, c->fail),
                      fmt_int(w, sizeof w, c->trials));
            const char *notes[3] = { bounded_note(c), c->inferred ? "inferred from other cells" : NULL, c->skipped };
            int first = 1;
            for (int k = 0; k < 3; k++) {
                if (!notes[k])
                    continue;
                if (!first)
                    sb_puts(&b, "; ");
                html_text(&b, notes[k]);
                first = 0;
            }
            sb_puts(&b, "</td></tr>\n");
        }
        sb_puts(&b, "</table>\n");
    }

    if (d->nf) {
        sb_printf(&b, "<h2>Pareto frontier</h2>\n<table>\n<tr><th>micro-batch</th><th>grad-accum</th>"
                      "<th class=\"l\">checkpointing</th><th>%s/s</th><th>peak memory</th><th></th></tr>\n", d->unit);
        for (size_t i = 0; i < d->nf; i++) {
            const struct rpoint *p = &d->f[i];
            int chosen = d->has_best && p->mb == d->best.mb && p->ga == d->best.ga && p->ckpt == d->best.ckpt;
            sb_printf(&b, "<tr%s><td>%s</td><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                      chosen ? " class=\"chosen\"" : "", fmt_int(x, sizeof x, p->mb), fmt_int(y, sizeof y, p->ga),
                      ckpt_word(p->ckpt), fmt_rate(z, sizeof z, p->sps), fmt_bytes(w, sizeof w, p->peak),
                      chosen ? "chosen" : "");
        }
        sb_puts(&b, "</table>\n");
    }

    if (d->nx) {
        sb_puts(&b, "<h2>Contradictions</h2>\n<table>\n<tr><th>grad-accum</th><th class=\"l\">checkpointing</th>"
                    "<th>failed at</th><th>larger fit</th><th class=\"l\">re-test</th></tr>\n");
        for (size_t i = 0; i < d->nx; i++) {
            const struct rcontra *c = &d->x[i];
            sb_printf(&b, "<tr><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                      fmt_int(x, sizeof x, c->ga), ckpt_word(c->ckpt), fmt_int(y, sizeof y, c->mb),
                      fmt_int(z, sizeof z, c->larger));
            html_text(&b, c->retest ? c->retest : DASH);
            sb_puts(&b, "</td></tr>\n");
        }
        sb_puts(&b, "</table>\n");
    }

    sb_puts(&b, "<h2>Trials</h2>\n");
    if (!d->nt) {
        sb_puts(&b, "<p>No trial ran.</p>\n");
    } else {
        sb_printf(&b, "<table>\n<tr><th>#</th><th>micro-batch</th><th>grad-accum</th><th class=\"l\">checkpointing</th>"
                      "<th class=\"l\">outcome</th><th>%s/s</th><th>peak memory</th><th>time</th>"
                      "<th class=\"l\">notes</th></tr>\n", d->unit);
        for (size_t i = 0; i < d->nt; i++) {
            const struct rtrial *t = &d->t[i];
            char s[32];
            sb_printf(&b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td class=\"l\">%s</td><td class=\"l\">"
                          "<span class=\"sw\" style=\"background:%s\"></span>",
                      t->chosen ? " class=\"chosen\"" : "", fmt_int(x, sizeof x, t->id), fmt_int(y, sizeof y, t->mb),
                      fmt_int(z, sizeof z, t->ga), ckpt_word(t->ckpt), oc_colour[t->oc]);
            html_text(&b, t->outcome);
            sb_printf(&b, "</td><td>%s</td><td>%s</td><td>%s</td><td class=\"ev\">", fmt_rate(x, sizeof x, t->sps),
                      fmt_bytes(y, sizeof y, t->peak), fmt_secs(s, sizeof s, t->wall));
            int any = 0;
            if (t->chosen) {
                sb_puts(&b, "chosen");
                any = 1;
            }
            if (t->retest) {
                sb_puts(&b, any ? "; retest" : "retest");
                any = 1;
            }
            if (t->oc != OC_FIT && t->oc != OC_OOM) {
                text_status(&v, t);
                if (v.len) {
                    sb_printf(&b, "%s%s", any ? "; " : "", v.p);
                    any = 1;
                }
                sb_release(&v);
            }
            if (t->evidence) {
                sb_puts(&b, any ? ": " : "");
                xml_esc(&b, t->evidence, t->evlen, 0);
            }
            sb_puts(&b, "</td></tr>\n");
        }
        sb_puts(&b, "</table>\n");
    }
    sb_puts(&b, "</main>\n</body>\n</html>\n");
    if (b.oom) {
        sb_release(&b);
        snprintf(err, errlen, "cannot render the report: out of memory");
        return -1;
    }
    *out = b.p;
    if (len)
        *len = b.len;
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
    case REPORT_MARKDOWN: rc = render_markdown(&d, SIZE_MAX, out, len, err, errlen); break;
    case REPORT_HTML: rc = render_html(&d, out, len, err, errlen); break;
    case REPORT_JUNIT: rc = render_junit(&d, out, len, err, errlen); break;
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
    int rc = render_markdown(&d, max_bytes, out, len, err, errlen);
    rdoc_release(&d);
    return rc;
}
