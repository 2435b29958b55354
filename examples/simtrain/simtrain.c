/* SPDX-License-Identifier: MIT */
/*
 * simtrain: a simulated training job for autobatch's demo and tests.
 *
 * simtrain behaves, from the outside, like a Hugging Face Trainer run
 * under accelerate or torchrun: it takes the usual knobs (micro-batch,
 * gradient accumulation, activation checkpointing, max steps) from HF
 * flags, Hydra overrides, a JSON or YAML config file or the AUTOBATCH_*
 * environment, prints start-up lines, a tqdm progress bar redrawn with
 * '\r' and HF metric dicts, and fails the way PyTorch fails: with one of
 * the allocator's out-of-memory messages after a Python traceback, or by
 * dying of SIGKILL as the kernel's OOM killer would do it.
 *
 * It needs no GPU.  Memory is a small, exact model (see README.md and
 * mem_first_failure() below): every allocation is rounded up to 2 MiB,
 * weights and gradients are allocated at start, optimizer state at the
 * first optimizer step, and activations scale with the micro-batch.  The
 * same function decides both when a run fails and what `--print-max`
 * answers, so tests can ask simtrain for the right answer instead of
 * copying the formula.
 *
 * Failure modes that make a supervisor's life hard are flags: ranks that
 * hang in a collective and ignore SIGTERM after one rank runs out of
 * memory, a daemonised grandchild that escapes the process group, hangs,
 * crashes, early exits.
 *
 * The file is one program; banners split it into its parts.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <yaml.h>

#define MIB (1024LL * 1024LL)
#define GIB (1024LL * MIB)
/* PyTorch's caching allocator hands out large blocks in 2 MiB granules. */
#define ALLOC_GRAIN (2LL * MIB)

#define EXIT_OK 0
#define EXIT_PYERR 1 /* an uncaught Python exception: OOM or crash */
#define EXIT_USAGE 2

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

enum oom_style { STYLE_CURRENT, STYLE_21, STYLE_OLD, STYLE_CPU, STYLE_HIP };
enum knob { KNOB_MICRO, KNOB_ACCUM, KNOB_CKPT, KNOB_STEPS, KNOB_NR };

struct opts {
    /* the four knobs, in the knob's unit, and where each value came from */
    long micro;
    long accum;
    long ckpt;
    long max_steps;
    const char *src[KNOB_NR];

    /* where knobs live */
    const char *config;
    const char *key[KNOB_NR];
    long knobs_from_env;
    long unit_frames;
    long frames_per_sample;

    /* memory model */
    long long capacity;
    long long model_mem;
    long long optim_mem;
    long long act_mem;
    double ckpt_factor;
    double bf16_factor;      /* activations x this with --bf16 true */
    long bf16;               /* HF's --bf16: mixed precision on */
    long optim8bit;          /* HF's --optim names an 8-bit optimizer: state x 1/4 */
    long fsdp;               /* HF's --fsdp full_shard: weights and state / --nproc */
    long long_step;
    double long_factor;
    long print_max;
    long oom_style;
    long kernel_oom;

    /* timing and output */
    double step_overhead;
    double sample_time;
    double ckpt_slowdown;
    double pressure_slowdown;
    double noise;
    long seed;
    double startup_time;
    const char *bar_desc;    /* the training bar's description ("Train steps ... ") */
    const char *device_capacity; /* "0=24G,1=16G": capacity per visible device */
    const char *bar_unit;    /* its unit ("update"); default "it" */
    const char *bar_postfix; /* a postfix key carrying the step ("update") */
    long logging_steps;
    long log_style_string;
    long report;
    long num_examples;

    /* failure modes */
    long nproc;
    long oom_rank;
    long crash_at_step;
    long ignore_sigterm;
    const char *escape;
    long hang_at_step;
    long exit_at_step;

    long help;
};

static struct opts O = {
    .micro = 8, .accum = 1, .ckpt = 0, .max_steps = 100000,
    .src = { "default", "default", "default", "default" },
    .key = { "per_device_train_batch_size", "gradient_accumulation_steps",
             "gradient_checkpointing", "max_steps" },
    .frames_per_sample = 1000,
    .capacity = 24 * GIB, .model_mem = 2 * GIB, .optim_mem = 2 * GIB,
    .act_mem = 256 * MIB, .ckpt_factor = 0.25, .bf16_factor = 0.5, .long_factor = 1.5,
    .step_overhead = 0.005, .sample_time = 0.0002, .ckpt_slowdown = 1.33,
    .pressure_slowdown = 0.25, .seed = 0, .logging_steps = 1,
    .num_examples = 10000, .nproc = 1, .oom_rank = -1,
};

static const char *const knob_name[KNOB_NR] = {
    "micro_batch", "grad_accum", "checkpointing", "max_steps"
};

enum opt_type { T_BOOL, T_STR, T_LONG, T_SIZE, T_DUR, T_DOUBLE, T_UNIT,
                T_STYLE, T_LOGSTYLE };

struct opt_def {
    const char *name;
    enum opt_type type;
    size_t off;
};

/* simtrain's own options, sorted by name; each also reads the environment
 * variable SIMTRAIN_<NAME> (upper case, '-' as '_') as a default. */
static const struct opt_def opt_table[] = {
    { "accum-key", T_STR, offsetof(struct opts, key[KNOB_ACCUM]) },
    { "act-mem", T_SIZE, offsetof(struct opts, act_mem) },
    { "bar-desc", T_STR, offsetof(struct opts, bar_desc) },
    { "bar-postfix", T_STR, offsetof(struct opts, bar_postfix) },
    { "bar-unit", T_STR, offsetof(struct opts, bar_unit) },
    { "batch-key", T_STR, offsetof(struct opts, key[KNOB_MICRO]) },
    { "batch-unit", T_UNIT, offsetof(struct opts, unit_frames) },
    { "capacity", T_SIZE, offsetof(struct opts, capacity) },
    { "bf16-factor", T_DOUBLE, offsetof(struct opts, bf16_factor) },
    { "ckpt-factor", T_DOUBLE, offsetof(struct opts, ckpt_factor) },
    { "ckpt-key", T_STR, offsetof(struct opts, key[KNOB_CKPT]) },
    { "ckpt-slowdown", T_DOUBLE, offsetof(struct opts, ckpt_slowdown) },
    { "config", T_STR, offsetof(struct opts, config) },
    { "device-capacity", T_STR, offsetof(struct opts, device_capacity) },
    { "crash-at-step", T_LONG, offsetof(struct opts, crash_at_step) },
    { "escape", T_STR, offsetof(struct opts, escape) },
    { "exit-at-step", T_LONG, offsetof(struct opts, exit_at_step) },
    { "frames-per-sample", T_LONG, offsetof(struct opts, frames_per_sample) },
    { "hang-at-step", T_LONG, offsetof(struct opts, hang_at_step) },
    { "help", T_BOOL, offsetof(struct opts, help) },
    { "ignore-sigterm", T_BOOL, offsetof(struct opts, ignore_sigterm) },
    { "kernel-oom", T_BOOL, offsetof(struct opts, kernel_oom) },
    { "knobs-from-env", T_BOOL, offsetof(struct opts, knobs_from_env) },
    { "log-style", T_LOGSTYLE, offsetof(struct opts, log_style_string) },
    { "long-factor", T_DOUBLE, offsetof(struct opts, long_factor) },
    { "long-step", T_LONG, offsetof(struct opts, long_step) },
    { "model-mem", T_SIZE, offsetof(struct opts, model_mem) },
    { "noise", T_DOUBLE, offsetof(struct opts, noise) },
    { "nproc", T_LONG, offsetof(struct opts, nproc) },
    { "num-examples", T_LONG, offsetof(struct opts, num_examples) },
    { "oom-rank", T_LONG, offsetof(struct opts, oom_rank) },
    { "oom-style", T_STYLE, offsetof(struct opts, oom_style) },
    { "optim-mem", T_SIZE, offsetof(struct opts, optim_mem) },
    { "pressure-slowdown", T_DOUBLE, offsetof(struct opts, pressure_slowdown) },
    { "print-max", T_BOOL, offsetof(struct opts, print_max) },
    { "report", T_BOOL, offsetof(struct opts, report) },
    { "sample-time", T_DUR, offsetof(struct opts, sample_time) },
    { "seed", T_LONG, offsetof(struct opts, seed) },
    { "startup-time", T_DUR, offsetof(struct opts, startup_time) },
    { "step-overhead", T_DUR, offsetof(struct opts, step_overhead) },
    { "steps-key", T_STR, offsetof(struct opts, key[KNOB_STEPS]) },
};
#define OPT_TABLE_NR (sizeof opt_table / sizeof opt_table[0])

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

/* The rank this process trains as; ranks > 0 prefix their lines. */
static int g_rank;

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* a closed pipe: nothing sensible left to do */
        }
        s += w;
        n -= (size_t)w;
    }
}

/* vsnprintf into a malloc'd string; exits on allocation failure. */
static char *vfmt(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        write_all(2, "simtrain: out of host memory\n", 29);
        _exit(EXIT_PYERR);
    }
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    return buf;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

/*
 * Write text to fd, every line prefixed with "[rankK]: " on ranks > 0, as
 * torchrun's log prefixing does.  Each line goes out in one write() so
 * that lines of different ranks never interleave mid-line.
 */
