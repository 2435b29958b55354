/* SPDX-License-Identifier: MIT */
/*
 * main: the controller.  Parse the plan, check everything that can be
 * checked before the first trial, then loop: ask the search for a
 * candidate, run it as a supervised trial, record the outcome, until the
 * search is done, the budget is spent, the command crashes, or we are
 * interrupted.  Then write the results and say what was found.
 *
 * Exit statuses are those of DESIGN.md 2.4 (enum ab_exit below).
 */
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/afile.h"
#include "search/cache.h"
#include "cli/cli.h"
#include "control/choose.h"
#include "control/setup.h"
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
#include "search/search.h"
#include "trial/slurm.h"
#include "search/space.h"
#include "util/strvec.h"
#include "cli/subcmd.h"
#include "trainlog.h"
#include "trial/trial.h"

extern char **environ;

enum ab_exit {
    AB_OK = 0,
    AB_USAGE = 2,      /* also: --write refused because the config was changed during the
                          run in a value the choice sets (nothing was written) */
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

static double ab_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The tail of a crashed command's output, so the user sees the real error. */
static void ab_show_crash(struct progress *pg, const struct trial_result *r)
{
    progress_note(pg, "the command failed for a reason other than memory (%s%d); "
                      "its last lines:",
                  r->signal ? "signal " : "exit code ", r->signal ? r->signal : r->exit_code);
    for (int i = 0; i < r->tail_count; i++)
        fprintf(stderr, "  | %s\n", r->tail[i]);
    fputs("autobatch: fix the command so that it runs at the smallest batch, then try again\n",
          stderr);
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

/* Steps a recording trial runs: the probe records after the second
 * optimizer step, for three steps (the first of them is dropped), and
 * writes its trace in the hook of the fifth; one more step ends it. */
#define AB_RECORD_STEPS 6

/*
 * The environment of a --replay trial.  Every trial reports its VmPeak.
 * On CPU under --trial-memory-limit, glibc's malloc gets a fixed mmap
 * threshold and one arena, so that a freed large block leaves the address
 * space at once, as freed memory returns to a GPU's caching allocator:
 * the address space then follows the live bytes the replay model
 * predicts (measured: within 0.1% at 8 to 32 times the recorded sizes).
 * A user's own MALLOC_* settings are kept.  A recording trial gets the
 * trace directory.  Returns 0, or -1 (ENOMEM).
 */
static int ab_replay_env(struct strvec *env, int cpu, const char *record_dir)
{
    int rc = strvec_pushf(env, "AUTOBATCH_VMPEAK=1");
    if (cpu && !getenv("MALLOC_MMAP_THRESHOLD_"))
        rc |= strvec_pushf(env, "MALLOC_MMAP_THRESHOLD_=65536");
    if (cpu && !getenv("MALLOC_ARENA_MAX"))
        rc |= strvec_pushf(env, "MALLOC_ARENA_MAX=1");
    if (record_dir)
        rc |= strvec_pushf(env, "AUTOBATCH_RECORD=%s", record_dir) |
              strvec_pushf(env, "AUTOBATCH_RECORD_AFTER=2");
    return rc ? -1 : 0;
}

/* An empty regular file of ours that the trial appends to, 0600. */
static int ab_make_channel(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* Is the command a Python program (so the probe should have loaded)? */
static int ab_looks_python(char *const *cmd)
{
    static const char *const launchers[] = { "accelerate", "torchrun", "deepspeed", NULL };
    const char *b = strrchr(cmd[0], '/');
    b = b ? b + 1 : cmd[0];
    if (!strncmp(b, "python", 6))
        return 1;
    for (size_t i = 0; launchers[i]; i++)
        if (!strcmp(b, launchers[i]))
            return 1;
    size_t n = strlen(cmd[0]);
    return n > 3 && !strcmp(cmd[0] + n - 3, ".py");
}

/* A trial exited 0 without a training step: say what was seen and what to do. */
static void ab_explain_no_steps(const struct trial_result *r, long value, const struct preset *p,
                                int probe_on)
{
    fprintf(stderr, "autobatch: micro_batch=%ld: the command exited 0 after %.1fs without a "
                    "training step that autobatch could see, so it says nothing about memory\n",
            value, r->wall_s);
    if (r->probe_processes > 0)
        fprintf(stderr, "autobatch: the in-process probe saw torch %s load in %d process(es) "
                        "but no optimizer step: the trainer stopped before training, or resumed "
                        "from a finished checkpoint and had nothing left to do%s\n",
                r->probe_torch, r->probe_processes,
                p->knobs[KNOB_OUTPUT_DIR].via == VIA_NONE
                    ? " (preset has no output_dir knob, so the trainer used its own output "
                      "directory; add one with --knob output_dir=WHERE)"
                    : "; check its resume settings");
    else
        fprintf(stderr, "autobatch: no optimizer step from the in-process probe (%s), no "
                        "$AUTOBATCH_REPORT line, and no training progress in the output%s%s\n",
                probe_on ? "not a PyTorch program, or the probe could not load" : "--no-probe",
                r->log_seen[0] ? ": " : "", r->log_seen);
    fputs("autobatch: make sure the command trains for at least a few steps; a trainer that "
          "prints no progress can append {\"step\": N} lines to $AUTOBATCH_REPORT, or a preset "
          "can name its progress line (progress.line)\n", stderr);
}

/* The probe saw the trainer's DataLoader use another batch size. */
static void ab_explain_mismatch(const struct trial_result *r, long value, const struct preset *p)
{
    const struct preset_knob *k = &p->knobs[KNOB_MICRO_BATCH];
    static const char *const via[] = { "nothing", "flag", "Hydra override", "config key",
                                       "accelerate config key", "environment variable" };
    cli_error("the trainer's DataLoader uses batch_size=%ld where autobatch passed micro_batch=%ld "
              "(preset '%s', %s '%s'): that knob does not reach the trainer; say where it reads "
              "its batch size with --knob micro_batch=WHERE or pick another --preset",
              r->loader_batch, value, p->name, via[k->via], k->where ? k->where : "");
}

/* Each tick of a trial: sample the GPU, move queued output along, keep
 * the live status's clock moving. */
static void ab_tick(void *ctx)
{
    gpu_tick(ctx);
    outq_pump();
    progress_tick();
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

/* One group of GPUs a trial runs on (--gpus). */
struct ab_slot {
    char devices[128];        /* CUDA_VISIBLE_DEVICES: UUIDs, or indices */
    unsigned long long mask;  /* NVML indices, for sampling */
};

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
                     struct ab_slot *slots, size_t max, char *err, size_t errlen)
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

/* ---- one trial, and trials side by side (--gpus) */

/* Everything a trial needs from the controller, and what trials change. */
struct ab_run {
    const struct plan *plan;
    struct setup *setup;
    struct inject_ctx *ctx;
    struct space *space;
    struct results *res;
    struct gpu *gpu;
    struct guide *guide;
    struct progress *pg;
    const struct oom_table *oom;
    const struct trainlog_rules *log_rules;
    const char *dir;
    int replay_cpu;
    double t0;
    long id;
    int status, budget_hit, crashed, timeouts, no_steps;
    int noted_world, noted_probe, noted_probe_error;
    const struct ab_slot *slots; /* NULL: no --gpus */
    size_t nslots;
    int slurm;                   /* trials are Slurm job steps (or array tasks) */
    int slurm_array;             /* ... array tasks, submitted from a login node */
    char self[PATH_MAX];         /* this binary, for the array tasks' followers */
    const char *emulate_lib;     /* --emulate-gpu-memory's preload library, or NULL */
};

/* One trial: its candidate, files, command and, once run, its result. */
struct ab_job {
    long id;
    size_t ci;
    long value;
    int recording, budget_caps;
    long round;                  /* 0: not side by side */
    const struct ab_slot *slot;  /* NULL: the whole machine */
    char tdir[4200], report[4300], probe[4300], outdir[4300], wd[4300], recdir[4300];
    struct inject_trial t;
    struct trial_opts to;
    struct trial_result tr;
    int64_t peak;
    /* side by side: the worker process running it */
    pid_t worker;
    int fd;
    size_t got;
    int run_rc, run_errno, cancelled, done, in_worker;
    char slurm_job[64];          /* the array task ("ID_i"), or "" */
};

/* Set NAME=value in a trial's environment, replacing an earlier NAME. */
static int ab_env_set(struct strvec *env, const char *name, const char *value)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < env->n; i++)
        if (!strncmp(env->v[i], name, len) && env->v[i][len] == '=')
            return strvec_replacef(env, i, "%s=%s", name, value);
    return strvec_pushf(env, "%s=%s", name, value);
}

/* The trial's devices, the emulated memory and the Slurm job step. */
static int ab_job_env(const struct ab_run *r, struct ab_job *j)
{
    const struct plan *plan = r->plan;
    struct strvec *env = &j->t.env;
    int rc = 0;
    if (j->slot) {
        char n[32];
        snprintf(n, sizeof n, "%ld", (long)(j->slot - r->slots));
        rc |= ab_env_set(env, "AUTOBATCH_SLOT", n);
    }
    if (j->slot && !r->slurm) {
        rc |= ab_env_set(env, "CUDA_VISIBLE_DEVICES", j->slot->devices);
        rc |= ab_env_set(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    if (plan->emulate_bytes) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)plan->emulate_bytes);
        rc |= ab_env_set(env, "AUTOBATCH_EMULATE_GPU_MEMORY", n);
        if (r->emulate_lib) {
            rc |= inject_env_prepend(env, "LD_PRELOAD", r->emulate_lib);
        } else {
            rc |= ab_env_set(env, "AUTOBATCH_EMULATE_METHOD", "probe");
        }
    }
    if (r->slurm && !r->slurm_array) {
        /* A job step of the allocation: its own GPUs, output as it comes,
         * a time limit past ours (autobatch ends it first), and a name
         * to cancel it by should srun itself not end it. */
        char name[64], gres[32], limit[32];
        snprintf(name, sizeof name, "--job-name=autobatch-%ld-%ld", (long)getpid(), j->id);
        snprintf(gres, sizeof gres, "--gres=gpu:%ld", plan->gpus_per_trial);
        snprintf(limit, sizeof limit, "--time=%ld",
                 plan->trial_timeout_s > 0 ? (long)(plan->trial_timeout_s / 60) + 2 : 0L);
        /* --mem=0: the job's memory shared, or the first step takes it
         * all and the others wait (tests/slurm/README.md). */
        const char *pre[] = { "srun", "--exact", "--ntasks=1", "--mem=0", "--unbuffered",
                              "--kill-on-bad-exit=1", name, limit };
        size_t k = 0;
        for (; k < sizeof pre / sizeof *pre; k++)
            rc |= strvec_insert(&j->t.argv, k, pre[k]);
        if (j->slot || plan->gpus[0])
            rc |= strvec_insert(&j->t.argv, k++, gres);
        rc |= strvec_insert(&j->t.argv, k, "--");
    }
    return rc ? -1 : 0;
}

