/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/steps.c: tqdm bars as tqdm draws them (unicode
 * blocks, '\r' redraws, both rate forms, any unit, with their
 * descriptions and postfixes), Rich bars, Coqui's STEP lines, the Hugging
 * Face Trainer's metric dicts of both generations, AUTOBATCH_REPORT lines,
 * and lines that look a little like progress but are not.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "steps.h"

/* "█" and "▊", as tqdm draws the bar */
#define FULL "\xe2\x96\x88"
#define PART "\xe2\x96\x8a"
#define BAR10 FULL FULL FULL FULL FULL FULL FULL FULL FULL FULL

/* cmocka's assert_float_equal works in float; these values need double. */
#define assert_near(a, b, eps)                                                  \
    do {                                                                        \
        double a_ = (a), b_ = (b);                                              \
        if (!(fabs(a_ - b_) <= (eps)))                                          \
            fail_msg("%s is %.17g, want %.17g", #a, a_, b_);                    \
    } while (0)

static struct step_event parse(const char *line)
{
    struct step_event ev;
    memset(&ev, 0x5a, sizeof ev); /* garbage, to see that every field is set */
    int rc = steps_parse_line(line, strlen(line), &ev);
    assert_int_equal(rc, ev.source != STEP_NONE);
    return ev;
}

static void expect_tqdm(const char *line, long step, long total, double rate)
{
    struct step_event ev = parse(line);
    if (ev.source != STEP_TQDM)
        fail_msg("not read as a tqdm bar: \"%s\"", line);
    assert_int_equal(ev.step, step);
    assert_int_equal(ev.total, total);
    if (rate < 0)
        assert_true(ev.rate_it_s < 0);
    else
        assert_near(ev.rate_it_s, rate, 1e-9);
    assert_true(ev.samples < 0);
    assert_true(ev.time_s < 0);
    assert_int_equal(ev.peak_mem_bytes, -1);
    assert_true(ev.hf_samples_per_s < 0);
}

/* A bar with its description and unit. */
static void expect_bar(const char *line, long step, long total, double rate, const char *desc,
                       const char *unit)
{
    expect_tqdm(line, step, total, rate);
    struct step_event ev = parse(line);
    if (strcmp(ev.desc, desc) != 0)
        fail_msg("desc \"%s\", want \"%s\": \"%s\"", ev.desc, desc, line);
    if (strcmp(ev.unit, unit) != 0)
        fail_msg("unit \"%s\", want \"%s\": \"%s\"", ev.unit, unit, line);
}

static void expect_none(const char *line)
{
    struct step_event ev = parse(line);
    if (ev.source != STEP_NONE)
        fail_msg("read as progress (source %d, step %ld): \"%s\"", (int)ev.source, ev.step,
                 line);
    assert_int_equal(ev.step, -1);
}

static void test_tqdm_rates(void **state)
{
    (void)state;
    /* the example in FACTS.md */
    expect_tqdm(" 98%|" FULL FULL FULL FULL FULL FULL FULL FULL FULL PART
                "| 2086/2120 [26:01<00:22,  1.49it/s]",
                2086, 2120, 1.49);
    /* slower than 1 it/s: seconds per iteration */
    expect_tqdm(" 10%|" FULL "         | 5/50 [00:20<03:00,  4.00s/it]", 5, 50, 0.25);
    expect_tqdm(" 10%|" FULL "         | 5/50 [00:20<03:01,  3.20s/it]", 5, 50, 1 / 3.2);
    /* unknown rate before the second iteration */
    expect_tqdm("  0%|          | 0/100 [00:00<?, ?it/s]", 0, 100, -1);
    /* postfix after the rate */
    expect_tqdm(" 40%|" FULL FULL FULL FULL "      | 40/100 [00:10<00:15,  3.99it/s, loss=0.532, "
                "lr=1e-4]",
                40, 100, 3.99);
    /* hours, and a fast rate wider than 5 columns */
    expect_tqdm("100%|" BAR10 "| 10000/10000 [2:46:40<00:00, 1000.00it/s]", 10000, 10000,
                1000.0);
    /* a description in front, as Lightning and accelerate scripts print */
    expect_tqdm("Epoch 0:  50%|" FULL FULL FULL FULL FULL "     | 50/100 [00:25<00:25,  "
                "2.00it/s, v_num=3, train_loss=1.23]",
                50, 100, 2.0);
}

static void test_tqdm_unknown_total(void **state)
{
    (void)state;
    /* total=None: no bar, no remaining time */
    expect_tqdm("5it [00:01,  3.20it/s]", 5, -1, 3.2);
    expect_tqdm("Training: 123it [01:02,  1.98it/s, loss=2.1]", 123, -1, 1.98);
    expect_tqdm("7it [00:09,  1.25s/it]", 7, -1, 0.8);
    /* a bar_format that keeps "/total" with an unknown total */
    expect_tqdm("12/? [00:03<?,  3.61it/s]", 12, -1, 3.61);
}

static void test_tqdm_redraws(void **state)
{
    (void)state;
    /* The runner splits on '\r'; each piece is one redraw. */
    const char *stream = "\r  1%|          | 1/100 [00:01<01:39,  1.00it/s]"
                         "\r  2%|\xe2\x96\x8f         | 2/100 [00:02<01:38,  1.00it/s]"
                         "\r  3%|\xe2\x96\x8e         | 3/100 [00:03<01:37,  1.01it/s]";
    const char *p = stream;
    long want = 1;
    while ((p = strchr(p, '\r')) != NULL) {
        p++;
        const char *next = strchr(p, '\r');
        size_t len = next ? (size_t)(next - p) : strlen(p);
        struct step_event ev;
        assert_int_equal(steps_parse_line(p, len, &ev), 1);
        assert_int_equal(ev.source, STEP_TQDM);
        assert_int_equal(ev.step, want);
        assert_int_equal(ev.total, 100);
        want++;
    }
    assert_int_equal(want, 4);

    /* Unsplit, the newest (rightmost) redraw counts. */
    expect_tqdm(stream, 3, 100, 1.01);
    /* a nested bar moves the cursor up first */
    expect_tqdm("\x1b[A 50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:05<00:05,  1.00it/s]", 5,
                10, 1.0);
    /* only line[0..len) is read: cut before the rate, it is no bar */
    const char *l = " 98%|" BAR10 "| 2086/2120 [26:01<00:22,  1.49it/s]";
    struct step_event ev;
    assert_int_equal(steps_parse_line(l, strlen(l) - strlen("1.49it/s]"), &ev), 0);
    assert_int_equal(ev.source, STEP_NONE);
}

static void test_tqdm_other_bars(void **state)
{
    (void)state;
    /* Not the training bar, but a bar: trainlog decides. */
    expect_bar("Loading checkpoint shards: 100%|" BAR10 "| 3/3 [00:02<00:00,  1.20it/s]", 3, 3,
               1.2, "Loading checkpoint shards", "it");
    expect_tqdm("Evaluating:  25%|" FULL FULL "        | 4/16 [00:01<00:03,  3.50it/s]", 4, 16,
                3.5);
    /* Scaled counts are rounded to 3 digits and cannot count steps. */
    expect_none(" 12%|" FULL "         | 1.2k/10.0k [00:10<01:13, 120.00it/s]");
    expect_none(" 10%|" FULL "         | 999/10.0k [00:10<01:13, 99.90it/s]");
    /* Bars counting data, not steps: bytes and Hugging Face datasets. */
    expect_none("Map: 100%|" BAR10 "| 1000/1000 [00:00<00:00, 12345.67 examples/s]");
    expect_none("Map: 100%|" BAR10 "| 1000/1000 [00:00<00:00, 12345.67ex/s]");
    expect_none("Map: 100%|" BAR10 "| 10/10 [00:00<00:00, 45.61ba/s]");
    expect_none("model.safetensors: 100%|" BAR10 "| 548M/548M [00:02<00:00, 212MB/s]");
    expect_none("config.json: 100%|" BAR10 "| 665/665 [00:00<00:00, 4.10kB/s]");
    expect_none("vocab.txt: 100%|" BAR10 "| 512/512 [00:00<00:00, 512.00B/s]");
    expect_none("Filter: 100%|" BAR10 "| 1000 examples [00:00, 12345.67 examples/s]");
    /* "samples" is not data throughput to steps.c: a preset may name it */
    expect_bar("Train:  10%|" FULL "         | 64/640 [00:01<00:09, 64.00samples/s]", 64, 640,
               64.0, "Train", "samples");
}

/* tqdm bars in any unit: F5-TTS's "update" (tqdm(unit="update")), and
 * "step", "batch", both rate forms, the unknown rate, no total. */
static void test_tqdm_units(void **state)
{
    (void)state;
    /* F5-TTS trainer.py: desc=f"Epoch {epoch + 1}/{self.epochs}", unit="update",
     * set_postfix(update=str(global_update), loss=loss.item()) (keys sorted) */
    expect_bar("Epoch 1/100:  20%|" FULL FULL "        | 2/10 [00:10<00:41,  5.13s/update, "
               "loss=0.98, update=2]",
               2, 10, 1 / 5.13, "Epoch 1/100", "update");
    expect_bar("Epoch 1/100:   0%|          | 0/10 [00:00<?, ?update/s]", 0, 10, -1, "Epoch 1/100",
               "update");
    expect_bar("Epoch 2/100:  30%|" FULL FULL FULL "       | 3/10 [00:01<00:02,  2.51update/s, "
               "loss=0.71, update=13]",
               3, 10, 2.51, "Epoch 2/100", "update");
    expect_bar("train: 40%|" FULL FULL FULL FULL "      | 40/100 [00:10<00:15,  3.99step/s]", 40,
               100, 3.99, "train", "step");
    expect_bar("  7%|" FULL "         | 7/100 [00:14<03:06,  2.00s/batch, loss=1.1]", 7, 100, 0.5,
               "", "batch");
    expect_bar("steps: 12step [00:03,  3.61step/s]", 12, -1, 3.61, "steps", "step");
    expect_bar("Epoch 1/100: 3update [00:01,  2.00update/s]", 3, -1, 2.0, "Epoch 1/100", "update");
    /* F5's dynamic batches bar, had it no total */
    expect_bar("Creating dynamic batches with 38400 audio frames per gpu: 3it [00:00, 1.79it/s]",
               3, -1, 1.79, "Creating dynamic batches with 38400 audio frames per gpu", "it");
    /* "2.00steps/s" is a rate in steps, not "s/..." */
    expect_bar("x:  1%|          | 1/100 [00:00<00:49,  2.00steps/s]", 1, 100, 2.0, "x", "steps");
    /* the count's unit must be the rate's */
    expect_none("took 3 seconds [00:01,  1.00it/s]");
    expect_none("Epoch 1/100: 3update [00:01,  2.00it/s]");
    /* an empty unit is none */
    expect_none(" 50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:05<00:05,  1.00/s]");
}

/* The description as tqdm writes l_bar, "{desc}: {percentage:3.0f}%|". */
static void test_tqdm_desc(void **state)
{
    (void)state;
    /* F5-TTS dataset.py, as issue 9 saw it and as the source has it */
    expect_bar("Sorting with sampler... : 100%|" BAR10 "| 400/400 [00:00<00:00, 1788615.78it/s]",
               400, 400, 1788615.78, "Sorting with sampler...", "it");
    expect_bar("Sorting with sampler... if slow, check whether dataset is provided with duration: "
               "100%|" BAR10 "| 400/400 [00:00<00:00, 1788615.78it/s]",
               400, 400, 1788615.78,
               "Sorting with sampler... if slow, check whether dataset is provided with duration",
               "it");
    /* Parler-TTS: "Train steps ... " and the undescribed audio encoding bar */
    expect_bar("Train steps ... :  10%|" FULL "         | 100/1000 [01:40<15:00,  1.00s/it]", 100,
               1000, 1.0, "Train steps ...", "it");
    expect_bar(" 19%|" FULL "\xe2\x96\x89        | 3/16 [00:04<00:12,  1.50s/it]", 3, 16,
               1 / 1.5, "", "it");
    /* the Hugging Face Trainer's bar has no description */
    expect_bar("  3%|\xe2\x96\x8e         | 3/100 [00:02<01:05,  1.49it/s]", 3, 100, 1.49, "", "it");
    expect_bar("  3/100 [00:02<01:05,  1.49it/s]", 3, 100, 1.49, "", "it");
    /* a nested bar's cursor movement and colours are not description */
    expect_bar("\x1b[A\x1b[32mTraining\x1b[0m:  50%|" FULL FULL FULL FULL FULL "     | 5/10 "
               "[00:05<00:05,  1.00it/s]",
               5, 10, 1.0, "Training", "it");
    expect_bar("[rank0]: Epoch 1/100:  10%|" FULL "         | 1/10 [00:05<00:46,  5.13s/update]",
               1, 10, 1 / 5.13, "[rank0]: Epoch 1/100", "update");
    /* unsplit redraws: only the newest redraw's description */
    expect_bar("\rA:  10%|" FULL "         | 1/10 [00:01<00:09,  1.00it/s]"
               "\rA:  20%|" FULL FULL "        | 2/10 [00:02<00:08,  1.00it/s]",
               2, 10, 1.0, "A", "it");

    /* a long description is cut to 95 bytes, never inside a character */
    char line[512], want[128];
    memset(line, 'a', 94);
    memcpy(line + 94, "\xc3\xa9\xc3\xa9", 4);
    strcpy(line + 98, ":  10%|" FULL "         | 1/10 [00:01<00:09,  1.00it/s]");
    memset(want, 'a', 94);
    want[94] = '\0';
    expect_bar(line, 1, 10, 1.0, want, "it");
    memset(line, 'a', 93);
    memcpy(line + 93, "\xc3\xa9\xc3\xa9", 4);
    strcpy(line + 97, ":  10%|" FULL "         | 1/10 [00:01<00:09,  1.00it/s]");
    memset(want, 'a', 93);
    memcpy(want + 93, "\xc3\xa9", 3);
    expect_bar(line, 1, 10, 1.0, want, "it");
}

/* Numbers from the output are range-checked: nothing above 10^9. */
static void test_tqdm_ranges(void **state)
{
    (void)state;
    expect_tqdm("1000000000/1000000000 [00:01<00:00,  1.00it/s]", 1000000000L, 1000000000L,
                1.0);
    expect_none("1000000001/2000000000 [00:01<00:00,  1.00it/s]");
    expect_none("5/1000000001 [00:01<00:00,  1.00it/s]");
    expect_none("99999999999999999999/10 [00:01<00:00,  1.00it/s]");
    expect_none("1000000001it [00:01,  1.00it/s]");
    /* a run of digits far longer than any count */
    char line[4096];
    memset(line, '7', 4000);
    strcpy(line + 4000, "/10 [00:01<00:00,  1.00it/s]");
    expect_none(line);
}

/* A postfix value, such as F5's global update count. */
static void test_postfix_value(void **state)
{
    (void)state;
    const char *l = "Epoch 2/100:  30%|" FULL FULL FULL "       | 3/10 [00:01<00:02,  2.51update/s, "
                    "loss=0.71, update=13]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), 13);
    assert_int_equal(steps_postfix_value(l, strlen(l), "loss"), -1);
    assert_int_equal(steps_postfix_value(l, strlen(l), "step"), -1);
    assert_int_equal(steps_postfix_value(l, strlen(l), ""), -1);
    /* only line[0..len) is read: cut before the rate, it is no bar; cut
     * inside the value, the value is what is left */
    assert_int_equal(steps_postfix_value(l, strlen(l) - strlen("2.51update/s, loss=0.71, update=13]"),
                                         "update"),
                     -1);
    assert_int_equal(steps_postfix_value(l, strlen(l) - 2, "update"), 1);
    /* the first key, and a key that only ends like the one asked for */
    l = " 30%|" FULL FULL FULL "       | 3/10 [00:01<00:02,  2.51it/s, update=7, loss=1]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), 7);
    l = " 30%|" FULL FULL FULL "       | 3/10 [00:01<00:02,  2.51it/s, num_update=7]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), -1);
    /* Lightning's v_num, in the TQDM bar and the Rich bar */
    l = "Epoch 0:  45%|" FULL FULL FULL FULL "     | 45/100 [00:10<00:12, 4.50it/s, v_num=3, "
        "train_loss=2.31]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "v_num"), 3);
    l = "Epoch 0/9 \xe2\x94\x81\xe2\x94\x81 45/100 0:00:10 \xe2\x80\xa2 0:00:12 4.50it/s v_num: 3 "
        "train_loss: 2.310";
    assert_int_equal(steps_postfix_value(l, strlen(l), "v_num"), 3);
    assert_int_equal(steps_postfix_value(l, strlen(l), "train_loss"), -1);
    /* a key in the description is not a postfix */
    l = "update=5: 3it [00:01,  2.00it/s]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), -1);
    /* no bar, or a value out of range */
    l = "update=5";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), -1);
    l = " 30%|" FULL FULL FULL "       | 3/10 [00:01<00:02,  2.51it/s, update=10000000000]";
    assert_int_equal(steps_postfix_value(l, strlen(l), "update"), -1);
    assert_int_equal(steps_postfix_value(NULL, 0, "update"), -1);
}

