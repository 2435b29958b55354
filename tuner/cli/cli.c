/* SPDX-License-Identifier: MIT */
/*
 * cli: option table, handlers per kind, help text, and the checks that a
 * command can run at all (see cli.h).  Everything here is about talking to
 * the user; the engine never sees argv.
 */
#include "cli/cli.h"
#include "cli/hint.h"
#include "cli/say.h"
#include "util/which.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#include "preset.h"
#include "revision.h"
#include "util/units.h"

enum opt_kind { OPT_FLAG, OPT_STRING, OPT_COUNT, OPT_DURATION, OPT_RANGE };

enum opt_id {
    O_BASELINE, O_BATCH, O_BUDGET, O_CHECKPOINTING, O_CONFIG, O_CONFIRM, O_NO_CONFIRM, O_FULL_TRIALS, O_DRY_RUN, O_EMULATE_GPU_MEMORY,
    O_EMULATE_WITH, O_EVENTS, O_ALLOW,
    O_GLOBAL_BATCH, O_GPUS, O_GPUS_PER_TRIAL, O_PARALLEL, O_GRAD_ACCUM, O_LAUNCHER,
    O_HANG_TIMEOUT, O_HEADROOM, O_HELP, O_HTML, O_JSON, O_JUNIT, O_KILL_GRACE, O_KNOB,
    O_MARKDOWN, O_NO_CACHE, O_NO_PROBE, O_PRESET, O_QUIET, O_REGRESSION_THRESHOLD, O_REPLAY, O_NO_REPLAY, O_SHOW_OUTPUT, O_SLURM_ARG, O_SLURM_PENDING, O_SLURM_TARGETS, O_STEPS, O_KEEP_TRACES,
    O_TRIAL_MEMORY_LIMIT, O_TRIAL_TIMEOUT, O_VERBOSE, O_WEBHOOK, O_WEBHOOK_FORMAT,
    O_WEBHOOK_INSECURE, O_VERSION, O_WARMUP,
    O_WORLD_SIZE, O_WORST_CASE, O_WORST_CASE_SCAN, O_WRITE, O_WRITE_TARGET,
};

struct opt {
    const char *name;
    enum opt_kind kind;
    char letter;
    enum opt_id id;
    /* A trainer is unlikely to take an option of this name (T below), so
     * one written after the command was most likely meant for autobatch:
     * cli_warn_after() says so.  Not T: names that trainers take often
     * (--config, --steps, --warmup, --gpus, --world-size, --grad-accum,
     * --dry-run, --launcher of the deepspeed launcher, --help, --quiet,
     * --verbose, --version). */
    int ours;
};
#define T 1

/* Sorted by name. */
static const struct opt cli_opts[] = {
    { "allow", OPT_STRING, 0, O_ALLOW, T },
    { "baseline", OPT_STRING, 0, O_BASELINE, T },
    { "batch", OPT_RANGE, 0, O_BATCH, T },
    { "budget", OPT_DURATION, 0, O_BUDGET, T },
    { "checkpointing", OPT_STRING, 0, O_CHECKPOINTING, T },
    { "config", OPT_STRING, 0, O_CONFIG, 0 },
    { "confirm", OPT_STRING, 0, O_CONFIRM, T },
    { "dry-run", OPT_FLAG, 0, O_DRY_RUN, 0 },
    { "emulate-gpu-memory", OPT_STRING, 0, O_EMULATE_GPU_MEMORY, T },
    { "emulate-with", OPT_STRING, 0, O_EMULATE_WITH, T },
    { "events", OPT_STRING, 0, O_EVENTS, T },
    { "global-batch", OPT_COUNT, 0, O_GLOBAL_BATCH, T },
    { "gpus", OPT_STRING, 0, O_GPUS, 0 },
    { "gpus-per-trial", OPT_COUNT, 0, O_GPUS_PER_TRIAL, T },
    { "parallel", OPT_COUNT, 0, O_PARALLEL, T },
    { "grad-accum", OPT_STRING, 0, O_GRAD_ACCUM, 0 },
    { "hang-timeout", OPT_DURATION, 0, O_HANG_TIMEOUT, T },
    { "headroom", OPT_STRING, 0, O_HEADROOM, T },
    { "help", OPT_FLAG, 'h', O_HELP, 0 },
    { "html", OPT_STRING, 0, O_HTML, T },
    { "json", OPT_STRING, 0, O_JSON, T },
    { "junit", OPT_STRING, 0, O_JUNIT, T },
    { "keep-traces", OPT_STRING, 0, O_KEEP_TRACES, T },
    { "kill-grace", OPT_DURATION, 0, O_KILL_GRACE, T },
    { "knob", OPT_STRING, 0, O_KNOB, T },
    { "launcher", OPT_STRING, 0, O_LAUNCHER, 0 },
    { "markdown", OPT_STRING, 0, O_MARKDOWN, T },
    { "no-cache", OPT_FLAG, 0, O_NO_CACHE, T },
    { "no-confirm", OPT_FLAG, 0, O_NO_CONFIRM, T },
    { "full-trials", OPT_FLAG, 0, O_FULL_TRIALS, T },
    { "no-probe", OPT_FLAG, 0, O_NO_PROBE, T },
    { "preset", OPT_STRING, 0, O_PRESET, T },
    { "quiet", OPT_FLAG, 'q', O_QUIET, 0 },
    { "regression-threshold", OPT_STRING, 0, O_REGRESSION_THRESHOLD, T },
    { "replay", OPT_FLAG, 0, O_REPLAY, T },
    { "no-replay", OPT_FLAG, 0, O_NO_REPLAY, T },
    { "show-output", OPT_FLAG, 0, O_SHOW_OUTPUT, T },
    { "slurm-arg", OPT_STRING, 0, O_SLURM_ARG, T },
    { "slurm-pending", OPT_DURATION, 0, O_SLURM_PENDING, T },
    { "slurm-targets", OPT_STRING, 0, O_SLURM_TARGETS, T },
    { "steps", OPT_COUNT, 0, O_STEPS, 0 },
    { "trial-memory-limit", OPT_STRING, 0, O_TRIAL_MEMORY_LIMIT, T },
    { "trial-timeout", OPT_DURATION, 0, O_TRIAL_TIMEOUT, T },
    { "verbose", OPT_FLAG, 'v', O_VERBOSE, 0 },
    { "version", OPT_FLAG, 'V', O_VERSION, 0 },
    { "warmup", OPT_COUNT, 0, O_WARMUP, 0 },
    { "webhook", OPT_STRING, 0, O_WEBHOOK, T },
    { "webhook-format", OPT_STRING, 0, O_WEBHOOK_FORMAT, T },
    { "webhook-insecure", OPT_FLAG, 0, O_WEBHOOK_INSECURE, T },
    { "world-size", OPT_COUNT, 0, O_WORLD_SIZE, 0 },
    { "worst-case", OPT_STRING, 0, O_WORST_CASE, T },
    { "worst-case-scan", OPT_DURATION, 0, O_WORST_CASE_SCAN, T },
    { "write", OPT_FLAG, 0, O_WRITE, T },
    { "write-target", OPT_STRING, 0, O_WRITE_TARGET, T },
};
#undef T

