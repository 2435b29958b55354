/* SPDX-License-Identifier: MIT */
/*
 * report_int: what the report's files share, and nothing outside them
 * includes.  report.c reads a results document into the plain structs
 * below (struct rdoc) and holds what more than one format needs: the
 * facts as plain text, number and size formatting, XML/HTML escaping and
 * the hand-over of a finished buffer.  Each format renders from a loaded
 * rdoc in its own file: report_md.c (Markdown, with its own escaping),
 * report_junit.c, report_html.c, and report_chart.c (the HTML page's SVG
 * charts).
 *
 * Life cycle of a rendering (report_render() and report_summary_markdown()
 * in report.c):
 *
 *   1. struct rdoc d; rdoc_load(&d, root, err, errlen);
 *   2. one render_*() call, which builds its text in a struct sbuf (see
 *      util/sbuf.h) and hands it over with report_finish();
 *   3. rdoc_release(&d).
 *
 * Ownership: an rdoc owns its four arrays only; every string and json_t
 * in it is borrowed from the document, which must outlive it.  Nothing
 * here prints, and nothing reads the clock or the environment (report.h
 * says why).
 */
#ifndef AB_REPORT_INT_H
#define AB_REPORT_INT_H

#include <stddef.h>

#include <jansson.h>

#include "util/sbuf.h"

/* ------------------------------------------------------------------ */
/* The document, read: every absent or null value is a marker.          */

/** A trial's outcome; OC_UNKNOWN for a word this version does not know. */
enum oc {
    OC_FIT, OC_OOM, OC_CRASH, OC_TIMEOUT, OC_HANG, OC_INTERRUPTED, OC_SPAWN, OC_NO_STEPS,
    OC_MISMATCH, OC_UNKNOWN, OC_N
};

/** The file's word for each outcome ("fit", "oom", ..., "unknown"). */
extern const char *const report_oc_name[OC_N];

/** Outcome colours (#rrggbb), shared by the timeline, its legend and the
 *  HTML trial table. */
extern const char *const report_oc_colour[OC_N];

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
    int has_model;                /* "memory_model": peak = base + slope x micro-batch */
    double model_base, model_slope;
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

/* The regression gate that baseline_compare() stores as "baseline". */
struct rgate {
    const json_t *changes;        /* its "changes" (NULL: none) */
    size_t nchanges, nreg;        /* how many changes, and how many are regressions */
    const char *file;             /* the baseline's path; NULL: unknown */
    double threshold;             /* NAN: unknown */
    int regression;               /* the gate failed */
    int other_command;            /* a change of kind "command": another command's baseline */
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
    struct rgate gate;            /* read from baseline; all zero when it is NULL */
    const json_t *run_with;       /* "run_with" when it is an object, else NULL */
    const json_t *capacity;       /* "capacity" when it is an object, else NULL (older files) */
    const json_t *warm;           /* "warm_start" when it is an object, else NULL */
    const json_t *settings;       /* "settings" when it is an object, else NULL */
    const char *unit;             /* "samples" unless the file says */
    double wall;                  /* summary.wall_s, else the trials' sum, else NAN */
    long long exit;               /* -1: unknown */
    int interrupted;
    const char *preset, *config, *started_at;
    size_t count[OC_N];
    int mem_axis;                 /* every fitting trial has a peak memory figure */
};

/**
 * Read root into d (d's previous contents are not looked at).  Returns 0,
 * or -1 with err filled when root is not a results document or memory ran
 * out; d then owns nothing.  On success, rdoc_release() frees d's arrays.
 */
int rdoc_load(struct rdoc *d, const json_t *root, char *err, size_t errlen);

/** Free d's arrays and zero d. */
void rdoc_release(struct rdoc *d);

/*
 * Values of o's key k, or a marker when o is not an object, k is absent,
 * null or of another type: jget NULL, jint -1 (a real is rounded), jnum
 * NAN (also for an infinite number), jstr NULL, jbool -1 (else 0 or 1).
 */
const json_t *report_jget(const json_t *o, const char *k);
long long report_jint(const json_t *o, const char *k);
double report_jnum(const json_t *o, const char *k);
const char *report_jstr(const json_t *o, const char *k);
int report_jbool(const json_t *o, const char *k);

/* What one change of the gate says: the index into report_gate_list()'s mark. */
enum change_kind { CHANGE_NOTE, CHANGE_REGRESSION, CHANGE_IMPROVEMENT };

