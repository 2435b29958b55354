/* SPDX-License-Identifier: MIT */
/*
 * slurm: job steps' sweep, job arrays from a login node, and the
 * follower that makes a remote array task look like a local process;
 * the checks of --slurm-arg, the GPUs Slurm gave a trial, and the
 * folding of Slurm's routine lines about a trial autobatch ended (see
 * slurm.h).
 */
#include "trial/slurm.h"
#include "util/mono.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/afile.h"
#include "util/errbuf.h"
#include "util/run.h"

/* Seconds without a heartbeat after which a task ends itself. */
#define SLURM_HEARTBEAT_S 30
/* How long the follower waits for Slurm to confirm a cancel. */
#define SLURM_CANCEL_WAIT_S 15.0

/* Slurm's commands run deaf to a stop: a follower or step wrapper being
 * stopped is ending its task, and the trial runner's SIGTERM to every
 * process of the trial must not end the scancel that does it. */
static int slurm_run(char *const *argv, char *out, size_t len)
{
    return run_capture(argv, out, len, RUN_DEAF);
}

/* Handle SIGTERM, SIGINT and SIGHUP (a stop) with h (or SIG_DFL). */
static void slurm_on_stop(void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* How many job steps squeue lists under name; each is cancelled when
 * cancel is set.  -1 when squeue failed. */
static int slurm_steps_named(const char *name, int cancel)
{
    char out[16384];
    char *argv[] = { "squeue", "-h", "-s", "-o", "%i %j", NULL };
    if (slurm_run(argv, out, sizeof out) != 0)
        return -1;
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char step[64], jname[128];
        if (sscanf(line, "%63s %127s", step, jname) == 2 && !strcmp(jname, name)) {
            n++;
            if (cancel) {
                char *scancel[] = { "scancel", step, NULL };
                slurm_run(scancel, NULL, 0);
            }
        }
    }
    return n;
}

int slurm_sweep_steps(const char *name, double max_s)
{
    if (slurm_steps_named(name, 1) <= 0)
        return 0;
    /* scancel only asks: the step's processes (a trainer that ignores
     * SIGTERM) live on until slurmd has killed them, and the next trial
     * would share their GPU.  Wait until Slurm no longer lists it. */
    double t0 = mono_now(), again = 5.0;
    for (;;) {
        usleep(100000);
        double t = mono_now() - t0;
        int left = slurm_steps_named(name, t >= again);
        if (left <= 0)
            return 0;
        if (t >= again)
            again += 5.0;
        if (t >= max_s)
            return left;
    }
}

/*
 * A job step's heartbeat.  On the step's node, a watcher started by the
 * step's shell before it execs the command (so the command keeps its pid,
 * its signals and its exit status, and has no extra child to wait for):
 * it reads the heartbeat file's mtime once a second, and when the file,
 * once seen, is gone (a later autobatch swept the killed run's directory)
 * or its mtime has not moved for LIMIT of its own seconds (no clock of
 * another host compared), it sends SIGTERM to the command's group, waits
 * up to 5 s, cancels the step (Slurm ends everything in it) and kills the
 * group.  A node that never sees the file (a trial directory that is not
 * shared) gets no watchdog, as before.  The watcher holds none of the
 * step's output and ends within a second of the command.
 */
static const char slurm_watch_sh[] =
    "b=$1 l=$2;shift 2;p=$$;"
    "w(){ trap '' TERM INT HUP;s= m0= n=0;"
    "while kill -0 $p 2>/dev/null;do "
    "if m=$(stat -c %Y -- \"$b\" 2>/dev/null);then s=1;"
    "if [ \"$m\" = \"$m0\" ];then n=$((n+1));else m0=$m n=0;fi;"
    "elif [ -n \"$s\" ];then n=$((l+1));fi;"
    "if [ $n -gt $l ];then kill -s TERM -- -$p 2>/dev/null||kill -s TERM $p;"
    "i=0;while kill -0 $p 2>/dev/null&&[ $i -lt 5 ];do sleep 1;i=$((i+1));done;"
    "scancel \"$SLURM_JOB_ID.$SLURM_STEP_ID\";"
    "kill -s KILL -- -$p 2>/dev/null||kill -s KILL $p;exit 1;fi;"
    "sleep 1;done;};"
    "(w &) </dev/null >/dev/null 2>&1;"
    "printf '%s\\n' \"${SLURM_STEP_GPUS-}\" 2>/dev/null >\"${b%/*}/" SLURM_GPUS_FILE "\";"
    "exec \"$@\"";

