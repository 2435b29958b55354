/* SPDX-License-Identifier: MIT */
/*
 * report_chart: the inline SVG charts of the HTML report (report.h's
 * REPORT_HTML), from a loaded struct rdoc (report_int.h): throughput
 * against peak memory with the frontier, the choice, the failed sizes and
 * the capacity; the largest fit per cell; the trial timeline; and, when
 * memory was measured, peak memory against the micro-batch with the
 * capacity, the headroom and each cell's memory line.  Each is one <svg> of fixed viewBox
 * (SVG_W wide) that the page's stylesheet scales to its column; the axes,
 * ticks and legend are drawn here, with no script and nothing to fetch.
 */
#include "output/report_int.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SVG_W 760
#define COLOUR_MAIN "#3b6ea8"
#define COLOUR_LIGHT "#a9c4e2"
#define COLOUR_CHOICE "#e8740c"
#define COLOUR_FAIL "#d1402b"
#define COLOUR_CAP "#7a1f12"
#define COLOUR_PRUNED "#c8c8c8"
#define GIB (1024.0 * 1024 * 1024)
#define FAIL_STROKE "stroke=\"" COLOUR_FAIL "\" stroke-width=\"2.2\""
/* A red cross around (0,0): a failed size in a legend */
#define FAIL_CROSS "<line x1=\"-4\" y1=\"-4\" x2=\"4\" y2=\"4\" " FAIL_STROKE "/>" \
                   "<line x1=\"-4\" y1=\"4\" x2=\"4\" y2=\"-4\" " FAIL_STROKE "/>"

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
        report_xml_str(b, xlabel, 0);
        sb_puts(b, "</text>\n");
    }
    sb_printf(b, "<text class=\"ylabel\" transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" "
                 "font-size=\"12\">", (PT + pb) / 2);
    report_xml_str(b, ylabel, 0);
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
    report_xml_str(l->b, label, 0);
    sb_puts(l->b, "</text></g>\n");
    l->x += 28 + 5.9 * (double)strlen(label);
}

