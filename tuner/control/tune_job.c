/* SPDX-License-Identifier: MIT */
/*
 * tune_job: one trial of the tuning loop (tune_int.h).  tune_job_prepare
 * makes the trial's directory (its report and probe files, its scratch
 * output directory, its working directory, its trace directory when it
 * records), builds its command and environment through the inject
 * adapter, adds the devices, emulated memory and Slurm job step, and
 * sets its limits (the budget caps a trial too).  tune_job_run runs it
 * here; tune_job_finish reads what it showed into a results trial, the
 * search's observation (the fit, its peak and intercept, or the OOM
 * message's numbers) and the replay guide, and explains what stops the
 * search: a crash with its last lines, a run without steps, a batch
 * knob that does not reach the trainer.  The Slurm calls around a trial
 * are here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/choose.h"
#include "control/setup.h"
#include "control/tune_int.h"
#include "output/events.h"
#include "output/results.h"
#include "search/guide.h"
#include "search/search.h"
#include "search/space.h"
#include "trial/gpu.h"
#include "trial/leftovers.h"
#include "trial/slurm.h"
#include "util/mono.h"
#include "util/strvec.h"
#include "oom.h"
#include "preset.h"
#include "trainlog.h"

extern char **environ;

/* The tail of a crashed command's output, so the user sees the real error. */
static void tune_show_crash(const struct tune_run *r, const struct trial_result *tr)
{
    tune_say(r, TUNE_NOTE, "the command failed for a reason other than memory (%s%d); "
                           "its last lines:",
             tr->signal ? "signal " : "exit code ", tr->signal ? tr->signal : tr->exit_code);
    for (int i = 0; i < tr->tail_count; i++)
        tune_say(r, TUNE_TAIL, "%s", tr->tail[i]);
    tune_say(r, TUNE_NOTE, "fix the command so that it runs at the smallest batch, then try "
                           "again");
}

/* Steps a recording trial runs: the probe records after the second
 * optimizer step, for three steps (the first of them is dropped), and
 * writes its trace in the hook of the fifth; one more step ends it. */
#define TUNE_RECORD_STEPS 6
/* A memory-only boundary trial ends past the probe's second optimizer
 * step, at the first step over which its memory did not grow. */
#define TUNE_MEMORY_STEPS 2

/*
 * The environment of a --replay trial: autobatch's own variables only.
 * Every trial reports its VmPeak; a recording trial gets the trace
 * directory.  Nothing that changes memory behaviour is added (DESIGN.md
 * 2.2): a replay measured under another allocator setting (one malloc
 * arena, a fixed mmap threshold) predicts a boundary the user's own run
 * does not have.  Returns 0, or -1 (ENOMEM).
 */
static int tune_replay_env(struct strvec *env, const char *record_dir)
{
    int rc = strvec_pushf(env, "AUTOBATCH_VMPEAK=1");
    if (record_dir)
        rc |= strvec_pushf(env, "AUTOBATCH_RECORD=%s", record_dir) |
              strvec_pushf(env, "AUTOBATCH_RECORD_AFTER=2");
    return rc ? -1 : 0;
}

