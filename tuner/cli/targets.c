/* SPDX-License-Identifier: MIT */
/*
 * targets: several --slurm-targets searched side by side (targets.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/outputs.h"
#include "cli/per_model.h"
#include "cli/targets.h"
#include "control/exit.h"
#include "control/plan.h"
#include "output/matrix.h"
#include "output/webhook.h"
#include "util/strvec.h"

/* One target's run: its process, its output pipe, the line being read. */
struct target_run {
    const char *target;
    char slug[128];
    char *json;       /* its results file */
    pid_t pid;        /* -1: not started, or reaped */
    int fd;           /* its stdout and stderr; -1 at EOF */
    char line[4096];  /* a line so far (longer lines go out in pieces) */
    size_t len;
    int status;
};

/* The run's text so far as one prefixed line. */
static void target_say(struct target_run *t)
{
    printf("[%s] %.*s\n", t->target, (int)t->len, t->line);
    t->len = 0;
}

/* What the run wrote, line by line; at EOF the rest. */
static void target_read(struct target_run *t)
{
    char buf[4096];
    ssize_t n = read(t->fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {
        if (t->len)
            target_say(t);
        close(t->fd);
        t->fd = -1;
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || buf[i] == '\r') {
            if (t->len)
                target_say(t);
            continue;
        }
        if (t->len == sizeof t->line)
            target_say(t);
        t->line[t->len++] = buf[i];
    }
    fflush(stdout);
}

static int target_start(struct target_run *t, struct strvec *av)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    fflush(NULL);
    pid_t parent = getpid();
    t->pid = fork();
    if (t->pid == 0) {
        /* killed with us (SIGTERM: it cancels its queued tasks) */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(AB_EXIT_INTERRUPTED);
        if (dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
            _exit(127);
        unsetenv("AUTOBATCH_WEBHOOK_URL"); /* the matrix is posted, once, here */
        execv("/proc/self/exe", av->v);
        _exit(127);
    }
    close(p[1]);
    if (t->pid < 0) {
        close(p[0]);
        return -1;
    }
    t->fd = p[0];
    return 0;
}

/* The matrix of the runs' results: printed, next to --json, posted. */
static void targets_matrix(const struct plan *plan, struct target_run *runs, int n,
                           const char *json_path, volatile sig_atomic_t *interrupted)
{
    json_t *docs[PLAN_MAX_TARGETS];
    const char *names[PLAN_MAX_TARGETS];
    int k = 0;
    for (int i = 0; i < n; i++) {
        json_t *d = json_load_file(runs[i].json, 0, NULL);
        if (!d) {
            fprintf(stderr, "autobatch: target %s left no results (exit %d); not in the matrix\n",
                    runs[i].target, runs[i].status);
            continue;
        }
        docs[k] = d;
        names[k++] = runs[i].target;
    }
    char *md = NULL, *js = NULL, err[512];
    size_t mdlen = 0, jslen = 0;
    if (!k)
        return;
    if (matrix_render(docs, names, (size_t)k, MATRIX_MARKDOWN, &md, &mdlen, err, sizeof err) ||
        matrix_render(docs, names, (size_t)k, MATRIX_JSON, &js, &jslen, err, sizeof err)) {
        cli_error("the matrix: %s", err);
    } else {
        printf("\n%s", md);
        fflush(stdout);
        char *where = json_path ? per_model_suffixed(json_path, "matrix") : NULL;
        if (where && !outputs_emit(where, js, jslen))
            fprintf(stderr, "autobatch: the matrix: %s\n", where);
        free(where);
        json_t *doc = plan->webhook_url ? json_loads(js, 0, NULL) : NULL;
        if (doc && !webhook_global_init(err, sizeof err)) {
            outputs_post(doc, plan->webhook_url, plan->webhook_format, plan->webhook_insecure,
                         interrupted);
            webhook_global_cleanup();
        } else if (plan->webhook_url) {
            fprintf(stderr, "autobatch: warning: webhook: %s\n", doc ? err : "out of memory");
        }
        json_decref(doc);
    }
    free(md);
    free(js);
    for (int i = 0; i < k; i++)
        json_decref(docs[i]);
}