static void test_unit_is_data(void **state)
{
    (void)state;
    static const char *const data[] = { "B", "kB", "MB", "GB", "MiB", "GiB", "bytes",
                                        "examples", "ex", "ba" };
    static const char *const steps[] = { "it", "update", "step", "steps", "batch", "samples",
                                         "b", "Mit", "" };
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++)
        assert_true(steps_unit_is_data(data[i]));
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        assert_false(steps_unit_is_data(steps[i]));
    assert_false(steps_unit_is_data(NULL));
}

/* Coqui Trainer (trainer/logging/console_logger.py, print_train_step):
 * GLOBAL_STEP g is printed before the step is counted, so g + 1 steps are
 * done. */
static void expect_coqui(const char *line, long step)
{
    struct step_event ev = parse(line);
    if (ev.source != STEP_COQUI)
        fail_msg("not read as a Coqui step line: \"%s\"", line);
    assert_int_equal(ev.step, step);
    assert_int_equal(ev.total, -1);
    assert_true(ev.rate_it_s < 0);
    assert_string_equal(ev.desc, "");
    assert_string_equal(ev.unit, "");
}

static void test_coqui(void **state)
{
    (void)state;
    expect_coqui("   --> TIME: 2024-01-01 12:00:00 -- STEP: 3/13 -- GLOBAL_STEP: 3", 4);
    expect_coqui("\x1b[1m   --> TIME: 2024-01-01 12:00:00 -- STEP: 0/12 -- GLOBAL_STEP: 0\x1b[0m",
                 1);
    expect_coqui("[1m   --> TIME: 2024-01-01 12:00:00 -- STEP: 24/12 -- GLOBAL_STEP: 25[0m", 26);
    expect_coqui("--> STEP: 3/13 -- GLOBAL_STEP: 3", 4);
    expect_coqui("   --> STEP: 3/13 -- GLOBAL_STEP: 3  ", 4);
    expect_coqui("\x1b[1m --> STEP: 3/13 -- GLOBAL_STEP: 5000\x1b[0m", 5001);
    /* evaluation steps and epoch summaries are not training steps */
    expect_none("\x1b[1m   --> STEP: 3\x1b[0m");
    expect_none("\x1b[1m   --> TRAIN PERFORMACE -- EPOCH TIME: 12.31 sec -- GLOBAL_STEP: 13"
                "\x1b[0m");
    expect_none(" --> /tmp/run-January-01-2024_12+00PM-0000000");
    expect_none("   --> STEP: 3/13 -- GLOBAL_STEP: x");
    expect_none("   --> STEP: 3/13 -- GLOBAL_STEP: 3x");
    expect_none("x--> STEP: 3/13 -- GLOBAL_STEP: 3");
    expect_none("   --> STEP: 3/13 -- GLOBAL_STEP: 1000000000");
}