/* An empty regular file of ours that the trial appends to, 0600. */
static int tune_make_channel(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* Is the command a Python program (so the probe should have loaded)? */
int tune_looks_python(char *const *cmd)
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
static void tune_explain_no_steps(const struct tune_run *r, const struct trial_result *tr,
                                  long value)
{
    const struct preset *p = &r->setup->preset;
    tune_say(r, TUNE_NOTE, "micro_batch=%ld: the command exited 0 after %.1fs without a "
                           "training step that autobatch could see, so it says nothing about "
                           "memory", value, tr->wall_s);
    if (tr->probe_processes > 0)
        tune_say(r, TUNE_NOTE, "the in-process probe saw torch %s load in %d process(es) but "
                               "no optimizer step: the trainer stopped before training, or "
                               "resumed from a finished checkpoint and had nothing left to do%s",
                 tr->probe_torch, tr->probe_processes,
                 p->knobs[KNOB_OUTPUT_DIR].via == VIA_NONE
                     ? " (preset has no output_dir knob, so the trainer used its own output "
                       "directory; add one with --knob output_dir=WHERE)"
                     : "; check its resume settings");
    else
        tune_say(r, TUNE_NOTE, "no optimizer step from the in-process probe (%s), no "
                               "$AUTOBATCH_REPORT line, and no training progress in the "
                               "output%s%s",
                 !r->plan->no_probe ? "not a PyTorch program, or the probe could not load"
                                    : "--no-probe",
                 tr->log_seen[0] ? ": " : "", tr->log_seen);
    tune_say(r, TUNE_NOTE, "make sure the command trains for at least a few steps; a trainer "
                           "that prints no progress can append {\"step\": N} lines to "
                           "$AUTOBATCH_REPORT, or a preset can name its progress line "
                           "(progress.line)");
}

/* The batch knob does not reach the trainer: what showed it (why, a
 * sentence), where the preset put the knob, and the fix.  Exit 2 follows. */
static void tune_knob_unreached(const struct tune_run *r, const char *why)
{
    static const char *const via[] = { "nothing", "flag", "Hydra override", "config key",
                                       "accelerate config key", "environment variable" };
    const struct preset *p = &r->setup->preset;
    const struct preset_knob *k = &p->knobs[KNOB_MICRO_BATCH];
    tune_say(r, TUNE_ERROR, "%s: the batch knob (preset '%s', %s '%s') does not reach the "
                            "trainer; say where it reads its batch size with --knob "
                            "micro_batch=WHERE or pick another --preset",
             why, p->name, via[k->via], k->where ? k->where : "");
}

/* The probe saw the trainer's DataLoader use another batch size. */
static void tune_explain_mismatch(const struct tune_run *r, const struct trial_result *tr,
                                  long value)
{
    char why[256];
    snprintf(why, sizeof why, "the trainer's DataLoader uses batch_size=%ld where autobatch "
                              "passed micro_batch=%ld", tr->loader_batch, value);
    tune_knob_unreached(r, why);
}

/*
 * Without the probe's view of the batch, the outside view: a knob that
 * reaches the trainer changes its memory or its time per step.  Two fits
 * 4 or more times apart look alike when their time per step is the same
 * (within three times their spreads plus 10%) and their peaks are too
 * (within 2% or 8 MiB).  Returns 2 when both were compared, 1 when the
 * times alike had no peaks to compare, 0 when they differ.
 */
static int tune_same_fit(const struct results_trial *a, const struct results_trial *b)
{
    int64_t pa = a->peak_vm_bytes > 0 ? a->peak_vm_bytes : a->peak_mem_bytes;
    int64_t pb = b->peak_vm_bytes > 0 ? b->peak_vm_bytes : b->peak_mem_bytes;
    int peaks = pa > 0 && pb > 0;
    if (b->micro_batch < 4 * a->micro_batch)
        return 0;
    if (peaks) {
        double d = (double)(pb > pa ? pb - pa : pa - pb), tol = 0.02 * (double)pa;
        if (d > (tol > 8.0 * 1048576 ? tol : 8.0 * 1048576))
            return 0;
    }
    double ma = a->step_time_mad_s > 0 ? a->step_time_mad_s : 0;
    double mb = b->step_time_mad_s > 0 ? b->step_time_mad_s : 0;
    double dt = b->step_time_s - a->step_time_s;
    if (dt < 0)
        dt = -dt;
    if (dt > 3 * (ma + mb) + 0.10 * a->step_time_s)
        return 0;
    return peaks ? 2 : 1;
}

/* Two fits that look alike from outside (tune_same_fit). */
static void tune_explain_unseen(const struct tune_run *r, const struct results_trial *a,
                                const struct results_trial *b)
{
    char why[256];
    snprintf(why, sizeof why, "micro_batch=%ld and micro_batch=%ld ran with the same memory and "
                              "the same time per step (%.3gs, %.3gs)", a->micro_batch,
             b->micro_batch, a->step_time_s, b->step_time_s);
    tune_knob_unreached(r, why);
}

int tune_knob_check(struct tune_run *r)
{
    for (size_t ci = 0; ci < r->space->ncells; ci++) {
        const struct cell *c = &r->space->cells[ci];
        const struct results_trial *lo = NULL, *hi = NULL;
        int failed = 0, seen = 0;
        for (size_t i = 0; i < r->res->ntrials; i++) {
            const struct results_trial *u = &r->res->trials[i];
            if (u->grad_accum != c->grad_accum || u->checkpointing != c->checkpointing ||
                u->extra != r->ctx->set_extra)
                continue;
            failed |= u->outcome != TRIAL_FIT && u->outcome != TRIAL_INTERRUPTED;
            seen |= u->loader_batch > 0 || u->batch_seen > 0;
            if (u->outcome != TRIAL_FIT || u->step_time_s <= 0)
                continue;
            if (!lo || u->micro_batch < lo->micro_batch)
                lo = u;
            if (!hi || u->micro_batch > hi->micro_batch)
                hi = u;
        }
        int same = failed || seen || !lo ? 0 : tune_same_fit(lo, hi);
        if (!same)
            continue;
        if (same == 1) {
            /* Time alone is no proof: at small sizes a real knob can change
             * a step's time by less than its noise.  Said, not refused. */
            if (!r->noted_unverified) {
                r->noted_unverified = 1;
                tune_say(r, TUNE_NOTE, "warning: micro_batch=%ld and micro_batch=%ld ran at the "
                                       "same time per step (%.3gs, %.3gs) and no memory figure "
                                       "was measured: autobatch cannot tell whether the batch "
                                       "knob reaches the trainer; check that the command reads "
                                       "it (--dry-run shows where it goes)", lo->micro_batch,
                         hi->micro_batch, lo->step_time_s, hi->step_time_s);
            }
            continue;
        }
        tune_explain_unseen(r, lo, hi);
        r->knob_unseen = 1;
        r->status = AB_EXIT_USAGE;
        return 1;
    }
    return 0;
}

/*
 * The probe's view: two sizes of one cell at least 1.5 times apart whose
 * model got the same batch (the leading dimension and the element count
 * of its first input, the latter within 1%), neither the size passed,
 * show that the knob does not reach the trainer.  One trial alone is not
 * enough: a model whose first input is sequence-first has another
 * leading dimension that still grows with the batch.  Returns the other
 * trial so matched, or NULL.
 */
static const struct results_trial *tune_batch_unseen(const struct tune_run *r,
                                                     const struct results_trial *t)
{
    if (t->outcome != TRIAL_FIT || t->batch_seen <= 0 || t->batch_seen == t->micro_batch ||
        strcmp(r->setup->unit, "samples"))
        return NULL;
    for (size_t i = 0; i < r->res->ntrials; i++) {
        const struct results_trial *u = &r->res->trials[i];
        if (u->id == t->id || u->outcome != TRIAL_FIT || u->grad_accum != t->grad_accum ||
            u->checkpointing != t->checkpointing || u->extra != t->extra ||
            u->batch_seen != t->batch_seen ||
            u->batch_seen == u->micro_batch)
            continue;
        long lo = u->micro_batch < t->micro_batch ? u->micro_batch : t->micro_batch;
        long hi = u->micro_batch < t->micro_batch ? t->micro_batch : u->micro_batch;
        if (2 * hi < 3 * lo)
            continue;
        if (u->elems_max > 0 && t->elems_max > 0) {
            double d = (double)(u->elems_max - t->elems_max);
            if ((d < 0 ? -d : d) > 0.01 * (double)u->elems_max)
                continue;
        }
        return u;
    }
    return NULL;
}

/* Say that the model got the same batch at two sizes. */
static void tune_explain_seen(const struct tune_run *r, const struct results_trial *a,
                              const struct results_trial *b)
{
    char why[256];
    snprintf(why, sizeof why, "the model got batches of %ld at micro_batch=%ld and at "
                              "micro_batch=%ld (the in-process probe saw its first input)",
             b->batch_seen, a->micro_batch, b->micro_batch);
    tune_knob_unreached(r, why);
}

/* Each tick of a trial here: sample the GPU, then the view's tick (the
 * command line moves its queued output along and its clock). */
static void tune_tick(void *ctx)
{
    const struct tune_run *r = ctx;
    gpu_tick(r->gpu);
    if (r->view.tick)
        r->view.tick(r->view.ctx);
}

/* Set NAME=value in a trial's environment, replacing an earlier NAME. */
static int tune_env_set(struct strvec *env, const char *name, const char *value)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < env->n; i++)
        if (!strncmp(env->v[i], name, len) && env->v[i][len] == '=')
            return strvec_replacef(env, i, "%s=%s", name, value);
    return strvec_pushf(env, "%s=%s", name, value);
}

