/* SPDX-License-Identifier: MIT */
/*
 * webhook_payload: the bodies the webhook sends (webhook_payload() in
 * webhook.h): the results document itself for a generic endpoint, or a
 * short summary shaped for Slack, Discord or Microsoft Teams.
 *
 * The results are read once into a struct summary of plain text; each
 * chat format then escapes that text for its markup and cuts it to its
 * service's limits, with the one escaper below (sb_put_esc), so that no
 * format can exceed a limit or split a UTF-8 character whatever the size
 * of the results.  Text is built with sbuf, JSON with jansson.
 *
 * Library code: returns statuses, prints nothing, holds no state.
 */
#include "output/webhook.h"
#include "output/webhook_int.h"
#include "util/errbuf.h"
#include "util/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ */
/* Escaping and cutting                                              */

/* Bytes in the UTF-8 character starting at s (1 for a stray byte, and
 * never past a NUL). */
static size_t u8len(const char *s)
{
    unsigned char c = (unsigned char)s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            return 1;
    return n;
}

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026, 3 bytes */

/* How a piece of text is escaped for the markup it lands in. */
enum esc {
    ESC_PLAIN,          /* Teams, Slack plain_text: control characters to blanks */
    ESC_SLACK,          /* Slack mrkdwn: &, <, > as entities */
    ESC_SLACK_CODE,     /* inside `...` in Slack: entities, and ` as ' */
    ESC_DISCORD,        /* Discord markdown: \ before * _ ~ ` | > \ */
    ESC_CODE,           /* inside `...` in Discord: ` as ' */
};

/* The escaped form of the character at s, in out (at most 8 bytes);
 * returns its length, and *in the bytes of s consumed. */
static size_t esc_unit(const char *s, enum esc e, char *out, size_t *in)
{
    unsigned char c = (unsigned char)*s;
    *in = u8len(s);
    if (c < 0x20 || c == 0x7f) {
        out[0] = ' ';
        return 1;
    }
    switch (e) {
    case ESC_SLACK:
    case ESC_SLACK_CODE:
        if (c == '&')
            return (size_t)sprintf(out, "&amp;");
        if (c == '<')
            return (size_t)sprintf(out, "&lt;");
        if (c == '>')
            return (size_t)sprintf(out, "&gt;");
        if (c == '`' && e == ESC_SLACK_CODE) {
            out[0] = '\'';
            return 1;
        }
        break;
    case ESC_DISCORD:
        if (strchr("\\*_~`|>", c)) {
            out[0] = '\\';
            out[1] = (char)c;
            return 2;
        }
        break;
    case ESC_CODE:
        if (c == '`') {
            out[0] = '\'';
            return 1;
        }
        break;
    case ESC_PLAIN:
        break;
    }
    memcpy(out, s, *in);
    return *in;
}

/* Append s escaped, at most max bytes of it: when the whole does not
 * fit, as many whole characters as leave room for an ellipsis, then the
 * ellipsis.  Never splits a UTF-8 character or an escape. */
static void sb_put_esc(struct sbuf *b, const char *s, size_t max, enum esc e)
{
    char u[8];
    size_t in, total = 0;
    for (const char *p = s; *p; p += in)
        total += esc_unit(p, e, u, &in);
    int cut = total > max;
    size_t room = cut ? (max >= 3 ? max - 3 : 0) : max, used = 0;
    for (const char *p = s; *p; p += in) {
        size_t n = esc_unit(p, e, u, &in);
        if (used + n > room)
            break;
        sb_put(b, u, n);
        used += n;
    }
    if (cut && max >= 3)
        sb_puts(b, ELLIPSIS);
}

/* Append a list of lines (each escaped and cut to per_line bytes),
 * joined by newlines, keeping b at most limit bytes: lines that do not
 * fit are summed up as "... and N more <what>". */
static void sb_put_list(struct sbuf *b, size_t limit, char *const *lines, size_t n,
                        const char *prefix, size_t per_line, enum esc e, const char *what)
{
    const size_t tail = 48; /* room for "\n… and 1234567 more changes" */
    size_t i;
    for (i = 0; i < n; i++) {
        struct sbuf t = SBUF_INIT;
        if (b->len)
            sb_puts(&t, "\n");
        sb_puts(&t, prefix);
        sb_put_esc(&t, lines[i], per_line, e);
        if (t.oom) {
            b->oom = 1;
            free(t.p);
            return;
        }
        size_t reserve = i + 1 < n ? tail : 0;
        int fits = b->len + t.len + reserve <= limit;
        if (fits)
            sb_put(b, t.p, t.len);
        free(t.p);
        if (!fits)
            break;
    }
    if (i < n) {
        char more[64];
        snprintf(more, sizeof more, "%s" ELLIPSIS " and %zu more %s", b->len ? "\n" : "",
                 n - i, what);
        if (b->len + strlen(more) <= limit)
            sb_puts(b, more);
    }
}

