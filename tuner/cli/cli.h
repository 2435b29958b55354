/* SPDX-License-Identifier: MIT */
/*
 * cli: the command line, parsed into a plan.
 *
 * Options come from one sorted table (name, kind, short letter); each
 * kind (flag, string, count, duration, range) has one handler.  Both
 * `--opt value` and `--opt=value` work.  The command to tune follows
 * `--` (or starts at the first argument that is not an option).  cli.c
 * talks to the user: a bad option prints one line saying what is wrong and
 * how to fix it, then "try 'autobatch --help'".
 */
#ifndef AB_CLI_H
#define AB_CLI_H

#include <stdint.h>

#define CLI_MAX_KNOBS 8
#define CLI_MAX_ACCUM 32

struct plan {
    const char *preset_name;  /**< a built-in name, "auto", or a file */
    const char *config_path;  /**< --config, or NULL */
    const char *knob_specs[CLI_MAX_KNOBS]; /**< --knob NAME=WHERE, in order */
    int nknob_specs;
    int write;                /**< --write */
    int batch_given;          /**< --batch was on the command line */
    long batch_min, batch_max, batch_step;
    long steps, warmup;
    long world_size;
    double trial_timeout_s, hang_timeout_s, budget_s, grace_s;
    const char *json_path;   /**< NULL: no results file */
    int quiet, verbose;
    int show_output;          /**< --show-output: the command's output on a terminal too */
    int checkpointing_searched; /**< --checkpointing was given: pass the knob */
    int ckpt_off, ckpt_on;    /**< --checkpointing off|on|both */
    long grad_accum[CLI_MAX_ACCUM]; /**< --grad-accum LIST; empty: the command's own */
    int ngrad_accum;
    long global_batch;        /**< --global-batch; 0: free mode */
    int world_size_given;
    double headroom;          /**< --headroom PCT as a fraction */
    int no_cache;             /**< --no-cache */
    int no_probe;             /**< --no-probe */
    int replay;               /**< --replay: guide the search with the replay probe */
    const char *keep_traces;  /**< --keep-traces DIR, or NULL */
    uint64_t trial_mem_limit; /**< --trial-memory-limit in bytes; 0: none */
    char gpus[256];           /**< --gpus all|LIST; "": one trial at a time */
    long gpus_per_trial;      /**< --gpus-per-trial (1) */
    const char *launcher;     /**< --launcher local|slurm; NULL: slurm inside an allocation */
    uint64_t emulate_bytes;   /**< --emulate-gpu-memory; 0: the real memory */
    const char *emulate_with; /**< --emulate-with preload|probe (preload) */
    const char *events_path;  /**< --events FILE|-, or NULL */
    int dry_run;              /**< --dry-run */
    const char *markdown_path, *junit_path, *html_path; /**< report files, or NULL */
    const char *baseline_path;   /**< --baseline, or NULL */
    double regression_threshold; /**< --regression-threshold as a fraction (0.05) */
    const char *webhook_url;     /**< --webhook or AUTOBATCH_WEBHOOK_URL, or NULL */
    const char *webhook_format;  /**< --webhook-format (generic) */
    int webhook_insecure;        /**< --webhook-insecure */
    char **command;          /**< points into argv; NULL-terminated */
};

enum cli_status {
    CLI_RUN,   /**< the plan is ready: tune */
    CLI_DONE,  /**< --help or --version was printed: exit 0 */
    CLI_USAGE, /**< an error was printed: exit 2 */
};

/** Fill *p from argv (defaults first).  Prints errors itself. */
enum cli_status cli_parse(int argc, char **argv, struct plan *p);

/** Parse MIN:MAX[:STEP] as --batch does.  Returns 0, or -1 after printing
 *  the one-line error (named "--batch"). */
int cli_batch_range(const char *arg, long *min, long *max, long *step);

/** Print the one-line error format: "autobatch: error: ..." to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
