/* SPDX-License-Identifier: MIT */
/*
 * preset: where a framework keeps each knob, as data.
 *
 * A preset is a small YAML file (configs/presets/NAME.yaml, compiled into
 * the binary; --preset FILE loads a user's own) that says, for each knob
 * (micro_batch, grad_accum, checkpointing, max_steps), how a trial hands
 * it to the job:
 *
 *   flag: --per_device_train_batch_size   a command-line flag
 *   override: datasets.batch_size_per_gpu a Hydra key=value override
 *   key: train.batch_size                 a key path in the --config file
 *                                         (trials get a patched copy)
 *   accelerate_key: fsdp_config.X         a key path in the accelerate
 *                                         launch config (--config_file)
 *   env: BATCH_SIZE                       an environment variable
 *
 * with optional `unit: frames` (the knob's unit; --batch and samples/s
 * are in it), `spelling: [True, False]` (how a boolean is written on
 * the command line or in the environment) and, for output_dir,
 * `root_joined: true` (see struct preset_knob).  Besides knobs a preset has:
 * `name`, `summary`, `detect` (for --preset auto: `command` substrings, any
 * of which must appear in the command, `config_keys`, all of which
 * must exist in --config, and `script`, text any of which in the script
 * the command runs is evidence that the preset reaches it), `batch` (a default --batch range in the knob's
 * unit), `config_args` (where the command names its config: `--flag`s and
 * `positional:.ext`), and `derived` keys (`{key, product: [...], keep:
 * auto}`: a config value kept equal to the product of knobs and
 * world_size, left alone while it holds the `keep` value), `trial_set`
 * (fixed settings for every trial, `WHERE=VALUE` with WHERE as in --knob;
 * `{output_dir}` in VALUE is the trial's scratch output directory),
 * `progress` (the training bar or line, and whether a step is an update
 * or a micro-batch) and `config_fixed` (a config read from a fixed path).
 * Knobs `max_steps` and `output_dir` are not searched: they give trials
 * a step limit they never reach and a scratch output directory.
 * `precision` is the framework's bf16 mixed precision (autocast), a
 * boolean passed only when on: it changes numerics, so it is tried only
 * under --allow precision, when micro_batch=1 fits nowhere without it
 * (docs/knobs.md).  `optim8bit` likewise: an 8-bit optimizer (HF's
 * --optim adamw_bnb_8bit), under --allow optim8bit; `sharding` (HF's
 * --fsdp, DeepSpeed's zero_optimization.stage), under --allow sharding
 * and with several ranks.
 *
 * Life cycle: struct preset p = PRESET_INIT; preset_load(&p, name_or_path,
 * ...) ; preset_set_knob(...) for --knob; use; preset_release(&p).
 */
#ifndef AB_PRESET_H
#define AB_PRESET_H

#include <stddef.h>

/*
 * The knobs.  KNOB_MAX_STEPS and KNOB_OUTPUT_DIR are not searched: every
 * trial gets a step limit far above what it can run (so the trainer never
 * reaches its own end, with its save and evaluation) and a scratch output
 * directory of its own (so no trial resumes from another, and the user's
 * output directory is never written).  KNOB_PRECISION (bf16 mixed
 * precision), KNOB_OPTIM8BIT (an 8-bit optimizer) and KNOB_SHARDING are
 * passed only to the trials of a run that turned them on.
 */
enum knob_id {
    KNOB_MICRO_BATCH, KNOB_GRAD_ACCUM, KNOB_CHECKPOINTING, KNOB_MAX_STEPS, KNOB_OUTPUT_DIR,
    KNOB_PRECISION, KNOB_OPTIM8BIT, KNOB_SHARDING, KNOB_COUNT
};

enum knob_via {
    VIA_NONE = 0,   /**< not passed (the AUTOBATCH_* variables still are) */
    VIA_FLAG,       /**< where = "--flag" */
    VIA_OVERRIDE,   /**< where = Hydra key path */
    VIA_CONFIG,     /**< where = key path in --config */
    VIA_ACCELERATE, /**< where = key path in the accelerate launch config */
    VIA_ENV,        /**< where = variable name */
};

struct preset_knob {
    enum knob_via via;
    char *where;
    char *unit;         /**< NULL: samples */
    char *spell_true;   /**< NULL: "true" */
    char *spell_false;  /**< NULL: "false" */
    /** output_dir only: the trainer joins the value onto a root of its
     *  own (F5-TTS: <checkout>/<ckpts.save_dir>), so an absolute path
     *  would land inside that root; the scratch path is given as enough
     *  `../` to climb to / followed by the path (`root_joined: true`). */
    int root_joined;
};