/* ================================================================ */
/* The summary the chat formats share                                */

/* Limits, in bytes (see webhook.h). */
#define DISCORD_CONTENT_MAX 2000
#define DISCORD_TITLE_MAX 256
#define DISCORD_DESC_MAX 1024
#define DISCORD_FIELD_MAX 1024
#define DISCORD_SHORT_FIELD_MAX 256
#define DISCORD_FOOTER_MAX 256
#define DISCORD_TOTAL_MAX 6000
#define SLACK_SECTION_MAX 3000
#define TEAMS_MAX_CELLS 40
#define TEAMS_MAX_CHANGES 20
#define PIECE_MAX 200        /* a GPU name, a host name, a unit ... */
#define COMMAND_MAX 900      /* the command line in any format */
#define LINE_MAX_BYTES 300   /* one line of a list */

/* What the chat formats show, as plain text; each format escapes and
 * cuts it for its markup.  Strings are never NULL unless oom is set. */
struct summary {
    char *headline;     /* one line: "autobatch on vm: micro_batch 16 × ..." */
    char *title;        /* the outcome alone */
    char *throughput;
    char *trials;
    char *exit;
    char *gpu;
    char *started;
    char *command;
    size_t ncells;
    char **cell_label, **cell_value, **cell_line;
    int has_baseline, regression, different_command;
    size_t nchanges;
    char **change;      /* regressions first */
    int *change_regression; /* 1 regression, 2 improvement, 0 other */
    int ok;             /* a configuration was chosen, exit 0 */
    int oom;
};

static char *sdup(struct summary *s, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char *r = n < 0 ? NULL : strdup(tmp);
    if (!r)
        s->oom = 1;
    return r;
}

/* The value of a JSON number as text ("?" when not a number). */
static void fmt_num(const json_t *v, char *out, size_t len)
{
    if (json_is_integer(v))
        snprintf(out, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, len, "%g", json_real_value(v));
    else
        snprintf(out, len, "?");
}

/* A JSON string cut to max bytes on a character boundary, into out. */
static void fmt_str(const json_t *v, const char *dflt, char *out, size_t outlen, size_t max)
{
    const char *s = json_is_string(v) ? json_string_value(v) : dflt;
    struct sbuf b = SBUF_INIT;
    sb_put_esc(&b, s, max < outlen ? max : outlen - 1, ESC_PLAIN);
    snprintf(out, outlen, "%s", b.oom || !b.p ? "" : b.p);
    free(b.p);
}

static const char *ckpt_text(const json_t *v)
{
    return json_is_true(v) ? "on" : json_is_false(v) ? "off" : "?";
}

static const char *exit_text(long code)
{
    switch (code) {
    case 0: return "a configuration was chosen";
    case 2: return "bad usage or bad input";
    case 3: return "nothing fits, even the smallest candidate";
    case 4: return "the command failed for a reason other than memory";
    case 5: return "the budget ran out before any candidate fitted";
    case 6: return "a regression against the baseline";
    case 130: return "interrupted";
    default: return "no configuration was chosen";
    }
}

