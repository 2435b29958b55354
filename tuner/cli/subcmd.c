/* SPDX-License-Identifier: MIT */
/*
 * subcmd: config, report, matrix, notify, predict, presets and help (see
 * subcmd.h).  Each subcommand parses its own words, calls the library,
 * and prints what it returns; report, matrix and notify share one option
 * parser and one results loader.  Every one prints its own help for
 * --help or -h, from the table below, which `autobatch help TOPIC` reads
 * too.
 */
#include "cli/cli.h"
#include "cli/hint.h"
#include "control/exit.h"
#include "cli/outputs.h"
#include "cli/subcmd.h"
#include "trial/slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/afile.h"
#include "cfile.h"
#include "devmem.h"
#include "output/matrix.h"
#include "output/report.h"
#include "search/predict.h"
#include "util/units.h"
#include "output/webhook.h"
#include "preset.h"

/* --------------------------------------------------------------- help */

/* Each subcommand's help: its usage lines (as autobatch --help shows
 * them), what it does, its options.  One entry per name of
 * cli_subcommands. */
static const struct subcmd_help {
    const char *name, *text;
} subcmd_helps[] = {
    { "config",
"usage: autobatch config get FILE KEY\n"
"       autobatch config set FILE KEY=VALUE...\n"
"\n"
"Read or change values in a YAML or JSON config file, the way autobatch\n"
"edits --config.  KEY is a dotted path (train.batch_size); a.0.b indexes a\n"
"list.  get prints the value.  set changes only the bytes of the values it\n"
"sets (a missing key is inserted beside its siblings), keeps their quoting\n"
"and boolean spelling, and writes the file once, atomically, under its\n"
"lock; on any error the file is left as it was.\n"
"\n"
"Example:\n"
"  autobatch config set train.yaml train.batch_size=16 optim.grad_accum=2\n" },
    { "report",
"usage: autobatch report RESULTS [--format markdown|html|junit] [-o FILE]\n"
"\n"
"Render a report from RESULTS, a results file written by --json, as the run's\n"
"own --markdown, --html or --junit would have.  No trial is run.\n"
"\n"
"  --format F            markdown (default), html (one file, inline SVG) or junit\n"
"  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
"  -h, --help            this text\n" },
    { "matrix",
"usage: autobatch matrix RESULTS... [--format markdown|json] [-o FILE]\n"
"\n"
"One table from several results files (one command on several machines):\n"
"a row per file, in the order given, named after its GPU; columns for the\n"
"choice, its samples/s and peak memory, and the largest fitting micro-batch\n"
"of every (grad_accum, checkpointing) cell any file searched.\n"
"\n"
"  --format F            markdown (default) or json\n"
"  -o, --output FILE     write to FILE, atomically (default: stdout)\n"
"  -h, --help            this text\n" },
    { "notify",
"usage: autobatch notify [RESULTS] [--webhook URL] [--webhook-format F]\n"
"\n"
"Post RESULTS, a results file written by --json, to a webhook.  Without\n"
"RESULTS, send the deliveries earlier runs could not make, each to its own\n"
"URL (with --webhook, only those for that URL).\n"
"\n"
"  --webhook URL         where to post (default: AUTOBATCH_WEBHOOK_URL); signed\n"
"                        with AUTOBATCH_WEBHOOK_SECRET when set\n"
"  --webhook-format F    generic, slack, discord or teams (generic)\n"
"  --webhook-insecure    do not verify the webhook's TLS certificate\n"
"  -h, --help            this text\n" },
    { "predict",
"usage: autobatch predict TRACES_DIR --capacity SIZE [--batch MIN:MAX[:STEP]] [--gpu N]\n"
"\n"
"The largest micro-batch of each cell on a device of SIZE, predicted from\n"
"the allocation traces that --replay --keep-traces DIR kept.  No trial is\n"
"run, and each answer says it is unconfirmed.\n"
"\n"
"  --capacity SIZE       the device memory to predict for, e.g. 24G\n"
"  --batch MIN:MAX[:STEP]  the micro-batch range (default 1:1024:1)\n"
"  --gpu N               also replay the allocations with cudaMalloc on GPU N,\n"
"                        its memory held back down to SIZE\n"
"  -h, --help            this text\n" },
    { "presets",
"usage: autobatch presets\n"
"\n"
"List the built-in presets, one a line: the name for --preset NAME and what\n"
"it changes in the command or its config.  --preset also takes a preset\n"
"file (FILE.yaml, or any path with a '/') and auto, which picks a built-in\n"
"one from the command and --config and says which.\n" },
    { "help",
"usage: autobatch help [TOPIC]\n"
"\n"
"autobatch's help (as --help), or with TOPIC a subcommand's (config,\n"
"report, matrix, notify, predict) or the list of presets (presets).\n" },
};