static void emit(int fd, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void emit(int fd, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *text = vfmt(f, ap);
    va_end(ap);
    if (g_rank == 0) {
        write_all(fd, text, strlen(text));
        free(text);
        return;
    }
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        char *line = fmt("[rank%d]: %.*s", g_rank, (int)len, p);
        write_all(fd, line, strlen(line));
        free(line);
        p += len;
    }
    free(text);
}

static void die_msg(int hint, const char *f, va_list ap) __attribute__((noreturn));
static void die_msg(int hint, const char *f, va_list ap)
{
    char *msg = vfmt(f, ap);
    char *line = fmt("simtrain: error: %s\n%s", msg,
                     hint ? "try 'simtrain --help'\n" : "");
    write_all(2, line, strlen(line));
    free(line);
    free(msg);
    exit(EXIT_USAGE);
}

/* A bad command line: say what is wrong and where help is; exit 2. */
static void die_usage(const char *f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_usage(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    die_msg(1, f, ap);
}

/* A bad input file or environment: say what is wrong; exit 2. */
static void die_input(const char *f, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die_input(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    die_msg(0, f, ap);
}

/* ------------------------------------------------------------------ */
/* Value parsing                                                       */
/* ------------------------------------------------------------------ */

static int parse_long(const char *s, long *out)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* true/false/True/False/1/0/yes/no (any case); returns -1 if none. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = { "true", "1", "yes", "on" };
    static const char *const no[] = { "false", "0", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i]))
            return 1;
        if (!strcasecmp(s, no[i]))
            return 0;
    }
    return -1;
}

/* "24G", "256M", "1.5GiB", "4096": binary multiples; bytes when bare. */
static int parse_size(const char *s, long long *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -1;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = (double)MIB; end++; break;
    case 'G': mult = (double)GIB; end++; break;
    case 'T': mult = (double)GIB * 1024.0; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    double b = ceil(v * mult);
    if (b > 9.0e18)
        return -1;
    *out = (long long)b;
    return 0;
}

/* "5ms", "200us", "1.5s", "100ns"; a bare number is seconds. */
static int parse_duration(const char *s, double *out)
{
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || !isfinite(v))
        return -1;
    double mult;
    if (!*end || !strcmp(end, "s"))
        mult = 1;
    else if (!strcmp(end, "ms"))
        mult = 1e-3;
    else if (!strcmp(end, "us"))
        mult = 1e-6;
    else if (!strcmp(end, "ns"))
        mult = 1e-9;
    else if (!strcmp(end, "m") || !strcmp(end, "min"))
        mult = 60;
    else
        return -1;
    *out = v * mult;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Option table                                                        */
/* ------------------------------------------------------------------ */

static const struct opt_def *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < OPT_TABLE_NR; i++)
        if (strlen(opt_table[i].name) == len &&
            !strncmp(opt_table[i].name, name, len))
            return &opt_table[i];
    return NULL;
}

/* Store value into the option; `what` names the source in messages. */
static void set_opt(const struct opt_def *d, const char *v, const char *what)
{
    char *base = (char *)&O;
    void *p = base + d->off;
    long l;
    long long ll;
    double dv;
    int b;

    switch (d->type) {
    case T_BOOL:
        if ((b = parse_bool(v)) < 0)
            die_usage("%s: expected true or false, got '%s'", what, v);
        *(long *)p = b;
        break;
    case T_STR:
        if (!*v)
            die_usage("%s: empty value", what);
        *(const char **)p = v;
        break;
    case T_LONG:
        if (parse_long(v, &l))
            die_usage("%s: expected an integer, got '%s'", what, v);
        *(long *)p = l;
        break;
    case T_SIZE:
        if (parse_size(v, &ll))
            die_usage("%s: expected a size such as 24G, 512M or 4096, got '%s'",
                      what, v);
        *(long long *)p = ll;
        break;
    case T_DUR:
        if (parse_duration(v, &dv))
            die_usage("%s: expected a duration such as 5ms, 200us or 1.5s, got '%s'",
                      what, v);
        *(double *)p = dv;
        break;
    case T_DOUBLE:
        if (parse_double(v, &dv))
            die_usage("%s: expected a number, got '%s'", what, v);
        *(double *)p = dv;
        break;
    case T_UNIT:
        if (!strcmp(v, "samples"))
            *(long *)p = 0;
        else if (!strcmp(v, "frames"))
            *(long *)p = 1;
        else
            die_usage("%s: expected 'samples' or 'frames', got '%s'", what, v);
        break;
    case T_STYLE:
        if (!strcmp(v, "current"))
            *(long *)p = STYLE_CURRENT;
        else if (!strcmp(v, "2.1"))
            *(long *)p = STYLE_21;
        else if (!strcmp(v, "old"))
            *(long *)p = STYLE_OLD;
        else if (!strcmp(v, "cpu"))
            *(long *)p = STYLE_CPU;
        else if (!strcmp(v, "hip"))
            *(long *)p = STYLE_HIP;
        else
            die_usage("%s: expected current, 2.1, old, cpu or hip, got '%s'",
                      what, v);
        break;
    case T_LOGSTYLE:
        if (!strcmp(v, "float"))
            *(long *)p = 0;
        else if (!strcmp(v, "string"))
            *(long *)p = 1;
        else
            die_usage("%s: expected 'float' or 'string', got '%s'", what, v);
        break;
    }
}

/* SIMTRAIN_<OPTION> environment defaults, applied before argv. */
static void opts_from_env(void)
{
    for (size_t i = 0; i < OPT_TABLE_NR; i++) {
        const struct opt_def *d = &opt_table[i];
        if (!strcmp(d->name, "help"))
            continue;
        char var[64] = "SIMTRAIN_";
        size_t n = strlen(var);
        for (const char *c = d->name; *c && n + 1 < sizeof var; c++)
            var[n++] = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
        var[n] = '\0';
        const char *v = getenv(var);
        if (v && *v) {
            char *what = fmt("environment %s", var);
            set_opt(d, v, what);
            free(what); /* set_opt keeps v, never `what` */
        }
    }
}

/* ------------------------------------------------------------------ */
/* Knob values from the environment, config files, overrides, flags    */
/* ------------------------------------------------------------------ */

/*
 * Set one knob from text.  "auto" (DeepSpeed/HF-integrated configs) and
 * null keep the earlier value, like an absent key.
 */
static void set_knob(enum knob k, const char *text, const char *src,
                     const char *what)
{
    if (!strcmp(text, "auto") || !strcmp(text, "null") || !strcmp(text, "~") ||
        !strcmp(text, "None"))
        return;
    long v;
    if (k == KNOB_CKPT) {
        int b = parse_bool(text);
        if (b < 0)
            die_usage("%s: expected a boolean (true/false/1/0/yes/no) for %s, got '%s'",
                      what, knob_name[k], text);
        v = b;
    } else {
        if (parse_long(text, &v))
            die_usage("%s: expected an integer for %s, got '%s'", what,
                      knob_name[k], text);
    }
    switch (k) {
    case KNOB_MICRO: O.micro = v; break;
    case KNOB_ACCUM: O.accum = v; break;
    case KNOB_CKPT: O.ckpt = v; break;
    case KNOB_STEPS: O.max_steps = v; break;
    case KNOB_NR: break;
    }
    O.src[k] = src;
}

static void knobs_from_env(void)
{
    static const char *const var[KNOB_NR] = {
        "AUTOBATCH_MICRO_BATCH", "AUTOBATCH_GRAD_ACCUM",
        "AUTOBATCH_CHECKPOINTING", "AUTOBATCH_MAX_STEPS"
    };
    for (int k = 0; k < KNOB_NR; k++) {
        const char *v = getenv(var[k]);
        if (v && *v) {
            char *what = fmt("environment %s", var[k]);
            set_knob((enum knob)k, v, "env", what);
            free(what);
        }
    }
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die_input("cannot read '%s': %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            die_input("out of memory reading '%s'", path);
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    if (ferror(f))
        die_input("cannot read '%s': %s", path, strerror(errno));
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/*
 * Relaxed JSON, as people write it (VS Code settings, many training
 * configs): blank out // and slash-star comments and trailing commas
 * before '}' or ']' with spaces, so that jansson's line and column in an
 * error message still point into the user's file.  Text inside strings
 * (with their escapes) is left alone.
 */
static void json_relax(char *s, size_t n)
{
    enum { NORMAL, STRING, STRING_ESC, LINE_COMMENT, BLOCK_COMMENT } st = NORMAL;
    size_t last_comma = (size_t)-1; /* a comma with only blanks after it */

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        switch (st) {
        case NORMAL:
            if (c == '"') {
                st = STRING;
                last_comma = (size_t)-1;
            } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
                st = LINE_COMMENT;
                s[i] = s[i + 1] = ' ';
                i++;
            } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
                st = BLOCK_COMMENT;
                s[i] = s[i + 1] = ' ';
                i++;
            } else if (c == ',') {
                last_comma = i;
            } else if (c == '}' || c == ']') {
                if (last_comma != (size_t)-1)
                    s[last_comma] = ' ';
                last_comma = (size_t)-1;
            } else if (!isspace((unsigned char)c)) {
                last_comma = (size_t)-1;
            }
            break;
        case STRING:
            if (c == '\\')
                st = STRING_ESC;
            else if (c == '"')
                st = NORMAL;
            break;
        case STRING_ESC:
            st = STRING;
            break;
        case LINE_COMMENT:
            if (c == '\n')
                st = NORMAL;
            else
                s[i] = ' ';
            break;
        case BLOCK_COMMENT:
            if (c == '*' && i + 1 < n && s[i + 1] == '/') {
                s[i] = s[i + 1] = ' ';
                i++;
                st = NORMAL;
            } else if (c != '\n') {
                s[i] = ' ';
            }
            break;
        }
    }
}

