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
#include <sys/ioctl.h>
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

static int progress_width(void)
{
    struct winsize ws;
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 80;
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

/*
 * Draw (or redraw) the live status: at most PROGRESS_REDRAW_S apart
 * unless forced, and only at the start of a line (the command's output
 * may have left one open).  Each line is cut to the terminal's width: a
 * line that wrapped could not be cleared.
 */
static void progress_draw(struct progress *p, int force)
{
    if (!p->tty || !p->active || !p->at_bol)
        return;
    double now = mono_now();
    if (!force && now - p->last_draw < PROGRESS_REDRAW_S)
        return;
    char line[3][512], t1[32], t2[32];
    int n = 0;
    int k = snprintf(line[n++], sizeof line[0],
                     "autobatch: trial %ld  micro_batch=%ld grad_accum=%ld checkpointing=%s  "
                     "step %ld/%ld", p->trial_id, p->micro_batch, p->grad_accum,
                     p->checkpointing ? "on" : "off", p->step, p->target);
    if (p->rate > 0 && k > 0 && (size_t)k < sizeof line[0])
        snprintf(line[0] + k, sizeof line[0] - (size_t)k, "  %.2f it/s", p->rate);

    char when[96] = "", bracket[96];
    if (p->budget_s > 0) {
        double left = p->budget_s - (now - p->t0);
        if (left > 0)
            snprintf(when, sizeof when, "  ends within ~%s (--budget)",
                     progress_dur(left, t2, sizeof t2));
        else
            snprintf(when, sizeof when, "  --budget spent: finishing");
    }
    if (p->fit >= 0 && p->fail > p->fit + 1 && p->trials_done > 0) {
        /* An estimate, not a bound: what bisecting the rest of the bracket
         * would take, at the mean trial time so far (a model's jump can
         * take fewer, the knee and other cells come after). */
        int left = (int)ceil(log2((double)(p->fail - p->fit)));
        snprintf(bracket, sizeof bracket,
                 "bracket: fits %ld, fails %ld (by bisection ~%d trial%s, ~%s)", p->fit, p->fail,
                 left, left == 1 ? "" : "s",
                 progress_dur(left * p->trials_s / (double)p->trials_done, t2, sizeof t2));
    } else if (p->fit >= 0 && p->fail >= 0)
        snprintf(bracket, sizeof bracket, "bracket: fits %ld, fails %ld", p->fit, p->fail);
    else if (p->fit >= 0)
        snprintf(bracket, sizeof bracket, "bracket: fits %ld, no failure yet", p->fit);
    else if (p->fail >= 0)
        snprintf(bracket, sizeof bracket, "bracket: fails %ld, no fit yet", p->fail);
    else
        snprintf(bracket, sizeof bracket, "bracket: nothing tried yet");
    snprintf(line[n++], sizeof line[0], "  elapsed %s%s  %s",
             progress_dur(now - p->t0, t1, sizeof t1), when, bracket);
    if (p->best_sps > 0)
        snprintf(line[n++], sizeof line[0],
                 "  fastest so far: micro_batch=%ld grad_accum=%ld checkpointing=%s, %.1f %s/s",
                 p->best_micro, p->best_accum, p->best_ckpt ? "on" : "off", p->best_sps, p->unit);

    size_t width = (size_t)progress_width() - 1, len = 0;
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
        if (w > width)
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

/* prefix, then text made safe (say.h), as one line. */
static void progress_say(FILE *f, const char *prefix, const char *text)
{
    say_line(f, prefix, "%s", text);
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
    va_list ap;
    va_start(ap, fmt);
    say_vline(stderr, "autobatch: ", fmt, ap); /* a note may quote the trainer */
    va_end(ap);
    fflush(stderr);
}

void progress_bracket(struct progress *p, long max_fit, long min_fail)
{
    p->fit = max_fit;
    p->fail = min_fail;
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
    p->hidden = !p->show || !argv;
    if (p->verbose && argv) {
        progress_clear(p);
        fputs("autobatch: $", stderr);
        for (size_t i = 0; argv[i]; i++) {
            fputc(' ', stderr);
            say_fputs(stderr, argv[i]);
        }
        fputc('\n', stderr);
    }
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

void progress_trial_end(struct progress *p, const struct trial_result *r, double samples_per_s)
{
    const char *col = r->outcome == TRIAL_FIT ? C_GREEN
                    : r->outcome == TRIAL_OOM ? C_YELLOW : C_RED;
    char extra[128] = "";
    p->active = 0;
    if (r->wall_s > 0) {
        p->trials_s += r->wall_s;
        p->trials_done++;
    }
    if (samples_per_s > 0)
        snprintf(extra, sizeof extra, ", %.1f %s/s", samples_per_s, p->unit);
    /* Our own words and numbers only, and the outcome's colour: written
     * as they are (say.h escapes only what others wrote). */
    progress_bol(p);
    fprintf(stderr, "autobatch: trial %ld: micro_batch=%ld grad_accum=%ld checkpointing=%s -> "
                    "%s%s%s (%ld steps%s, %.1fs)\n", p->trial_id, p->micro_batch, p->grad_accum,
            p->checkpointing ? "on" : "off", progress_c(p, col), trial_outcome_name(r->outcome),
            progress_c(p, C_RESET), r->steps_seen, extra, r->wall_s);
    fflush(stderr);
    /* A failure whose output nobody saw: its last lines say what went on.
     * A crash prints its whole tail itself (main.c), an interrupt or a
     * command that never started has nothing to say. */
    int failed = r->outcome != TRIAL_FIT && r->outcome != TRIAL_CRASH &&
                 r->outcome != TRIAL_INTERRUPTED && r->outcome != TRIAL_SPAWN_FAILED;
    int from = r->tail_count > PROGRESS_TAIL_SHOWN ? r->tail_count - PROGRESS_TAIL_SHOWN : 0;
    int tail = failed && p->hidden && r->tail_count > 0;
    /* The OOM line, cut for one line, unless the tail shows it whole. */
    int in_tail = 0;
    for (int i = from; tail && i < r->tail_count; i++)
        in_tail |= !strcmp(r->tail[i], r->evidence);
    if (r->outcome == TRIAL_OOM && r->evidence[0] && !in_tail) {
        char ev[PROGRESS_EVIDENCE_MAX + 8];
        progress_note(p, "  evidence: %s",
                      progress_clip(r->evidence, PROGRESS_EVIDENCE_MAX, ev, sizeof ev));
    }
    if (tail) {
        fputs("  last lines of its output:\n", stderr);
        for (int i = from; i < r->tail_count; i++)
            progress_say(stderr, "    | ", r->tail[i]);
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
        progress_say(stderr, "  | ", text);
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