static void svg_open(struct sbuf *b, const char *id, double h, const char *title)
{
    sb_printf(b, "<svg id=\"%s\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" role=\"img\" "
                 "font-family=\"inherit\">\n<title>", id, SVG_W, h, SVG_W, h);
    report_xml_str(b, title, 0);
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

/* A size that did not fit: out of memory, or counted so (timeout, hang). */
static int trial_failed(const struct rtrial *t)
{
    return t->oc == OC_OOM || t->oc == OC_TIMEOUT || t->oc == OC_HANG;
}

/* A failed size: one red cross, class="failed", with its trial in the title. */
static void svg_failed(struct sbuf *b, const struct rtrial *t, double px, double py)
{
    char x1[32], x2[32], g[32];
    const char *id = report_fmt_int(x1, sizeof x1, t->id), *mb = report_fmt_int(x2, sizeof x2, t->mb);
    sb_printf(b, "<g class=\"failed\" data-trial=\"%s\" data-micro-batch=\"%s\">"
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " FAIL_STROKE "/>"
                 "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" " FAIL_STROKE "/>"
                 "<title>trial %s: micro-batch %s \xc3\x97 %s, checkpointing %s: ",
              id, mb, px - 4, py - 4, px + 4, py + 4, px - 4, py + 4, px + 4, py - 4, id, mb,
              report_fmt_int(g, sizeof g, t->ga), report_ckpt_word(t->ckpt));
    report_xml_str(b, t->outcome, 0);
    sb_puts(b, ", did not fit</title></g>\n");
}

/*
 * The capacity and the headroom's limit as lines across the plot at data
 * value v (GiB) on axis a: vertical (x axis) or horizontal (y axis), each
 * labelled; class="capacity" and class="headroom".
 */
static void svg_cap_lines(struct sbuf *b, const struct axis *a, int vertical, double cap, double head, double pb)
{
    char m[32];
    for (int k = 0; k < 2; k++) {
        double v = k ? (1 - head) * cap : cap;
        if (k && !(head > 0))
            break;
        double p = ax_map(a, v / GIB);
        const char *cls = k ? "headroom" : "capacity", *dash = k ? "2 3" : "6 3";
        if (vertical)
            sb_printf(b, "<g class=\"%s\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\""
                         COLOUR_CAP "\" stroke-width=\"1.5\" stroke-dasharray=\"%s\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" fill=\"" COLOUR_CAP "\">",
                      cls, p, PT, p, pb, dash, p - 4, pb - 22 - 13 * k);
        else
            sb_printf(b, "<g class=\"%s\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\""
                         COLOUR_CAP "\" stroke-width=\"1.5\" stroke-dasharray=\"%s\"/>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"11\" fill=\"" COLOUR_CAP "\">",
                      cls, PL, p, PR, p, dash, PR - 4, k ? p + 13 : p - 4);
        if (k)
            sb_printf(b, "headroom %.0f%%: %s", head * 100, report_fmt_bytes(m, sizeof m, v));
        else
            sb_printf(b, "capacity %s", report_fmt_bytes(m, sizeof m, v));
        sb_puts(b, "</text></g>\n");
    }
}

void report_svg_scatter(struct sbuf *b, const struct rdoc *d)
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
    /* The failed sizes: at their micro-batch on a micro-batch axis; on a
     * memory axis (they have no peak) at the capacity they ran past, or
     * at the right edge when it is unknown.  The capacity's line too. */
    double cap = report_capacity(d, NULL), head = report_headroom(d);
    size_t nfailed = 0;
    for (size_t i = 0; npts && i < d->nt; i++) {
        if (!trial_failed(&d->t[i]) || d->t[i].mb <= 0)
            continue;
        nfailed++;
        if (!d->mem_axis && (double)d->t[i].mb > xmax)
            xmax = (double)d->t[i].mb;
    }
    int cap_line = npts && d->mem_axis && !isnan(cap);
    if (cap_line && cap / GIB > xmax)
        xmax = cap / GIB;
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
    if (nfailed)
        legend_item(&lg, FAIL_CROSS,
                    !d->mem_axis ? "did not fit" : cap_line ? "did not fit (at the capacity)"
                                                             : "did not fit (capacity unknown)");

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
        sb_printf(b, "<g class=\"point\" data-trial=\"%s\">", report_fmt_int(x1, sizeof x1, t->id));
        if (t->ckpt == 1)
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" transform=\"rotate(45 %.1f %.1f)\" "
                         "fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>", px - 4, py - 4, px, py, fill);
        else
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>",
                      px, py, fill);
        sb_printf(b, "<title>trial %s: micro-batch %s \xc3\x97 %s, checkpointing %s: %s %s/s, peak memory %s</title></g>\n",
                  report_fmt_int(x1, sizeof x1, t->id), report_fmt_int(x2, sizeof x2, t->mb), report_fmt_int(g, sizeof g, t->ga),
                  report_ckpt_word(t->ckpt), report_fmt_rate(r, sizeof r, t->sps), d->unit,
                  report_fmt_bytes(m, sizeof m, t->peak));
    }
    free(sorted);

    if (cap_line)
        svg_cap_lines(b, &ax, 1, cap, isnan(head) ? 0 : head, pb);
    for (size_t i = 0; nfailed && i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        if (!trial_failed(t) || t->mb <= 0)
            continue;
        double px = !d->mem_axis ? ax_map(&ax, (double)t->mb) : cap_line ? ax_map(&ax, cap / GIB) : PR;
        svg_failed(b, t, px, pb - 6);
    }

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
                      report_fmt_int(x1, sizeof x1, d->best.mb), report_fmt_int(x2, sizeof x2, d->best.ga),
                      d->best.ckpt == 1 ? ", checkpointing" : "");
        }
    }
    sb_puts(b, "</svg>\n");
}