/*
 * Build trial j for (ci, value): its directory, its command and
 * environment, its options.  Returns 0; 1 when the budget is spent (no
 * trial); -1 after saying why (r->status is set).
 */
static int ab_job_prepare(struct ab_run *r, struct ab_job *j, size_t ci, long value,
                          const struct ab_slot *slot, long round)
{
    const struct plan *plan = r->plan;
    struct setup *setup = r->setup;
    const struct cell *cell = &r->space->cells[ci];
    j->recording = plan->replay && guide_next(r->guide, r->space, ci, &value);
    double left = plan->budget_s > 0 ? plan->budget_s - (ab_now() - r->t0) : 0;
    if (plan->budget_s > 0 && left <= 0) {
        r->budget_hit = 1;
        return 1;
    }
    j->id = ++r->id;
    j->ci = ci;
    j->value = value;
    j->slot = slot;
    j->round = round;
    j->worker = -1;
    j->fd = -1;
    /* Everything of one trial lives in one directory that goes when the
     * trial does: its report and probe files, its scratch output
     * directory, its working directory. */
    snprintf(j->tdir, sizeof j->tdir, "%s/trial-%ld", r->dir, j->id);
    snprintf(j->report, sizeof j->report, "%s/report.jsonl", j->tdir);
    snprintf(j->probe, sizeof j->probe, "%s/probe.jsonl", j->tdir);
    snprintf(j->outdir, sizeof j->outdir, "%s/out", j->tdir);
    snprintf(j->wd, sizeof j->wd, "%s/wd", j->tdir);
    snprintf(j->recdir, sizeof j->recdir, "%s/trace", j->tdir);
    int want_out = setup->preset.knobs[KNOB_OUTPUT_DIR].via != VIA_NONE;
    if (mkdir(j->tdir, 0700) || (want_out && mkdir(j->outdir, 0700)) ||
        (setup->preset.config_fixed && mkdir(j->wd, 0700)) ||
        (j->recording && mkdir(j->recdir, 0700)) || ab_make_channel(j->report) ||
        (!plan->no_probe && ab_make_channel(j->probe))) {
        cli_error("cannot prepare trial %ld in '%s': %s", j->id, j->tdir, strerror(errno));
        leftovers_remove_tree(j->tdir);
        r->status = AB_USAGE;
        return -1;
    }
    struct inject_ctx *ctx = r->ctx;
    ctx->trial_id = j->id;
    ctx->report_path = j->report;
    ctx->probe_path = plan->no_probe ? NULL : j->probe;
    ctx->output_dir = want_out ? j->outdir : NULL;
    ctx->workdir = setup->preset.config_fixed ? j->wd : NULL;
    struct inject_candidate cand = { value, cell->grad_accum, cell->checkpointing };
    char err[512];
    struct inject_trial t0 = INJECT_TRIAL_INIT;
    j->t = t0;
    if (inject_build(ctx, plan->command, environ, &cand, &j->t, err, sizeof err)) {
        cli_error("%s", err);
        leftovers_remove_tree(j->tdir);
        r->status = AB_USAGE;
        return -1;
    }
    if ((plan->replay && ab_replay_env(&j->t.env, r->replay_cpu, j->recording ? j->recdir : NULL)) ||
        ab_job_env(r, j)) {
        cli_error("out of memory");
        inject_trial_release(&j->t);
        leftovers_remove_tree(j->tdir);
        r->status = AB_USAGE;
        return -1;
    }
    /* The budget caps the trial too; a trial cut by the budget says
     * nothing about memory and is not recorded in the search. */
    double ttl = plan->trial_timeout_s;
    j->budget_caps = plan->budget_s > 0 && (ttl <= 0 || left < ttl);
    if (j->budget_caps)
        ttl = left;
    struct trial_opts to = {
        .oom = r->oom, .target_steps = plan->warmup + plan->steps,
        .warmup_steps = plan->warmup, .extra_steps = 2 * plan->steps, .noise_rel = 0.10,
        .trial_timeout_s = ttl, .hang_timeout_s = plan->hang_timeout_s, .grace_s = plan->grace_s,
        .mem_limit = plan->trial_mem_limit,
        .report_path = j->report, .probe_path = ctx->probe_path,
        .expect_batch = !strcmp(setup->unit, "samples") ? value : 0,
        .log_rules = r->log_rules, .interrupt = &ab_interrupted,
        .hooks = { r->pg, progress_output, progress_step, r->gpu, ab_tick },
    };
    /* A recording trial runs until the probe has written its trace: two
     * steps before the recording, three recorded, one more. */
    if (j->recording && to.target_steps < AB_RECORD_STEPS)
        to.target_steps = AB_RECORD_STEPS;
    j->to = to;
    return 0;
}