/* Next dotted component of *path into comp; 0 at the end of the path. */
static int next_component(const char **path, char *comp, size_t cap)
{
    const char *p = *path;
    if (!*p)
        return 0;
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (len >= cap)
        len = cap - 1;
    memcpy(comp, p, len);
    comp[len] = '\0';
    *path = dot ? dot + 1 : p + strlen(p);
    return 1;
}

static int is_index(const char *s, size_t *idx)
{
    if (!*s)
        return 0;
    for (const char *c = s; *c; c++)
        if (!isdigit((unsigned char)*c))
            return 0;
    *idx = (size_t)strtoul(s, NULL, 10);
    return 1;
}

/* The scalar at path in a JSON document as text, or NULL when absent. */
static char *json_lookup(json_t *root, const char *path, const char *file)
{
    json_t *n = root;
    char comp[256];
    const char *p = path;
    size_t idx;
    while (n && next_component(&p, comp, sizeof comp)) {
        if (json_is_object(n))
            n = json_object_get(n, comp);
        else if (json_is_array(n) && is_index(comp, &idx))
            n = json_array_get(n, idx);
        else
            n = NULL;
    }
    if (!n || json_is_null(n))
        return NULL;
    if (json_is_integer(n))
        return fmt("%" JSON_INTEGER_FORMAT, json_integer_value(n));
    if (json_is_real(n))
        return fmt("%.17g", json_real_value(n));
    if (json_is_true(n))
        return fmt("true");
    if (json_is_false(n))
        return fmt("false");
    if (json_is_string(n))
        return fmt("%s", json_string_value(n));
    die_input("'%s': key '%s' is an object or a list, not a value", file, path);
}

static char *yaml_lookup(yaml_document_t *doc, const char *path, const char *file)
{
    yaml_node_t *n = yaml_document_get_root_node(doc);
    char comp[256];
    const char *p = path;
    size_t idx;
    while (n && next_component(&p, comp, sizeof comp)) {
        yaml_node_t *next = NULL;
        if (n->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *pr = n->data.mapping.pairs.start;
                 pr < n->data.mapping.pairs.top; pr++) {
                yaml_node_t *k = yaml_document_get_node(doc, pr->key);
                if (k && k->type == YAML_SCALAR_NODE &&
                    k->data.scalar.length == strlen(comp) &&
                    !memcmp(k->data.scalar.value, comp, strlen(comp))) {
                    next = yaml_document_get_node(doc, pr->value);
                    break;
                }
            }
        } else if (n->type == YAML_SEQUENCE_NODE && is_index(comp, &idx)) {
            yaml_node_item_t *items = n->data.sequence.items.start;
            if (idx < (size_t)(n->data.sequence.items.top - items))
                next = yaml_document_get_node(doc, items[idx]);
        }
        n = next;
    }
    if (!n)
        return NULL;
    if (n->type != YAML_SCALAR_NODE)
        die_input("'%s': key '%s' is a mapping or a list, not a value", file, path);
    const char *v = (const char *)n->data.scalar.value;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !*v)
        return NULL; /* `key:` with nothing after it is null */
    return fmt("%s", v);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

static int is_config_name(const char *s)
{
    return ends_with(s, ".json") || ends_with(s, ".yaml") || ends_with(s, ".yml");
}

static void knobs_from_config(const char *file)
{
    size_t len;
    char *text = read_file(file, &len);
    int json;
    if (ends_with(file, ".json"))
        json = 1;
    else if (ends_with(file, ".yaml") || ends_with(file, ".yml"))
        json = 0;
    else {
        const char *c = text;
        while (isspace((unsigned char)*c))
            c++;
        json = *c == '{' || *c == '[';
    }

    char *val[KNOB_NR] = { NULL };
    if (json) {
        json_relax(text, len);
        json_error_t jerr;
        json_t *root = json_loadb(text, len, JSON_DECODE_ANY, &jerr);
        if (!root)
            die_input("cannot parse '%s': line %d column %d: %s", file,
                      jerr.line, jerr.column, jerr.text);
        for (int k = 0; k < KNOB_NR; k++)
            val[k] = json_lookup(root, O.key[k], file);
        json_decref(root);
    } else {
        yaml_parser_t parser;
        yaml_document_t doc;
        if (!yaml_parser_initialize(&parser))
            die_input("cannot initialise the YAML parser");
        yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
        if (!yaml_parser_load(&parser, &doc)) {
            const char *problem = parser.problem ? parser.problem : "malformed YAML";
            die_input("cannot parse '%s': line %zu column %zu: %s", file,
                      parser.problem_mark.line + 1,
                      parser.problem_mark.column + 1, problem);
        }
        for (int k = 0; k < KNOB_NR; k++)
            val[k] = yaml_lookup(&doc, O.key[k], file);
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
    }
    free(text);

    for (int k = 0; k < KNOB_NR; k++) {
        if (!val[k])
            continue;
        char *what = fmt("'%s' key '%s'", file, O.key[k]);
        set_knob((enum knob)k, val[k], "config", what);
        free(what);
        free(val[k]);
    }
}

/* A Hydra override: [+|++]key.path=value with an identifier-like key. */
static int is_override(const char *s)
{
    if (*s == '+')
        s++;
    if (*s == '+')
        s++;
    if (!isalpha((unsigned char)*s) && *s != '_')
        return 0;
    for (; *s && *s != '='; s++)
        if (!isalnum((unsigned char)*s) && !strchr("_.-/@", *s))
            return 0;
    return *s == '=';
}

static void knob_from_override(const char *arg)
{
    const char *s = arg;
    while (*s == '+')
        s++;
    const char *eq = strchr(s, '=');
    size_t klen = (size_t)(eq - s);
    for (int k = 0; k < KNOB_NR; k++) {
        if (strlen(O.key[k]) == klen && !strncmp(O.key[k], s, klen)) {
            char *what = fmt("override '%s'", arg);
            set_knob((enum knob)k, eq + 1, "override", what);
            free(what);
        }
    }
    /* Overrides of other keys belong to the (simulated) model: ignored. */
}

/* ------------------------------------------------------------------ */
/* Command line                                                        */
/* ------------------------------------------------------------------ */

struct hf_flag {
    const char *name;
    int knob; /* enum knob, or -1 for logging_steps */
};

static const struct hf_flag hf_flags[] = {
    { "gradient_accumulation_steps", KNOB_ACCUM },
    { "gradient_checkpointing", KNOB_CKPT },
    { "logging_steps", -1 },
    { "max_steps", KNOB_STEPS },
    { "per_device_train_batch_size", KNOB_MICRO },
};

struct pending {
    const char **overrides;
    size_t nr_overrides;
    struct { int knob; const char *flag; const char *value; } *flags;
    size_t nr_flags;
};