static const char *subcmd_help_text(const char *name)
{
    for (size_t i = 0; i < sizeof subcmd_helps / sizeof *subcmd_helps; i++)
        if (!strcmp(subcmd_helps[i].name, name))
            return subcmd_helps[i].text;
    return NULL;
}

/* Is argv[2..argc) asking for help (--help or -h anywhere)? */
static int subcmd_wants_help(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

static int subcmd_strcmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* autobatch presets: each built-in preset's name and summary, sorted by
 * name, then auto. */
static int subcmd_presets(int argc, char **argv)
{
    if (argc > 2) {
        cli_error("'%s': presets takes no arguments; usage: autobatch presets", argv[2]);
        return AB_EXIT_USAGE;
    }
    const char *const *builtin = preset_builtin_names();
    const char *names[64];
    size_t n = 0, width = 4;
    for (; builtin[n] && n < sizeof names / sizeof *names; n++) {
        names[n] = builtin[n];
        width = strlen(names[n]) > width ? strlen(names[n]) : width;
    }
    qsort(names, n, sizeof *names, subcmd_strcmp);
    for (size_t i = 0; i < n; i++) {
        struct preset p = PRESET_INIT;
        char err[512];
        if (preset_load(&p, names[i], err, sizeof err)) {
            cli_error("%s", err);
            return AB_EXIT_USAGE;
        }
        printf("%-*s  %s\n", (int)width, names[i], p.summary ? p.summary : "");
        preset_release(&p);
    }
    printf("%-*s  %s\n", (int)width, "auto",
           "one of these, picked from the command and --config (autobatch says which)");
    return fflush(stdout) ? AB_EXIT_USAGE : AB_EXIT_OK;
}

/* autobatch help [TOPIC]. */
static int subcmd_help(int argc, char **argv)
{
    if (argc == 2) {
        cli_help(stdout);
        return AB_EXIT_OK;
    }
    const char *topic = argv[2];
    if (argc > 3) {
        cli_error("one topic at a time, e.g. autobatch help %s", topic);
        return AB_EXIT_USAGE;
    }
    if (!strcmp(topic, "--help") || !strcmp(topic, "-h"))
        topic = "help";
    if (!strcmp(topic, "presets"))
        return subcmd_presets(2, argv);
    const char *text = subcmd_help_text(topic);
    if (text) {
        fputs(text, stdout);
        return AB_EXIT_OK;
    }
    const char *guess = hint_closest(topic, strlen(topic), cli_subcommands, (size_t)-1);
    if (guess)
        cli_error("no help on '%s'; did you mean 'autobatch help %s'?", topic, guess);
    else
        cli_error("no help on '%s'; topics: config, report, matrix, notify, predict, presets, "
                  "help", topic);
    return AB_EXIT_USAGE;
}

/* ------------------------------------------------------ config get/set */

/* config set's edits, made on the file's bytes as they are under its
 * lock: a `config set` or a --write beside this one waits for it, so
 * neither loses the other's change.  0, or 2 after saying why. */
static int subcmd_config_set(const char *path, int argc, char **argv)
{
    char err[512];
    int lock = afile_lock(path, err, sizeof err);
    if (lock < 0) {
        cli_error("%s; the file was not changed", err);
        return 2;
    }
    struct cfile f = CFILE_INIT;
    int rc = 0;
    if (cfile_load(&f, path, err, sizeof err)) {
        cli_error("%s", err);
        rc = 2;
    }
    for (int i = 4; i < argc && rc == 0; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i]) {
            cli_error("'%s': expected KEY=VALUE, e.g. train.batch_size=16", argv[i]);
            rc = 2;
            break;
        }
        *eq = '\0';
        if (cfile_set(&f, argv[i], eq + 1, err, sizeof err) != CEDIT_OK) {
            cli_error("%s: %s; the file was not changed", path, err);
            rc = 2;
        }
        *eq = '=';
    }
    if (rc == 0 && cfile_changed(&f) && cfile_save(&f, path, err, sizeof err)) {
        cli_error("%s", err);
        rc = 2;
    }
    afile_unlock(lock);
    cfile_release(&f);
    return rc;
}

