/* Unit tests for inject: HF flag replacement and the trial environment. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

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

static void test_build_env_and_presets(void **state)
{
    (void)state;
    char *cmd[] = { "python3", "train.py", "--per_device_train_batch_size=2", NULL };
    char *envp[] = { "PATH=/usr/bin", "AUTOBATCH_MICRO_BATCH=999", "HOME=/root", NULL };
    struct inject_candidate c = { 24, 4, 1 };
    struct inject_opts o = { INJECT_HF, 1, 7, 3, "/tmp/r.jsonl" };
    struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
    assert_int_equal(inject_build(&o, cmd, envp, &c, &argv, &env), 0);
    expect(&argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size=24",
                                    "--gradient_accumulation_steps", "4", "--max_steps", "7",
                                    "--gradient_checkpointing", "true", NULL });
    assert_string_equal(env_get(&env, "AUTOBATCH_TRIAL"), "3");
    assert_string_equal(env_get(&env, "AUTOBATCH_MICRO_BATCH"), "24");
    assert_string_equal(env_get(&env, "AUTOBATCH_GRAD_ACCUM"), "4");
    assert_string_equal(env_get(&env, "AUTOBATCH_CHECKPOINTING"), "1");
    assert_string_equal(env_get(&env, "AUTOBATCH_MAX_STEPS"), "7");
    assert_string_equal(env_get(&env, "AUTOBATCH_REPORT"), "/tmp/r.jsonl");
    assert_string_equal(env_get(&env, "PATH"), "/usr/bin");
    assert_string_equal(env_get(&env, "HOME"), "/root");
    strvec_release(&argv);
    strvec_release(&env);

    /* env preset: argv untouched; checkpointing not searched: no flag. */
    o.preset = INJECT_ENV;
    assert_int_equal(inject_build(&o, cmd, envp, &c, &argv, &env), 0);
    expect(&argv, (const char *[]){ "python3", "train.py", "--per_device_train_batch_size=2", NULL });
    strvec_release(&argv);
    strvec_release(&env);
    o.preset = INJECT_HF;
    o.set_checkpointing = 0;
    assert_int_equal(inject_build(&o, cmd, envp, &c, &argv, &env), 0);
    for (size_t i = 0; i < argv.n; i++)
        assert_null(strstr(argv.v[i], "checkpointing"));
    strvec_release(&argv);
    strvec_release(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replace_space_and_equals),
        cmocka_unit_test(test_bare_bool_and_duplicates),
        cmocka_unit_test(test_build_env_and_presets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
