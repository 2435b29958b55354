/* SPDX-License-Identifier: MIT */
/*
 * writeback: what the choice changes, shown and (with --write) applied.
 * The command-line knobs to run with, the diff of --config and of the
 * accelerate config, and the write itself, under the file's lock and
 * against the file as it is at the end of the run (the user may have
 * edited it during hours of tuning).  Nothing here prints: every line goes to the caller's writeback_out in
 * order (writeback.h).
 */
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/writeback.h"
#include "output/results.h"
#include "util/afile.h"
#include "util/strvec.h"
#include "util/udiff.h"

/* One line for the caller, formatted. */
static void wb_line(const struct writeback_out *o, enum writeback_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void wb_line(const struct writeback_out *o, enum writeback_kind kind, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    va_end(ap);
    o->line(o->ctx, kind, text ? text : "out of memory");
    free(text);
}

#define wb_say(o, ...) wb_line(o, WRITEBACK_SAY, __VA_ARGS__)
#define wb_error(o, ...) wb_line(o, WRITEBACK_ERROR, __VA_ARGS__)

static void wb_diff(const struct writeback_out *o, const char *diff)
{
    o->line(o->ctx, WRITEBACK_DIFF, diff);
}

/*
 * --write: apply the choice to the file as it is now.  Tuning takes
 * hours, and the user may edit the file meanwhile, so under the file's
 * lock (afile_lock: a `config set` or another run waits) it is read
 * again.  Unchanged: f's edits are written.  Changed, but not in any key
 * the choice sets: the choice is applied to the new bytes, keeping the
 * user's edit.  Changed in such a key: nothing is written, and the error
 * names the file and the key (exit 2: nothing was changed, and the
 * message says how to apply the choice by hand).
 */
static int writeback_file(const struct inject_ctx *ctx, const struct inject_candidate *best,
                          const struct cfile *f, const char *path, enum knob_via via,
                          const struct writeback_out *o)
{
    char err[512];
    int lock = afile_lock(path, err, sizeof err);
    if (lock < 0) {
        wb_error(o, "--write: %s; the choice was not written", err);
        return -1;
    }
    const char **keys = inject_file_keys(ctx, via, 1);
    struct cfile now = CFILE_INIT;
    const struct cfile *out = f;
    const char *key = NULL;
    int rc = -1;
    enum cfile_drift drift = keys ? cfile_reread(f, path, keys, &now, &key, err, sizeof err)
                                  : CFILE_UNREADABLE;
    if (!keys)
        snprintf(err, sizeof err, "out of memory");
    if (drift == CFILE_UNREADABLE) {
        wb_error(o, "--write: %s; the choice was not written", err);
        goto done;
    }
    if (drift == CFILE_CONFLICT) {
        char *want = NULL, e[256];
        cfile_get(f, key, &want, e, sizeof e);
        wb_error(o, "--write: '%s' was changed while autobatch ran and its %s; not written, so "
                    "that change stays: apply the choice yourself (autobatch config set %s %s=%s) "
                    "or tune again", path, err, path, key, want ? want : "?");
        free(want);
        goto done;
    }
    if (drift == CFILE_CHANGED) {
        if (inject_apply_file(ctx, via, 1, &now, best, err, sizeof err)) {
            wb_error(o, "--write: '%s' was changed while autobatch ran, and the choice does not "
                        "apply to it now: %s; not written", path, err);
            goto done;
        }
        wb_say(o, "'%s' was changed while autobatch ran (none of the values it "
                  "sets); applying the choice to it as it is now", path);
        out = &now;
    }
    if (!cfile_changed(out)) {
        wb_say(o, "'%s' already holds the choice", path);
        rc = 0;
        goto done;
    }
    char *diff = NULL;
    if (drift == CFILE_CHANGED &&
        !udiff(out->orig, out->orig_len, out->cur, out->cur_len, path, path, &diff))
        wb_diff(o, diff); /* the diff shown before was against the old bytes */
    free(diff);
    if (cfile_save(out, path, err, sizeof err)) {
        wb_error(o, "%s", err);
    } else {
        wb_say(o, "wrote '%s'", path);
        rc = 0;
    }
done:
    afile_unlock(lock);
    cfile_release(&now);
    free(keys);
    return rc;
}

/* Show (and with --write, apply) the choice: the diff of --config, and
 * the command-line knobs to use; both are kept as res's "run_with". */
int writeback_choice(const struct plan *plan, struct setup *s, struct inject_ctx *ctx,
                     const struct inject_candidate *best, struct results *res,
                     const struct writeback_out *o)
{
    char err[512];
    const struct preset *p = &s->preset;
    char line[1024] = "";
    struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
    int nomem = 0;
    for (size_t i = 0; plan->command[i]; i++)
        nomem |= strvec_push(&argv, plan->command[i]);
    for (int id = 0; id < KNOB_COUNT; id++) {
        const struct preset_knob *k = &p->knobs[id];
        /* what the trials got, but no step limit or scratch directory */
        if (id == KNOB_MAX_STEPS || id == KNOB_OUTPUT_DIR || k->via == VIA_NONE ||
            !inject_wanted(ctx, id))
            continue;
        char val[64], piece[256] = "";
        inject_knob_text(ctx, k, id, best, val, sizeof val);
        char word[160]; /* val as the shell takes it ('full_shard auto_wrap') */
        FILE *wf = fmemopen(word, sizeof word, "w");
        if (wf) {
            strvec_shell_word(wf, val);
            fclose(wf);
        } else {
            snprintf(word, sizeof word, "%s", val);
        }
        if (k->via == VIA_FLAG)
            snprintf(piece, sizeof piece, " %s %s", k->where, word);
        else if (k->via == VIA_OVERRIDE && !s->have_config)
            snprintf(piece, sizeof piece, " %s=%s", k->where, word);
        else if (k->via == VIA_ENV)
            snprintf(piece, sizeof piece, " %s=%s (environment)", k->where, word);
        strncat(line, piece, sizeof line - strlen(line) - 1);
        nomem |= k->via == VIA_FLAG ? inject_set_flag(&argv, k->where, val)
               : k->via == VIA_OVERRIDE && !s->have_config ? inject_set_override(&argv, k->where, val)
               : k->via == VIA_ENV ? strvec_pushf(&env, "%s=%s", k->where, val) : 0;
    }
    if (*line)
        wb_say(o, "run with:%s", line);
    /* Whatever else the trials had (the probe's PYTHONPATH, a --gpus
     * slot's devices), on one line: the values are in the results. */
    char also[1024] = "";
    for (size_t i = 0; i < json_array_size(res->trial_env); i++) {
        const json_t *v = json_array_get(res->trial_env, i);
        size_t used = strlen(also);
        snprintf(also + used, sizeof also - used, "%s%s (%s)", i ? "; " : "",
                 json_string_value(json_object_get(v, "name")),
                 json_string_value(json_object_get(v, "why")));
    }
    if (*also)
        wb_say(o, "trials also had: %s", also);
    if (!nomem) /* out of memory: the results file goes without "run_with" */
        (void)results_run_with(res, argv.v, env.v);
    strvec_release(&argv);
    strvec_release(&env);
    if (!s->have_config && !s->have_accel)
        return 0;

    struct { struct cfile *f; const char *path; enum knob_via via; int have; } files[] = {
        { &s->config, s->config_path, VIA_CONFIG, s->have_config },
        { &s->accel, s->accel_path, VIA_ACCELERATE, s->have_accel },
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (!files[i].have)
            continue;
        struct cfile *f = files[i].f;
        if (inject_apply_file(ctx, files[i].via, 1, f, best, err, sizeof err)) {
            wb_error(o, "write-back to '%s': %s", files[i].path, err);
            rc = -1;
            continue;
        }
        if (!cfile_changed(f) && !plan->write) {
            wb_say(o, "'%s' already holds the choice", files[i].path);
            (void)results_run_with_file(res, files[i].path, NULL, 0);
            continue;
        }
        /* Same path on both sides, so `patch -p0 < diff` applies it. */
        char *diff = NULL;
        if (cfile_changed(f) &&
            !udiff(f->orig, f->orig_len, f->cur, f->cur_len, files[i].path, files[i].path, &diff))
            wb_diff(o, diff);
        int wrote = 0;
        if (plan->write) {
            if (writeback_file(ctx, best, f, files[i].path, files[i].via, o))
                rc = -1;
            else
                wrote = cfile_changed(f);
        }
        (void)results_run_with_file(res, files[i].path, diff, wrote);
        free(diff);
        if (!plan->write) {
            wb_say(o, "not written; add --write to apply this to '%s'",
                 files[i].path);
        }
    }
    return rc;
}
