/* SPDX-License-Identifier: MIT */
/*
 * inject: the ways of handing a candidate to a job (see inject.h): flags,
 * Hydra overrides, environment variables, and patched config copies.
 */
#include "inject.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/afile.h"

int inject_set_flag(struct strvec *argv, const char *flag, const char *value)
{
    size_t fl = strlen(flag);
    int found = 0;
    for (size_t i = 1; i < argv->n; i++) {
        const char *a = argv->v[i];
        if (!strncmp(a, flag, fl) && a[fl] == '=') {
            if (strvec_replacef(argv, i, "%s=%s", flag, value))
                return -1;
            found = 1;
        } else if (!strcmp(a, flag)) {
            /* `--flag V`, or a bare boolean `--flag` followed by another
             * option or nothing: then the value is inserted. */
            int has_value = i + 1 < argv->n && strncmp(argv->v[i + 1], "--", 2);
            if (has_value ? strvec_replace(argv, i + 1, value)
                          : strvec_insert(argv, i + 1, value))
                return -1;
            found = 1;
            i++;
        }
    }
    if (!found && (strvec_push(argv, flag) || strvec_push(argv, value)))
        return -1;
    return 0;
}

int inject_set_override(struct strvec *argv, const char *key, const char *value)
{
    size_t kl = strlen(key);
    int found = 0;
    for (size_t i = 1; i < argv->n; i++) {
        const char *a = argv->v[i];
        size_t plus = strspn(a, "+");
        if (plus <= 2 && !strncmp(a + plus, key, kl) && a[plus + kl] == '=') {
            if (strvec_replacef(argv, i, "%.*s%s=%s", (int)plus, a, key, value))
                return -1;
            found = 1;
        }
    }
    return found ? 0 : strvec_pushf(argv, "++%s=%s", key, value);
}

const char *inject_flag_value(char *const *cmd, const char *flag)
{
    size_t fl = strlen(flag);
    const char *v = NULL;
    for (size_t i = 1; cmd[i]; i++) {
        if (!strncmp(cmd[i], flag, fl) && cmd[i][fl] == '=')
            v = cmd[i] + fl + 1;
        else if (!strcmp(cmd[i], flag) && cmd[i + 1])
            v = cmd[i + 1];
    }
    return v;
}

const char *inject_find_config(const struct preset *p, char *const *cmd)
{
    for (size_t k = 0; k < p->nconfig_args; k++) {
        const char *a = p->config_args[k];
        if (!strncmp(a, "positional:", 11)) {
            size_t el = strlen(a + 11);
            for (size_t i = 1; cmd[i]; i++) {
                size_t n = strlen(cmd[i]);
                if (cmd[i][0] != '-' && n > el && !strcmp(cmd[i] + n - el, a + 11) &&
                    !strchr(cmd[i], '=') && access(cmd[i], R_OK) == 0)
                    return cmd[i];
            }
        } else {
            const char *v = inject_flag_value(cmd, a);
            if (v)
                return v;
        }
    }
    return NULL;
}

/* `../` enough to climb from any root a trainer joins a root_joined
 * output_dir onto up to /: deeper checkouts than this are not seen. */
#define INJECT_CLIMB 64

void inject_knob_text(const struct inject_ctx *ctx, const struct preset_knob *k, enum knob_id id,
                      const struct inject_candidate *c, char *buf, size_t len)
{
    switch (id) {
    case KNOB_MICRO_BATCH: snprintf(buf, len, "%ld", c->micro_batch); break;
    case KNOB_GRAD_ACCUM: snprintf(buf, len, "%ld", c->grad_accum); break;
    case KNOB_MAX_STEPS:
        snprintf(buf, len, "%ld", ctx->step_limit > 0 ? ctx->step_limit : ctx->max_steps);
        break;
    case KNOB_OUTPUT_DIR: {
        const char *dir = ctx->output_dir ? ctx->output_dir : "";
        size_t at = 0;
        for (int i = 0; k->root_joined && dir[0] == '/' && i < INJECT_CLIMB && at + 3 < len; i++)
            at += (size_t)snprintf(buf + at, len - at, "../");
        snprintf(buf + at, len - at, "%s", at ? dir + 1 : dir);
        break;
    }
    case KNOB_CHECKPOINTING:
    case KNOB_PRECISION:
    case KNOB_OPTIM8BIT:
    case KNOB_SHARDING:
    case KNOB_COUNT: {
        /* In a file the editor keeps the file's own spelling; on the
         * command line and in the environment the preset's applies. */
        int in_file = k->via == VIA_CONFIG || k->via == VIA_ACCELERATE;
        /* ... unless the preset spells it as no boolean (ZeRO's stage 3). */
        int boolean = !k->spell_true || !strcasecmp(k->spell_true, "true") ||
                      !strcasecmp(k->spell_true, "yes") || !strcmp(k->spell_true, "1");
        const char *t = (!in_file || !boolean) && k->spell_true ? k->spell_true : "true";
        const char *f = (!in_file || !boolean) && k->spell_false ? k->spell_false : "false";
        int on = id == KNOB_CHECKPOINTING ? c->checkpointing : (c->extra & KNOB_BIT(id)) != 0;
        snprintf(buf, len, "%s", on ? t : f);
        break;
    }
    }
}

