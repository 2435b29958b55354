/* SPDX-License-Identifier: MIT */
/*
 * main: the controller.  Parse the plan, check everything that can be
 * checked before the first trial, then hand the loop to tune_loop
 * (tuner/control/tune.h): ask the search for a candidate, run it as a
 * supervised trial, record the outcome, until the search is done, the
 * budget is spent, the command crashes, or we are interrupted.  Then
 * write the results and say what was found.
 *
 * Exit statuses are those of DESIGN.md 2.4 (enum ab_exit below).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/afile.h"
#include "search/cache.h"
#include "cli/cli.h"
#include "control/choose.h"
#include "control/setup.h"
#include "control/tune.h"
#include "util/mono.h"
#include "control/writeback.h"
#include "output/events.h"
#include "preset.h"
#include "inject.h"
#include "inproc.h"
#include "trial/leftovers.h"
#include "oom.h"
#include "cli/outq.h"
#include "trial/proctree.h"
#include "trial/gpu.h"
#include "search/guide.h"
#include "cli/progress.h"
#include "output/results.h"
#include "trial/slurm.h"
#include "search/space.h"
#include "util/strvec.h"
#include "cli/subcmd.h"
#include "trainlog.h"
#include "trial/trial.h"

extern char **environ;

enum ab_exit {
    AB_OK = 0,
    AB_USAGE = TUNE_USAGE, /* 2; also: --write refused because the config was changed
                              during the run in a value the choice sets (nothing was
                              written) */
    AB_NOTHING_FITS = 3,
    AB_CRASH = 4,
    AB_BUDGET = 5,
    AB_REGRESSION = 6, /* set by subcmd_outputs_write */
    AB_INTERRUPTED = 130,
};

static volatile sig_atomic_t ab_interrupted;

static void ab_on_signal(int sig)
{
    ab_interrupted = sig;
}

/* fds 0-2 must be open, or the first file we open becomes "stdout". */
static void ab_sanitize_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            _exit(AB_USAGE);
}

static void ab_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ab_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ------------------------------------------------------------- answers */

/* ----------------------------------------------------------- write-back */

/* writeback_choice's lines: what it says and its diffs go to the summary
 * stream (ctx), its errors to stderr. */
static void ab_writeback_line(void *ctx, enum writeback_kind kind, const char *text)
{
    FILE *say = ctx;
    if (kind == WRITEBACK_ERROR)
        cli_error("%s", text);
    else if (kind == WRITEBACK_DIFF)
        fputs(text, say);
    else
        fprintf(say, "autobatch: %s\n", text);
}

/* ------------------------------------------------------- trial scratch */

/* Where this run writes files: the configs' directories, the output
 * files' (those that are files: a device or FIFO is written through, with
 * no temporary beside it) and the cache's.  Then sweep them and the
 * scratch base of what killed runs left there. */
static void ab_sweep(const struct plan *plan, const struct setup *s, const char *tmpbase,
                     const char *self, struct progress *pg)
{
    const char *files[] = {
        s->have_config ? s->config_path : NULL, s->have_accel ? s->accel_path : NULL,
        plan->json_path, plan->markdown_path, plan->junit_path, plan->html_path,
    };
    enum { NFILES = sizeof files / sizeof *files };
    char bufs[NFILES + 1][PATH_MAX];
    const char *dirs[NFILES + 2];
    size_t n = 0;
    for (size_t i = 0; i < NFILES; i++) {
        struct stat st;
        if (!files[i] || !strcmp(files[i], "-") || (!stat(files[i], &st) && !S_ISREG(st.st_mode)))
            continue;
        snprintf(bufs[n], PATH_MAX, "%s", files[i]);
        dirs[n] = dirname(bufs[n]);
        n++;
    }
    if (!cache_dir(bufs[n], PATH_MAX)) {
        dirs[n] = bufs[n];
        n++;
    }
    dirs[n] = NULL;
    struct leftovers_report lr;
    if (leftovers_sweep(tmpbase, self, dirs, &lr) > 0)
        progress_note(pg, "removed what an earlier, killed run left: %d scratch director%s, %d "
                          "trial cop%s of the config, %d temporary file%s of an unfinished write "
                          "(first: %s)", lr.dirs, lr.dirs == 1 ? "y" : "ies", lr.copies,
                      lr.copies == 1 ? "y" : "ies", lr.temps, lr.temps == 1 ? "" : "s", lr.first);
}

/* An existing directory we may write in. */
static int ab_writable_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode) && !access(path, W_OK | X_OK);
}

/* Give a slow reader of our output two seconds at exit, then drop the rest. */
static void ab_flush_output(void)
{
    outq_finish(2.0);
}

/*
 * --dry-run: each cell's first trial as it would run (its command line,
 * the environment it gets beyond ours, its working directory), nothing
 * run.  Other sizes differ only in the knobs' values.  Returns 0, or -1
 * after saying why.
 */
