/* SPDX-License-Identifier: MIT */
/*
 * report_md: the Markdown report (report.h's REPORT_MARKDOWN) and the
 * byte-budgeted step summary, from a loaded struct rdoc (report_int.h).
 *
 * The report is built as pieces (fixed text, and table rows tagged with
 * their table) so that the summary can drop rows without rendering twice:
 * md_build() makes the pieces, md_assemble() picks the rows that fit and
 * joins them.  Markdown has its own escaping, here; the facts come from
 * report.c as plain text and are escaped on the way in.
 */
#include "output/report_int.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Markdown escaping.                                                  */

/*
 * Markdown inline text inside a table cell or a list item: characters
 * that would start emphasis, code, links or end a cell are
 * backslash-escaped, HTML is neutralised with entities, and every control
 * character becomes a space so a line break cannot end the table.  At
 * most max bytes of s are shown, then an ellipsis.
 */
static void md_esc(struct sbuf *b, const char *s, size_t n, size_t max)
{
    size_t m = report_utf8_cut(s, n, max);
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
    size_t m = report_utf8_cut(s, n, max), run = 0, longest = 0;
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
    static const char *const mark[] = {
        [CHANGE_NOTE] = "- ", [CHANGE_REGRESSION] = "- **regression:** ",
        [CHANGE_IMPROVEMENT] = "- improvement: ",
    };
    struct sbuf *b = &m->cur;
    const struct rgate *g = &d->gate;
    sb_puts(b, "\n## Regression gate\n\n");
    sb_puts(b, g->regression ? "**Regression** against " : "No regression against ");
    if (g->file)
        md_code(b, g->file, strlen(g->file), COMMAND_MD_MAX);
    else
        sb_puts(b, "the baseline");
    report_gate_threshold(b, d);
    sb_puts(b, ".\n");
    if (g->other_command)
        sb_puts(b, "\n> **Different command:** " GATE_OTHER_COMMAND "\n");
    sb_puts(b, g->nchanges ? "\n" : "\nNothing changed.\n");
    report_gate_list(b, d, mark, md_str, "\n");
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
    if (report_text_run_with(&run, d)) {
        report_text_command(&cmd, d->command);
        if (run.len != cmd.len || memcmp(run.p, cmd.p, run.len)) {
            sb_puts(b, "\n- **Run with:** ");
            md_code(b, run.p, run.len, COMMAND_MD_MAX);
        }
    }
    sb_release(&run);
    sb_release(&cmd);
    const json_t *files = report_jget(d->run_with, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i);
        const char *path = report_jstr(f, "path");
        int written = report_jbool(f, "written");
        sb_puts(b, "\n- **Config:** ");
        md_code(b, path ? path : "(unknown)", strlen(path ? path : "(unknown)"), COMMAND_MD_MAX);
        sb_puts(b, !json_is_string(report_jget(f, "diff")) ? " already holds the choice"
                   : written == 1 ? " written with the choice (--write)"
                   : written == 0 ? " not written: add --write, or apply the diff in the results file"
                                  : " changed by the choice");
    }
}

/* One fact of the summary list: "- **label:** value", val escaped and released. */
static void md_fact(struct sbuf *b, const char *label, struct sbuf *val)
{
    sb_printf(b, "\n- **%s:** ", label);
    md_str(b, val->p ? val->p : "");
    sb_release(val);
}

/* The headline, the failed trial when one stopped the search, and the facts. */
static void md_summary(struct sbuf *b, const struct rdoc *d)
{
    struct sbuf line = SBUF_INIT;
    char x[32];
    int good;

    sb_puts(b, "# autobatch results\n\n");
    report_text_headline(&line, d, &good);
    sb_puts(b, good ? "**Chosen:** " : "**");
    if (!good && line.len) /* "no configuration..." capitalised */
        line.p[0] = 'N';
    md_esc(b, line.p ? line.p : "", line.len, (size_t)-1);
    sb_puts(b, good ? "\n" : "**\n");
    sb_release(&line);

    const struct rtrial *bad = report_failed_trial(d);
    if (bad) {
        sb_printf(b, "\nThe command failed in trial %s (", report_fmt_int(x, sizeof x, bad->id));
        md_str(b, bad->outcome);
        report_text_status(&line, bad);
        if (line.len)
            sb_printf(b, ", %s", line.p);
        sb_release(&line);
        sb_puts(b, bad->evidence ? "): " : ").");
        if (bad->evidence)
            md_code(b, bad->evidence, bad->evlen, EVIDENCE_MD_MAX * 2);
        sb_puts(b, "\n");
    }

    sb_puts(b, "\n- **Command:** ");
    report_text_command(&line, d->command);
    md_code(b, line.p ? line.p : "", line.len, COMMAND_MD_MAX);
    sb_release(&line);
    md_run_with(b, d);
    report_text_host(&line, d);
    md_fact(b, "Host", &line);
    report_text_capacity(&line, d);
    md_fact(b, "Capacity", &line);
    if (report_text_memory(&line, d))
        md_fact(b, "Memory", &line);
    sb_puts(&line, d->started_at ? d->started_at : DASH);
    md_fact(b, "Started", &line);
    report_text_warm_start(&line, d);
    md_fact(b, "Warm start", &line);
    report_text_space(&line, d);
    md_fact(b, "Search space", &line);
    report_text_settings(&line, d);
    md_fact(b, "Settings", &line);
    if (d->preset || d->config) {
        sb_puts(b, "\n- **Preset:** ");
        md_str(b, d->preset ? d->preset : DASH);
        if (d->config) {
            sb_puts(b, ", config ");
            md_code(b, d->config, strlen(d->config), COMMAND_MD_MAX);
        }
    }
    report_text_trials(&line, d);
    md_fact(b, "Trials", &line);
    report_text_exit(&line, d);
    md_fact(b, "Exit", &line);
    sb_puts(b, "\n");
    /* a notice the headline gives is not given again below it */
    if (d->interrupted && !report_headline_interrupted(d))
        sb_puts(b, "\nThe search was interrupted before it finished.\n");
}