/* AUTOBATCH_PRECISION=bf16, AUTOBATCH_OPTIM8BIT=1, AUTOBATCH_SHARDING=1
 * for the knobs turned on.  0 or -1 (ENOMEM). */
static int inject_extra_env(const struct inject_ctx *ctx, const struct inject_candidate *c,
                            struct strvec *env)
{
    unsigned on = ctx->set_extra & c->extra;
    return ((on & KNOB_BIT(KNOB_PRECISION)) && strvec_push(env, "AUTOBATCH_PRECISION=bf16")) ||
           ((on & KNOB_BIT(KNOB_OPTIM8BIT)) && strvec_push(env, "AUTOBATCH_OPTIM8BIT=1")) ||
           ((on & KNOB_BIT(KNOB_SHARDING)) && strvec_push(env, "AUTOBATCH_SHARDING=1"))
               ? -1 : 0;
}

/* A trial_set value with `{output_dir}` replaced by the trial's scratch
 * directory; 0 when it names one and the trial has none (then it is not
 * set), -1 when it does not fit. */
static int inject_fixed_text(const struct inject_ctx *ctx, const struct preset_fixed *fx,
                             char *buf, size_t len)
{
    static const char mark[] = "{output_dir}";
    const char *at = strstr(fx->value, mark);
    if (!at)
        return snprintf(buf, len, "%s", fx->value) < (int)len ? 1 : -1;
    if (!ctx->output_dir)
        return 0;
    int n = snprintf(buf, len, "%.*s%s%s", (int)(at - fx->value), fx->value, ctx->output_dir,
                     at + sizeof mark - 1);
    return n >= 0 && (size_t)n < len ? 1 : -1;
}

int inject_wanted(const struct inject_ctx *ctx, int id)
{
    if (id == KNOB_OUTPUT_DIR)
        return ctx->output_dir != NULL;
    if (KNOB_BIT(id) & KNOB_EXTRA)
        return (ctx->set_extra & KNOB_BIT(id)) != 0;
    return id != KNOB_CHECKPOINTING || ctx->set_checkpointing;
}

/* A knob's value is at most a (climbing) path. */
#define INJECT_VAL_MAX (PATH_MAX + 3 * INJECT_CLIMB + 64)

/* Does inject_apply_file set knob id in the file of `which`? */
static int inject_in_file(const struct inject_ctx *ctx, enum knob_via which, int writeback, int id)
{
    const struct preset_knob *k = &ctx->preset->knobs[id];
    int here = k->via == which || (writeback && k->via == VIA_OVERRIDE);
    int trial_only = id == KNOB_MAX_STEPS || id == KNOB_OUTPUT_DIR;
    return here && inject_wanted(ctx, id) && !(writeback && trial_only);
}

const char **inject_file_keys(const struct inject_ctx *ctx, enum knob_via which, int writeback)
{
    const struct preset *p = ctx->preset;
    const char **keys = calloc(KNOB_COUNT + p->nfixed + p->nderived + 1, sizeof *keys);
    size_t n = 0;
    for (int id = 0; keys && id < KNOB_COUNT; id++)
        if (inject_in_file(ctx, which, writeback, id))
            keys[n++] = p->knobs[id].where;
    for (size_t i = 0; keys && which == VIA_CONFIG && !writeback && i < p->nfixed; i++)
        if (p->fixed[i].way.via == VIA_CONFIG)
            keys[n++] = p->fixed[i].way.where;
    for (size_t i = 0; keys && which == VIA_CONFIG && i < p->nderived; i++)
        keys[n++] = p->derived[i].key;
    return keys;
}

