/* SPDX-License-Identifier: MIT */
/*
 * progress: live trial lines on a terminal, plain lines elsewhere (see
 * progress.h).  All writes go to stderr through stdio, flushed at once so
 * that our lines and the command's passed-through bytes keep their order.
 */
#include "progress.h"

#include "events.h"
#include "outq.h"

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

void progress_init(struct progress *p, int quiet, int verbose)
{
    memset(p, 0, sizeof *p);
    const char *term = getenv("TERM");
    p->tty = isatty(2) && !(term && !strcmp(term, "dumb"));
    p->color = p->tty && !getenv("NO_COLOR");
    p->quiet = quiet;
    p->verbose = verbose;
    p->at_bol = 1;
    p->rate = -1;
    p->unit = "samples";
}

static const char *progress_c(const struct progress *p, const char *code)
{
    return p->color ? code : "";
}

static void progress_clear(struct progress *p)
{
    if (p->live) {
        fputs("\r\033[K", stderr);
        p->live = 0;
    }
}

static void progress_draw(struct progress *p)
{
    if (!p->tty || !p->at_bol)
        return;
    fprintf(stderr, "\r\033[K%sautobatch%s: trial %ld  micro_batch=%ld grad_accum=%ld%s  step %ld/%ld",
            progress_c(p, C_BOLD), progress_c(p, C_RESET), p->trial_id, p->micro_batch,
            p->grad_accum, p->checkpointing ? " checkpointing" : "", p->step, p->target);
    if (p->rate > 0)
        fprintf(stderr, "  %.2f it/s", p->rate);
    fflush(stderr);
    p->live = 1;
}

void progress_note(struct progress *p, const char *fmt, ...)
{
    progress_clear(p);
    if (!p->at_bol)
        fputc('\n', stderr);
    va_list ap;
    va_start(ap, fmt);
    fputs("autobatch: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    p->at_bol = 1;
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
    if (p->verbose) {
        progress_clear(p);
        fputs("autobatch: $", stderr);
        for (size_t i = 0; argv[i]; i++)
            fprintf(stderr, " %s", argv[i]);
        fputc('\n', stderr);
    }
    if (p->tty)
        progress_draw(p);
    else
        progress_note(p, "trial %ld: micro_batch=%ld grad_accum=%ld checkpointing=%s", id, micro,
                      accum, ckpt ? "on" : "off");
}

void progress_output(void *ctx, int stream, const char *data, size_t n)
{
    struct progress *p = ctx;
    (void)stream;
    if (p->quiet || !n)
        return;
    progress_clear(p);
    fflush(stderr);
    /* Raw bytes: a 100 MB line passes through without being held in
     * memory, and a reader that does not keep up costs a bounded queue,
     * never a blocked loop (outq.h). */
    outq_write(2, data, n);
    p->at_bol = data[n - 1] == '\n';
    progress_draw(p);
}

void progress_step(void *ctx, long step, double rate_it_s)
{
    struct progress *p = ctx;
    p->step = step;
    if (rate_it_s > 0)
        p->rate = rate_it_s;
    progress_draw(p);
    if (events_on()) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double now = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
    if (samples_per_s > 0)
        snprintf(extra, sizeof extra, ", %.1f %s/s", samples_per_s, p->unit);
    progress_note(p, "trial %ld: micro_batch=%ld grad_accum=%ld -> %s%s%s (%ld steps%s, %.1fs)",
                  p->trial_id, p->micro_batch, p->grad_accum, progress_c(p, col),
                  trial_outcome_name(r->outcome), progress_c(p, C_RESET), r->steps_seen, extra,
                  r->wall_s);
    if (r->outcome == TRIAL_OOM && r->evidence[0])
        progress_note(p, "  evidence: %.200s", r->evidence);
}