static void test_not_progress(void **state)
{
    (void)state;
    expect_none("Epoch 1/10");
    expect_none("2024/01/02 12:00:00 starting run");
    expect_none("loading 3/4 shards");
    expect_none("step 3/10 [rank0] loss 2.31");
    expect_none("[2024-01-02 12:00:00] 3/4 done");
    expect_none("resuming from 3/4 [00:01]");
    expect_none("progress 3/4 [00:01<00:02] no rate");
    expect_none("version 1.2/3 [00:01<00:02,  1.00it/s]");
    expect_none("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
    expect_none("***** Running training *****");
    expect_none("  Num examples = 1,000");
    expect_none("");
    expect_none("[");
    expect_none(" [");
}

/* Lightning: the TQDM bar with "Epoch N:" in front and metrics after the
 * rate, and the RichProgressBar with its bullet between the times. */
static void test_lightning_bars(void **state)
{
    (void)state;
    expect_tqdm("Epoch 0:  45%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8c     | "
                "45/100 [00:10<00:12, 4.50it/s, v_num=0, train_loss=2.31]", 45, 100, 4.50);
    expect_tqdm("Epoch 3: 100%|##########| 100/100 [00:22<00:00,  4.41it/s, loss=2.31, v_num=0]",
                100, 100, 4.41);
    expect_tqdm("Epoch 0/9 \xe2\x94\x81\xe2\x94\x81\xe2\x94\x81 45/100 0:00:10 \xe2\x80\xa2 0:00:12 "
                "4.50it/s v_num: 0 train_loss: 2.310", 45, 100, 4.50);
    expect_tqdm("Epoch 2/9 \xe2\x94\x81\xe2\x94\x81 7/250 0:01:03 \xe2\x80\xa2 0:35:00 0.11it/s v_num: 1",
                7, 250, 0.11);
    expect_tqdm("Epoch 0/9 \xe2\x94\x81 3/250 0:00:30 \xe2\x80\xa2 -:--:-- 2.50s/it", 3, 250, 0.4);
    /* the epoch counter alone is not a step counter */
    expect_none("Epoch 0/9 \xe2\x80\xa2 starting");
    /* with their descriptions */
    expect_bar("Epoch 0:  40%|" FULL FULL FULL FULL "      | 4/10 [00:01<00:02,  2.50it/s, "
               "v_num=0, train_loss=1.23]",
               4, 10, 2.5, "Epoch 0", "it");
    expect_bar("Epoch 0/9  \xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x95\xb8 4/10 0:00:01 "
               "\xe2\x80\xa2 0:00:02 2.50it/s v_num: 0",
               4, 10, 2.5, "Epoch 0/9", "it");
    expect_bar("Validation DataLoader 0 \xe2\x94\x81\xe2\x94\x81 2/8 0:00:01 \xe2\x80\xa2 "
               "0:00:03 2.00it/s",
               2, 8, 2.0, "Validation DataLoader 0", "it");
}

static void expect_hf(const char *line, enum step_source src, double samples_per_s)
{
    struct step_event ev = parse(line);
    if (ev.source != src)
        fail_msg("source %d, want %d: \"%s\"", (int)ev.source, (int)src, line);
    assert_int_equal(ev.step, -1);
    assert_int_equal(ev.total, -1);
    assert_true(ev.rate_it_s < 0);
    if (samples_per_s < 0)
        assert_true(ev.hf_samples_per_s < 0);
    else
        assert_near(ev.hf_samples_per_s, samples_per_s, 1e-12);
}

static void test_hf_dicts(void **state)
{
    (void)state;
    /* floats (older transformers) */
    expect_hf("{'loss': 2.3114, 'grad_norm': 1.2345, 'learning_rate': 5e-05, 'epoch': 0.01}",
              STEP_HF_LOG, -1);
    /* :.4g strings (newer transformers) */
    expect_hf("{'loss': '2.311', 'grad_norm': '1.234', 'learning_rate': '5e-05', 'epoch': "
              "'0.01'}",
              STEP_HF_LOG, -1);
    /* rank prefix, indentation, trailing blanks */
    expect_hf("[rank0]:   {'loss': 0.6931, 'learning_rate': 4.9e-05, 'epoch': 0.02}  ",
              STEP_HF_LOG, -1);
    expect_hf("{'loss': nan, 'grad_norm': nan, 'learning_rate': 5e-05, 'epoch': 0.05}",
              STEP_HF_LOG, -1);

    /* the summary dict ends training */
    expect_hf("{'train_runtime': 27172.2581, 'train_samples_per_second': 0.887, "
              "'train_steps_per_second': 0.444, 'train_loss': 1.2345, 'epoch': 3.0}",
              STEP_HF_DONE, 0.887);
    expect_hf("{'train_runtime': '1575', 'train_samples_per_second': '1.333', "
              "'train_steps_per_second': '0.167', 'train_loss': '2.345', 'epoch': '1'}",
              STEP_HF_DONE, 1.333);
    expect_hf("{'train_runtime': '12.5', 'train_samples_per_second': '1.333e+04', "
              "'train_steps_per_second': '104.2', 'train_loss': '2.345', 'epoch': '1'}",
              STEP_HF_DONE, 13330.0);
    expect_hf("{'train_runtime': 3.1, 'train_loss': 2.2, 'epoch': 1.0}", STEP_HF_DONE, -1);

    /* eval dicts are not steps */
    expect_none("{'eval_loss': 2.1234, 'eval_runtime': 3.21, 'eval_samples_per_second': 31.15, "
                "'eval_steps_per_second': 3.9, 'epoch': 1.0}");
    expect_none("{'eval_loss': '2.123', 'eval_runtime': '3.21', 'epoch': '1'}");
    /* a config dict that happens to have a 'loss' key */
    expect_none("config = {'loss': 'cross_entropy', 'lr': 0.0001}");
    /* a dict quoted inside something else */
    expect_none("Namespace(metrics={'loss': 2.0})");
    expect_none("{'loss': 2.0, 'epoch': 0.1");
}

static void test_report_lines(void **state)
{
    (void)state;
    struct step_event ev;
    const char *l;

    l = "{\"step\": 10, \"samples\": 320, \"time\": 12.5}";
    assert_int_equal(steps_parse_report(l, strlen(l), &ev), 1);
    assert_int_equal(ev.source, STEP_REPORT);
    assert_int_equal(ev.step, 10);
    assert_near(ev.samples, 320.0, 0);
    assert_near(ev.time_s, 12.5, 0);
    assert_int_equal(ev.peak_mem_bytes, -1);
    assert_int_equal(ev.total, -1);
    assert_true(ev.rate_it_s < 0);
    assert_true(ev.hf_samples_per_s < 0);

    l = "{\"step\": 3, \"samples\": 96.0, \"time\": 1700000000.25, \"peak_mem_bytes\": "
        "12884901888}\r\n";
    assert_int_equal(steps_parse_report(l, strlen(l), &ev), 1);
    assert_int_equal(ev.step, 3);
    assert_near(ev.samples, 96.0, 0);
    assert_near(ev.time_s, 1700000000.25, 0);
    assert_int_equal(ev.peak_mem_bytes, 12884901888LL);

    l = "{\"step\": 4.0, \"peak_mem_bytes\": 1.5e9}";
    assert_int_equal(steps_parse_report(l, strlen(l), &ev), 1);
    assert_int_equal(ev.step, 4);
    assert_true(ev.samples < 0);
    assert_true(ev.time_s < 0);
    assert_int_equal(ev.peak_mem_bytes, 1500000000LL);

    /* optional fields of the wrong type are dropped, the step is kept */
    l = "{\"step\": 5, \"samples\": \"32\", \"time\": null, \"rank\": 0}";
    assert_int_equal(steps_parse_report(l, strlen(l), &ev), 1);
    assert_int_equal(ev.step, 5);
    assert_true(ev.samples < 0);
    assert_true(ev.time_s < 0);

    /* only line[0..len) is read */
    l = "{\"step\": 7}{\"step\": 8}";
    assert_int_equal(steps_parse_report(l, strlen("{\"step\": 7}"), &ev), 1);
    assert_int_equal(ev.step, 7);

    /* a report line is not output progress */
    expect_none("{\"step\": 10, \"samples\": 320, \"time\": 12.5}");
}

static void test_report_invalid(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "not json",
        "{\"samples\": 3, \"time\": 1.0}",
        "{\"step\": \"3\"}",
        "{\"step\": null}",
        "{\"step\": true}",
        "{\"step\": -1}",
        "{\"step\": 2.5}",
        "{\"step\": 3",
        "{\"step\": 3} trailing",
        "[1, 2]",
        "3",
        "{'step': 3}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct step_event ev;
        ev.source = STEP_REPORT;
        ev.step = 99;
        if (steps_parse_report(bad[i], strlen(bad[i]), &ev) != 0)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(ev.source, STEP_NONE);
        assert_int_equal(ev.step, -1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tqdm_rates),
        cmocka_unit_test(test_tqdm_unknown_total),
        cmocka_unit_test(test_tqdm_redraws),
        cmocka_unit_test(test_tqdm_other_bars),
        cmocka_unit_test(test_tqdm_units),
        cmocka_unit_test(test_tqdm_desc),
        cmocka_unit_test(test_tqdm_ranges),
        cmocka_unit_test(test_postfix_value),
        cmocka_unit_test(test_unit_is_data),
        cmocka_unit_test(test_coqui),
        cmocka_unit_test(test_not_progress),
        cmocka_unit_test(test_lightning_bars),
        cmocka_unit_test(test_hf_dicts),
        cmocka_unit_test(test_report_lines),
        cmocka_unit_test(test_report_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
