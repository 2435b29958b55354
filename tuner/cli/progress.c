/* SPDX-License-Identifier: MIT */
/*
 * progress: a live status on a terminal, plain lines elsewhere (see
 * progress.h).  All writes go to stderr, which is unbuffered, so our
 * lines and the command's passed-through bytes keep their order; the live
 * status is built in one buffer and written at once, so that it does not
 * flicker.
 */
#include "cli/progress.h"
#include "cli/say.h"
#include "util/mono.h"

#include "output/events.h"
#include "cli/outq.h"
#include "cli/cli.h"
#include "control/tune.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define C_RESET "\033[0m"
#define C_BOLD "\033[1m"
#define C_GREEN "\033[32m"
#define C_YELLOW "\033[33m"
#define C_RED "\033[31m"

/* Lines of a failed trial's output printed when that output was hidden. */
#define PROGRESS_TAIL_SHOWN 10
/* Evidence is cut (at a word boundary) after this many bytes. */
#define PROGRESS_EVIDENCE_MAX 200
/* The live status is redrawn at most this often for steps and output... */
#define PROGRESS_REDRAW_S 0.1
/* ... and at least this often, so that its clock moves. */
#define PROGRESS_CLOCK_S 1.0

/* The progress whose live status the terminal shows, for progress_tick():
 * there is one stderr, so there is at most one. */
static struct progress *progress_drawing;

void progress_init(struct progress *p, int quiet, int show_output, int verbose)
{
    memset(p, 0, sizeof *p);
    const char *term = getenv("TERM");
    p->tty = isatty(2) && !(term && !strcmp(term, "dumb"));
    p->color = p->tty && !getenv("NO_COLOR");
    p->quiet = quiet;
    p->verbose = verbose;
    /* hyperfine's rule: on a terminal the command's output would fight
     * the live status, so it is hidden unless asked for; a log keeps it. */
    p->show = !quiet && (show_output || !p->tty);
    p->at_bol = 1;
    p->rate = -1;
    p->unit = "samples";
    p->t0 = mono_now();
    p->fit = p->fail = -1;
}

static const char *progress_c(const struct progress *p, const char *code)
{
    return p->color ? code : "";
}

char *progress_clip(const char *s, size_t max, char *out, size_t outlen)
{
    size_t len = strlen(s);
    if (!outlen)
        return out;
    if (len <= max) {
        snprintf(out, outlen, "%s", s);
        return out;
    }
    /* s[cut] is the first byte left out: a space there is a clean cut. */
    size_t cut = max;
    while (cut > max / 2 && s[cut] != ' ')
        cut--;
    if (s[cut] != ' ') {
        cut = max; /* one long word: cut it, but not inside a UTF-8 sequence */
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut--;
    }
    while (cut > 0 && s[cut - 1] == ' ')
        cut--;
    snprintf(out, outlen, "%.*s ...", (int)cut, s);
    return out;
}

/* "45s", "2m05s", "1h02m" */
static const char *progress_dur(double s, char *buf, size_t len)
{
    long t = s > 0 ? (long)(s + 0.5) : 0;
    if (t < 60)
        snprintf(buf, len, "%lds", t);
    else if (t < 3600)
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%ldh%02ldm", t / 3600, t % 3600 / 60);
    return buf;
}

/* The live status's width: the terminal's, less one column (say_width). */
static size_t progress_width(void)
{
    size_t w = say_width(2);
    return w ? w : 79;
}

/* Append to the status buffer; what does not fit is left out. */
static void progress_put(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + n >= cap)
        n = cap - 1 - *len;
    memcpy(buf + *len, s, n);
    *len += n;
    buf[*len] = '\0';
}

/* Add the field seg to line (our own ASCII words and numbers) when it fits
 * whole within width columns: a field is shown whole or not at all, never
 * "step 2/4  0.".  Returns whether it was added. */
static int progress_field(char *line, size_t cap, size_t width, const char *seg)
{
    size_t len = strlen(line), n = strlen(seg);
    if (len + n > width || len + n >= cap)
        return 0;
    memcpy(line + len, seg, n + 1);
    return 1;
}

/* "7.9 s" below 100 s, else as progress_dur. */
static const char *progress_secs(double s, char *buf, size_t len)
{
    if (s < 99.95)
        snprintf(buf, len, "%.1f s", s > 0 ? s : 0);
    else
        progress_dur(s, buf, len);
    return buf;
}

