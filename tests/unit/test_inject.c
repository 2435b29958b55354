/* SPDX-License-Identifier: MIT */
/* Unit tests for inject: HF flag replacement and the trial environment. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

static void load(struct strvec *v, const char *const *args)
{
    for (size_t i = 0; args[i]; i++)
        assert_int_equal(strvec_push(v, args[i]), 0);
}

static void expect(const struct strvec *v, const char *const *want)
{
    size_t n = 0;
    while (want[n])
        n++;
    assert_int_equal(v->n, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v->v[i], want[i]);
    assert_null(v->v[n]);
}

static void test_replace_space_and_equals(void **state)
{
    (void)state;
    struct strvec v = STRVEC_INIT;
    load(&v, (const char *[]){ "accelerate", "launch", "train.py", "--per_device_train_batch_size",
                               "4", "--gradient_accumulation_steps=8", "--output_dir", "out", NULL });
    assert_int_equal(inject_set_flag(&v, "--per_device_train_batch_size", "16"), 0);
    assert_int_equal(inject_set_flag(&v, "--gradient_accumulation_steps", "2"), 0);
    assert_int_equal(inject_set_flag(&v, "--max_steps", "7"), 0);
    expect(&v, (const char *[]){ "accelerate", "launch", "train.py", "--per_device_train_batch_size",
                                 "16", "--gradient_accumulation_steps=2", "--output_dir", "out",
                                 "--max_steps", "7", NULL });
    strvec_release(&v);
}

static void test_bare_bool_and_duplicates(void **state)
{
    (void)state;
    struct strvec v = STRVEC_INIT;
    load(&v, (const char *[]){ "python3", "t.py", "--gradient_checkpointing", "--bf16", "true",
                               "--max_steps", "100", "--max_steps=200", NULL });
    assert_int_equal(inject_set_flag(&v, "--gradient_checkpointing", "false"), 0);
    assert_int_equal(inject_set_flag(&v, "--max_steps", "7"), 0);
    expect(&v, (const char *[]){ "python3", "t.py", "--gradient_checkpointing", "false", "--bf16",
                                 "true", "--max_steps", "7", "--max_steps=7", NULL });
    strvec_release(&v);

    /* A bare flag at the very end gets its value appended after it. */
    load(&v, (const char *[]){ "python3", "t.py", "--gradient_checkpointing", NULL });
    assert_int_equal(inject_set_flag(&v, "--gradient_checkpointing", "true"), 0);
    expect(&v, (const char *[]){ "python3", "t.py", "--gradient_checkpointing", "true", NULL });
    strvec_release(&v);

    /* A prefix of a longer flag is not the flag. */
    load(&v, (const char *[]){ "x", "--max_steps_per_epoch", "3", NULL });
    assert_int_equal(inject_set_flag(&v, "--max_steps", "7"), 0);
    expect(&v, (const char *[]){ "x", "--max_steps_per_epoch", "3", "--max_steps", "7", NULL });
    strvec_release(&v);
}

static const char *env_get(const struct strvec *e, const char *name)
{
    size_t n = strlen(name);
    const char *found = NULL;
    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], name, n) && e->v[i][n] == '=') {
            assert_null(found); /* never twice */
            found = e->v[i] + n + 1;
        }
    return found;
}

static struct preset load_preset(const char *name)
{
    struct preset p = PRESET_INIT;
    char err[256];
    assert_int_equal(preset_load(&p, name, err, sizeof err), 0);
    return p;
}

static void test_build_env_and_presets(void **state)
{
    (void)state;
    char *cmd[] = { "python3", "train.py", "--per_device_train_batch_size=2", NULL };
    char *envp[] = { "PATH=/usr/bin", "AUTOBATCH_MICRO_BATCH=999", "HOME=/root", NULL };
    struct inject_candidate c = { 24, 4, 1, 0 };
    struct preset hf = load_preset("hf");
    struct inject_ctx ctx = { .preset = &hf, .set_checkpointing = 1, .max_steps = 7,
                              .trial_id = 3, .world_size = 1, .report_path = "/tmp/r.jsonl" };
    struct inject_trial t = INJECT_TRIAL_INIT;
    char err[256];
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    expect(&t.argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size=24",
                                      "--gradient_accumulation_steps", "4",
                                      "--gradient_checkpointing", "true", "--max_steps", "7", NULL });
    assert_string_equal(env_get(&t.env, "AUTOBATCH_TRIAL"), "3");
    assert_string_equal(env_get(&t.env, "AUTOBATCH_MICRO_BATCH"), "24");
    assert_string_equal(env_get(&t.env, "AUTOBATCH_GRAD_ACCUM"), "4");
    assert_string_equal(env_get(&t.env, "AUTOBATCH_CHECKPOINTING"), "1");
    assert_string_equal(env_get(&t.env, "AUTOBATCH_MAX_STEPS"), "7");
    assert_string_equal(env_get(&t.env, "AUTOBATCH_REPORT"), "/tmp/r.jsonl");
    assert_string_equal(env_get(&t.env, "PATH"), "/usr/bin");
    assert_string_equal(env_get(&t.env, "HOME"), "/root");
    inject_trial_release(&t);

    /* checkpointing not searched: no flag for it */
    ctx.set_checkpointing = 0;
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    for (size_t i = 0; i < t.argv.n; i++)
        assert_null(strstr(t.argv.v[i], "checkpointing"));
    inject_trial_release(&t);
    preset_release(&hf);

    /* env preset: argv untouched */
    struct preset env = load_preset("env");
    ctx.preset = &env;
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    expect(&t.argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size=2", NULL });
    inject_trial_release(&t);
    preset_release(&env);
}