static void parse_argv(int argc, char **argv, struct pending *pd)
{
    int end_of_opts = 0;
    pd->overrides = calloc((size_t)argc, sizeof *pd->overrides);
    pd->flags = calloc((size_t)argc, sizeof *pd->flags);
    if (!pd->overrides || !pd->flags)
        die_usage("out of memory");

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!end_of_opts && !strcmp(a, "--")) {
            end_of_opts = 1;
            continue;
        }
        if (!end_of_opts && a[0] == '-' && a[1] == '-' && a[2]) {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);

            /* simtrain's own options come first: --config is ours. */
            const struct opt_def *d = find_opt(name, nlen);
            if (d) {
                const char *v;
                if (eq)
                    v = eq + 1;
                else if (d->type == T_BOOL)
                    v = "1";
                else if (i + 1 < argc)
                    v = argv[++i];
                else
                    die_usage("option '--%s' needs a value", d->name);
                char *what = fmt("--%s", d->name);
                set_opt(d, v, what);
                free(what);
                continue;
            }

            /* HF TrainingArguments flags; '-' and '_' are the same. */
            char norm[128];
            size_t n = nlen < sizeof norm - 1 ? nlen : sizeof norm - 1;
            for (size_t j = 0; j < n; j++)
                norm[j] = name[j] == '-' ? '_' : name[j];
            norm[n] = '\0';
            const struct hf_flag *hf = NULL;
            for (size_t j = 0; j < sizeof hf_flags / sizeof hf_flags[0]; j++)
                if (!strcmp(hf_flags[j].name, norm))
                    hf = &hf_flags[j];
            if (hf) {
                const char *v;
                if (eq)
                    v = eq + 1;
                else if (hf->knob == KNOB_CKPT)
                    /* a bare --gradient_checkpointing means true, like
                     * HfArgumentParser's nargs='?' booleans */
                    v = (i + 1 < argc && parse_bool(argv[i + 1]) >= 0)
                            ? argv[++i] : "true";
                else if (i + 1 < argc)
                    v = argv[++i];
                else
                    die_usage("argument --%s: expected one argument", hf->name);
                pd->flags[pd->nr_flags].knob = hf->knob;
                pd->flags[pd->nr_flags].flag = hf->name;
                pd->flags[pd->nr_flags].value = v;
                pd->nr_flags++;
                continue;
            }

            /* HF's --bf16 [BOOL]: mixed precision, activations x
             * --bf16-factor (a bare --bf16 means true). */
            if (nlen == 4 && !strncmp(name, "bf16", 4)) {
                const char *v = eq ? eq + 1
                              : (i + 1 < argc && parse_bool(argv[i + 1]) >= 0) ? argv[++i]
                              : "true";
                if (parse_bool(v) < 0)
                    die_usage("argument --bf16: expected a boolean, got '%s'", v);
                O.bf16 = parse_bool(v);
                continue;
            }

            /* HF's --optim NAME: an 8-bit one (adamw_bnb_8bit, ...)
             * keeps a quarter of the optimizer state.  HF's --fsdp
             * "full_shard ...": weights, gradients and optimizer state
             * sharded over the ranks. */
            int optim = nlen == 5 && !strncmp(name, "optim", 5);
            if (optim || (nlen == 4 && !strncmp(name, "fsdp", 4))) {
                const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
                if (!v)
                    die_usage("argument --%.*s: expected one argument", (int)nlen, name);
                if (optim)
                    O.optim8bit = strstr(v, "8bit") != NULL;
                else
                    O.fsdp = strstr(v, "full_shard") != NULL;
                continue;
            }

            /*
             * Any other --flag is an HF argument we do not model
             * (--output_dir, --report_to ...): skip it and its
             * value, unless the next word is an option or a Hydra
             * override (`--bf16 datasets.batch_size=4` must not lose
             * the override).
             */
            if (!eq && i + 1 < argc && strncmp(argv[i + 1], "--", 2) &&
                !is_override(argv[i + 1]))
                i++;
            continue;
        }
        if (is_config_name(a))
            O.config = a;
        else if (is_override(a))
            pd->overrides[pd->nr_overrides++] = a;
        else
            die_usage("unexpected argument '%s' (expected a .json/.yaml config, "
                      "a key=value override or an option)", a);
    }
}

/* Apply the knob sources in order: env, config, overrides, flags. */
static void resolve_knobs(const struct pending *pd)
{
    const char *v = getenv("SIMTRAIN_KNOBS_FROM_ENV");
    if (v && parse_bool(v) == 1)
        O.knobs_from_env = 1;
    if (O.knobs_from_env)
        knobs_from_env();
    if (O.config)
        knobs_from_config(O.config);
    for (size_t i = 0; i < pd->nr_overrides; i++)
        knob_from_override(pd->overrides[i]);
    for (size_t i = 0; i < pd->nr_flags; i++) {
        char *what = fmt("argument --%s", pd->flags[i].flag);
        if (pd->flags[i].knob < 0) {
            if (parse_long(pd->flags[i].value, &O.logging_steps))
                die_usage("%s: expected an integer, got '%s'", what,
                          pd->flags[i].value);
        } else {
            set_knob((enum knob)pd->flags[i].knob, pd->flags[i].value, "flag",
                     what);
        }
        free(what);
    }
}

/* Micro-batch in samples: the knob itself, or floor(frames / per sample). */
static long micro_samples(void)
{
    return O.unit_frames ? O.micro / O.frames_per_sample : O.micro;
}

/* The devices this run sees (CUDA_VISIBLE_DEVICES) decide its capacity:
 * the smallest listed one, as for ranks spread over them; an emulated
 * smaller card caps it too. */
static void apply_device_capacity(void)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (O.device_capacity && vis && *vis) {
        long long cap = -1;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", vis);
        char *save = NULL;
        for (char *d = strtok_r(buf, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
            long long c = O.capacity;
            size_t dl = strlen(d);
            for (const char *p = O.device_capacity; p && *p;) {
                const char *eq = strchr(p, '='), *end = strchr(p, ',');
                if (!eq)
                    die_usage("--device-capacity '%s': expected DEVICE=SIZE,...", O.device_capacity);
                char size[64];
                size_t sl = (size_t)((end ? end : p + strlen(p)) - eq - 1);
                snprintf(size, sizeof size, "%.*s", (int)sl, eq + 1);
                if ((size_t)(eq - p) == dl && !strncmp(p, d, dl) && parse_size(size, &c))
                    die_usage("--device-capacity '%s': '%s' is not a size", O.device_capacity, size);
                p = end ? end + 1 : NULL;
            }
            if (cap < 0 || c < cap)
                cap = c;
        }
        O.capacity = cap;
    }
    const char *emu = getenv("AUTOBATCH_EMULATE_GPU_MEMORY");
    long long e;
    if (emu && *emu && !parse_size(emu, &e) && e > 0 && e < O.capacity)
        O.capacity = e;
}

static void validate(void)
{
    if (O.frames_per_sample < 1)
        die_usage("--frames-per-sample must be at least 1");
    if (O.micro < 1)
        die_usage("micro-batch must be at least 1, got %ld (from %s)", O.micro,
                  O.src[KNOB_MICRO]);
    if (O.unit_frames && micro_samples() < 1)
        die_usage("a batch of %ld frames holds no sample of %ld frames: raise the "
                  "batch or lower --frames-per-sample", O.micro, O.frames_per_sample);
    if (O.accum < 1)
        die_usage("gradient accumulation must be at least 1, got %ld (from %s)",
                  O.accum, O.src[KNOB_ACCUM]);
    /* HF's max_steps -1 means "use epochs": for us, train until stopped. */
    if (O.max_steps <= 0)
        O.max_steps = 100000;
    if (O.logging_steps < 1)
        die_usage("--logging_steps must be at least 1");
    if (O.capacity <= 0)
        die_usage("--capacity must be positive");
    apply_device_capacity();
    if (!(O.ckpt_factor > 0) || !(O.long_factor > 0))
        die_usage("--ckpt-factor and --long-factor must be positive");
    if (O.nproc < 1 || O.nproc > 64)
        die_usage("--nproc must be between 1 and 64");
    if (O.oom_rank >= O.nproc)
        die_usage("--oom-rank %ld is not a rank of --nproc %ld", O.oom_rank, O.nproc);
    if (O.num_examples < 1)
        die_usage("--num-examples must be at least 1");
    if (O.noise < 0 || O.noise >= 100)
        die_usage("--noise must be a percentage in [0, 100)");
    if (O.report && !getenv("AUTOBATCH_REPORT"))
        O.report = 0; /* nobody asked for a report file */
}

/* ------------------------------------------------------------------ */
/* Memory model                                                        */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */

static long long round_grain(long long b)
{
    return (b + ALLOC_GRAIN - 1) / ALLOC_GRAIN * ALLOC_GRAIN;
}

static long long mem_model(void)
{
    return round_grain(O.fsdp && O.nproc > 1 ? O.model_mem / O.nproc : O.model_mem);
}
static long long mem_optim(void)
{
    long long b = O.optim8bit ? O.optim_mem / 4 : O.optim_mem;
    return round_grain(O.fsdp && O.nproc > 1 ? b / O.nproc : b);
}

/* Length factor of optimizer step `step`: the long batch, or 1. */
static double length_factor(long step)
{
    return O.long_step > 0 && step == O.long_step ? O.long_factor : 1.0;
}

/* Activation bytes of one micro-step of m samples at length factor lf. */
static long long mem_act(long m, double lf)
{
    double b = ceil((double)O.act_mem * (double)m * lf *
                    (O.ckpt ? O.ckpt_factor : 1.0) * (O.bf16 ? O.bf16_factor : 1.0));
    if (b >= 4.0e18) /* far beyond any capacity; avoid overflow */
        return 4000000000000000000LL;
    return round_grain((long long)b);
}

enum fail_kind { FAIL_NONE, FAIL_LOAD, FAIL_FORWARD, FAIL_OPTIM };

struct failure {
    enum fail_kind kind;
    long step;            /* optimizer step (1-based), 0 for FAIL_LOAD */
    long long tried;      /* the allocation that failed */
    long long allocated;  /* live allocations when it failed */
};

/*
 * The first point where m samples per micro-batch run out of memory within
 * `steps` optimizer steps, in the order they happen:
 *   load:    model > capacity
 *   step s forward (every micro-step of s is alike):
 *            model + (optim if s > 1) + act(m, lf(s)) > capacity
 *   step 1 optimizer.step(), optimizer state allocated for the first time:
 *            model + act(m, lf(1)) + optim > capacity
 * Only three distinct steps can matter: 1, the first ordinary step after
 * it, and the long step.
 */
static struct failure mem_first_failure(long m, long steps)
{
    struct failure f = { FAIL_NONE, -1, 0, 0 };
    long long cap = O.capacity, model = mem_model(), optim = mem_optim();

    if (model > cap)
        return (struct failure){ FAIL_LOAD, 0, model, 0 };

