/* SPDX-License-Identifier: MIT */
/*
 * trial: the supervised run of one candidate (see trial.h for the life
 * cycle).  One loop does everything: reap, decide, escalate, poll, read.
 * Decisions are taken once; the first reason to stop a trial is the one
 * reported, and the teardown that follows never changes it.
 */
#include "trial/trial.h"
#include "util/mono.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inproc.h"
#include "trial/lbuf.h"
#include "trial/proctree.h"
#include "steps.h"

/* Longest line the watchers look at; longer ones are cut (lbuf.h). */
#define TRIAL_LBUF_CAP (64 * 1024)
/* How long output may still arrive after the command exited before we
 * decide: the last lines are often the OOM message. */
#define TRIAL_DRAIN_S 1.0
/* After SIGKILL, how long a pipe may stay open (held by something we
 * cannot reach) before we stop waiting for it. */
#define TRIAL_PIPE_BOUND_S 5.0
#define TRIAL_TICK_MS 50
#define TRIAL_SERIES_MAX 100000
/* Once an OOM line decided a trial nothing its processes do can change
 * the outcome, and ranks waiting in a collective for the one that failed
 * often ignore SIGTERM: after this long (or --kill-grace if shorter),
 * enough for the rank that printed the message to finish its traceback,
 * whatever is left gets SIGKILL. */
#define TRIAL_OOM_GRACE_S 0.5
/* A tailed file that does not exist yet is looked for again after this
 * long, each wait then twice the one before, up to TRIAL_TAIL_RETRY_MAX_S:
 * a busy trial goes round the loop once per read of its output, and an
 * open() per round would cost more than the reading. */
#define TRIAL_TAIL_RETRY_MIN_S 0.05
#define TRIAL_TAIL_RETRY_MAX_S 0.4

const char *trial_outcome_name(enum trial_outcome o)
{
    switch (o) {
    case TRIAL_FIT: return "fit";
    case TRIAL_OOM: return "oom";
    case TRIAL_CRASH: return "crash";
    case TRIAL_TIMEOUT: return "timeout";
    case TRIAL_HANG: return "hang";
    case TRIAL_INTERRUPTED: return "interrupted";
    case TRIAL_SPAWN_FAILED: return "spawn_failed";
    case TRIAL_NO_STEPS: return "no_steps";
    case TRIAL_MISMATCH: return "knob_mismatch";
    }
    return "unknown";
}

const char *trial_isolated_name(enum trial_isolated i)
{
    return i == TRIAL_ISOLATED_PIDNS ? "pid-namespace" : "process-tree";
}

const char *trial_steps_from_name(enum trial_steps_from f)
{
    switch (f) {
    case STEPS_FROM_PROBE: return "probe";
    case STEPS_FROM_REPORT: return "report";
    case STEPS_FROM_LOG: return "log";
    case STEPS_FROM_NONE: break;
    }
    return NULL;
}

/* ---------------------------------------------------------------- steps */

/* Step evidence of one kind, as (time, step) points in arrival order. */
struct series {
    double *t;
    long *step;
    size_t n, alloc;
};

/*
 * A trainer's step numbers are believed only as far as a trial can have
 * run them: counts are relative to the first point of the series (a
 * resumed trainer starts high), and no point may claim more than
 * TRIAL_STEPS_PER_S steps per second since the trial began, plus a start.
 * A line that says step 2^61 or 10^8 is ignored, so it can neither size
 * anything nor end a trial as a fit with an absurd rate.
 */
#define TRIAL_STEPS_PER_S 1000.0
#define TRIAL_STEPS_SLACK 100

static void series_add(struct series *s, double t, long step)
{
    if (s->n && step <= s->step[s->n - 1])
        return; /* only progress counts */
    if (s->n && t <= s->t[s->n - 1]) {
        /* Lines of one read share its time: several steps (tqdm redraws
         * the trainer wrote faster than we read) arrived together, and
         * only the last is known to be done by then.  One point, or the
         * steps between would count as taking no time. */
        s->step[s->n - 1] = step;
        return;
    }
    if (s->n) {
        double since = t - s->t[0];
        double most = (since > 0 ? since : 0) * TRIAL_STEPS_PER_S + TRIAL_STEPS_SLACK;
        if ((double)(step - s->step[0]) > most)
            return;
    }
    if (s->n == s->alloc) {
        if (s->alloc >= TRIAL_SERIES_MAX)
            return;
        size_t na = s->alloc ? 2 * s->alloc : 64;
        double *nt = realloc(s->t, na * sizeof *nt);
        if (!nt)
            return;
        s->t = nt;
        long *ns = realloc(s->step, na * sizeof *ns);
        if (!ns)
            return;
        s->step = ns;
        s->alloc = na;
    }
    s->t[s->n] = t;
    s->step[s->n] = step;
    s->n++;
}

/*
 * Steps done in this trial up to point i.  A first point that is a
 * plausible fresh count (at most TRIAL_STEPS_SLACK) is taken as it is; a
 * higher one is a global count carried over (a resumed trainer, or a
 * line claiming 10^8): it counts as one step, and only progress from it
 * counts after it.
 */
static long series_count_at(const struct series *s, size_t i)
{
    long first = s->step[0];
    return s->step[i] - first + (first <= TRIAL_STEPS_SLACK ? first : 1);
}

static long series_last(const struct series *s)
{
    return s->n ? series_count_at(s, s->n - 1) : 0;
}