static const char cli_usage[] =
"usage: autobatch [OPTIONS] -- COMMAND [ARG...]\n"
"       autobatch config get FILE KEY\n"
"       autobatch config set FILE KEY=VALUE...\n"
"       autobatch report RESULTS [--format markdown|html|junit] [-o FILE]\n"
"       autobatch matrix RESULTS... [--format markdown|json] [-o FILE]\n"
"       autobatch notify [RESULTS] [--webhook URL] [--webhook-format F]\n"
"       autobatch predict TRACES_DIR --capacity SIZE [--batch MIN:MAX[:STEP]]\n"
"       autobatch presets\n"
"       autobatch help [TOPIC]\n"
"\n"
"Find the largest micro-batch that fits in memory by running COMMAND for a\n"
"few steps per candidate, watching its output for out-of-memory errors from\n"
"any framework and any rank, and tearing its whole process tree down after\n"
"each trial.\n"
"\n"
"How knobs reach the command:\n"
"  --preset NAME|FILE|auto  where the knobs live (default hf): hf, env, hydra,\n"
"                        json, yaml, f5-tts, parler-tts, coqui, orpheus,\n"
"                        deepspeed, accelerate, lightning, espnet ('autobatch\n"
"                        presets' says what each does); auto picks one from\n"
"                        the command and --config and says which\n"
"  --config FILE         the project's config file; trials get a patched copy\n"
"  --knob NAME=WHERE     override a preset: NAME is micro_batch, grad_accum,\n"
"                        checkpointing or max_steps; WHERE a --flag, env:VAR,\n"
"                        key:PATH, override:PATH, accelerate:PATH or a key path\n"
"  --write               write the choice into --config (default: show the diff);\n"
"                        edits made to it meanwhile are kept, but one to a value\n"
"                        the choice sets stops the write (exit 2)\n"
"Search:\n"
"  --batch MIN:MAX[:STEP]  micro-batch range and granularity (default 1:1024:1)\n"
"  --steps N             measured steps per throughput trial (default 5)\n"
"  --warmup N            steps discarded before measuring (default 2)\n"
"  --full-trials         boundary trials measure throughput too (by default on a\n"
"                        GPU with the probe they end once memory stops growing)\n"
"  --grad-accum LIST     gradient-accumulation steps to try, e.g. 1,2,4,8\n"
"                        (default: the command's or config's own value)\n"
"  --checkpointing off|on|both  try activation checkpointing (default: leave it;\n"
"                        turned on when micro_batch=1 fits nowhere without it)\n"
"  --allow LIST          when micro_batch=1 fits nowhere, may also turn on these\n"
"                        knobs (never without this): sharding (FSDP, ZeRO-3;\n"
"                        several ranks), precision (bf16 mixed precision),\n"
"                        optim8bit (8-bit AdamW)\n"
"  --global-batch N      keep micro x grad-accum x world size = N\n"
"  --world-size N        data-parallel ranks the command starts (default 1)\n"
"  --headroom PCT        keep PCT percent of device memory free (default 0)\n"
"  --no-cache            ignore and do not update the warm-start cache\n"
"  --confirm STEPS|D     run the choice once more, through the largest batches, for\n"
"                        STEPS measured steps or D (default 20 steps or 60s,\n"
"                        whichever ends first); a failure moves the choice down\n"
"  --no-confirm          skip that confirmation run\n"
"  --worst-case off|auto|scan  make each trial meet the batches that need the most\n"
"                        memory first: auto orders them by a length signal of the\n"
"                        dataset (lengths, durations, ...), else scans; scan always\n"
"                        scans the loader's batches (default auto; needs the probe)\n"
"  --worst-case-scan D   how long a scan may look at batches (default 30s)\n"
"  --no-probe            do not load the in-process probe into Python trials\n"
"  --replay              record two small trials' allocations per cell, predict the\n"
"                        boundary, and run the prediction and the size above first\n"
"                        (needs the probe; on CPU, --trial-memory-limit); on by\n"
"                        default for a Python command on a GPU, one trial at a\n"
"                        time, without a warm start or --global-batch\n"
"  --no-replay           search without it\n"
"  --keep-traces DIR     keep --replay's traces in DIR for autobatch predict\n"
"Limits (durations like 90s, 10m, 2h):\n"
"  --trial-timeout D     end a trial after D (default 20m)\n"
"  --hang-timeout D      end a trial after D without output (default 5m)\n"
"  --budget D            stop searching after D, keep the best so far (default: none)\n"
"  --kill-grace D        SIGTERM to SIGKILL when tearing a trial down (default 3s)\n"
"  --trial-memory-limit SIZE  cap each trial process's address space (ulimit -v),\n"
"                        e.g. 512M or 2G: CPU jobs then meet a real allocator failure\n"
"GPUs and clusters:\n"
"  --gpus all|LIST       run trials side by side, each on its own GPUs (LIST: indices\n"
"                        or UUIDs, e.g. 0,1,2,3); the boundary search proposes one\n"
"                        size per slot a round; throughput is measured one at a time;\n"
"                        from a login node (job arrays) --gpus N: how many GPUs\n"
"  --gpus-per-trial K    GPUs each trial gets (default 1)\n"
"  --parallel N          run N CPU trials side by side, as --gpus does (needs\n"
"                        --trial-memory-limit: N caps within the free memory,\n"
"                        N at most the cores)\n"
"  --launcher local|slurm  run each trial as a Slurm job step inside an allocation,\n"
"                        or as a task of a job array from a login node (default:\n"
"                        slurm when SLURM_JOB_ID is set)\n"
"  --slurm-arg ARG       a Slurm option, --name=value (repeatable): to sbatch for job\n"
"                        arrays, and to srun for job steps unless it is the job's\n"
"                        (--partition, --account, --qos, ...); e.g. --slurm-arg\n"
"                        --partition=gpu --slurm-arg --mem=64G\n"
"  --slurm-pending D     from a login node: a trial still pending in the queue after\n"
"                        D is cancelled, and the search stops there (default: wait)\n"
"  --slurm-targets LIST  from a login node: PARTITION or PARTITION:GRES_TYPE, comma-\n"
"                        separated; each searched as its own job arrays, side by side;\n"
"                        results per target, one matrix, one webhook post\n"
"  --write-target T      with several --slurm-targets: write T's choice (implies --write)\n"
"  --emulate-gpu-memory SIZE  make every GPU behave as one of SIZE (e.g. 24G): what\n"
"                        fits on a smaller card, measured on a big one\n"
"  --emulate-with preload|probe  how: an LD_PRELOAD library that caps device\n"
"                        allocations for any framework (default), or PyTorch's\n"
"                        per-process memory fraction through the in-process probe\n"
"Output:\n"
"  --json FILE|-         write the results file (- for stdout); a device or FIFO\n"
"                        is written through, never replaced\n"
"  --markdown FILE, --junit FILE, --html FILE  reports (HTML: one file, inline SVG)\n"
"  --baseline FILE       compare with an earlier results file; exit 6 on a regression\n"
"  --regression-threshold PCT  a throughput drop above PCT is a regression (5)\n"
"  --webhook URL         post the results (also AUTOBATCH_WEBHOOK_URL); signed with\n"
"                        AUTOBATCH_WEBHOOK_SECRET when set\n"
"  --webhook-format F    generic, slack, discord or teams (generic)\n"
"  --webhook-insecure    do not verify the webhook's TLS certificate\n"
"  --events FILE|-       one JSON object per line as things happen (start, each\n"
"                        trial's start, steps and end, the choice, the end)\n"
"  --dry-run             print each cell's first trial (command line, environment)\n"
"                        and run nothing\n"
"  --show-output         on a terminal, show the command's output as it arrives\n"
"                        (default there: hidden behind a live status; elsewhere\n"
"                        it is shown unless --quiet)\n"
"  -q, --quiet           hide the command's output everywhere (autobatch's own\n"
"                        lines stay; a failed trial's last lines are printed)\n"
"  -v, --verbose         show each trial's command line and environment\n"
"  -h, --help            this text; 'autobatch help TOPIC' for a subcommand's\n"
"  -V, --version         the version\n"
"\n"
"Every trial gets AUTOBATCH_TRIAL, AUTOBATCH_MICRO_BATCH, AUTOBATCH_GRAD_ACCUM,\n"
"AUTOBATCH_CHECKPOINTING, AUTOBATCH_MAX_STEPS and AUTOBATCH_REPORT (a file the\n"
"trainer may append {\"step\": N, \"samples\": S, \"time\": T} lines to).\n"
"\n"
"Exit status: 0 chosen, 2 bad usage, 3 nothing fits, 4 the command failed\n"
"for another reason than memory, 5 budget ran out first, 6 a regression\n"
"against --baseline, 130 interrupted.\n"
"\n"
"Options go before the command (or before '--'): every word after the command\n"
"is the command's, so one of autobatch's own options written there goes to it,\n"
"with a warning.  A first word that names a subcommand runs the subcommand; to\n"
"tune a program of the same name, write 'autobatch -- report ...'.\n"
"\n"
"Examples:\n"
"  autobatch --preset hf --batch 1:512 --json r.json -- accelerate launch train.py\n"
"  autobatch --preset env --steps 10 --budget 30m -- python train.py --config c.yaml\n"
"  autobatch --quiet --json - -- torchrun --nproc_per_node 2 train.py > r.json\n";

