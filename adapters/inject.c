/*
 * inject: the flag and environment ways of handing a candidate to a job
 * (see inject.h).  Config-file patching and Hydra overrides are further
 * ways, added beside these.
 */
#include "inject.h"

#include <stdio.h>
#include <string.h>

int inject_set_flag(struct strvec *argv, const char *flag, const char *value)
{
    size_t fl = strlen(flag);
    int found = 0;
    for (size_t i = 1; i < argv->n; i++) {
        const char *a = argv->v[i];
        if (!strncmp(a, flag, fl) && a[fl] == '=') {
            char buf[512];
            snprintf(buf, sizeof buf, "%s=%s", flag, value);
            if (strvec_replace(argv, i, buf))
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

static int inject_is_ours(const char *kv)
{
    return !strncmp(kv, "AUTOBATCH_", 10);
}

int inject_build(const struct inject_opts *o, char *const *cmd, char *const *envp,
                 const struct inject_candidate *c, struct strvec *argv, struct strvec *env)
{
    for (size_t i = 0; cmd[i]; i++)
        if (strvec_push(argv, cmd[i]))
            return -1;
    for (size_t i = 0; envp && envp[i]; i++)
        if (!inject_is_ours(envp[i]) && strvec_push(env, envp[i]))
            return -1;
    /* Variables the user set for autobatch itself (e.g. a webhook secret)
     * are not the trainer's business, so all AUTOBATCH_* are replaced. */
    if (strvec_pushf(env, "AUTOBATCH_TRIAL=%ld", o->trial_id) ||
        strvec_pushf(env, "AUTOBATCH_MICRO_BATCH=%ld", c->micro_batch) ||
        strvec_pushf(env, "AUTOBATCH_GRAD_ACCUM=%ld", c->grad_accum) ||
        strvec_pushf(env, "AUTOBATCH_CHECKPOINTING=%d", c->checkpointing ? 1 : 0) ||
        strvec_pushf(env, "AUTOBATCH_MAX_STEPS=%ld", o->max_steps))
        return -1;
    if (o->report_path && strvec_pushf(env, "AUTOBATCH_REPORT=%s", o->report_path))
        return -1;

    if (o->preset == INJECT_HF) {
        char mb[32], ga[32], ms[32];
        snprintf(mb, sizeof mb, "%ld", c->micro_batch);
        snprintf(ga, sizeof ga, "%ld", c->grad_accum);
        snprintf(ms, sizeof ms, "%ld", o->max_steps);
        if (inject_set_flag(argv, "--per_device_train_batch_size", mb) ||
            inject_set_flag(argv, "--gradient_accumulation_steps", ga) ||
            inject_set_flag(argv, "--max_steps", ms))
            return -1;
        if (o->set_checkpointing &&
            inject_set_flag(argv, "--gradient_checkpointing", c->checkpointing ? "true" : "false"))
            return -1;
    }
    return 0;
}