static int ab_dry_run(struct inject_ctx *ctx, const struct plan *plan, const struct setup *setup,
                      const struct space *sp, const char *dir)
{
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        if (c->state == CELL_SKIPPED)
            continue;
        struct inject_candidate cand = {
            c->fixed_micro > 0 ? c->fixed_micro : plan->batch_min, c->grad_accum, c->checkpointing,
        };
        char wd[4200], err[512];
        snprintf(wd, sizeof wd, "%s/dry-run-%zu", dir, i);
        ctx->trial_id = (long)i + 1;
        ctx->workdir = setup->preset.config_fixed && !mkdir(wd, 0700) ? wd : NULL;
        struct inject_trial t = INJECT_TRIAL_INIT;
        if (inject_build(ctx, plan->command, environ, &cand, &t, err, sizeof err)) {
            cli_error("%s", err);
            return -1;
        }
        printf("# cell grad_accum=%ld checkpointing=%s: its first trial, micro_batch=%ld (other "
               "sizes change only the knobs)\n", cand.grad_accum, cand.checkpointing ? "on" : "off",
               cand.micro_batch);
        if (t.cwd)
            printf("cd %s\n", t.cwd);
        for (size_t k = 0; k < t.env.n; k++) {
            int ours = 0;
            for (char **e = environ; *e && !ours; e++)
                ours = !strcmp(*e, t.env.v[k]);
            if (ours)
                continue;
            size_t eq = strcspn(t.env.v[k], "=");
            printf("%.*s=", (int)eq, t.env.v[k]);
            strvec_shell_word(stdout, t.env.v[k] + eq + (t.env.v[k][eq] == '='));
            putchar(' ');
            putchar('\\');
            putchar('\n');
        }
        for (size_t k = 0; k < t.argv.n; k++) {
            strvec_shell_word(stdout, t.argv.v[k]);
            putchar(k + 1 < t.argv.n ? ' ' : '\n');
        }
        if (t.tmp_config)
            printf("# its config is a patched copy of %s\n", ctx->config_path);
        inject_trial_release(&t);
        leftovers_remove_tree(wd);
    }
    ctx->workdir = NULL;
    return 0;
}

/* ---- Slurm job steps, GPU slots, the emulation library */

/* Count the entries of a comma-separated list. */
static size_t ab_list_count(const char *s)
{
    size_t n = *s ? 1 : 0;
    for (; *s; s++)
        n += *s == ',';
    return n;
}

/*
 * --gpus and --gpus-per-trial as slots: groups of K devices, each
 * CUDA_VISIBLE_DEVICES (UUIDs where NVML gives them) and an NVML mask.
 * With Slurm, the steps get their GPUs from Slurm: only the count
 * matters.  Returns the number of slots (0 without --gpus), -1 with a
 * one-line reason in err, or -2 when the GPUs are of several models.
 */
static long ab_slots(const struct plan *plan, const struct gpu *g, int slurm,
                     struct tune_slot *slots, size_t max, char *err, size_t errlen)
{
    if (!plan->gpus[0])
        return 0;
    long k = plan->gpus_per_trial;
    int dev[GPU_MAX * 4];
    char label[GPU_MAX * 4][100];
    size_t n = 0;
    if (!strcmp(plan->gpus, "all")) {
        const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
        long sg = slurm && getenv("SLURM_JOB_ID") ? slurm_alloc_gpus() : 0;
        if (sg > 0) {
            n = (size_t)sg;
        } else if (slurm && cvd && *cvd) {
            n = ab_list_count(cvd);
        } else if (g->n > 0) {
            n = (size_t)g->n;
        } else {
            snprintf(err, errlen, "--gpus all: no GPU seen through NVML (%s); list them, e.g. "
                                  "--gpus 0,1", g->why);
            return -1;
        }
        for (size_t i = 0; i < n && i < sizeof dev / sizeof *dev; i++) {
            dev[i] = slurm ? -1 : (int)i;
            snprintf(label[i], sizeof label[i], "%zu", i);
        }
    } else {
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", plan->gpus);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n >= sizeof dev / sizeof *dev) {
                snprintf(err, errlen, "--gpus: at most %zu GPUs", sizeof dev / sizeof *dev);
                return -1;
            }
            int found = -1;
            char *end;
            long idx = strtol(t, &end, 10);
            if (!strncmp(t, "GPU-", 4) || !strncmp(t, "MIG-", 4)) {
                for (int i = 0; i < g->n; i++)
                    if (!strcmp(gpu_uuid(g, i), t))
                        found = i;
            } else if (*t && !*end && idx >= 0 && idx < 1000) {
                if (g->n > 0 && idx >= g->n) {
                    snprintf(err, errlen, "--gpus: GPU %ld does not exist (NVML sees %d); "
                                          "use 0 to %d", idx, g->n, g->n - 1);
                    return -1;
                }
                found = g->n > 0 ? (int)idx : -1;
            } else {
                snprintf(err, errlen, "--gpus '%s': '%s' is neither an index nor a GPU UUID",
                         plan->gpus, t);
                return -1;
            }
            for (size_t i = 0; i < n; i++)
                if (!strcmp(label[i], t)) {
                    snprintf(err, errlen, "--gpus '%s': GPU %s is listed twice", plan->gpus, t);
                    return -1;
                }
            dev[n] = found;
            snprintf(label[n++], sizeof label[0], "%s", t);
        }
    }
    if (n % (size_t)k || n < (size_t)k) {
        snprintf(err, errlen, "--gpus gives %zu GPUs, not a multiple of --gpus-per-trial %ld; "
                              "list %ld, %ld, ... GPUs", n, k, k, 2 * k);
        return -1;
    }
    /* One model and size only: a boundary holds for one kind of GPU
     * (main.c then searches each model apart, ab_per_model). */
    for (size_t i = 1; i < n; i++) {
        const char *a, *b;
        uint64_t ta, tb;
        if (dev[0] >= 0 && dev[i] >= 0 && !gpu_info(g, dev[0], &a, &ta) &&
            !gpu_info(g, dev[i], &b, &tb) && (strcmp(a, b) || ta != tb)) {
            snprintf(err, errlen, "--gpus mixes GPU models (%s and %s)", a, b);
            return -2;
        }
    }
    size_t ns = n / (size_t)k;
    if (ns > max)
        ns = max;
    for (size_t s = 0; s < ns; s++) {
        size_t off = 0;
        slots[s].mask = 0;
        slots[s].devices[0] = '\0';
        for (size_t i = s * (size_t)k; i < (s + 1) * (size_t)k; i++) {
            const char *id = dev[i] >= 0 && gpu_uuid(g, dev[i])[0] ? gpu_uuid(g, dev[i]) : label[i];
            if (slurm)
                id = "slurm";
            if (off < sizeof slots[s].devices)
                off += (size_t)snprintf(slots[s].devices + off, sizeof slots[s].devices - off,
                                        "%s%s", off ? "," : "", id);
            if (dev[i] >= 0)
                slots[s].mask |= 1ULL << dev[i];
            if (slurm)
                break;
        }
    }
    return (long)ns;
}