const char *const cli_subcommands[] = {
    "config", "report", "matrix", "notify", "predict", "presets", "help", NULL,
};

void cli_help(FILE *f)
{
    fputs(cli_usage, f);
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_vline(stderr, "autobatch: error: ", fmt, ap); /* may quote a file or a trainer */
    va_end(ap);
}

static enum cli_status cli_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static enum cli_status cli_bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_vline(stderr, "autobatch: error: ", fmt, ap);
    va_end(ap);
    fputs("try 'autobatch --help'\n", stderr);
    return CLI_USAGE;
}

static const struct opt *cli_find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof cli_opts / sizeof *cli_opts; i++)
        if (strlen(cli_opts[i].name) == len && !strncmp(cli_opts[i].name, name, len))
            return &cli_opts[i];
    return NULL;
}

static const struct opt *cli_find_short(char c)
{
    for (size_t i = 0; i < sizeof cli_opts / sizeof *cli_opts; i++)
        if (cli_opts[i].letter == c)
            return &cli_opts[i];
    return NULL;
}

/* An unknown option, word[0..len) as written (its name; a value after
 * '=' is not shown): the one-line error, with the option the user most
 * likely meant when one is close ("did you mean" names the fix, so the
 * "try --help" line is left out). */
static enum cli_status cli_unknown(const char *word, size_t len)
{
    const char *names[sizeof cli_opts / sizeof *cli_opts];
    for (size_t i = 0; i < sizeof cli_opts / sizeof *cli_opts; i++)
        names[i] = cli_opts[i].name;
    /* --name, or -name for one dash too few; a single letter (-x) is a
     * short option we do not have, not a long one to guess at. */
    size_t skip = word[1] == '-' ? 2 : 1;
    const char *guess = len > skip + (skip == 1) ? hint_closest(word + skip, len - skip, names,
                                                               sizeof names / sizeof *names)
                                                 : NULL;
    if (!guess)
        return cli_bad("unknown option '%.*s'", (int)len, word);
    cli_error("unknown option '%.*s'; did you mean '--%s'?", (int)len, word, guess);
    return CLI_USAGE;
}

