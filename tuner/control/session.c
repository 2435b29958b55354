/* SPDX-License-Identifier: MIT */
/*
 * session: one tuning run's resources and checks (session.h).
 * session_open and session_arm take the run from
 * its parsed command line to the state the first trial needs, in the
 * order a user's mistakes are best reported: the set-up and configs
 * first, then the scratch directory and the probe, the first trial's
 * build, the GPUs and Slurm, the replay probe.  Each failure says one
 * line and leaves s for session_close.  session_answer turns the loop's
 * trials into the choice and the exit status.
 */
#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/session.h"
#include "control/choose.h"
#include "control/devices.h"
#include "output/events.h"
#include "output/report.h"
#include "trial/leftovers.h"
#include "trial/proctree.h"
#include "trial/slurm.h"
#include "util/mono.h"
#include "util/run.h"
#include "util/which.h"
#include "inproc.h"

extern char **environ;

/* An error line; returns SESSION_BAD. */
#define SESSION_FAIL(v, ...) (tune_view_say((v), TUNE_ERROR, __VA_ARGS__), SESSION_BAD)

/* Where this run writes files: the configs' directories, the output
 * files' (those that are files: a device or FIFO is written through, with
 * no temporary beside it) and the cache's.  Then sweep them and the
 * scratch base of what killed runs left there. */
