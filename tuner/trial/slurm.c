/* SPDX-License-Identifier: MIT */
/*
 * slurm: job steps' sweep, job arrays from a login node, and the
 * follower that makes a remote array task look like a local process
 * (see slurm.h).
 */
#include "trial/slurm.h"
#include "util/mono.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/errbuf.h"

/* Seconds without a heartbeat after which a task ends itself. */
#define SLURM_HEARTBEAT_S 30
/* How long the follower waits for Slurm to confirm a cancel. */
#define SLURM_CANCEL_WAIT_S 15.0

/* Run argv, its stdout into out (NUL-terminated, may be cut), stderr to
 * /dev/null.  Returns the exit status, or -1. */
static int slurm_run(char *const *argv, char *out, size_t len)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(p[1], 1);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    for (;;) {
        char sink[512];
        char *dst = out && got + 1 < len ? out + got : sink;
        size_t room = out && got + 1 < len ? len - 1 - got : sizeof sink;
        ssize_t n = read(p[0], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != sink)
            got += (size_t)n;
    }
    close(p[0]);
    if (out && len)
        out[got] = '\0';
    int ws;
    if (pid < 0)
        return -1;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

void slurm_sweep_steps(const char *name)
{
    char out[16384];
    char *argv[] = { "squeue", "-h", "-s", "-o", "%i %j", NULL };
    if (slurm_run(argv, out, sizeof out) != 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char step[64], jname[128];
        if (sscanf(line, "%63s %127s", step, jname) == 2 && !strcmp(jname, name)) {
            char *cancel[] = { "scancel", step, NULL };
            slurm_run(cancel, NULL, 0);
        }
    }
}

/* `scontrol show job -o JOB` into out; 0, or -1 when Slurm does not know it. */
static int slurm_show(const char *job, char *out, size_t len)
{
    char *argv[] = { "scontrol", "show", "job", "-o", (char *)job, NULL };
    return slurm_run(argv, out, len) == 0 && strstr(out, "JobState=") ? 0 : -1;
}

/* The value of KEY= in scontrol's one-line output, into val. */
static void slurm_field(const char *text, const char *key, char *val, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(text, pat);
    if (!p && !strncmp(text, pat + 1, strlen(pat + 1)))
        p = text - 1;
    val[0] = '\0';
    if (!p)
        return;
    p += strlen(pat);
    size_t n = strcspn(p, " \n");
    snprintf(val, len, "%.*s", (int)n, p);
}

long slurm_alloc_gpus(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    char out[8192];
    if (!job || !*job || strspn(job, "0123456789") != strlen(job) || slurm_show(job, out, sizeof out))
        return 0;
    /* AllocTRES=...,gres/gpu=4 where accounting tracks GPUs, else
     * TresPerNode=gres:gpu:4 (or gres:gpu:TYPE:4) as asked for. */
    char v[1024];
    slurm_field(out, "AllocTRES", v, sizeof v);
    const char *g = strstr(v, "gres/gpu");
    const char *eq = g ? strchr(g, '=') : NULL;
    if (eq)
        return strtol(eq + 1, NULL, 10);
    slurm_field(out, "TresPerNode", v, sizeof v);
    g = strstr(v, "gres:gpu");
    if (!g)
        return 0;
    const char *end = g + strcspn(g, ",");
    while (end > g && end[-1] != ':')
        end--;
    return strtol(end, NULL, 10);
}

/* Variables the task must take from Slurm, not from the login node. */
static int slurm_keep_out(const char *kv)
{
    static const char *const names[] = { "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
        "ROCR_VISIBLE_DEVICES", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_", "TMPDIR_SLURM" };
    size_t len = strcspn(kv, "=");
    if (!strncmp(kv, "SLURM", 5))
        return 1;
    if (len == 0 || kv[len] != '=' || strspn(kv, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                               "0123456789_") != len || (kv[0] >= '0' && kv[0] <= '9'))
        return 1; /* not a plain name (e.g. an exported bash function) */
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strlen(names[i]) == len && !strncmp(kv, names[i], len))
            return 1;
    return 0;
}

/* The task script: the trial's directory, environment and command, and a
 * watchdog that ends it when autobatch's heartbeat stops: the file not
 * touched for the limit, or gone (a later autobatch swept the directory
 * of a killed run). */