/* --preset NAME, a name that is no built-in preset (nor auto, nor a
 * file): when one is close, say which was meant.  Any other unknown name
 * is left to setup_load, whose error lists them all. */
static enum cli_status cli_check_preset(const char *name)
{
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 5 && !strcmp(name + n - 5, ".yaml")) ||
        (n > 4 && !strcmp(name + n - 4, ".yml")) || !strcmp(name, "auto"))
        return CLI_RUN;
    const char *const *builtin = preset_builtin_names();
    for (size_t i = 0; builtin[i]; i++)
        if (!strcmp(builtin[i], name))
            return CLI_RUN;
    static const char *const autos[] = { "auto", NULL };
    const char *guess = hint_closest(name, n, builtin, (size_t)-1);
    if (!guess)
        guess = hint_closest(name, n, autos, 1);
    if (!guess)
        return CLI_RUN;
    cli_error("--preset: unknown preset '%s'; did you mean '%s'? ('autobatch presets' lists "
              "them)", name, guess);
    return CLI_USAGE;
}

/* MIN:MAX[:STEP], each a whole number >= 1, MIN <= MAX. */
int cli_batch_range(const char *arg, long *min, long *max, long *step)
{
    char buf[128], *f[4];
    long v[3] = { 0, 0, 1 };
    int n = 0, ok = strlen(arg) < sizeof buf;
    snprintf(buf, sizeof buf, "%s", arg);
    f[n++] = buf;
    for (char *s = buf; n < 4 && (s = strchr(s, ':')); n++) {
        *s++ = '\0';
        f[n] = s;
    }
    ok = ok && n >= 2 && n <= 3;
    for (int k = 0; ok && k < n; k++)
        ok = !units_long(f[k], 0, 1L << 40, &v[k]);
    if (!ok)
        return cli_bad("--batch '%s': expected MIN:MAX or MIN:MAX:STEP, e.g. --batch 1:512", arg),
               -1;
    if (v[0] < 1)
        return cli_bad("--batch '%s': MIN must be at least 1, e.g. --batch 1:%ld", arg,
                       v[1] > 0 ? v[1] : 512), -1;
    if (v[1] < v[0])
        return cli_bad("--batch '%s': MAX is below MIN; write the smaller number first, "
                       "e.g. --batch %ld:%ld", arg, v[1] > 0 ? v[1] : 1, v[0]), -1;
    if (v[2] < 1)
        return cli_bad("--batch '%s': STEP must be at least 1", arg), -1;
    *min = v[0];
    *max = v[1];
    *step = v[2];
    return 0;
}

