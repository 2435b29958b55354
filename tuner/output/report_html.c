/* SPDX-License-Identifier: MIT */
/*
 * report_html: the self-contained HTML report (report.h's REPORT_HTML)
 * from a loaded struct rdoc (report_int.h): the verdict, the facts, how
 * to run the choice with each config file's diff, the regression gate,
 * the charts (report_chart.c) and the tables.  One inline stylesheet, no
 * script; text from the file is escaped with report.c's report_xml_esc().
 */
#include "output/report_int.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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
    report_xml_str(b, s, 0);
}

static void html_regression_gate(struct sbuf *b, const struct rdoc *d)
{
    static const char *const mark[] = {
        [CHANGE_NOTE] = "<li>", [CHANGE_REGRESSION] = "<li><b style=\"color:#d1402b\">regression:</b> ",
        [CHANGE_IMPROVEMENT] = "<li><b style=\"color:#2e8b3e\">improvement:</b> ",
    };
    const struct rgate *g = &d->gate;
    sb_puts(b, "<h2>Regression gate</h2>\n");
    sb_printf(b, "<div class=\"verdict %s\"><b>%s</b> against <code>", g->regression ? "bad" : "good",
              g->regression ? "Regression" : "No regression");
    html_text(b, g->file ? g->file : "the baseline");
    sb_puts(b, "</code>");
    report_gate_threshold(b, d);
    sb_puts(b, "</div>\n");
    if (g->other_command)
        sb_puts(b, "<div class=\"verdict warn\"><b>Different command:</b> " GATE_OTHER_COMMAND "</div>\n");
    if (!g->nchanges) {
        sb_puts(b, "<p>Nothing changed.</p>\n");
        return;
    }
    sb_puts(b, "<ul>\n");
    report_gate_list(b, d, mark, html_text, "</li>\n");
    sb_puts(b, "</ul>\n");
}