/* The --emulate-gpu-memory preload library: AUTOBATCH_GPUEMU_LIB, or
 * next to the autobatch binary (build tree or installed).  0 and the
 * path, or -1. */
static int ab_emulate_lib(char *out, size_t len)
{
    const char *env = getenv("AUTOBATCH_GPUEMU_LIB");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return access(out, R_OK) ? -1 : 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *dir = dirname(exe);
    /* the build tree, beside the binary, and where cmake --install puts it */
    const char *where[] = { "probes/gpuemu/libautobatch-gpuemu.so", "libautobatch-gpuemu.so",
                            AB_GPUEMU_INSTALLED };
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        snprintf(out, len, "%s/%s", dir, where[i]);
        if (!access(out, R_OK))
            return 0;
    }
    return -1;
}

/* "NVIDIA A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb", for file names. */
static void ab_slug(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < len; p++) {
        char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        int keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (keep)
            out[k++] = c;
        else if (k && out[k - 1] != '-')
            out[k++] = '-';
    }
    while (k && out[k - 1] == '-')
        k--;
    out[k] = '\0';
}

/* PATH with -SLUG before its extension ("r.json" -> "r-nvidia-l4.json"). */
static char *ab_suffixed(const char *path, const char *slug)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    size_t stem = dot && (!slash || dot > slash) && dot != path ? (size_t)(dot - path) : strlen(path);
    char *out = NULL;
    if (asprintf(&out, "%.*s-%s%s", (int)stem, path, slug, path + stem) < 0)
        return NULL;
    return out;
}

/*
 * --gpus over several GPU models: a boundary holds for one model, so each
 * model's GPUs are searched apart, one model after the other, by this
 * binary run again with --gpus naming that model's GPUs; results and
 * reports go to files named after the model (r.json -> r-nvidia-l4.json;
 * `autobatch matrix` puts them side by side).  --write is left out: each
 * model has its own choice.  Returns the first failing run's status, or 0.
 */
static int ab_per_model(int argc, char **argv, const struct plan *plan, const struct gpu *g)
{
    int idx[GPU_MAX], n = 0;
    if (!strcmp(plan->gpus, "all")) {
        for (int i = 0; i < g->n; i++)
            idx[n++] = i;
    } else {
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", plan->gpus);
        for (char *t = strtok_r(buf, ",", &save); t && n < GPU_MAX; t = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int i = 0; i < g->n; i++)
                if (!strcmp(gpu_uuid(g, i), t))
                    found = i;
            idx[n++] = found >= 0 ? found : atoi(t);
        }
    }
    int done[GPU_MAX] = { 0 }, status = 0;
    for (int a = 0; a < n; a++) {
        if (done[a])
            continue;
        const char *name, *other;
        uint64_t total, ot;
        gpu_info(g, idx[a], &name, &total);
        char list[256] = "", slug[128];
        size_t off = 0;
        for (int b = a; b < n; b++) {
            gpu_info(g, idx[b], &other, &ot);
            if (strcmp(name, other) || total != ot)
                continue;
            done[b] = 1;
            if (off < sizeof list)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", off ? "," : "",
                                        idx[b]);
        }
        ab_slug(name, slug, sizeof slug);
        char gib[32];
        snprintf(gib, sizeof gib, "%.0fg", (double)total / (1 << 30));
        char tag[160];
        snprintf(tag, sizeof tag, "%s-%s", slug, gib);
        /* The same command line, with this model's GPUs and file names. */
        struct strvec av = STRVEC_INIT;
        int rc = strvec_push(&av, argv[0]);
        int after_dashdash = 0;
        for (int i = 1; i < argc && !rc; i++) {
            const char *arg = argv[i];
            if (after_dashdash || (plan->command && argv + i >= plan->command)) {
                rc |= strvec_push(&av, arg);
                continue;
            }
            if (!strcmp(arg, "--")) {
                after_dashdash = 1;
                rc |= strvec_push(&av, arg);
                continue;
            }
            static const char *const files[] = { "--json", "--markdown", "--html", "--junit" };
            int file = 0, gpus = !strcmp(arg, "--gpus") || !strncmp(arg, "--gpus=", 7);
            for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
                size_t fl = strlen(files[f]);
                if (!strncmp(arg, files[f], fl) && (arg[fl] == '\0' || arg[fl] == '='))
                    file = 1;
            }
            if (!strcmp(arg, "--write"))
                continue;
            if (gpus || file) {
                const char *eq = strchr(arg, '=');
                const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : "";
                size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
                char *nv = gpus ? strdup(list) : strcmp(val, "-") ? ab_suffixed(val, tag) : strdup("-");
                rc |= !nv || strvec_pushf(&av, "%.*s=%s", (int)nl, arg, nv ? nv : "");
                free(nv);
                continue;
            }
            rc |= strvec_push(&av, arg);
        }
        if (rc) {
            strvec_release(&av);
            cli_error("out of memory");
            return AB_USAGE;
        }
        fprintf(stderr, "autobatch: %s, %.1f GiB (GPUs %s): searched on its own%s\n", name,
                (double)total / (1 << 30), list, plan->write ? " (--write left out: one choice "
                                                                "per model)" : "");
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            execv("/proc/self/exe", av.v);
            _exit(127);
        }
        strvec_release(&av);
        int ws = 0, forwarded = 0;
        while (pid > 0 && waitpid(pid, &ws, 0) < 0) {
            if (errno != EINTR)
                break;
            if (ab_interrupted && !forwarded) {
                forwarded = 1;
                kill(pid, SIGTERM);
            }
        }
        int st = pid < 0 ? AB_USAGE : WIFEXITED(ws) ? WEXITSTATUS(ws) : AB_INTERRUPTED;
        if (st && !status)
            status = st;
        if (ab_interrupted)
            break;
    }
    return status;
}