void report_svg_cells(struct sbuf *b, const struct rdoc *d)
{
    const double h = 300, pb = h - 56;
    char yl[96], t1[32];
    snprintf(yl, sizeof yl, "largest micro-batch (%.40s)", d->unit);
    svg_open(b, "cells", h, "largest fitting micro-batch per cell");

    double vmax = 0;
    int any_bounded = 0, any_pruned = 0;
    for (size_t i = 0; i < d->nc; i++) {
        const struct rcell *c = &d->c[i];
        long long v = c->bounded_by ? c->tried : c->mb;
        vmax = (double)v > vmax ? (double)v : vmax;
        any_pruned |= report_cell_pruned(c);
        any_bounded |= c->bounded_by != NULL && !report_cell_pruned(c);
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
    if (any_pruned)
        legend_item(&lg, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"" COLOUR_PRUNED
                    "\" stroke=\"#888\" stroke-dasharray=\"1 2\"/>",
                    "pruned: could not beat the fastest fit");
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
        int chosen = d->has_best && c->ga == d->best.ga && c->ckpt == d->best.ckpt, pruned = report_cell_pruned(c);
        sb_printf(b, "<g class=\"cell%s\">", pruned ? " pruned" : "");
        if (v > 0) {
            double top = ax_map(&ay, (double)v);
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s>"
                         "<title>grad-accum %s, checkpointing %s: %s%lld%s</title></rect>"
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">%s%lld%s</text>",
                      cx - bw / 2, top, bw, pb - top,
                      chosen ? COLOUR_CHOICE : pruned ? COLOUR_PRUNED : c->bounded_by ? COLOUR_LIGHT : COLOUR_MAIN,
                      pruned ? " stroke=\"#888\" stroke-dasharray=\"1 2\""
                      : c->bounded_by ? " stroke=\"" COLOUR_MAIN "\" stroke-dasharray=\"3 2\"" : "",
                      report_fmt_int(t1, sizeof t1, c->ga), report_ckpt_word(c->ckpt),
                      c->bounded_by ? "at least " : "", v, pruned ? " (" PRUNED_NOTE ")" : "",
                      cx, top - 4, fs, c->bounded_by ? "\xe2\x89\xa5" : "", v, pruned ? " pruned" : "");
        } else {
            const char *why = c->skipped && c->fail < 0 ? "skipped" : c->fail > 0 ? "none fits" : "not measured";
            sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\" fill=\"#a33\">%s</text>",
                      cx, pb - 6, fs, why);
        }
        sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">accum %s</text>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"%d\">ckpt %s</text></g>\n",
                  cx, pb + 16, fs, report_fmt_int(t1, sizeof t1, c->ga), cx, pb + 30, fs, report_ckpt_word(c->ckpt));
    }
    sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">"
                 "cell: gradient-accumulation steps and activation checkpointing</text>\n",
              (PL + PR) / 2, pb + 50);
    sb_puts(b, "</svg>\n");
}

void report_svg_timeline(struct sbuf *b, const struct rdoc *d)
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
        snprintf(shape, sizeof shape, "<rect x=\"-5\" y=\"-5\" width=\"10\" height=\"10\" fill=\"%s\"/>", report_oc_colour[o]);
        legend_item(&lg, shape, report_oc_name[o]);
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
                  report_oc_name[t->oc], px, py - 5, pw, report_oc_colour[t->oc],
                  t->chosen ? " stroke=\"" COLOUR_CHOICE "\" stroke-width=\"2\""
                  : pw >= 4 ? " stroke=\"#ffffff\" stroke-width=\"0.5\"" : "",
                  report_fmt_int(x1, sizeof x1, t->id), report_fmt_int(x2, sizeof x2, t->mb), report_fmt_int(x3, sizeof x3, t->ga),
                  report_ckpt_word(t->ckpt));
        report_xml_str(b, t->outcome, 0);
        sb_printf(b, ", %s%s</title></rect>\n", report_fmt_secs(x4, sizeof x4, isnan(t->wall) ? NAN : wall),
                  t->chosen ? " (chosen)" : "");
        start += wall;
    }
    sb_puts(b, "</svg>\n");
}