int slurm_step_argv(struct strvec *argv, size_t cmd_at, const char *self, const char *beat)
{
    const char *hb = getenv("AUTOBATCH_SLURM_HEARTBEAT");
    char limit[32];
    snprintf(limit, sizeof limit, "%ld", hb && atol(hb) > 0 ? atol(hb) : (long)SLURM_HEARTBEAT_S);
    const char *watch[] = { "sh", "-c", slurm_watch_sh, "autobatch-step-watch", beat, limit };
    const char *local[] = { self, "__slurm-step", beat, "--" };
    int rc = 0;
    for (size_t i = 0; i < sizeof watch / sizeof *watch; i++)
        rc |= strvec_insert(argv, cmd_at + i, watch[i]);
    for (size_t i = 0; i < sizeof local / sizeof *local; i++)
        rc |= strvec_insert(argv, i, local[i]);
    return rc ? -1 : 0;
}

/*
 * What srun and slurmstepd say, as a matter of course, about a step that
 * autobatch ended (SIGTERM to srun): five or six lines of "error" and
 * "aborted" that say nothing about the trial.  Only after autobatch's
 * signal are they routine; an OOM line ("task 0: Out Of Memory") never
 * is, nor is any other line.
 */
static int slurm_routine_line(const char *l)
{
    static const char *const prefix[] = {
        "srun: forcing job termination", "srun: Job step aborted", "srun: got SIGCONT",
        "srun: launch/slurm: _step_signal: Terminating StepId=",
        "srun: Cancelled pending job step", "srun: interrupt (one more within",
        "srun: sending Ctrl-C to", "srun: Force Terminated",
    };
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (!strncmp(l, prefix[i], strlen(prefix[i])))
            return 1;
    /* srun: error: NODE: task 0: Killed (or Terminated, or the exit code
     * of a trainer that exits on SIGTERM) */
    const char *t;
    if (!strncmp(l, "srun: error: ", 13) && (t = strstr(l, ": task")) &&
        (t = strstr(t + 6, ": ")) &&
        (!strcmp(t, ": Killed") || !strcmp(t, ": Terminated") ||
         !strncmp(t, ": Exited with exit code ", 24)))
        return 1;
    /* slurmstepd-NODE: error: *** STEP J.S ON NODE CANCELLED AT TIME *** */
    if (!strncmp(l, "slurmstepd", 10) && (t = strstr(l, ": error: *** STEP ")) &&
        strstr(t, " CANCELLED AT ") && strlen(l) > 4 && !strcmp(l + strlen(l) - 4, " ***"))
        return 1;
    return 0;
}

/* Where a routine line starts in l: at its start, or after a line of the
 * task's that had no end yet (a progress bar redrawn with \r); NULL when
 * l holds none. */
static const char *slurm_routine_at(const char *l)
{
    if (slurm_routine_line(l))
        return l;
    static const char *const from[] = { "srun: ", "slurmstepd" };
    for (size_t i = 0; i < sizeof from / sizeof *from; i++) {
        const char *t = strstr(l, from[i]);
        if (t && t > l && slurm_routine_line(t))
            return t;
    }
    return NULL;
}

static volatile sig_atomic_t slurm_step_ended;

static void slurm_on_end(int sig)
{
    slurm_step_ended = sig;
}

/* Write len bytes of srun's stderr on, remembering whether a line ended. */
static void slurm_err_out(const char *b, size_t len, int *bol)
{
    if (!len)
        return;
    afile_write_all(2, b, len);
    *bol = b[len - 1] == '\n' || b[len - 1] == '\r';
}

