/* SPDX-License-Identifier: MIT */
/*
 * setup: everything a run needs besides the plan, found before the first
 * trial.  The preset (--preset, or --preset auto's detection), the config
 * file and the accelerate config it edits, the batch range the preset
 * suggests, the command's own accumulation, the batch knob's unit, and
 * every check that would otherwise fail an hour into a run: a knob the
 * preset cannot reach, a script that cannot be read, an unwritable
 * --write target, a setting the preset refuses to search.  Nothing here
 * prints (setup.h has the contract).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control/setup.h"
#include "inject.h"
#include "util/afile.h"
#include "util/errbuf.h"

static int setup_has_key(const struct cfile *f, const char *key)
{
    char *v = NULL, e[256];
    enum cedit_status st = cfile_get(f, key, &v, e, sizeof e);
    free(v);
    return st == CEDIT_OK || st == CEDIT_NOT_SCALAR;
}

/*
 * The script an interpreter or launcher runs: the first argument ending
 * in ".py" or ".sh" that can be read, or NULL.  Read for --preset auto's
 * evidence only (a flag or variable named in its text).
 */
static const char *setup_script(char *const *cmd)
{
    for (size_t i = 0; cmd[i]; i++) {
        size_t n = strlen(cmd[i]);
        if (n > 3 && (!strcmp(cmd[i] + n - 3, ".py") || !strcmp(cmd[i] + n - 3, ".sh")) &&
            !access(cmd[i], R_OK))
            return cmd[i];
    }
    return NULL;
}

/* The first 4 MiB of path, NUL-terminated (malloc'd), or NULL. */
static char *setup_slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    size_t cap = 4u << 20;
    char *buf = malloc(cap + 1);
    size_t n = buf ? fread(buf, 1, cap, f) : 0;
    fclose(f);
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* Does the preset's batch knob live in the config file f? */
static int setup_config_has_batch(const struct preset *p, const struct cfile *f)
{
    const struct preset_knob *k = &p->knobs[KNOB_MICRO_BATCH];
    return k->via == VIA_CONFIG && k->where && setup_has_key(f, k->where);
}

/*
 * --preset auto picks a preset only on evidence, in preset.c's order:
 * the preset's flag or file named in the command, all of its keys in the
 * config, its `detect.script` text in the script the command runs (an
 * option it parses, HfArgumentParser, AUTOBATCH_MICRO_BATCH read from the
 * environment), or, for "json" and "yaml", --config holding the batch key.
 * Nothing found: an error naming the options, never a silent guess (a
 * knob that never reaches the trainer makes every size "fit").
 */
int setup_detect(const struct plan *plan, char *picked, size_t len, char *why, size_t whylen,
                 char *err, size_t errlen)
{
    char e[512];
    const char *script = setup_script(plan->command);
    char *text = script ? setup_slurp(script) : NULL;
    int found = 0;
    for (const char *const *n = preset_builtin_names(); *n && !found; n++) {
        struct preset p = PRESET_INIT;
        if (preset_load(&p, *n, e, sizeof e)) {
            preset_release(&p);
            continue;
        }
        for (size_t i = 0; i < p.ndetect_command && !found; i++)
            for (size_t a = 0; plan->command[a] && !found; a++)
                if (strstr(plan->command[a], p.detect_command[i])) {
                    found = 1;
                    snprintf(why, whylen, "the command names '%s'", p.detect_command[i]);
                }
        const char *cpath = plan->config_path ? plan->config_path
                                              : inject_find_config(&p, plan->command);
        if (!cpath && p.config_fixed && !access(p.config_fixed, R_OK))
            cpath = p.config_fixed; /* read from the working directory (Orpheus) */
        struct cfile f = CFILE_INIT;
        int have_f = cpath && !cfile_load(&f, cpath, e, sizeof e);
        if (!found && p.ndetect_keys && have_f) {
            found = 1;
            for (size_t i = 0; i < p.ndetect_keys && found; i++)
                found = setup_has_key(&f, p.detect_keys[i]);
            if (found)
                snprintf(why, whylen, "'%s' has its keys (%s, ...)", cpath, p.detect_keys[0]);
        }
        for (size_t i = 0; i < p.ndetect_script && !found && text; i++)
            if (strstr(text, p.detect_script[i])) {
                found = 1;
                snprintf(why, whylen, "the script '%s' names '%s'", script, p.detect_script[i]);
            }
        if (!found && (!strcmp(*n, "json") || !strcmp(*n, "yaml")) && have_f &&
            (f.format == CFILE_JSON) == !strcmp(*n, "json") && setup_config_has_batch(&p, &f)) {
            found = 1;
            snprintf(why, whylen, "'%s' holds '%s'", cpath, p.knobs[KNOB_MICRO_BATCH].where);
        }
        cfile_release(&f);
        preset_release(&p);
        if (found)
            snprintf(picked, len, "%s", *n);
    }
    free(text);
    if (found)
        return 0;
    errbuf_set(err, errlen,
               "--preset auto: cannot tell how the command takes its batch size (no preset's "
               "flag or file in the command, its keys in %s, or its flag or AUTOBATCH_MICRO_BATCH "
               "in %s%s%s); name one with --preset (hf, hydra, json, yaml, env, or a framework's: "
               "see autobatch --help) or say where it lives with --knob micro_batch=WHERE",
               plan->config_path ? plan->config_path : "a config", script ? "'" : "",
               script ? script : "a script", script ? "'" : "");
    return -1;
}