/* Take the live status off the terminal: the cursor ends where its first
 * line began. */
static void progress_clear(struct progress *p)
{
    if (!p->live)
        return;
    char buf[256];
    size_t len = 0;
    progress_put(buf, sizeof buf, &len, "\r\033[K", 4);
    for (int i = 1; i < p->live; i++)
        progress_put(buf, sizeof buf, &len, "\033[A\033[K", 6);
    fwrite(buf, 1, len, stderr);
    p->live = 0;
}

/* About how long one whole trial takes: the mean of those that fitted (a
 * failure ends early), else of all that ended; <= 0 none yet. */
static double progress_trial_estimate(const struct progress *p)
{
    if (p->fits_done > 0)
        return p->fits_s / (double)p->fits_done;
    return p->trials_done > 0 ? p->trials_s / (double)p->trials_done : 0;
}

/*
 * Draw (or redraw) the live status: at most PROGRESS_REDRAW_S apart
 * unless forced, and only at the start of a line (the command's output
 * may have left one open).  Each line is built of whole fields within the
 * terminal's width: a line that wrapped could not be cleared, and a field
 * cut in half misleads.
 */
static void progress_draw(struct progress *p, int force)
{
    if (!p->tty || !p->active || !p->at_bol)
        return;
    double now = mono_now();
    if (!force && now - p->last_draw < PROGRESS_REDRAW_S)
        return;
    size_t width = progress_width();
    char line[3][512], seg[160], t1[32], t2[32];
    int n = 0;

    /* The trial: what it runs, how far it got, how long it takes. */
    snprintf(line[n], sizeof line[0], "autobatch: trial %ld", p->trial_id);
    snprintf(seg, sizeof seg, "  %ldx%ld ckpt %s", p->micro_batch, p->grad_accum,
             p->checkpointing ? "on" : "off");
    progress_field(line[n], sizeof line[0], width, seg);
    if (p->step <= 0 && p->first_step_t <= 0)
        snprintf(seg, sizeof seg, "  starting");
    else
        snprintf(seg, sizeof seg, "  step %ld/%ld", p->step, p->target);
    progress_field(line[n], sizeof line[0], width, seg);
    if (p->rate > 0) {
        snprintf(seg, sizeof seg, "  %.2f it/s", p->rate);
        progress_field(line[n], sizeof line[0], width, seg);
    }
    double est = progress_trial_estimate(p);
    if (est >= 0.5) /* "of ~0s" says nothing */
        snprintf(seg, sizeof seg, "  %s of ~%s", progress_dur(now - p->trial_t0, t1, sizeof t1),
                 progress_dur(est, t2, sizeof t2));
    else
        snprintf(seg, sizeof seg, "  %s", progress_dur(now - p->trial_t0, t1, sizeof t1));
    progress_field(line[n], sizeof line[0], width, seg);
    n++;

    /* The run: elapsed, the bracket, the budget. */
    snprintf(line[n], sizeof line[0], "  elapsed %s", progress_dur(now - p->t0, t1, sizeof t1));
    if (p->fit >= 0 && p->fail > p->fit + 1 && p->trials_done > 0) {
        /* An estimate, not a bound: what bisecting the rest of the bracket
         * would take, at the mean trial time so far (a model's jump can
         * take fewer, the knee and other cells come after). */
        int left = (int)ceil(log2((double)(p->fail - p->fit)));
        snprintf(seg, sizeof seg, "  bracket: fits %ld, fails %ld: ~%d trial%s, ~%s", p->fit,
                 p->fail, left, left == 1 ? "" : "s",
                 progress_dur(left * p->trials_s / (double)p->trials_done, t2, sizeof t2));
        if (!progress_field(line[n], sizeof line[0], width, seg)) {
            snprintf(seg, sizeof seg, "  bracket: fits %ld, fails %ld", p->fit, p->fail);
            progress_field(line[n], sizeof line[0], width, seg);
        }
    } else {
        if (p->fit >= 0 && p->fail >= 0)
            snprintf(seg, sizeof seg, "  bracket: fits %ld, fails %ld", p->fit, p->fail);
        else if (p->fit >= 0)
            snprintf(seg, sizeof seg, "  bracket: fits %ld, no failure yet", p->fit);
        else if (p->fail >= 0)
            snprintf(seg, sizeof seg, "  bracket: fails %ld, no fit yet", p->fail);
        else
            snprintf(seg, sizeof seg, "  bracket: nothing tried yet");
        progress_field(line[n], sizeof line[0], width, seg);
    }
    if (p->budget_s > 0) {
        double left = p->budget_s - (now - p->t0);
        if (left > 0)
            snprintf(seg, sizeof seg, "  budget: ~%s left", progress_dur(left, t2, sizeof t2));
        else
            snprintf(seg, sizeof seg, "  budget spent: finishing");
        progress_field(line[n], sizeof line[0], width, seg);
    }
    n++;

    if (p->best_sps > 0) {
        snprintf(line[n], sizeof line[0], "  fastest so far: %ldx%ld ckpt %s", p->best_micro,
                 p->best_accum, p->best_ckpt ? "on" : "off");
        snprintf(seg, sizeof seg, "  %.1f %s/s", p->best_sps, p->unit);
        progress_field(line[n], sizeof line[0], width, seg);
        n++;
    }

    size_t len = 0;
    char buf[2048];
    buf[0] = '\0';
    /* Clear the old status in the same write. */
    if (p->live) {
        progress_put(buf, sizeof buf, &len, "\r\033[K", 4);
        for (int i = 1; i < p->live; i++)
            progress_put(buf, sizeof buf, &len, "\033[A\033[K", 6);
    }
    for (int i = 0; i < n; i++) {
        size_t w = strlen(line[i]);
        if (w > width) /* only a trial number or candidate wider than the terminal */
            w = width;
        progress_put(buf, sizeof buf, &len, i ? "\n\033[K" : "\r\033[K", 4);
        const char *s = line[i];
        if (i == 0 && p->color && w >= 9) { /* "autobatch" in bold */
            progress_put(buf, sizeof buf, &len, C_BOLD, strlen(C_BOLD));
            progress_put(buf, sizeof buf, &len, s, 9);
            progress_put(buf, sizeof buf, &len, C_RESET, strlen(C_RESET));
            s += 9;
            w -= 9;
        }
        progress_put(buf, sizeof buf, &len, s, w);
    }
    fwrite(buf, 1, len, stderr);
    fflush(stderr);
    p->live = n;
    p->dirty = 0;
    p->last_draw = now;
    progress_drawing = p;
}