/* Row i of a table, appended to line; ctx is what md_table() was given. */
typedef void md_row_fn(struct sbuf *line, const struct rdoc *d, const void *ctx, size_t i);

/*
 * The n rows of a table whose head is already written, one piece each,
 * then the slot for its "N more ..." note.
 */
static void md_table(struct md *m, const char *noun, const struct rdoc *d, size_t n, const void *ctx,
                     md_row_fn *row)
{
    struct sbuf line = SBUF_INIT;
    int id = md_table_begin(m, noun);
    for (size_t i = 0; i < n; i++) {
        row(&line, d, ctx, i);
        md_row_end(m, id, &line);
    }
    md_table_end(m, id);
}

static void md_cell_row(struct sbuf *line, const struct rdoc *d, const void *ctx, size_t i)
{
    const struct rcell *c = &d->c[i];
    char x[32], y[32], z[32], w[32];
    (void)ctx;
    sb_printf(line, "| %s | %s | ", report_fmt_int(x, sizeof x, c->ga), report_ckpt_word(c->ckpt));
    if (c->bounded_by)
        sb_printf(line, "\xe2\x89\xa5 %s", report_fmt_int(y, sizeof y, c->tried));
    else
        sb_puts(line, report_fmt_int(y, sizeof y, c->mb));
    sb_printf(line, " | %s | %s | ", report_fmt_int(z, sizeof z, c->fail), report_fmt_int(w, sizeof w, c->trials));
    sb_puts(line, report_cell_notes(line, d, c, "the chosen configuration's cell", md_str) ? " |\n" : "|\n");
}

/* The per-cell answers. */
static void md_cells(struct md *m, const struct rdoc *d)
{
    sb_puts(&m->cur, "\n## Largest micro-batch per cell\n\n"
                     "| grad-accum | checkpointing | largest fit | smallest failure | trials | note |\n"
                     "|---:|:---|---:|---:|---:|:---|\n");
    md_table(m, "cells", d, d->nc, NULL, md_cell_row);
}

/* A frontier row; ctx: the points in the order shown, or NULL for the file's. */
static void md_point_row(struct sbuf *line, const struct rdoc *d, const void *ctx, size_t i)
{
    const struct rpoint *const *order = ctx, *p = order ? order[i] : &d->f[i];
    char x[32], y[32], z[32], w[32];
    int chosen = d->has_best && p->mb == d->best.mb && p->ga == d->best.ga && p->ckpt == d->best.ckpt;
    sb_printf(line, "| %s | %s | %s | %s | %s | %s|\n", report_fmt_int(x, sizeof x, p->mb),
              report_fmt_int(y, sizeof y, p->ga), report_ckpt_word(p->ckpt), report_fmt_rate(z, sizeof z, p->sps),
              report_fmt_bytes(w, sizeof w, p->peak),
              p == &d->best ? "**chosen** (not on the frontier) " : chosen ? "**chosen** " : "");
}

static void md_contra_row(struct sbuf *line, const struct rdoc *d, const void *ctx, size_t i)
{
    const struct rcontra *c = &d->x[i];
    char x[32], y[32], z[32];
    (void)ctx;
    sb_printf(line, "| %s | %s | %s | %s | ", report_fmt_int(x, sizeof x, c->ga), report_ckpt_word(c->ckpt),
              report_fmt_int(y, sizeof y, c->mb), report_fmt_int(z, sizeof z, c->larger));
    md_str(line, c->retest ? c->retest : DASH);
    sb_puts(line, " |\n");
}

