/* SPDX-License-Identifier: MIT */
/*
 * inject: turn one candidate into the argv, environment and temporary
 * config copies of a trial, the way a preset says (see preset.h).
 *
 * Every trial gets the variables of DESIGN.md 2.2 (AUTOBATCH_TRIAL,
 * AUTOBATCH_MICRO_BATCH, AUTOBATCH_GRAD_ACCUM, AUTOBATCH_CHECKPOINTING,
 * AUTOBATCH_MAX_STEPS, AUTOBATCH_REPORT), replacing any the user's
 * environment already had.  Then each knob of the preset goes where the
 * preset says:
 *   - flag: `--flag V` set in argv: every `--flag V` / `--flag=V` gets the
 *     new value (so none is left disagreeing); a missing flag is appended;
 *   - override: a Hydra `key=V` in argv: an existing `key=`, `+key=` or
 *     `++key=` argument gets the new value; otherwise `++key=V` (add or
 *     replace) is appended;
 *   - key / accelerate_key: the user's config (or the accelerate launch
 *     config) is copied with the value set, into a temporary file beside
 *     the original (so relative includes still resolve), named
 *     `STEM.autobatch-trial-PID-TRIAL-RANDOM.EXT` (RANDOM: 12 characters
 *     from getrandom) and made with O_CREAT|O_EXCL|O_NOFOLLOW, so that
 *     nothing planted beside the config is written through; and every
 *     argument naming the original (`PATH`, `--flag=PATH`) is pointed at
 *     the copy.  The original is never written;
 *   - env: the variable is set.
 * The max_steps knob gets ctx->step_limit, a limit the trial never
 * reaches; output_dir gets the trial's scratch directory; the preset's
 * trial_set settings are passed the same ways.  With a preset's
 * config_fixed the patched copy is written into ctx->workdir under that
 * name, beside links to everything else of the working directory, and
 * the trial runs there (t->cwd).  When ctx->probe_dir is set it goes
 * first on PYTHONPATH and AUTOBATCH_PROBE names ctx->probe_path.
 * The checkpointing knob is passed only when checkpointing is searched;
 * derived config keys (DeepSpeed's train_batch_size) are kept equal to
 * their product unless they hold their `keep` value.
 *
 * Life cycle: struct inject_trial t = INJECT_TRIAL_INIT;
 * inject_build(&ctx, cmd, envp, &cand, &t, ...); run t.argv/t.env;
 * inject_trial_release(&t), which also removes the temporary copies.
 */
#ifndef AB_INJECT_H
#define AB_INJECT_H

#include <stddef.h>

#include "cfile.h"
#include "preset.h"
#include "util/strvec.h"

struct inject_candidate {
    long micro_batch;
    long grad_accum;
    int checkpointing;
    unsigned extra;          /**< knobs turned on beyond the search (KNOB_BIT of
                                  KNOB_PRECISION, KNOB_OPTIM8BIT, KNOB_SHARDING);
                                  passed only where ctx->set_extra has them */
};

struct inject_ctx {
    const struct preset *preset;
    int set_checkpointing;   /**< checkpointing is searched: pass it on */
    unsigned set_extra;      /**< KNOB_BITs turned on for these trials: pass them */
    long max_steps;          /**< warm-up + measured steps (AUTOBATCH_MAX_STEPS) */
    long step_limit;         /**< the max_steps knob: far above what a trial runs */
    const char *output_dir;  /**< the trial's scratch directory (output_dir knob), or NULL */
    const char *workdir;     /**< per-trial working directory for a preset's
                                  config_fixed (made by inject_build), or NULL */
    const char *probe_dir;   /**< put first on PYTHONPATH (the in-process probe), or NULL */
    const char *probe_path;  /**< AUTOBATCH_PROBE, the probe's report file, or NULL */
    long trial_id;
    long world_size;
    const char *report_path; /**< AUTOBATCH_REPORT */
    const char *config_path; /**< the user's --config as named in the command, or NULL */
    const struct cfile *config;     /**< loaded --config, or NULL */
    const char *accel_path;  /**< accelerate --config_file as named, or NULL */
    const struct cfile *accel;      /**< loaded accelerate config, or NULL */
};