int slurm_step_beat(const char *beat, char *const *argv)
{
    int fd = open(beat, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    /* CMD gets the descriptors and signals the trial gave us, not what
     * main() made of them (non-blocking output pipes, SIGPIPE ignored). */
    for (int i = 0; i < 3; i++) {
        int fl = fcntl(i, F_GETFL);
        if (fl >= 0 && (fl & O_NONBLOCK))
            fcntl(i, F_SETFL, fl & ~O_NONBLOCK);
    }
    signal(SIGPIPE, SIG_DFL);
    /* autobatch's SIGTERM (to the trial's group, srun included) is the
     * mark after which srun's routine lines are folded; this process
     * lives on until srun's last line. */
    slurm_on_stop(slurm_on_end);
    int p[2];
    pid_t self = getpid();
    pid_t srun = -1;
    if (!pipe2(p, O_CLOEXEC)) {
        srun = fork();
        if (srun == 0) {
            slurm_on_stop(SIG_DFL);
            dup2(p[1], 2);
            execvp(argv[0], argv);
            int e = errno;
            dprintf(2, "autobatch: cannot run '%s': %s\n", argv[0], strerror(e));
            _exit(127);
        }
        close(p[1]);
    }
    if (srun < 0) { /* no pipe or no fork: srun in our place, unfolded */
        if (fork() == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            while (getppid() == self) {
                utimensat(AT_FDCWD, beat, NULL, AT_SYMLINK_NOFOLLOW);
                sleep(1);
            }
            _exit(0);
        }
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execvp(argv[0], argv);
        int e = errno;
        fprintf(stderr, "autobatch: cannot run '%s': %s\n", argv[0], strerror(e));
        return 127;
    }
    if (fork() == 0) {
        /* The beater: dies with this process, which lives as long as
         * srun; holds none of the trial's files. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        for (int i = 0; i < 3 && devnull >= 0; i++)
            dup2(devnull, i);
        for (int i = 3; i < 1024; i++)
            close(i);
        while (getppid() == self) {
            utimensat(AT_FDCWD, beat, NULL, AT_SYMLINK_NOFOLLOW);
            sleep(1);
        }
        _exit(0);
    }
    /* srun's stderr (its own lines and the task's stderr): on as it comes
     * until autobatch ends the step, then line by line with the routine
     * ones counted instead of shown. */
    static char buf[65536];
    size_t len = 0;
    int bol = 1, hidden = 0;
    for (;;) {
        ssize_t n = read(p[0], buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (!slurm_step_ended) {
            slurm_err_out(buf, (size_t)n, &bol);
            continue;
        }
        len += (size_t)n;
        size_t off = 0;
        for (;;) {
            char *e = memchr(buf + off, '\n', len - off), *r = memchr(buf + off, '\r', len - off);
            char *end = !e ? r : !r ? e : e < r ? e : r;
            if (!end)
                break;
            *end = '\0';
            const char *at = slurm_routine_at(buf + off);
            *end = end == e ? '\n' : '\r';
            if (at) { /* what came before it on the line (a progress bar) goes on */
                slurm_err_out(buf + off, (size_t)(at - (buf + off)), &bol);
                hidden++;
            } else {
                slurm_err_out(buf + off, (size_t)(end - buf) + 1 - off, &bol);
            }
            off = (size_t)(end - buf) + 1;
        }
        memmove(buf, buf + off, len - off);
        len -= off;
        if (len == sizeof buf) { /* one endless line: on as it is */
            slurm_err_out(buf, len, &bol);
            len = 0;
        }
    }
    if (len) {
        buf[len < sizeof buf ? len : len - 1] = '\0';
        const char *at = slurm_routine_at(buf);
        slurm_err_out(buf, at ? (size_t)(at - buf) : len, &bol);
        hidden += at != NULL;
    }
    close(p[0]);
    int ws = 0;
    while (waitpid(srun, &ws, 0) < 0)
        if (errno != EINTR)
            return 127;
    if (hidden) {
        char line[160];
        int l = snprintf(line, sizeof line, "%sslurm: step ended by autobatch (%d routine "
                         "srun/slurmstepd line%s hidden)\n", bol ? "" : "\n", hidden,
                         hidden == 1 ? "" : "s");
        slurm_err_out(line, (size_t)l, &bol);
    }
    if (WIFSIGNALED(ws)) {
        signal(WTERMSIG(ws), SIG_DFL);
        raise(WTERMSIG(ws));
        return 128 + WTERMSIG(ws);
    }
    return WEXITSTATUS(ws);
}

/*
 * --slurm-arg.  Options autobatch itself sets on every job or step (or
 * that would break how it follows one: output files, the environment it
 * passes, the working directory) are refused; so are the GPU requests
 * when --gpus gives them.  Job-level options (partition, account, ...)
 * go to sbatch only: inside an allocation the job exists already.  An
 * abbreviation counts as the option it abbreviates, as Slurm's getopt
 * takes it ("--out=x" is --output).
 */
static const char *const slurm_ours[] = { "array", "chdir", "error", "exact", "export",
    "input", "job-name", "kill-on-bad-exit", "ntasks", "open-mode", "output", "parsable",
    "unbuffered", "wrap", NULL };
static const char *const slurm_gpu_opts[] = { "gres", "gpus", "gpus-per-node",
    "gpus-per-socket", "gpus-per-task", NULL };
static const char *const slurm_job_only[] = { "account", "begin", "clusters", "deadline",
    "dependency", "hold", "licenses", "mail-type", "mail-user", "nice", "no-requeue",
    "partition", "priority", "qos", "requeue", "reservation", "time-min", "wckey", NULL };

/* The entry of list that the option name (n bytes) is or abbreviates. */
static const char *slurm_opt_in(const char *name, size_t n, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (n == strlen(list[i]) ? !strncmp(name, list[i], n)
                                 : n >= 3 && n < strlen(list[i]) && !strncmp(name, list[i], n))
            return list[i];
    return NULL;
}

int slurm_arg_check(const char *arg, int flags, char *err, size_t errlen)
{
    const char *name = arg + 2;
    size_t n = strcspn(name, "=");
    const char *hit;
    if (!*arg || strspn(arg, " \t\n\r\v\f") == strlen(arg)) {
        errbuf_set(err, errlen, "--slurm-arg is empty; give a Slurm option such as "
                                "--slurm-arg --partition=gpu");
        return -1;
    }
    if (strncmp(arg, "--", 2) || !n || name[0] == '-') {
        errbuf_set(err, errlen, "--slurm-arg '%s': give a long option with its value after '=', "
                                "e.g. --slurm-arg --partition=gpu", arg);
        return -1;
    }
    if (strcspn(name, " \t\n\r\v\f") < n) {
        errbuf_set(err, errlen, "--slurm-arg '%s': one option per --slurm-arg, its value after "
                                "'=' (e.g. --slurm-arg --partition=gpu)", arg);
        return -1;
    }
    if ((hit = slurm_opt_in(name, n, slurm_ours))) {
        errbuf_set(err, errlen, "--slurm-arg '%s': autobatch sets --%s itself; drop it", arg, hit);
        return -1;
    }
    if ((flags & SLURM_ARG_GPUS) && (hit = slurm_opt_in(name, n, slurm_gpu_opts))) {
        errbuf_set(err, errlen, "--slurm-arg '%s': --gpus and --gpus-per-trial give each trial "
                                "its GPUs (--gres=gpu:K); drop --%s, or drop --gpus", arg, hit);
        return -1;
    }
    if ((flags & SLURM_ARG_TYPE) && (hit = slurm_opt_in(name, n, slurm_gpu_opts))) {
        errbuf_set(err, errlen, "--slurm-arg '%s': a target's GRES type gives each trial its "
                                "GPUs (--gres=gpu:TYPE:K); drop --%s", arg, hit);
        return -1;
    }
    static const char *const partition[] = { "partition", NULL };
    if ((flags & SLURM_ARG_TARGET) && slurm_opt_in(name, n, partition)) {
        errbuf_set(err, errlen, "--slurm-arg '%s': --slurm-targets names each target's "
                                "partition; drop it", arg);
        return -1;
    }
    return 0;
}

int slurm_arg_for_step(const char *arg)
{
    return !slurm_opt_in(arg + 2, strcspn(arg + 2, "="), slurm_job_only);
}

/* The first line of the trial directory's file name (what the node or
 * the follower left there) into out; "" when there is none. */
static void slurm_trial_line(const char *dir, const char *name, char *out, size_t len)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)len, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

int slurm_trial_pending(const char *dir, char *out, size_t len)
{
    slurm_trial_line(dir, SLURM_PENDING_FILE, out, len);
    return out[0] ? 0 : -1;
}

int slurm_trial_gpus(const char *dir, char *out, size_t len)
{
    slurm_trial_line(dir, SLURM_GPUS_FILE, out, len);
    /* indices and ranges as Slurm writes them (0,1 or 0-3), nothing else */
    if (strspn(out, "0123456789,-") != strlen(out))
        out[0] = '\0';
    return out[0] ? 0 : -1;
}

/* Is pid gone here (not merely someone else's)? */
static int slurm_pid_dead(long pid)
{
    return pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

int slurm_sweep_dead_steps(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job || strspn(job, "0123456789") != strlen(job))
        return 0;
    char host[256] = "";
    if (gethostname(host, sizeof host - 1))
        return 0;
    host[strcspn(host, ".")] = '\0';
    static char out[65536];
    char *argv[] = { "squeue", "-h", "-s", "-j", (char *)job, "-o", "%i %j", NULL };
    if (slurm_run(argv, out, sizeof out) != 0)
        return 0;
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char step[64], jname[128];
        long pid = 0, trial = 0;
        int used = 0;
        if (sscanf(line, "%63s %127s", step, jname) != 2 ||
            sscanf(jname, "autobatch-%ld-%ld%n", &pid, &trial, &used) != 2 ||
            jname[used] || strncmp(step, job, strlen(job)) || step[strlen(job)] != '.' ||
            pid == (long)getpid() || !slurm_pid_dead(pid))
            continue;
        /* Named for a pid that is dead here: ours only if its srun ran on
         * this host and is dead too (a pid of another host or PID
         * namespace says nothing). */
        char text[8192], *sp;
        char *show[] = { "scontrol", "show", "step", "-o", step, NULL };
        if (slurm_run(show, text, sizeof text) != 0 || !(sp = strstr(text, "SrunHost:Pid=")))
            continue;
        sp += strlen("SrunHost:Pid=");
        char *colon = strchr(sp, ':');
        if (!colon)
            continue;
        size_t hl = strcspn(sp, ".:");
        long spid = strtol(colon + 1, NULL, 10);
        if (hl != strlen(host) || strncmp(sp, host, hl) || !slurm_pid_dead(spid))
            continue;
        char *cancel[] = { "scancel", step, NULL };
        if (slurm_run(cancel, NULL, 0) == 0)
            n++;
    }
    return n;
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
 * of a killed run).  The command's output goes through the stamper
 * (`self __slurm-follow --stamp - -`, slurm_stamp) when the node sees
 * the same autobatch binary, so the follower can hand each line on at
 * the time the task wrote it; the script waits (bounded) for the stamper
 * to write the last of it before the task ends. */
static int slurm_write_task(const struct slurm_task *t, const char *path, const char *beat,
                            const char *self)
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
    /* the GPUs Slurm gave the task, for the results (slurm_trial_gpus) */
    fputs("printf '%s\\n' \"${SLURM_JOB_GPUS-${SLURM_STEP_GPUS-}}\" 2>/dev/null >", f);
    char gpus[4300];
    snprintf(gpus, sizeof gpus, "%s/%s", t->dir, SLURM_GPUS_FILE);
    strvec_shell_word(f, gpus);
    fputs("\nab_stamp=", f);
    strvec_shell_word(f, self ? self : "");
    /* tried first on nothing: a binary that cannot run here must not
     * leave the command writing into a closed pipe */
    fputs("\nab_sp=\nif [ -n \"$ab_stamp\" ] && [ -x \"$ab_stamp\" ] && "
          "\"$ab_stamp\" __slurm-follow --stamp - - </dev/null >/dev/null 2>&1 && "
          "exec 3> >(exec \"$ab_stamp\" __slurm-follow --stamp - -); then\n"
          "  ab_sp=$!\nelse\n  exec 3>&1\nfi\n", f);
    fputs("setsid", f);
    for (size_t i = 0; i < t->argv->n; i++) {
        fputc(' ', f);
        strvec_shell_word(f, t->argv->v[i]);
    }
    fputs(" >&3 2>&3 &\npid=$!\nexec 3>&-\n", f);
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
               "wait \"$pid\"\n"
               "rc=$?\n"
               "if [ -n \"$ab_sp\" ]; then\n"
               "  for _ in $(seq 50); do kill -0 \"$ab_sp\" 2>/dev/null || break; sleep 0.1; done\n"
               "fi\n"
               "exit $rc\n", limit, limit);
    return fclose(f) ? -1 : 0;
}