/* A Hydra override's value in the command (`key=`, `+key=`, `++key=`; the
 * last wins), else the config file's value at key, or a flag's value when
 * key is `--flag`; malloc'd, or NULL. */
char *setup_setting(const struct setup *s, char *const *cmd, const char *key)
{
    if (key[0] == '-') { /* a flag: --batch_size_type frame */
        const char *f = inject_flag_value(cmd, key);
        return f ? strdup(f) : NULL;
    }
    size_t kl = strlen(key);
    const char *v = NULL;
    for (size_t i = 1; cmd[i]; i++) {
        const char *a = cmd[i] + strspn(cmd[i], "+");
        if (!strncmp(a, key, kl) && a[kl] == '=')
            v = a + kl + 1;
    }
    if (v)
        return strdup(v);
    char *owned = NULL, e[256];
    if (s->have_config && cfile_get(&s->config, key, &owned, e, sizeof e) == CEDIT_OK)
        return owned;
    free(owned);
    return NULL;
}

/* The value the command or config already gives a knob, as a number. */
long setup_current(const struct setup *s, char *const *cmd, enum knob_id id, long dflt)
{
    const struct preset_knob *k = &s->preset.knobs[id];
    const char *v = NULL;
    char *owned = NULL, e[256];
    if (k->via == VIA_FLAG)
        v = inject_flag_value(cmd, k->where);
    else if (k->via == VIA_OVERRIDE)
        v = owned = setup_setting(s, cmd, k->where);
    else if (k->via == VIA_CONFIG && s->have_config &&
             cfile_get(&s->config, k->where, &owned, e, sizeof e) == CEDIT_OK)
        v = owned;
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    long r = v && *v && !*end && n >= 1 ? n : dflt;
    free(owned);
    return r;
}

/* The preset's progress rules, in trainlog's terms. */
struct trainlog_rules setup_log_rules(const struct preset *p)
{
    struct trainlog_rules r = {
        .bar = p->progress.bar, .unit = p->progress.unit, .postfix = p->progress.postfix,
        .line = p->progress.line,
    };
    return r;
}

/*
 * Never tune a knob that cannot reach the trainer: a searched knob the
 * preset has no place for is bad input, and the preset's progress rules
 * must compile.
 */