    long cand[3] = { 1, O.long_step == 2 ? 3 : 2, O.long_step };
    /* cand[1] < cand[2] unless the long step is 1 or absent: sort. */
    if (cand[2] < cand[1]) {
        long t = cand[1];
        cand[1] = cand[2];
        cand[2] = t;
    }
    for (int i = 0; i < 3; i++) {
        long s = cand[i];
        if (s < 1 || s > steps || (i > 0 && s == cand[i - 1]))
            continue;
        long long act = mem_act(m, length_factor(s));
        long long live = model + (s > 1 ? optim : 0);
        if (live + act > cap)
            return (struct failure){ FAIL_FORWARD, s, act, live };
        if (s == 1 && model + act + optim > cap)
            return (struct failure){ FAIL_OPTIM, 1, optim, model + act };
    }
    return f;
}

/* Peak bytes of optimizer step `step` when it succeeds. */
static long long mem_peak(long step)
{
    return mem_model() + mem_optim() + mem_act(micro_samples(), length_factor(step));
}

/*
 * Largest micro-batch in samples that survives O.max_steps steps with the
 * current accumulation and checkpointing; 0 if none, -1 if any does.
 */
static long print_max_samples(void)
{
    const long limit = 1L << 40;
    if (mem_first_failure(1, O.max_steps).kind != FAIL_NONE)
        return 0;
    long lo = 1, hi = 2;
    while (mem_first_failure(hi, O.max_steps).kind == FAIL_NONE) {
        lo = hi;
        if (hi >= limit)
            return -1;
        hi *= 2;
    }
    /* lo fits, hi fails */
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (mem_first_failure(mid, O.max_steps).kind == FAIL_NONE)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* ------------------------------------------------------------------ */
/* Python-looking text                                                 */
/* ------------------------------------------------------------------ */

/* c10's format_size(): "%.2f" with bytes/KiB/MiB/GiB, boundaries inclusive. */
static void torch_size(long long b, char *buf, size_t n)
{
    if (b <= 1024)
        snprintf(buf, n, "%lld bytes", b);
    else if (b <= 1048576)
        snprintf(buf, n, "%.2f KiB", (double)b / 1024.0);
    else if (b <= 1073741824LL)
        snprintf(buf, n, "%.2f MiB", (double)b / 1048576.0);
    else
        snprintf(buf, n, "%.2f GiB", (double)b / 1073741824.0);
}

/* Python's repr(float): the shortest text that reads back exactly. */
static void py_repr(double x, char *out, size_t n)
{
    if (isnan(x)) {
        snprintf(out, n, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(out, n, x < 0 ? "-inf" : "inf");
        return;
    }
    if (x == 0) {
        snprintf(out, n, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    char tmp[64];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    /* tmp is [-]d[.ddd]e[+-]XX */
    char digits[32];
    size_t nd = 0;
    const char *p = tmp;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p))
            digits[nd++] = *p;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    char body[96];
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 >= 0) {
            char ip[32], fp[32];
            size_t il = (size_t)exp10 + 1;
            for (size_t i = 0; i < il; i++)
                ip[i] = i < nd ? digits[i] : '0';
            ip[il] = '\0';
            if (nd > il)
                snprintf(fp, sizeof fp, "%s", digits + il);
            else
                snprintf(fp, sizeof fp, "0");
            snprintf(body, sizeof body, "%s.%s", ip, fp);
        } else {
            snprintf(body, sizeof body, "0.%.*s%s", -exp10 - 1, "0000", digits);
        }
    } else {
        if (nd > 1)
            snprintf(body, sizeof body, "%c.%se%c%02d", digits[0], digits + 1,
                     exp10 < 0 ? '-' : '+', abs(exp10));
        else
            snprintf(body, sizeof body, "%ce%c%02d", digits[0],
                     exp10 < 0 ? '-' : '+', abs(exp10));
    }
    snprintf(out, n, "%s%s", neg ? "-" : "", body);
}

/* One value of an HF metric dict: float repr, or newer HF's '{:.4g}'. */
static void hf_value(double x, char *out, size_t n)
{
    if (O.log_style_string)
        snprintf(out, n, "'%.4g'", x);
    else
        py_repr(x, out, n);
}

static double round_to(double x, int digits)
{
    double m = pow(10, digits);
    return round(x * m) / m;
}

#define SITE "/usr/local/lib/python3.11/site-packages"

static const char *const tb_head =
    "Traceback (most recent call last):\n"
    "  File \"/workspace/train.py\", line 214, in <module>\n"
    "    main()\n"
    "  File \"/workspace/train.py\", line 207, in main\n"
    "    train_result = trainer.train(resume_from_checkpoint=checkpoint)\n"
    "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/trainer.py\", line 2245, in train\n"
    "    return inner_training_loop(\n"
    "           ^^^^^^^^^^^^^^^^^^^^\n";

static const char *const tb_forward =
    "  File \"" SITE "/transformers/trainer.py\", line 2556, in _inner_training_loop\n"
    "    tr_loss_step = self.training_step(model, inputs, num_items_in_batch)\n"
    "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/trainer.py\", line 3718, in training_step\n"
    "    loss = self.compute_loss(model, inputs, num_items_in_batch=num_items_in_batch)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/trainer.py\", line 3783, in compute_loss\n"
    "    outputs = model(**inputs)\n"
    "              ^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 1736, in _wrapped_call_impl\n"
    "    return self._call_impl(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 1747, in _call_impl\n"
    "    return forward_call(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/accelerate/utils/operations.py\", line 823, in forward\n"
    "    return model_forward(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/models/llama/modeling_llama.py\", line 831, in forward\n"
    "    outputs = self.model(\n"
    "              ^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 1747, in _call_impl\n"
    "    return forward_call(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/models/llama/modeling_llama.py\", line 589, in forward\n"
    "    layer_outputs = decoder_layer(\n"
    "                    ^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/models/llama/modeling_llama.py\", line 332, in forward\n"
    "    hidden_states = self.mlp(hidden_states)\n"
    "                    ^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/models/llama/modeling_llama.py\", line 172, in forward\n"
    "    down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))\n"
    "                               ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n";

static const char *const tb_optim =
    "  File \"" SITE "/transformers/trainer.py\", line 2612, in _inner_training_loop\n"
    "    self.optimizer.step()\n"
    "  File \"" SITE "/accelerate/optimizer.py\", line 171, in step\n"
    "    self.optimizer.step(closure)\n"
    "  File \"" SITE "/torch/optim/lr_scheduler.py\", line 137, in wrapper\n"
    "    return func.__get__(opt, opt.__class__)(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/optim/optimizer.py\", line 487, in wrapper\n"
    "    out = func(*args, **kwargs)\n"
    "          ^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/optim/optimizer.py\", line 91, in _use_grad\n"
    "    ret = func(self, *args, **kwargs)\n"
    "          ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/optim/adamw.py\", line 209, in step\n"
    "    has_complex = self._init_group(\n"
    "                  ^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/optim/adamw.py\", line 152, in _init_group\n"
    "    state[\"exp_avg\"] = torch.zeros_like(\n"
    "                       ^^^^^^^^^^^^^^^^^\n";

static const char *const tb_load =
    "Traceback (most recent call last):\n"
    "  File \"/workspace/train.py\", line 214, in <module>\n"
    "    main()\n"
    "  File \"/workspace/train.py\", line 141, in main\n"
    "    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path).to(device)\n"
    "            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/transformers/modeling_utils.py\", line 3164, in to\n"
    "    return super().to(*args, **kwargs)\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 1340, in to\n"
    "    return self._apply(convert)\n"
    "           ^^^^^^^^^^^^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 900, in _apply\n"
    "    module._apply(fn)\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 927, in _apply\n"
    "    param_applied = fn(param)\n"
    "                    ^^^^^^^^^\n"
    "  File \"" SITE "/torch/nn/modules/module.py\", line 1326, in convert\n"
    "    return t.to(\n"
    "           ^^^^^\n";

/* Print the traceback and PyTorch's message for f, then exit 1. */
static void die_oom(const struct failure *f)
{
    if (O.kernel_oom) {
        /* The OOM killer gives no warning and no message. */
        kill(getpid(), SIGKILL);
        for (;;)
            pause();
    }
    long long cap = O.capacity;
    long long in_use = f->allocated;
    long long free_b = cap - in_use;
    char tried[32], total[32], freestr[32], used[32], alloc[32], unalloc[32];
    torch_size(f->tried, tried, sizeof tried);
    torch_size(cap, total, sizeof total);
    torch_size(free_b, freestr, sizeof freestr);
    torch_size(in_use, used, sizeof used);
    torch_size(f->allocated, alloc, sizeof alloc);
    torch_size(0, unalloc, sizeof unalloc);
    int gpu = g_rank;

    const char *tb = f->kind == FAIL_LOAD ? "" : f->kind == FAIL_OPTIM ? tb_optim
                                                                       : tb_forward;
    char *msg;
    switch ((enum oom_style)O.oom_style) {
    case STYLE_OLD:
        msg = fmt("RuntimeError: CUDA out of memory. Tried to allocate %s (GPU %d; "
                  "%s total capacity; %s already allocated; %s free; %s reserved "
                  "in total by PyTorch) If reserved memory is >> allocated memory "
                  "try setting max_split_size_mb to avoid fragmentation.  See "
                  "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
                  tried, gpu, total, alloc, freestr, alloc);
        break;
    case STYLE_21:
        msg = fmt("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
                  "allocate %s. GPU %d has a total capacty of %s of which %s is "
                  "free. Including non-PyTorch memory, this process has %s memory "
                  "in use. Of the allocated memory %s is allocated by PyTorch, and "
                  "%s is reserved by PyTorch but unallocated. If reserved but "
                  "unallocated memory is large try setting max_split_size_mb to "
                  "avoid fragmentation.  See documentation for Memory Management "
                  "and PYTORCH_CUDA_ALLOC_CONF",
                  tried, gpu, total, freestr, used, alloc, unalloc);
        break;
    case STYLE_CPU:
        msg = fmt("RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. "
                  "DefaultCPUAllocator: can't allocate memory: you tried to "
                  "allocate %lld bytes. Error code 12 (Cannot allocate memory)",
                  f->tried);
        break;
    case STYLE_CURRENT:
    case STYLE_HIP:
    default:
        msg = fmt("torch.OutOfMemoryError: %s out of memory. Tried to allocate %s. "
                  "GPU %d has a total capacity of %s of which %s is free. Including "
                  "non-PyTorch memory, this process has %s memory in use. Of the "
                  "allocated memory %s is allocated by PyTorch, and %s is reserved "
                  "by PyTorch but unallocated. If reserved but unallocated memory "
                  "is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
                  "True to avoid fragmentation.  See documentation for Memory "
                  "Management  (https://pytorch.org/docs/stable/notes/cuda.html"
                  "#environment-variables)",
                  O.oom_style == STYLE_HIP ? "HIP" : "CUDA", tried, gpu, total,
                  freestr, used, alloc, unalloc);
        break;
    }
    if (f->kind == FAIL_LOAD)
        emit(2, "%s%s\n", tb_load, msg);
    else
        emit(2, "%s%s%s\n", tb_head, tb, msg);
    free(msg);
    exit(EXIT_PYERR);
}