/**
 * Every change of the regression gate, in the file's order, appended to
 * b: mark[its kind], its text through esc (the format's escaping of a
 * NUL-terminated string; "(no description)" when the file has none),
 * then end.
 */
void report_gate_list(struct sbuf *b, const struct rdoc *d, const char *const mark[3],
               void (*esc)(struct sbuf *, const char *), const char *end);

/** " (throughput threshold 5%)" when the gate records its threshold, else nothing. */
void report_gate_threshold(struct sbuf *b, const struct rdoc *d);

/* The warning under a gate whose baseline ran another command. */
#define GATE_OTHER_COMMAND \
    "the baseline was recorded for another command, so the numbers below may not be comparable."

/* ------------------------------------------------------------------ */
/* Numbers and facts as plain text, not yet escaped for any format.     */

#define DASH "\xe2\x80\x94" /* an em dash: an unknown value */

/*
 * v written into buf (n bytes) and buf returned, or DASH (a static
 * string) when v is a marker: fmt_int "%lld" (v < 0: DASH), fmt_rate
 * "%.1f", fmt_bytes "1.5 GiB" / "12.0 MiB" / "512 KiB", fmt_secs "1.25 s"
 * (fewer decimals from 10 s on); the doubles are DASH when NAN.
 */
const char *report_fmt_int(char *buf, size_t n, long long v);
const char *report_fmt_rate(char *buf, size_t n, double v);
const char *report_fmt_bytes(char *buf, size_t n, double v);
const char *report_fmt_secs(char *buf, size_t n, double v);

/** "on", "off", or DASH for c < 0. */
const char *report_ckpt_word(int c);

/*
 * The facts, appended to b as plain UTF-8 (the caller escapes them):
 * the command as a shell would take it ("(unknown)" when the file lacks
 * it); the host and its GPUs; the capacity and headroom line (report.h);
 * the search space; the trial counts; the exit status and its meaning;
 * one configuration (its micro-batch, grad-accum and checkpointing).
 */
void report_text_command(struct sbuf *b, const json_t *cmd);
void report_text_host(struct sbuf *b, const struct rdoc *d);
void report_text_capacity(struct sbuf *b, const struct rdoc *d);
void report_text_space(struct sbuf *b, const struct rdoc *d);
void report_text_trials(struct sbuf *b, const struct rdoc *d);
void report_text_exit(struct sbuf *b, const struct rdoc *d);
void report_text_config(struct sbuf *b, const struct rpoint *p);

/**
 * The warm start: used or not and why, the cache entry and the cells it
 * seeded, the trials it saved when the file knows them; "unknown" for a
 * file that does not say.
 */
void report_text_warm_start(struct sbuf *b, const struct rdoc *d);

/**
 * The settings that shaped the run beyond the search space ("settings"):
 * steps and warm-up, the confirmation run, the worst-case mode, replay,
 * probe, cache, the timeouts and budget, --trial-memory-limit, --gpus;
 * "not recorded" for a file without them.
 */
void report_text_settings(struct sbuf *b, const struct rdoc *d);

/**
 * Where the memory goes ("memory_breakdown"): the choice's breakdown and
 * the smallest fit's (once when they are one trial), each part in bytes
 * with its share of the capacity, the parts that were not measured named
 * as such.  Returns 1, or 0 with nothing written when the file has no
 * breakdown (older files, no probe).
 */
int report_text_memory(struct sbuf *b, const struct rdoc *d);

/**
 * The device capacity in bytes the file records (the headroom rule's,
 * "capacity.bytes"; for older files the smallest device's memory,
 * emulated when it was), or NAN; *source (when not NULL) its source word
 * from the file, or NULL.
 */
double report_capacity(const struct rdoc *d, const char **source);

/** The headroom as a fraction in [0, 1), or NAN when the file lacks it. */
double report_headroom(const struct rdoc *d);

/** Whether the choice is one of the frontier's points (by configuration). */
int report_best_on_frontier(const struct rdoc *d);

/**
 * The command that uses the choice, from "run_with": its variables
 * (NAME=value, the value quoted) then its words.  Returns 1, or 0 when
 * the file does not record it (older files, no choice), and nothing is
 * written.
 */
int report_text_run_with(struct sbuf *b, const struct rdoc *d);

/** The trial that stopped the search, when one did (borrowed from d), or NULL. */
const struct rtrial *report_failed_trial(const struct rdoc *d);

/**
 * "exit code 1", "signal 9", or nothing, appended to b.  Only for
 * outcomes where the command ended by itself: a fit, hang, timeout or
 * interrupted trial's signal is the one autobatch sent to end it.
 */