int targets_run(int argc, char **argv, const struct plan *plan, volatile sig_atomic_t *interrupted)
{
    struct target_run runs[PLAN_MAX_TARGETS];
    int n = plan->ntargets, status = 0, bad = 0;
    /* Not a subreaper here (the session made us one): what the runs leave
     * behind on purpose, their queues' guards, goes to init, not to us. */
    prctl(PR_SET_CHILD_SUBREAPER, 0);
    char tmp[4096] = "";
    if (!plan->json_path || !strcmp(plan->json_path, "-")) {
        const char *t = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/autobatch-targets-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmp)) {
            cli_error("cannot make a temporary directory in '%s': %s; set TMPDIR to a writable "
                      "place", t && *t ? t : "/tmp", strerror(errno));
            return AB_EXIT_USAGE;
        }
    }
    for (int i = 0; i < n; i++) {
        struct target_run *t = &runs[i];
        memset(t, 0, sizeof *t);
        t->target = plan->targets[i];
        t->pid = -1;
        t->fd = -1;
        per_model_slug(t->target, t->slug, sizeof t->slug);
        if (tmp[0]) {
            if (asprintf(&t->json, "%s/r-%s.json", tmp, t->slug) < 0)
                t->json = NULL;
        } else {
            t->json = per_model_suffixed(plan->json_path, t->slug);
        }
        /* a baseline per target; a target without one yet is not gated */
        char *base = plan->baseline_path ? per_model_suffixed(plan->baseline_path, t->slug) : NULL;
        int no_base = base && access(base, F_OK) != 0;
        if (no_base)
            fprintf(stderr, "autobatch: target %s: no baseline '%s' yet; its results are not "
                            "gated this time\n", t->target, base);
        free(base);
        struct strvec av = STRVEC_INIT;
        struct split_part part = {
            .target = t->target, .tag = t->slug, .drop_webhook = 1, .suffix_baseline = 1,
            .drop_baseline = no_base,
            .keep_write = plan->write_target && !strcmp(plan->write_target, t->target),
            .json = tmp[0] ? t->json : NULL,
        };
        if (!t->json || per_model_argv(&av, argc, argv, plan, &part) || target_start(t, &av)) {
            cli_error("cannot start the run for target %s: %s", t->target, strerror(errno));
            t->status = AB_EXIT_USAGE;
        } else {
            fprintf(stderr, "autobatch: target %s: searched on its own, side by side with the "
                            "others%s\n", t->target, part.keep_write ? " (--write-target)" : "");
        }
        strvec_release(&av);
    }
    /* Their lines as they come, until every run has ended. */
    int forwarded = 0;
    for (;;) {
        struct pollfd pfd[PLAN_MAX_TARGETS];
        int idx[PLAN_MAX_TARGETS], np = 0, alive = 0;
        for (int i = 0; i < n; i++) {
            if (runs[i].fd >= 0) {
                pfd[np] = (struct pollfd){ runs[i].fd, POLLIN, 0 };
                idx[np++] = i;
            }
            alive += runs[i].pid > 0;
        }
        if (*interrupted && !forwarded) {
            forwarded = 1;
            for (int i = 0; i < n; i++)
                if (runs[i].pid > 0)
                    kill(runs[i].pid, SIGTERM);
        }
        if (!np && !alive)
            break;
        if (np && poll(pfd, (nfds_t)np, 200) > 0) {
            for (int k = 0; k < np; k++)
                if (pfd[k].revents)
                    target_read(&runs[idx[k]]);
        } else if (!np) {
            usleep(50000);
        }
        for (int i = 0; i < n; i++) {
            int ws;
            if (runs[i].pid > 0 && runs[i].fd < 0 && waitpid(runs[i].pid, &ws, 0) == runs[i].pid) {
                runs[i].pid = -1;
                runs[i].status = WIFEXITED(ws) ? WEXITSTATUS(ws) : AB_EXIT_INTERRUPTED;
            }
        }
    }
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "autobatch: target %s: exit %d\n", runs[i].target, runs[i].status);
        bad |= runs[i].status == AB_EXIT_USAGE;
        if (runs[i].status && !status)
            status = runs[i].status;
    }
    targets_matrix(plan, runs, n, tmp[0] ? NULL : plan->json_path, interrupted);
    for (int i = 0; i < n; i++) {
        if (tmp[0] && runs[i].json)
            unlink(runs[i].json);
        free(runs[i].json);
    }
    if (tmp[0])
        rmdir(tmp);
    return bad ? AB_EXIT_USAGE : status;
}
