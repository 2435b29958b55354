/*
 * trial: the supervised run of one candidate (see trial.h for the life
 * cycle).  One loop does everything: reap, decide, escalate, poll, read.
 * Decisions are taken once; the first reason to stop a trial is the one
 * reported, and the teardown that follows never changes it.
 */
#include "trial.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lbuf.h"
#include "proctree.h"
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
    }
    return "unknown";
}

static double trial_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- steps */

/* Step evidence of one kind, as (time, step) points in arrival order. */
struct series {
    double *t;
    long *step;
    size_t n, alloc;
};

static void series_add(struct series *s, double t, long step)
{
    if (s->n && step <= s->step[s->n - 1])
        return; /* only progress counts */
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

static long series_last(const struct series *s)
{
    return s->n ? s->step[s->n - 1] : 0;
}

static void series_release(struct series *s)
{
    free(s->t);
    free(s->step);
    memset(s, 0, sizeof *s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * Per-step times after warm-up: each interval between two points that
 * starts at or after the warm-up counts once per step it spans, because a
 * tqdm bar redrawn at most every 0.1 s may skip steps.
 */
static void series_timing(const struct series *s, long warmup, struct trial_result *r)
{
    size_t cap = 0;
    for (size_t i = 1; i < s->n; i++)
        if (s->step[i - 1] >= warmup)
            cap += (size_t)(s->step[i] - s->step[i - 1]);
    r->steps_measured = (long)cap;
    if (!cap)
        return;
    double *v = malloc(cap * sizeof *v), *dev = malloc(cap * sizeof *dev);
    if (v && dev) {
        size_t k = 0;
        for (size_t i = 1; i < s->n; i++) {
            if (s->step[i - 1] < warmup)
                continue;
            long ds = s->step[i] - s->step[i - 1];
            double per = (s->t[i] - s->t[i - 1]) / (double)ds;
            for (long j = 0; j < ds; j++)
                v[k++] = per;
        }
        double med = median_of(v, k);
        for (size_t i = 0; i < k; i++)
            dev[i] = fabs(v[i] - med);
        r->step_time_s = med;
        r->step_time_mad_s = median_of(dev, k);
    }
    free(v);
    free(dev);
}

/* ---------------------------------------------------------------- state */

struct trial_state {
    const struct trial_opts *o;
    struct trial_result *r;
    struct lbuf lb[2];
    struct lbuf report_lb;
    int fd[2];            /* read ends of stdout/stderr; -1 once at EOF */
    int report_fd;
    off_t report_off;
    pid_t pid;
    int reaped, status;
    double t0, exit_at, last_activity;
    int decided;          /* r->outcome is final */
    int stopping, killed, signalled;
    double stop_at, kill_at;
    /* Step evidence by kind; the report wins over tqdm over HF dicts. */
    struct series report, tqdm, hf;
    long target;          /* steps that end the trial as a fit; may grow once */
    int extended;
    long hf_count;        /* HF dicts carry no step: count them */
};

static void trial_tail_add(struct trial_result *r, const char *line, size_t len)
{
    if (len >= TRIAL_LINE_MAX)
        len = TRIAL_LINE_MAX - 1;
    if (r->tail_count == TRIAL_TAIL_LINES) {
        memmove(r->tail[0], r->tail[1], (TRIAL_TAIL_LINES - 1) * sizeof r->tail[0]);
        r->tail_count--;
    }
    memcpy(r->tail[r->tail_count], line, len);
    r->tail[r->tail_count][len] = '\0';
    r->tail_count++;
}

static long trial_best_step(const struct trial_state *st)
{
    if (st->report.n)
        return series_last(&st->report);
    if (st->tqdm.n)
        return series_last(&st->tqdm);
    return series_last(&st->hf);
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
    trial_signal_tree(st, SIGTERM);
}

static const struct series *trial_timing_series(const struct trial_state *st)
{
    return st->report.n ? &st->report : st->tqdm.n ? &st->tqdm : &st->hf;
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

static void trial_note_step(struct trial_state *st, long before, double rate)
{
    long now_step = trial_best_step(st);
    if (now_step > before) {
        st->r->steps_seen = now_step;
        if (st->o->hooks.step)
            st->o->hooks.step(st->o->hooks.ctx, now_step, rate);
        if (st->target > 0 && now_step >= st->target && !trial_extend(st))
            trial_stop(st, TRIAL_FIT, trial_now());
    }
}

static void trial_on_line(void *ctx, const char *line, size_t len, int truncated)
{
    struct trial_state *st = ctx;
    struct trial_result *r = st->r;
    (void)truncated;
    trial_tail_add(r, line, len);

    struct oom_match m;
    if (!st->decided && oom_table_match(st->o->oom, line, len, &m)) {
        size_t n = len < sizeof r->evidence - 1 ? len : sizeof r->evidence - 1;
        memcpy(r->evidence, line, n);
        r->evidence[n] = '\0';
        r->oom_name = m.name;
        oom_parse_numbers(line, len, &r->oom_numbers);
        trial_stop(st, TRIAL_OOM, trial_now());
        return;
    }

    struct step_event ev;
    if (!steps_parse_line(line, len, &ev))
        return;
    long before = trial_best_step(st);
    double t = trial_now();
    double rate = -1;
    if (ev.source == STEP_TQDM && ev.step >= 0) {
        series_add(&st->tqdm, t, ev.step);
        rate = ev.rate_it_s;
    } else if (ev.source == STEP_HF_LOG) {
        series_add(&st->hf, t, ++st->hf_count);
    }
    trial_note_step(st, before, rate);
}

static void trial_on_report(void *ctx, const char *line, size_t len, int truncated)
{
    struct trial_state *st = ctx;
    struct step_event ev;
    (void)truncated;
    if (!steps_parse_report(line, len, &ev))
        return;
    long before = trial_best_step(st);
    if (ev.time_s >= 0)
        series_add(&st->report, ev.time_s, ev.step);
    else
        series_add(&st->report, trial_now(), ev.step);
    if (ev.peak_mem_bytes > st->r->peak_mem_bytes)
        st->r->peak_mem_bytes = ev.peak_mem_bytes;
    trial_note_step(st, before, -1);
}

/* Read what the trainer appended to the report file since last time. */
static void trial_poll_report(struct trial_state *st)
{
    if (!st->o->report_path)
        return;
    if (st->report_fd < 0) {
        st->report_fd = open(st->o->report_path, O_RDONLY | O_CLOEXEC);
        if (st->report_fd < 0)
            return; /* not written yet */
    }
    char buf[16384];
    for (;;) {
        ssize_t n = pread(st->report_fd, buf, sizeof buf, st->report_off);
        if (n <= 0)
            return;
        st->report_off += n;
        st->last_activity = trial_now();
        lbuf_feed(&st->report_lb, buf, (size_t)n, trial_on_report, st);
    }
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
        lbuf_finish(&st->lb[i], trial_on_line, st);
        close(st->fd[i]);
        st->fd[i] = -1;
        return;
    }
    st->last_activity = trial_now();
    if (st->o->hooks.output)
        st->o->hooks.output(st->o->hooks.ctx, i + 1, buf, (size_t)n);
    lbuf_feed(&st->lb[i], buf, (size_t)n, trial_on_line, st);
}

/* The command exited and its output is drained: what did it amount to? */
static enum trial_outcome trial_classify_exit(struct trial_state *st)
{
    struct trial_result *r = st->r;
    if (WIFEXITED(st->status) && WEXITSTATUS(st->status) == 0)
        return TRIAL_FIT;
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
    if (r->tail_count)
        snprintf(r->evidence, sizeof r->evidence, "%s", r->tail[r->tail_count - 1]);
    return TRIAL_CRASH;
}

/* ---------------------------------------------------------------- spawn */

static void trial_child(const struct trial_spec *spec, const struct trial_opts *o,
                        int devnull, int out_w, int err_w, int exec_w, pid_t parent)
{
    /* Only async-signal-safe calls from here on. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &sa, NULL); /* fails harmlessly for SIGKILL/SIGSTOP */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127); /* autobatch died before we got here */
    if (dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
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

int trial_run(const struct trial_spec *spec, const struct trial_opts *o,
              struct trial_result *r)
{
    memset(r, 0, sizeof *r);
    r->exit_code = -1;
    r->step_time_s = r->step_time_mad_s = -1;
    r->peak_mem_bytes = -1;
    r->oom_numbers.tried = r->oom_numbers.total = r->oom_numbers.free = -1;
    r->oom_numbers.gpu = -1;

    int out[2] = { -1, -1 }, err[2] = { -1, -1 }, ex[2] = { -1, -1 };
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
        int e = errno;
        int all[] = { devnull, out[0], out[1], err[0], err[1], ex[0], ex[1] };
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
    double t0 = trial_now();
    pid_t pid = fork();
    if (pid == 0)
        trial_child(spec, o, devnull, out[1], err[1], ex[1], parent);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(devnull);
    close(out[1]);
    close(err[1]);
    close(ex[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        close(ex[0]);
        errno = fork_errno;
        return -1;
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
        .report_lb = LBUF_INIT(TRIAL_LBUF_CAP),
        .fd = { out[0], err[0] },
        .report_fd = -1,
        .pid = pid,
        .t0 = t0, .last_activity = t0,
        .target = o->target_steps,
    };
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);

    if (got == (ssize_t)sizeof child_errno) {
        /* exec failed: the child is gone or about to be; reap it. */
        r->outcome = TRIAL_SPAWN_FAILED;
        r->spawn_errno = child_errno;
        st.decided = 1;
    }

    for (;;) {
        double now = trial_now();
        int watched = 0, status = 0;
        long left = proctree_reap(pid, &status, &watched);
        if (watched) {
            st.reaped = 1;
            st.status = status;
            st.exit_at = now;
        }
        trial_poll_report(&st);
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
        if (st.stopping && !st.killed && now - st.stop_at >= o->grace_s) {
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
        int pr = poll(pfd, nfd, TRIAL_TICK_MS);
        if (pr < 0 && errno != EINTR)
            usleep(TRIAL_TICK_MS * 1000);
        for (nfds_t k = 0; pr > 0 && k < nfd; k++)
            if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR))
                trial_read(&st, which[k]);
    }

    double end = trial_now();
    r->wall_s = end - t0;
    if (st.stopping)
        r->teardown_s = end - st.stop_at;
    if (WIFEXITED(st.status))
        r->exit_code = WEXITSTATUS(st.status);
    else if (WIFSIGNALED(st.status))
        r->signal = WTERMSIG(st.status);
    r->steps_seen = trial_best_step(&st);
    series_timing(trial_timing_series(&st), o->warmup_steps, r);

    for (int i = 0; i < 2; i++) {
        if (st.fd[i] >= 0)
            close(st.fd[i]);
        lbuf_release(&st.lb[i]);
    }
    if (st.report_fd >= 0)
        close(st.report_fd);
    lbuf_release(&st.report_lb);
    series_release(&st.report);
    series_release(&st.tqdm);
    series_release(&st.hf);
    return 0;
}