/* The trial's devices, the emulated memory and the Slurm job step. */
static int tune_job_env(const struct tune_run *r, struct tune_job *j)
{
    const struct plan *plan = r->plan;
    struct strvec *env = &j->t.env;
    int rc = 0;
    if (j->slot) {
        char n[32];
        snprintf(n, sizeof n, "%ld", (long)(j->slot - r->slots));
        rc |= tune_env_set(env, "AUTOBATCH_SLOT", n);
    }
    if (j->slot && j->slot->devices[0] && !r->slurm) { /* a --parallel slot has none */
        rc |= tune_env_set(env, "CUDA_VISIBLE_DEVICES", j->slot->devices);
        rc |= tune_env_set(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    /* The probe's worst case first (probes/python/sitecustomize.py). */
    if (!plan->no_probe) {
        char n[32];
        snprintf(n, sizeof n, "%g", plan->worst_case_scan_s);
        rc |= tune_env_set(env, "AUTOBATCH_WORST_CASE", plan->worst_case ? plan->worst_case : "auto");
        if (plan->worst_case_scan_s > 0)
            rc |= tune_env_set(env, "AUTOBATCH_WORST_CASE_SCAN", n);
    }
    if (plan->emulate_bytes) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)plan->emulate_bytes);
        rc |= tune_env_set(env, "AUTOBATCH_EMULATE_GPU_MEMORY", n);
        if (r->emulate_lib) {
            rc |= inject_env_prepend(env, "LD_PRELOAD", r->emulate_lib);
        } else {
            rc |= tune_env_set(env, "AUTOBATCH_EMULATE_METHOD", "probe");
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
        /* --slurm-arg after ours (the user's --mem or --time wins); the
         * job's own options (--partition, ...) are sbatch's only */
        for (int i = 0; i < plan->nslurm_args; i++)
            if (slurm_arg_for_step(plan->slurm_args[i]))
                rc |= strvec_insert(&j->t.argv, k++, plan->slurm_args[i]);
        rc |= strvec_insert(&j->t.argv, k, "--");
        /* A heartbeat watchdog, as array tasks have: the step ends itself
         * when autobatch (and with it srun) was killed.  Steps an earlier
         * autobatch killed so left in this allocation go first. */
        static int swept;
        if (!swept) {
            swept = 1;
            int n = slurm_sweep_dead_steps();
            if (n > 0)
                tune_say(r, TUNE_NOTE, "cancelled %d job step(s) of an autobatch killed earlier in "
                                       "job %s", n, getenv("SLURM_JOB_ID"));
        }
        char self[4096], beat[sizeof j->tdir + 8];
        ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
        snprintf(beat, sizeof beat, "%s/alive", j->tdir);
        if (sl > 0) {
            self[sl] = '\0';
            rc |= slurm_step_argv(&j->t.argv, k + 1, self, beat);
        }
    }
    return rc ? -1 : 0;
}