void report_text_status(struct sbuf *b, const struct rtrial *t);

/**
 * A trial's notes, appended to b and joined by "; ": chosen (the caller's
 * word for the choice, its markup included) for the chosen trial,
 * "retest", and report_text_status() of a trial that neither fitted nor ran out
 * of memory.  Returns whether it wrote anything.  The evidence is not
 * among them: each format cuts and escapes it its own way.
 */
int report_text_notes(struct sbuf *b, const struct rtrial *t, const char *chosen);

/**
 * The one-line headline, appended to b: what was chosen (*good = 1), or
 * why nothing was (*good = 0; it starts "no configuration", lowercase).
 */
void report_text_headline(struct sbuf *b, const struct rdoc *d, int *good);

/** Whether report_text_headline() says the run was interrupted. */
int report_headline_interrupted(const struct rdoc *d);

/** Whether a cell's search was pruned ("bounded_by": "pruned", or a
 *  "skipped" reason that starts "pruned"): its largest fit is no limit. */
int report_cell_pruned(const struct rcell *c);

/* A pruned cell's note and label: its largest fit is no limit. */
#define PRUNED_NOTE "pruned: could not beat the fastest fit, so its limit was not searched"

/**
 * A cell's notes, each appended to b through esc (the format's escaping
 * of a NUL-terminated string) and joined by "; ": why its search stopped
 * short of a failure, "inferred from other cells", why it was skipped,
 * and chosen when it is not NULL and the cell is the chosen
 * configuration's.  Returns whether it wrote anything.
 */
int report_cell_notes(struct sbuf *b, const struct rdoc *d, const struct rcell *c, const char *chosen,
               void (*esc)(struct sbuf *, const char *));

/* ------------------------------------------------------------------ */
/* XML and HTML escaping (Markdown escapes its own, in report_md.c).    */

/** Length of at most max bytes of s[0..n) that does not split a UTF-8 sequence. */
size_t report_utf8_cut(const char *s, size_t n, size_t max);

/**
 * Append s[0..n) to b as XML and HTML text (attr: inside a double-quoted
 * attribute, where tab, newline and carriage return become references).
 * & < > " ' become references; the other control characters, which XML
 * 1.0 cannot carry even as references, show as "\xNN"; malformed UTF-8
 * and U+FFFE/U+FFFF become U+FFFD.
 */
void report_xml_esc(struct sbuf *b, const char *s, size_t n, int attr);

/** report_xml_esc() of the NUL-terminated s. */
void report_xml_str(struct sbuf *b, const char *s, int attr);

/* ------------------------------------------------------------------ */
/* Handing a rendering over.                                           */

/** Fill err with the renderers' one out-of-memory message; returns -1. */
int report_oom(char *err, size_t errlen);

/**
 * Hand b's text to the caller as report.h's life cycle says: *out (the
 * caller free()s it) and its length in *len when len is not NULL; b is
 * left empty.  Returns 0, or, when an append to b failed, -1 with err
 * filled and *out untouched.
 */
int report_finish(struct sbuf *b, char **out, size_t *len, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* The formats.  Each returns 0 with *out and *len set as report.h      */
/* says, or -1 with err filled.                                         */

/** Markdown in at most max_bytes (SIZE_MAX: all of it), report_md.c. */
int report_render_markdown(const struct rdoc *d, size_t max_bytes, char **out, size_t *len, char *err,
                    size_t errlen);

/** JUnit XML, report_junit.c. */
int report_render_junit(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen);

/** The HTML page, report_html.c. */
int report_render_html(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen);

/*
 * The HTML page's charts (report_chart.c), each one <svg> element
 * appended to b, numbered as in report.h's REPORT_HTML: throughput
 * against peak memory, the largest fit per cell, the trial timeline.
 * Text from the file is escaped; a failed append sets b->oom.
 */
void report_svg_scatter(struct sbuf *b, const struct rdoc *d);
void report_svg_cells(struct sbuf *b, const struct rdoc *d);
void report_svg_timeline(struct sbuf *b, const struct rdoc *d);

/**
 * Peak memory against the micro-batch (id="memory"): one class="mem"
 * mark per fitting trial with a measured peak, each failed size (OOM,
 * timeout, hang) a red class="failed" cross at its micro-batch, the
 * capacity and headroom lines when known, and each cell's memory line
 * when the file carries one.  Nothing (no <svg>) when no trial has a
 * measured peak; returns whether it drew.
 */
int report_svg_memory(struct sbuf *b, const struct rdoc *d);

#endif