/* ---- the final summary */

/* How the choice compares with its runner-up: "x.xx times faster (+- the
 * spread)", or that the two cannot be told apart. */
static void ab_say_runner_up(FILE *say, const struct results *res, const char *unit)
{
    struct choose_margin m;
    if (choose_margin(res, &m) == CHOOSE_NO_MARGIN)
        return;
    const struct results_trial *u = &res->trials[res->runner_up];
    char who[160];
    snprintf(who, sizeof who, "the runner-up micro_batch=%ld grad_accum=%ld checkpointing=%s "
             "(%.1f %s/s)", u->micro_batch, u->grad_accum, u->checkpointing ? "on" : "off",
             m.runner_speed, unit);
    switch (m.verdict) {
    case CHOOSE_TIE:
        fprintf(say, "autobatch: within 1%% of %s: a tie, which goes to less memory\n", who);
        break;
    case CHOOSE_WITHIN_NOISE:
        fprintf(say, "autobatch: within noise of %s: %.2f times as fast, step times vary by "
                     "%.1f%%\n", who, m.ratio, 100 * m.spread);
        break;
    case CHOOSE_FASTER:
        fprintf(say, "autobatch: %.2f times faster (+- %.1f%%) than %s\n", m.ratio,
                100 * m.spread, who);
        break;
    case CHOOSE_FASTER_UNKNOWN_SPREAD:
        fprintf(say, "autobatch: %.2f times faster than %s\n", m.ratio, who);
        break;
    case CHOOSE_NO_MARGIN:
        break;
    }
}

/* What --headroom kept out of the choice, and why: the fits whose memory
 * leaves less than the headroom free, counted once per configuration,
 * and the fastest of them with its figure. */
static void ab_say_headroom(FILE *say, const struct results *res, const struct space *sp,
                            const struct gpu *g, double headroom, const char *unit)
{
    double cap = choose_capacity(g, sp);
    struct choose_excluded x;
    if (!choose_excluded(res, sp, cap, headroom, &x))
        return;
    const struct results_trial *top = &res->trials[x.top];
    char rate[64] = "";
    if (results_speed(res, top) > 0)
        snprintf(rate, sizeof rate, ", %.1f %s/s", results_speed(res, top), unit);
    fprintf(say, "autobatch: --headroom %.0f%% excluded %zu fitting configuration%s, which use "
                 "more than %.1f of the device's %.1f GiB; the fastest: micro_batch=%ld "
                 "grad_accum=%ld checkpointing=%s%s, %.1f GiB\n", 100 * headroom, x.n,
            x.n == 1 ? "" : "s", (1 - headroom) * cap / 1073741824.0, cap / 1073741824.0,
            top->micro_batch, top->grad_accum, top->checkpointing ? "on" : "off", rate,
            x.need / 1073741824.0);
}

/* A choice that trains with another effective batch (micro x accum x
 * world size) than the command's own changes what its learning rate was
 * tuned for: say so.  Silent when the command's own values are unknown. */
static void ab_say_effective_batch(FILE *say, const struct plan *plan, const struct setup *s,
                                   const struct results_trial *b)
{
    long micro = setup_current(s, plan->command, KNOB_MICRO_BATCH, -1);
    /* Without --grad-accum the choice keeps the command's accumulation,
     * whatever it is; with it, the command's own must be known. */
    long accum = plan->ngrad_accum == 0 ? b->grad_accum
               : setup_current(s, plan->command, KNOB_GRAD_ACCUM, -1);
    if (micro < 1 || accum < 1)
        return;
    long world = plan->world_size;
    long before = micro * accum * world, after = b->micro_batch * b->grad_accum * world;
    if (before == after)
        return;
    fprintf(say, "autobatch: warning: the effective batch changes from %ld (micro_batch=%ld x "
                 "grad_accum=%ld x world size %ld) to %ld (%ld x %ld x %ld): scale the learning "
                 "rate with it, or keep it with --global-batch %ld\n", before, micro, accum, world,
            after, b->micro_batch, b->grad_accum, world, before);
}