/* --slurm-targets LIST: PARTITION[:GRES_TYPE], comma-separated, each
 * once, names Slurm takes (letters, digits, '_', '-', '.'). */
static enum cli_status cli_targets(const char *arg, struct plan *p)
{
    if (strlen(arg) >= sizeof p->targets_buf)
        return cli_bad("--slurm-targets: the list is too long (at most %zu characters)",
                       sizeof p->targets_buf - 1);
    snprintf(p->targets_buf, sizeof p->targets_buf, "%s", arg);
    p->ntargets = 0;
    char *save = NULL;
    for (char *t = strtok_r(p->targets_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t part = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.");
        size_t type = t[part] == ':' ? strspn(t + part + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
                                                          "klmnopqrstuvwxyz0123456789_-.") : 0;
        if (!part || (t[part] && (t[part] != ':' || !type || t[part + 1 + type])))
            return cli_bad("--slurm-targets '%s': each target is PARTITION or PARTITION:GRES_TYPE, "
                           "e.g. --slurm-targets a100,h100:h100", arg);
        for (int k = 0; k < p->ntargets; k++)
            if (!strcmp(p->targets[k], t))
                return cli_bad("--slurm-targets '%s': '%s' is named twice", arg, t);
        if (p->ntargets == PLAN_MAX_TARGETS)
            return cli_bad("--slurm-targets: at most %d targets", PLAN_MAX_TARGETS);
        p->targets[p->ntargets++] = t;
    }
    if (!p->ntargets)
        return cli_bad("--slurm-targets is empty; give partitions, e.g. --slurm-targets a100,h100");
    return CLI_RUN;
}

static enum cli_status cli_range(const char *arg, struct plan *p)
{
    if (cli_batch_range(arg, &p->batch_min, &p->batch_max, &p->batch_step))
        return CLI_USAGE;
    p->batch_given = 1;
    return CLI_RUN;
}

/* "5" or "5%", from 0 to max, as a fraction. */
static int cli_percent(const char *arg, double max, double *out)
{
    const char *end;
    double v;
    if (units_decimal(arg, &v, &end) || (*end && strcmp(end, "%")) || v > max)
        return -1;
    *out = v / 100.0;
    return 0;
}

/* An output file's path: /dev/stdout is `-`, so that it goes through our
 * stdout stream (in order with what we print, and our messages move to
 * stderr as they do for `--json -`). */
static const char *cli_output(const char *arg)
{
    return strcmp(arg, "/dev/stdout") ? arg : "-";
}

static enum cli_status cli_apply(const struct opt *o, const char *arg, struct plan *p)
{
    double d = 0;
    long n = 0;
    static const enum opt_id paths[] = { O_JSON, O_MARKDOWN, O_JUNIT, O_HTML, O_CONFIG,
                                         O_BASELINE, O_PRESET, O_EVENTS };
    for (size_t i = 0; arg && i < sizeof paths / sizeof *paths; i++)
        if (o->id == paths[i] && !*arg)
            return cli_bad("--%s: the value is empty; give a file name%s", o->name,
                           o->id == O_JSON || o->id == O_MARKDOWN || o->id == O_EVENTS
                               ? " or - for stdout" : "");
    if (o->kind == OPT_DURATION && units_duration(arg, &d))
        return cli_bad("--%s '%s': not a duration; use e.g. 90s, 10m or 2h", o->name, arg);
    if (o->kind == OPT_COUNT && units_long(arg, o->id == O_WARMUP ? 0 : 1, 1000000000L, &n))
        return cli_bad("--%s '%s': expected a whole number%s", o->name, arg,
                       o->id == O_WARMUP ? "" : " of at least 1");
    switch (o->id) {
    case O_BATCH: return cli_range(arg, p);
    case O_BUDGET: p->budget_s = d; break;
    case O_HANG_TIMEOUT: p->hang_timeout_s = d; break;
    case O_SLURM_PENDING:
        if (d <= 0)
            return cli_bad("--slurm-pending '%s': a duration above 0, e.g. 10m", arg);
        p->slurm_pending_s = d;
        break;
    case O_TRIAL_TIMEOUT: p->trial_timeout_s = d; break;
    case O_KILL_GRACE: p->grace_s = d; break;
    case O_GPUS_PER_TRIAL: p->gpus_per_trial = n; break;
    case O_PARALLEL: p->parallel = n; break;
    case O_DRY_RUN: p->dry_run = 1; break;
    case O_EVENTS: p->events_path = arg; break;
    case O_GPUS:
        if (!*arg || strlen(arg) >= sizeof p->gpus)
            return cli_bad("--gpus '%s': use all or a list like 0,1,2,3", arg);
        snprintf(p->gpus, sizeof p->gpus, "%s", arg);
        break;
    case O_LAUNCHER:
        if (strcmp(arg, "local") && strcmp(arg, "slurm"))
            return cli_bad("--launcher '%s': use local or slurm", arg);
        p->launcher = arg;
        break;
    case O_EMULATE_GPU_MEMORY:
        if (units_size(arg, &p->emulate_bytes) || p->emulate_bytes < (256ULL << 20))
            return cli_bad("--emulate-gpu-memory '%s': a size of at least 256M, e.g. 24G", arg);
        break;
    case O_EMULATE_WITH:
        if (strcmp(arg, "preload") && strcmp(arg, "probe"))
            return cli_bad("--emulate-with '%s': use preload or probe", arg);
        p->emulate_with = arg;
        break;
    case O_STEPS: p->steps = n; break;
    case O_WARMUP: p->warmup = n; break;
    case O_WORLD_SIZE: p->world_size = n; p->world_size_given = 1; break;
    case O_GLOBAL_BATCH: p->global_batch = n; break;
    case O_NO_CACHE: p->no_cache = 1; break;
    case O_NO_CONFIRM: p->no_confirm = 1; break;
    case O_FULL_TRIALS: p->full_trials = 1; break;
    case O_ALLOW: {
        char buf[256], *save = NULL;
        if (strlen(arg) >= sizeof buf || !*arg)
            return cli_bad("--allow '%s': a list of knobs, e.g. precision,optim8bit", arg);
        snprintf(buf, sizeof buf, "%s", arg);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            unsigned bit = 0;
            for (int id = 0; id < KNOB_COUNT && !bit; id++)
                if ((KNOB_BIT(id) & KNOB_EXTRA) && !strcmp(t, preset_knob_name(id)))
                    bit = KNOB_BIT(id);
            p->allowed |= bit;
            if (!bit)
                return cli_bad("--allow '%s': '%s' is not a knob autobatch may turn on; use "
                               "precision, optim8bit, sharding, or a list of them", arg, t);
        }
        break;
    }
    case O_WORST_CASE:
        if (strcmp(arg, "off") && strcmp(arg, "auto") && strcmp(arg, "scan"))
            return cli_bad("--worst-case '%s': use off, auto or scan", arg);
        p->worst_case = arg;
        break;
    case O_WORST_CASE_SCAN:
        if (d <= 0)
            return cli_bad("--worst-case-scan '%s': a duration above 0, e.g. 30s", arg);
        p->worst_case_scan_s = d;
        break;
    case O_CONFIRM:
        if (arg[0] >= '0' && arg[0] <= '9' && strspn(arg, "0123456789") == strlen(arg)) {
            if (units_long(arg, 1, 1000000000L, &n))
                return cli_bad("--confirm '%s': a number of steps of at least 1, or a duration "
                               "like 60s or 5m", arg);
            p->confirm_steps = n;
            p->confirm_s = 0;
        } else if (units_duration(arg, &d) || d <= 0) {
            return cli_bad("--confirm '%s': a number of steps (e.g. 20) or a duration (e.g. 60s "
                           "or 5m)", arg);
        } else {
            p->confirm_s = d;
            p->confirm_steps = 0;
        }
        break;
    case O_NO_PROBE: p->no_probe = 1; break;
    case O_REPLAY: p->replay = 1; break;
    case O_NO_REPLAY: p->no_replay = 1; break;
    case O_KEEP_TRACES: p->keep_traces = arg; break;
    case O_TRIAL_MEMORY_LIMIT:
        if (units_size(arg, &p->trial_mem_limit) || p->trial_mem_limit < (64ULL << 20))
            return cli_bad("--trial-memory-limit '%s': a size of at least 64M, e.g. 512M or 2G", arg);
        break;
    case O_CHECKPOINTING:
        if (!strcmp(arg, "off") || !strcmp(arg, "on") || !strcmp(arg, "both")) {
            p->ckpt_off = strcmp(arg, "on") != 0;
            p->ckpt_on = strcmp(arg, "off") != 0;
            p->checkpointing_searched = 1;
            break;
        }
        return cli_bad("--checkpointing '%s': use off, on or both", arg);
    case O_GRAD_ACCUM: {
        char buf[512], *save = NULL;
        p->ngrad_accum = 0;
        if (strlen(arg) >= sizeof buf || !*arg || arg[strlen(arg) - 1] == ',' || strstr(arg, ",,"))
            return cli_bad("--grad-accum '%s': expected a list like 1,2,4,8", arg);
        snprintf(buf, sizeof buf, "%s", arg);
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            long v;
            if (units_long(t, 1, 1000000, &v))
                return cli_bad("--grad-accum '%s': '%s' is not a whole number of at least 1", arg, t);
            for (int k = 0; k < p->ngrad_accum; k++)
                if (p->grad_accum[k] == v)
                    return cli_bad("--grad-accum '%s': %ld is listed twice", arg, v);
            if (p->ngrad_accum == PLAN_MAX_ACCUM)
                return cli_bad("--grad-accum '%s': at most %d values", arg, PLAN_MAX_ACCUM);
            p->grad_accum[p->ngrad_accum++] = v;
        }
        break;
    }
    case O_HEADROOM:
        if (cli_percent(arg, 99, &p->headroom))
            return cli_bad("--headroom '%s': a percentage from 0 to 99, e.g. --headroom 10", arg);
        break;
    case O_REGRESSION_THRESHOLD:
        if (cli_percent(arg, 100, &p->regression_threshold))
            return cli_bad("--regression-threshold '%s': a percentage from 0 to 100, e.g. 5", arg);
        break;
    case O_MARKDOWN: p->markdown_path = cli_output(arg); break;
    case O_JUNIT: p->junit_path = cli_output(arg); break;
    case O_HTML: p->html_path = cli_output(arg); break;
    case O_BASELINE: p->baseline_path = arg; break;
    case O_WEBHOOK: p->webhook_url = arg; break;
    case O_WEBHOOK_INSECURE: p->webhook_insecure = 1; break;
    case O_WEBHOOK_FORMAT:
        if (strcmp(arg, "generic") && strcmp(arg, "slack") && strcmp(arg, "discord") &&
            strcmp(arg, "teams"))
            return cli_bad("--webhook-format '%s': use generic, slack, discord or teams", arg);
        p->webhook_format = arg;
        break;
    case O_JSON: p->json_path = cli_output(arg); break;
    case O_QUIET: p->quiet = 1; break;
    case O_SHOW_OUTPUT: p->show_output = 1; break;
    case O_VERBOSE: p->verbose = 1; break;
    case O_PRESET:
        if (!*arg)
            return cli_bad("--preset is empty; use a name such as hf, auto, or a preset file");
        p->preset_name = arg; /* resolved (and checked) by setup_load */
        return cli_check_preset(arg);
    case O_CONFIG:
        p->config_path = arg;
        break;
    case O_SLURM_ARG: /* checked with the launcher (control/session.c) */
        if (p->nslurm_args == PLAN_MAX_SLURM_ARGS)
            return cli_bad("--slurm-arg given more than %d times", PLAN_MAX_SLURM_ARGS);
        p->slurm_args[p->nslurm_args++] = arg;
        break;
    case O_KNOB:
        if (p->nknob_specs == PLAN_MAX_KNOBS)
            return cli_bad("--knob given more than %d times", PLAN_MAX_KNOBS);
        if (!strchr(arg, '='))
            return cli_bad("--knob '%s': expected NAME=WHERE, e.g. --knob micro_batch=train.batch_size",
                           arg);
        p->knob_specs[p->nknob_specs++] = arg;
        break;
    case O_WRITE:
        p->write = 1;
        break;
    case O_WRITE_TARGET:
        p->write = 1;
        p->write_target = arg;
        break;
    case O_SLURM_TARGETS:
        return cli_targets(arg, p);
    case O_HELP:
        fputs(cli_usage, stdout);
        return CLI_DONE;
    case O_VERSION:
        printf("autobatch %s (%s)\nlibyaml %s, jansson %s; libcurl is loaded when a webhook "
               "is used\n", AUTOBATCH_VERSION, AUTOBATCH_REVISION, yaml_get_version_string(),
               jansson_version_str());
        return CLI_DONE;
    }
    return CLI_RUN;
}