/* Why a trial has a variable the user's environment does not. */
static const char *tune_env_why(const char *name, size_t len)
{
    static const struct { const char *name, *why; } known[] = {
        { "PYTHONPATH", "the in-process probe's directory, prepended (reads, changes nothing)" },
        { "LD_PRELOAD", "--emulate-gpu-memory's library, prepended" },
        { "CUDA_VISIBLE_DEVICES", "the trial's --gpus slot" },
        { "CUDA_DEVICE_ORDER", "the trial's --gpus slot, numbered as nvidia-smi does" },
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strlen(known[i].name) == len && !strncmp(known[i].name, name, len))
            return known[i].why;
    return "set by autobatch";
}

/*
 * Keep, once, what the first trial ran with beyond the user's
 * environment: every variable that is new or changed, less autobatch's
 * own AUTOBATCH_* and the preset's environment knobs (DESIGN.md 2.2).
 * Nothing is done when it cannot be kept (out of memory): the results
 * then list no variable, as before.
 */
static void tune_note_env(struct tune_run *r, const struct strvec *env)
{
    if (r->res->trial_env)
        return;
    const struct preset *p = &r->setup->preset;
    char **vars = calloc(env->n + 1, sizeof *vars);
    const char **why = calloc(env->n + 1, sizeof *why);
    size_t n = 0;
    for (size_t i = 0; vars && why && i < env->n; i++) {
        const char *v = env->v[i], *eq = strchr(v, '=');
        if (!eq || !strncmp(v, "AUTOBATCH_", 10))
            continue;
        size_t len = (size_t)(eq - v);
        int knob = 0;
        for (int k = 0; k < KNOB_COUNT && !knob; k++)
            knob = p->knobs[k].via == VIA_ENV && p->knobs[k].where &&
                   strlen(p->knobs[k].where) == len && !strncmp(p->knobs[k].where, v, len);
        char name[256];
        if (knob || len >= sizeof name)
            continue;
        memcpy(name, v, len);
        name[len] = '\0';
        const char *mine = getenv(name);
        if (mine && !strcmp(mine, eq + 1))
            continue;
        vars[n] = (char *)v;
        why[n++] = tune_env_why(v, len);
    }
    if (vars && why)
        (void)results_trial_env(r->res, vars, why, n);
    free(vars);
    free(why);
}

/*
 * Build trial j for (ci, value): its directory, its command and
 * environment, its options.  Returns 0; 1 when the budget is spent (no
 * trial); -1 after saying why (r->status is set).
 */
