/* SPDX-License-Identifier: MIT */
/*
 * tune_round: trials side by side (--gpus), one a slot (tune_int.h).
 * Each trial runs in a worker process of its own, forked from here: a
 * subreaper like us that dies with us (PR_SET_PDEATHSIG), samples its
 * slot's GPUs and sends the trial's result back over a pipe as one
 * fixed-size record.  The controller polls the pipes, takes results as
 * they come, forwards a signal once, and cancels a trial that another's
 * answer made pointless (a larger size fitted, a smaller one failed).
 * The workers' output is not shown: side by side it would interleave.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/tune_int.h"
#include "output/results.h"
#include "search/search.h"
#include "search/space.h"
#include "trial/gpu.h"
#include "trial/leftovers.h"
#include "trial/proctree.h"

/* The wire format from a worker: the trial's result and its GPU peak. */
struct tune_wire {
    int run_rc, run_errno;
    int64_t peak;
    struct trial_result tr;
};

/* Start trial j in a worker process of its own (a subreaper, like us,
 * that dies with us), which samples its slot's GPUs and sends the result
 * back.  Its output is not shown: trials side by side would interleave.
 * Returns 0, or -1 (errno) with nothing started. */
static int tune_job_spawn(struct tune_run *r, struct tune_job *j)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    /* The worker never writes what is queued or buffered here (it leaves
     * with _exit); flushing first keeps it from holding a copy anyway. */
    fflush(NULL);
    pid_t parent = getpid();
    pid_t w = fork();
    if (w < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        errno = e;
        return -1;
    }
    if (w == 0) {
        close(p[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        proctree_become_subreaper();
        static struct tune_wire wire;
        struct trial_spec spec = { j->t.argv.v, j->t.env.v, j->t.cwd };
        j->to.hooks = (struct trial_hooks){ NULL, NULL, NULL, r->gpu, gpu_tick };
        gpu_use(r->gpu, j->slot ? j->slot->mask : 0);
        gpu_trial_start(r->gpu);
        wire.run_rc = trial_run(&spec, &j->to, &wire.tr);
        wire.run_errno = errno;
        wire.peak = gpu_trial_peak(r->gpu, wire.tr.peak_mem_bytes);
        const char *b = (const char *)&wire;
        for (size_t off = 0; off < sizeof wire;) {
            ssize_t n = write(p[1], b + off, sizeof wire - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                _exit(1);
            off += (size_t)n;
        }
        _exit(0);
    }
    close(p[1]);
    j->in_worker = 1;
    j->worker = w;
    j->fd = p[0];
    j->got = 0;
    return 0;
}

/* Read what worker j sent; on its end, reap it.  Returns 1 once done. */
static int tune_job_collect(struct tune_job *j, struct tune_wire *buf)
{
    for (;;) {
        ssize_t n = read(j->fd, (char *)buf + j->got, sizeof *buf - j->got);
        if (n > 0) {
            j->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        break; /* EOF or an error: the worker is gone */
    }
    close(j->fd);
    j->fd = -1;
    int ws;
    while (waitpid(j->worker, &ws, 0) < 0 && errno == EINTR)
        ;
    j->worker = -1;
    j->done = 1;
    if (j->got == sizeof *buf) {
        j->tr = buf->tr;
        j->peak = buf->peak;
        j->run_rc = buf->run_rc;
        j->run_errno = buf->run_errno;
    } else {
        /* The worker died before it could say: nothing is known. */
        memset(&j->tr, 0, sizeof j->tr);
        j->tr.outcome = TRIAL_INTERRUPTED;
        j->tr.exit_code = -1;
        j->tr.step_time_s = j->tr.step_time_mad_s = -1;
        j->tr.peak_mem_bytes = j->tr.peak_allocated_bytes = j->tr.held_bytes = -1;
        j->tr.peak_vm_bytes = j->tr.probe_world = j->tr.loader_batch = -1;
        j->tr.loader_batches_per_step = -1;
        j->peak = -1;
    }
    return 1;
}

/* A running trial that the others' answers made pointless: its size is
 * now known to fit (a larger one fitted) or to fail (a smaller one
 * failed) in its cell. */
static int tune_job_pointless(const struct tune_run *r, const struct tune_job *j)
{
    const struct search *s = &r->space->cells[j->ci].search;
    long fail = search_min_fail(s), fit = search_max_fit(s);
    return (fail >= 0 && j->value > fail) || (fit >= 0 && j->value < fit);
}

/*
 * One round of up to n trials side by side, each on its own slot.
 * Results are taken as they come; each may cancel the others it made
 * pointless.  Returns 0 to go on, 1 to stop (as tune_job_finish).
 */
int tune_round(struct tune_run *r, struct tune_job *jobs, size_t n, const size_t *ci,
               const long *micro, long round)
{
    size_t started = 0, prepared = 0;
    int stop = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        if (tune_job_prepare(r, &jobs[i], ci[i], micro[i], &r->slots[i], round)) {
            stop = 1;
            break;
        }
        prepared++;
    }
    if (prepared && tune_slurm_submit(r, jobs, prepared)) {
        r->status = AB_EXIT_USAGE;
        stop = 1;
    }
    for (size_t i = 0; i < prepared; i++) {
        if (stop || tune_job_spawn(r, &jobs[i])) {
            if (!stop) {
                tune_say(r, TUNE_ERROR, "cannot start a trial: %s", strerror(errno));
                r->status = AB_EXIT_USAGE;
                stop = 1;
            }
            inject_trial_release(&jobs[i].t);
            leftovers_remove_tree(jobs[i].tdir);
            continue;
        }
        started++;
        tune_event_start(r, &jobs[i]);
        if (r->slurm) /* the step's or task's GPUs are Slurm's to give (trials[].devices) */
            tune_say(r, TUNE_NOTE, "round %ld: trial %ld micro_batch=%ld on the GPUs Slurm gives "
                                   "it", round, jobs[i].id, micro[i]);
        else if (r->slots[i].devices[0])
            tune_say(r, TUNE_NOTE, "round %ld: trial %ld micro_batch=%ld on GPU %s", round,
                     jobs[i].id, micro[i], r->slots[i].devices);
        else
            tune_say(r, TUNE_NOTE, "round %ld: trial %ld micro_batch=%ld, CPU slot %zu", round,
                     jobs[i].id, micro[i], i);
    }
    static struct tune_wire buf;
    size_t left = started;
    int forwarded = 0;
    while (left) {
        if (tune_interrupted(r) && !forwarded) {
            forwarded = 1;
            for (size_t i = 0; i < started; i++)
                if (jobs[i].worker > 0)
                    kill(jobs[i].worker, SIGTERM);
        }
        struct pollfd pfd[SPACE_MAX_ROUND];
        size_t which[SPACE_MAX_ROUND], np = 0;
        for (size_t i = 0; i < started; i++)
            if (!jobs[i].done) {
                pfd[np].fd = jobs[i].fd;
                pfd[np].events = POLLIN;
                which[np++] = i;
            }
        if (poll(pfd, np, 100) <= 0)
            continue;
        for (size_t k = 0; k < np; k++) {
            struct tune_job *j = &jobs[which[k]];
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            memset(&buf, 0, sizeof buf);
            if (!tune_job_collect(j, &buf))
                continue;
            left--;
            tune_slurm_after(r, j);
            if (j->cancelled) {
                /* Not evidence: it was stopped for being pointless. */
                inject_trial_release(&j->t);
                leftovers_remove_tree(j->tdir);
                r->res->cancelled++;
                continue;
            }
            if (stop) {
                inject_trial_release(&j->t);
                leftovers_remove_tree(j->tdir);
                continue;
            }
            if (tune_job_finish(r, j, started > 1)) {
                stop = 1;
                for (size_t i = 0; i < started; i++)
                    if (!jobs[i].done && jobs[i].worker > 0)
                        kill(jobs[i].worker, SIGTERM);
                continue;
            }
            for (size_t i = 0; i < started; i++) {
                struct tune_job *o = &jobs[i];
                if (!o->done && !o->cancelled && tune_job_pointless(r, o)) {
                    o->cancelled = 1;
                    kill(o->worker, SIGTERM);
                    tune_say(r, TUNE_NOTE, "trial %ld (micro_batch=%ld) cancelled: trial %ld "
                                           "answered for it", o->id, o->value, j->id);
                }
            }
        }
    }
    if (prepared)
        tune_slurm_done(r, jobs);
    if (!gpu_settle(r->gpu))
        tune_say(r, TUNE_NOTE, "warning: GPU memory did not return to its level before the "
                               "round within 10s; the next round may see less free memory");
    return stop;
}