static void session_sweep(const struct session *s, const struct tune_view *v)
{
    const struct plan *plan = s->plan;
    const char *files[] = {
        s->setup.have_config ? s->setup.config_path : NULL,
        s->setup.have_accel ? s->setup.accel_path : NULL,
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
    if (leftovers_sweep(s->tmpbase, s->dir, dirs, &lr) > 0)
        tune_view_say(v, TUNE_NOTE, "removed what an earlier, killed run left: %d scratch "
                                    "director%s, %d trial cop%s of the config, %d temporary "
                                    "file%s of an unfinished write (first: %s), each while "
                                    "holding its lock%s",
                      lr.dirs, lr.dirs == 1 ? "y" : "ies", lr.copies, lr.copies == 1 ? "y" : "ies",
                      lr.temps, lr.temps == 1 ? "" : "s", lr.first,
                      lr.kept ? "; kept what live runs may hold" : "");
}

/* The first cell's first trial built and thrown away: a key the config
 * lacks or a config the command does not name fails now, before any
 * trial.  Returns 0, or -1 with the reason in err. */
static int session_build_first(struct session *s, char *err, size_t errlen)
{
    const struct cell *c = &s->space.cells[0];
    struct inject_candidate c0 = {
        .micro_batch = c->fixed_micro > 0 ? c->fixed_micro : s->plan->batch_min,
        .grad_accum = c->grad_accum, .checkpointing = c->checkpointing,
    };
    struct inject_trial t = INJECT_TRIAL_INIT;
    char wd0[4200];
    snprintf(wd0, sizeof wd0, "%s/dry-run", s->dir);
    s->ctx.trial_id = 0;
    s->ctx.workdir = s->setup.preset.config_fixed && !mkdir(wd0, 0700) ? wd0 : NULL;
    int bad = inject_build(&s->ctx, s->plan->command, environ, &c0, &t, err, errlen);
    inject_trial_release(&t);
    leftovers_remove_tree(wd0);
    s->ctx.workdir = NULL;
    return bad ? -1 : 0;
}

enum session_status session_open(struct session *s, struct plan *plan, const struct tune_view *v)
{
    memset(s, 0, sizeof *s);
    struct setup s0 = SETUP_INIT;
    struct oom_table t0 = OOM_TABLE_INIT;
    struct results r0 = RESULTS_INIT;
    s->setup = s0;
    s->oom = t0;
    s->res = r0;
    s->plan = plan;
    s->dir_lock = -1;

    char err[8192];
    int setup_failed = setup_load(&s->setup, plan, err, sizeof err);
    if (s->setup.auto_picked)
        tune_view_say(v, TUNE_NOTE, "--preset auto: picked '%s' (%s): %s", s->setup.preset.name,
                      s->setup.preset.summary ? s->setup.preset.summary : "",
                      s->setup.auto_why);
    if (setup_failed)
        return SESSION_FAIL(v, "%s", err);
    if (oom_table_load_default(&s->oom, err, sizeof err))
        return SESSION_FAIL(v, "built-in OOM signatures: %s", err);
    if (proctree_become_subreaper())
        return SESSION_FAIL(v, "cannot become a child subreaper: %s", strerror(errno));

    const char *tmp = getenv("TMPDIR");
    snprintf(s->tmpbase, sizeof s->tmpbase, "%s", tmp && *tmp ? tmp : "/tmp");
    char tmpl[sizeof s->dir];
    snprintf(tmpl, sizeof tmpl, "%s/autobatch-XXXXXX", s->tmpbase);
    if (!mkdtemp(tmpl))
        return SESSION_FAIL(v, "cannot make a temporary directory in '%s': %s; set TMPDIR to a "
                               "writable place", s->tmpbase, strerror(errno));
    snprintf(s->dir, sizeof s->dir, "%s", tmpl);

    /* Lock the scratch directory as ours for the whole run (the lock dies
     * with us, however we die; trials do not inherit it), then sweep what
     * killed runs left behind (their scratch directories, trial copies of
     * the config, temporary files of writes cut short). */
    if ((s->dir_lock = leftovers_mark(s->dir)) < 0)
        tune_view_say(v, TUNE_NOTE, "warning: cannot mark '%s' as this run's: %s", s->dir,
                      strerror(errno));
    session_sweep(s, v);
    snprintf(s->probe_dir, sizeof s->probe_dir, "%s/probe", s->dir);
    if (!plan->no_probe && inproc_install(s->probe_dir, err, sizeof err))
        return SESSION_FAIL(v, "in-process probe: %s", err);
    s->log_rules = setup_log_rules(&s->setup.preset);

    /* The space. */
    s->accum_default[0] = s->setup.grad_accum;
    struct space_opts so = {
        .batch_min = plan->batch_min, .batch_max = plan->batch_max,
        .batch_step = plan->batch_step,
        .grad_accum = plan->ngrad_accum ? plan->grad_accum : s->accum_default,
        .ngrad_accum = plan->ngrad_accum ? (size_t)plan->ngrad_accum : 1,
        .ckpt_off = plan->ckpt_off, .ckpt_on = plan->ckpt_on,
        .ckpt_forced = plan->ckpt_on && !plan->ckpt_off,
        .global_batch = plan->global_batch, .world_size = plan->world_size, .use_model = 1,
    };
    s->so = so;
    if (space_init(&s->space, &s->so, err, sizeof err))
        return SESSION_FAIL(v, "%s", err);
    s->have_space = 1;

    /* The trainer's own step limit: far above anything a trial runs
     * (warm-up, measured steps, a noisy trial's extension), so it never
     * reaches its end-of-run save and evaluation; autobatch ends the
     * trial itself.  AUTOBATCH_MAX_STEPS is the most a trial may measure:
     * warm-up, the steps, and a noisy trial's extension (twice --steps),
     * so a trainer that stops itself there leaves room for the extension;
     * a steady trial is stopped by autobatch at warm-up + steps. */
    struct setup *st = &s->setup;
    struct inject_ctx ctx = {
        .preset = &st->preset, .set_checkpointing = plan->checkpointing_searched,
        .max_steps = plan->warmup + 3 * plan->steps,
        .step_limit = 100 + 10 * (plan->warmup + 3 * plan->steps),
        .world_size = plan->world_size,
        .probe_dir = plan->no_probe ? NULL : s->probe_dir,
        .config_path = st->have_config ? st->config_path : NULL,
        .config = st->have_config ? &st->config : NULL,
        .accel_path = st->accel_path, .accel = st->have_accel ? &st->accel : NULL,
    };
    s->ctx = ctx;
    if (session_build_first(s, err, sizeof err))
        return SESSION_FAIL(v, "%s", err);
    return SESSION_OK;
}

/* The results' description of the run: the command, preset, ranges. */
static int session_results(struct session *s)
{
    const struct plan *plan = s->plan;
    struct results *res = &s->res;
    if (results_init(res, plan->command))
        return -1;
    s->have_res = 1;
    res->preset = s->setup.preset.name;
    res->unit = s->setup.unit;
    res->config = s->setup.have_config ? s->setup.config_path : NULL;
    res->batch_min = plan->batch_min;
    res->batch_max = plan->batch_max;
    res->batch_step = plan->batch_step;
    res->world_size = plan->world_size;
    res->global_batch = plan->global_batch > 0 ? plan->global_batch : -1;
    res->headroom = plan->headroom;
    res->grad_accum = malloc(s->so.ngrad_accum * sizeof *res->grad_accum);
    if (res->grad_accum) {
        memcpy(res->grad_accum, s->so.grad_accum, s->so.ngrad_accum * sizeof *res->grad_accum);
        res->ngrad_accum = s->so.ngrad_accum;
    }
    res->ckpt_off = s->so.ckpt_off;
    res->ckpt_on = s->so.ckpt_on;
    for (int id = 0, n = 0; id < KNOB_COUNT && n < 3; id++)
        if (plan->allowed & KNOB_BIT(id))
            res->allowed[n++] = preset_knob_name(id);
    res->settings = (struct results_settings){
        .known = 1, .steps = plan->steps, .warmup = plan->warmup, .confirm = !plan->no_confirm,
        .confirm_steps = plan->confirm_steps, .confirm_s = plan->confirm_s,
        .worst_case = plan->worst_case, .worst_case_scan_s = plan->worst_case_scan_s,
        .replay = plan->replay, .probe = !plan->no_probe, .cache = !plan->no_cache,
        .trial_timeout_s = plan->trial_timeout_s, .hang_timeout_s = plan->hang_timeout_s,
        .grace_s = plan->grace_s, .budget_s = plan->budget_s,
        .trial_mem_limit = plan->trial_mem_limit, .gpus = plan->gpus,
        .gpus_per_trial = plan->gpus_per_trial,
    };
    return 0;
}

/* Side by side (--gpus), as Slurm job steps, on emulated memory: the
 * slots and everything about them checked.  Returns SESSION_OK, or
 * SESSION_BAD with the reason in why, or SESSION_SPLIT or SESSION_TARGETS. */
static enum session_status session_devices(struct session *s, char *why, size_t whylen)
{
    const struct plan *plan = s->plan;
    struct gpu *gpu = &s->gpu;
    s->slurm = plan->launcher ? !strcmp(plan->launcher, "slurm") : getenv("SLURM_JOB_ID") != NULL;
    int own_srun = s->slurm && !strcmp(basename(plan->command[0]), "srun");
    if (own_srun)
        s->slurm = 0; /* the command makes its own job step */
    int slurm = s->slurm;
    why[0] = '\0';
    int target_type = 0; /* a GRES type in a target: each trial gets a GPU of it */
    for (int t = 0; t < plan->ntargets; t++)
        target_type |= strchr(plan->targets[t], ':') != NULL;
    if (plan->ntargets && !(slurm && !getenv("SLURM_JOB_ID"))) {
        snprintf(why, whylen, "--slurm-targets: each target's trials go out as job arrays from a "
                              "login node; add --launcher slurm and run it outside an allocation");
        return SESSION_BAD;
    }
    /* --slurm-arg: for Slurm trials only, none that autobatch sets itself */
    for (int i = 0; i < plan->nslurm_args; i++) {
        if (own_srun)
            snprintf(why, whylen, "--slurm-arg: the command runs srun itself; put the Slurm "
                                  "options on its srun");
        else if (!slurm)
            snprintf(why, whylen, "--slurm-arg '%s': trials run here, not on Slurm; add "
                                  "--launcher slurm (or run inside an allocation)",
                     plan->slurm_args[i]);
        else
            slurm_arg_check(plan->slurm_args[i],
                            (plan->gpus[0] ? SLURM_ARG_GPUS : 0) |
                                (target_type ? SLURM_ARG_TYPE : 0) |
                                (plan->ntargets ? SLURM_ARG_TARGET : 0), why, whylen);
        if (why[0])
            return SESSION_BAD;
    }
    s->nslots = devices_slots(plan, gpu, slurm, s->slots, SPACE_MAX_ROUND, why, whylen);
    if (s->nslots >= 0 && plan->parallel > 1)
        s->nslots = devices_cpu_slots(plan, gpu->n, slurm, getenv("AUTOBATCH_MEMINFO"),
                                      s->slots, SPACE_MAX_ROUND, why, whylen);
    double real_cap = gpu_capacity(gpu);
    const char *bad = NULL;
    if (s->nslots == -2)
        return SESSION_SPLIT;
    else if (s->nslots < 0)
        bad = why;
    else if (slurm && getenv("SLURM_JOB_ID") && !which_found("srun"))
        bad = "--launcher slurm: srun is not in PATH; run inside a Slurm allocation or use "
              "--launcher local";
    else if (slurm && !getenv("SLURM_JOB_ID") &&
             (!which_found("sbatch") || !which_found("scontrol") || !which_found("scancel")))
        bad = "--launcher slurm: sbatch, scontrol and scancel must be in PATH to submit trials "
              "from here; run on a login node or use --launcher local";
    else if (plan->slurm_pending_s > 0 && !(slurm && !getenv("SLURM_JOB_ID")))
        bad = "--slurm-pending: trials are not queued jobs here (they run on this machine, or "
              "as job steps of this allocation); drop it, or run from a login node with "
              "--launcher slurm";
    else if (s->nslots > 1 && plan->replay)
        bad = "--replay runs its recordings one at a time; drop --gpus or --replay";
    else if (plan->emulate_bytes && gpu->n <= 0)
        snprintf(why, whylen, "--emulate-gpu-memory needs a GPU seen through NVML (%s)",
                 gpu->why), bad = why;
    else if (plan->emulate_bytes && (double)plan->emulate_bytes >= real_cap)
        snprintf(why, whylen, "--emulate-gpu-memory: %.1f GiB is not smaller than the GPU's "
                 "%.1f GiB; give a smaller size", (double)plan->emulate_bytes / (1 << 30),
                 real_cap / (1 << 30)), bad = why;
    else if (plan->emulate_bytes && !strcmp(plan->emulate_with, "probe") && plan->no_probe)
        bad = "--emulate-with probe works through the in-process probe; drop --no-probe";
    else if (plan->emulate_bytes && !strcmp(plan->emulate_with, "preload") &&
             devices_emulate_lib(s->emulate_lib, sizeof s->emulate_lib))
        bad = "--emulate-gpu-memory: libautobatch-gpuemu.so is not next to autobatch; set "
              "AUTOBATCH_GPUEMU_LIB to it, or use --emulate-with probe";
    if (bad) {
        if (bad != why)
            snprintf(why, whylen, "%s", bad);
        return SESSION_BAD;
    }
    if (plan->ntargets > 1)
        return SESSION_TARGETS;
    struct results *res = &s->res;
    if (plan->emulate_bytes) {
        res->emulated = plan->emulate_bytes;
        res->emulated_with = plan->emulate_with;
        res->emulated_real_total = (long long)real_cap;
        gpu_emulate(gpu, plan->emulate_bytes);
    }
    res->launcher = !slurm ? "local" : getenv("SLURM_JOB_ID") ? "slurm" : "slurm-array";
    res->slurm_target = plan->ntargets == 1 ? plan->targets[0] : NULL;
    /* Job arrays: whatever ends autobatch, its queued tasks are cancelled
     * (a pending task runs no watchdog). */
    if (slurm && !getenv("SLURM_JOB_ID") && !s->guarded) {
        char name[64];
        snprintf(name, sizeof name, "autobatch-%ld", (long)getpid());
        s->guarded = slurm_guard_start(&s->guard, name) == 0;
    }
    res->slots = s->nslots > 1 ? s->nslots : 1;
    s->so.shared_speeds = s->nslots > 1;
    s->space.o.shared_speeds = s->nslots > 1;
    /* Boundary trials on a GPU end once the probe's CUDA figure stops
     * growing past the second optimizer step, unless the user wants every
     * speed or the trials run through srun (which must forward a stop,
     * not be killed).  Not on CPU under --trial-memory-limit: glibc's
     * heap grows for steps after that, and early fits there were false
     * (bench/results/memory-only-2ed3ddd-Release-cpu.txt). */
    s->so.memory_only = !plan->no_probe && !plan->full_trials && !slurm &&
                        !plan->trial_mem_limit && real_cap > 0;
    s->space.o.memory_only = s->so.memory_only;
    return SESSION_OK;
}

/* The replay probe (--replay): what capacity it predicts for.  Returns
 * NULL, or why it cannot run. */
static const char *session_replay(struct session *s)
{
    const struct plan *plan = s->plan;
    struct stat st;
    s->guide.keep_dir = plan->keep_traces;
    double gcap = gpu_capacity(&s->gpu);
    if (plan->replay && plan->no_replay)
        return "--replay and --no-replay: keep one";
    /* On by default where it can work and pays: a Python command (the
     * probe loads) on a GPU (the caching allocator the replay models; on
     * CPU under --trial-memory-limit glibc's heap is not modelled: on
     * train_tts with the user's allocator it predicted 23 where 15 is
     * the boundary, docs/replay.md), one trial at a time (the recordings
     * run alone), a search to guide (free mode, no cached boundary to
     * confirm).  A decline falls back to the search and says why. */
    s->replay = plan->replay ||
                (!plan->no_replay && !plan->no_probe && tune_looks_python(plan->command) &&
                 !plan->trial_mem_limit && gcap > 0 && s->nslots <= 1 && !s->slurm &&
                 plan->global_batch <= 0 && !s->cached);
    s->replay_cpu = s->replay && plan->trial_mem_limit > 0;
    s->res.settings.replay = s->replay;
    if (plan->keep_traces && !s->replay)
        return "--keep-traces keeps --replay's traces; add --replay";
    if (plan->replay && plan->no_probe)
        return "--replay records through the in-process probe; drop --no-probe";
    if (plan->replay && !plan->trial_mem_limit && gcap <= 0)
        return "--replay needs a capacity to predict for: a GPU seen through NVML, or "
               "--trial-memory-limit SIZE on CPU";
    if (plan->keep_traces && (stat(plan->keep_traces, &st) || !S_ISDIR(st.st_mode) ||
                              access(plan->keep_traces, W_OK | X_OK)))
        return "--keep-traces: not a writable directory; make it first (mkdir -p DIR)";
    if (s->replay &&
        guide_init(&s->guide, &s->space,
                   s->replay_cpu ? (int64_t)plan->trial_mem_limit : (int64_t)gcap,
                   s->replay_cpu ? "trial-memory-limit" : "gpu"))
        return "out of memory";
    return NULL;
}

/* An allowed knob that cannot be tried: one line, and knobs.skipped. */
static void session_skip(struct session *s, const struct tune_view *v, enum knob_id id,
                         const char *why, const char *what)
{
    size_t n = strlen(s->res.skipped);
    snprintf(s->res.skipped + n, sizeof s->res.skipped - n, "%s%s: %s", n ? "; " : "",
             preset_knob_name(id), why);
    s->skipped |= KNOB_BIT(id);
    tune_view_say(v, TUNE_NOTE, "--allow %s: %s, so %s", preset_knob_name(id), why, what);
}

/* Can the command's Python import module?  1 yes, 0 no, -1 no Python
 * found to ask: the command is not python* itself, nor a Python launcher
 * (accelerate, torchrun, deepspeed), whose python3 is the one beside it
 * (or PATH's, as the launcher's own shebang would find it). */
static int session_imports(char *const *cmd, const char *module)
{
    char py[PATH_MAX], code[128];
    const char *slash = strrchr(cmd[0], '/'), *base = slash ? slash + 1 : cmd[0];
    if (!strncmp(base, "python", 6))
        snprintf(py, sizeof py, "%s", cmd[0]);
    else if (strcmp(base, "accelerate") && strcmp(base, "torchrun") && strcmp(base, "deepspeed"))
        return -1;
    else if (slash)
        snprintf(py, sizeof py, "%.*s/python3", (int)(slash - cmd[0]), cmd[0]);
    else
        snprintf(py, sizeof py, "python3");
    snprintf(code, sizeof code, "import %s", module);
    char *argv[] = { py, "-c", code, NULL };
    int rc = run_capture(argv, NULL, 0, 0);
    return rc < 0 ? -1 : rc == 0;
}

enum session_status session_arm(struct session *s, const struct tune_view *v)
{
    const struct plan *plan = s->plan;
    if (session_results(s))
        return SESSION_FAIL(v, "out of memory");
    gpu_open(&s->gpu, getenv("AUTOBATCH_NVML_LIB"));
    s->have_gpu = 1;
    char why[512];
    enum session_status st = session_devices(s, why, sizeof why);
    if (st == SESSION_BAD)
        return SESSION_FAIL(v, "%s", why);
    if (st != SESSION_OK)
        return st;
    struct gpu *gpu = &s->gpu;
    struct results *res = &s->res;
    if (gpu->n) {
        res->gpus = calloc((size_t)gpu->n, sizeof *res->gpus);
        for (int i = 0; res->gpus && i < gpu->n; i++) {
            const char *name;
            uint64_t total;
            gpu_info(gpu, i, &name, &total);
            res->gpus[i].index = i;
            snprintf(res->gpus[i].name, sizeof res->gpus[i].name, "%s", name);
            res->gpus[i].total = (long long)total;
        }
        res->ngpus = res->gpus ? (size_t)gpu->n : 0;
    } else if (plan->verbose) {
        tune_view_say(v, TUNE_NOTE, "no GPU memory figures: %s", gpu->why);
    }
    /* No GPU to read (no NVML): report lines may still carry figures, but
     * a cheap first fit at MIN for the model is not worth a trial;
     * bisection opens in the middle. */
    for (size_t i = 0; i < s->space.ncells; i++)
        s->space.cells[i].search.open_mid = gpu_capacity(gpu) <= 0;
    /* From a login node this machine's GPUs say nothing: the trials run
     * where the target and the --slurm-arg options send them. */
    char where[4096];
    size_t off = (size_t)snprintf(where, sizeof where, "%s", gpu->fingerprint);
    if (s->slurm && !getenv("SLURM_JOB_ID")) {
        off += (size_t)snprintf(where + off, sizeof where - off, "|slurm-array %s",
                                plan->ntargets == 1 ? plan->targets[0] : "-");
        for (int i = 0; i < plan->nslurm_args && off < sizeof where; i++)
            off += (size_t)snprintf(where + off, sizeof where - off, " %s", plan->slurm_args[i]);
    }
    cache_key_make(&s->ck, plan->command, s->setup.have_config ? &s->setup.config : NULL, &s->so,
                   where);
    int seeded = plan->no_cache ? 0 : cache_load(&s->ck, &s->space);
    s->cached = seeded > 0;
    res->warm_start = s->cached;
    res->warm_cells = seeded > 0 ? seeded : 0;
    res->cache_key = s->cached ? s->ck.hex : NULL;
    res->cache_file = s->cached && s->ck.path[0] ? s->ck.path : NULL;
    if (s->cached)
        tune_view_say(v, TUNE_NOTE, "warm start: confirming the boundaries cached from the last "
                                    "run (--no-cache to search afresh)%s",
                      plan->replay ? "; --replay records nothing for a cached boundary" : "");
    const char *bad = session_replay(s);
    if (bad)
        return SESSION_FAIL(v, "%s", bad);
    /* --allow optim8bit: bitsandbytes must import where the trainer runs
     * (a command whose Python is not known is taken at its word);
     * --allow sharding: several ranks to shard over. */
    if ((plan->allowed & KNOB_BIT(KNOB_OPTIM8BIT)) &&
        !session_imports(plan->command, "bitsandbytes"))
        session_skip(s, v, KNOB_OPTIM8BIT, "the command's Python cannot import bitsandbytes",
                     "8-bit optimizers are skipped (pip install bitsandbytes where the trainer "
                     "runs)");
    if ((plan->allowed & KNOB_BIT(KNOB_SHARDING)) && plan->world_size <= 1)
        session_skip(s, v, KNOB_SHARDING, "the command runs one rank (--world-size 1)",
                     "sharding is skipped (it needs several ranks; give --world-size N for a "
                     "job that starts N)");
    return SESSION_OK;
}

struct tune_run session_tune(struct session *s, const struct tune_view *view)
{
    struct tune_run run = {
        .plan = s->plan, .setup = &s->setup, .ctx = &s->ctx, .space = &s->space, .res = &s->res,
        .gpu = &s->gpu, .guide = &s->guide, .view = *view, .oom = &s->oom,
        .log_rules = &s->log_rules, .dir = s->dir, .replay = s->replay,
        .replay_cpu = s->replay_cpu,
        .t0 = mono_now(), .status = 0,
        .slots = s->nslots > 0 ? s->slots : NULL, .nslots = s->nslots > 0 ? (size_t)s->nslots : 0,
        .slurm = s->slurm, .slurm_array = s->slurm && !getenv("SLURM_JOB_ID"),
        .emulate_lib = s->emulate_lib[0] ? s->emulate_lib : NULL,
    };
    if (run.slurm_array) {
        ssize_t n = readlink("/proc/self/exe", run.self, sizeof run.self - 1);
        run.self[n > 0 ? n : 0] = '\0';
    }
    return run;
}

/* The knobs session_escalate turns on, in order of cost (docs/knobs.md):
 * checkpointing changes no numerics; the others only under --allow.
 * beyond: may help when the weights, gradients and optimizer state alone
 * exceed the memory (the others save activations only). */
static const struct session_rung {
    enum knob_id id;
    const char *what;
    int beyond;
    int numerics;  /**< changes the numbers the model computes */
} session_rungs[] = {
    { KNOB_CHECKPOINTING, "activation checkpointing", 0, 0 },
    { KNOB_SHARDING, "sharding over the ranks", 1, 0 },
    { KNOB_PRECISION, "bf16 mixed precision", 0, 1 },
    { KNOB_OPTIM8BIT, "an 8-bit optimizer", 1, 1 },
};

static int session_rung_is_on(const struct session *s, enum knob_id id)
{
    return id == KNOB_CHECKPOINTING ? s->ctx.set_checkpointing
                                    : (s->ctx.set_extra & KNOB_BIT(id)) != 0;
}

/* 1 when the run may turn knob id on (placed, allowed, and not skipped
 * before the first trial); 2 when only --allow is missing. */
static int session_rung_may(const struct session *s, enum knob_id id)
{
    if (id == KNOB_CHECKPOINTING)
        return s->setup.ckpt_spare;
    if (s->setup.preset.knobs[id].via == VIA_NONE)
        return 0;
    if (id == KNOB_SHARDING && s->plan->world_size <= 1)
        return 0; /* one rank: nothing to shard over */
    if (!(s->plan->allowed & KNOB_BIT(id)))
        return 2;
    return !(s->skipped & KNOB_BIT(id));
}

/* Would the weights, gradients and optimizer state fit with knob id on?
 * Sharding splits all three over the ranks; an 8-bit optimizer keeps a
 * quarter of the state. */
static int session_rung_room(const struct session *s, enum knob_id id,
                             const struct results_nofit *f)
{
    long world = s->plan->world_size > 1 ? s->plan->world_size : 1;
    if (f->optim < 0 || f->capacity <= 0)
        return 0;
    if (id == KNOB_SHARDING)
        return (f->params + f->grads + f->optim) / world < f->capacity;
    return id == KNOB_OPTIM8BIT && f->params + f->grads + f->optim / 4 < f->capacity;
}

/* Turn one knob on and start a new space (session_escalate). */
static int session_turn_on(struct session *s, struct tune_run *run,
                           const struct session_rung *rung, const char *why,
                           const struct tune_view *v)
{
    struct results *res = &s->res;
    char err[256];
    struct results_turned *t = &res->turned_on[res->nturned_on++];
    t->knob = preset_knob_name(rung->id);
    snprintf(t->why, sizeof t->why, "%s", why);
    if (rung->id == KNOB_CHECKPOINTING) {
        s->ctx.set_checkpointing = 1;
        s->so.ckpt_off = 0;
        s->so.ckpt_on = s->so.ckpt_forced = 1;
        res->ckpt_on = 1;
    } else {
        s->ctx.set_extra |= KNOB_BIT(rung->id);
        /* Checkpointing the ladder turned on alone did not do it; with
         * this knob it may not be needed at all: both, the faster wins. */
        if (!s->plan->checkpointing_searched && s->ctx.set_checkpointing) {
            s->so.ckpt_off = s->so.ckpt_on = 1;
            s->so.ckpt_forced = 0;
        }
    }
    tune_view_say(v, TUNE_NOTE, "%s; searching again with %s on%s%s%s", why, rung->what,
                  rung->id == KNOB_CHECKPOINTING ? "" : " (--allow ",
                  rung->id == KNOB_CHECKPOINTING ? "" : preset_knob_name(rung->id),
                  rung->id == KNOB_CHECKPOINTING ? "" : ")");
    /* The replay's recordings belong to the space they guided. */
    if (s->replay) {
        guide_release(&s->guide);
        s->replay = run->replay = run->replay_cpu = 0;
    }
    space_release(&s->space);
    s->have_space = 0;
    if (space_init(&s->space, &s->so, err, sizeof err)) {
        tune_view_say(v, TUNE_ERROR, "%s", err);
        return -1;
    }
    s->have_space = 1;
    for (size_t i = 0; i < s->space.ncells; i++)
        s->space.cells[i].search.open_mid = gpu_capacity(&s->gpu) <= 0;
    return 1;
}

int session_escalate(struct session *s, struct tune_run *run, const struct tune_view *v)
{
    const struct plan *plan = s->plan;
    struct results *res = &s->res;
    struct results_turned *last = res->nturned_on ? &res->turned_on[res->nturned_on - 1] : NULL;
    if (run->status || (run->interrupt && *run->interrupt))
        return 0;
    if (last && (run->crashed || run->no_steps) && !results_any_fit(res)) {
        /* The knob broke the command (a flag it does not take): the
         * answer is the search before it, where nothing fitted. */
        last->outcome = "command failed";
        tune_view_say(v, TUNE_NOTE, "turning %s on made the command fail, not run out of memory "
                                    "(see the trial's output): it may not reach this trainer; "
                                    "micro_batch=%ld fits nowhere without it", last->knob,
                      plan->batch_min);
        run->crashed = run->no_steps = 0;
        return 0;
    }
    if (last)
        last->outcome = results_any_fit(res) ? "fits" : "nothing fits";
    if (run->crashed || run->no_steps || run->budget_hit || run->timeouts ||
        results_any_fit(res) || !res->ntrials)
        return 0;
    /* Weights, gradients and optimizer state alone above the capacity:
     * checkpointing and bf16 autocast (which keeps fp32 weights and
     * optimizer state) save activations only; an 8-bit optimizer keeps a
     * quarter of the state, which may be enough. */
    struct results_nofit f;
    res->capacity = choose_memory_limit(&s->gpu, &s->space, (double)plan->trial_mem_limit);
    int beyond = results_nofit_split(res, &f) && f.exceeds == 1;
    const struct preset *p = &s->setup.preset;
    /* Said with the failure's breakdown when the probe gave one. */
    char why[512];
    json_t *fj = results_nofit_json(res);
    char *what = NULL, *next = NULL;
    report_nofit_text(fj, &what, &next);
    json_decref(fj);
    const char *parts = what && strstr(what, ": ") ? strstr(what, ": ") + 2 : what;
    snprintf(why, sizeof why, "micro_batch=%ld fits in no cell with %s%s%s%s", plan->batch_min,
             s->ctx.set_checkpointing || s->ctx.set_extra ? "what is on"
                                                              : "the command's own settings",
             parts ? " (" : "", parts ? parts : "", parts ? ")" : "");
    free(what);
    free(next);
    /* The next rung that may help; else what --allow would add. */
    const struct session_rung *ask[sizeof session_rungs / sizeof *session_rungs];
    size_t nask = 0;
    for (size_t i = 0; i < sizeof session_rungs / sizeof *session_rungs; i++) {
        const struct session_rung *rg = &session_rungs[i];
        int may = session_rung_may(s, rg->id);
        if (session_rung_is_on(s, rg->id) || !may ||
            (beyond && !(rg->beyond && session_rung_room(s, rg->id, &f))))
            continue;
        if (may == 1)
            return session_turn_on(s, run, rg, why, v);
        ask[nask++] = rg;
    }
    char names[64] = "", tries[384] = "";
    for (size_t i = 0; i < nask; i++) {
        const struct preset_knob *k = &p->knobs[ask[i]->id];
        size_t nn = strlen(names), nt = strlen(tries);
        snprintf(names + nn, sizeof names - nn, "%s%s", i ? "," : "", preset_knob_name(ask[i]->id));
        snprintf(tries + nt, sizeof tries - nt, "%s%s (%s %s%s)",
                 !i ? "" : i + 1 == nask ? " and " : ", ", ask[i]->what, k->where,
                 k->spell_true ? k->spell_true : "true", ask[i]->numerics ? "; changes numerics" : "");
    }
    if (nask)
        tune_view_say(v, TUNE_NOTE, "%s; --allow %s would let autobatch try %s", why, names,
                      tries);
    return 0;
}

/* The exit status of a run whose loop ended without an error of its
 * own, from what the loop saw and what was chosen. */
static int session_exit(const struct session *s, const struct tune_run *run)
{
    const struct results *res = &s->res;
    int any_fit = results_any_fit(res);
    if (run->interrupt && *run->interrupt)
        return AB_EXIT_INTERRUPTED;
    if (run->crashed || run->no_steps)
        return AB_EXIT_CRASH;
    if (!any_fit && (run->budget_hit || run->pending))
        return AB_EXIT_BUDGET; /* out of time: the budget's, or the queue's (--slurm-pending) */
    if (!any_fit)
        return run->timeouts ? AB_EXIT_CRASH : AB_EXIT_NOTHING_FITS;
    if (res->best < 0)
        return AB_EXIT_NOTHING_FITS; /* fits exist, but none leaves the headroom */
    return AB_EXIT_OK;
}

int session_answer(struct session *s, const struct tune_run *run, const struct tune_view *v)
{
    struct results *res = &s->res;
    const struct plan *plan = s->plan;
    if (s->replay) {
        res->replay = guide_json(&s->guide, &s->space);
        guide_release(&s->guide);
    }
    size_t ncontra = res->ncontra;
    choose_collect_cells(&s->space, res);
    for (size_t i = ncontra; i < res->ncontra; i++) {
        const struct results_contradiction *x = &res->contra[i];
        tune_view_say(v, TUNE_NOTE, "warning: micro_batch=%ld failed although %ld fitted; "
                                    "re-tested: %s", x->micro_batch, x->larger_fit,
                      x->retest_fit ? "fits (the first failure was a fluke)"
                                    : "fails again (memory use is not monotone here)");
    }
    struct choose_notes notes;
    double cap = choose_capacity(&s->gpu, &s->space);
    res->best = choose_best(res, &s->space, cap, plan->headroom, &notes);
    /* The capacity the headroom rule used, and where it came from; under
     * --trial-memory-limit without one, the limit is the memory that runs
     * out (the rule did not measure against it: headroom_checked says so). */
    res->capacity = choose_memory_limit(&s->gpu, &s->space, (double)plan->trial_mem_limit);
    res->capacity_source = gpu_capacity(&s->gpu) > 0 ? (plan->emulate_bytes ? "emulated"
                                                        : s->gpu.cuda_total ? "cuda" : "nvml")
                         : cap > 0 ? "oom-message"
                         : plan->trial_mem_limit > 0 ? "trial-memory-limit" : NULL;
    res->headroom_checked = plan->headroom > 0 ? !notes.headroom_unchecked : -1;
    if (plan->headroom <= 0) {
        res->excluded = 0;
    } else if (cap > 0) {
        struct choose_excluded x;
        res->excluded = (long)choose_excluded(res, &s->space, cap, plan->headroom, &x);
    }
    /* A run stopped on bad input (a knob that does not reach the trainer)
     * has no answer: its "fits" say nothing about the sizes printed. */
    if (run->status == AB_EXIT_USAGE)
        res->best = res->runner_up = -1;
    if (notes.headroom_unchecked)
        tune_view_say(v, TUNE_NOTE, "warning: --headroom could not be checked for every "
                                    "candidate: no memory figures (no NVML, no peak_mem_bytes in "
                                    "AUTOBATCH_REPORT, no numbers in the OOM messages)");
    if (events_on())
        events_emit("choice", json_pack("{s:o, s:o}", "best",
                    res->best >= 0 ? results_trial_json(&res->trials[res->best]) : json_null(),
                    "runner_up", res->runner_up >= 0
                                     ? results_trial_json(&res->trials[res->runner_up])
                                     : json_null()));
    int status = run->status ? run->status : session_exit(s, run);
    res->wall_s = mono_now() - run->t0;
    res->exit_status = status;
    res->interrupted = status == AB_EXIT_INTERRUPTED;
    /* The cache keeps boundaries of the command's own settings only. */
    if (status == AB_EXIT_OK && !plan->no_cache && !res->nturned_on) {
        const struct results_trial *b = res->best >= 0 ? &res->trials[res->best] : NULL;
        cache_save(&s->ck, &s->space, b ? b->grad_accum : 0, b ? b->checkpointing : 0,
                   b ? b->micro_batch : -1);
    }
    return status;
}

void session_close(struct session *s)
{
    if (s->guarded)
        slurm_guard_stop(&s->guard);
    s->guarded = 0;
    if (s->dir[0])
        leftovers_remove_tree(s->dir);
    s->dir[0] = '\0';
    leftovers_unmark(s->dir_lock); /* only once nothing of it is left to sweep */
    s->dir_lock = -1;
    guide_release(&s->guide);
    if (s->have_space)
        space_release(&s->space);
    if (s->have_res)
        results_release(&s->res);
    if (s->have_gpu)
        gpu_release(&s->gpu);
    oom_table_release(&s->oom);
    setup_release(&s->setup);
    s->have_space = s->have_res = s->have_gpu = 0;
}