int inject_apply_file(const struct inject_ctx *ctx, enum knob_via which, int writeback,
                      struct cfile *f, const struct inject_candidate *c, char *err, size_t errlen)
{
    const struct preset *p = ctx->preset;
    char val[INJECT_VAL_MAX], e[400];
    for (int id = 0; id < KNOB_COUNT; id++) {
        const struct preset_knob *k = &p->knobs[id];
        if (!inject_in_file(ctx, which, writeback, id))
            continue;
        /* Files get the file's own boolean spelling (the editor keeps it). */
        struct preset_knob plain = *k;
        plain.via = which;
        inject_knob_text(ctx, &plain, id, c, val, sizeof val);
        if (cfile_set(f, k->where, val, e, sizeof e) != CEDIT_OK) {
            snprintf(err, errlen, "cannot set %s (%s): %s", preset_knob_name(id), k->where, e);
            return -1;
        }
    }
    if (which != VIA_CONFIG)
        return 0;
    for (size_t i = 0; !writeback && i < p->nfixed; i++) {
        const struct preset_fixed *fx = &p->fixed[i];
        if (fx->way.via != VIA_CONFIG)
            continue;
        int have = inject_fixed_text(ctx, fx, val, sizeof val);
        if (have < 0 || (have && cfile_set(f, fx->way.where, val, e, sizeof e) != CEDIT_OK)) {
            snprintf(err, errlen, "cannot set %s (trial_set): %s", fx->way.where,
                     have < 0 ? "the value is too long" : e);
            return -1;
        }
    }
    for (size_t i = 0; i < p->nderived; i++) {
        const struct preset_derived *d = &p->derived[i];
        char *cur = NULL;
        enum cedit_status st = cfile_get(f, d->key, &cur, e, sizeof e);
        int keep = st == CEDIT_OK && d->keep && !strcmp(cur, d->keep);
        free(cur);
        if (keep || st == CEDIT_NOT_FOUND)
            continue; /* left as the user has it, or absent: DeepSpeed infers it */
        long v = 1;
        for (int id = 0; id < KNOB_COUNT; id++)
            if (d->factors & (1 << id))
                v *= id == KNOB_MICRO_BATCH ? c->micro_batch
                   : id == KNOB_GRAD_ACCUM ? c->grad_accum : 1;
        if (d->factors & PRESET_WORLD_SIZE)
            v *= ctx->world_size > 0 ? ctx->world_size : 1;
        snprintf(val, sizeof val, "%ld", v);
        if (cfile_set(f, d->key, val, e, sizeof e) != CEDIT_OK) {
            snprintf(err, errlen, "cannot keep %s consistent: %s", d->key, e);
            return -1;
        }
    }
    return 0;
}

/* Does argument a name the file path names (same string, or same file)? */
static int inject_same_file(const char *a, const char *path)
{
    if (!strcmp(a, path))
        return 1;
    struct stat sa, sp;
    return !stat(a, &sa) && !stat(path, &sp) && sa.st_dev == sp.st_dev && sa.st_ino == sp.st_ino;
}

/* Write a patched copy of a config next to the original and point every
 * argument that names the original at it. */