/* Is the command runnable: a path to an executable file, or a name found
 * in PATH?  Checked up front so that a typo fails in the first second. */
static enum cli_status cli_check_command(const char *cmd, int first_word)
{
    struct stat st;
    if (strchr(cmd, '/')) {
        if (stat(cmd, &st))
            return cli_bad("command '%s' not found; check the path", cmd);
        if (S_ISDIR(st.st_mode) || access(cmd, X_OK))
            return cli_bad("command '%s' is not executable; chmod +x it or run it "
                           "through its interpreter (e.g. -- python3 %s)", cmd, cmd);
        return CLI_RUN;
    }
    if (which_found(cmd))
        return CLI_RUN;
    /* `autobatch reprot x`: the first word, not found, close to a
     * subcommand's name.  After '--' or an option it is a command for sure;
     * a word with a dot (help.py) or a file here is a script to run. */
    const char *guess = first_word && !strchr(cmd, '.') && access(cmd, F_OK)
                      ? hint_closest(cmd, strlen(cmd), cli_subcommands, (size_t)-1) : NULL;
    if (guess) {
        cli_error("command '%s' not found in PATH; did you mean 'autobatch %s'?", cmd, guess);
        return CLI_USAGE;
    }
    return cli_bad("command '%s' not found in PATH; check the spelling or give its path", cmd);
}