static void series_release(struct series *s)
{
    free(s->t);
    free(s->step);
    memset(s, 0, sizeof *s);
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* One interval of a series: its time per step and how many steps it spans. */
struct span {
    double per;
    long steps;
};

static int cmp_span(const void *a, const void *b)
{
    double x = ((const struct span *)a)->per, y = ((const struct span *)b)->per;
    return (x > y) - (x < y);
}

/* The median of spans weighted by their steps (sorts v). */
static double weighted_median(struct span *v, size_t n, long total)
{
    qsort(v, n, sizeof *v, cmp_span);
    long seen = 0;
    for (size_t i = 0; i < n; i++) {
        seen += v[i].steps;
        if (2 * seen == total && i + 1 < n)
            return (v[i].per + v[i + 1].per) / 2; /* an even split: the middle */
        if (2 * seen >= total)
            return v[i].per;
    }
    return n ? v[n - 1].per : -1;
}

/*
 * The one definition of a trial's speed: from the first step boundary at
 * or after the warm-up to the last one seen, the steps between them over
 * the time between them.  step_time_s is that quotient, and
 * steps_measured the steps it counts, so samples/s (samples per step over
 * step_time_s) is the samples between the two boundaries over the time
 * between them, whatever the number of steps or the spacing of the
 * points.  A median of per-interval times is not: with few intervals
 * whose points were stamped unevenly (a bar line stamped when the next
 * one ended it, the last when the output closed), it weighed one short
 * interval against one long one and picked the short.
 *
 * The spread is the median absolute deviation of the per-step times of
 * the intervals between (each weighted by the steps it spans: a tqdm bar
 * redrawn at most every 0.1 s may skip steps) from their weighted median:
 * nothing is expanded per step, so memory is linear in the points seen.
 */
static void series_timing(const struct series *s, long warmup, struct trial_result *r)
{
    size_t first = 0;
    while (first < s->n && series_count_at(s, first) < warmup)
        first++;
    if (first + 1 >= s->n) {
        r->steps_measured = 0;
        return;
    }
    size_t last = s->n - 1;
    long total = s->step[last] - s->step[first];
    double span = s->t[last] - s->t[first];
    r->steps_measured = total;
    if (total <= 0 || !(span > 0))
        return;
    r->step_time_s = span / (double)total;
    size_t k = 0;
    struct span *v = malloc((last - first) * sizeof *v);
    struct span *dev = malloc((last - first) * sizeof *dev);
    for (size_t i = first + 1; v && dev && i <= last; i++) {
        long ds = s->step[i] - s->step[i - 1];
        v[k].per = (s->t[i] - s->t[i - 1]) / (double)ds;
        v[k].steps = ds;
        k++;
    }
    if (k) {
        double med = weighted_median(v, k, total);
        for (size_t i = 0; i < k; i++) {
            dev[i].per = fabs(v[i].per - med);
            dev[i].steps = v[i].steps;
        }
        r->step_time_mad_s = weighted_median(dev, k, total);
    }
    free(v);
    free(dev);
}

/* ---------------------------------------------------------------- state */

/* A file a trainer appends lines to (AUTOBATCH_REPORT, the probe's). */
struct tail {
    const char *path;
    int fd;
    off_t off;
    struct lbuf lb;
    double retry_at;   /* while it is missing: when to look again */
    double retry_wait; /* the wait before that look */
};

struct trial_state {
    const struct trial_opts *o;
    struct trial_result *r;
    struct lbuf lb[2];
    struct tail report, probe;
    int fd[2];            /* read ends of stdout/stderr; -1 once at EOF */
    pid_t pid;            /* the command, or the namespace's init */
    int ns;               /* pid is a PID namespace's init */
    int status_fd;        /* ns: the command's wait status comes up here */
    int reaped, status;   /* the command has exited, with this status */
    double t0, exit_at, last_activity;
    /* When a line began to arrive, the time its step counts at: a bar
     * redraw ("\r4/10 [...]") comes whole, but only the next redraw's
     * '\r' ends it, one step later; the last one is ended by the exit.
     * Stamped at its end, every line but the last would be a step late
     * and the last interval would count two steps in one step's time. */
    double pending_t[2];  /* the partial line held in lb[i] began to arrive */
    double line_t;        /* the line being delivered began to arrive */
    double next_t;        /* the line after it began to arrive */
    double read_t;        /* the read being fed was made */
    /* When the data of a read came (trial_arrival): the run-queue wait of
     * this thread, as the kernel counts it, since the last poll began. */
    int sched_fd;         /* /proc/thread-self/schedstat, or -1 */
    double poll_t;        /* the last poll began */
    double woke_late;     /* and its wake-up then waited this long for a CPU */
    int decided;          /* r->outcome is final */
    int oom_line;         /* an OOM line decided it: a short grace */
    int stopping, killed, signalled;
    double stop_at, kill_at;
    /* Step evidence by kind: the probe wins over the report over the log. */
    struct series probe_steps, report_steps, log_steps;
    struct trainlog log;
    int log_ok;
    long probe_rank, probe_pid; /* the process whose steps count: the lowest rank */
    int probe_active;     /* torch was imported with the probe's hooks in place */
    long ranks_seen[64];
    size_t nranks_seen;
    long long rank_retries[64]; /* allocator retries per rank (ranks_seen's order); -1 none said */
    long *nb;             /* batches per step, for the median */
    size_t nnb, nb_alloc;
    struct inproc_seen seen; /* what the model got per step (the counting process) */
    long target;          /* steps that end the trial as a fit; may grow once */
    int64_t mem_last;     /* the memory figure at step mem_last_step (memory_steps) */
    long mem_last_step;
    int extended;
    int tail_head;        /* r->tail is a ring while the trial runs: its oldest line */
};

/* ----------------------------------------------------------- last lines */

/* The last TRIAL_TAIL_LINES lines.  While the trial runs r->tail is a
 * ring starting at st->tail_head, so a line costs one copy of itself;
 * trial_tail_order() puts it oldest first when the trial ends. */
static void trial_tail_add(struct trial_state *st, const char *line, size_t len)
{
    struct trial_result *r = st->r;
    int slot;
    if (len >= TRIAL_LINE_MAX)
        len = TRIAL_LINE_MAX - 1;
    if (r->tail_count == TRIAL_TAIL_LINES) {
        slot = st->tail_head; /* the oldest line makes room */
        st->tail_head = (st->tail_head + 1) % TRIAL_TAIL_LINES;
    } else {
        slot = r->tail_count++;
    }
    memcpy(r->tail[slot], line, len);
    r->tail[slot][len] = '\0';
}

/* The latest line, or NULL. */
static const char *trial_tail_last(const struct trial_state *st)
{
    const struct trial_result *r = st->r;
    if (!r->tail_count)
        return NULL;
    return r->tail[(st->tail_head + r->tail_count - 1) % TRIAL_TAIL_LINES];
}

static void trial_tail_reverse(struct trial_result *r, int from, int to)
{
    char tmp[TRIAL_LINE_MAX];
    for (to--; from < to; from++, to--) {
        memcpy(tmp, r->tail[from], sizeof tmp);
        memcpy(r->tail[from], r->tail[to], sizeof tmp);
        memcpy(r->tail[to], tmp, sizeof tmp);
    }
}

/* Rotate the ring so that its oldest line is r->tail[0]: three reversals,
 * once per trial. */
static void trial_tail_order(struct trial_state *st)
{
    int h = st->tail_head;
    if (h == 0)
        return;
    trial_tail_reverse(st->r, 0, h);
    trial_tail_reverse(st->r, h, TRIAL_TAIL_LINES);
    trial_tail_reverse(st->r, 0, TRIAL_TAIL_LINES);
    st->tail_head = 0;
}

/* ------------------------------------------------------------ decisions */

/*
 * The series that counts.  The probe sees real optimizer steps, so once a
 * process has imported torch with its hooks, output lines alone cannot
 * make a fit: data preparation bars run after torch is imported and
 * before the first step.  A trainer that steps without torch.optim (its
 * own update rule) still shows progress in its output: after twice the
 * target in log steps with no optimizer step, the log is believed.
 */
static const struct series *trial_timing_series(const struct trial_state *st)
{
    if (st->probe_steps.n)
        return &st->probe_steps;
    if (st->report_steps.n)
        return &st->report_steps;
    if (st->probe_active && st->target > 0 && series_last(&st->log_steps) < 2 * st->target)
        return &st->probe_steps; /* empty: wait for the first optimizer step */
    return &st->log_steps;
}

static long trial_best_step(const struct trial_state *st)
{
    return series_last(trial_timing_series(st));
}

static enum trial_steps_from trial_steps_from(const struct trial_state *st)
{
    const struct series *s = trial_timing_series(st);
    if (!s->n)
        return STEPS_FROM_NONE;
    return s == &st->probe_steps ? STEPS_FROM_PROBE
         : s == &st->report_steps ? STEPS_FROM_REPORT : STEPS_FROM_LOG;
}

static void trial_signal_tree(struct trial_state *st, int sig)
{
    /* The group while its leader is unreaped (after that the pgid could in
     * principle be reused), and every descendant found in /proc, which
     * covers processes that left the group with setsid(). */
    if (!st->reaped)
        kill(-st->pid, sig);
    proctree_signal(getpid(), sig);
    st->signalled = 1;
}

/* SIGTERM to SIGKILL for this trial (TRIAL_OOM_GRACE_S). */
static double trial_grace(const struct trial_state *st)
{
    double g = st->o->grace_s;
    return st->oom_line && TRIAL_OOM_GRACE_S < g ? TRIAL_OOM_GRACE_S : g;
}

static void trial_stop(struct trial_state *st, enum trial_outcome why, double now)
{
    if (!st->decided) {
        st->r->outcome = why;
        st->decided = 1;
    }
    if (st->stopping)
        return;
    st->stopping = 1;
    st->stop_at = now;
    /* A memory-only fit is decided and nothing of the trainer's shutdown
     * is wanted: no grace. */
    if (st->r->memory_only && st->r->outcome == TRIAL_FIT) {
        trial_signal_tree(st, SIGKILL);
        st->killed = 1;
        st->kill_at = now;
        return;
    }
    trial_signal_tree(st, SIGTERM);
}

/* At the target: is the timing too noisy to trust?  Then run on for
 * extra_steps more, once. */
static int trial_extend(struct trial_state *st)
{
    if (st->extended || st->o->extra_steps <= 0 || st->o->noise_rel <= 0)
        return 0;
    struct trial_result tmp;
    tmp.step_time_s = tmp.step_time_mad_s = -1;
    series_timing(trial_timing_series(st), st->o->warmup_steps, &tmp);
    if (tmp.step_time_s <= 0 || tmp.step_time_mad_s <= st->o->noise_rel * tmp.step_time_s)
        return 0;
    st->extended = 1;
    st->target += st->o->extra_steps;
    st->r->extended = 1;
    return 1;
}

/* The probe's CUDA memory figure so far: the caching allocator's
 * reserved peak, with what lies outside it when the probe said both.
 * Not VmPeak: under an address-space cap glibc's heap keeps growing for
 * five to ten steps (bench/results/memory-only-*-cpu.txt), so a flat
 * step there decides nothing. */
static int64_t trial_mem_figure(const struct trial_result *r)
{
    return r->cuda_peak_bytes > r->peak_mem_bytes ? r->cuda_peak_bytes : r->peak_mem_bytes;
}

/* A memory-only trial (opts->memory_steps) is decided at step now_step:
 * past memory_steps, and its memory figure as it was a step before. */
static int trial_memory_settled(struct trial_state *st, long now_step)
{
    if (st->o->memory_steps <= 0 || trial_steps_from(st) != STEPS_FROM_PROBE)
        return 0;
    int64_t fig = trial_mem_figure(st->r);
    int flat = fig > 0 && fig == st->mem_last && now_step == st->mem_last_step + 1;
    st->mem_last = fig;
    st->mem_last_step = now_step;
    return flat && now_step > st->o->memory_steps;
}

static void trial_note_step(struct trial_state *st, long before, double rate)
{
    long now_step = trial_best_step(st);
    if (now_step > before) {
        st->r->steps_seen = now_step;
        if (st->o->hooks.step)
            st->o->hooks.step(st->o->hooks.ctx, now_step, rate);
        if (!st->decided && trial_memory_settled(st, now_step)) {
            st->r->memory_only = 1;
            trial_stop(st, TRIAL_FIT, mono_now());
        } else if (st->target > 0 && now_step >= st->target && !trial_extend(st))
            trial_stop(st, TRIAL_FIT, mono_now());
        else if (st->o->soak_s > 0 && now_step > st->o->warmup_steps + 1 &&
                 mono_now() - st->t0 >= st->o->soak_s)
            trial_stop(st, TRIAL_FIT, mono_now());
    }
}

static void trial_on_line(void *ctx, const char *line, size_t len, int flags)
{
    struct trial_state *st = ctx;
    struct trial_result *r = st->r;
    double t = st->line_t; /* when it began to arrive */
    st->line_t = st->next_t; /* the next began in this read: the first when the read's data came */
    st->next_t = st->read_t;
    /* A bar redraw that the next line of the same read redraws again says
     * nothing the next one does not: only the OOM signatures see it (the
     * step parser was a third of the line path on a fast bar). */
    int superseded = flags & LBUF_SUPERSEDED;
    if (!superseded)
        trial_tail_add(st, line, len);

    struct oom_match m;
    if (!st->decided && oom_table_match(st->o->oom, line, len, &m)) {
        size_t n = len < sizeof r->evidence - 1 ? len : sizeof r->evidence - 1;
        memcpy(r->evidence, line, n);
        r->evidence[n] = '\0';
        r->oom_name = m.name;
        oom_parse_numbers(line, len, &r->oom_numbers);
        st->oom_line = 1;
        trial_stop(st, TRIAL_OOM, mono_now());
        return;
    }

    if (!st->log_ok || superseded)
        return;
    long before = trial_best_step(st), step;
    /* A line counts at the time it began to arrive (trial_read): one
     * clock call a read, not a line (it was a tenth of the line path). */
    double rate = -1;
    if (!trainlog_line(&st->log, line, len, t, &step, &rate))
        return;
    /* The printed count is global: a resumed trainer starts high.  Only
     * the steps of this trial count toward its target. */
    if (st->log.start > 0 && step > st->log.start)
        step -= st->log.start;
    series_add(&st->log_steps, t, step);
    trial_note_step(st, before, rate);
}

static void trial_on_report(void *ctx, const char *line, size_t len, int flags)
{
    struct trial_state *st = ctx;
    struct step_event ev;
    (void)flags;
    if (!steps_parse_report(line, len, &ev))
        return;
    long before = trial_best_step(st);
    if (ev.time_s >= 0)
        series_add(&st->report_steps, ev.time_s, ev.step);
    else
        series_add(&st->report_steps, mono_now(), ev.step);
    if (ev.peak_mem_bytes > st->r->peak_mem_bytes)
        st->r->peak_mem_bytes = ev.peak_mem_bytes;
    trial_note_step(st, before, -1);
}

/* A step's CUDA figures (one view: all from CUDA): the largest reserved
 * peak plus what lies outside the allocator, over ranks and steps; the
 * smallest device total; the allocator's retries summed per rank
 * (*sum, NULL when the rank is not tracked), the largest rank's kept. */
static void trial_probe_cuda(struct trial_result *r, const struct inproc_event *ev, long rank,
                             long long *sum)
{
    if (ev->reserved >= 0 && ev->outside >= 0 && ev->reserved + ev->outside > r->cuda_peak_bytes) {
        r->cuda_peak_bytes = ev->reserved + ev->outside;
        r->cuda_peak_rank = rank;
    }
    if (ev->outside > r->cuda_outside_bytes)
        r->cuda_outside_bytes = ev->outside;
    if (ev->cuda_total > 0 && (r->cuda_total_bytes < 0 || ev->cuda_total < r->cuda_total_bytes))
        r->cuda_total_bytes = ev->cuda_total;
    if (ev->retries < 0 || !sum)
        return;
    *sum = (*sum < 0 ? 0 : *sum) + ev->retries;
    if (*sum > r->alloc_retries || (*sum == r->alloc_retries && rank < r->alloc_retries_rank)) {
        r->alloc_retries = (long)(*sum > INPROC_MAX_STEP ? INPROC_MAX_STEP : *sum);
        r->alloc_retries_rank = rank;
    }
}

/* One line of the in-process probe's file. */
static void trial_on_probe(void *ctx, const char *line, size_t len, int truncated)
{
    struct trial_state *st = ctx;
    struct trial_result *r = st->r;
    struct inproc_event ev;
    (void)truncated;
    if (!inproc_parse_line(line, len, &ev))
        return;
    if (ev.kind == INPROC_ERROR) {
        if (!r->probe_error[0])
            snprintf(r->probe_error, sizeof r->probe_error, "%s", ev.text);
        return;
    }
    if (ev.kind == INPROC_WORST) {
        /* The lowest rank's; of one rank the last (the probe plans only
         * loaders iterated before the first optimizer step, and the one
         * that trains is iterated last: after a sanity check's). */
        long wr = ev.rank >= 0 ? ev.rank : 0;
        if (!r->worst.mode[0] || wr <= r->worst.rank)
            r->worst = ev.worst, r->worst.rank = wr;
        return;
    }
    if (ev.kind == INPROC_MEM) {
        /* A second step's breakdown over one at a failure; then the
         * lowest rank's; of one rank the first step line (a process says
         * it once; a restarted rank would say it again) and the last
         * failure line (a dead thread's comes before the process's end). */
        long mr = ev.mem.rank >= 0 ? ev.mem.rank : 0;
        int take = !r->mem.device[0] || (r->mem.failure && !ev.mem.failure);
        if (!take && r->mem.failure == ev.mem.failure)
            take = mr < r->mem.rank || (mr == r->mem.rank && ev.mem.failure);
        if (take)
            r->mem = ev.mem, r->mem.rank = mr;
        return;
    }
    if (ev.kind == INPROC_TORCH) {
        r->probe_processes++;
        snprintf(r->probe_torch, sizeof r->probe_torch, "%.31s", ev.text);
        snprintf(r->probe_hook, sizeof r->probe_hook, "%s", ev.hook);
        st->probe_active |= strcmp(ev.hook, "none") != 0;
        return;
    }
    /* A step.  Facts from every rank; the count from the lowest rank. */
    long rank = ev.rank >= 0 ? ev.rank : 0;
    size_t k = 0;
    while (k < st->nranks_seen && st->ranks_seen[k] != rank)
        k++;
    if (k == st->nranks_seen && k < sizeof st->ranks_seen / sizeof *st->ranks_seen) {
        st->rank_retries[k] = -1;
        st->ranks_seen[st->nranks_seen++] = rank;
    }
    r->probe_ranks = (long)st->nranks_seen;
    trial_probe_cuda(r, &ev, rank, k < st->nranks_seen ? &st->rank_retries[k] : NULL);
    if (ev.world > r->probe_world)
        r->probe_world = ev.world;
    if (ev.reserved > r->peak_mem_bytes)
        r->peak_mem_bytes = ev.reserved;
    if (ev.allocated > r->peak_allocated_bytes)
        r->peak_allocated_bytes = ev.allocated;
    if (ev.held > r->held_bytes)
        r->held_bytes = ev.held;
    if (ev.vm_peak_kb >= 0 && ev.vm_peak_kb * 1024 > r->peak_vm_bytes)
        r->peak_vm_bytes = ev.vm_peak_kb * 1024;
    if (ev.elems > r->probe_elems_max)
        r->probe_elems_max = ev.elems;
    if (ev.batch_size > 0 && r->loader_batch < 0)
        r->loader_batch = ev.batch_size;
    if (st->probe_pid == 0 || rank < st->probe_rank) {
        /* The first process to step, or a lower rank: its steps count. */
        series_release(&st->probe_steps);
        inproc_seen_release(&st->seen);
        st->probe_rank = rank;
        st->probe_pid = ev.pid;
    }
    if (ev.pid != st->probe_pid)
        return;
    inproc_seen_add(&st->seen, &ev); /* out of memory: that step is not known */
    if (ev.batches >= 0 && ev.step > 1 && st->nnb < TRIAL_SERIES_MAX) {
        if (st->nnb == st->nb_alloc) {
            size_t na = st->nb_alloc ? 2 * st->nb_alloc : 64;
            long *nn = realloc(st->nb, na * sizeof *nn);
            if (nn) {
                st->nb = nn;
                st->nb_alloc = na;
            }
        }
        if (st->nnb < st->nb_alloc)
            st->nb[st->nnb++] = ev.batches;
    }
    long before = trial_best_step(st);
    series_add(&st->probe_steps, ev.t, ev.step);
    const struct trial_opts *o = st->o;
    if (!st->decided && o->expect_batch > 0 && ev.batch_size > 0 && ev.batch_size != o->expect_batch) {
        snprintf(r->evidence, sizeof r->evidence, "the trainer's DataLoader has batch_size=%ld, "
                 "not the candidate's %ld", ev.batch_size, o->expect_batch);
        trial_stop(st, TRIAL_MISMATCH, mono_now());
        return;
    }
    trial_note_step(st, before, -1);
}

/* Open a tailed file: only a regular file, never through a link; a
 * FIFO, a device or a link in its place is given up on (said once in the
 * result), so a read can never block or run forever.  -1: not open. */
static int trial_open_tail(struct trial_state *st, struct tail *tl)
{
    tl->fd = open(tl->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (tl->fd < 0) {
        if (errno == ELOOP || errno == ENXIO) {
            snprintf(st->r->tail_note, sizeof st->r->tail_note,
                     "'%s' was replaced by a link or a socket; it is ignored", tl->path);
            tl->path = NULL;
        }
        return -1; /* not written yet, or given up */
    }
    struct stat sb;
    if (fstat(tl->fd, &sb) || !S_ISREG(sb.st_mode)) {
        snprintf(st->r->tail_note, sizeof st->r->tail_note,
                 "'%s' is not a regular file; it is ignored", tl->path);
        close(tl->fd);
        tl->fd = -1;
        tl->path = NULL;
        return -1;
    }
    return 0;
}

/* Open a tailed file that was missing, unless it was looked for too
 * recently (TRIAL_TAIL_RETRY_MIN_S).  -1: not open. */
static int trial_retry_tail(struct trial_state *st, struct tail *tl, double now)
{
    if (now < tl->retry_at)
        return -1;
    if (trial_open_tail(st, tl) == 0)
        return 0;
    tl->retry_wait = tl->retry_wait > 0 ? 2 * tl->retry_wait : TRIAL_TAIL_RETRY_MIN_S;
    if (tl->retry_wait > TRIAL_TAIL_RETRY_MAX_S)
        tl->retry_wait = TRIAL_TAIL_RETRY_MAX_S;
    tl->retry_at = now + tl->retry_wait;
    return -1;
}

/* The next look for a missing file is now, whatever the backoff said. */
static void trial_rearm_tails(struct trial_state *st)
{
    st->report.retry_at = st->probe.retry_at = 0;
    st->report.retry_wait = st->probe.retry_wait = 0;
}

/* Read what was appended to a tailed file since last time.  The file is
 * one autobatch made (a regular file in its own directory); a read is
 * bounded so one tick never stalls on a huge append. */
static void trial_poll_tail(struct trial_state *st, struct tail *tl,
                            void (*on_line)(void *, const char *, size_t, int), double now)
{
    if (!tl->path)
        return;
    if (tl->fd < 0 && trial_retry_tail(st, tl, now))
        return;
    char buf[16384];
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n = pread(tl->fd, buf, sizeof buf, tl->off);
        if (n <= 0)
            return;
        tl->off += n;
        st->last_activity = mono_now();
        lbuf_feed(&tl->lb, buf, (size_t)n, on_line, st);
    }
}

static void trial_poll_tails(struct trial_state *st, double now)
{
    trial_poll_tail(st, &st->report, trial_on_report, now);
    trial_poll_tail(st, &st->probe, trial_on_probe, now);
}

/* ------------------------------------------------------ arrival times */

/*
 * A line is timed when it began to arrive, but the runner learns of it
 * only when it runs.  On a busy machine the data wakes it and it then
 * waits for a CPU, a scheduler slice or so (3-4 ms seen on two loaded
 * cores, against 0.05 ms at rest): a step line stamped that late makes
 * one interval long and the next short, a spread that is the runner's,
 * not the trainer's.  The kernel counts that wait (run_delay in
 * /proc/thread-self/schedstat, Linux 3.17 on), so the data came when it
 * was read less the wait since the poll that it woke.  Where the file
 * cannot be read the wait counts as none: lines are timed when read.
 */
static int trial_sched_open(void)
{
    return open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
}

/* Seconds this thread has waited, runnable, for a CPU; -1 unknown. */
static double trial_sched_waited(int fd)
{
    char buf[96];
    unsigned long long ran, waited;
    if (fd < 0)
        return -1;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &ran, &waited) != 2)
        return -1;
    return (double)waited / 1e9;
}