int tune_job_prepare(struct tune_run *r, struct tune_job *j, size_t ci, long value,
                     const struct tune_slot *slot, long round)
{
    const struct plan *plan = r->plan;
    struct setup *setup = r->setup;
    const struct cell *cell = &r->space->cells[ci];
    j->recording = !j->confirm && r->replay && guide_next(r->guide, r->space, ci, &value);
    double left = plan->budget_s > 0 ? plan->budget_s - (mono_now() - r->t0) : 0;
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
        (j->recording && mkdir(j->recdir, 0700)) || tune_make_channel(j->report) ||
        (!plan->no_probe && tune_make_channel(j->probe))) {
        tune_say(r, TUNE_ERROR, "cannot prepare trial %ld in '%s': %s", j->id, j->tdir,
                 strerror(errno));
        leftovers_remove_tree(j->tdir);
        r->status = AB_EXIT_USAGE;
        return -1;
    }
    struct inject_ctx *ctx = r->ctx;
    ctx->trial_id = j->id;
    ctx->report_path = j->report;
    ctx->probe_path = plan->no_probe ? NULL : j->probe;
    ctx->output_dir = want_out ? j->outdir : NULL;
    ctx->workdir = setup->preset.config_fixed ? j->wd : NULL;
    struct inject_candidate cand = { .micro_batch = value, .grad_accum = cell->grad_accum,
                                     .checkpointing = cell->checkpointing,
                                     .extra = ctx->set_extra };
    char err[512];
    struct inject_trial t0 = INJECT_TRIAL_INIT;
    j->t = t0;
    /* The confirmation run trains longer than a search trial: the steps
     * it may take (AUTOBATCH_MAX_STEPS) and the max_steps knob's limit
     * follow, so a trainer that stops itself does not end it early. */
    long max_steps = ctx->max_steps, step_limit = ctx->step_limit;
    if (j->confirm) {
        long want = plan->confirm_steps > 0 ? plan->warmup + plan->confirm_steps : step_limit;
        if (want > ctx->max_steps)
            ctx->max_steps = want;
        if (10 * ctx->max_steps > ctx->step_limit)
            ctx->step_limit = 10 * ctx->max_steps;
    }
    int built = inject_build(ctx, plan->command, environ, &cand, &j->t, err, sizeof err);
    ctx->max_steps = max_steps;
    ctx->step_limit = step_limit;
    if (built) {
        tune_say(r, TUNE_ERROR, "%s", err);
        leftovers_remove_tree(j->tdir);
        r->status = AB_EXIT_USAGE;
        return -1;
    }
    /* Under --trial-memory-limit the address space is the memory that
     * runs out: its peak is the trial's peak (the probe reads VmPeak). */
    if ((r->replay && tune_replay_env(&j->t.env, j->recording ? j->recdir : NULL)) ||
        (!r->replay && plan->trial_mem_limit > 0 &&
         strvec_pushf(&j->t.env, "AUTOBATCH_VMPEAK=1")) ||
        tune_job_env(r, j)) {
        tune_say(r, TUNE_ERROR, "out of memory");
        inject_trial_release(&j->t);
        leftovers_remove_tree(j->tdir);
        r->status = AB_EXIT_USAGE;
        return -1;
    }
    tune_note_env(r, &j->t.env);
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
        .log_rules = r->log_rules, .interrupt = r->interrupt,
        .hooks = { r->view.ctx, r->view.output, r->view.step, r, tune_tick },
    };
    /* An array trial's command is the follower: stopped, it cancels the
     * task and ends once Slurm has (slurm.h). */
    if (r->slurm_array && to.grace_s < SLURM_FOLLOW_STOP_S)
        to.grace_s = SLURM_FOLLOW_STOP_S;
    /* A boundary trial whose speed nothing needs is decided by memory
     * alone: past the second optimizer step (the first with the
     * optimizer's state; the probe's worst case puts the largest batches
     * there), a step over which the memory figure did not grow makes it
     * a fit, killed at once. */
    if (!j->confirm && !j->recording && space_memory_only(r->space, j->ci))
        to.memory_steps = TUNE_MEMORY_STEPS;
    /* A recording trial runs until the probe has written its trace: two
     * steps before the recording, three recorded, one more. */
    if (j->recording && to.target_steps < TUNE_RECORD_STEPS)
        to.target_steps = TUNE_RECORD_STEPS;
    /* The confirmation run soaks: --confirm's steps or time, whichever
     * ends first, and no noise extension. */
    if (j->confirm) {
        to.target_steps = plan->confirm_steps > 0 ? plan->warmup + plan->confirm_steps : 0;
        to.soak_s = plan->confirm_s;
        to.extra_steps = 0;
    }
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
/*
 * Batch is not the problem: a size that ran out of memory before its
 * second optimizer step, whose probe says that the weights, their
 * gradients and the optimizer's state alone (once allocated) are more
 * than the capacity, tells that no size fits in any cell: accumulation
 * and checkpointing save activations only, and a smaller batch holds
 * the same weights.  Say so at once (the answer gives the breakdown,
 * summary.c) and stop: 1.  Only when nothing has fitted (a fit would
 * contradict it) and the optimizer's state is known.
 */
static int tune_beyond_capacity(struct tune_run *r, const struct trial_result *tr, long value)
{
    const struct inproc_mem *m = &tr->mem;
    if (tr->outcome != TRIAL_OOM || !m->device[0] || !m->failure || m->optim_expected < 0 ||
        results_any_fit(r->res))
        return 0;
    double cap = choose_memory_limit(r->gpu, r->space, (double)r->plan->trial_mem_limit);
    long long fixed = m->params + (m->grads_expected > m->grads ? m->grads_expected : m->grads) +
                      (m->optim_expected > m->optim ? m->optim_expected : m->optim);
    if (!(cap > 0) || (double)fixed <= cap)
        return 0;
    tune_say(r, TUNE_NOTE, "micro_batch=%ld ran out with the weights, gradients and optimizer "
                           "state alone (%.2f GiB before any activation) above the %.2f GiB there "
                           "is: no size fits in any cell; the search stops", value,
             (double)fixed / 1073741824.0, cap / 1073741824.0);
    return 1;
}