/* Columns for a line of ours: the terminal's (progress_width), or 0 (no
 * limit) in a log. */
static size_t progress_cols(const struct progress *p)
{
    return p->tty ? progress_width() : 0;
}

/* prefix, then text made safe (say.h): on a terminal wrapped at its
 * width, the lines after the first under indent; elsewhere one line. */
static void progress_say(const struct progress *p, const char *prefix, const char *indent,
                         const char *text)
{
    say_wrap(stderr, prefix, indent, progress_cols(p), text);
}

/* Make room for a line of autobatch's own: the live status cleared, the
 * command's unfinished line ended. */
static void progress_bol(struct progress *p)
{
    progress_clear(p);
    if (!p->at_bol)
        fputc('\n', stderr);
    p->at_bol = 1;
}

void progress_note(struct progress *p, const char *fmt, ...)
{
    progress_bol(p);
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    /* A note may quote the trainer: made safe, and wrapped on a terminal. */
    progress_say(p, "autobatch: ", "  ", text ? text : "out of memory");
    free(text);
    fflush(stderr);
}

void progress_bracket(struct progress *p, long max_fit, long min_fail)
{
    p->fit = max_fit;
    p->fail = min_fail;
}

/* The command line a trial runs (-v): "autobatch: $ ARG...", each
 * argument made safe; on a terminal wrapped at its width. */
static void progress_argv(struct progress *p, char *const *argv)
{
    size_t len = 2;
    for (size_t i = 0; argv[i]; i++)
        len += strlen(argv[i]) + 1;
    char *line = malloc(len);
    if (!line) {
        progress_note(p, "$ (out of memory)");
        return;
    }
    strcpy(line, "$");
    for (size_t i = 0; argv[i]; i++) {
        strcat(line, " ");
        strcat(line, argv[i]);
    }
    progress_bol(p);
    progress_say(p, "autobatch: ", "    ", line);
    free(line);
}