static int slurm_write_task(const struct slurm_task *t, const char *path, const char *beat)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const char *hb = getenv("AUTOBATCH_SLURM_HEARTBEAT");
    long limit = hb && atol(hb) > 0 ? atol(hb) : SLURM_HEARTBEAT_S;
    char cwd[4096];
    const char *dir = t->cwd ? t->cwd : getcwd(cwd, sizeof cwd);
    fputs("#!/bin/bash\n# autobatch: one trial, as a task of a Slurm job array\n", f);
    if (dir) {
        fputs("cd -- ", f);
        strvec_shell_word(f, dir);
        fputs(" || exit 1\n", f);
    }
    for (size_t i = 0; t->envp[i]; i++) {
        if (slurm_keep_out(t->envp[i]))
            continue;
        fputs("export ", f);
        strvec_shell_word(f, t->envp[i]);
        fputc('\n', f);
    }
    fputs("setsid", f);
    for (size_t i = 0; i < t->argv->n; i++) {
        fputc(' ', f);
        strvec_shell_word(f, t->argv->v[i]);
    }
    fputs(" &\npid=$!\n", f);
    fputs("trap 'kill -TERM -- -$pid 2>/dev/null' TERM INT\nbeat=", f);
    strvec_shell_word(f, beat);
    fprintf(f, "\nwhile kill -0 \"$pid\" 2>/dev/null; do\n"
               "  now=$(date +%%s); last=$(stat -c %%Y \"$beat\" 2>/dev/null || echo 0)\n"
               "  if [ $((now - last)) -gt %ld ]; then\n"
               "    echo \"autobatch: no heartbeat from autobatch for %ld s; ending the trial\" >&2\n"
               "    kill -TERM -- -\"$pid\" 2>/dev/null; sleep 5; kill -KILL -- -\"$pid\" 2>/dev/null\n"
               "    exit 1\n"
               "  fi\n"
               "  sleep 1\n"
               "done\n"
               "wait \"$pid\"\n", limit, limit);
    return fclose(f) ? -1 : 0;
}

