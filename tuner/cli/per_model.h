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

struct plan;
struct gpu;

/** argc, argv: this run's command line; g: NVML's view of the GPUs;
 *  interrupted: the signal flag, forwarded as SIGTERM to the run in
 *  progress (no later model is started).  Returns the first failing
 *  run's exit status, or 0. */
int per_model_run(int argc, char **argv, const struct plan *plan, const struct gpu *g,
                  volatile sig_atomic_t *interrupted);

#endif