struct preset_derived {
    char *key;          /**< key path in --config */
    int factors;        /**< bit set: 1 << knob_id, plus PRESET_WORLD_SIZE */
    char *keep;         /**< leave the value alone while it is this (e.g. "auto") */
};
#define PRESET_WORLD_SIZE (1 << KNOB_COUNT)
/** A knob's bit in a set of knobs turned on (inject_candidate.extra). */
#define KNOB_BIT(id) (1u << (id))
/** The knobs a run turns on only when micro_batch=1 fits nowhere. */
#define KNOB_EXTRA (KNOB_BIT(KNOB_PRECISION) | KNOB_BIT(KNOB_OPTIM8BIT) | KNOB_BIT(KNOB_SHARDING))

/** A fixed setting every trial gets (`trial_set: ["override:k=v", ...]`),
 *  e.g. F5-TTS's ckpts.log_samples=False; never written back. */
struct preset_fixed {
    struct preset_knob way; /**< where it goes (flag, override, key, env) */
    char *value;
};

/** What one step is, for samples/s. */
enum preset_step { STEP_IS_UPDATE = 0, STEP_IS_MICRO_BATCH };

/** How the training progress shows in the output (`progress:`), for
 *  trainers the in-process probe cannot see; all optional. */
struct preset_progress {
    char *bar;      /**< substring of the training bar's description */
    char *unit;     /**< the training bar's unit ("update") */
    char *postfix;  /**< postfix key holding the global step ("update") */
    char *line;     /**< POSIX ERE whose first group is the global step */
    enum preset_step step; /**< what one printed step is */
};

struct preset {
    char *name, *summary;
    char **detect_command; size_t ndetect_command;
    char **detect_keys; size_t ndetect_keys;
    char **detect_script; size_t ndetect_script;
    char **config_args; size_t nconfig_args;
    long batch_min, batch_max, batch_step; /**< 0: no default */
    struct preset_knob knobs[KNOB_COUNT];
    struct preset_derived *derived; size_t nderived;
    struct preset_fixed *fixed; size_t nfixed;
    struct preset_progress progress;
    /** The script opens this config in its working directory, whatever
     *  its command line says (Orpheus's config.yaml): trials run in a
     *  per-trial mirror of the working directory that holds the patched
     *  copy under this name.  NULL: the command names its config. */
    char *config_fixed;
    /** The batch's unit is this setting's value, made plural (F5-TTS's
     *  datasets.batch_size_type: frame -> frames, sample -> samples); read
     *  from a Hydra override on the command line or from --config.  NULL:
     *  the micro_batch knob's unit. */
    char *unit_from;
    /** Knobs that cannot be searched while a setting has a value
     *  (`refuse: [{knob, key, value, why}]`): E2TTS's UNetT has no
     *  checkpoint_activations. */
    struct preset_refusal { int knob; char *key, *value, *why; } *refuse;
    size_t nrefuse;
};
#define PRESET_INIT { 0 }

/** "micro_batch", ... ; NULL for an unknown id. */
const char *preset_knob_name(enum knob_id id);

/** Names of the built-in presets, NULL-terminated, in detection order. */
const char *const *preset_builtin_names(void);

/**
 * Load a built-in preset by name, or a preset file when name_or_path
 * contains '/' or ends in .yaml/.yml.  Returns 0, or -1 with a one-line
 * reason.
 */
int preset_load(struct preset *p, const char *name_or_path, char *err, size_t errlen);

/** Parse preset text (origin names it in errors). */
int preset_parse(struct preset *p, const char *text, size_t len, const char *origin,
                 char *err, size_t errlen);

/**
 * Apply --knob NAME=WHERE.  WHERE is `--flag`, `env:VAR`, `key:PATH`
 * (--config), `override:PATH` (Hydra), `accelerate:PATH`, or a bare key
 * path, which keeps the knob's current way if that takes a key path, and
 * otherwise means a key in --config when have_config, else a Hydra
 * override.  Returns 0, or -1 with a reason.
 */
int preset_set_knob(struct preset *p, const char *spec, int have_config, char *err,
                    size_t errlen);

/** 1 when some knob or derived key lives in --config (or the accelerate config). */
int preset_uses_config(const struct preset *p);
int preset_uses_accelerate(const struct preset *p);

void preset_release(struct preset *p);

#endif
