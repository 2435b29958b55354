/* SPDX-License-Identifier: MIT */
/*
 * plan: one run as the user asked for it, parsed from the command line
 * (cli_parse, tuner/cli/cli.h) and read by every layer below it: the
 * session and its checks, the search space, the loop, the outputs.  Data
 * only: no calls, nothing owned (the strings point into argv or the
 * environment and live as long as the process).  setup_load may fill the
 * batch range from the preset when --batch was not given; nothing else
 * writes it after parsing.
 */
#ifndef AB_PLAN_H
#define AB_PLAN_H

#include <stdint.h>

#define PLAN_MAX_KNOBS 8
#define PLAN_MAX_ACCUM 32
#define PLAN_MAX_SLURM_ARGS 16
#define PLAN_MAX_TARGETS 16

struct plan {
    const char *preset_name;  /**< a built-in name, "auto", or a file */
    const char *config_path;  /**< --config, or NULL */
    const char *knob_specs[PLAN_MAX_KNOBS]; /**< --knob NAME=WHERE, in order */
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
    long grad_accum[PLAN_MAX_ACCUM]; /**< --grad-accum LIST; empty: the command's own */
    int ngrad_accum;
    long global_batch;        /**< --global-batch; 0: free mode */
    int world_size_given;
    double headroom;          /**< --headroom PCT as a fraction */
    int no_cache;             /**< --no-cache */
    /** --confirm STEPS|D: the choice runs once more for this many measured
     *  steps or this long, whichever ends first (0: no bound of that
     *  kind); --no-confirm: not at all */
    long confirm_steps;
    double confirm_s;
    int no_confirm;
    int full_trials;          /**< --full-trials: no memory-only boundary trials */
    unsigned allowed;         /**< --allow: KNOB_BITs that may be turned on (precision,
                                   optim8bit, sharding) when batch 1 fits nowhere */
    const char *worst_case;   /**< --worst-case off|auto|scan (auto) */
    double worst_case_scan_s; /**< --worst-case-scan D: the bound on a scan (30 s) */
    int no_probe;             /**< --no-probe */
    int replay;               /**< --replay: guide the search with the replay probe */
    int no_replay;            /**< --no-replay: not even where it would be on by default */
    const char *keep_traces;  /**< --keep-traces DIR, or NULL */
    uint64_t trial_mem_limit; /**< --trial-memory-limit in bytes; 0: none */
    char gpus[256];           /**< --gpus all|LIST; "": one trial at a time */
    long gpus_per_trial;      /**< --gpus-per-trial (1) */
    long parallel;            /**< --parallel N: CPU trials side by side; 0 or 1: one at a time */
    const char *launcher;     /**< --launcher local|slurm; NULL: slurm inside an allocation */
    const char *slurm_args[PLAN_MAX_SLURM_ARGS]; /**< --slurm-arg ARG, in order (checked by the session) */
    int nslurm_args;
    double slurm_pending_s;   /**< --slurm-pending D: cancel an array task still pending after D; 0 never */
    /** --slurm-targets: PARTITION or PARTITION:GRES_TYPE each (checked);
     *  one: this run's; several: one run each, side by side (cli/targets.h) */
    const char *targets[PLAN_MAX_TARGETS];
    int ntargets;
    char targets_buf[1024];
    const char *write_target; /**< --write-target T (one of targets; implies --write), or NULL */
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

#endif