/*
 * What trial j showed: into the results, the search and the replay
 * guide; notes and explanations for the user.  shared: it ran beside
 * other trials, so its speed is not kept.  Returns 0 to go on, 1 to stop
 * the search (budget, interrupt, crash, bad input: r->status and the
 * flags say which).
 */
static int ab_job_finish(struct ab_run *r, struct ab_job *j, int shared)
{
    const struct plan *plan = r->plan;
    struct setup *setup = r->setup;
    struct space *space = r->space;
    struct progress *pg = r->pg;
    struct trial_result *tr = &j->tr;
    const struct cell *cell = &space->cells[j->ci];
    long value = j->value;
    /* The trial's tree is gone: its temporary config copies go too (a
     * recording trial's directory stays until its trace is read). */
    inject_trial_release(&j->t);
    if (!j->recording)
        leftovers_remove_tree(j->tdir);
    if (j->run_rc) {
        cli_error("cannot start a trial: %s", strerror(j->run_errno));
        r->status = AB_USAGE;
        return 1;
    }
    if (tr->outcome == TRIAL_SPAWN_FAILED) {
        cli_error("cannot run '%s': %s; check the command", plan->command[0],
                  strerror(tr->spawn_errno));
        r->status = AB_USAGE;
        return 1;
    }
    int64_t peak = j->peak;
    /* Samples per step: the world size the trainer really runs with when
     * the probe saw it; a step printed per micro-batch (the preset says
     * so) carries no accumulation. */
    long world = tr->probe_world > 0 ? tr->probe_world : plan->world_size;
    int per_micro = tr->steps_from == STEPS_FROM_LOG &&
                    setup->preset.progress.step == STEP_IS_MICRO_BATCH;
    double samples = (double)value * (double)(per_micro ? 1 : cell->grad_accum) * (double)world;
    if (tr->probe_world > 0 && tr->probe_world != plan->world_size && !r->noted_world) {
        r->noted_world = 1;
        progress_note(pg, "the trainer runs with world size %ld, not --world-size %ld: "
                          "samples/s counts %ld ranks; pass --world-size %ld so that "
                          "--global-batch is kept right", tr->probe_world, plan->world_size,
                      tr->probe_world, tr->probe_world);
    }
    if (!plan->no_probe && !tr->probe_processes && !r->noted_probe &&
        ab_looks_python(plan->command)) {
        r->noted_probe = 1;
        progress_note(pg, "the in-process probe did not load in this Python trial (no "
                          "torch, PYTHONPATH reset, or python -S/-I); steps come from %s",
                      tr->steps_from == STEPS_FROM_REPORT ? "$AUTOBATCH_REPORT" : "the output");
    }
    if (tr->tail_note[0])
        progress_note(pg, "warning: %s", tr->tail_note);
    if (tr->probe_error[0] && !r->noted_probe_error) {
        r->noted_probe_error = 1;
        progress_note(pg, "the in-process probe could not see everything: %s", tr->probe_error);
    }
    double sps = tr->step_time_s > 0 && !shared ? samples / tr->step_time_s : -1;
    if (j->in_worker) /* its start was not shown: say it with its end */
        progress_trial_start(pg, j->id, value, cell->grad_accum, cell->checkpointing,
                             j->to.target_steps, NULL);
    progress_trial_end(pg, tr, tr->outcome == TRIAL_FIT ? sps : -1);
    if (tr->outcome == TRIAL_TIMEOUT && j->budget_caps) {
        r->budget_hit = 1;
        tr->outcome = TRIAL_INTERRUPTED;
    }
    struct results_trial rt = {
        .id = j->id, .micro_batch = value, .grad_accum = cell->grad_accum,
        .checkpointing = cell->checkpointing,
        .outcome = tr->outcome, .exit_code = tr->exit_code, .signal = tr->signal,
        .wall_s = tr->wall_s, .teardown_s = tr->teardown_s > 0 ? tr->teardown_s : -1,
        .steps_measured = tr->steps_measured, .step_time_s = tr->step_time_s,
        .step_time_mad_s = tr->step_time_mad_s,
        .samples_per_s = tr->outcome == TRIAL_FIT ? sps : -1,
        .peak_mem_bytes = peak,
        .evidence = tr->outcome == TRIAL_FIT || !tr->evidence[0] ? NULL : tr->evidence,
        .signature = tr->outcome == TRIAL_OOM ? (char *)tr->oom_name : NULL,
        .retest = space->from_request || search_tried(&cell->search, value),
        .steps_from = trial_steps_from_name(tr->steps_from),
        .probe_processes = tr->probe_processes, .probe_world = tr->probe_world,
        .loader_batch = tr->loader_batch, .batches_per_step = tr->loader_batches_per_step,
        .peak_allocated_bytes = tr->peak_allocated_bytes,
        .peak_vm_bytes = tr->peak_vm_bytes, .recorded = j->recording,
        .round = j->round, .shared = shared,
    };
    if (j->slot)
        snprintf(rt.devices, sizeof rt.devices, "%s", j->slot->devices);
    if (!r->res->teardown)
        r->res->teardown = trial_isolated_name(tr->isolation);
    snprintf(rt.probe_torch, sizeof rt.probe_torch, "%s", tr->probe_torch);
    snprintf(rt.probe_hook, sizeof rt.probe_hook, "%s", tr->probe_hook);
    results_add_trial(r->res, &rt);
    if (events_on())
        events_emit("trial_end", results_trial_json(&rt));
    if (tr->teardown_incomplete)
        progress_note(pg, "warning: a process outside the trial's tree kept its output "
                          "open; gave up waiting for it");

    if (r->budget_hit || tr->outcome == TRIAL_INTERRUPTED)
        return 1;
    if (tr->outcome == TRIAL_CRASH) {
        ab_show_crash(pg, tr);
        r->crashed = 1;
        return 1;
    }
    if (tr->outcome == TRIAL_NO_STEPS) {
        ab_explain_no_steps(tr, value, &setup->preset, !plan->no_probe);
        r->no_steps = 1;
        return 1;
    }
    if (tr->outcome == TRIAL_MISMATCH) {
        ab_explain_mismatch(tr, value, &setup->preset);
        r->status = AB_USAGE;
        return 1;
    }
    if (tr->outcome == TRIAL_TIMEOUT || tr->outcome == TRIAL_HANG) {
        /* No memory evidence, but the size does not work as it is: treat
         * it as an upper bound and say so. */
        r->timeouts++;
        progress_note(pg, "micro_batch=%ld %s; counted as not fitting (raise --%s if it "
                          "was only slow)", value,
                      tr->outcome == TRIAL_TIMEOUT ? "ran past --trial-timeout"
                                                   : "printed nothing for --hang-timeout",
                      tr->outcome == TRIAL_TIMEOUT ? "trial-timeout" : "hang-timeout");
    }
    double cap = gpu_capacity(r->gpu);
    struct search_obs obs = {
        .value = value, .fit = tr->outcome == TRIAL_FIT, .need_bytes = -1,
        .capacity_bytes = cap, .speed = tr->outcome == TRIAL_FIT ? sps : -1,
        .spread = results_spread(&rt) > 0 ? results_spread(&rt) : 0,
    };
    if (obs.fit && peak > 0)
        obs.need_bytes = (double)peak;
    /* The line's intercept, in the units of the peak: the peak less the
     * step's own rise above what it started from (the probe's reserved
     * peak less what was allocated at the step's end). */
    if (obs.fit && peak > 0 && tr->held_bytes > 0 && tr->peak_mem_bytes > tr->held_bytes &&
        peak > tr->peak_mem_bytes - tr->held_bytes)
        obs.base_bytes = (double)(peak - (tr->peak_mem_bytes - tr->held_bytes));
    const struct oom_numbers *on = &tr->oom_numbers;
    if (!obs.fit && on->tried > 0 && on->total > 0 && on->free >= 0) {
        obs.need_bytes = (double)(on->total - on->free + on->tried);
        /* Emulated by the probe, PyTorch still prints the real total. */
        obs.capacity_bytes = cap > 0 && cap < (double)on->total ? cap : (double)on->total;
    }
    /* Recording costs memory of its own (the profiler's events, the
     * trace): a recording trial that did not fit says nothing about the
     * size without it, which the search then tries as usual.  A fit is
     * evidence either way. */
    if (!(j->recording && !obs.fit))
        space_record(space, j->ci, &obs);
    if (plan->replay) {
        char note[1024];
        guide_record(r->guide, space, j->ci, value, j->recording, obs.fit,
                     r->replay_cpu ? tr->peak_vm_bytes : peak, j->recdir, note, sizeof note);
        if (note[0])
            progress_note(pg, "%s", note);
    }
    if (j->recording)
        leftovers_remove_tree(j->tdir);
    return 0;
}