static int inject_copy(const struct inject_ctx *ctx, enum knob_via which, const char *path,
                       const struct cfile *orig, const struct inject_candidate *c,
                       struct inject_trial *t, char **tmp, char *err, size_t errlen)
{
    struct cfile f = CFILE_INIT;
    f.format = orig->format;
    f.orig = malloc(orig->cur_len + 1);
    f.cur = malloc(orig->cur_len + 1);
    if (!f.orig || !f.cur) {
        cfile_release(&f);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(f.orig, orig->cur, orig->cur_len);
    memcpy(f.cur, orig->cur, orig->cur_len);
    f.orig_len = f.cur_len = orig->cur_len;
    if (inject_apply_file(ctx, which, 0, &f, c, err, errlen)) {
        cfile_release(&f);
        return -1;
    }
    /* Beside the original, so that relative includes (Hydra defaults,
     * base_config) still resolve; the extension is kept for trainers that
     * pick a parser by it. */
    char d[PATH_MAX], b[PATH_MAX];
    snprintf(d, sizeof d, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    const char *base = basename(b), *dot = strrchr(base, '.');
    int stem = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    int fixed = which == VIA_CONFIG && ctx->preset->config_fixed && ctx->workdir;
    /* The copy is exactly as private as the original (a 0600 config that
     * holds a token gives 0600 copies), from its first byte. */
    struct stat ost;
    unsigned mode = !stat(path, &ost) ? (unsigned)(ost.st_mode & 0777) : 0600;
    int rc;
    if (fixed) {
        /* In the trial's own scratch directory (private, 0700). */
        if (asprintf(tmp, "%s/%s", ctx->workdir, ctx->preset->config_fixed) < 0) {
            *tmp = NULL;
            cfile_release(&f);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        rc = cfile_save_mode(&f, *tmp, mode, err, errlen);
    } else {
        /* Beside the user's config, in a directory others may write to:
         * a new file under a name nobody can guess, made with
         * O_CREAT|O_EXCL|O_NOFOLLOW (afile_create), so that a link or
         * file planted beside the config is never written through.  The
         * pid stays in the name for the sweep of a killed run's copies. */
        char prefix[PATH_MAX], made[PATH_MAX + 128];
        const char *dir = dirname(d);
        snprintf(prefix, sizeof prefix, "%.*s.autobatch-trial-%ld-%ld-", stem, base,
                 (long)getpid(), ctx->trial_id);
        rc = afile_create(dir, prefix, dot && dot != base ? dot : "", f.cur, f.cur_len, mode,
                          made, sizeof made, err, errlen);
        if (!rc && !(*tmp = strdup(made))) {
            unlink(made);
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    }
    cfile_release(&f);
    if (rc) {
        free(*tmp);
        *tmp = NULL;
        return -1;
    }
    if (fixed)
        return 0; /* the script opens it by its fixed name in the trial's directory */
    int named = 0;
    for (size_t i = 1; i < t->argv.n; i++) {
        const char *a = t->argv.v[i];
        const char *eq = strchr(a, '=');
        if (inject_same_file(a, path)) {
            named |= !strvec_replace(&t->argv, i, *tmp);
        } else if (a[0] == '-' && eq && inject_same_file(eq + 1, path)) {
            named |= !strvec_replacef(&t->argv, i, "%.*s=%s", (int)(eq - a), a, *tmp);
        }
    }
    if (!named) {
        snprintf(err, errlen, "the command does not name '%s', so trials cannot be given a "
                 "patched copy; pass the config's path in the command", path);
        return -1;
    }
    return 0;
}

int inject_env_prepend(struct strvec *env, const char *name, const char *item)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < env->n; i++)
        if (!strncmp(env->v[i], name, len) && env->v[i][len] == '=')
            return env->v[i][len + 1]
                       ? strvec_replacef(env, i, "%s=%s:%s", name, item, env->v[i] + len + 1)
                       : strvec_replacef(env, i, "%s=%s", name, item);
    return strvec_pushf(env, "%s=%s", name, item);
}

int inject_mirror_cwd(const char *dir, const char *except)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return -1;
    DIR *d = opendir(".");
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, except))
            continue;
        char *from = NULL, *to = NULL;
        if (asprintf(&from, "%s/%s", cwd, e->d_name) < 0)
            from = NULL;
        if (asprintf(&to, "%s/%s", dir, e->d_name) < 0)
            to = NULL;
        rc = !from || !to || symlink(from, to) ? -1 : 0;
        free(from);
        free(to);
    }
    int e2 = errno;
    closedir(d);
    errno = e2;
    return rc;
}