static int setup_check_knobs(const struct plan *plan, const struct setup *s, char *err,
                             size_t errlen)
{
    const struct preset *p = &s->preset;
    if (p->knobs[KNOB_MICRO_BATCH].via == VIA_NONE) {
        errbuf_set(err, errlen,
                   "preset '%s' has no micro_batch knob; say where the batch size lives with "
                   "--knob micro_batch=WHERE", p->name);
        return -1;
    }
    int accum_searched = plan->ngrad_accum > 1 ||
                         (plan->ngrad_accum == 1 && plan->grad_accum[0] != s->grad_accum);
    if (accum_searched && p->knobs[KNOB_GRAD_ACCUM].via == VIA_NONE) {
        errbuf_set(err, errlen,
                   "--grad-accum: preset '%s' has no gradient-accumulation knob, so the trainer "
                   "would never see it; drop --grad-accum or say where it lives with "
                   "--knob grad_accum=WHERE", p->name);
        return -1;
    }
    if (plan->checkpointing_searched && p->knobs[KNOB_CHECKPOINTING].via == VIA_NONE) {
        errbuf_set(err, errlen,
                   "--checkpointing: preset '%s' has no activation-checkpointing knob, so the "
                   "trainer would never see it; drop --checkpointing or say where it lives with "
                   "--knob checkpointing=WHERE", p->name);
        return -1;
    }
    static const struct { enum knob_id id; const char *what, *eg; } allow[] = {
        { KNOB_PRECISION, "mixed precision", "--bf16" },
        { KNOB_OPTIM8BIT, "the optimizer", "--optim" },
        { KNOB_SHARDING, "sharding", "--fsdp" },
    };
    for (size_t i = 0; i < sizeof allow / sizeof *allow; i++) {
        const char *n = preset_knob_name(allow[i].id);
        if ((plan->allowed & KNOB_BIT(allow[i].id)) && p->knobs[allow[i].id].via == VIA_NONE) {
            errbuf_set(err, errlen,
                       "--allow %s: preset '%s' has no place for %s, so the trainer would "
                       "never see it; drop --allow %s or say where it lives with --knob "
                       "%s=WHERE (e.g. --knob %s=%s)", n, p->name, allow[i].what, n, n, n,
                       allow[i].eg);
            return -1;
        }
    }
    struct trainlog_rules rules = setup_log_rules(p);
    struct trainlog tl;
    char e[256];
    if (trainlog_init(&tl, &rules, e, sizeof e)) {
        errbuf_set(err, errlen, "preset '%s': progress: %s", p->name, e);
        return -1;
    }
    trainlog_release(&tl);
    return 0;
}

/*
 * An interpreter's script must be readable before the first trial (cli.c
 * already checked that the command itself runs); otherwise every trial
 * would be a "crash".
 */
static int setup_check_command(char *const *cmd, char *err, size_t errlen)
{
    const char *a0 = cmd[0];
    const char *b = strrchr(a0, '/');
    b = b ? b + 1 : a0;
    int interp = !strncmp(b, "python", 6) || !strcmp(b, "bash") || !strcmp(b, "sh");
    for (size_t i = 1; interp && cmd[i]; i++) {
        const char *a = cmd[i];
        if (!strcmp(a, "-m") || !strcmp(a, "-c") || !strcmp(a, "-"))
            break; /* a module, a command string, stdin: nothing to check */
        if (a[0] == '-')
            continue;
        if (access(a, R_OK)) {
            errbuf_set(err, errlen,
                       "cannot read the script '%s': %s; check the command after --", a,
                       strerror(errno));
            return -1;
        }
        break;
    }
    return 0;
}