/* bf16 mixed precision (--allow precision): passed only while the run has
 * turned it on, as the preset spells it, with AUTOBATCH_PRECISION; never
 * by a preset that does not place it. */
static void test_precision_knob(void **state)
{
    (void)state;
    char *cmd[] = { "python3", "train.py", NULL };
    char *envp[] = { "PATH=/usr/bin", NULL };
    struct inject_candidate c = { 2, 1, 0, KNOB_BIT(KNOB_PRECISION) };
    struct preset hf = load_preset("hf");
    assert_int_equal(hf.knobs[KNOB_PRECISION].via, VIA_FLAG);
    assert_string_equal(hf.knobs[KNOB_PRECISION].where, "--bf16");
    assert_string_equal(preset_knob_name(KNOB_PRECISION), "precision");
    struct inject_ctx ctx = { .preset = &hf, .max_steps = 7, .trial_id = 1, .world_size = 1 };
    struct inject_trial t = INJECT_TRIAL_INIT;
    char err[256];
    /* not turned on: no flag, no variable, whatever the candidate says */
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    for (size_t i = 0; i < t.argv.n; i++)
        assert_null(strstr(t.argv.v[i], "bf16"));
    assert_null(env_get(&t.env, "AUTOBATCH_PRECISION"));
    inject_trial_release(&t);
    ctx.set_extra = KNOB_BIT(KNOB_PRECISION);
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    expect(&t.argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size", "2",
                                      "--gradient_accumulation_steps", "1", "--max_steps", "7",
                                      "--bf16", "true", NULL });
    assert_string_equal(env_get(&t.env, "AUTOBATCH_PRECISION"), "bf16");
    inject_trial_release(&t);
    /* the 8-bit optimizer likewise: --optim adamw_bnb_8bit once turned on */
    assert_string_equal(hf.knobs[KNOB_OPTIM8BIT].where, "--optim");
    c.extra |= KNOB_BIT(KNOB_OPTIM8BIT);
    ctx.set_extra |= KNOB_BIT(KNOB_OPTIM8BIT);
    assert_int_equal(inject_build(&ctx, cmd, envp, &c, &t, err, sizeof err), 0);
    expect(&t.argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size", "2",
                                      "--gradient_accumulation_steps", "1", "--max_steps", "7",
                                      "--bf16", "true", "--optim", "adamw_bnb_8bit", NULL });
    assert_string_equal(env_get(&t.env, "AUTOBATCH_OPTIM8BIT"), "1");
    inject_trial_release(&t);
    preset_release(&hf);
    struct preset js = load_preset("json");
    assert_int_equal(js.knobs[KNOB_PRECISION].via, VIA_NONE);
    preset_release(&js);
}

static void test_hydra_overrides(void **state)
{
    (void)state;
    char *cmd[] = { "accelerate", "launch", "train.py", "--config-name", "F5TTS_v1_Base",
                    "+datasets.batch_size_per_gpu=100", NULL };
    struct preset f5 = load_preset("f5-tts");
    struct inject_ctx ctx = { .preset = &f5, .set_checkpointing = 1, .max_steps = 7, .trial_id = 1,
                              .world_size = 1, .output_dir = "/tmp/scratch/out" };
    struct inject_candidate c = { 19200, 2, 1, 0 };
    struct inject_trial t = INJECT_TRIAL_INIT;
    char err[256];
    assert_int_equal(inject_build(&ctx, cmd, NULL, &c, &t, err, sizeof err), 0);
    /* F5 joins save_dir onto its checkout's top: the scratch path climbs
     * to / first; Hydra's run directory goes into the scratch directory. */
    char save[400] = "++ckpts.save_dir=";
    for (int i = 0; i < 64; i++)
        strcat(save, "../");
    strcat(save, "tmp/scratch/out");
    expect(&t.argv, (const char *[]){ "accelerate", "launch", "train.py", "--config-name",
                                      "F5TTS_v1_Base", "+datasets.batch_size_per_gpu=19200",
                                      "++optim.grad_accumulation_steps=2",
                                      "++model.arch.checkpoint_activations=True", save,
                                      "++ckpts.log_samples=False", "++ckpts.logger=null",
                                      "++hydra.run.dir=/tmp/scratch/out/hydra", NULL });
    inject_trial_release(&t);

    /* Without a scratch directory, the setting that names it is not made. */
    ctx.output_dir = NULL;
    assert_int_equal(inject_build(&ctx, cmd, NULL, &c, &t, err, sizeof err), 0);
    expect(&t.argv, (const char *[]){ "accelerate", "launch", "train.py", "--config-name",
                                      "F5TTS_v1_Base", "+datasets.batch_size_per_gpu=19200",
                                      "++optim.grad_accumulation_steps=2",
                                      "++model.arch.checkpoint_activations=True",
                                      "++ckpts.log_samples=False", "++ckpts.logger=null", NULL });
    inject_trial_release(&t);
    preset_release(&f5);
}