int slurm_array_submit(struct slurm_task *tasks, size_t n, const char *rounddir, const char *name,
                       const char *gres, long minutes, const char *self, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char script[4300], beat[4300];
        snprintf(script, sizeof script, "%s/task.sh", tasks[i].dir);
        snprintf(beat, sizeof beat, "%s/alive", tasks[i].dir);
        int fd = open(beat, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        if (fd < 0 || slurm_write_task(&tasks[i], script, beat)) {
            errbuf_set(err, errlen, "cannot write the task script '%s': %s", script, strerror(errno));
            return -1;
        }
    }
    /* The array's script: each task runs its trial's script. */
    char array[4300];
    snprintf(array, sizeof array, "%s/array.sh", rounddir);
    FILE *f = fopen(array, "w");
    if (!f) {
        errbuf_set(err, errlen, "cannot write '%s': %s", array, strerror(errno));
        return -1;
    }
    fputs("#!/bin/bash\n# autobatch: a round of trials, one per array task\n"
          "case $SLURM_ARRAY_TASK_ID in\n", f);
    for (size_t i = 0; i < n; i++) {
        char script[4300];
        snprintf(script, sizeof script, "%s/task.sh", tasks[i].dir);
        fprintf(f, "%zu) exec bash ", i);
        strvec_shell_word(f, script);
        fputs(" ;;\n", f);
    }
    fputs("esac\nexit 1\n", f);
    if (fclose(f)) {
        errbuf_set(err, errlen, "cannot write '%s': %s", array, strerror(errno));
        return -1;
    }
    char range[64], jname[160], output[4400], g[64], t[32];
    snprintf(range, sizeof range, "--array=0-%zu", n - 1);
    snprintf(jname, sizeof jname, "--job-name=%s", name);
    snprintf(output, sizeof output, "--output=%s/out-%%a.log", rounddir);
    snprintf(g, sizeof g, "--gres=%s", gres ? gres : "");
    snprintf(t, sizeof t, "--time=%ld", minutes);
    char *argv[12];
    size_t k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    argv[k++] = range;
    argv[k++] = jname;
    argv[k++] = output;
    argv[k++] = "--ntasks=1";
    if (gres)
        argv[k++] = g;
    if (minutes > 0)
        argv[k++] = t;
    argv[k++] = array;
    argv[k] = NULL;
    char out[256];
    int rc = slurm_run(argv, out, sizeof out);
    long id = strtol(out, NULL, 10);
    if (rc != 0 || id <= 0) {
        errbuf_set(err, errlen, "sbatch failed (exit %d): %s", rc, out[0] ? out : "no job id");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char job[64], log[4400], beat[4300];
        snprintf(job, sizeof job, "%ld_%zu", id, i);
        snprintf(log, sizeof log, "%s/out-%zu.log", rounddir, i);
        snprintf(beat, sizeof beat, "%s/alive", tasks[i].dir);
        struct strvec *a = tasks[i].argv;
        while (a->n)
            strvec_remove(a, a->n - 1);
        if (strvec_push(a, self) || strvec_push(a, "__slurm-follow") || strvec_push(a, job) ||
            strvec_push(a, log) || strvec_push(a, beat)) {
            errbuf_set(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* A job state in which something of the job may still run or start. */
static int slurm_active(const char *state)
{
    static const char *const active[] = { "PENDING", "RUNNING", "CONFIGURING", "COMPLETING",
        "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
        "STAGE_OUT", "STOPPED" };
    for (size_t i = 0; i < sizeof active / sizeof *active; i++)
        if (!strcmp(state, active[i]))
            return 1;
    return 0;
}

int slurm_cancel_wait(const char *job, double max_s)
{
    char *cancel[] = { "scancel", (char *)job, NULL };
    slurm_run(cancel, NULL, 0);
    double t0 = mono_now();
    for (;;) {
        char text[8192], state[64];
        if (slurm_show(job, text, sizeof text))
            return 0; /* no longer known: gone */
        slurm_field(text, "JobState", state, sizeof state);
        if (!slurm_active(state))
            return 0;
        if (mono_now() - t0 >= max_s)
            return -1;
        usleep(100000);
    }
}

static volatile sig_atomic_t slurm_stop;

static void slurm_on_signal(int sig)
{
    slurm_stop = sig;
}

/* Copy what the task's output file gained to stdout; opens it once it exists. */
static void slurm_copy(int *fd, const char *path)
{
    if (*fd < 0)
        *fd = open(path, O_RDONLY | O_CLOEXEC);
    for (char buf[65536]; *fd >= 0;) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(1, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return;
            off += w;
        }
    }
}

/* The exit status for a task that ended in `state` with ExitCode a:b. */
static int slurm_exit_status(const char *job, const char *state, const char *code)
{
    int a = 0, b = 0;
    sscanf(code, "%d:%d", &a, &b);
    if (!strcmp(state, "COMPLETED"))
        return 0;
    if (!strcmp(state, "FAILED") && (a > 0 || b > 0))
        return a > 0 ? a : 128 + b;
    /* OUT_OF_MEMORY is an OOM signature; the rest are evidence of a crash
     * (the search stops and says so) */
    printf("autobatch: slurm job %s ended %s (exit code %s)\n", job, state, code);
    fflush(stdout);
    return 1;
}

int slurm_follow(const char *job, const char *out, const char *beat)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = slurm_on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    int fd = -1, misses = 0;
    double cancel_at = 0, last_look = 0;
    char said[128] = "";
    for (;;) {
        double now = mono_now();
        utimensat(AT_FDCWD, beat, NULL, 0);
        slurm_copy(&fd, out);
        if (slurm_stop && !cancel_at) {
            char *cancel[] = { "scancel", (char *)job, NULL };
            slurm_run(cancel, NULL, 0);
            cancel_at = now;
        }
        if (cancel_at && now - cancel_at > SLURM_CANCEL_WAIT_S)
            return 143;
        if (now - last_look >= (cancel_at ? 0.2 : 1.0)) {
            last_look = now;
            char text[8192], state[64], reason[128], code[32];
            if (slurm_show(job, text, sizeof text)) {
                if (++misses >= 3) {
                    slurm_copy(&fd, out);
                    printf("autobatch: slurm job %s is no longer known to Slurm\n", job);
                    return cancel_at ? 143 : 1;
                }
            } else {
                misses = 0;
                slurm_field(text, "JobState", state, sizeof state);
                slurm_field(text, "Reason", reason, sizeof reason);
                slurm_field(text, "ExitCode", code, sizeof code);
                if (!strcmp(state, "PENDING") && strcmp(said, reason)) {
                    /* said once per reason: waiting in the queue is output,
                     * so the hang timeout does not end a trial that waits */
                    snprintf(said, sizeof said, "%s", reason);
                    printf("autobatch: slurm job %s pending (%s)\n", job, reason);
                    fflush(stdout);
                }
                if (!slurm_active(state)) {
                    usleep(200000); /* the last lines of the output file */
                    slurm_copy(&fd, out);
                    return cancel_at ? 143 : slurm_exit_status(job, state, code);
                }
            }
        }
        usleep(100000);
    }
}