/* From a login node: jobs[0..n) go out as one job array, and each
 * trial's command becomes the follower of its task (slurm.h).  Their
 * shared files live in round-ID, which ab_slurm_done() removes. */
static int ab_slurm_submit(struct ab_run *r, struct ab_job *jobs, size_t n)
{
    if (!r->slurm_array)
        return 0;
    struct slurm_task tasks[SPACE_MAX_ROUND];
    char rounddir[4200], name[64], gres[32], err[512];
    snprintf(rounddir, sizeof rounddir, "%s/round-%ld", r->dir, jobs[0].id);
    snprintf(name, sizeof name, "autobatch-%ld", (long)getpid());
    snprintf(gres, sizeof gres, "gpu:%ld", r->plan->gpus_per_trial);
    if (mkdir(rounddir, 0700)) {
        cli_error("cannot make '%s': %s", rounddir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        tasks[i] = (struct slurm_task){ &jobs[i].t.argv, jobs[i].t.env.v, jobs[i].t.cwd,
                                        jobs[i].tdir };
    long minutes = r->plan->trial_timeout_s > 0 ? (long)(r->plan->trial_timeout_s / 60) + 2 : 0;
    if (slurm_array_submit(tasks, n, rounddir, name, r->plan->gpus[0] ? gres : NULL, minutes,
                           r->self, err, sizeof err)) {
        cli_error("--launcher slurm: %s", err);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(jobs[i].slurm_job, sizeof jobs[i].slurm_job, "%s", jobs[i].t.argv.v[2]);
    return 0;
}

/* The round's shared files (ab_slurm_submit) go once its tasks ended. */
static void ab_slurm_done(const struct ab_run *r, const struct ab_job *jobs)
{
    char rounddir[4200];
    if (!r->slurm_array)
        return;
    snprintf(rounddir, sizeof rounddir, "%s/round-%ld", r->dir, jobs[0].id);
    leftovers_remove_tree(rounddir);
}

/* After a trial on Slurm: nothing of it may run on.  A job step still
 * listed under its name, or an array task whose follower was killed
 * before Slurm confirmed the cancel, is cancelled here. */
static void ab_slurm_after(struct ab_run *r, const struct ab_job *j)
{
    if (!r->slurm)
        return;
    if (j->slurm_job[0]) {
        if (slurm_cancel_wait(j->slurm_job, 30))
            progress_note(r->pg, "warning: Slurm still lists job %s 30 s after it was cancelled",
                          j->slurm_job);
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "autobatch-%ld-%ld", (long)getpid(), j->id);
    slurm_sweep_steps(name);
}

/* The --events line of a trial's start. */
static void ab_event_start(const struct ab_run *r, const struct ab_job *j)
{
    if (!events_on())
        return;
    const struct cell *c = &r->space->cells[j->ci];
    json_t *o = json_pack("{s:I, s:I, s:I, s:b}", "trial", (json_int_t)j->id, "micro_batch",
                          (json_int_t)j->value, "grad_accum", (json_int_t)c->grad_accum,
                          "checkpointing", c->checkpointing);
    if (o && j->round > 0)
        json_object_set_new(o, "round", json_integer(j->round));
    if (o && j->slot)
        json_object_set_new(o, "devices", json_string(j->slot->devices));
    events_emit("trial_start", o);
}

/* Run trial j here, with its output shown. */
static void ab_job_run(struct ab_run *r, struct ab_job *j)
{
    const struct cell *cell = &r->space->cells[j->ci];
    struct trial_spec spec = { j->t.argv.v, j->t.env.v, j->t.cwd };
    progress_bracket(r->pg, search_max_fit(&cell->search), search_min_fail(&cell->search));
    progress_trial_start(r->pg, j->id, j->value, cell->grad_accum, cell->checkpointing,
                         j->to.target_steps, j->t.argv.v);
    ab_event_start(r, j);
    gpu_use(r->gpu, j->slot ? j->slot->mask : 0);
    gpu_trial_start(r->gpu);
    j->run_rc = trial_run(&spec, &j->to, &j->tr);
    j->run_errno = errno;
    j->peak = gpu_trial_peak(r->gpu, j->tr.peak_mem_bytes);
    ab_slurm_after(r, j);
}

/* The wire format from a worker: the trial's result and its GPU peak. */
struct ab_wire {
    int run_rc, run_errno;
    int64_t peak;
    struct trial_result tr;
};

/* Start trial j in a worker process of its own (a subreaper, like us,
 * that dies with us), which samples its slot's GPUs and sends the result
 * back.  Its output is not shown: trials side by side would interleave.
 * Returns 0, or -1 (errno) with nothing started. */
static int ab_job_spawn(struct ab_run *r, struct ab_job *j)
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
        static struct ab_wire wire;
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
static int ab_job_collect(struct ab_job *j, struct ab_wire *buf)
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
static int ab_job_pointless(const struct ab_run *r, const struct ab_job *j)
{
    const struct search *s = &r->space->cells[j->ci].search;
    long fail = search_min_fail(s), fit = search_max_fit(s);
    return (fail >= 0 && j->value > fail) || (fit >= 0 && j->value < fit);
}

/*
 * One round of up to n trials side by side, each on its own slot.
 * Results are taken as they come; each may cancel the others it made
 * pointless.  Returns 0 to go on, 1 to stop (as ab_job_finish).
 */
static int ab_round(struct ab_run *r, struct ab_job *jobs, size_t n, const size_t *ci,
                    const long *micro, long round)
{
    size_t started = 0, prepared = 0;
    int stop = 0;
    for (size_t i = 0; i < n; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        if (ab_job_prepare(r, &jobs[i], ci[i], micro[i], &r->slots[i], round)) {
            stop = 1;
            break;
        }
        prepared++;
    }
    if (prepared && ab_slurm_submit(r, jobs, prepared)) {
        r->status = AB_USAGE;
        stop = 1;
    }
    for (size_t i = 0; i < prepared; i++) {
        if (stop || ab_job_spawn(r, &jobs[i])) {
            if (!stop) {
                cli_error("cannot start a trial: %s", strerror(errno));
                r->status = AB_USAGE;
                stop = 1;
            }
            inject_trial_release(&jobs[i].t);
            leftovers_remove_tree(jobs[i].tdir);
            continue;
        }
        started++;
        ab_event_start(r, &jobs[i]);
        progress_note(r->pg, "round %ld: trial %ld micro_batch=%ld on GPU %s", round,
                      jobs[i].id, micro[i], r->slots[i].devices);
    }
    static struct ab_wire buf;
    size_t left = started;
    int forwarded = 0;
    while (left) {
        if (ab_interrupted && !forwarded) {
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
            struct ab_job *j = &jobs[which[k]];
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            memset(&buf, 0, sizeof buf);
            if (!ab_job_collect(j, &buf))
                continue;
            left--;
            ab_slurm_after(r, j);
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
            if (ab_job_finish(r, j, started > 1)) {
                stop = 1;
                for (size_t i = 0; i < started; i++)
                    if (!jobs[i].done && jobs[i].worker > 0)
                        kill(jobs[i].worker, SIGTERM);
                continue;
            }
            for (size_t i = 0; i < started; i++) {
                struct ab_job *o = &jobs[i];
                if (!o->done && !o->cancelled && ab_job_pointless(r, o)) {
                    o->cancelled = 1;
                    kill(o->worker, SIGTERM);
                    progress_note(r->pg, "trial %ld (micro_batch=%ld) cancelled: trial %ld "
                                         "answered for it", o->id, o->value, j->id);
                }
            }
        }
    }
    if (prepared)
        ab_slurm_done(r, jobs);
    if (!gpu_settle(r->gpu))
        progress_note(r->pg, "warning: GPU memory did not return to its level before the "
                             "round within 10s; the next round may see less free memory");
    return stop;
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
    struct ab_slot slots[SPACE_MAX_ROUND];
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
    struct ab_run run = {
        .plan = &plan, .setup = &setup, .ctx = &ctx, .space = &space, .res = &res, .gpu = &gpu,
        .guide = &guide, .pg = &pg, .oom = &oom, .log_rules = &log_rules, .dir = dir,
        .replay_cpu = replay_cpu, .t0 = ab_now(), .status = AB_OK,
        .slots = nslots > 0 ? slots : NULL, .nslots = nslots > 0 ? (size_t)nslots : 0,
        .slurm = slurm, .slurm_array = slurm && !getenv("SLURM_JOB_ID"),
        .emulate_lib = emulate_lib[0] ? emulate_lib : NULL,
    };
    if (run.slurm_array) {
        ssize_t n = readlink("/proc/self/exe", run.self, sizeof run.self - 1);
        run.self[n > 0 ? n : 0] = '\0';
    }
    size_t width = nslots > 1 ? (size_t)nslots : 1;
    struct ab_job *jobs = calloc(width, sizeof *jobs);
    size_t *round_ci = calloc(width, sizeof *round_ci);
    long *round_micro = calloc(width, sizeof *round_micro);
    if (!jobs || !round_ci || !round_micro) {
        cli_error("out of memory");
        return AB_USAGE;
    }
    int repeated = 0;
    long round = 0;
    for (;;) {
        size_t k = 0;
        if (!ab_interrupted)
            k = space_next_round(&space, width, round_ci, round_micro);
        if (!k) {
            /* The finalists measured again, once, when noise could have
             * decided between them. */
            struct choose_repeat again;
            if (repeated || ab_interrupted ||
                !choose_repeat_noisy(&res, &space, choose_capacity(&gpu, &space), plan.headroom,
                                     &again))
                break;
            progress_note(&pg, "micro_batch=%ld and %ld differ by %.1f%%, within their step-time "
                               "spread (%.1f%%): measuring both again", again.best_micro,
                          again.runner_micro, 100 * again.margin, 100 * again.spread);
            repeated = 1;
            continue;
        }
        if (k > 1) {
            res.rounds = ++round;
            if (ab_round(&run, jobs, k, round_ci, round_micro, round))
                break;
            continue;
        }
        /* One at a time, output shown: on the first slot when there are
         * slots (a throughput measurement alone). */
        struct ab_job *j = &jobs[0];
        memset(j, 0, sizeof *j);
        if (ab_job_prepare(&run, j, round_ci[0], round_micro[0], run.slots,
                           width > 1 ? round + 1 : 0))
            break;
        if (ab_slurm_submit(&run, j, 1)) {
            run.status = AB_USAGE;
            inject_trial_release(&j->t);
            leftovers_remove_tree(j->tdir);
            ab_slurm_done(&run, j);
            break;
        }
        ab_job_run(&run, j);
        ab_slurm_done(&run, j);
        if (width > 1)
            res.rounds = ++round;
        int stop = ab_job_finish(&run, j, 0);
        if (!gpu_settle(&gpu))
            progress_note(&pg, "warning: GPU memory did not return to its level before the "
                               "trial within 10s; the next trial may see less free memory");
        if (stop)
            break;
    }
    free(jobs);
    free(round_ci);
    free(round_micro);
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
    res.wall_s = ab_now() - t0;
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