/* The frontier along the memory axis, the way it is read; "Empty" when no trial fitted. */
static void md_frontier(struct md *m, const struct rdoc *d)
{
    sb_puts(&m->cur, "\n## Pareto frontier\n\n");
    /* The choice is always marked: when it is not one of the frontier's
     * points (a faster fit with no more memory was set aside), its own row
     * joins the table where its memory puts it. */
    int off = d->has_best && !report_best_on_frontier(d);
    size_t n = d->nf + (size_t)off;
    if (!n) {
        sb_puts(&m->cur, "Empty: no trial fitted.\n");
        return;
    }
    sb_printf(&m->cur, "Throughput against %s; **chosen** marks the choice%s.\n\n",
              d->mem_axis ? "peak memory" : "micro-batch (peak memory was not measured)",
              off ? ", which is not on the frontier: its row is added" : "");
    sb_printf(&m->cur, "| micro-batch | grad-accum | checkpointing | %s/s | peak memory | |\n"
                       "|---:|---:|:---|---:|---:|:---|\n", d->unit);
    const struct rpoint **order = malloc(n * sizeof *order);
    for (size_t i = 0; order && i < d->nf; i++)
        order[i] = &d->f[i];
    if (order && off)
        order[d->nf] = &d->best;
    if (order)
        qsort(order, n, sizeof *order, d->mem_axis ? cmp_point_mem : cmp_point_mb);
    else
        n = d->nf; /* without room to order them, the file's order, the choice said above */
    md_table(m, "frontier points", d, n, order, md_point_row);
    free(order);
}

/* Sizes that failed below a larger fit. */
static void md_contradictions(struct md *m, const struct rdoc *d)
{
    sb_puts(&m->cur, "\n## Contradictions\n\n"
                     "Sizes that failed below a larger fit, and what their re-test said.\n\n"
                     "| grad-accum | checkpointing | failed at | larger fit | re-test |\n"
                     "|---:|:---|---:|---:|:---|\n");
    md_table(m, "contradictions", d, d->nx, NULL, md_contra_row);
}

static void md_trial_row(struct sbuf *line, const struct rdoc *d, const void *ctx, size_t i)
{
    const struct rtrial *t = &d->t[i];
    char x[32], y[32], z[32], v[32];
    (void)ctx;
    sb_printf(line, "| %s | %s | %s | %s | ", report_fmt_int(x, sizeof x, t->id), report_fmt_int(y, sizeof y, t->mb),
              report_fmt_int(z, sizeof z, t->ga), report_ckpt_word(t->ckpt));
    md_str(line, t->outcome);
    sb_printf(line, " | %s | %s | %s | ", report_fmt_rate(x, sizeof x, t->sps), report_fmt_bytes(y, sizeof y, t->peak),
              report_fmt_secs(v, sizeof v, t->wall));
    size_t mark = line->len;
    report_text_notes(line, t, "**chosen**");
    if (t->evidence) {
        if (line->len > mark)
            sb_puts(line, ": ");
        md_esc(line, t->evidence, t->evlen, EVIDENCE_MD_MAX);
    }
    sb_puts(line, line->len > mark ? " |\n" : "|\n");
}

/* Every trial, folded: a GitHub step summary shows the answer first. */
static void md_trials(struct md *m, const struct rdoc *d)
{
    struct sbuf *b = &m->cur;
    sb_puts(b, "\n## Trials\n\n");
    if (!d->nt) {
        sb_puts(b, "No trial ran.\n");
        return;
    }
    sb_printf(b, "<details><summary>%zu trial%s</summary>\n\n", d->nt, d->nt == 1 ? "" : "s");
    sb_printf(b, "| # | micro-batch | grad-accum | checkpointing | outcome | %s/s | peak memory | time | notes |\n"
                 "|---:|---:|---:|:---|:---|---:|---:|---:|:---|\n", d->unit);
    md_table(m, "trials", d, d->nt, NULL, md_trial_row);
    sb_puts(b, "\n</details>\n");
}

/* The whole report as pieces, in document order. */
static void md_build(struct md *m, const struct rdoc *d)
{
    md_summary(&m->cur, d);
    if (d->baseline)
        md_regression_gate(m, d);
    if (d->nc)
        md_cells(m, d);
    md_frontier(m, d);
    if (d->nx)
        md_contradictions(m, d);
    md_trials(m, d);
    md_flush(m);
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
    return report_finish(&b, out, len, err, errlen);
}

int report_render_markdown(const struct rdoc *d, size_t max_bytes, char **out, size_t *len,
                           char *err, size_t errlen)
{
    struct md m = { .cur = SBUF_INIT };
    md_build(&m, d);
    int rc;
    if (m.oom)
        rc = report_oom(err, errlen);
    else
        rc = md_assemble(&m, max_bytes, out, len, err, errlen);
    md_release(&m);
    return rc;
}