struct inject_trial {
    struct strvec argv, env;
    char *tmp_config;        /**< temporary copy of --config, or NULL */
    char *tmp_accel;         /**< temporary copy of the accelerate config, or NULL */
    const char *cwd;         /**< run the command here (ctx->workdir), or NULL */
};
#define INJECT_TRIAL_INIT { STRVEC_INIT, STRVEC_INIT, NULL, NULL, NULL }

/** Put item first on the environment's colon-separated list NAME
 *  (PYTHONPATH, LD_PRELOAD), adding NAME when absent.  Returns 0 or -1. */
int inject_env_prepend(struct strvec *env, const char *name, const char *item);

/**
 * Build a trial.  Returns 0, or -1 with a one-line reason in err (a key
 * the config lacks, a config the command does not name, no memory); on
 * failure nothing is left on disk.
 */
int inject_build(const struct inject_ctx *ctx, char *const *cmd, char *const *envp,
                 const struct inject_candidate *c, struct inject_trial *t,
                 char *err, size_t errlen);

/** Remove the temporary copies and free everything; t can be reused. */
void inject_trial_release(struct inject_trial *t);

/**
 * Apply the candidate's knobs that live in a file (and derived keys) to
 * f; which = VIA_CONFIG or VIA_ACCELERATE.  For the write-back
 * (writeback = 1) Hydra override knobs are applied too, at their key
 * paths (that is how F5-TTS's overrides reach its YAML), and max_steps is
 * left alone.  Returns 0, or -1 with a reason.
 */
int inject_apply_file(const struct inject_ctx *ctx, enum knob_via which, int writeback,
                      struct cfile *f, const struct inject_candidate *c, char *err, size_t errlen);

/**
 * The key paths inject_apply_file() with the same ctx, which and
 * writeback may set: the knobs', the trial_set settings' (trials only)
 * and the derived keys', in that order.  Returns a NULL-terminated array
 * whose strings belong to the preset (free() the array only), or NULL
 * (ENOMEM).
 */
const char **inject_file_keys(const struct inject_ctx *ctx, enum knob_via which, int writeback);

/** Set `--flag value` in argv (see above).  Returns 0 or -1 (ENOMEM). */
int inject_set_flag(struct strvec *argv, const char *flag, const char *value);

/** Set a Hydra override `key=value` in argv (see above).  0 or -1. */
int inject_set_override(struct strvec *argv, const char *key, const char *value);

/**
 * The value the command gives `--flag` (`--flag V` or `--flag=V`, the
 * last one wins, as with argparse), or NULL.  Points into cmd.
 */
const char *inject_flag_value(char *const *cmd, const char *flag);

/**
 * Where the command names its config, per the preset's config_args
 * (`--flag` values, then `positional:.ext`: the first argument after
 * argv[0] with that extension).  NULL when not found.  Points into cmd.
 */
const char *inject_find_config(const struct preset *p, char *const *cmd);

/**
 * Is knob id passed to this context's trials?  Checkpointing when it is
 * searched, a knob turned on beyond the search (KNOB_EXTRA) when
 * set_extra has it, output_dir when the trial has a scratch directory,
 * the others always.  The write-back asks the same.
 */
int inject_wanted(const struct inject_ctx *ctx, int id);

/** The text form of a knob's value for the candidate, per the knob's
 *  spelling; max_steps is ctx->step_limit, output_dir ctx->output_dir. */
void inject_knob_text(const struct inject_ctx *ctx, const struct preset_knob *k, enum knob_id id,
                      const struct inject_candidate *c, char *buf, size_t len);

/**
 * Fill dir (made empty by the caller) with a symbolic link to every entry
 * of the current working directory except `except`, so that a script that
 * opens a fixed path finds everything it expects there.  0 or -1 (errno).
 */
int inject_mirror_cwd(const char *dir, const char *except);

#endif