static void die_crash(void)
{
    emit(2, "%s%s"
         "  File \"" SITE "/transformers/models/llama/modeling_llama.py\", line 571, in forward\n"
         "    inputs_embeds = self.embed_tokens(input_ids)\n"
         "                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
         "  File \"" SITE "/torch/nn/modules/module.py\", line 1747, in _call_impl\n"
         "    return forward_call(*args, **kwargs)\n"
         "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
         "  File \"" SITE "/torch/nn/modules/sparse.py\", line 190, in forward\n"
         "    return F.embedding(\n"
         "           ^^^^^^^^^^^^\n"
         "  File \"" SITE "/torch/nn/functional.py\", line 2551, in embedding\n"
         "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
         "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
         "RuntimeError: Expected all tensors to be on the same device, but found at "
         "least two devices, cuda:%d and cpu!\n",
         tb_head, tb_forward, g_rank);
    exit(EXIT_PYERR);
}

/* ------------------------------------------------------------------ */
/* Time, noise, progress                                               */
/* ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
    if (!(s > 0))
        return;
    struct timespec ts = { (time_t)s, (long)((s - floor(s)) * 1e9) };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A deterministic number in [0, 1) for (stream, k) under --seed. */
static double rand01(uint64_t stream, uint64_t k)
{
    uint64_t h = splitmix64((uint64_t)O.seed ^ splitmix64(stream * 0x100000001b3ULL + k));
    return (double)(h >> 11) * 0x1.0p-53;
}

/*
 * Seconds one micro-step of optimizer step `step` takes:
 *   (overhead + sample_time * micro * ckpt_slowdown? * lf(step))
 *   * (1 + pressure_slowdown if the step's peak > 90% of capacity)
 *   * (1 + noise% * u), u in [-1, 1) drawn from --seed and the step.
 */
static double micro_step_time(long step)
{
    double t = O.step_overhead + O.sample_time * (double)micro_samples() *
               (O.ckpt ? O.ckpt_slowdown : 1.0) * length_factor(step);
    if ((double)mem_peak(step) > 0.9 * (double)O.capacity)
        t *= 1.0 + O.pressure_slowdown;
    if (O.noise > 0)
        t *= 1.0 + O.noise / 100.0 * (2.0 * rand01(1, (uint64_t)step) - 1.0);
    return t;
}

/* tqdm's format_interval. */
static void tqdm_interval(double t, char *buf, size_t n)
{
    long s = (long)t;
    long m = s / 60, h = m / 60;
    s %= 60;
    m %= 60;
    if (h)
        snprintf(buf, n, "%ld:%02ld:%02ld", h, m, s);
    else
        snprintf(buf, n, "%02ld:%02ld", m, s);
}

/* tqdm's EMA with bias correction (smoothing 0.3). */
struct ema {
    double last;
    long calls;
};

static void ema_add(struct ema *e, double x)
{
    e->last = 0.3 * x + 0.7 * e->last;
    e->calls++;
}

static double ema_get(const struct ema *e)
{
    return e->calls ? e->last / (1 - pow(0.7, (double)e->calls)) : e->last;
}

struct bar {
    double start;
    double last_t;
    struct ema dt;
    size_t last_len; /* display width of the last draw, for padding */
};

/* Draw tqdm's default meter for n of total, as HF's bar does off a tty. */
static void bar_draw(struct bar *b, long n, long total, double now)
{
    static const char *const sym[] = { " ", "\u258f", "\u258e", "\u258d", "\u258c",
                                       "\u258b", "\u258a", "\u2589", "\u2588" };
    double frac = (double)n / (double)total;
    int units = (int)(frac * 10 * 8);
    int full = units / 8, part = units % 8;
    char bar[64] = "";
    size_t bl = 0;
    for (int i = 0; i < full && i < 10; i++)
        bl += (size_t)snprintf(bar + bl, sizeof bar - bl, "%s", sym[8]);
    if (full < 10) {
        bl += (size_t)snprintf(bar + bl, sizeof bar - bl, "%s", sym[part]);
        for (int i = 0; i < 10 - full - 1; i++)
            bl += (size_t)snprintf(bar + bl, sizeof bar - bl, " ");
    }

    double elapsed = now - b->start;
    char el[32], rem[32], rate[32];
    tqdm_interval(elapsed, el, sizeof el);
    double r = b->dt.calls ? 1.0 / ema_get(&b->dt) : 0;
    const char *unit = O.bar_unit ? O.bar_unit : "it";
    if (n == 0 || !(r > 0)) {
        snprintf(rem, sizeof rem, "?");
        snprintf(rate, sizeof rate, "?%s/s", unit);
    } else {
        tqdm_interval((double)(total - n) / r, rem, sizeof rem);
        if (1.0 / r > 1)
            snprintf(rate, sizeof rate, "%5.2fs/%s", 1.0 / r, unit);
        else
            snprintf(rate, sizeof rate, "%5.2f%s/s", r, unit);
    }
    char postfix[64] = "";
    if (O.bar_postfix)
        snprintf(postfix, sizeof postfix, ", %s=%ld", O.bar_postfix, n);
    char *line = fmt("%s%s%3.0f%%|%s| %ld/%ld [%s<%s, %s%s]", O.bar_desc ? O.bar_desc : "",
                     O.bar_desc ? ": " : "", frac * 100, bar, n, total, el, rem, rate, postfix);
    /* display width: bytes that do not continue a UTF-8 sequence */
    size_t width = 0;
    for (const char *c = line; *c; c++)
        width += ((unsigned char)*c & 0xC0) != 0x80;
    size_t pad = b->last_len > width ? b->last_len - width : 0;
    char *out = fmt("\r%s%*s", line, (int)pad, "");
    write_all(2, out, strlen(out));
    free(out);
    free(line);
    b->last_len = width;
}

/* ------------------------------------------------------------------ */
/* Failure modes                                                       */
/* ------------------------------------------------------------------ */

static void __attribute__((noreturn)) sleep_forever(void)
{
    for (;;)
        pause();
}

/*
 * A rank whose peer died: it waits in all_reduce for a peer that will
 * never come, and NCCL's blocking wait does not return for SIGTERM.
 */
static void __attribute__((noreturn)) hang_in_all_reduce(void)
{
    signal(SIGTERM, SIG_IGN);
    sleep_forever();
}

/*
 * --escape: a daemonised grandchild in its own session, out of the
 * trainer's process group, holding stdout and stderr open.  Its pid is
 * written to PIDFILE.tmp and renamed, so readers see all of it or none;
 * we wait for that before training, so the file exists once any step
 * has been printed.
 */
static void escape(const char *pidfile)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        die_input("--escape: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t mid = fork();
    if (mid < 0)
        die_input("--escape: fork: %s", strerror(errno));
    if (mid == 0) {
        close(pfd[0]);
        pid_t gc = fork();
        if (gc != 0)
            _exit(gc < 0 ? 1 : 0);
        setsid();
        char tmp[4096], buf[32];
        snprintf(tmp, sizeof tmp, "%s.tmp", pidfile);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
        if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) < 0 ||
            rename(tmp, pidfile) < 0)
            _exit(1);
        write_all(pfd[1], "k", 1);
        close(pfd[1]);
        close(0);
        sleep_forever();
    }
    close(pfd[1]);
    int st;
    while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
        ;
    char c;
    ssize_t r;
    while ((r = read(pfd[0], &c, 1)) < 0 && errno == EINTR)
        ;
    close(pfd[0]);
    if (r != 1)
        die_input("--escape: cannot write '%s'", pidfile);
}

/* ------------------------------------------------------------------ */
/* Training                                                            */
/* ------------------------------------------------------------------ */