int main(int argc, char **argv)
{
    ab_sanitize_fds();
    outq_install();
    atexit(ab_flush_output);
    signal(SIGPIPE, SIG_IGN);
    if (argc > 1) {
        int rc = subcmd_dispatch(argc, argv);
        if (rc >= 0)
            return rc;
    }
    struct plan plan;
    switch (cli_parse(argc, argv, &plan)) {
    case CLI_DONE: return AB_OK;
    case CLI_USAGE: return AB_USAGE;
    case CLI_RUN: break;
    }

    char err[512];
    /* Export files are checked before the first trial, so a bad path fails
     * in the first second and not after an hour of tuning. */
    if (plan.json_path && strcmp(plan.json_path, "-") &&
        afile_check_writable(plan.json_path, err, sizeof err)) {
        cli_error("--json: %s; choose a writable path", err);
        return AB_USAGE;
    }
    if (plan.events_path && plan.json_path && !strcmp(plan.events_path, "-") &&
        !strcmp(plan.json_path, "-")) {
        cli_error("--events - and --json - both want stdout; send one of them to a file");
        return AB_USAGE;
    }
    if (plan.events_path && !plan.dry_run && events_open(plan.events_path, err, sizeof err)) {
        cli_error("--events: %s; choose a writable path", err);
        return AB_USAGE;
    }
    json_t *baseline = NULL;
    if (subcmd_outputs_check(&plan, &baseline))
        return AB_USAGE;
    struct progress pg;
    progress_init(&pg, plan.quiet, plan.show_output, plan.verbose);
    pg.budget_s = plan.budget_s;
    struct setup setup = SETUP_INIT;
    char setup_err[8192];
    int setup_failed = setup_load(&setup, &plan, setup_err, sizeof setup_err);
    if (setup.auto_picked)
        progress_note(&pg, "--preset auto: picked '%s' (%s)", setup.preset.name,
                      setup.preset.summary ? setup.preset.summary : "");
    if (setup_failed) {
        cli_error("%s", setup_err);
        setup_release(&setup);
        return AB_USAGE;
    }
    pg.unit = setup.unit;
    struct oom_table oom = OOM_TABLE_INIT;
    if (oom_table_load_default(&oom, err, sizeof err)) {
        cli_error("built-in OOM signatures: %s", err);
        setup_release(&setup);
        return AB_USAGE;
    }
    if (proctree_become_subreaper()) {
        cli_error("cannot become a child subreaper: %s", strerror(errno));
        oom_table_release(&oom);
        setup_release(&setup);
        return AB_USAGE;
    }
    ab_install_signals();

    const char *tmpbase = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/autobatch-XXXXXX", tmpbase && *tmpbase ? tmpbase : "/tmp");
    char *dir = mkdtemp(tmpl);
    if (!dir) {
        cli_error("cannot make a temporary directory in '%s': %s; set TMPDIR to a writable place",
                  tmpbase && *tmpbase ? tmpbase : "/tmp", strerror(errno));
        oom_table_release(&oom);
        setup_release(&setup);
        return AB_USAGE;
    }

    /* Mark the scratch directory as ours, then sweep what killed runs
     * left behind (their scratch directories, trial copies of the config,
     * temporary files of writes cut short). */
    if (leftovers_mark(dir))
        progress_note(&pg, "warning: cannot mark '%s' as this run's: %s", dir, strerror(errno));
    ab_sweep(&plan, &setup, tmpbase && *tmpbase ? tmpbase : "/tmp", dir, &pg);
    char probe_dir[4200];
    snprintf(probe_dir, sizeof probe_dir, "%s/probe", dir);
    if (!plan.no_probe && inproc_install(probe_dir, err, sizeof err)) {
        cli_error("in-process probe: %s", err);
        leftovers_remove_tree(dir);
        oom_table_release(&oom);
        setup_release(&setup);
        return AB_USAGE;
    }
    struct trainlog_rules log_rules = setup_log_rules(&setup.preset);

    /* ---- the space */
    long accum_default[1] = { setup.grad_accum };
    struct space_opts so = {
        .batch_min = plan.batch_min, .batch_max = plan.batch_max, .batch_step = plan.batch_step,
        .grad_accum = plan.ngrad_accum ? plan.grad_accum : accum_default,
        .ngrad_accum = plan.ngrad_accum ? (size_t)plan.ngrad_accum : 1,
        .ckpt_off = plan.ckpt_off, .ckpt_on = plan.ckpt_on,
        .ckpt_forced = plan.ckpt_on && !plan.ckpt_off,
        .global_batch = plan.global_batch, .world_size = plan.world_size, .use_model = 1,
    };
    struct space space;
    if (space_init(&space, &so, err, sizeof err)) {
        cli_error("%s", err);
        leftovers_remove_tree(dir);
        oom_table_release(&oom);
        setup_release(&setup);
        return AB_USAGE;
    }
    /* The trainer's own step limit: far above anything a trial runs
     * (warm-up, measured steps, a noisy trial's extension), so it never
     * reaches its end-of-run save and evaluation; autobatch ends the
     * trial itself.  AUTOBATCH_MAX_STEPS is the most a trial may measure:
     * warm-up, the steps, and a noisy trial's extension (twice --steps),
     * so a trainer that stops itself there leaves room for the extension;
     * a steady trial is stopped by autobatch at warm-up + steps. */
    long step_limit = 100 + 10 * (plan.warmup + 3 * plan.steps);
    struct inject_ctx ctx = {
        .preset = &setup.preset, .set_checkpointing = plan.checkpointing_searched,
        .max_steps = plan.warmup + 3 * plan.steps, .step_limit = step_limit,
        .world_size = plan.world_size,
        .probe_dir = plan.no_probe ? NULL : probe_dir,
        .config_path = setup.have_config ? setup.config_path : NULL,
        .config = setup.have_config ? &setup.config : NULL,
        .accel_path = setup.accel_path, .accel = setup.have_accel ? &setup.accel : NULL,
    };
    /* A dry run of the first trial's set-up: a key the config lacks or a
     * config the command does not name fails now, before any trial. */
    {
        struct inject_trial t = INJECT_TRIAL_INIT;
        struct cell *c = &space.cells[0];
        struct inject_candidate c0 = {
            c->fixed_micro > 0 ? c->fixed_micro : plan.batch_min, c->grad_accum, c->checkpointing,
        };
        ctx.trial_id = 0;
        char wd0[4200];
        snprintf(wd0, sizeof wd0, "%s/dry-run", dir);
        ctx.workdir = setup.preset.config_fixed && !mkdir(wd0, 0700) ? wd0 : NULL;
        int bad = inject_build(&ctx, plan.command, environ, &c0, &t, err, sizeof err);
        inject_trial_release(&t);
        leftovers_remove_tree(wd0);
        ctx.workdir = NULL;
        if (bad) {
            cli_error("%s", err);
            leftovers_remove_tree(dir);
            space_release(&space);
            oom_table_release(&oom);
            setup_release(&setup);
            return AB_USAGE;
        }
    }

    if (plan.dry_run) {
        int bad = ab_dry_run(&ctx, &plan, &setup, &space, dir);
        leftovers_remove_tree(dir);
        space_release(&space);
        oom_table_release(&oom);
        setup_release(&setup);
        return bad ? AB_USAGE : AB_OK;
    }
    struct results res = RESULTS_INIT;
    if (results_init(&res, plan.command)) {
        cli_error("out of memory");
        return AB_USAGE;
    }
    res.preset = setup.preset.name;
    res.unit = setup.unit;
    res.config = setup.have_config ? setup.config_path : NULL;
    res.batch_min = plan.batch_min;
    res.batch_max = plan.batch_max;
    res.batch_step = plan.batch_step;
    res.world_size = plan.world_size;
    res.global_batch = plan.global_batch > 0 ? plan.global_batch : -1;
    res.headroom = plan.headroom;
    res.grad_accum = malloc(so.ngrad_accum * sizeof *res.grad_accum);
    if (res.grad_accum) {
        memcpy(res.grad_accum, so.grad_accum, so.ngrad_accum * sizeof *res.grad_accum);
        res.ngrad_accum = so.ngrad_accum;
    }
    res.ckpt_off = so.ckpt_off;
    res.ckpt_on = so.ckpt_on;

    /* ---- GPUs and the warm start */
    struct gpu gpu;
    gpu_open(&gpu, getenv("AUTOBATCH_NVML_LIB"));
    /* Side by side (--gpus), as Slurm job steps, on emulated memory:
     * everything checked before the first trial. */
    int slurm = plan.launcher ? !strcmp(plan.launcher, "slurm") : getenv("SLURM_JOB_ID") != NULL;
    if (slurm && !strcmp(basename(plan.command[0]), "srun"))
        slurm = 0; /* the command makes its own job step */
    struct tune_slot slots[SPACE_MAX_ROUND];
    char emulate_lib[PATH_MAX] = "";
    long nslots;
    {
        const char *bad = NULL;
        char why[512] = "";
        nslots = ab_slots(&plan, &gpu, slurm, slots, SPACE_MAX_ROUND, why, sizeof why);
        double real_cap = gpu_capacity(&gpu);
        int split = -1; /* several GPU models: one search per model, this binary again */
        if (nslots == -2)
            split = ab_per_model(argc, argv, &plan, &gpu);
        else if (nslots < 0)
            bad = why;
        else if (slurm && getenv("SLURM_JOB_ID") && !cli_in_path("srun"))
            bad = "--launcher slurm: srun is not in PATH; run inside a Slurm allocation or use "
                  "--launcher local";
        else if (slurm && !getenv("SLURM_JOB_ID") &&
                 (!cli_in_path("sbatch") || !cli_in_path("scontrol") || !cli_in_path("scancel")))
            bad = "--launcher slurm: sbatch, scontrol and scancel must be in PATH to submit "
                  "trials from here; run on a login node or use --launcher local";
        else if (nslots > 1 && plan.replay)
            bad = "--replay runs its recordings one at a time; drop --gpus or --replay";
        else if (plan.emulate_bytes && gpu.n <= 0)
            snprintf(why, sizeof why, "--emulate-gpu-memory needs a GPU seen through NVML (%s)",
                     gpu.why), bad = why;
        else if (plan.emulate_bytes && (double)plan.emulate_bytes >= real_cap)
            snprintf(why, sizeof why, "--emulate-gpu-memory: %.1f GiB is not smaller than the "
                     "GPU's %.1f GiB; give a smaller size", (double)plan.emulate_bytes / (1 << 30),
                     real_cap / (1 << 30)), bad = why;
        else if (plan.emulate_bytes && !strcmp(plan.emulate_with, "probe") && plan.no_probe)
            bad = "--emulate-with probe works through the in-process probe; drop --no-probe";
        else if (plan.emulate_bytes && !strcmp(plan.emulate_with, "preload") &&
                 ab_emulate_lib(emulate_lib, sizeof emulate_lib))
            bad = "--emulate-gpu-memory: libautobatch-gpuemu.so is not next to autobatch; set "
                  "AUTOBATCH_GPUEMU_LIB to it, or use --emulate-with probe";
        if (bad || split >= 0) {
            if (bad)
                cli_error("%s", bad);
            gpu_release(&gpu);
            leftovers_remove_tree(dir);
            space_release(&space);
            results_release(&res);
            oom_table_release(&oom);
            setup_release(&setup);
            return bad ? AB_USAGE : split;
        }
        if (plan.emulate_bytes) {
            res.emulated = plan.emulate_bytes;
            res.emulated_with = plan.emulate_with;
            res.emulated_real_total = (long long)real_cap;
            gpu_emulate(&gpu, plan.emulate_bytes);
        }
        res.launcher = !slurm ? "local" : getenv("SLURM_JOB_ID") ? "slurm" : "slurm-array";
        res.slots = nslots > 1 ? nslots : 1;
        so.shared_speeds = nslots > 1;
        space.o.shared_speeds = nslots > 1;
    }
    if (gpu.n) {
        res.gpus = calloc((size_t)gpu.n, sizeof *res.gpus);
        for (int i = 0; res.gpus && i < gpu.n; i++) {
            const char *name;
            uint64_t total;
            gpu_info(&gpu, i, &name, &total);
            res.gpus[i].index = i;
            snprintf(res.gpus[i].name, sizeof res.gpus[i].name, "%s", name);
            res.gpus[i].total = (long long)total;
        }
        res.ngpus = res.gpus ? (size_t)gpu.n : 0;
    } else if (plan.verbose) {
        progress_note(&pg, "no GPU memory figures: %s", gpu.why);
    }
    /* No GPU to read (no NVML): report lines may still carry figures, but
     * a cheap first fit at MIN for the model is not worth a trial;
     * bisection opens in the middle. */
    for (size_t i = 0; i < space.ncells; i++)
        space.cells[i].search.open_mid = gpu_capacity(&gpu) <= 0;
    struct cache_key ck;
    cache_key_make(&ck, plan.command, setup.have_config ? &setup.config : NULL, &so,
                   gpu.fingerprint);
    int cached = !plan.no_cache && cache_load(&ck, &space) > 0;
    res.warm_start = cached;
    if (cached)
        progress_note(&pg, "warm start: confirming the boundaries cached from the last run "
                           "(--no-cache to search afresh)");

    /* ---- the replay probe (--replay): what capacity it predicts for */
    struct guide guide = { NULL, 0, 0, NULL, plan.keep_traces };
    int replay_cpu = plan.replay && plan.trial_mem_limit > 0;
    {
        double gcap = plan.replay ? gpu_capacity(&gpu) : -1;
        const char *bad = NULL;
        if (plan.keep_traces && !plan.replay)
            bad = "--keep-traces keeps --replay's traces; add --replay";
        else if (plan.replay && plan.no_probe)
            bad = "--replay records through the in-process probe; drop --no-probe";
        else if (plan.replay && !plan.trial_mem_limit && gcap <= 0)
            bad = "--replay needs a capacity to predict for: a GPU seen through NVML, or "
                  "--trial-memory-limit SIZE on CPU";
        else if (plan.keep_traces && !ab_writable_dir(plan.keep_traces))
            bad = "--keep-traces: not a writable directory; make it first (mkdir -p DIR)";
        else if (plan.replay &&
                 guide_init(&guide, &space, replay_cpu ? (int64_t)plan.trial_mem_limit : (int64_t)gcap,
                            replay_cpu ? "trial-memory-limit" : "gpu"))
            bad = "out of memory";
        if (bad) {
            cli_error("%s", bad);
            guide_release(&guide);
            leftovers_remove_tree(dir);
            space_release(&space);
            results_release(&res);
            oom_table_release(&oom);
            setup_release(&setup);
            return AB_USAGE;
        }
    }

    /* ---- the trials */
    if (events_on()) {
        json_t *cmd = json_array();
        for (size_t i = 0; plan.command[i]; i++)
            json_array_append_new(cmd, json_string(plan.command[i]));
        events_emit("start", json_pack("{s:o, s:{s:I, s:I, s:I}, s:s, s:I}", "command", cmd,
                                       "batch", "min", (json_int_t)plan.batch_min, "max",
                                       (json_int_t)plan.batch_max, "step",
                                       (json_int_t)plan.batch_step, "launcher", res.launcher,
                                       "slots", (json_int_t)res.slots));
    }
    struct tune_run run = {
        .plan = &plan, .setup = &setup, .ctx = &ctx, .space = &space, .res = &res, .gpu = &gpu,
        .guide = &guide, .pg = &pg, .oom = &oom, .log_rules = &log_rules, .dir = dir,
        .replay_cpu = replay_cpu, .t0 = mono_now(), .interrupt = &ab_interrupted,
        .status = AB_OK,
        .slots = nslots > 0 ? slots : NULL, .nslots = nslots > 0 ? (size_t)nslots : 0,
        .slurm = slurm, .slurm_array = slurm && !getenv("SLURM_JOB_ID"),
        .emulate_lib = emulate_lib[0] ? emulate_lib : NULL,
    };
    if (run.slurm_array) {
        ssize_t n = readlink("/proc/self/exe", run.self, sizeof run.self - 1);
        run.self[n > 0 ? n : 0] = '\0';
    }
    if (tune_loop(&run))
        return AB_USAGE;
    int status = run.status, budget_hit = run.budget_hit, crashed = run.crashed;
    int timeouts = run.timeouts, no_steps = run.no_steps;
    double t0 = run.t0;
    if (plan.replay) {
        res.replay = guide_json(&guide, &space);
        guide_release(&guide);
    }

    /* ---- the answer */
    size_t ncontra = res.ncontra;
    choose_collect_cells(&space, &res);
    for (size_t i = ncontra; i < res.ncontra; i++) {
        const struct results_contradiction *x = &res.contra[i];
        progress_note(&pg, "warning: micro_batch=%ld failed although %ld fitted; re-tested: %s",
                      x->micro_batch, x->larger_fit,
                      x->retest_fit ? "fits (the first failure was a fluke)"
                                    : "fails again (memory use is not monotone here)");
    }
    struct choose_notes notes;
    res.best = choose_best(&res, &space, choose_capacity(&gpu, &space), plan.headroom, &notes);
    if (notes.headroom_unchecked)
        progress_note(&pg, "warning: --headroom could not be checked for every candidate: no "
                           "memory figures (no NVML, no peak_mem_bytes in AUTOBATCH_REPORT, no "
                           "numbers in the OOM messages)");
    if (events_on())
        events_emit("choice", json_pack("{s:o, s:o}", "best",
                    res.best >= 0 ? results_trial_json(&res.trials[res.best]) : json_null(),
                    "runner_up", res.runner_up >= 0 ? results_trial_json(&res.trials[res.runner_up])
                                                    : json_null()));
    int any_fit = 0;
    for (size_t i = 0; i < res.ntrials; i++)
        any_fit |= res.trials[i].outcome == TRIAL_FIT;

    if (status == AB_OK) {
        if (ab_interrupted)
            status = AB_INTERRUPTED;
        else if (crashed || no_steps)
            status = AB_CRASH;
        else if (!any_fit && budget_hit)
            status = AB_BUDGET;
        else if (!any_fit)
            status = timeouts ? AB_CRASH : AB_NOTHING_FITS;
        else if (res.best < 0)
            status = AB_NOTHING_FITS; /* fits exist, but none leaves the headroom */
    }
    res.wall_s = mono_now() - t0;
    res.exit_status = status;
    res.interrupted = status == AB_INTERRUPTED;
    if (status == AB_OK && !plan.no_cache)
        cache_save(&ck, &space, res.best >= 0 ? res.trials[res.best].grad_accum : 0,
                   res.best >= 0 ? res.trials[res.best].checkpointing : 0,
                   res.best >= 0 ? res.trials[res.best].micro_batch : -1);

    FILE *say = plan.json_path && !strcmp(plan.json_path, "-") ? stderr : stdout;
    int bounded = 0;
    for (size_t i = 0; i < res.ncells; i++)
        bounded |= res.cells[i].bounded_by && !strcmp(res.cells[i].bounded_by, "batch.max");
    if (res.best >= 0) {
        const struct results_trial *b = &res.trials[res.best];
        char rate[64] = "";
        if (b->samples_per_s > 0)
            snprintf(rate, sizeof rate, ", %.1f %s/s", results_speed(&res, b), setup.unit);
        fprintf(say, "autobatch: %s micro_batch=%ld grad_accum=%ld checkpointing=%s%s "
                     "(%zu trials, %.1fs)%s\n",
                status == AB_OK ? "best:" : "best so far:", b->micro_batch, b->grad_accum,
                b->checkpointing ? "on" : "off", rate, res.ntrials, res.wall_s,
                bounded ? "; the top of --batch fitted, raise MAX to look further" : "");
        ab_say_runner_up(say, &res, setup.unit);
        ab_say_headroom(say, &res, &space, &gpu, plan.headroom, setup.unit);
        ab_say_effective_batch(say, &plan, &setup, b);
        if (budget_hit)
            fprintf(say, "autobatch: --budget ran out; the search was not finished\n");
    } else if (status == AB_NOTHING_FITS && any_fit) {
        fprintf(stderr, "autobatch: every configuration that fits uses more than %.0f%% of "
                        "device memory; lower --headroom\n", 100 * (1 - plan.headroom));
        ab_say_headroom(stderr, &res, &space, &gpu, plan.headroom, setup.unit);
    } else if (status == AB_NOTHING_FITS) {
        fprintf(stderr, "autobatch: nothing fits: the smallest candidate ran out of memory; lower "
                        "the model's memory use or try --checkpointing on\n");
    } else if (status == AB_CRASH && no_steps) {
        /* said when it happened */
    } else if (status == AB_CRASH && !crashed) {
        fprintf(stderr, "autobatch: micro_batch=%ld never finished a trial (timeout or hang), so "
                        "this is not a memory limit; raise --trial-timeout/--hang-timeout or "
                        "check the command\n", plan.batch_min);
    } else if (status == AB_BUDGET) {
        fprintf(stderr, "autobatch: --budget ran out before any candidate fitted; raise it\n");
    } else if (status == AB_INTERRUPTED) {
        fprintf(stderr, "autobatch: interrupted; every trial process is gone\n");
    }
    if (res.best >= 0 && status == AB_OK) {
        const struct results_trial *b = &res.trials[res.best];
        struct inject_candidate best = { b->micro_batch, b->grad_accum, b->checkpointing };
        struct writeback_out wo = { ab_writeback_line, say };
        if (writeback_choice(&plan, &setup, &ctx, &best, &res, &wo))
            status = res.exit_status = AB_USAGE;
    }
    fflush(say);

    /* The results document, then everything rendered from it: the file,
     * the reports, the baseline gate, the step summary, the webhook. */
    json_t *doc = results_to_json(&res);
    if (!doc) {
        cli_error("cannot render the results: out of memory");
        status = status == AB_OK ? AB_USAGE : status;
    } else {
        status = subcmd_outputs_write(&plan, doc, baseline, status, &ab_interrupted);
    }
    json_decref(doc);
    json_decref(baseline);
    events_emit("end", json_pack("{s:i, s:I, s:f}", "exit", status, "trials",
                                 (json_int_t)res.ntrials, "wall_s", res.wall_s));
    events_close();
    leftovers_remove_tree(dir);
    space_release(&space);
    results_release(&res);
    oom_table_release(&oom);
    gpu_release(&gpu);
    setup_release(&setup);
    return status;
}