static void human_seconds(double s, char *out, size_t len)
{
    if (s < 0 || s != s)
        snprintf(out, len, "?");
    else if (s < 60)
        snprintf(out, len, "%.1f s", s);
    else if (s < 3600)
        snprintf(out, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else if (s < 1e9)
        snprintf(out, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else
        snprintf(out, len, "%.0f s", s);
}

/* The command line, words joined by blanks, quoted where they hold
 * blanks or quotes so the line can be pasted into a shell. */
static char *join_command(const json_t *cmd)
{
    struct sbuf b = SBUF_INIT;
    size_t i;
    json_t *w;
    json_array_foreach(cmd, i, w) {
        if (b.len > 4 * COMMAND_MAX)
            break;  /* the formats show at most COMMAND_MAX bytes of it */
        const char *s = json_is_string(w) ? json_string_value(w) : "?";
        if (i)
            sb_puts(&b, " ");
        if (!*s || strpbrk(s, " \t\n'\"\\$`")) {
            sb_puts(&b, "'");
            for (const char *p = s; *p; p++)
                if (*p == '\'')
                    sb_puts(&b, "'\\''");
                else
                    sb_put(&b, p, 1);
            sb_puts(&b, "'");
        } else {
            sb_puts(&b, s);
        }
    }
    return sb_take(&b);
}

/* Free n strings of l, then l (NULL is fine). */
static void free_lines(char **l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

static void summary_release(struct summary *s)
{
    char *const texts[] = { s->headline, s->title, s->throughput, s->trials,
                            s->exit,     s->gpu,   s->started,    s->command };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        free(texts[i]);
    free_lines(s->cell_label, s->ncells);
    free_lines(s->cell_value, s->ncells);
    free_lines(s->cell_line, s->ncells);
    free_lines(s->change, s->nchanges);
    free(s->change_regression);
    memset(s, 0, sizeof *s);
}

static void summary_cells(struct summary *s, const json_t *max_fit)
{
    size_t n = json_array_size(max_fit);
    if (!n)
        return;
    s->cell_label = calloc(n, sizeof *s->cell_label);
    s->cell_value = calloc(n, sizeof *s->cell_value);
    s->cell_line = calloc(n, sizeof *s->cell_line);
    if (!s->cell_label || !s->cell_value || !s->cell_line) {
        s->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(max_fit, i);
        char ga[32], mb[32], sf[32], ltf[32], why[PIECE_MAX + 1];
        fmt_num(json_object_get(c, "grad_accum"), ga, sizeof ga);
        fmt_num(json_object_get(c, "micro_batch"), mb, sizeof mb);
        fmt_num(json_object_get(c, "smallest_fail"), sf, sizeof sf);
        fmt_num(json_object_get(c, "largest_tried_fit"), ltf, sizeof ltf);
        const json_t *skipped = json_object_get(c, "skipped");
        const json_t *bounded = json_object_get(c, "bounded_by");
        int has_sf = json_is_number(json_object_get(c, "smallest_fail"));

        /* A number when there is one (searched, or inferred from other
         * cells), else why there is none. */
        char value[PIECE_MAX + 128];
        if (json_is_string(skipped))
            fmt_str(skipped, "", why, sizeof why, PIECE_MAX);
        const json_t *ntr = json_object_get(c, "trials");
        if (json_is_number(json_object_get(c, "micro_batch"))) {
            int inferred = json_is_true(json_object_get(c, "inferred"));
            snprintf(value, sizeof value, "%s%s%s%s%s%s%s", mb, has_sf ? " (" : "",
                     has_sf ? sf : "", has_sf ? " fails)" : "", inferred ? ", inferred" : "",
                     json_is_string(skipped) ? ", not run: " : "",
                     json_is_string(skipped) ? why : "");
        } else if (json_is_string(skipped)) {
            snprintf(value, sizeof value, "not run: %s", why);
        } else if (json_is_string(bounded)) {
            /* As the reports say it: only batch.max is the range's top. */
            const char *why_b = !strcmp(json_string_value(bounded), "pruned")
                                    ? "pruned: could not beat the fastest fit"
                                : !strcmp(json_string_value(bounded), "batch.max")
                                    ? "the top of the range fitted"
                                    : json_string_value(bounded);
            if (json_is_number(json_object_get(c, "largest_tried_fit")))
                snprintf(value, sizeof value, "\xe2\x89\xa5 %s (%.*s)", ltf, PIECE_MAX, why_b);
            else
                snprintf(value, sizeof value, "%.*s", PIECE_MAX, why_b);
        } else if (has_sf) {
            snprintf(value, sizeof value, "no fit seen (%s fails)", sf);
        } else if (json_is_integer(ntr) && json_integer_value(ntr) == 0) {
            snprintf(value, sizeof value, "not searched");
        } else {
            snprintf(value, sizeof value, "unknown");
        }
        s->cell_label[i] = sdup(s, "grad_accum %s, checkpointing %s", ga,
                                ckpt_text(json_object_get(c, "checkpointing")));
        s->cell_value[i] = sdup(s, "%s", value);
        s->cell_line[i] = sdup(s, "grad_accum %s, checkpointing %s: %s", ga,
                               ckpt_text(json_object_get(c, "checkpointing")), value);
        s->ncells = i + 1;
        if (s->oom)
            return;
    }
}

static void summary_baseline(struct summary *s, const json_t *baseline)
{
    if (!json_is_object(baseline))
        return;
    s->has_baseline = 1;
    const json_t *changes = json_object_get(baseline, "changes");
    size_t n = json_array_size(changes);
    if (n) {
        s->change = calloc(n, sizeof *s->change);
        s->change_regression = calloc(n, sizeof *s->change_regression);
        if (!s->change || !s->change_regression) {
            s->oom = 1;
            return;
        }
    }
    /* Regressions first, then the other changes, each in file order. */
    int any = 0;
    for (int pass = 1; pass >= 0; pass--) {
        size_t i;
        json_t *c;
        json_array_foreach(changes, i, c) {
            int reg = json_is_true(json_object_get(c, "regression"));
            if (reg != pass)
                continue;
            any |= reg;
            const json_t *t = json_object_get(c, "text");
            struct sbuf b = SBUF_INIT;
            sb_put_esc(&b, json_is_string(t) ? json_string_value(t) : "(no text)",
                       LINE_MAX_BYTES, ESC_PLAIN);
            char *line = sb_take(&b);
            if (!line) {
                s->oom = 1;
                return;
            }
            s->change[s->nchanges] = line;
            s->change_regression[s->nchanges++] =
                reg ? 1 : json_is_true(json_object_get(c, "improvement")) ? 2 : 0;
        }
    }
    s->different_command = json_is_true(json_object_get(baseline, "different_command"));
    s->regression = json_is_true(json_object_get(baseline, "regression")) || any;
}

static int summary_make(struct summary *s, const json_t *r)
{
    memset(s, 0, sizeof *s);
    const json_t *space = json_object_get(r, "space");
    const json_t *best = json_object_get(r, "best");
    const json_t *summ = json_object_get(r, "summary");
    const json_t *host = json_object_get(r, "host");
    const json_t *gpus = json_object_get(host, "gpus");

    char unit[64], hostname[PIECE_MAX + 1], gpu[PIECE_MAX + 1], started[64];
    fmt_str(json_object_get(space, "unit"), "samples", unit, sizeof unit, 32);
    fmt_str(json_object_get(host, "hostname"), "", hostname, sizeof hostname, 100);
    fmt_str(json_object_get(r, "started_at"), "unknown", started, sizeof started, 40);

    long code = -1;
    const json_t *ex = json_object_get(summ, "exit");
    if (json_is_integer(ex))
        code = (long)json_integer_value(ex);
    int interrupted = json_is_true(json_object_get(summ, "interrupted"));
    int has_best = json_is_object(best) && json_is_number(json_object_get(best, "micro_batch"));

    /* The outcome. */
    char outcome[512];
    if (has_best) {
        char mb[32], ga[32];
        fmt_num(json_object_get(best, "micro_batch"), mb, sizeof mb);
        fmt_num(json_object_get(best, "grad_accum"), ga, sizeof ga);
        snprintf(outcome, sizeof outcome, "micro_batch %s \xc3\x97 grad_accum %s, checkpointing %s",
                 mb, ga, ckpt_text(json_object_get(best, "checkpointing")));
    } else {
        snprintf(outcome, sizeof outcome, "no configuration chosen: %s", exit_text(code));
    }
    const json_t *sps = has_best ? json_object_get(best, "samples_per_s") : NULL;
    if (json_is_number(sps))
        s->throughput = sdup(s, "%.1f %s/s", json_number_value(sps), unit);
    else
        s->throughput = sdup(s, has_best ? "unknown" : "none");
    s->title = sdup(s, "%s", outcome);

    /* Trials and time: the summary's, else counted. */
    const json_t *nt = json_object_get(summ, "trials");
    char ntrials[32], wall[32];
    if (json_is_number(nt))
        fmt_num(nt, ntrials, sizeof ntrials);
    else
        snprintf(ntrials, sizeof ntrials, "%zu", json_array_size(json_object_get(r, "trials")));
    const json_t *ws = json_object_get(summ, "wall_s");
    human_seconds(json_is_number(ws) ? json_number_value(ws) : -1, wall, sizeof wall);
    s->trials = sdup(s, "%s trial%s in %s", ntrials, strcmp(ntrials, "1") ? "s" : "", wall);

    if (code >= 0)
        s->exit = sdup(s, "%ld (%s)%s", code, exit_text(code), interrupted && code != 130 ? ", interrupted" : "");
    else
        s->exit = sdup(s, "unknown");
    s->ok = has_best && code == 0;

    /* The GPU, and the host. */
    size_t ngpus = json_array_size(gpus);
    const json_t *g0 = json_array_get(gpus, 0);
    if (ngpus) {
        char more[32] = "";
        fmt_str(json_object_get(g0, "name"), "", gpu, sizeof gpu, PIECE_MAX);
        if (!*gpu)
            snprintf(gpu, sizeof gpu, "an unnamed GPU");
        if (ngpus > 1)
            snprintf(more, sizeof more, " (%zu GPUs)", ngpus);
        const json_t *mem = json_object_get(g0, "memory_total_bytes");
        char memtxt[48] = "";
        if (json_is_number(mem) && json_number_value(mem) > 0)
            snprintf(memtxt, sizeof memtxt, ", %.0f GiB", json_number_value(mem) / 1073741824.0);
        s->gpu = sdup(s, "%s%s%s%s%s", gpu, memtxt, more, *hostname ? " on " : "", hostname);
    } else {
        s->gpu = sdup(s, "no GPU%s%s", *hostname ? " on " : "", hostname);
    }
    s->started = sdup(s, "%s", started);

    const json_t *cmd = json_object_get(r, "command");
    s->command = json_is_array(cmd) ? join_command(cmd) : strdup("");
    if (!s->command)
        s->oom = 1;

    summary_cells(s, json_object_get(r, "max_fit"));
    summary_baseline(s, json_object_get(r, "baseline"));

    s->headline = sdup(s, "%sautobatch%s%s: %s%s%s%s", s->regression ? "\xe2\x9a\xa0 " : "",
                       *hostname ? " on " : "", hostname, outcome,
                       json_is_number(sps) ? ", " : "", json_is_number(sps) ? s->throughput : "",
                       s->regression ? " (regression against the baseline)" : "");
    return s->oom ? -1 : 0;
}

/* A matrix (autobatch.matrix/1): one line per row, the row's name and
 * its choice (or why there is none), in the cells' place. */
static int summary_make_matrix(struct summary *s, const json_t *m)
{
    memset(s, 0, sizeof *s);
    const json_t *rows = json_object_get(m, "rows");
    size_t n = json_array_size(rows), chosen = 0, worst = 0;
    if (n) {
        s->cell_label = calloc(n, sizeof *s->cell_label);
        s->cell_value = calloc(n, sizeof *s->cell_value);
        s->cell_line = calloc(n, sizeof *s->cell_line);
        if (!s->cell_label || !s->cell_value || !s->cell_line)
            s->oom = 1;
    }
    for (size_t i = 0; i < n && !s->oom; i++) {
        const json_t *row = json_array_get(rows, i), *best = json_object_get(row, "best");
        const json_t *ex = json_object_get(row, "exit");
        char name[PIECE_MAX + 1], value[PIECE_MAX + 128], why[PIECE_MAX + 1];
        fmt_str(json_object_get(row, "machine"), "", name, sizeof name, PIECE_MAX);
        if (!*name)
            fmt_str(json_object_get(row, "name"), "?", name, sizeof name, PIECE_MAX);
        long code = json_is_integer(ex) ? (long)json_integer_value(ex) : -1;
        if (code > 0 && (size_t)code > worst)
            worst = (size_t)code;
        if (json_is_object(best) && json_is_number(json_object_get(best, "micro_batch"))) {
            char mb[32], ga[32], sps[48] = "";
            fmt_num(json_object_get(best, "micro_batch"), mb, sizeof mb);
            fmt_num(json_object_get(best, "grad_accum"), ga, sizeof ga);
            const json_t *v = json_object_get(row, "samples_per_s");
            if (json_is_number(v))
                snprintf(sps, sizeof sps, ", %.1f/s", json_number_value(v));
            snprintf(value, sizeof value, "micro_batch %s \xc3\x97 grad_accum %s, checkpointing %s%s",
                     mb, ga, ckpt_text(json_object_get(best, "checkpointing")), sps);
            chosen++;
        } else if (json_is_string(json_object_get(row, "slurm_pending"))) {
            fmt_str(json_object_get(row, "slurm_pending"), "", why, sizeof why, PIECE_MAX);
            snprintf(value, sizeof value, "PENDING in the queue (%s)", why);
        } else {
            snprintf(value, sizeof value, "no configuration chosen: %s", exit_text(code));
        }
        s->cell_label[i] = sdup(s, "%s", name);
        s->cell_value[i] = sdup(s, "%s", value);
        s->cell_line[i] = sdup(s, "%s: %s", name, value);
        s->ncells = i + 1;
    }
    s->ok = n && chosen == n;
    s->title = sdup(s, "%zu of %zu with a configuration chosen", chosen, n);
    s->throughput = sdup(s, "per row");
    s->trials = sdup(s, "per row");
    s->exit = worst ? sdup(s, "%zu (%s) in some rows", worst, exit_text((long)worst))
                    : sdup(s, "0 in every row");
    s->gpu = sdup(s, "per row");
    s->started = sdup(s, "-");
    const json_t *cmd = json_object_get(json_array_get(rows, 0), "command");
    s->command = json_is_array(cmd) && json_is_true(json_object_get(m, "same_command"))
                     ? join_command(cmd) : strdup("");
    if (!s->command)
        s->oom = 1;
    s->headline = sdup(s, "autobatch matrix: %zu of %zu with a configuration chosen", chosen, n);
    return s->oom ? -1 : 0;
}

/* ================================================================ */
/* The chat formats                                                  */

/* A jansson builder: a NULL value or a failed insertion marks *bad. */
static void push(json_t *a, json_t *v, int *bad)
{
    if (!a || !v || json_array_append_new(a, v))
        *bad = 1;
}

/* What a builder hands back: doc, or NULL (doc released) when bad. */
static json_t *built(json_t *doc, int bad)
{
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* A string escaped and cut to max bytes, as a JSON string. */
static json_t *jstr(const char *s, size_t max, enum esc e)
{
    struct sbuf b = SBUF_INIT;
    sb_put_esc(&b, s, max, e);
    char *t = sb_take(&b);
    json_t *j = t ? json_string(t) : NULL;
    free(t);
    return j;
}

static json_t *jsb(struct sbuf *b)
{
    char *t = sb_take(b);
    json_t *j = t ? json_string(t) : NULL;
    free(t);
    memset(b, 0, sizeof *b);
    return j;
}

static json_t *slack_section(struct sbuf *b)
{
    json_t *sec = json_object(), *txt = json_object();
    int bad = 0;
    webhook_put(txt, "type", json_string("mrkdwn"), &bad);
    webhook_put(txt, "text", jsb(b), &bad);
    webhook_put(sec, "type", json_string("section"), &bad);
    webhook_put(sec, "text", txt, &bad);
    return built(sec, bad);
}

/* The baseline's changes, each prefixed with the marker of its kind;
 * NULL when there are none or memory ran out. */
static char **marked_changes(const struct summary *s, const char *reg, const char *better,
                             const char *other)
{
    char **l = s->nchanges ? calloc(s->nchanges, sizeof *l) : NULL;
    for (size_t i = 0; l && i < s->nchanges; i++) {
        struct sbuf b = SBUF_INIT;
        sb_puts(&b, s->change_regression[i] == 1 ? reg : s->change_regression[i] == 2 ? better : other);
        sb_puts(&b, s->change[i]);
        if (!(l[i] = sb_take(&b))) {
            free_lines(l, i);
            return NULL;
        }
    }
    return l;
}

/* Append the baseline's changes to b as sb_put_list() does, at most
 * limit bytes, each line after the marker of its kind; *bad is set when
 * memory runs out. */
static void sb_put_changes(struct sbuf *b, const struct summary *s, size_t limit, enum esc e,
                           const char *reg, const char *better, const char *other, int *bad)
{
    char **lines = marked_changes(s, reg, better, other);
    if (s->nchanges && !lines)
        *bad = 1;
    else
        sb_put_list(b, limit, lines, s->nchanges, "", LINE_MAX_BYTES, e, "changes");
    free_lines(lines, s->nchanges);
}

static json_t *payload_slack(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *blocks = json_array();
    struct sbuf b = SBUF_INIT;

    webhook_put(root, "text", jstr(s->headline, SLACK_SECTION_MAX, ESC_SLACK), &bad);

    sb_puts(&b, "*");
    sb_put_esc(&b, s->headline, SLACK_SECTION_MAX - 2, ESC_SLACK);
    sb_puts(&b, "*");
    push(blocks, slack_section(&b), &bad);

    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU", "Started" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu, s->started };
    for (int i = 0; i < 5; i++) {
        sb_printf(&b, "%s*%s:* ", i ? "\n" : "", names[i]);
        sb_put_esc(&b, vals[i], PIECE_MAX + 100, ESC_SLACK);
    }
    push(blocks, slack_section(&b), &bad);

    if (s->ncells) {
        sb_puts(&b, "*Largest micro-batch per cell*");
        sb_put_list(&b, SLACK_SECTION_MAX, s->cell_line, s->ncells, "\xe2\x80\xa2 ",
                    LINE_MAX_BYTES, ESC_SLACK, "cells");
        push(blocks, slack_section(&b), &bad);
    }
    if (s->has_baseline) {
        sb_printf(&b, "*%s*%s", s->regression ? ":warning: Regression against the baseline"
                                              : "No regression against the baseline",
                  s->different_command ? " (the baseline ran a different command)" : "");
        sb_put_changes(&b, s, SLACK_SECTION_MAX, ESC_SLACK, ":warning: ", ":arrow_up: ",
                       "\xe2\x80\xa2 ", &bad);
        push(blocks, slack_section(&b), &bad);
    }
    if (*s->command) {
        sb_puts(&b, "*Command:* `");
        sb_put_esc(&b, s->command, COMMAND_MAX, ESC_SLACK_CODE);
        sb_puts(&b, "`");
        push(blocks, slack_section(&b), &bad);
    }
    webhook_put(root, "blocks", blocks, &bad);
    free(b.p);
    return built(root, bad);
}

static json_t *discord_field(const char *name, json_t *value, int inl, int *bad)
{
    json_t *f = json_object();
    webhook_put(f, "name", json_string(name), bad);
    webhook_put(f, "value", value, bad);
    webhook_put(f, "inline", json_boolean(inl), bad);
    return f;
}

/* Characters Discord counts towards an embed's 6000: title,
 * description, field names and values, footer text. */
static size_t discord_embed_size(const json_t *e)
{
    size_t n = json_string_length(json_object_get(e, "title")) +
               json_string_length(json_object_get(e, "description")) +
               json_string_length(json_object_get(json_object_get(e, "footer"), "text"));
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(e, "fields"), i, f)
        n += json_string_length(json_object_get(f, "name")) +
             json_string_length(json_object_get(f, "value"));
    return n;
}

static json_t *payload_discord(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *embeds = json_array(), *e = json_object(),
           *fields = json_array(), *footer = json_object(), *mentions = json_object();
    struct sbuf b = SBUF_INIT;

    sb_puts(&b, "**");
    sb_put_esc(&b, s->headline, DISCORD_CONTENT_MAX - 4, ESC_DISCORD);
    sb_puts(&b, "**");
    webhook_put(root, "content", jsb(&b), &bad);

    webhook_put(e, "title", jstr(s->title, DISCORD_TITLE_MAX, ESC_PLAIN), &bad);
    if (*s->command) {
        sb_puts(&b, "`");
        sb_put_esc(&b, s->command, COMMAND_MAX, ESC_CODE);
        sb_puts(&b, "`");
        webhook_put(e, "description", jsb(&b), &bad);
    }
    /* Green when chosen without regression, red on a regression, amber
     * when nothing was chosen. */
    webhook_put(e, "color", json_integer(s->regression ? 0xE01E5A : s->ok ? 0x2EB67D : 0xECB22E),
                &bad);

    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu };
    for (int i = 0; i < 4; i++)
        push(fields, discord_field(names[i], jstr(vals[i], DISCORD_SHORT_FIELD_MAX, ESC_DISCORD), 1,
                                   &bad), &bad);
    if (s->ncells) {
        sb_put_list(&b, DISCORD_FIELD_MAX, s->cell_line, s->ncells, "", LINE_MAX_BYTES,
                    ESC_DISCORD, "cells");
        push(fields, discord_field("Largest micro-batch per cell", jsb(&b), 0, &bad), &bad);
    }
    if (s->has_baseline) {
        sb_put_changes(&b, s, DISCORD_FIELD_MAX, ESC_DISCORD, "\xe2\x9a\xa0 ", "\xe2\x96\xb2 ",
                       "\xe2\x80\xa2 ", &bad);
        if (!s->nchanges)
            sb_puts(&b, "no changes");
        char name[128];
        snprintf(name, sizeof name, "%s%s",
                 s->regression ? "Regression against the baseline" : "Against the baseline",
                 s->different_command ? " (a different command)" : "");
        push(fields, discord_field(name, jsb(&b), 0, &bad), &bad);
    }
    webhook_put(e, "fields", fields, &bad);
    sb_puts(&b, "autobatch.results/1, started ");
    sb_put_esc(&b, s->started, 64, ESC_PLAIN);
    webhook_put(footer, "text", jsb(&b), &bad);
    webhook_put(e, "footer", footer, &bad);
    push(embeds, e, &bad);
    webhook_put(root, "embeds", embeds, &bad);
    webhook_put(mentions, "parse", json_array(), &bad);
    webhook_put(root, "allowed_mentions", mentions, &bad);
    free(b.p);
    return built(root, bad || discord_embed_size(e) > DISCORD_TOTAL_MAX);
}

static json_t *teams_text(const char *text, size_t max, const char *weight, const char *color,
                          int subtle, int *bad)
{
    json_t *t = json_object();
    webhook_put(t, "type", json_string("TextBlock"), bad);
    webhook_put(t, "text", jstr(text, max, ESC_PLAIN), bad);
    webhook_put(t, "wrap", json_true(), bad);
    if (weight)
        webhook_put(t, "weight", json_string(weight), bad);
    if (color)
        webhook_put(t, "color", json_string(color), bad);
    if (subtle)
        webhook_put(t, "isSubtle", json_true(), bad);
    return t;
}

static json_t *teams_fact(const char *title, const char *value, int *bad)
{
    json_t *f = json_object();
    webhook_put(f, "title", jstr(title, PIECE_MAX, ESC_PLAIN), bad);
    webhook_put(f, "value", jstr(value, LINE_MAX_BYTES + 100, ESC_PLAIN), bad);
    return f;
}

static json_t *teams_factset(json_t *facts, int *bad)
{
    json_t *fs = json_object();
    webhook_put(fs, "type", json_string("FactSet"), bad);
    webhook_put(fs, "facts", facts, bad);
    return fs;
}

static json_t *payload_teams(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *atts = json_array(), *att = json_object(),
           *card = json_object(), *body = json_array(), *facts = json_array();
    char more[64];

    push(body, teams_text(s->headline, 1000, "Bolder",
                          s->regression ? "Attention" : s->ok ? "Good" : "Warning", 0, &bad), &bad);
    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU", "Started" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu, s->started };
    for (int i = 0; i < 5; i++)
        push(facts, teams_fact(names[i], vals[i], &bad), &bad);
    push(body, teams_factset(facts, &bad), &bad);

    if (s->ncells) {
        push(body, teams_text("Largest micro-batch per cell", 100, "Bolder", NULL, 0, &bad), &bad);
        json_t *cells = json_array();
        for (size_t i = 0; i < s->ncells && i < TEAMS_MAX_CELLS; i++)
            push(cells, teams_fact(s->cell_label[i], s->cell_value[i], &bad), &bad);
        if (s->ncells > TEAMS_MAX_CELLS) {
            snprintf(more, sizeof more, "and %zu more cells", s->ncells - TEAMS_MAX_CELLS);
            push(cells, teams_fact(ELLIPSIS, more, &bad), &bad);
        }
        push(body, teams_factset(cells, &bad), &bad);
    }
    if (s->has_baseline) {
        char head[128];
        snprintf(head, sizeof head, "%s%s",
                 s->regression ? "\xe2\x9a\xa0 Regression against the baseline"
                               : "No regression against the baseline",
                 s->different_command ? " (the baseline ran a different command)" : "");
        push(body, teams_text(head, sizeof head, "Bolder", s->regression ? "Attention" : NULL, 0,
                              &bad), &bad);
        if (s->nchanges) {
            json_t *ch = json_array();
            for (size_t i = 0; i < s->nchanges && i < TEAMS_MAX_CHANGES; i++)
                push(ch, teams_fact(s->change_regression[i] == 1 ? "regression"
                                    : s->change_regression[i] == 2 ? "improvement" : "change",
                                    s->change[i], &bad), &bad);
            if (s->nchanges > TEAMS_MAX_CHANGES) {
                snprintf(more, sizeof more, "and %zu more changes", s->nchanges - TEAMS_MAX_CHANGES);
                push(ch, teams_fact(ELLIPSIS, more, &bad), &bad);
            }
            push(body, teams_factset(ch, &bad), &bad);
        }
    }
    if (*s->command) {
        json_t *t = teams_text(s->command, COMMAND_MAX, NULL, NULL, 1, &bad);
        webhook_put(t, "fontType", json_string("Monospace"), &bad);
        push(body, t, &bad);
    }

    webhook_put(card, "$schema", json_string("http://adaptivecards.io/schemas/adaptive-card.json"),
                &bad);
    webhook_put(card, "type", json_string("AdaptiveCard"), &bad);
    webhook_put(card, "version", json_string("1.4"), &bad);
    webhook_put(card, "body", body, &bad);
    webhook_put(att, "contentType", json_string("application/vnd.microsoft.card.adaptive"), &bad);
    webhook_put(att, "contentUrl", json_null(), &bad);
    webhook_put(att, "content", card, &bad);
    push(atts, att, &bad);
    webhook_put(root, "type", json_string("message"), &bad);
    webhook_put(root, "attachments", atts, &bad);
    return built(root, bad);
}

int webhook_payload(const json_t *results, enum webhook_format f, char **body, size_t *len,
                    char *err, size_t errlen)
{
    *body = NULL;
    *len = 0;
    if (!json_is_object(results)) {
        errbuf_set(err, errlen, "the results are not a json object");
        return -1;
    }
    json_t *doc = NULL;
    struct summary s;
    if (f == WEBHOOK_GENERIC) {
        doc = json_incref((json_t *)results);
    } else {
        const char *schema = json_string_value(json_object_get(results, "schema"));
        int matrix = schema && !strcmp(schema, "autobatch.matrix/1");
        if ((matrix ? summary_make_matrix(&s, results) : summary_make(&s, results)) < 0) {
            summary_release(&s);
            errbuf_set(err, errlen, "out of memory building the webhook payload");
            return -1;
        }
        doc = f == WEBHOOK_SLACK ? payload_slack(&s)
            : f == WEBHOOK_DISCORD ? payload_discord(&s)
            : payload_teams(&s);
        summary_release(&s);
    }
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) {
        errbuf_set(err, errlen, "cannot build the %s webhook payload", webhook_format_name(f));
        return -1;
    }
    *body = text;
    *len = strlen(text);
    return 0;
}