/* When the data of a read made at read_t came: when the poll that waited
 * for it was woken, and not before that poll began (what was there
 * already made it return at once, with no wait to take off).  A poll
 * woken by its timeout found data that came while it waited for a CPU,
 * at a time unknown: then the time it was read, as a stamp must never
 * come before its data. */
static double trial_arrival(const struct trial_state *st, double read_t)
{
    double t = read_t - st->woke_late;
    if (t >= st->poll_t + TRIAL_TICK_MS / 1000.0)
        return read_t;
    return t > st->poll_t ? t : st->poll_t < read_t ? st->poll_t : read_t;
}

static void trial_read(struct trial_state *st, int i)
{
    char buf[65536];
    ssize_t n = read(st->fd[i], buf, sizeof buf);
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN)
            return;
        n = 0; /* treat a read error as EOF */
    }
    if (n == 0) {
        st->line_t = st->pending_t[i];
        lbuf_finish(&st->lb[i], trial_on_line, st);
        close(st->fd[i]);
        st->fd[i] = -1;
        return;
    }
    st->last_activity = st->read_t = mono_now();
    double came = trial_arrival(st, st->read_t);
    if (st->o->hooks.output)
        st->o->hooks.output(st->o->hooks.ctx, i + 1, buf, (size_t)n);
    /* The first line this read ends began with the bytes held before it;
     * the first to begin in this read began when its data came; later
     * ones came with it or after, by the time it was read (lines of one
     * read that all counted from its first bytes would put a step as
     * early as the one before it).  A new partial line keeps the time it
     * began for the read that ends it. */
    int held = st->lb[i].len > 0;
    st->line_t = held ? st->pending_t[i] : came;
    st->next_t = held ? came : st->read_t;
    lbuf_feed(&st->lb[i], buf, (size_t)n, trial_on_line, st);
    st->pending_t[i] = st->line_t;
}