/* The command's own words (args, NULL-terminated) that are one of our
 * options a trainer is unlikely to take (struct opt's `ours`): one warning
 * line naming them ("'--a'", "'--a' and '--b'", "'--a', '--b' and
 * '--c'"), each once.  They still go to the command, which may take them. */
static void cli_warn_after(char **args, int dashdash)
{
    const struct opt *seen[sizeof cli_opts / sizeof *cli_opts];
    size_t n = 0;
    for (int k = 0; args[k]; k++) {
        const char *a = args[k], *eq = strchr(a, '=');
        if (a[0] != '-' || a[1] != '-')
            continue;
        const struct opt *o = cli_find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
        size_t j = 0;
        while (j < n && seen[j] != o)
            j++;
        if (o && o->ours && j == n)
            seen[n++] = o;
    }
    if (!n)
        return;
    char names[1024] = "";
    size_t len = 0;
    for (size_t j = 0; j < n && len < sizeof names; j++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s'--%s'",
                                !j ? "" : j + 1 < n ? ", " : " and ", seen[j]->name);
    say_line(stderr, "autobatch: warning: ", "%s after the command %s to the command; put "
             "autobatch's options before %s", names, n > 1 ? "go" : "goes",
             dashdash ? "'--'" : "the command");
}

enum cli_status cli_parse(int argc, char **argv, struct plan *p)
{
    struct plan def = {
        .preset_name = "hf",
        .batch_min = 1, .batch_max = 1024, .batch_step = 1,
        .steps = 5, .warmup = 2, .world_size = 1,
        .trial_timeout_s = 20 * 60, .hang_timeout_s = 5 * 60, .budget_s = 0, .grace_s = 3,
        .ckpt_off = 1, .regression_threshold = 0.05, .webhook_format = "generic",
        .gpus_per_trial = 1, .emulate_with = "preload",
        .confirm_steps = 20, .confirm_s = 60, .worst_case = "auto", .worst_case_scan_s = 30,
    };
    *p = def;
    int i = 1;
    int dashdash = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            dashdash = 1;
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break; /* the command starts here */
        const struct opt *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            o = cli_find_long(a + 2, eq ? (size_t)(eq - a - 2) : strlen(a + 2));
            if (!o)
                return cli_unknown(a, eq ? (size_t)(eq - a) : strlen(a));
            if (eq) {
                if (o->kind == OPT_FLAG)
                    return cli_bad("option '--%s' takes no value", o->name);
                val = eq + 1;
            }
        } else {
            o = a[2] ? NULL : cli_find_short(a[1]);
            /* -batch=4 for --batch=4 is guessed at; -q=1 is no option. */
            const char *eq = strchr(a, '=');
            if (!o)
                return cli_unknown(a, eq && eq - a > 2 ? (size_t)(eq - a) : strlen(a));
        }
        if (o->kind != OPT_FLAG && !val) {
            if (i + 1 >= argc)
                return cli_bad("option '--%s' needs a value", o->name);
            val = argv[++i];
        }
        enum cli_status st = cli_apply(o, val, p);
        if (st != CLI_RUN)
            return st;
    }
    if (i >= argc)
        return cli_bad(dashdash ? "the command after '--' is empty; e.g. autobatch -- python3 train.py"
                                : "no command to tune; put it after '--', e.g. autobatch -- python3 train.py");
    if (!argv[i][0])
        return cli_bad("the command after '--' is empty; e.g. autobatch -- python3 train.py");
    if (p->quiet && p->show_output)
        return cli_bad("--quiet hides the command's output and --show-output shows it; "
                       "choose one");
    p->command = &argv[i];
    if (p->write_target && !p->ntargets)
        return cli_bad("--write-target '%s' picks one of --slurm-targets; give --slurm-targets, "
                       "or use --write", p->write_target);
    if (p->write_target) {
        int found = 0;
        for (int t = 0; t < p->ntargets; t++)
            found |= !strcmp(p->targets[t], p->write_target);
        if (!found)
            return cli_bad("--write-target '%s' is not one of --slurm-targets; name one of them",
                           p->write_target);
    } else if (p->write && p->ntargets > 1) {
        return cli_bad("--write: --slurm-targets gives one answer per target; add --write-target "
                       "T to write T's");
    }
    if (!p->webhook_url) {
        const char *env = getenv("AUTOBATCH_WEBHOOK_URL");
        p->webhook_url = env && *env ? env : NULL;
    }
    enum cli_status st = cli_check_command(argv[i], i == 1);
    if (st == CLI_RUN)
        cli_warn_after(argv + i + 1, dashdash);
    return st;
}
