/*
 * inject: turn one candidate into the argv and environment of a trial.
 *
 * Every trial gets the variables of DESIGN.md 2.2 (AUTOBATCH_TRIAL,
 * AUTOBATCH_MICRO_BATCH, AUTOBATCH_GRAD_ACCUM, AUTOBATCH_CHECKPOINTING,
 * AUTOBATCH_MAX_STEPS, AUTOBATCH_REPORT), replacing any the user's
 * environment already had.  Then the preset says how the knobs reach the
 * job:
 *   - INJECT_ENV: through those variables alone; argv is unchanged.
 *   - INJECT_HF: Hugging Face TrainingArguments flags are set in argv:
 *     --per_device_train_batch_size, --gradient_accumulation_steps,
 *     --max_steps, and --gradient_checkpointing true|false when
 *     checkpointing is searched.  A flag the command already has, as
 *     `--flag V` or `--flag=V`, gets its value replaced (every occurrence,
 *     so none is left disagreeing); a missing flag is appended.
 */
#ifndef AB_INJECT_H
#define AB_INJECT_H

#include <stddef.h>

#include "strvec.h"

enum inject_preset { INJECT_ENV, INJECT_HF };

struct inject_candidate {
    long micro_batch;
    long grad_accum;
    int checkpointing;
};

struct inject_opts {
    enum inject_preset preset;
    int set_checkpointing;   /**< checkpointing is searched: pass it on */
    long max_steps;          /**< warm-up + measured steps */
    long trial_id;
    const char *report_path; /**< AUTOBATCH_REPORT */
};

/**
 * Build the trial's argv from cmd and its environment from envp.  Both
 * outputs must be STRVEC_INIT on entry.  Returns 0 or -1 (ENOMEM).
 */
int inject_build(const struct inject_opts *o, char *const *cmd, char *const *envp,
                 const struct inject_candidate *c, struct strvec *argv, struct strvec *env);

/**
 * Set `--flag value` in argv: replace the value of each `--flag V` and
 * `--flag=V` (a bare `--flag` followed by another option gets the value
 * inserted), or append `--flag value` when absent.  argv[0] is never
 * taken for a flag.  Returns 0 or -1 (ENOMEM).
 */
int inject_set_flag(struct strvec *argv, const char *flag, const char *value);

#endif