int inject_build(const struct inject_ctx *ctx, char *const *cmd, char *const *envp,
                 const struct inject_candidate *c, struct inject_trial *t,
                 char *err, size_t errlen)
{
    const struct preset *p = ctx->preset;
    snprintf(err, errlen, "out of memory");
    for (size_t i = 0; cmd[i]; i++)
        if (strvec_push(&t->argv, cmd[i]))
            goto fail;
    /* Variables the user set for autobatch itself (e.g. a webhook secret)
     * are not the trainer's business, so all AUTOBATCH_* are replaced. */
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], "AUTOBATCH_", 10) && strvec_push(&t->env, envp[i]))
            goto fail;
    if (strvec_pushf(&t->env, "AUTOBATCH_TRIAL=%ld", ctx->trial_id) ||
        strvec_pushf(&t->env, "AUTOBATCH_MICRO_BATCH=%ld", c->micro_batch) ||
        strvec_pushf(&t->env, "AUTOBATCH_GRAD_ACCUM=%ld", c->grad_accum) ||
        strvec_pushf(&t->env, "AUTOBATCH_CHECKPOINTING=%d", c->checkpointing ? 1 : 0) ||
        strvec_pushf(&t->env, "AUTOBATCH_MAX_STEPS=%ld", ctx->max_steps) ||
        inject_extra_env(ctx, c, &t->env))
        goto fail;
    if (ctx->report_path && strvec_pushf(&t->env, "AUTOBATCH_REPORT=%s", ctx->report_path))
        goto fail;
    if (ctx->probe_path && strvec_pushf(&t->env, "AUTOBATCH_PROBE=%s", ctx->probe_path))
        goto fail;
    if (ctx->probe_dir && inject_env_prepend(&t->env, "PYTHONPATH", ctx->probe_dir))
        goto fail;
    if (ctx->workdir && p->config_fixed) {
        if (inject_mirror_cwd(ctx->workdir, p->config_fixed)) {
            snprintf(err, errlen, "cannot prepare the trial's working directory '%s': %s",
                     ctx->workdir, strerror(errno));
            goto fail;
        }
        t->cwd = ctx->workdir;
    }

    int files = 0;
    char val[INJECT_VAL_MAX];
    for (int id = 0; id < KNOB_COUNT + (int)p->nfixed; id++) {
        const struct preset_knob *k;
        if (id < KNOB_COUNT) {
            k = &p->knobs[id];
            if (k->via == VIA_NONE || !inject_wanted(ctx, id))
                continue;
            inject_knob_text(ctx, k, id, c, val, sizeof val);
        } else {
            k = &p->fixed[id - KNOB_COUNT].way;
            int have = inject_fixed_text(ctx, &p->fixed[id - KNOB_COUNT], val, sizeof val);
            if (have < 0) {
                snprintf(err, errlen, "trial_set %s: the value is too long", k->where);
                goto fail;
            }
            if (!have)
                continue;
        }
        switch (k->via) {
        case VIA_FLAG:
            if (inject_set_flag(&t->argv, k->where, val))
                goto fail;
            break;
        case VIA_OVERRIDE:
            if (inject_set_override(&t->argv, k->where, val))
                goto fail;
            break;
        case VIA_ENV:
            for (size_t i = 0; i < t->env.n; i++)
                if (!strncmp(t->env.v[i], k->where, strlen(k->where)) &&
                    t->env.v[i][strlen(k->where)] == '=')
                    strvec_remove(&t->env, i--);
            if (strvec_pushf(&t->env, "%s=%s", k->where, val))
                goto fail;
            break;
        case VIA_CONFIG:
        case VIA_ACCELERATE:
            files |= k->via == VIA_CONFIG ? 1 : 2;
            break;
        case VIA_NONE:
            break;
        }
    }
    if (p->nderived)
        files |= 1;
    if ((files & 1) && !ctx->config) {
        snprintf(err, errlen, "preset '%s' keeps knobs in a config file; name it with --config FILE",
                 p->name);
        goto fail;
    }
    if ((files & 2) && !ctx->accel) {
        snprintf(err, errlen, "preset '%s' sets checkpointing in the accelerate config; the command "
                 "needs `accelerate launch --config_file FILE`", p->name);
        goto fail;
    }
    if ((files & 1) && inject_copy(ctx, VIA_CONFIG, ctx->config_path, ctx->config, c, t,
                                   &t->tmp_config, err, errlen))
        goto fail;
    if ((files & 2) && inject_copy(ctx, VIA_ACCELERATE, ctx->accel_path, ctx->accel, c, t,
                                   &t->tmp_accel, err, errlen))
        goto fail;
    err[0] = '\0';
    return 0;
fail:
    inject_trial_release(t);
    return -1;
}

void inject_trial_release(struct inject_trial *t)
{
    if (t->tmp_config)
        unlink(t->tmp_config);
    if (t->tmp_accel)
        unlink(t->tmp_accel);
    free(t->tmp_config);
    free(t->tmp_accel);
    strvec_release(&t->argv);
    strvec_release(&t->env);
    t->tmp_config = t->tmp_accel = NULL;
    t->cwd = NULL;
}