void progress_trial_start(struct progress *p, long id, long micro, long accum, int ckpt,
                          long target_steps, char *const *argv)
{
    p->trial_id = id;
    p->micro_batch = micro;
    p->grad_accum = accum;
    p->checkpointing = ckpt;
    p->step = 0;
    p->target = target_steps;
    p->rate = -1;
    p->first_step_t = 0;
    p->trial_t0 = mono_now();
    p->hidden = !p->show || !argv;
    if (p->verbose && argv)
        progress_argv(p, argv);
    if (p->tty) {
        p->active = 1;
        progress_draw(p, 1);
    } else {
        progress_note(p, "trial %ld: micro_batch=%ld grad_accum=%ld checkpointing=%s", id, micro,
                      accum, ckpt ? "on" : "off");
    }
}

void progress_output(void *ctx, int stream, const char *data, size_t n)
{
    struct progress *p = ctx;
    (void)stream;
    if (!p->show || !n)
        return;
    if (p->live) {
        progress_clear(p);
        fflush(stderr);
    }
    /* Raw bytes, a whole read at a time: a 100 MB line passes through
     * without being held in memory, and a reader that does not keep up
     * costs a bounded queue, never a blocked loop (outq.h). */
    outq_write(2, data, n);
    p->at_bol = data[n - 1] == '\n';
    p->dirty = 1;
    progress_draw(p, 0);
}

void progress_tick(void)
{
    struct progress *p = progress_drawing;
    if (!p || !p->active)
        return;
    double now = mono_now();
    if (!p->live || p->dirty || now - p->last_draw >= PROGRESS_CLOCK_S)
        progress_draw(p, 0);
}

void progress_step(void *ctx, long step, double rate_it_s)
{
    struct progress *p = ctx;
    double now = mono_now();
    /* Without a rate from the trainer, the steps' own: since the first
     * step this trial showed. */
    if (p->first_step_t <= 0) {
        p->first_step_t = now;
        p->first_step = step;
    } else if (rate_it_s <= 0 && step > p->first_step && now > p->first_step_t) {
        p->rate = (double)(step - p->first_step) / (now - p->first_step_t);
    }
    p->step = step;
    if (rate_it_s > 0)
        p->rate = rate_it_s;
    p->dirty = 1;
    progress_draw(p, 0);
    if (events_on()) {
        if (now - p->last_event >= 0.1 || p->event_trial != p->trial_id) {
            p->last_event = now;
            p->event_trial = p->trial_id;
            events_emit("step", json_pack("{s:I, s:I, s:o}", "trial", (json_int_t)p->trial_id,
                                          "step", (json_int_t)step, "it_per_s",
                                          rate_it_s > 0 ? json_real(rate_it_s) : json_null()));
        }
    }
}

/* A trial's outcome as the user should read it: "budget" for a trial
 * that --budget cut short (the loop caps a trial at the budget left, so
 * such a trial ends as a timeout once the budget is spent), not
 * "timeout", which would send the user to --trial-timeout. */
static const char *progress_outcome(const struct progress *p, const struct trial_result *r)
{
    if (r->outcome == TRIAL_TIMEOUT && p->budget_s > 0 && mono_now() - p->t0 >= p->budget_s)
        return "budget";
    return trial_outcome_name(r->outcome);
}

/* What a failed trial showed, for one line: the OOM line or a crash's last
 * line, else (its output hidden) its last line of output; "" none. */
static const char *progress_detail(const struct progress *p, const struct trial_result *r)
{
    if (r->outcome == TRIAL_FIT || r->outcome == TRIAL_INTERRUPTED ||
        r->outcome == TRIAL_SPAWN_FAILED)
        return "";
    if (r->evidence[0])
        return r->evidence;
    if (p->hidden && r->tail_count > 0)
        return r->tail[r->tail_count - 1];
    return "";
}

/* "64.00 GiB", "512.00 MiB", as PyTorch words a size. */
static const char *progress_size(int64_t b, char *buf, size_t len)
{
    if (b >= 1073741824)
        snprintf(buf, len, "%.2f GiB", (double)b / 1073741824.0);
    else
        snprintf(buf, len, "%.2f MiB", (double)b / 1048576.0);
    return buf;
}