/* The command exited and its output is drained: what did it amount to? */
static enum trial_outcome trial_classify_exit(struct trial_state *st)
{
    struct trial_result *r = st->r;
    if (WIFEXITED(st->status) && WEXITSTATUS(st->status) == 0)
        return trial_best_step(st) > 0 ? TRIAL_FIT : TRIAL_NO_STEPS;
    /* A SIGKILL we did not send is the kernel's OOM killer; a shell or a
     * container between us and the victim reports it as exit 137. */
    int killed = (WIFSIGNALED(st->status) && WTERMSIG(st->status) == SIGKILL) ||
                 (WIFEXITED(st->status) && WEXITSTATUS(st->status) == 128 + SIGKILL);
    if (killed && !st->signalled) {
        r->kernel_oom = 1;
        snprintf(r->evidence, sizeof r->evidence,
                 "killed by SIGKILL that autobatch did not send (kernel OOM killer)");
        return TRIAL_OOM;
    }
    const char *last = trial_tail_last(st);
    if (last)
        snprintf(r->evidence, sizeof r->evidence, "%s", last);
    return TRIAL_CRASH;
}

/* ---------------------------------------------------------------- spawn */

/* Reset what the child inherited from us: dispositions, mask. */
static void trial_reset_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &sa, NULL); /* fails harmlessly for SIGKILL/SIGSTOP */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* The command itself: stdio, working directory, limits, exec. */
static void trial_exec(const struct trial_spec *spec, const struct trial_opts *o,
                       int devnull, int out_w, int err_w, int exec_w)
{
    if (dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        goto fail;
    if (spec->cwd && chdir(spec->cwd))
        goto fail;
    if (o->mem_limit) {
        struct rlimit rl = { (rlim_t)o->mem_limit, (rlim_t)o->mem_limit };
        if (setrlimit(RLIMIT_AS, &rl))
            goto fail;
    }
    execvpe(spec->argv[0], spec->argv, spec->envp);
fail:;
    int e = errno;
    ssize_t w = write(exec_w, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* Without a namespace: the command is our child and its group's leader. */
static void trial_child(const struct trial_spec *spec, const struct trial_opts *o,
                        int devnull, int out_w, int err_w, int exec_w, pid_t parent)
{
    /* Only async-signal-safe calls from here on. */
    trial_reset_signals();
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* autobatch died before we got here */
    trial_exec(spec, o, devnull, out_w, err_w, exec_w);
}

/*
 * With a PID namespace: this is its init (PID 1).  It dies with autobatch
 * (parent-death signal; the lifeline pipe closes if autobatch was already
 * gone), and when it dies the kernel kills every process of the
 * namespace, however deep, whatever it does with its signals.  It mounts
 * a /proc of the namespace in a mount namespace of its own, so that the
 * trainer's pids and /proc agree; starts the command in its own process
 * group (so kill(-init) reaches the command, and init, which has no
 * handlers, ignores everything but SIGKILL from outside); reaps every
 * orphan of the namespace; sends the command's wait status up the status
 * pipe; and exits once nothing is left.
 */
static void trial_init(const struct trial_spec *spec, const struct trial_opts *o, int devnull,
                       int out_w, int err_w, int exec_w, int status_w, int life_r)
{
    trial_reset_signals();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct pollfd lp = { life_r, POLLIN, 0 };
    if (poll(&lp, 1, 0) != 0)
        _exit(127); /* the write end is closed: autobatch is gone */
    setpgid(0, 0);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    pid_t cmd = fork();
    if (cmd == 0) {
        close(status_w);
        close(life_r);
        trial_exec(spec, o, devnull, out_w, err_w, exec_w);
    }
    if (cmd < 0) {
        int e = errno;
        ssize_t w = write(exec_w, &e, sizeof e);
        (void)w;
        _exit(127);
    }
    /* Hold nothing of the trial's: the output must reach EOF without us. */
    close(exec_w);
    close(out_w);
    close(err_w);
    close(devnull);
    for (;;) {
        int ws;
        pid_t p = waitpid(-1, &ws, 0);
        if (p == cmd) {
            ssize_t w = write(status_w, &ws, sizeof ws);
            (void)w;
        } else if (p < 0 && errno != EINTR) {
            _exit(0); /* ECHILD: the namespace is empty */
        }
    }
}

/* clone(2) as fork(2) (no new stack), into new PID and mount namespaces.
 * -1 with errno when the kernel or our privileges do not allow it. */
static pid_t trial_clone_ns(void)
{
    return (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWPID | CLONE_NEWNS | SIGCHLD),
                          NULL, NULL, NULL, NULL);
}

int trial_run(const struct trial_spec *spec, const struct trial_opts *o,
              struct trial_result *r)
{
    memset(r, 0, sizeof *r);
    r->exit_code = -1;
    r->step_time_s = r->step_time_mad_s = -1;
    r->peak_mem_bytes = -1;
    r->peak_allocated_bytes = -1;
    r->held_bytes = -1;
    r->peak_vm_bytes = -1;
    r->cuda_peak_bytes = r->cuda_outside_bytes = r->cuda_total_bytes = -1;
    r->cuda_peak_rank = r->alloc_retries = r->alloc_retries_rank = -1;
    r->probe_world = -1;
    r->loader_batch = -1;
    r->loader_batches_per_step = -1;
    r->oom_numbers.tried = r->oom_numbers.total = r->oom_numbers.free = -1;
    r->oom_numbers.gpu = -1;

    int out[2] = { -1, -1 }, err[2] = { -1, -1 }, ex[2] = { -1, -1 };
    int stp[2] = { -1, -1 }, life[2] = { -1, -1 };
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(ex, O_CLOEXEC) ||
        pipe2(stp, O_CLOEXEC) || pipe2(life, O_CLOEXEC)) {
        int e = errno;
        int all[] = { devnull, out[0], out[1], err[0], err[1], ex[0], ex[1],
                      stp[0], stp[1], life[0], life[1] };
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            if (all[i] >= 0)
                close(all[i]);
        errno = e;
        return -1;
    }

    /* Block the signals we handle so that our handlers never run in the
     * child between fork and the reset of its dispositions. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t parent = getpid();
    double t0 = mono_now();
    int ns = 0;
    pid_t pid = -1;
    if (o->isolation != TRIAL_ISOLATE_NEVER) {
        pid = trial_clone_ns();
        if (pid == 0)
            trial_init(spec, o, devnull, out[1], err[1], ex[1], stp[1], life[0]);
        ns = pid > 0;
    }
    if (!ns)
        pid = fork();
    if (pid == 0)
        trial_child(spec, o, devnull, out[1], err[1], ex[1], parent);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(devnull);
    close(out[1]);
    close(err[1]);
    close(ex[1]);
    close(stp[1]);
    close(life[0]);
    if (pid < 0) {
        int fds[] = { out[0], err[0], ex[0], stp[0], life[1] };
        for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
            close(fds[i]);
        errno = fork_errno;
        return -1;
    }
    r->isolation = ns ? TRIAL_ISOLATED_PIDNS : TRIAL_ISOLATED_TREE;
    if (!ns) {
        close(stp[0]);
        stp[0] = -1;
    }
    /* Also from the parent, so kill(-pid) works even before the child ran. */
    setpgid(pid, pid);

    int child_errno = 0;
    ssize_t got;
    do
        got = read(ex[0], &child_errno, sizeof child_errno);
    while (got < 0 && errno == EINTR);
    close(ex[0]);

    struct trial_state st = {
        .o = o, .r = r,
        .lb = { LBUF_INIT(TRIAL_LBUF_CAP), LBUF_INIT(TRIAL_LBUF_CAP) },
        .report = { o->report_path, -1, 0, LBUF_INIT(TRIAL_LBUF_CAP) },
        .probe = { o->probe_path, -1, 0, LBUF_INIT(TRIAL_LBUF_CAP) },
        .fd = { out[0], err[0] },
        .pid = pid, .ns = ns, .status_fd = stp[0],
        .t0 = t0, .last_activity = t0, .pending_t = { t0, t0 }, .line_t = t0, .next_t = t0,
        .read_t = t0, .sched_fd = trial_sched_open(), .poll_t = t0,
        .target = o->target_steps,
    };
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    if (stp[0] >= 0)
        fcntl(stp[0], F_SETFL, O_NONBLOCK);
    /* Files autobatch made before the trial are opened now, so that the
     * trainer replacing them later cannot make us read something else. */
    if (st.report.path)
        trial_open_tail(&st, &st.report);
    if (st.probe.path)
        trial_open_tail(&st, &st.probe);
    /* The rules were checked before the first trial (a bad regex is bad
     * input); should compiling fail here anyway, the output is not read
     * for steps and the trial can only end without them. */
    st.log_ok = trainlog_init(&st.log, o->log_rules, NULL, 0) == 0;

    if (got == (ssize_t)sizeof child_errno) {
        /* exec failed: the child is gone or about to be; reap it. */
        r->outcome = TRIAL_SPAWN_FAILED;
        r->spawn_errno = child_errno;
        st.decided = 1;
    }

    for (;;) {
        double now = mono_now();
        int watched = 0, status = 0, was_reaped = st.reaped;
        long left = proctree_reap(pid, &status, &watched);
        if (st.ns && !st.reaped && st.status_fd >= 0) {
            int ws;
            if (read(st.status_fd, &ws, sizeof ws) == (ssize_t)sizeof ws) {
                st.reaped = 1;
                st.status = ws;
                st.exit_at = now;
            }
        }
        if (watched && !st.reaped) {
            /* the command, or an init that died before it could say how
             * the command ended (it was killed: then so was the command) */
            st.reaped = 1;
            st.status = status;
            st.exit_at = now;
        }
        /* The exit is judged soon: a file written just before it may hold
         * the trial's only steps. */
        if (st.reaped && !was_reaped)
            trial_rearm_tails(&st);
        trial_poll_tails(&st, now);
        int eof = st.fd[0] < 0 && st.fd[1] < 0;

        if (!st.decided) {
            if (o->interrupt && *o->interrupt)
                trial_stop(&st, TRIAL_INTERRUPTED, now);
            else if (st.reaped && (eof || now - st.exit_at >= TRIAL_DRAIN_S)) {
                r->outcome = trial_classify_exit(&st);
                st.decided = 1;
            } else if (o->trial_timeout_s > 0 && now - t0 >= o->trial_timeout_s)
                trial_stop(&st, TRIAL_TIMEOUT, now);
            else if (o->hang_timeout_s > 0 && now - st.last_activity >= o->hang_timeout_s)
                trial_stop(&st, TRIAL_HANG, now);
        }
        /* The command is done but something of its tree lives on, or holds
         * the pipes: that is ours to end too. */
        if (st.decided && !st.stopping && (left > 0 || !eof))
            trial_stop(&st, r->outcome, now);
        if (st.stopping && !st.killed && now - st.stop_at >= trial_grace(&st)) {
            trial_signal_tree(&st, SIGKILL);
            st.killed = 1;
            st.kill_at = now;
        } else if (st.killed && left > 0) {
            /* Something forked between two scans: keep sweeping. */
            trial_signal_tree(&st, SIGKILL);
        }
        if (st.decided && st.reaped && left == 0 && eof)
            break;
        if (st.killed && st.reaped && left == 0 && now - st.kill_at >= TRIAL_PIPE_BOUND_S) {
            r->teardown_incomplete = 1;
            break;
        }

        if (o->hooks.tick)
            o->hooks.tick(o->hooks.tick_ctx);

        struct pollfd pfd[2];
        nfds_t nfd = 0;
        int which[2];
        for (int i = 0; i < 2; i++) {
            if (st.fd[i] >= 0) {
                pfd[nfd].fd = st.fd[i];
                pfd[nfd].events = POLLIN;
                which[nfd++] = i;
            }
        }
        double waited = trial_sched_waited(st.sched_fd);
        st.poll_t = mono_now();
        int pr = poll(pfd, nfd, TRIAL_TICK_MS);
        if (pr < 0 && errno != EINTR)
            usleep(TRIAL_TICK_MS * 1000);
        st.woke_late = 0;
        if (pr > 0 && waited >= 0) {
            double now_waited = trial_sched_waited(st.sched_fd);
            if (now_waited > waited)
                st.woke_late = now_waited - waited;
        }
        for (nfds_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
                trial_read(&st, which[k]);
    }

    double end = mono_now();
    r->wall_s = end - t0;
    if (st.stopping)
        r->teardown_s = end - st.stop_at;
    if (WIFEXITED(st.status))
        r->exit_code = WEXITSTATUS(st.status);
    else if (WIFSIGNALED(st.status))
        r->signal = WTERMSIG(st.status);
    /* What was appended after the last tick still counts, in a file made
     * since the last look too. */
    trial_rearm_tails(&st);
    trial_poll_tails(&st, end);
    trial_tail_order(&st);
    r->steps_seen = trial_best_step(&st);
    r->steps_from = trial_steps_from(&st);
    series_timing(trial_timing_series(&st), o->warmup_steps, r);
    if (st.nnb) {
        qsort(st.nb, st.nnb, sizeof *st.nb, cmp_long);
        r->loader_batches_per_step = st.nb[st.nnb / 2];
    }
    struct inproc_seen_summary seen;
    if (inproc_seen_median(&st.seen, o->warmup_steps, &seen)) {
        r->probe_seen_per_step = seen.seen_per_step;
        r->probe_forwards_per_step = seen.forwards_per_step;
        r->batch_seen = seen.per_forward;
        r->probe_tokens_per_step = seen.tokens_per_step > 0 ? seen.tokens_per_step : 0;
    }
    if (!r->steps_seen && st.log_ok)
        trainlog_describe(&st.log, r->log_seen, sizeof r->log_seen);

    for (int i = 0; i < 2; i++) {
        if (st.fd[i] >= 0)
            close(st.fd[i]);
        lbuf_release(&st.lb[i]);
    }
    if (st.status_fd >= 0)
        close(st.status_fd);
    if (st.sched_fd >= 0)
        close(st.sched_fd);
    close(life[1]); /* the trial's init, if still there, is gone: nothing holds it */
    struct tail *tails[] = { &st.report, &st.probe };
    for (size_t i = 0; i < 2; i++) {
        if (tails[i]->fd >= 0)
            close(tails[i]->fd);
        lbuf_release(&tails[i]->lb);
    }
    series_release(&st.probe_steps);
    series_release(&st.report_steps);
    series_release(&st.log_steps);
    free(st.nb);
    inproc_seen_release(&st.seen);
    if (st.log_ok)
        trainlog_release(&st.log);
    return 0;
}
