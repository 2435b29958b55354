/* SPDX-License-Identifier: MIT */
/* Unit tests for preset: every built-in loads, the file format's errors,
 * and --knob overrides. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preset.h"

extern const size_t ab_presets_count;

static void test_builtins_load(void **state)
{
    (void)state;
    size_t n = 0;
    char err[256];
    for (const char *const *name = preset_builtin_names(); *name; name++, n++) {
        struct preset p = PRESET_INIT;
        assert_int_equal(preset_load(&p, *name, err, sizeof err), 0);
        assert_string_equal(p.name, *name);
        assert_non_null(p.summary);
        preset_release(&p);
    }
    /* every file in configs/presets/ is in the detection order, and back */
    assert_int_equal(n, ab_presets_count);
    assert_true(n >= 13);
}

static void test_framework_facts(void **state)
{
    (void)state;
    char err[256];
    struct preset p = PRESET_INIT;
    assert_int_equal(preset_load(&p, "f5-tts", err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_MICRO_BATCH].via, VIA_OVERRIDE);
    assert_string_equal(p.knobs[KNOB_MICRO_BATCH].where, "datasets.batch_size_per_gpu");
    assert_string_equal(p.knobs[KNOB_MICRO_BATCH].unit, "frames");
    assert_string_equal(p.knobs[KNOB_GRAD_ACCUM].where, "optim.grad_accumulation_steps");
    assert_string_equal(p.knobs[KNOB_CHECKPOINTING].where, "model.arch.checkpoint_activations");
    assert_string_equal(p.knobs[KNOB_CHECKPOINTING].spell_true, "True");
    assert_true(p.batch_min > 0);
    preset_release(&p);

    assert_int_equal(preset_load(&p, "coqui", err, sizeof err), 0);
    assert_string_equal(p.knobs[KNOB_MICRO_BATCH].where, "batch_size");
    assert_int_equal(p.knobs[KNOB_CHECKPOINTING].via, VIA_NONE); /* "checkpoint" is not it */
    preset_release(&p);

    assert_int_equal(preset_load(&p, "deepspeed", err, sizeof err), 0);
    assert_int_equal(p.nderived, 1);
    assert_string_equal(p.derived[0].key, "train_batch_size");
    assert_string_equal(p.derived[0].keep, "auto");
    assert_int_equal(p.derived[0].factors,
                     (1 << KNOB_MICRO_BATCH) | (1 << KNOB_GRAD_ACCUM) | PRESET_WORLD_SIZE);
    assert_true(preset_uses_config(&p));
    preset_release(&p);

    assert_int_equal(preset_load(&p, "orpheus", err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_CHECKPOINTING].via, VIA_ACCELERATE);
    assert_string_equal(p.knobs[KNOB_CHECKPOINTING].where, "fsdp_config.fsdp_activation_checkpointing");
    assert_true(preset_uses_accelerate(&p));
    preset_release(&p);

    assert_int_equal(preset_load(&p, "espnet", err, sizeof err), 0);
    assert_string_equal(p.knobs[KNOB_MICRO_BATCH].unit, "bins");
    preset_release(&p);

    assert_int_equal(preset_load(&p, "nope", err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown preset 'nope'"));
}

static void test_bad_files(void **state)
{
    (void)state;
    static const struct { const char *text, *want; } cases[] = {
        { "summary: x\n", "at least 'name'" },
        { "name: x\nknobs:\n  batch: {flag: --b}\n", "unknown knob 'batch'" },
        { "name: x\nknobs:\n  micro_batch: {flag: --b, env: B}\n", "more than one place" },
        { "name: x\nknobs:\n  micro_batch: {unit: frames}\n", "needs one of" },
        { "name: x\nknobs:\n  micro_batch: {flag: b}\n", "starts with '-'" },
        { "name: x\nbatch: 8:4\n", "not MIN:MAX" },
        { "name: x\nknobs:\n  checkpointing: {flag: --c, spelling: [on]}\n", "spelling" },
        { "name: x\nknobs:\n  output_dir: {flag: --o, root_joined: yes}\n", "true or false" },
        { "name: x\nknobs:\n  micro_batch: {flag: --b, root_joined: true}\n", "output_dir only" },
        { "name: x\nderived:\n  - {key: t, product: [micro_batch, gpus]}\n", "unknown factor 'gpus'" },
        { "name: [x\n", "line" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct preset p = PRESET_INIT;
        char err[256] = "";
        assert_int_equal(preset_parse(&p, cases[i].text, strlen(cases[i].text), "mine.yaml", err,
                                      sizeof err), -1);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i].want);
        assert_non_null(strstr(err, "mine.yaml"));
        preset_release(&p);
    }
}

static void test_user_file_and_knob_overrides(void **state)
{
    (void)state;
    char path[] = "/tmp/ab-preset-XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    const char *text = "name: mine\nknobs:\n  micro_batch: {env: BS}\n  grad_accum: {override: a.b}\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct preset p = PRESET_INIT;
    char err[256];
    assert_int_equal(preset_load(&p, path, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(p.knobs[KNOB_MICRO_BATCH].via, VIA_ENV);
    assert_int_equal(preset_set_knob(&p, "micro_batch=--bs", 0, err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_MICRO_BATCH].via, VIA_FLAG);
    assert_int_equal(preset_set_knob(&p, "grad_accum=x.y", 1, err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_GRAD_ACCUM].via, VIA_OVERRIDE); /* keeps its way */
    assert_string_equal(p.knobs[KNOB_GRAD_ACCUM].where, "x.y");
    assert_int_equal(preset_set_knob(&p, "checkpointing=train.ckpt", 1, err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_CHECKPOINTING].via, VIA_CONFIG);
    assert_int_equal(preset_set_knob(&p, "max_steps=train.steps", 0, err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_MAX_STEPS].via, VIA_OVERRIDE);
    assert_int_equal(preset_set_knob(&p, "micro_batch=env:MB", 0, err, sizeof err), 0);
    assert_int_equal(p.knobs[KNOB_MICRO_BATCH].via, VIA_ENV);
    assert_string_equal(p.knobs[KNOB_MICRO_BATCH].where, "MB");
    assert_int_equal(preset_set_knob(&p, "batch=4", 0, err, sizeof err), -1);
    assert_int_equal(preset_set_knob(&p, "micro_batch=", 0, err, sizeof err), -1);
    assert_int_equal(preset_set_knob(&p, "micro_batch=key:", 0, err, sizeof err), -1);
    preset_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_load),
        cmocka_unit_test(test_framework_facts),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_user_file_and_knob_overrides),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