int report_svg_memory(struct sbuf *b, const struct rdoc *d)
{
    const double h = 330, pb = h - 50;
    double xmax = 0, ymax = 0;
    size_t npeaks = 0, nfailed = 0;
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        if (t->mb <= 0)
            continue;
        if (t->oc == OC_FIT && !isnan(t->peak)) {
            npeaks++;
            ymax = t->peak / GIB > ymax ? t->peak / GIB : ymax;
        } else if (trial_failed(t)) {
            nfailed++;
        } else {
            continue;
        }
        xmax = (double)t->mb > xmax ? (double)t->mb : xmax;
    }
    if (!npeaks)
        return 0;
    double cap = report_capacity(d, NULL), head = report_headroom(d);
    if (!isnan(cap) && cap / GIB > ymax)
        ymax = cap / GIB;
    char yl[64], xl[64];
    snprintf(xl, sizeof xl, "micro-batch (%.40s)", d->unit);
    snprintf(yl, sizeof yl, "peak memory (GiB)");
    svg_open(b, "memory", h, "peak memory against micro-batch");
    struct axis ax, ay;
    ax_linear(&ax, 0, xmax * 1.04, PL, PR, 1);
    ax_linear(&ay, 0, ymax * 1.08, pb, PT, 0);
    svg_axes(b, &ax, &ay, pb, xl, yl);

    int any_model = 0, has_on = 0, has_off = 0;
    for (size_t i = 0; i < d->nc; i++)
        any_model |= d->c[i].has_model;
    for (size_t i = 0; i < d->nt; i++)
        if (d->t[i].oc == OC_FIT && !isnan(d->t[i].peak)) {
            has_on |= d->t[i].ckpt == 1;
            has_off |= d->t[i].ckpt != 1;
        }
    struct legend lg = { b, PL };
    if (has_off || !has_on)
        legend_item(&lg, "<circle r=\"4\" fill=\"" COLOUR_LIGHT "\" stroke=\"" COLOUR_MAIN "\"/>",
                    has_on ? "fit, checkpointing off" : "fit (its peak)");
    if (has_on)
        legend_item(&lg, "<rect x=\"-4\" y=\"-4\" width=\"8\" height=\"8\" transform=\"rotate(45)\" fill=\""
                    COLOUR_LIGHT "\" stroke=\"" COLOUR_MAIN "\"/>", "checkpointing on");
    if (nfailed)
        legend_item(&lg, FAIL_CROSS,
                    isnan(cap) ? "did not fit" : "did not fit (drawn at the capacity)");
    if (any_model)
        legend_item(&lg, "<line x1=\"-7\" y1=\"0\" x2=\"7\" y2=\"0\" stroke=\"#555\" stroke-width=\"1.5\" "
                    "stroke-dasharray=\"5 3\"/>", "memory model");

    /* Each cell's memory line, clipped to the plot, dashed and labelled by its cell. */
    char t1[32], t2[32], t3[32];
    for (size_t i = 0; i < d->nc; i++) {
        const struct rcell *c = &d->c[i];
        if (!c->has_model)
            continue;
        double x0 = 0, y0 = c->model_base / GIB, x1 = ax.hi, y1 = (c->model_base + c->model_slope * x1) / GIB;
        if (y0 < ay.lo) { /* a line that starts below the axis: from where it crosses 0 */
            x0 = -c->model_base / c->model_slope;
            y0 = 0;
        }
        if (y1 > ay.hi) {
            x1 = (ay.hi * GIB - c->model_base) / c->model_slope;
            y1 = ay.hi;
        }
        if (!(x1 > x0))
            continue;
        sb_printf(b, "<g class=\"model\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                     "stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/><title>grad-accum %s, checkpointing %s: "
                     "the search's memory line, %s + %s per unit of micro-batch</title></g>\n",
                  ax_map(&ax, x0), ax_map(&ay, y0), ax_map(&ax, x1), ax_map(&ay, y1),
                  c->ckpt == 1 ? "#8a55c9" : "#555", report_fmt_int(t1, sizeof t1, c->ga), report_ckpt_word(c->ckpt),
                  report_fmt_bytes(t2, sizeof t2, c->model_base), report_fmt_bytes(t3, sizeof t3, c->model_slope));
    }
    if (!isnan(cap))
        svg_cap_lines(b, &ay, 0, cap, isnan(head) ? 0 : head, pb);

    char x1[32], x2[32], g[32], m[32];
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        if (t->mb <= 0)
            continue;
        double px = ax_map(&ax, (double)t->mb);
        if (trial_failed(t)) {
            svg_failed(b, t, px, isnan(cap) ? PT + 6 : ax_map(&ay, cap / GIB));
            continue;
        }
        if (t->oc != OC_FIT || isnan(t->peak))
            continue;
        double py = ax_map(&ay, t->peak / GIB);
        const char *id = report_fmt_int(x1, sizeof x1, t->id);
        sb_printf(b, "<g class=\"mem\" data-trial=\"%s\">", id);
        if (t->ckpt == 1)
            sb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" transform=\"rotate(45 %.1f %.1f)\" "
                         "fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>", px - 4, py - 4, px, py,
                      t->chosen ? COLOUR_CHOICE : COLOUR_LIGHT);
        else
            sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" stroke=\"" COLOUR_MAIN "\"/>", px, py,
                      t->chosen ? COLOUR_CHOICE : COLOUR_LIGHT);
        sb_printf(b, "<title>trial %s: micro-batch %s \xc3\x97 %s, checkpointing %s: peak memory %s%s</title></g>\n",
                  id, report_fmt_int(x2, sizeof x2, t->mb), report_fmt_int(g, sizeof g, t->ga),
                  report_ckpt_word(t->ckpt), report_fmt_bytes(m, sizeof m, t->peak), t->chosen ? " (chosen)" : "");
    }
    sb_puts(b, "</svg>\n");
    return 1;
}
