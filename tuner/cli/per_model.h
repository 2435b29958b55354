/* SPDX-License-Identifier: MIT */
/*
 * per_model: --gpus over several GPU models.  A boundary holds for one
 * model, so each model's GPUs are searched apart, one model after the
 * other, by this binary run again with --gpus naming that model's GPUs;
 * results and reports go to files named after the model (r.json ->
 * r-nvidia-l4-24g.json; `autobatch matrix` puts them side by side).
 * --write is left out: each model has its own choice.  It says one line
 * on stderr before each model's run.
 */
#ifndef AB_PER_MODEL_H
#define AB_PER_MODEL_H

#include <signal.h>
#include <stddef.h>

#include "util/strvec.h"

struct plan;
struct gpu;

/** How one part of a split run (a GPU model, a Slurm target) differs
 *  from the command line that was given. */
struct split_part {
    const char *gpus;   /**< --gpus's value, or NULL: as given */
    const char *target; /**< --slurm-targets's value, or NULL: as given */
    const char *tag;    /**< output files (--json, reports, --events) get -TAG before their extension */
    int keep_write;     /**< --write and --write-target kept (else left out) */
    int drop_webhook;   /**< --webhook and its options left out */
    const char *json;   /**< --json FILE added (when none was given), or NULL */
    int suffix_baseline; /**< --baseline's file suffixed with TAG too (a baseline per target) */
    int drop_baseline;   /**< --baseline left out (that part has none yet) */
};

/** argv again (into av, argv[0] first) for part of a split run; the
 *  command after "--" unchanged.  Returns 0, or -1 (out of memory). */
int per_model_argv(struct strvec *av, int argc, char **argv, const struct plan *plan,
                   const struct split_part *part);

/** "NVIDIA A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb", for file names. */
void per_model_slug(const char *name, char *out, size_t len);

/** PATH with -SLUG before its extension ("r.json" -> "r-nvidia-l4.json"); malloc'd. */
char *per_model_suffixed(const char *path, const char *slug);

/** argc, argv: this run's command line; g: NVML's view of the GPUs;
 *  interrupted: the signal flag, forwarded as SIGTERM to the run in
 *  progress (no later model is started).  Returns the first failing
 *  run's exit status, or 0. */
int per_model_run(int argc, char **argv, const struct plan *plan, const struct gpu *g,
                  volatile sig_atomic_t *interrupted);

#endif