static void test_config_copy(void **state)
{
    (void)state;
    char dir[] = "/tmp/ab-inject-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/ds.json", dir);
    const char *text = "{\n  \"train_batch_size\": 64,\n  \"train_micro_batch_size_per_gpu\": 8,\n"
                       "  \"gradient_accumulation_steps\": 4\n}\n";
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    struct cfile cf = CFILE_INIT;
    char err[256];
    assert_int_equal(cfile_load(&cf, path, err, sizeof err), 0);
    char arg[160];
    snprintf(arg, sizeof arg, "--deepspeed=%s", path);
    char *cmd[] = { "python3", "train.py", arg, NULL };
    struct preset ds = load_preset("deepspeed");
    struct inject_ctx ctx = { .preset = &ds, .max_steps = 7, .trial_id = 5, .world_size = 2,
                              .config_path = path, .config = &cf };
    struct inject_candidate c = { 16, 4, 0, 0 };
    struct inject_trial t = INJECT_TRIAL_INIT;
    assert_int_equal(inject_build(&ctx, cmd, NULL, &c, &t, err, sizeof err), 0);
    assert_non_null(t.tmp_config);
    assert_non_null(strstr(t.argv.v[2], "--deepspeed="));
    assert_string_equal(t.argv.v[2] + strlen("--deepspeed="), t.tmp_config);
    /* the copy has the values, train_batch_size = 16 x 4 x 2 */
    struct cfile copy = CFILE_INIT;
    assert_int_equal(cfile_load(&copy, t.tmp_config, err, sizeof err), 0);
    char *v = NULL;
    assert_int_equal(cfile_get(&copy, "train_micro_batch_size_per_gpu", &v, err, sizeof err), CEDIT_OK);
    assert_string_equal(v, "16");
    free(v);
    assert_int_equal(cfile_get(&copy, "train_batch_size", &v, err, sizeof err), CEDIT_OK);
    assert_string_equal(v, "128");
    free(v);
    cfile_release(&copy);
    /* the original is untouched, and the copy is gone after release */
    struct cfile again = CFILE_INIT;
    assert_int_equal(cfile_load(&again, path, err, sizeof err), 0);
    assert_string_equal(again.cur, text);
    cfile_release(&again);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", t.tmp_config);
    inject_trial_release(&t);
    assert_int_equal(access(tmp, F_OK), -1);

    /* a command that does not name the config cannot get a copy */
    char *cmd2[] = { "python3", "train.py", NULL };
    assert_int_equal(inject_build(&ctx, cmd2, NULL, &c, &t, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not name"));
    /* and leaves no file behind */
    char ls[160];
    snprintf(ls, sizeof ls, "test $(ls -A %s | wc -l) = 1", dir);
    assert_int_equal(system(ls), 0);
    cfile_release(&cf);
    preset_release(&ds);
    snprintf(ls, sizeof ls, "rm -rf %s", dir);
    assert_int_equal(system(ls), 0);
}

static void test_overrides_replace(void **state)
{
    (void)state;
    struct strvec v = STRVEC_INIT;
    load(&v, (const char *[]){ "python3", "t.py", "data.batch_size=4", "++trainer.max_steps=9",
                               "data.batch_size_extra=1", NULL });
    assert_int_equal(inject_set_override(&v, "data.batch_size", "32"), 0);
    assert_int_equal(inject_set_override(&v, "trainer.max_steps", "7"), 0);
    assert_int_equal(inject_set_override(&v, "trainer.accumulate_grad_batches", "2"), 0);
    expect(&v, (const char *[]){ "python3", "t.py", "data.batch_size=32", "++trainer.max_steps=7",
                                 "data.batch_size_extra=1", "++trainer.accumulate_grad_batches=2",
                                 NULL });
    strvec_release(&v);
    char *cmd[] = { "x", "--a", "1", "--b=2", "--a=3", NULL };
    assert_string_equal(inject_flag_value(cmd, "--a"), "3");
    assert_string_equal(inject_flag_value(cmd, "--b"), "2");
    assert_null(inject_flag_value(cmd, "--c"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_space_and_equals),
        cmocka_unit_test(test_bare_bool_and_duplicates),
        cmocka_unit_test(test_build_env_and_presets),
        cmocka_unit_test(test_precision_knob),
        cmocka_unit_test(test_hydra_overrides),
        cmocka_unit_test(test_config_copy),
        cmocka_unit_test(test_overrides_replace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
