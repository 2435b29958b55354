/* SPDX-License-Identifier: MIT */
/*
 * setup: the preset, the config files and the knobs' starting values of
 * one run, checked before the first trial.
 *
 * Life cycle:
 *   1. struct setup s = SETUP_INIT;
 *   2. setup_load(&s, &plan, err, sizeof err): picks the preset (--preset
 *      auto: setup_detect), applies --knob, loads --config (or the file
 *      the command names) and the accelerate config when checkpointing is
 *      searched through it, fills the plan's batch range from the preset
 *      when --batch was not given, and refuses what cannot work.  On
 *      failure it returns -1 with one line in err (the text to print after
 *      "error: "); s is then partly filled.
 *   3. read s; setup_setting() and setup_current() read the command's and
 *      the config's values of a knob.
 *   4. setup_release(&s), also after a failed setup_load.
 * s owns its preset and cfiles; the paths point into the plan, the
 * command or the preset and live as long as those.
 *
 * Library code: nothing here prints.  When --preset auto picked a preset,
 * s->auto_picked says so (set as soon as it is loaded, so also when a
 * later check fails) and the caller words it.
 */
#ifndef AB_SETUP_H
#define AB_SETUP_H

#include <stddef.h>

#include "cfile.h"
#include "control/plan.h"
#include "preset.h"
#include "trainlog.h"

struct setup {
    struct preset preset;
    const char *config_path;   /**< as named (--config, or found in the command) */
    struct cfile config;
    int have_config;
    const char *accel_path;    /**< accelerate's --config_file, or NULL */
    struct cfile accel;
    int have_accel;
    long grad_accum;           /**< the command's own accumulation, else 1 */
    const char *unit;          /**< the batch knob's unit */
    char unit_buf[32];         /**< the unit, when the preset reads it from a setting */
    int ckpt_spare;            /**< checkpointing not searched, but the preset places it */
    int auto_picked;           /**< --preset auto chose preset.name */
    char auto_why[512];        /**< ... on this evidence */
};
#define SETUP_INIT { .preset = PRESET_INIT, .config = CFILE_INIT, .accel = CFILE_INIT }

/**
 * Build s for plan (the plan's batch range may be set from the preset).
 * Returns 0, or -1 with the reason in err.
 */
int setup_load(struct setup *s, struct plan *plan, char *err, size_t errlen);

/** Free what s owns; s may be SETUP_INIT or partly loaded. */
void setup_release(struct setup *s);

/**
 * --preset auto: the first built-in preset (in preset.c's order) with
 * evidence that it reaches the batch: its command substrings in the
 * command, all of its config keys in the config, its flag in the text of
 * the script the command runs; "json"/"yaml" when --config holds their
 * batch key; "env" when the script reads AUTOBATCH_MICRO_BATCH.  Writes
 * the name to picked and the evidence to why.  Returns 0, or -1 with the
 * error (nothing found: the user must name one).
 */
int setup_detect(const struct plan *plan, char *picked, size_t len, char *why, size_t whylen,
                 char *err, size_t errlen);

/**
 * A Hydra override's value in cmd (`key=`, `+key=`, `++key=`; the last
 * wins), else the config's value at key, or a flag's value when key is
 * `--flag`.  Returns a malloc'd string the caller frees, or NULL.
 */
char *setup_setting(const struct setup *s, char *const *cmd, const char *key);

/** The value cmd or the config already gives knob id, as a number >= 1; else dflt. */
long setup_current(const struct setup *s, char *const *cmd, enum knob_id id, long dflt);

/** The preset's progress rules in trainlog's terms (pointers into p). */
struct trainlog_rules setup_log_rules(const struct preset *p);

#endif