/* autobatch config get FILE KEY | config set FILE KEY=VALUE...  All sets
 * are applied in memory and written once, atomically, under the file's
 * lock; any failure leaves the file untouched. */
static int subcmd_config(int argc, char **argv)
{
    char err[512];
    if (argc < 4 || (strcmp(argv[2], "get") && strcmp(argv[2], "set")) ||
        (!strcmp(argv[2], "get") && argc != 5)) {
        cli_error("usage: autobatch config get FILE KEY | autobatch config set FILE KEY=VALUE...");
        return 2;
    }
    const char *path = argv[3];
    /* A missing or unreadable file fails here, before any lock; set reads
     * it again under the lock. */
    struct cfile f = CFILE_INIT;
    if (cfile_load(&f, path, err, sizeof err)) {
        cli_error("%s", err);
        return 2;
    }
    int rc = 0;
    if (!strcmp(argv[2], "get")) {
        char *v = NULL;
        if (cfile_get(&f, argv[4], &v, err, sizeof err) != CEDIT_OK) {
            cli_error("%s: %s", path, err);
            rc = 2;
        } else {
            printf("%s\n", v);
        }
        free(v);
        cfile_release(&f);
        return rc;
    }
    cfile_release(&f);
    if (argc < 5) {
        cli_error("config set needs at least one KEY=VALUE, e.g. autobatch config set %s "
                  "train.batch_size=16", path);
        return 2;
    }
    return subcmd_config_set(path, argc, argv);
}

/* -------------------------------------------------------- shared bits */

static json_t *subcmd_load(const char *path)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        cli_error("cannot read results '%s': %s (line %d); give a file written by --json",
                  path, je.text, je.line);
    else if (!json_is_object(doc)) {
        cli_error("'%s' is not an autobatch results file", path);
        json_decref(doc);
        doc = NULL;
    }
    return doc;
}

/* Options of the small subcommands: --format F, -o FILE, --webhook URL,
 * --webhook-format F, --webhook-insecure; the rest are operands. */
struct sub_opts {
    const char *format, *out, *webhook, *webhook_format;
    int insecure;
    char **files;
    int nfiles;
};

