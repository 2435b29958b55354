/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for hint: the edit distance against hand-worked pairs and a
 * brute-force check of its definition, and which name a misspelling is
 * taken for among autobatch's real option, preset and subcommand names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cli/hint.h"
#include "preset.h"

static size_t dist(const char *a, const char *b)
{
    return hint_distance(a, strlen(a), b);
}

static void test_distance(void **state)
{
    (void)state;
    assert_int_equal(dist("", ""), 0);
    assert_int_equal(dist("", "abc"), 3);
    assert_int_equal(dist("abc", ""), 3);
    assert_int_equal(dist("batch", "batch"), 0);
    assert_int_equal(dist("bach", "batch"), 1);     /* a letter missing */
    assert_int_equal(dist("batchh", "batch"), 1);   /* one too many */
    assert_int_equal(dist("bitch", "batch"), 1);    /* one changed */
    assert_int_equal(dist("reprot", "report"), 1);  /* two swapped */
    assert_int_equal(dist("kitten", "sitting"), 3);
    assert_int_equal(dist("ca", "abc"), 3);         /* OSA: no edit of a swapped pair */
    assert_int_equal(dist("BATCH", "batch"), 0);    /* case does not count */
    assert_int_equal(dist("grad_accum", "grad-accum"), 0);
    /* Only alen letters of a are read. */
    assert_int_equal(hint_distance("bach=4", 4, "batch"), 1);
    /* Too long to compare. */
    char big[HINT_MAX_WORD + 2];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(dist(big, "a"), HINT_FAR);
    assert_int_equal(dist("a", big), HINT_FAR);
}

/* The plain recursive definition, for short words. */
static size_t osa_slow(const char *a, size_t i, const char *b, size_t j)
{
    if (!i)
        return j;
    if (!j)
        return i;
    size_t best = osa_slow(a, i - 1, b, j - 1) + (a[i - 1] != b[j - 1]);
    size_t d = osa_slow(a, i - 1, b, j) + 1;
    best = d < best ? d : best;
    d = osa_slow(a, i, b, j - 1) + 1;
    best = d < best ? d : best;
    if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d = osa_slow(a, i - 2, b, j - 2) + 1;
        best = d < best ? d : best;
    }
    return best;
}

static void test_distance_random(void **state)
{
    (void)state;
    srand(28);
    for (int k = 0; k < 3000; k++) {
        char a[8], b[8];
        size_t na = (size_t)rand() % 7, nb = (size_t)rand() % 7;
        for (size_t i = 0; i < na; i++)
            a[i] = "abc"[rand() % 3];
        for (size_t i = 0; i < nb; i++)
            b[i] = "abc"[rand() % 3];
        a[na] = b[nb] = '\0';
        assert_int_equal(dist(a, b), osa_slow(a, na, b, nb));
        assert_int_equal(dist(a, b), dist(b, a));
    }
}

static const char *const options[] = {
    "baseline", "batch", "budget", "checkpointing", "config", "confirm", "dry-run",
    "emulate-gpu-memory", "emulate-with", "events", "global-batch", "gpus", "gpus-per-trial",
    "grad-accum", "hang-timeout", "headroom", "help", "html", "json", "junit", "keep-traces",
    "kill-grace", "knob", "launcher", "markdown", "no-cache", "no-confirm", "no-probe",
    "preset", "quiet", "regression-threshold", "replay", "show-output", "steps",
    "trial-memory-limit", "trial-timeout", "verbose", "version", "warmup", "webhook",
    "webhook-format", "webhook-insecure", "world-size", "worst-case", "worst-case-scan", "write",
};
#define NOPTS (sizeof options / sizeof *options)

static const char *closest(const char *word, const char *const *names, size_t n)
{
    return hint_closest(word, strlen(word), names, n);
}

static void expect(const char *word, const char *want, const char *const *names, size_t n)
{
    const char *got = closest(word, names, n);
    if (!want) {
        if (got)
            fail_msg("'%s': expected no guess, got '%s'", word, got);
        return;
    }
    if (!got || strcmp(got, want))
        fail_msg("'%s': expected '%s', got '%s'", word, want, got ? got : "(none)");
}

static void test_options(void **state)
{
    (void)state;
    expect("bach", "batch", options, NOPTS);
    expect("batch", "batch", options, NOPTS);
    expect("jsno", "json", options, NOPTS);
    expect("gpu", "gpus", options, NOPTS);
    expect("step", "steps", options, NOPTS);
    expect("presett", "preset", options, NOPTS);
    expect("wirte", "write", options, NOPTS);
    expect("grad_accum", "grad-accum", options, NOPTS);
    expect("trial_memory_limit", "trial-memory-limit", options, NOPTS);
    expect("dryrun", "dry-run", options, NOPTS);
    expect("nocache", "no-cache", options, NOPTS);
    expect("trial-mem", "trial-memory-limit", options, NOPTS);  /* abbreviation */
    expect("batch-size", "batch", options, NOPTS);              /* a longer spelling */
    expect("batchsize", "batch", options, NOPTS);
    expect("webh", NULL, options, NOPTS);       /* three options start so */
    expect("bogus", NULL, options, NOPTS);
    expect("x", NULL, options, NOPTS);          /* too short to guess from */
    expect("qq", NULL, options, NOPTS);
    expect("", NULL, options, NOPTS);
    expect("per_device_train_batch_size", NULL, options, NOPTS);
}

static void test_presets(void **state)
{
    (void)state;
    const char *const *names = preset_builtin_names();
    size_t n = 0;
    while (names[n])
        n++;
    expect("hff", "hf", names, n);
    expect("hyrda", "hydra", names, n);
    expect("jsn", "json", names, n);
    expect("f5tts", "f5-tts", names, n);
    expect("f5_tts", "f5-tts", names, n);
    expect("parler", "parler-tts", names, n);
    expect("lightening", "lightning", names, n);
    expect("deepspeed", "deepspeed", names, n);
    expect("nope", NULL, names, n);
    /* The list may end at NULL before n. */
    expect("hff", "hf", names, (size_t)-1);
}

static void test_subcommands(void **state)
{
    (void)state;
    static const char *const subs[] = { "config", "report", "matrix", "notify", "predict",
                                        "presets", "help" };
    size_t n = sizeof subs / sizeof *subs;
    expect("reprot", "report", subs, n);
    expect("reports", "report", subs, n);
    expect("matirx", "matrix", subs, n);
    expect("notfy", "notify", subs, n);
    expect("predcit", "predict", subs, n);
    expect("preset", "presets", subs, n);
    expect("hlep", "help", subs, n);
    expect("python3", NULL, subs, n);
    expect("train.py", NULL, subs, n);
    expect("torchrun", NULL, subs, n);
    expect("accelerate", NULL, subs, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distance),
        cmocka_unit_test(test_distance_random),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_subcommands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