/* Samples (in the knob's unit) one optimizer step consumes, all ranks. */
static double step_samples(void)
{
    return (double)O.micro * (double)O.accum * (double)O.nproc;
}

static void print_startup(void)
{
    long ms = micro_samples();
    double global = (double)ms * (double)O.accum * (double)O.nproc;
    long epochs = (long)ceil((double)O.max_steps * global / (double)O.num_examples);
    char *s = fmt(
        "simtrain: knobs micro_batch=%ld (%s) grad_accum=%ld (%s) "
        "checkpointing=%s (%s) max_steps=%ld (%s) unit=%s\n"
        "***** Running training *****\n"
        "  Num examples = %ld\n"
        "  Num Epochs = %ld\n"
        "  Instantaneous batch size per device = %ld\n"
        "  Total train batch size (w. parallel, distributed & accumulation) = %ld\n"
        "  Gradient Accumulation steps = %ld\n"
        "  Total optimization steps = %ld\n"
        "  Number of trainable parameters = 1,235,814,400\n"
        "  Memory: pin_memory=True, reserved memory 0.00 GiB\n",
        O.micro, O.src[KNOB_MICRO], O.accum, O.src[KNOB_ACCUM],
        O.ckpt ? "on" : "off", O.src[KNOB_CKPT], O.max_steps, O.src[KNOB_STEPS],
        O.unit_frames ? "frames" : "samples", O.num_examples, epochs, O.micro,
        (long)((double)O.micro * (double)O.accum * (double)O.nproc), O.accum,
        O.max_steps);
    write_all(1, s, strlen(s));
    free(s);
    if (O.unit_frames) {
        s = fmt("  Frames per sample = %ld (%ld samples per micro-batch)\n",
                O.frames_per_sample, ms);
        write_all(1, s, strlen(s));
        free(s);
    }
    if (O.bf16) {
        const char *w = "  Mixed precision = bf16\n";
        write_all(1, w, strlen(w));
    }
    if (O.optim8bit) {
        const char *w = "  Optimizer = 8-bit (a quarter of the state)\n";
        write_all(1, w, strlen(w));
    }
    if (O.fsdp) {
        const char *w = "  FSDP = full_shard\n";
        write_all(1, w, strlen(w));
    }
    if (O.ckpt) {
        const char *w = "`use_cache=True` is incompatible with gradient "
                        "checkpointing. Setting `use_cache=False`.\n";
        write_all(1, w, strlen(w));
    }
}

static double step_loss(long step)
{
    return 1.8 + 1.4 * exp(-(double)step / 40.0) + 0.08 * (rand01(2, (uint64_t)step) - 0.5);
}

static void __attribute__((noreturn)) train(int rank)
{
    g_rank = rank;
    int follows = O.oom_rank < 0 || O.oom_rank == rank;
    long m = micro_samples();
    struct failure fail = mem_first_failure(m, O.max_steps);
    FILE *report = NULL;

    if (rank == 0) {
        print_startup();
        if (O.report) {
            const char *path = getenv("AUTOBATCH_REPORT");
            report = fopen(path, "a");
            if (!report)
                die_input("cannot open AUTOBATCH_REPORT '%s': %s", path, strerror(errno));
        }
    }
    sleep_s(O.startup_time);

    if (fail.kind == FAIL_LOAD) {
        if (follows)
            die_oom(&fail);
        hang_in_all_reduce();
    }

    struct bar bar = { 0 };
    bar.start = bar.last_t = now_s();
    if (rank == 0)
        bar_draw(&bar, 0, O.max_steps, bar.start);

    double loss_sum = 0, loss_window = 0;
    long window_n = 0;
    double global_samples = (double)m * (double)O.accum * (double)O.nproc;

    for (long step = 1; step <= O.max_steps; step++) {
        double mt = micro_step_time(step);
        if (step == O.crash_at_step) {
            sleep_s(mt / 2);
            die_crash();
        }
        if (fail.step == step && !follows) {
            /* this rank does its forward and backward, then waits for
             * the rank that died */
            sleep_s(mt * (double)O.accum);
            hang_in_all_reduce();
        }
        if (fail.step == step && fail.kind == FAIL_FORWARD) {
            sleep_s(mt / 2);
            die_oom(&fail);
        }
        sleep_s(mt * (double)O.accum);
        if (fail.step == step && fail.kind == FAIL_OPTIM)
            die_oom(&fail);

        double t = now_s();
        double loss = step_loss(step);
        loss_sum += loss;
        loss_window += loss;
        window_n++;
        if (rank == 0) {
            ema_add(&bar.dt, t - bar.last_t);
            bar.last_t = t;
            bar_draw(&bar, step, O.max_steps, t);
            if (step % O.logging_steps == 0) {
                char l[128], g[128], lr[128], ep[128];
                hf_value(round_to(loss_window / (double)window_n, 4), l, sizeof l);
                hf_value(0.6 + 3.0 * exp(-(double)step / 25.0) +
                             0.2 * rand01(3, (uint64_t)step), g, sizeof g);
                hf_value(5e-05 * (double)(O.max_steps - step) / (double)O.max_steps,
                         lr, sizeof lr);
                hf_value(round_to((double)step * global_samples /
                                      (double)O.num_examples, 4), ep, sizeof ep);
                char *line = fmt("{'loss': %s, 'grad_norm': %s, 'learning_rate': %s, "
                                 "'epoch': %s}\n", l, g, lr, ep);
                write_all(1, line, strlen(line));
                free(line);
                loss_window = 0;
                window_n = 0;
            }
            if (report) {
                fprintf(report,
                        "{\"step\": %ld, \"samples\": %.0f, \"time\": %.6f, "
                        "\"peak_mem_bytes\": %lld}\n",
                        step, (double)step * step_samples(), t, mem_peak(step));
                fflush(report);
            }
        }
        if (step == O.hang_at_step)
            sleep_forever();
        if (step == O.exit_at_step)
            exit(EXIT_OK);
    }

    if (rank == 0) {
        double runtime = now_s() - bar.start;
        char rt[128], sps[128], stps[128], tl[128], ep[128];
        hf_value(round_to(runtime, 4), rt, sizeof rt);
        hf_value(round_to((double)O.max_steps * step_samples() / runtime, 3), sps,
                 sizeof sps);
        hf_value(round_to((double)O.max_steps / runtime, 3), stps, sizeof stps);
        hf_value(loss_sum / (double)O.max_steps, tl, sizeof tl);
        hf_value(round_to((double)O.max_steps * global_samples /
                              (double)O.num_examples, 4), ep, sizeof ep);
        char *s = fmt("\n\nTraining completed. Do not forget to share your model on "
                      "huggingface.co/models =)\n\n\n"
                      "{'train_runtime': %s, 'train_samples_per_second': %s, "
                      "'train_steps_per_second': %s, 'train_loss': %s, 'epoch': %s}\n",
                      rt, sps, stps, tl, ep);
        write_all(1, s, strlen(s));
        free(s);
        write_all(2, "\n", 1); /* tqdm closes its bar with a newline */
    }
    if (report)
        fclose(report);
    exit(EXIT_OK);
}

/* ------------------------------------------------------------------ */
/* Launcher (--nproc)                                                  */
/* ------------------------------------------------------------------ */

/* glog-style prefix torchrun uses: "W1121 08:00:00.123456 4242 file:line] " */
static char *glog_prefix(char level, const char *where)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    return fmt("%c%02d%02d %02d:%02d:%02d.%06ld %d %s] ", level, tm.tm_mon + 1,
               tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000,
               (int)getpid(), where);
}