int tune_job_finish(struct tune_run *r, struct tune_job *j, int shared)
{
    const struct plan *plan = r->plan;
    struct setup *setup = r->setup;
    struct space *space = r->space;
    struct trial_result *tr = &j->tr;
    const struct cell *cell = &space->cells[j->ci];
    long value = j->value;
    /* the GPUs Slurm gave the step or task, where known (slurm.h) */
    char slurm_gpus[128] = "", pending[128] = "";
    if (r->slurm)
        slurm_trial_gpus(j->tdir, slurm_gpus, sizeof slurm_gpus);
    if (r->slurm_array)
        slurm_trial_pending(j->tdir, pending, sizeof pending);
    /* The trial's tree is gone: its temporary config copies go too (a
     * recording trial's directory stays until its trace is read). */
    inject_trial_release(&j->t);
    if (!j->recording)
        leftovers_remove_tree(j->tdir);
    if (j->run_rc) {
        tune_say(r, TUNE_ERROR, "cannot start a trial: %s", strerror(j->run_errno));
        r->status = AB_EXIT_USAGE;
        return 1;
    }
    if (tr->outcome == TRIAL_SPAWN_FAILED) {
        tune_say(r, TUNE_ERROR, "cannot run '%s': %s; check the command", plan->command[0],
                 strerror(tr->spawn_errno));
        r->status = AB_EXIT_USAGE;
        return 1;
    }
    if (pending[0]) {
        /* Slurm never started it (--slurm-pending): no verdict on memory;
         * the search stops, keeping what fitted (session_exit). */
        tr->outcome = TRIAL_INTERRUPTED;
        if (!r->pending)
            tune_say(r, TUNE_NOTE, "Slurm did not start micro_batch=%ld within --slurm-pending "
                                   "(%s); the search stops: pick a partition that runs jobs, or "
                                   "raise --slurm-pending", value, pending);
        r->pending = 1;
        snprintf(r->res->slurm_pending, sizeof r->res->slurm_pending, "%s", pending);
    }
    int64_t peak = gpu_trial_view(r->gpu, j->peak, tr); /* the probe's CUDA view, else NVML's */
    /* Samples per step: the world size the trainer really runs with when
     * the probe saw it; a step printed per micro-batch (the preset says
     * so) carries no accumulation. */
    long world = tr->probe_world > 0 ? tr->probe_world : plan->world_size;
    int per_micro = tr->steps_from == STEPS_FROM_LOG &&
                    setup->preset.progress.step == STEP_IS_MICRO_BATCH;
    double samples = (double)value * (double)(per_micro ? 1 : cell->grad_accum) * (double)world;
    /* What the model got, when the probe saw it: samples/s counts the
     * batches trained, not the size passed (a knob that never reached
     * the trainer is caught below, across two sizes). */
    int in_samples = !strcmp(setup->unit, "samples");
    if (in_samples && tr->batch_seen > 0) {
        double got = per_micro ? (double)tr->batch_seen
                   : tr->probe_seen_per_step > 0 ? (double)tr->probe_seen_per_step
                   : (double)tr->batch_seen * (double)cell->grad_accum;
        samples = got * (double)world;
        if (tr->outcome == TRIAL_FIT && tr->batch_seen != value && !r->noted_seen) {
            r->noted_seen = 1;
            tune_say(r, TUNE_NOTE, "micro_batch=%ld: the model got batches of %ld samples "
                                   "(the leading dimension of its first input); samples/s counts "
                                   "what it got", value, tr->batch_seen);
        }
    }
    if (tr->probe_world > 0 && tr->probe_world != plan->world_size && !r->noted_world) {
        r->noted_world = 1;
        tune_say(r, TUNE_NOTE, "the trainer runs with world size %ld, not --world-size %ld: "
                               "samples/s counts %ld ranks; pass --world-size %ld so that "
                               "--global-batch is kept right", tr->probe_world, plan->world_size,
                 tr->probe_world, tr->probe_world);
    }
    if (!plan->no_probe && !tr->probe_processes && !r->noted_probe &&
        tune_looks_python(plan->command)) {
        r->noted_probe = 1;
        tune_say(r, TUNE_NOTE, "the in-process probe did not load in this Python trial (no "
                               "torch, PYTHONPATH reset, or python -S/-I); steps come from %s",
                 tr->steps_from == STEPS_FROM_REPORT ? "$AUTOBATCH_REPORT" : "the output");
    }
    if (tr->outcome == TRIAL_FIT && tr->batch_seen <= 0 && tr->loader_batch <= 0 &&
        !r->noted_outside) {
        r->noted_outside = 1;
        tune_say(r, TUNE_NOTE, "the batch the trainer got is not seen from inside (no probe "
                               "in a PyTorch process); whether the knob reaches it is checked "
                               "from outside after the search: memory and time per step must "
                               "change between the smallest and largest fits");
    }
    if (tr->tail_note[0])
        tune_say(r, TUNE_NOTE, "warning: %s", tr->tail_note);
    if (tr->probe_error[0] && !r->noted_probe_error) {
        r->noted_probe_error = 1;
        tune_say(r, TUNE_NOTE, "the in-process probe could not see everything: %s",
                 tr->probe_error);
    }
    if (tr->outcome == TRIAL_FIT && tr->alloc_retries > 0) /* results: "at_edge" */
        tune_say(r, TUNE_NOTE, "micro_batch=%ld fit at the edge: the allocator freed its cache and "
                               "retried %ld times (rank %ld); usually slower", value,
                 tr->alloc_retries, tr->alloc_retries_rank);
    /* No speed from a trial beside others, a memory-only one, or a
     * recording one (the profiler slows its steps: its speed is not the
     * trainer's, and a runner-up at it would flatter the choice). */
    double sps = tr->step_time_s > 0 && !shared && !tr->memory_only && !j->recording
                   ? samples / tr->step_time_s : -1;
    if (j->in_worker && r->view.trial_start) /* its start was not shown: say it with its end */
        r->view.trial_start(r->view.ctx, j->id, value, cell->grad_accum, cell->checkpointing,
                            j->to.target_steps, NULL);
    if (r->view.trial_end)
        r->view.trial_end(r->view.ctx, tr, tr->outcome == TRIAL_FIT ? sps : -1);
    if (tr->outcome == TRIAL_TIMEOUT && j->budget_caps) {
        r->budget_hit = 1;
        tr->outcome = TRIAL_INTERRUPTED;
    }
    struct results_trial rt = {
        .id = j->id, .micro_batch = value, .grad_accum = cell->grad_accum,
        .checkpointing = cell->checkpointing, .extra = r->ctx->set_extra,
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
        .round = j->round, .shared = shared, .memory_only = tr->memory_only,
    };
    if (r->slurm)
        snprintf(rt.devices, sizeof rt.devices, "%s", slurm_gpus);
    else if (j->slot)
        snprintf(rt.devices, sizeof rt.devices, "%s", j->slot->devices);
    if (!r->res->teardown)
        r->res->teardown = trial_isolated_name(tr->isolation);
    results_trial_seen(&rt, tr);
    snprintf(rt.probe_torch, sizeof rt.probe_torch, "%s", tr->probe_torch);
    snprintf(rt.probe_hook, sizeof rt.probe_hook, "%s", tr->probe_hook);
    /* The confirmation run is kept apart: the search's trials (and their
     * count) stay what the search ran. */
    if (j->confirm)
        results_add_confirm(r->res, &rt);
    else
        results_add_trial(r->res, &rt);
    if (events_on())
        events_emit(j->confirm ? "confirm_end" : "trial_end", results_trial_json(&rt));
    if (tr->teardown_incomplete)
        tune_say(r, TUNE_NOTE, "warning: a process outside the trial's tree kept its output "
                               "open; gave up waiting for it");

    if (r->budget_hit || tr->outcome == TRIAL_INTERRUPTED)
        return 1;
    if (tr->outcome == TRIAL_CRASH) {
        tune_show_crash(r, tr);
        r->crashed = 1;
        return 1;
    }
    if (tr->outcome == TRIAL_NO_STEPS) {
        tune_explain_no_steps(r, tr, value);
        r->no_steps = 1;
        return 1;
    }
    if (tr->outcome == TRIAL_MISMATCH) {
        tune_explain_mismatch(r, tr, value);
        r->status = AB_EXIT_USAGE;
        return 1;
    }
    const struct results_trial *got = j->confirm ? NULL : tune_batch_unseen(r, &rt);
    if (got) {
        tune_explain_seen(r, got, &rt);
        r->knob_unseen = 1;
        r->status = AB_EXIT_USAGE;
        return 1;
    }
    if (j->confirm && (tr->outcome == TRIAL_TIMEOUT || tr->outcome == TRIAL_HANG)) {
        /* A soak longer than --trial-timeout allows says nothing about
         * memory: the choice stays, unconfirmed. */
        tune_say(r, TUNE_NOTE, "the confirmation run of micro_batch=%ld %s; the choice stays, "
                               "unconfirmed (raise --%s or lower --confirm)", value,
                 tr->outcome == TRIAL_TIMEOUT ? "ran past --trial-timeout"
                                              : "printed nothing for --hang-timeout",
                 tr->outcome == TRIAL_TIMEOUT ? "trial-timeout" : "hang-timeout");
        return 0;
    }
    if (tr->outcome == TRIAL_TIMEOUT || tr->outcome == TRIAL_HANG) {
        /* No memory evidence, but the size does not work as it is: treat
         * it as an upper bound and say so. */
        r->timeouts++;
        tune_say(r, TUNE_NOTE, "micro_batch=%ld %s; counted as not fitting (raise --%s if it "
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
    /* The choice failed its confirmation: the boundary lies below it, and
     * the cell's search, finished before, looks for it again. */
    if (j->confirm && !obs.fit)
        space_reopen(space, j->ci);
    if (r->replay && !j->confirm) {
        char note[1024];
        guide_record(r->guide, space, j->ci, value, j->recording, obs.fit,
                     r->replay_cpu ? tr->peak_vm_bytes : peak, j->recdir, note, sizeof note);
        if (note[0])
            tune_say(r, TUNE_NOTE, "%s", note);
    }
    if (j->recording)
        leftovers_remove_tree(j->tdir);
    if (!obs.fit && !j->confirm && tune_beyond_capacity(r, tr, value))
        return 1;
    return 0;
}

/* From a login node: jobs[0..n) go out as one job array, and each
 * trial's command becomes the follower of its task (slurm.h).  Their
 * shared files live in round-ID, which tune_slurm_done() removes. */
int tune_slurm_submit(struct tune_run *r, struct tune_job *jobs, size_t n)
{
    if (!r->slurm_array)
        return 0;
    struct slurm_task tasks[SPACE_MAX_ROUND];
    char rounddir[4200], name[64], gres[32], err[512];
    snprintf(rounddir, sizeof rounddir, "%s/round-%ld", r->dir, jobs[0].id);
    snprintf(name, sizeof name, "autobatch-%ld", (long)getpid());
    /* --slurm-targets, one: its partition first (the user's --slurm-arg
     * cannot name one), its GRES type in each trial's GPU request */
    const struct plan *plan = r->plan;
    const char *target = plan->ntargets == 1 ? plan->targets[0] : NULL;
    const char *type = target ? strchr(target, ':') : NULL;
    snprintf(gres, sizeof gres, "gpu:%s%s%ld", type ? type + 1 : "", type ? ":" : "",
             plan->gpus_per_trial);
    const char *extra[SLURM_MAX_ARGS + 1];
    char part[160];
    size_t nextra = 0;
    if (target) {
        snprintf(part, sizeof part, "--partition=%.*s",
                 (int)(type ? (size_t)(type - target) : strlen(target)), target);
        extra[nextra++] = part;
    }
    for (int i = 0; i < plan->nslurm_args && nextra < sizeof extra / sizeof *extra; i++)
        extra[nextra++] = plan->slurm_args[i];
    if (mkdir(rounddir, 0700)) {
        tune_say(r, TUNE_ERROR, "cannot make '%s': %s", rounddir, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        tasks[i] = (struct slurm_task){ &jobs[i].t.argv, jobs[i].t.env.v, jobs[i].t.cwd,
                                        jobs[i].tdir };
    long minutes = plan->trial_timeout_s > 0 ? (long)(plan->trial_timeout_s / 60) + 2 : 0;
    if (slurm_array_submit(tasks, n, rounddir, name, plan->gpus[0] || type ? gres : NULL, minutes,
                           extra, nextra, r->self, plan->slurm_pending_s, err, sizeof err)) {
        tune_say(r, TUNE_ERROR, "--launcher slurm: %s", err);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(jobs[i].slurm_job, sizeof jobs[i].slurm_job, "%s", jobs[i].t.argv.v[2]);
    return 0;
}

/* The round's shared files (tune_slurm_submit) go once its tasks ended. */
void tune_slurm_done(const struct tune_run *r, const struct tune_job *jobs)
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
void tune_slurm_after(struct tune_run *r, const struct tune_job *j)
{
    if (!r->slurm)
        return;
    if (j->slurm_job[0]) {
        if (slurm_cancel_wait(j->slurm_job, 30))
            tune_say(r, TUNE_NOTE, "warning: Slurm still lists job %s 30 s after it was cancelled",
                     j->slurm_job);
        return;
    }
    char name[64];
    snprintf(name, sizeof name, "autobatch-%ld-%ld", (long)getpid(), j->id);
    int left = slurm_sweep_steps(name, 30);
    if (left > 0)
        tune_say(r, TUNE_NOTE, "warning: Slurm still lists %d job step(s) named %s 30 s after they were cancelled",
                 left, name);
}

/* The --events line of a trial's start. */
void tune_event_start(const struct tune_run *r, const struct tune_job *j)
{
    if (!events_on())
        return;
    const struct cell *c = &r->space->cells[j->ci];
    json_t *o = json_pack("{s:I, s:I, s:I, s:b}", "trial", (json_int_t)j->id, "micro_batch",
                          (json_int_t)j->value, "grad_accum", (json_int_t)c->grad_accum,
                          "checkpointing", c->checkpointing);
    if (o && j->round > 0)
        json_object_set_new(o, "round", json_integer(j->round));
    if (o && j->slot && j->slot->devices[0] && !r->slurm) /* Slurm's: known at the end */
        json_object_set_new(o, "devices", json_string(j->slot->devices));
    events_emit(j->confirm ? "confirm_start" : "trial_start", o);
}

/* Run trial j here, with its output shown (through r->run_trial when
 * the caller gave one). */
void tune_job_run(struct tune_run *r, struct tune_job *j)
{
    const struct cell *cell = &r->space->cells[j->ci];
    struct trial_spec spec = { j->t.argv.v, j->t.env.v, j->t.cwd };
    if (r->view.bracket)
        r->view.bracket(r->view.ctx, search_max_fit(&cell->search),
                        search_min_fail(&cell->search));
    if (r->view.trial_start)
        r->view.trial_start(r->view.ctx, j->id, j->value, cell->grad_accum, cell->checkpointing,
                            j->to.memory_steps ? j->to.memory_steps + 1 : j->to.target_steps,
                            j->t.argv.v);
    tune_event_start(r, j);
    gpu_use(r->gpu, j->slot ? j->slot->mask : 0);
    gpu_trial_start(r->gpu);
    j->run_rc = r->run_trial ? r->run_trial(r->trial_ctx, &spec, &j->to, &j->tr)
                             : trial_run(&spec, &j->to, &j->tr);
    j->run_errno = errno;
    j->peak = gpu_trial_peak(r->gpu, j->tr.peak_mem_bytes);
    tune_slurm_after(r, j);
}