/*
 * A failure's detail for its line on a terminal, into out: for an OOM
 * whose numbers were read, what it tried and what was free (what decides
 * the boundary, in the few columns there are); else the evidence made
 * safe, without the exception's class ("torch.OutOfMemoryError: "), the
 * width better spent on what it says.  -v or --show-output show it whole.
 */
static const char *progress_short(const struct trial_result *r, const char *detail, char *out,
                                  size_t len)
{
    const struct oom_numbers *o = &r->oom_numbers;
    char a[32], b[32];
    if (r->outcome == TRIAL_OOM && detail == r->evidence && o->tried > 0) {
        if (o->free >= 0)
            snprintf(out, len, "tried %s, %s free", progress_size(o->tried, a, sizeof a),
                     progress_size(o->free, b, sizeof b));
        else
            snprintf(out, len, "tried to allocate %s", progress_size(o->tried, a, sizeof a));
        return out;
    }
    say_clean(detail, out, len);
    size_t k = strspn(out, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
    if (k > 0 && out[k] == ':' && out[k + 1] == ' ' && out[k + 2])
        memmove(out, out + k + 2, strlen(out + k + 2) + 1);
    return out;
}

/* The line for a trial that ended, on a terminal: hyperfine's one line per
 * run, within the width (progress.h shows it). */
static void progress_trial_line(struct progress *p, const struct trial_result *r,
                                double samples_per_s, const char *outcome, const char *detail)
{
    const char *col = r->outcome == TRIAL_FIT ? C_GREEN
                    : r->outcome == TRIAL_OOM ? C_YELLOW : C_RED;
    char cand[64], head[128], wall[32], after[64];
    snprintf(cand, sizeof cand, "%ldx%ld", p->micro_batch, p->grad_accum);
    snprintf(head, sizeof head, "#%-3ld %7s ckpt %-3s  ", p->trial_id, cand,
             p->checkpointing ? "on" : "off");
    /* The outcome padded to the longest usual one ("timeout"). */
    int pad = 7 - (int)strlen(outcome);
    snprintf(after, sizeof after, "%*s %6s", pad > 0 ? pad : 0, "",
             progress_secs(r->wall_s, wall, sizeof wall));
    size_t used = strlen(head) + strlen(outcome) + strlen(after), width = progress_width();
    fprintf(stderr, "%s%s%s%s%s", head, progress_c(p, col), outcome, progress_c(p, C_RESET), after);
    if (r->outcome == TRIAL_FIT && samples_per_s > 0) {
        fprintf(stderr, "  %8.1f %s/s", samples_per_s, p->unit);
    } else if (r->outcome == TRIAL_FIT && r->memory_only) {
        fprintf(stderr, "  memory only"); /* a boundary trial: no speed measured */
    } else if (r->outcome == TRIAL_FIT) {
        fprintf(stderr, "  %ld steps", r->steps_seen); /* timed beside others: no speed */
    } else if (detail[0] && used + 2 + 8 <= width) {
        size_t cap = strlen(detail) * 4 + 64;
        char *text = malloc(cap), *cut = malloc(cap + 8);
        /* progress_clip counts bytes, at least the columns: the line fits */
        if (text && cut)
            fprintf(stderr, "  %s", progress_clip(progress_short(r, detail, text, cap),
                                                  width - used - 2 - 4, cut, cap + 8));
        free(text);
        free(cut);
    }
    fputc('\n', stderr);
}

void progress_trial_end(struct progress *p, const struct trial_result *r, double samples_per_s)
{
    const char *col = r->outcome == TRIAL_FIT ? C_GREEN
                    : r->outcome == TRIAL_OOM ? C_YELLOW : C_RED;
    const char *outcome = progress_outcome(p, r);
    /* A budget cut is no failure of the candidate: nothing to explain. */
    const char *detail = strcmp(outcome, "budget") ? progress_detail(p, r) : "";
    char extra[128] = "";
    p->active = 0;
    if (r->wall_s > 0) {
        p->trials_s += r->wall_s;
        p->trials_done++;
        if (r->outcome == TRIAL_FIT) {
            p->fits_s += r->wall_s;
            p->fits_done++;
        }
    }
    progress_bol(p);
    /* The command's last lines, when its output was hidden, only with -v:
     * a failure is otherwise its line and its evidence.  A crash's are
     * printed by the loop, an interrupt or a command that never started
     * has nothing to say. */
    int failed = r->outcome != TRIAL_FIT && r->outcome != TRIAL_CRASH &&
                 r->outcome != TRIAL_INTERRUPTED && r->outcome != TRIAL_SPAWN_FAILED;
    int from = r->tail_count > PROGRESS_TAIL_SHOWN ? r->tail_count - PROGRESS_TAIL_SHOWN : 0;
    int tail = failed && p->hidden && p->verbose && r->tail_count > 0 && detail[0];
    if (p->tty) {
        progress_trial_line(p, r, samples_per_s, outcome, detail);
    } else {
        /* Our own words and numbers only, and the outcome's colour: written
         * as they are (say.h escapes only what others wrote).  Scripts
         * read this line: it keeps its form. */
        if (samples_per_s > 0)
            snprintf(extra, sizeof extra, ", %.1f %s/s", samples_per_s, p->unit);
        fprintf(stderr, "autobatch: trial %ld: micro_batch=%ld grad_accum=%ld checkpointing=%s -> "
                        "%s%s%s (%ld steps%s, %.1fs)\n", p->trial_id, p->micro_batch,
                p->grad_accum, p->checkpointing ? "on" : "off", progress_c(p, col), outcome,
                progress_c(p, C_RESET), r->steps_seen, extra, r->wall_s);
        /* The OOM line, cut for one line, unless the tail shows it whole;
         * a hidden failure without evidence: its last line of output. */
        int in_tail = 0;
        for (int i = from; tail && i < r->tail_count; i++)
            in_tail |= !strcmp(r->tail[i], detail);
        char ev[PROGRESS_EVIDENCE_MAX + 8];
        if (detail[0] && !in_tail && r->outcome != TRIAL_CRASH)
            progress_note(p, "  %s: %s", r->evidence[0] ? "evidence" : "last output",
                          progress_clip(detail, PROGRESS_EVIDENCE_MAX, ev, sizeof ev));
    }
    fflush(stderr);
    if (tail) {
        /* The trainer's own lines, whole (made safe); on a terminal a long
         * one folds at its width under the gutter. */
        fputs("  last lines of its output:\n", stderr);
        for (int i = from; i < r->tail_count; i++)
            say_fold(stderr, "    | ", "    + ", progress_cols(p), r->tail[i]);
        fflush(stderr);
    }
    if (r->outcome == TRIAL_FIT && samples_per_s > p->best_sps) {
        p->best_sps = samples_per_s;
        p->best_micro = p->micro_batch;
        p->best_accum = p->grad_accum;
        p->best_ckpt = p->checkpointing;
    }
    p->fit = p->fail = -1;
}

/* ---- the tuning loop's view (control/tune.h) */

static void progress_view_line(void *ctx, enum tune_line kind, const char *text)
{
    struct progress *p = ctx;
    switch (kind) {
    case TUNE_NOTE:
        progress_note(p, "%s", text);
        break;
    case TUNE_ERROR:
        progress_clear(p);
        cli_error("%s", text);
        break;
    case TUNE_TAIL:
        say_fold(stderr, "  | ", "  + ", progress_cols(p), text);
        break;
    }
}

static void progress_view_bracket(void *ctx, long max_fit, long min_fail)
{
    progress_bracket(ctx, max_fit, min_fail);
}

static void progress_view_start(void *ctx, long id, long micro, long accum, int ckpt,
                                long target_steps, char *const *argv)
{
    progress_trial_start(ctx, id, micro, accum, ckpt, target_steps, argv);
}

static void progress_view_tick(void *ctx)
{
    (void)ctx;
    outq_pump();
    progress_tick();
}

static void progress_view_end(void *ctx, const struct trial_result *r, double samples_per_s)
{
    progress_trial_end(ctx, r, samples_per_s);
}

struct tune_view progress_view(struct progress *p)
{
    return (struct tune_view){
        .ctx = p, .line = progress_view_line, .bracket = progress_view_bracket,
        .trial_start = progress_view_start, .output = progress_output, .step = progress_step,
        .tick = progress_view_tick, .trial_end = progress_view_end,
    };
}