static void __attribute__((noreturn)) launch(void)
{
    char *w = glog_prefix('W', "torch/distributed/run.py:793");
    emit(2, "%s\n%s*****************************************\n"
         "%sSetting OMP_NUM_THREADS environment variable for each process to be "
         "1 in default, to avoid your system being overloaded, please further "
         "tune the variable for optimal performance in your application as "
         "needed. \n%s*****************************************\n", w, w, w, w);
    free(w);

    pid_t pids[64];
    fflush(NULL);
    for (int r = 0; r < O.nproc; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            emit(2, "simtrain: fork: %s\n", strerror(errno));
            exit(EXIT_PYERR);
        }
        if (pid == 0) {
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1);
            setenv("LOCAL_RANK", v, 1);
            snprintf(v, sizeof v, "%ld", O.nproc);
            setenv("WORLD_SIZE", v, 1);
            train(r);
        }
        pids[r] = pid;
    }

    /*
     * Wait for every rank, however long.  Real torchrun tears the other
     * workers down when one fails; this launcher does not, so that a hung
     * rank keeps the whole tree alive until the supervisor kills it.
     */
    int bad_rank[64], bad_status[64], nbad = 0;
    for (long left = O.nproc; left > 0;) {
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int r = 0; r < O.nproc; r++) {
            if (pids[r] != pid)
                continue;
            left--;
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
                bad_rank[nbad] = r;
                bad_status[nbad++] = st;
            }
        }
    }
    if (nbad == 0)
        exit(EXIT_OK);

    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    time_t now = time(NULL);
    struct tm tm;
    char when[64];
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d_%H:%M:%S", &tm);

    /* torchrun's failure record for one rank */
    char *rec[64];
    for (int i = 0; i < nbad; i++) {
        int st = bad_status[i], r = bad_rank[i];
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
        char *trace = WIFSIGNALED(st)
            ? fmt("Signal %d (SIG%s) received by PID %d", WTERMSIG(st),
                  sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?",
                  (int)pids[r])
            : fmt("To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html");
        rec[i] = fmt("[%d]:\n"
                     "  time      : %s\n"
                     "  host      : %s\n"
                     "  rank      : %d (local_rank: %d)\n"
                     "  exitcode  : %d (pid: %d)\n"
                     "  error_file: <N/A>\n"
                     "  traceback : %s\n",
                     i, when, host, r, r, code, (int)pids[r], trace);
        free(trace);
    }
    size_t olen = 1;
    for (int i = 1; i < nbad; i++)
        olen += strlen(rec[i]);
    char *others = calloc(1, olen);
    if (!others)
        exit(EXIT_PYERR);
    for (int i = 1; i < nbad; i++)
        strcat(others, rec[i]);

    int st0 = bad_status[0];
    int code0 = WIFEXITED(st0) ? WEXITSTATUS(st0) : -WTERMSIG(st0);
    char *e = glog_prefix('E', "torch/distributed/elastic/multiprocessing/api.py:869");
    emit(2, "%sfailed (exitcode: %d) local_rank: %d (pid: %d) of binary: "
         "/usr/bin/python3\n"
         "Traceback (most recent call last):\n"
         "  File \"/usr/local/bin/torchrun\", line 8, in <module>\n"
         "    sys.exit(main())\n"
         "             ^^^^^^\n"
         "  File \"" SITE "/torch/distributed/run.py\", line 919, in main\n"
         "    run(args)\n"
         "  File \"" SITE "/torch/distributed/launcher/api.py\", line 263, in launch_agent\n"
         "    raise ChildFailedError(\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "%s"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "%s"
         "============================================================\n",
         e, code0, bad_rank[0], (int)pids[bad_rank[0]],
         nbad > 1 ? others : "  <NO_OTHER_FAILURES>\n", rec[0]);
    free(e);
    free(others);
    for (int i = 0; i < nbad; i++)
        free(rec[i]);
    exit(EXIT_PYERR);
}

/* ------------------------------------------------------------------ */
/* Help and main                                                       */
/* ------------------------------------------------------------------ */

static const char usage_text[] =
"usage: simtrain [OPTIONS] [CONFIG.json|CONFIG.yaml] [key.path=VALUE...]\n"
"\n"
"A simulated Hugging Face Trainer job: no GPU, exact memory model, real\n"
"PyTorch out-of-memory messages, tqdm progress and HF metric dicts.\n"
"See examples/simtrain/README.md for the memory model's formula.\n"
"\n"
"Knobs (later sources win: defaults < env < config < overrides < flags):\n"
"  --per_device_train_batch_size N   micro-batch (default 8; frames with\n"
"                                    --batch-unit frames)\n"
"  --gradient_accumulation_steps N   micro-steps per optimizer step (default 1)\n"
"  --gradient_checkpointing [BOOL]   activation checkpointing (bare = true)\n"
"  --max_steps N                     optimizer steps (default 100000; <= 0 too)\n"
"  --logging_steps N                 print a metric dict every N steps (1)\n"
"  Each also as --flag=V, with '-' or '_'.  Other --flags (--output_dir D,\n"
"  --bf16 ...) are accepted and ignored, with their value if the next word\n"
"  does not start with '--' and is not a key=value override.\n"
"  --knobs-from-env                  read AUTOBATCH_MICRO_BATCH,\n"
"                                    AUTOBATCH_GRAD_ACCUM, AUTOBATCH_CHECKPOINTING,\n"
"                                    AUTOBATCH_MAX_STEPS (or SIMTRAIN_KNOBS_FROM_ENV=1)\n"
"  --config FILE                     JSON (// and /* */ comments, trailing commas\n"
"                                    allowed) or YAML; a positional *.json,\n"
"                                    *.yaml or *.yml is the same\n"
"  [+|++]key.path=VALUE              Hydra-style override of a knob's key path\n"
"  --batch-key PATH                  key path of the micro-batch\n"
"                                    (per_device_train_batch_size); a.0.b indexes lists\n"
"  --accum-key PATH                  (gradient_accumulation_steps)\n"
"  --ckpt-key PATH                   (gradient_checkpointing)\n"
"  --steps-key PATH                  (max_steps)\n"
"  --batch-unit samples|frames       unit of the micro-batch knob (samples)\n"
"  --frames-per-sample N             with frames: samples = floor(frames / N) (1000)\n"
"\n"
"Memory model (sizes take K/M/G/T, binary; every allocation is rounded up\n"
"to 2 MiB):\n"
"  --capacity SIZE                   device memory (24G)\n"
"  --device-capacity LIST            per device, e.g. 0=24G,1=16G: the run's capacity\n"
"                                    is the smallest of the devices in\n"
"                                    CUDA_VISIBLE_DEVICES (unlisted: --capacity)\n"
"  AUTOBATCH_EMULATE_GPU_MEMORY=B    (environment) a device of B bytes at most, as\n"
"                                    autobatch's --emulate-gpu-memory makes a real one\n"
"  --model-mem SIZE                  weights + gradients, at start (2G)\n"
"  --optim-mem SIZE                  optimizer state, at step 1's optimizer.step() (2G)\n"
"  --act-mem SIZE                    activations per sample (256M)\n"
"  --ckpt-factor F                   activations x F with checkpointing (0.25)\n"
"  --bf16-factor F                   activations x F with HF's --bf16 true (0.5)\n"
"                                    (HF's --optim NAME with 8bit in NAME keeps a\n"
"                                    quarter of --optim-mem; --fsdp full_shard shares\n"
"                                    --model-mem and --optim-mem among --nproc ranks)\n"
"  --long-step K                     optimizer step K holds the longest batch (0 = none)\n"
"  --long-factor F                   its activations and compute x F (1.5)\n"
"  --print-max                       print the largest micro-batch that survives\n"
"                                    max_steps steps (samples; with frames:\n"
"                                    \"SAMPLES FRAMES\", FRAMES = SAMPLES x N), exit 0;\n"
"                                    0 if nothing fits, -1 if everything does\n"
"  --oom-style current|2.1|old|cpu|hip  which PyTorch message to print (current)\n"
"  --kernel-oom                      die of SIGKILL instead, like the OOM killer\n"
"\n"
"Timing and output:\n"
"  --step-overhead DUR               per micro-step (5ms); DUR takes ns/us/ms/s\n"
"  --sample-time DUR                 per sample per micro-step (0.2ms)\n"
"  --ckpt-slowdown F                 sample time x F with checkpointing (1.33)\n"
"  --pressure-slowdown F             +F when a step's peak > 90% of capacity (0.25)\n"
"  --noise PCT                       +-PCT% deterministic noise per step (0)\n"
"  --seed N                          seed for noise and losses (0)\n"
"  --startup-time DUR                start-up before step 1 (0)\n"
"  --num-examples N                  dataset size, for epochs (10000)\n"
"  --log-style float|string          HF metric values: floats or '.4g' strings\n"
"  --bar-desc TEXT, --bar-unit UNIT, --bar-postfix KEY  draw the training bar\n"
"                                    as TEXT: ...UNIT/s, KEY=N] (F5-TTS, Parler)\n"
"  --report                          append {\"step\",\"samples\",\"time\",\n"
"                                    \"peak_mem_bytes\"} lines to $AUTOBATCH_REPORT\n"
"\n"
"Failure modes:\n"
"  --nproc N                         fork N ranks like torchrun and wait for all\n"
"  --oom-rank K                      only rank K runs out of memory; the others\n"
"                                    then hang in all_reduce, ignoring SIGTERM\n"
"  --crash-at-step K                 a non-OOM RuntimeError during step K\n"
"  --hang-at-step K                  print nothing after step K, sleep forever\n"
"  --exit-at-step K                  exit 0 after step K, printing nothing more\n"
"  --ignore-sigterm                  ignore SIGTERM\n"
"  --escape PIDFILE                  start a setsid() grandchild that keeps stdout\n"
"                                    open and sleeps; its pid goes to PIDFILE\n"
"\n"
"Every option --name also reads SIMTRAIN_NAME from the environment (upper\n"
"case, '-' as '_'), e.g. SIMTRAIN_CAPACITY=8G; the command line wins.\n"
"Exit status: 0 success, 1 OOM or crash (a Python exception), 2 bad usage.\n";

int main(int argc, char **argv)
{
    struct pending pd = { 0 };

    opts_from_env();
    parse_argv(argc, argv, &pd);
    if (O.help) {
        write_all(1, usage_text, sizeof usage_text - 1);
        free(pd.overrides);
        free(pd.flags);
        return EXIT_OK;
    }
    resolve_knobs(&pd);
    free(pd.overrides);
    free(pd.flags);
    validate();

    if (O.print_max) {
        long m = print_max_samples();
        if (O.unit_frames)
            printf("%ld %ld\n", m, m > 0 ? m * O.frames_per_sample : m);
        else
            printf("%ld\n", m);
        return EXIT_OK;
    }

    if (O.ignore_sigterm)
        signal(SIGTERM, SIG_IGN);
    if (O.escape)
        escape(O.escape);
    if (O.nproc > 1)
        launch();
    train(0);
}
