/* SPDX-License-Identifier: MIT */
/*
 * dry_run: --dry-run's listing (dry_run.h).  Each cell's first trial is
 * built as tune would build it (inject_build, with a working directory
 * of its own when the preset runs in a fixed one) and written out as
 * shell: cd, the variables it gets beyond ours, the command line, each
 * word quoted for the shell; then thrown away.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/dry_run.h"
#include "control/session.h"
#include "trial/leftovers.h"
#include "util/strvec.h"
#include "cfile.h"
#include "inject.h"

extern char **environ;

/* The knobs --allow gave: where each would go if micro_batch=1 fits
 * nowhere (docs/knobs.md), read back from a trial built with it on. */
static int dry_run_extra(struct session *s)
{
    struct inject_ctx *ctx = &s->ctx;
    const struct plan *plan = s->plan;
    const struct preset *p = &s->setup.preset;
    unsigned keep = ctx->set_extra;
    for (int id = 0; id < KNOB_COUNT; id++) {
        const struct preset_knob *k = &p->knobs[id];
        if (!(plan->allowed & KNOB_BIT(id)) || k->via == VIA_NONE)
            continue;
        struct inject_candidate cand = { .micro_batch = plan->batch_min, .grad_accum = 1,
                                         .extra = KNOB_BIT(id) };
        struct inject_trial t = INJECT_TRIAL_INIT;
        char err[512], val[256] = "?";
        ctx->set_extra = KNOB_BIT(id);
        int bad = inject_build(ctx, plan->command, environ, &cand, &t, err, sizeof err);
        ctx->set_extra = keep;
        if (bad) {
            cli_error("--allow %s: %s", preset_knob_name(id), err);
            return -1;
        }
        if (k->via == VIA_CONFIG && t.tmp_config) {
            struct cfile f = CFILE_INIT;
            char *v = NULL;
            if (!cfile_load(&f, t.tmp_config, err, sizeof err)) {
                if (cfile_get(&f, k->where, &v, err, sizeof err) == CEDIT_OK)
                    snprintf(val, sizeof val, "%s", v);
                free(v);
                cfile_release(&f);
            }
            printf("# --allow %s, if micro_batch=1 fits nowhere: %s = %s in the patched copy of "
                   "%s\n", preset_knob_name(id), k->where, val, ctx->config_path);
        } else {
            inject_knob_text(ctx, k, (enum knob_id)id, &cand, val, sizeof val);
            printf("# --allow %s, if micro_batch=1 fits nowhere: %s%s%s\n", preset_knob_name(id),
                   k->where, k->via == VIA_FLAG ? " " : "=", val);
        }
        inject_trial_release(&t);
    }
    return 0;
}

int dry_run_print(struct session *s)
{
    struct inject_ctx *ctx = &s->ctx;
    const struct plan *plan = s->plan;
    const struct setup *setup = &s->setup;
    const struct space *sp = &s->space;
    const char *dir = s->dir;
    for (size_t i = 0; i < sp->ncells; i++) {
        const struct cell *c = &sp->cells[i];
        if (c->state == CELL_SKIPPED)
            continue;
        struct inject_candidate cand = {
            .micro_batch = c->fixed_micro > 0 ? c->fixed_micro : plan->batch_min,
            .grad_accum = c->grad_accum, .checkpointing = c->checkpointing,
        };
        char wd[4200], err[512];
        snprintf(wd, sizeof wd, "%s/dry-run-%zu", dir, i);
        ctx->trial_id = (long)i + 1;
        ctx->workdir = setup->preset.config_fixed && !mkdir(wd, 0700) ? wd : NULL;
        struct inject_trial t = INJECT_TRIAL_INIT;
        if (inject_build(ctx, plan->command, environ, &cand, &t, err, sizeof err)) {
            cli_error("%s", err);
            return -1;
        }
        printf("# cell grad_accum=%ld checkpointing=%s: its first trial, micro_batch=%ld (other "
               "sizes change only the knobs)\n", cand.grad_accum, cand.checkpointing ? "on" : "off",
               cand.micro_batch);
        if (t.cwd)
            printf("cd %s\n", t.cwd);
        for (size_t k = 0; k < t.env.n; k++) {
            int ours = 0;
            for (char **e = environ; *e && !ours; e++)
                ours = !strcmp(*e, t.env.v[k]);
            if (ours)
                continue;
            size_t eq = strcspn(t.env.v[k], "=");
            printf("%.*s=", (int)eq, t.env.v[k]);
            strvec_shell_word(stdout, t.env.v[k] + eq + (t.env.v[k][eq] == '='));
            putchar(' ');
            putchar('\\');
            putchar('\n');
        }
        for (size_t k = 0; k < t.argv.n; k++) {
            strvec_shell_word(stdout, t.argv.v[k]);
            putchar(k + 1 < t.argv.n ? ' ' : '\n');
        }
        if (t.tmp_config)
            printf("# its config is a patched copy of %s\n", ctx->config_path);
        inject_trial_release(&t);
        leftovers_remove_tree(wd);
    }
    ctx->workdir = NULL;
    return dry_run_extra(s);
}