static void html_fact(struct sbuf *b, const char *label, struct sbuf *val, int code)
{
    sb_printf(b, "<tr><th>%s</th><td>%s", label, code ? "<code>" : "");
    report_xml_esc(b, val->p ? val->p : "", val->len, 0);
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
        report_xml_esc(b, diff + i, end - i, 0);
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
    if (report_text_run_with(&v, d)) {
        struct sbuf cmd = SBUF_INIT;
        report_text_command(&cmd, d->command);
        if (v.len == cmd.len && !memcmp(v.p, cmd.p, v.len))
            sb_puts(b, "<p>The command as it was run (the choice goes into the config below):</p>\n<pre>");
        else
            sb_puts(b, "<p>The command with the chosen knobs set:</p>\n<pre>");
        sb_release(&cmd);
        report_xml_esc(b, v.p ? v.p : "", v.len, 0);
        sb_puts(b, "</pre>\n");
    } else {
        report_text_config(&v, &d->best);
        sb_puts(b, "<p>The choice: ");
        report_xml_esc(b, v.p ? v.p : "", v.len, 0);
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
    const json_t *files = report_jget(d->run_with, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        const json_t *f = json_array_get(files, i), *diff = report_jget(f, "diff");
        const char *path = report_jstr(f, "path");
        int written = report_jbool(f, "written");
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

int report_render_html(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen)
{
    struct sbuf b = SBUF_INIT, v = SBUF_INIT;
    char x[32], y[32], z[32], w[32];
    int good;

    report_text_command(&v, d->command);
    sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>autobatch: ");
    report_xml_esc(&b, v.p ? v.p : "", report_utf8_cut(v.p ? v.p : "", v.len, 120), 0);
    sb_release(&v);
    sb_printf(&b, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n<h1>autobatch results</h1>\n", html_style);

    report_text_headline(&v, d, &good);
    if (!good && v.len)
        v.p[0] = 'N';
    sb_printf(&b, "<div class=\"verdict %s\"><b>%s</b>", good ? "good" : "bad", good ? "Chosen: " : "");
    report_xml_esc(&b, v.p ? v.p : "", v.len, 0);
    sb_release(&v);
    sb_puts(&b, "</div>\n");
    const struct rtrial *bad = report_failed_trial(d);
    if (bad) {
        sb_printf(&b, "<div class=\"verdict bad\">The command failed in trial %s (", report_fmt_int(x, sizeof x, bad->id));
        html_text(&b, bad->outcome);
        report_text_status(&v, bad);
        if (v.len)
            sb_printf(&b, ", %s", v.p);
        sb_release(&v);
        sb_puts(&b, bad->evidence ? "): <code>" : ").");
        if (bad->evidence) {
            report_xml_esc(&b, bad->evidence, bad->evlen, 0);
            sb_puts(&b, "</code>");
        }
        sb_puts(&b, "</div>\n");
    }

    sb_puts(&b, "<table class=\"facts\">\n");
    report_text_command(&v, d->command);
    html_fact(&b, "Command", &v, 1);
    report_text_host(&v, d);
    html_fact(&b, "Host", &v, 0);
    report_text_capacity(&v, d);
    html_fact(&b, "Capacity", &v, 0);
    if (report_text_memory(&v, d))
        html_fact(&b, "Memory", &v, 0);
    sb_puts(&v, d->started_at ? d->started_at : DASH);
    html_fact(&b, "Started", &v, 0);
    report_text_warm_start(&v, d);
    html_fact(&b, "Warm start", &v, 0);
    report_text_space(&v, d);
    html_fact(&b, "Search space", &v, 0);
    report_text_settings(&v, d);
    html_fact(&b, "Settings", &v, 0);
    if (d->preset || d->config) {
        sb_puts(&v, d->preset ? d->preset : DASH);
        if (d->config)
            sb_printf(&v, ", config %s", d->config);
        html_fact(&b, "Preset", &v, 0);
    }
    report_text_trials(&v, d);
    html_fact(&b, "Trials", &v, 0);
    report_text_exit(&v, d);
    html_fact(&b, "Exit", &v, 0);
    sb_puts(&b, "</table>\n");
    if (d->interrupted)
        sb_puts(&b, "<p>The search was interrupted before it finished.</p>\n");

    html_run_with(&b, d);

    if (d->baseline)
        html_regression_gate(&b, d);

    sb_printf(&b, "<div class=\"charts\">\n<div>\n<h2>Throughput against %s</h2>\n",
              d->mem_axis ? "peak memory" : "micro-batch");
    report_svg_scatter(&b, d);
    sb_puts(&b, "</div>\n<div>\n<h2>Largest fitting micro-batch per cell</h2>\n");
    report_svg_cells(&b, d);
    sb_puts(&b, "</div>\n<div>\n<h2>Trial timeline</h2>\n");
    report_svg_timeline(&b, d);
    sb_puts(&b, "</div>\n");
    /* Peak memory against the micro-batch, when memory was measured. */
    struct sbuf mem = SBUF_INIT;
    if (report_svg_memory(&mem, d)) {
        sb_puts(&b, "<div>\n<h2>Peak memory against micro-batch</h2>\n");
        sb_put(&b, mem.p, mem.len);
        sb_puts(&b, "</div>\n");
    }
    b.oom |= mem.oom;
    sb_release(&mem);
    sb_puts(&b, "</div>\n");

    if (d->nc) {
        sb_puts(&b, "<h2>Largest micro-batch per cell</h2>\n<table>\n<tr><th>grad-accum</th><th class=\"l\">"
                    "checkpointing</th><th>largest fit</th><th>smallest failure</th><th>trials</th>"
                    "<th class=\"l\">note</th></tr>\n");
        for (size_t i = 0; i < d->nc; i++) {
            const struct rcell *c = &d->c[i];
            int chosen = d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt;
            sb_printf(&b, "<tr%s><td>%s</td><td class=\"l\">%s</td><td>", chosen ? " class=\"chosen\"" : "",
                      report_fmt_int(x, sizeof x, c->ga), report_ckpt_word(c->ckpt));
            if (c->bounded_by)
                sb_printf(&b, "\xe2\x89\xa5 %s", report_fmt_int(y, sizeof y, c->tried));
            else
                sb_puts(&b, report_fmt_int(y, sizeof y, c->mb));
            sb_printf(&b, "</td><td>%s</td><td>%s</td><td class=\"l\">", report_fmt_int(z, sizeof z, c->fail),
                      report_fmt_int(w, sizeof w, c->trials));
            report_cell_notes(&b, d, c, NULL, html_text);
            sb_puts(&b, "</td></tr>\n");
        }
        sb_puts(&b, "</table>\n");
    }

    /* The choice is always marked: off the frontier, its own row is added last. */
    int off = d->has_best && !report_best_on_frontier(d);
    if (d->nf || off) {
        sb_printf(&b, "<h2>Pareto frontier</h2>\n<table>\n<tr><th>micro-batch</th><th>grad-accum</th>"
                      "<th class=\"l\">checkpointing</th><th>%s/s</th><th>peak memory</th><th></th></tr>\n", d->unit);
        for (size_t i = 0; i < d->nf + (size_t)off; i++) {
            const struct rpoint *p = i < d->nf ? &d->f[i] : &d->best;
            int chosen = d->has_best && p->mb == d->best.mb && p->ga == d->best.ga && p->ckpt == d->best.ckpt;
            sb_printf(&b, "<tr%s><td>%s</td><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                      chosen ? " class=\"chosen\"" : "", report_fmt_int(x, sizeof x, p->mb), report_fmt_int(y, sizeof y, p->ga),
                      report_ckpt_word(p->ckpt), report_fmt_rate(z, sizeof z, p->sps), report_fmt_bytes(w, sizeof w, p->peak),
                      i >= d->nf ? "chosen (not on the frontier)" : chosen ? "chosen" : "");
        }
        sb_puts(&b, "</table>\n");
    }

    if (d->nx) {
        sb_puts(&b, "<h2>Contradictions</h2>\n<table>\n<tr><th>grad-accum</th><th class=\"l\">checkpointing</th>"
                    "<th>failed at</th><th>larger fit</th><th class=\"l\">re-test</th></tr>\n");
        for (size_t i = 0; i < d->nx; i++) {
            const struct rcontra *c = &d->x[i];
            sb_printf(&b, "<tr><td>%s</td><td class=\"l\">%s</td><td>%s</td><td>%s</td><td class=\"l\">",
                      report_fmt_int(x, sizeof x, c->ga), report_ckpt_word(c->ckpt), report_fmt_int(y, sizeof y, c->mb),
                      report_fmt_int(z, sizeof z, c->larger));
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
                      t->chosen ? " class=\"chosen\"" : "", report_fmt_int(x, sizeof x, t->id), report_fmt_int(y, sizeof y, t->mb),
                      report_fmt_int(z, sizeof z, t->ga), report_ckpt_word(t->ckpt), report_oc_colour[t->oc]);
            html_text(&b, t->outcome);
            sb_printf(&b, "</td><td>%s</td><td>%s</td><td>%s</td><td class=\"ev\">", report_fmt_rate(x, sizeof x, t->sps),
                      report_fmt_bytes(y, sizeof y, t->peak), report_fmt_secs(s, sizeof s, t->wall));
            int any = report_text_notes(&b, t, "chosen");
            if (t->evidence) {
                sb_puts(&b, any ? ": " : "");
                report_xml_esc(&b, t->evidence, t->evlen, 0);
            }
            sb_puts(&b, "</td></tr>\n");
        }
        sb_puts(&b, "</table>\n");
    }
    sb_puts(&b, "</main>\n</body>\n</html>\n");
    return report_finish(&b, out, len, err, errlen);
}