int slurm_array_submit(struct slurm_task *tasks, size_t n, const char *rounddir, const char *name,
                       const char *gres, long minutes, const char *const *extra, size_t nextra,
                       const char *self, double pending_s, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char script[4300], beat[4300];
        snprintf(script, sizeof script, "%s/task.sh", tasks[i].dir);
        snprintf(beat, sizeof beat, "%s/alive", tasks[i].dir);
        int fd = open(beat, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
        if (fd < 0 || slurm_write_task(&tasks[i], script, beat, self)) {
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
    char *argv[13 + SLURM_MAX_ARGS];
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
    /* the user's last, so that --time=... wins over ours */
    for (size_t i = 0; i < nextra && i <= SLURM_MAX_ARGS; i++)
        argv[k++] = (char *)extra[i];
    argv[k++] = array;
    argv[k] = NULL;
    /* sbatch's errors and warnings too: a partition or account it
     * refuses is said in its words */
    char out[2048];
    int rc = run_capture(argv, out, sizeof out, RUN_ERR_TOO);
    long id = 0;
    for (const char *l = out; *l && id <= 0; l += strcspn(l, "\n"), l += *l == '\n')
        if (*l >= '0' && *l <= '9')
            id = strtol(l, NULL, 10);
    if (rc != 0 || id <= 0) {
        out[strcspn(out, "\n")] = '\0';
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
            strvec_push(a, log) || strvec_push(a, beat) ||
            (pending_s > 0 && strvec_pushf(a, "%.3f", pending_s))) {
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

/*
 * Stamped output.  The task's stamper writes each chunk it read from the
 * command as a record, "\x1e<seconds> <bytes>\n" and the bytes, the
 * seconds on the node's CLOCK_MONOTONIC when the chunk arrived.  The
 * follower hands each record on at the local time stamp + offset, the
 * offset fixed by the first record (its copying delay then) plus
 * SLURM_PACE_S, so the trial runner reads the lines spaced as the task
 * wrote them, whenever the shared filesystem and the polling let the
 * follower see them.  A record found later than its time (a copying
 * stall longer than SLURM_PACE_S) is handed on at once and the offset
 * grows by the delay, so one interval takes the error, not every later
 * one.  Bytes outside records (Slurm's own lines, a task without the
 * stamper) are handed on as they are found.
 */
#define SLURM_STAMP_MARK '\x1e'
#define SLURM_STAMP_HEAD_MAX 48
#define SLURM_STAMP_CHUNK 65536
/* How long stamped output is held back beyond the first record's delay. */
#define SLURM_PACE_S 1.0
/* A record later than this is a stall of the copying, not a slow poll or
 * a slow scontrol: the offset takes the delay. */
#define SLURM_PACE_LATE_S 0.25
/* Bytes read ahead of their time at most (the file holds the rest). */
#define SLURM_PACE_BUF (1u << 20)

/* The stamper: stdin to stdout as records, until EOF.  It ignores the
 * signals that end a task, so that the command's last lines still get
 * out; a write that fails drops the chunk and reading goes on, so the
 * command never meets a closed pipe because of us. */
static int slurm_stamp(void)
{
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    static char buf[SLURM_STAMP_HEAD_MAX + SLURM_STAMP_CHUNK];
    for (;;) {
        ssize_t n = read(0, buf + SLURM_STAMP_HEAD_MAX, SLURM_STAMP_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        char head[SLURM_STAMP_HEAD_MAX];
        int hl = snprintf(head, sizeof head, "%c%.6f %zd\n", SLURM_STAMP_MARK, mono_now(), n);
        if (hl <= 0 || hl >= (int)sizeof head)
            continue;
        memcpy(buf + SLURM_STAMP_HEAD_MAX - hl, head, (size_t)hl);
        afile_write_all(1, buf + SLURM_STAMP_HEAD_MAX - hl, (size_t)hl + (size_t)n);
    }
}

/* A record's head at b: 1 with *t, *n and *hl (the head's length) when
 * whole, 0 when it may still be coming, -1 when b holds no head. */
static int slurm_stamp_head(const char *b, size_t len, double *t, size_t *n, size_t *hl)
{
    if (!len || b[0] != SLURM_STAMP_MARK)
        return -1;
    size_t max = len < SLURM_STAMP_HEAD_MAX ? len : SLURM_STAMP_HEAD_MAX;
    const char *nl = memchr(b, '\n', max);
    if (!nl)
        return len < SLURM_STAMP_HEAD_MAX ? 0 : -1;
    char tmp[SLURM_STAMP_HEAD_MAX + 1];
    size_t k = (size_t)(nl - b);
    memcpy(tmp, b + 1, k - 1);
    tmp[k - 1] = '\0';
    if (strspn(tmp, "0123456789. ") != k - 1 || !(tmp[0] >= '0' && tmp[0] <= '9'))
        return -1;
    char *e;
    *t = strtod(tmp, &e);
    if (*e != ' ' || !(e[1] >= '0' && e[1] <= '9'))
        return -1;
    char *e2;
    unsigned long long v = strtoull(e + 1, &e2, 10);
    if (*e2 || v == 0 || v > SLURM_STAMP_CHUNK)
        return -1;
    *n = (size_t)v;
    *hl = k + 1;
    return 1;
}

/* The task's output on its way to stdout. */
struct slurm_pace {
    int fd;            /* the output file; -1 until it exists */
    char *buf;         /* read and not yet handed on */
    size_t len;
    int have_offset;
    double offset;     /* local time = task stamp + offset */
    int fold;          /* autobatch cancelled the task: Slurm's routine line is counted */
    int hidden;        /* ... so many */
    int bol;           /* what was handed on ended a line (or nothing was) */
};

/* Hand len bytes on to the trial. */
static void slurm_pace_out(struct slurm_pace *p, const char *b, size_t len)
{
    if (!len)
        return;
    afile_write_all(1, b, len);
    p->bol = b[len - 1] == '\n' || b[len - 1] == '\r';
}

/* Bytes of Slurm's own (no record) on to the trial; once autobatch has
 * cancelled the task, without the line that says so,
 * "slurmstepd-NODE: error: *** JOB J ON NODE CANCELLED AT TIME ***". */
static void slurm_pace_plain(struct slurm_pace *p, const char *b, size_t len)
{
    while (p->fold && len) {
        const char *nl = memchr(b, '\n', len);
        if (!nl)
            break;
        size_t n = (size_t)(nl - b);
        const char *t = memmem(b, n, ": error: *** JOB ", 17);
        if (n > 14 && !strncmp(b, "slurmstepd", 10) && t && memmem(t, n - (size_t)(t - b),
                                                                   " CANCELLED AT ", 14) &&
            !memcmp(nl - 4, " ***", 4))
            p->hidden++;
        else
            slurm_pace_out(p, b, n + 1);
        b += n + 1;
        len -= n + 1;
    }
    slurm_pace_out(p, b, len);
}

/* The one line that stands for what slurm_pace_plain() left out. */
static void slurm_pace_said(struct slurm_pace *p)
{
    if (!p->hidden)
        return;
    printf("%sslurm: task ended by autobatch (%d routine slurmstepd line%s hidden)\n",
           p->bol ? "" : "\n", p->hidden, p->hidden == 1 ? "" : "s");
    fflush(stdout);
    p->hidden = 0;
}

/* Read what the output file gained, as far as the buffer has room. */
static void slurm_pace_read(struct slurm_pace *p, const char *path)
{
    if (p->fd < 0)
        p->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (p->fd < 0)
        return;
    if (!p->buf && !(p->buf = malloc(SLURM_PACE_BUF)))
        return;
    while (p->len < SLURM_PACE_BUF) {
        ssize_t n = read(p->fd, p->buf + p->len, SLURM_PACE_BUF - p->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        p->len += (size_t)n;
    }
}

/* Hand on what is due by `now` (all of it when flush).  Returns the time
 * the next record is due, or 0 when none waits for its time. */
static double slurm_pace_run(struct slurm_pace *p, double now, int flush)
{
    size_t off = 0;
    double next = 0;
    while (off < p->len) {
        const char *b = p->buf + off;
        size_t left = p->len - off;
        double t;
        size_t n, hl;
        int k = slurm_stamp_head(b, left, &t, &n, &hl);
        if (k < 0) {
            /* bytes of no record: up to the next mark (a stray mark alone) */
            const char *e = left > 1 ? memchr(b + 1, SLURM_STAMP_MARK, left - 1) : NULL;
            size_t r = e ? (size_t)(e - b) : left;
            slurm_pace_plain(p, b, r);
            off += r;
            continue;
        }
        if (k == 0 || left < hl + n) {
            if (!flush)
                break;
            /* the task ended in the middle of a record: what there is */
            if (k > 0)
                slurm_pace_out(p, b + hl, left - hl);
            off = p->len;
            break;
        }
        if (!p->have_offset) {
            p->offset = now - t + SLURM_PACE_S;
            p->have_offset = 1;
        }
        double due = t + p->offset;
        if (due > now && !flush) {
            next = due;
            break;
        }
        if (!flush && now - due > SLURM_PACE_LATE_S)
            p->offset += now - due;
        slurm_pace_out(p, b + hl, n);
        off += hl + n;
    }
    if (off) {
        memmove(p->buf, p->buf + off, p->len - off);
        p->len -= off;
    }
    return next;
}

/* The task ended: hand on the rest of its output at its times (bounded),
 * or at once. */
static void slurm_pace_drain(struct slurm_pace *p, const char *path, int at_once)
{
    double end = mono_now() + SLURM_PACE_S + 2.0;
    for (;;) {
        slurm_pace_read(p, path);
        double now = mono_now();
        int last = at_once || now >= end;
        double next = slurm_pace_run(p, now, last);
        if (last || !p->len)
            break;
        if (!next) { /* a record that never got whole */
            slurm_pace_run(p, now, 1);
            break;
        }
        double w = next - now;
        usleep((useconds_t)((w < 0.001 ? 0.001 : w > 0.1 ? 0.1 : w) * 1e6));
    }
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    free(p->buf);
    p->buf = NULL;
    p->len = 0;
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

/* --slurm-pending: say so, leave the reason in the trial's directory
 * (the heartbeat's), for the controller. */
static void slurm_pending_mark(const char *job, const char *beat, const char *reason,
                               double pending_s)
{
    printf("autobatch: slurm job %s still pending (%s) after %.0fs; cancelled (--slurm-pending)\n",
           job, reason[0] ? reason : "no reason given", pending_s);
    fflush(stdout);
    char path[4400];
    const char *slash = strrchr(beat, '/');
    snprintf(path, sizeof path, "%.*s%s", slash ? (int)(slash - beat + 1) : 0, beat,
             SLURM_PENDING_FILE);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s\n", reason[0] ? reason : "no reason given");
        fclose(f);
    }
}

int slurm_follow(const char *job, const char *out, const char *beat, double pending_s)
{
    if (!strcmp(job, "--stamp"))
        return slurm_stamp();
    slurm_on_stop(slurm_on_signal);
    struct slurm_pace pace = { .fd = -1, .bol = 1 };
    int misses = 0, gave_up = 0, cancelled = 0;
    double cancel_at = 0, cancel_try = 0, last_look = 0, t0 = mono_now();
    char said[128] = "";
    for (;;) {
        double now = mono_now();
        utimensat(AT_FDCWD, beat, NULL, 0);
        slurm_pace_read(&pace, out);
        /* Paced even once autobatch has stopped the trial: what it reads
         * until the end still counts, and all of it at once would make
         * many steps look as if they took no time. */
        double next = slurm_pace_run(&pace, now, 0);
        if (slurm_stop && !cancel_at) {
            cancel_at = now;
            pace.fold = 1;
        }
        /* again a second later should scancel fail */
        if (cancel_at && !cancelled && now - cancel_try >= 1.0) {
            char *cancel[] = { "scancel", (char *)job, NULL };
            cancelled = slurm_run(cancel, NULL, 0) == 0;
            cancel_try = now;
        }
        if (cancel_at && now - cancel_at > SLURM_CANCEL_WAIT_S) {
            slurm_pace_drain(&pace, out, 1);
            slurm_pace_said(&pace);
            return gave_up ? 1 : 143;
        }
        if (now - last_look >= (cancel_at ? 0.2 : 1.0)) {
            last_look = now;
            char text[8192], state[64], reason[128], code[32];
            if (slurm_show(job, text, sizeof text)) {
                if (++misses >= 3) {
                    slurm_pace_drain(&pace, out, 0);
                    slurm_pace_said(&pace);
                    printf("autobatch: slurm job %s is no longer known to Slurm\n", job);
                    return cancel_at ? 143 : 1;
                }
            } else {
                misses = 0;
                slurm_field(text, "JobState", state, sizeof state);
                slurm_field(text, "Reason", reason, sizeof reason);
                slurm_field(text, "ExitCode", code, sizeof code);
                /* "None": about to start, nothing to wait for yet */
                if (!strcmp(state, "PENDING") && strcmp(said, reason) && strcmp(reason, "None")) {
                    /* said once per reason: waiting in the queue is output,
                     * so the hang timeout does not end a trial that waits */
                    snprintf(said, sizeof said, "%s", reason);
                    printf("autobatch: slurm job %s pending (%s)\n", job, reason);
                    fflush(stdout);
                }
                if (!strcmp(state, "PENDING") && pending_s > 0 && !cancel_at &&
                    now - t0 > pending_s) {
                    slurm_pending_mark(job, beat, reason, pending_s);
                    char *cancel[] = { "scancel", (char *)job, NULL };
                    cancelled = slurm_run(cancel, NULL, 0) == 0;
                    cancel_at = now;
                    gave_up = 1;
                }
                if (!slurm_active(state)) {
                    usleep(200000); /* the last lines of the output file */
                    slurm_pace_drain(&pace, out, 0);
                    slurm_pace_said(&pace);
                    return gave_up ? 1 : cancel_at ? 143 : slurm_exit_status(job, state, code);
                }
            }
        }
        /* the next poll, or sooner the next record's time */
        double w = 0.1;
        if (next > 0) {
            double until = next - mono_now();
            w = until < 0.001 ? 0.001 : until < w ? until : w;
        }
        usleep((useconds_t)(w * 1e6));
    }
}

/* The guard itself: waits for EOF on `in`, cancels, exits; `done` (fd
 * 4, inherited by scancel) closes when both have. */
static void slurm_guard_run(const char *name, int in, int done)
{
    /* Its own session: the terminal's signals and a kill of the trials'
     * groups do not reach it; only the pipe ends it. */
    setsid();
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(in, 3) < 0 || dup2(done, 4) < 0 || dup2(null, 0) < 0 ||
        dup2(null, 1) < 0 || dup2(null, 2) < 0)
        _exit(127);
    /* nothing else of ours (a lock on the user's config, a trial's pipe)
     * may live on in it */
    close_range(5, ~0U, 0);
    pid_t me = getpid();
    if (write(4, &me, sizeof me) != (ssize_t)sizeof me)
        _exit(127);
    char c;
    while (read(3, &c, 1) < 0 && errno == EINTR)
        ;
    char arg[128];
    snprintf(arg, sizeof arg, "--name=%s", name);
    execlp("scancel", "scancel", arg, (char *)NULL);
    _exit(127);
}

int slurm_guard_start(struct slurm_guard *g, const char *name)
{
    int p[2], d[2];
    g->pid = -1;
    g->fd = g->done = -1;
    if (pipe2(p, O_CLOEXEC))
        return -1;
    if (pipe2(d, 0)) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    /* Not our child: we are a subreaper, and a trial runner in this
     * process reaps and signals every process below it.  Forked from a
     * child that exits at once while we are not one, the guard goes to
     * init (or a subreaper above us). */
    int sub = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &sub);
    if (sub)
        prctl(PR_SET_CHILD_SUBREAPER, 0);
    pid_t mid = fork();
    if (mid == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            close(p[1]);
            close(d[0]);
            slurm_guard_run(name, p[0], d[1]);
        }
        _exit(pid < 0);
    }
    int st = -1;
    if (mid > 0)
        while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
            ;
    if (sub)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    close(p[0]);
    close(d[1]);
    pid_t pid = -1;
    ssize_t n = -1;
    if (mid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        do
            n = read(d[0], &pid, sizeof pid);
        while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof pid || pid <= 0) {
        close(p[1]);
        close(d[0]);
        return -1;
    }
    fcntl(d[0], F_SETFD, FD_CLOEXEC);
    g->pid = pid;
    g->fd = p[1];
    g->done = d[0];
    return 0;
}

void slurm_guard_stop(struct slurm_guard *g)
{
    if (g->pid <= 0)
        return;
    close(g->fd);
    /* EOF on `done`: the guard and its scancel have exited */
    double until = mono_now() + 5;
    for (;;) {
        int ms = (int)((until - mono_now()) * 1000);
        struct pollfd pf = { g->done, POLLIN, 0 };
        int r = ms > 0 ? poll(&pf, 1, ms) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            kill(g->pid, SIGKILL);
            break;
        }
        char c;
        ssize_t n = r > 0 ? read(g->done, &c, 1) : -1;
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
    }
    close(g->done);
    g->pid = -1;
    g->fd = g->done = -1;
}