int setup_load(struct setup *s, struct plan *plan, char *err, size_t errlen)
{
    char e[512], picked[64];
    const char *name = plan->preset_name;
    if (!strcmp(name, "auto")) {
        if (setup_detect(plan, picked, sizeof picked, s->auto_why, sizeof s->auto_why, err,
                         errlen))
            return -1;
        name = picked;
    }
    if (preset_load(&s->preset, name, e, sizeof e)) {
        errbuf_set(err, errlen, "--preset: %s", e);
        return -1;
    }
    s->auto_picked = !strcmp(plan->preset_name, "auto");
    s->config_path = plan->config_path ? plan->config_path
                                       : inject_find_config(&s->preset, plan->command);
    if (!s->config_path && s->preset.config_fixed) {
        if (access(s->preset.config_fixed, R_OK)) {
            errbuf_set(err, errlen,
                       "preset '%s': the script reads '%s' from its working directory, and there "
                       "is none here (%s); run autobatch where the script runs", s->preset.name,
                       s->preset.config_fixed, strerror(errno));
            return -1;
        }
        s->config_path = s->preset.config_fixed;
    }
    for (int i = 0; i < plan->nknob_specs; i++) {
        if (preset_set_knob(&s->preset, plan->knob_specs[i], s->config_path != NULL, e,
                            sizeof e)) {
            errbuf_set(err, errlen, "%s", e);
            return -1;
        }
    }
    if (!s->config_path && (preset_uses_config(&s->preset) || plan->write)) {
        errbuf_set(err, errlen, plan->write
                   ? "--write needs --config FILE, the file to write the choice into"
                   : "preset '%s' keeps knobs in a config file; name it with --config FILE",
                   s->preset.name);
        return -1;
    }
    if (s->config_path) {
        if (cfile_load(&s->config, s->config_path, e, sizeof e)) {
            errbuf_set(err, errlen, "--config: %s", e);
            return -1;
        }
        s->have_config = 1;
    }
    if (plan->write && s->config_path &&
        (access(s->config_path, W_OK) || afile_check_writable(s->config_path, e, sizeof e))) {
        errbuf_set(err, errlen, "--write: cannot write '%s': %s; make it writable or drop --write",
                  s->config_path, access(s->config_path, W_OK) ? strerror(errno) : e);
        return -1;
    }
    if (setup_check_command(plan->command, err, errlen))
        return -1;
    if (preset_uses_accelerate(&s->preset) && plan->checkpointing_searched) {
        s->accel_path = inject_flag_value(plan->command, "--config_file");
        if (!s->accel_path) {
            errbuf_set(err, errlen,
                       "preset '%s' sets checkpointing in the accelerate config; launch with "
                       "`accelerate launch --config_file FILE ...`", s->preset.name);
            return -1;
        }
        if (cfile_load(&s->accel, s->accel_path, e, sizeof e)) {
            errbuf_set(err, errlen, "accelerate --config_file: %s", e);
            return -1;
        }
        s->have_accel = 1;
    }
    if (!plan->batch_given && s->preset.batch_min > 0) {
        plan->batch_min = s->preset.batch_min;
        plan->batch_max = s->preset.batch_max;
        plan->batch_step = s->preset.batch_step;
    }
    s->grad_accum = setup_current(s, plan->command, KNOB_GRAD_ACCUM, 1);
    s->unit = s->preset.knobs[KNOB_MICRO_BATCH].unit ? s->preset.knobs[KNOB_MICRO_BATCH].unit
                                                      : "samples";
    char *from = s->preset.unit_from ? setup_setting(s, plan->command, s->preset.unit_from) : NULL;
    if (from && *from && strlen(from) < sizeof s->unit_buf - 2 && !strpbrk(from, " \t/")) {
        size_t n = strlen(from);
        snprintf(s->unit_buf, sizeof s->unit_buf, "%s%s", from, from[n - 1] == 's' ? "" : "s");
        s->unit = s->unit_buf;
    }
    free(from);
    for (size_t i = 0; i < s->preset.nrefuse; i++) {
        const struct preset_refusal *rf = &s->preset.refuse[i];
        int searched = rf->knob == KNOB_CHECKPOINTING ? plan->checkpointing_searched
                     : rf->knob == KNOB_GRAD_ACCUM ? plan->ngrad_accum > 0 : 1;
        char *v = searched ? setup_setting(s, plan->command, rf->key) : NULL;
        int hit = v && !strcmp(v, rf->value);
        free(v);
        if (hit) {
            errbuf_set(err, errlen,
                       "preset '%s': %s is not searched where %s is %s: %s", s->preset.name,
                       preset_knob_name(rf->knob), rf->key, rf->value, rf->why);
            return -1;
        }
    }
    /* Checkpointing not asked about: the run may turn it on when
     * micro_batch=1 fits nowhere without it (session_escalate), where the
     * preset places it and no refusal holds. */
    const struct preset_knob *ck = &s->preset.knobs[KNOB_CHECKPOINTING];
    s->ckpt_spare = !plan->checkpointing_searched && ck->via != VIA_NONE &&
                    (ck->via != VIA_ACCELERATE || s->have_accel);
    for (size_t i = 0; s->ckpt_spare && i < s->preset.nrefuse; i++) {
        const struct preset_refusal *rf = &s->preset.refuse[i];
        char *v = rf->knob == KNOB_CHECKPOINTING ? setup_setting(s, plan->command, rf->key) : NULL;
        if (v && !strcmp(v, rf->value))
            s->ckpt_spare = 0;
        free(v);
    }
    return setup_check_knobs(plan, s, err, errlen);
}

void setup_release(struct setup *s)
{
    preset_release(&s->preset);
    cfile_release(&s->config);
    cfile_release(&s->accel);
}