static int subcmd_parse(int argc, char **argv, int first, struct sub_opts *o, int allow_webhook)
{
    memset(o, 0, sizeof *o);
    o->files = calloc((size_t)argc, sizeof *o->files);
    if (!o->files)
        return -1;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "--format") || !strncmp(a, "--format=", 9))
            slot = &o->format;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strncmp(a, "--output=", 9))
            slot = &o->out;
        else if (allow_webhook && (!strcmp(a, "--webhook") || !strncmp(a, "--webhook=", 10)))
            slot = &o->webhook;
        else if (allow_webhook && (!strcmp(a, "--webhook-format") || !strncmp(a, "--webhook-format=", 17)))
            slot = &o->webhook_format;
        else if (allow_webhook && !strcmp(a, "--webhook-insecure")) {
            o->insecure = 1;
            continue;
        } else if (a[0] == '-' && a[1]) {
            static const char *const known[] = { "--format", "--output", "--webhook",
                                                 "--webhook-format", "--webhook-insecure" };
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            const char *guess = hint_closest(a, len, known, allow_webhook ? 5 : 2);
            if (guess)
                cli_error("unknown option '%.*s' for 'autobatch %s'; did you mean '%s'?", (int)len,
                          a, argv[1], guess);
            else
                cli_error("unknown option '%s' for 'autobatch %s'; try 'autobatch %s --help'", a,
                          argv[1], argv[1]);
            return -1;
        } else {
            o->files[o->nfiles++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        if (eq && a[1] == '-') {
            *slot = eq + 1;
        } else if (i + 1 < argc) {
            *slot = argv[++i];
        } else {
            cli_error("option '%s' needs a value", a);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- report */

static int subcmd_report(int argc, char **argv)
{
    struct sub_opts o;
    enum report_format f = REPORT_MARKDOWN;
    int rc = AB_EXIT_USAGE;
    if (subcmd_parse(argc, argv, 2, &o, 0))
        goto out;
    if (o.nfiles != 1) {
        cli_error("usage: autobatch report RESULTS [--format markdown|html|junit] [-o FILE]");
        goto out;
    }
    if (o.format && report_format_parse(o.format, &f)) {
        cli_error("--format '%s': use markdown, html or junit", o.format);
        goto out;
    }
    json_t *doc = subcmd_load(o.files[0]);
    if (!doc)
        goto out;
    char *text = NULL, err[512];
    size_t len = 0;
    if (report_render(doc, f, &text, &len, err, sizeof err))
        cli_error("%s: %s", o.files[0], err);
    else if (!outputs_emit(o.out, text, len))
        rc = AB_EXIT_OK;
    free(text);
    json_decref(doc);
out:
    free(o.files);
    return rc;
}

/* ------------------------------------------------------------- matrix */

static int subcmd_matrix(int argc, char **argv)
{
    struct sub_opts o;
    enum matrix_format f = MATRIX_MARKDOWN;
    int rc = AB_EXIT_USAGE;
    json_t **docs = NULL;
    if (subcmd_parse(argc, argv, 2, &o, 0))
        goto out;
    if (o.nfiles < 1) {
        cli_error("usage: autobatch matrix RESULTS... [--format markdown|json] [-o FILE]");
        goto out;
    }
    if (o.format && matrix_format_parse(o.format, &f)) {
        cli_error("--format '%s': use markdown or json", o.format);
        goto out;
    }
    docs = calloc((size_t)o.nfiles, sizeof *docs);
    if (!docs)
        goto out;
    for (int i = 0; i < o.nfiles; i++)
        if (!(docs[i] = subcmd_load(o.files[i])))
            goto out;
    char *text = NULL, err[512];
    size_t len = 0;
    if (matrix_render(docs, (const char *const *)o.files, (size_t)o.nfiles, f, &text, &len, err,
                      sizeof err))
        cli_error("%s", err);
    else if (!outputs_emit(o.out, text, len))
        rc = AB_EXIT_OK;
    free(text);
out:
    for (int i = 0; docs && i < o.nfiles; i++)
        json_decref(docs[i]);
    free(docs);
    free(o.files);
    return rc;
}

/* ------------------------------------------------------------ webhook */

static volatile sig_atomic_t subcmd_cancel;

static void subcmd_on_signal(int sig)
{
    subcmd_cancel = sig;
}

static int subcmd_notify(int argc, char **argv)
{
    struct sub_opts o;
    int rc = AB_EXIT_USAGE;
    if (subcmd_parse(argc, argv, 2, &o, 1))
        goto out;
    const char *url = o.webhook ? o.webhook : getenv(WEBHOOK_ENV_URL);
    if (o.nfiles > 1 || (!url && o.nfiles == 1)) {
        cli_error(o.nfiles > 1 ? "usage: autobatch notify [RESULTS] [--webhook URL] [--webhook-format F]"
                               : "no webhook: give --webhook URL or set AUTOBATCH_WEBHOOK_URL");
        goto out;
    }
    char err[512];
    if (webhook_global_init(err, sizeof err)) {
        cli_error("%s", err);
        goto out;
    }
    signal(SIGINT, subcmd_on_signal);
    signal(SIGTERM, subcmd_on_signal);
    rc = AB_EXIT_OK;
    if (o.nfiles == 1) {
        /* RESULTS alone: the spool holds other runs' payloads for other
         * URLs, and is flushed only by notify without RESULTS. */
        json_t *doc = subcmd_load(o.files[0]);
        if (!doc)
            rc = AB_EXIT_USAGE;
        else if (outputs_post(doc, url, o.webhook_format, o.insecure, &subcmd_cancel))
            rc = 1;
        json_decref(doc);
    } else {
        /* What earlier runs could not deliver, each to its own URL (with
         * --webhook, only what was kept for that URL); also where
         * versions before 0.1.0 kept it. */
        char dirs[2][4096];
        const char *list[2];
        size_t nd = 0;
        for (int legacy = 0; legacy < 2; legacy++)
            if (!outputs_spool_dir(dirs[nd], sizeof dirs[nd], legacy))
                list[nd] = dirs[nd], nd++;
        struct webhook_opts wo;
        int sent = 0, left = 0;
        outputs_webhook_opts(&wo, NULL, o.insecure, &subcmd_cancel);
        if (webhook_spool_flush(list, nd, &wo, o.webhook, &sent, &left, err, sizeof err) && left) {
            fprintf(stderr, "autobatch: %d kept deliveries still not sent: %s\n", left, err);
            rc = 1;
        }
        if (sent)
            fprintf(stderr, "autobatch: sent %d kept deliveries\n", sent);
        else if (!left)
            fprintf(stderr, "autobatch: nothing kept to send%s\n", o.webhook ? " to that webhook" : "");
    }
    webhook_global_cleanup();
out:
    free(o.files);
    return rc;
}

/* ------------------------------------------------------------ outputs */

/* ------------------------------------------------------------ predict */

#define PREDICT_USAGE "usage: autobatch predict TRACES_DIR --capacity SIZE [--batch MIN:MAX[:STEP]] " \
                      "[--gpu N]"

/* One cell's answer, as a line (two with --gpu). */
static void subcmd_predict_say(const struct predict_cell *c, const struct predict_answer *a,
                               int gpu, const char *cap_s, long min, long max)
{
    printf("accum %ld, ckpt %s: ", c->accum, c->ckpt ? "on" : "off");
    if (!a->ok) {
        printf("no prediction: %s\n", a->why);
        return;
    }
    if (a->fit < min)
        printf("nothing from %ld fits in %s (%ld needs %.2f GiB; predicted, unconfirmed)\n",
               min, cap_s, min, (double)a->need / (1 << 30));
    else
        printf("largest micro-batch %ld%s in %s (needs %.2f GiB; predicted from traces at "
               "%ld..%ld, unconfirmed)\n", a->fit, a->fit == max ? " (the top of --batch)" : "",
               cap_s, (double)a->need / (1 << 30), c->b[0], c->b[c->n - 1]);
    /* A job of several processes: each rank modelled, the largest need
     * decides; say which, and the next rank's own answer. */
    if (a->ranks > 1) {
        printf("  rank %ld decides (the largest need of %zu ranks)", a->rank, a->ranks);
        if (a->next_rank < 0)
            printf("\n");
        else if (a->next_fit < min)
            printf("; rank %ld alone would hold nothing from %ld\n", a->next_rank, min);
        else
            printf("; rank %ld alone would hold %ld%s\n", a->next_rank, a->next_fit,
                   a->next_fit == a->fit ? " too" : "");
    }
    if (a->gpu == PREDICT_GPU_NONE)
        return;
    printf("  on GPU %d: ", gpu);
    char rank_s[48] = "";
    if (a->ranks > 1)
        snprintf(rank_s, sizeof rank_s, "; rank %ld decides", a->gpu_rank);
    double held = (double)a->held / (1 << 30), left = (double)a->left / (1 << 30);
    switch (a->gpu) {
    case PREDICT_GPU_CPU_TRACES:
        printf("not replayed: the traces were recorded on the CPU\n");
        break;
    case PREDICT_GPU_NO_HOLD:
        printf("not replayed: %s\n", a->why);
        break;
    case PREDICT_GPU_FAILED:
        printf("the replay failed: %s\n", a->why);
        break;
    case PREDICT_GPU_DONE:
        if (a->gpu_fit < min)
            printf("nothing from %ld fits in %s (%.2f GiB held back, %.2f GiB left to the "
                   "allocator; replayed, unconfirmed)\n", min, cap_s, held, left);
        else
            printf("largest micro-batch %ld%s in %s (peak reserved + outside %.2f GiB; %.2f GiB "
                   "held back, %.2f GiB left to the allocator; replayed with cudaMalloc, "
                   "unconfirmed%s)\n", a->gpu_fit, a->gpu_fit == max ? " (the top of --batch)" : "",
                   cap_s, (double)a->gpu_need / (1 << 30), held, left, rank_s);
        break;
    case PREDICT_GPU_NONE:
        break;
    }
}

/* autobatch predict DIR --capacity SIZE [--batch MIN:MAX[:STEP]] [--gpu N]:
 * the largest micro-batch per cell for another capacity, from the traces
 * --keep-traces kept; with --gpu also replayed on that GPU, with memory
 * held back down to the capacity.  Predictions only: no trial is run. */
static int subcmd_predict(int argc, char **argv)
{
    const char *dir = NULL, *cap_s = NULL, *batch_s = NULL, *gpu_s = NULL;
    for (int i = 2; i < argc; i++) {
        const char **slot = !strcmp(argv[i], "--capacity") ? &cap_s
                          : !strcmp(argv[i], "--batch") ? &batch_s
                          : !strcmp(argv[i], "--gpu") ? &gpu_s : NULL;
        if (slot && i + 1 < argc) {
            *slot = argv[++i];
        } else if (slot || argv[i][0] == '-' || dir) {
            cli_error(PREDICT_USAGE);
            return AB_EXIT_USAGE;
        } else {
            dir = argv[i];
        }
    }
    uint64_t cap = 0;
    long min = 1, max = 1024, step = 1;
    if (!dir || !cap_s) {
        cli_error(PREDICT_USAGE ", e.g. autobatch predict traces --capacity 24G");
        return AB_EXIT_USAGE;
    }
    if (units_size(cap_s, &cap) || cap == 0 || cap > (uint64_t)INT64_MAX) {
        cli_error("--capacity '%s': a size such as 24G or 800000K", cap_s);
        return AB_EXIT_USAGE;
    }
    if (batch_s && cli_batch_range(batch_s, &min, &max, &step))
        return AB_EXIT_USAGE;
    long gpu = -1;
    char *end;
    if (gpu_s && (gpu = strtol(gpu_s, &end, 10), *end || end == gpu_s || gpu < 0 || gpu > 1023)) {
        cli_error("--gpu '%s': a GPU number such as 0", gpu_s);
        return AB_EXIT_USAGE;
    }
    struct predict_cell cells[64];
    long ncells = predict_scan(dir, cells, sizeof cells / sizeof *cells);
    if (ncells < 0) {
        cli_error("cannot read '%s': %s; give the directory of --keep-traces", dir, strerror(errno));
        return AB_EXIT_USAGE;
    }
    if (!ncells) {
        cli_error("no traces in '%s' (files named accum1-ckptoff-b2.txt, as --keep-traces "
                  "writes them)", dir);
        return AB_EXIT_USAGE;
    }
    struct devmem_ops ops = { 0 };
    if (gpu >= 0) {
        char err[512];
        if (devmem_cuda_open((int)gpu, &ops, err, sizeof err)) {
            cli_error("--gpu %ld: %s", gpu, err);
            predict_scan_release(cells, (size_t)ncells);
            return AB_EXIT_USAGE;
        }
    }
    int predicted = 0;
    for (long k = 0; k < ncells; k++) {
        struct predict_answer a;
        predict_cell(&cells[k], min, max, step, cap, gpu >= 0 ? &ops : NULL, &a);
        subcmd_predict_say(&cells[k], &a, (int)gpu, cap_s, min, max);
        predicted += a.ok;
    }
    predict_scan_release(cells, (size_t)ncells);
    devmem_cuda_close(&ops);
    return predicted ? AB_EXIT_OK : AB_EXIT_USAGE;
}

int subcmd_dispatch(int argc, char **argv)
{
    const char *help = subcmd_help_text(argv[1]);
    if (help && strcmp(argv[1], "help") && subcmd_wants_help(argc, argv)) {
        fputs(help, stdout);
        return AB_EXIT_OK;
    }
    if (!strcmp(argv[1], "help"))
        return subcmd_help(argc, argv);
    if (!strcmp(argv[1], "presets"))
        return subcmd_presets(argc, argv);
    if (!strcmp(argv[1], "config"))
        return subcmd_config(argc, argv);
    if (!strcmp(argv[1], "report"))
        return subcmd_report(argc, argv);
    if (!strcmp(argv[1], "matrix"))
        return subcmd_matrix(argc, argv);
    if (!strcmp(argv[1], "notify"))
        return subcmd_notify(argc, argv);
    if (!strcmp(argv[1], "predict"))
        return subcmd_predict(argc, argv);
    if (!strcmp(argv[1], "__slurm-follow")) {
        if (argc != 5 && argc != 6) {
            cli_error("usage: autobatch __slurm-follow JOB OUTPUT HEARTBEAT [PENDING_S] (run by "
                      "autobatch itself)");
            return AB_EXIT_USAGE;
        }
        return slurm_follow(argv[2], argv[3], argv[4], argc == 6 ? atof(argv[5]) : 0);
    }
    if (!strcmp(argv[1], "__slurm-step")) {
        if (argc < 5 || strcmp(argv[3], "--")) {
            cli_error("usage: autobatch __slurm-step HEARTBEAT -- COMMAND... (run by autobatch "
                      "itself)");
            return AB_EXIT_USAGE;
        }
        return slurm_step_beat(argv[2], argv + 4);
    }
    return -1;
}
