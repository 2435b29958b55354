/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/trainlog.c: which lines of a trial's output are
 * training steps.  The lines are the real trainers' (F5-TTS's trainer.py
 * and dataset.py, Coqui's console_logger.py, Parler-TTS's
 * run_parler_tts_training.py, the Hugging Face Trainer's tqdm bar,
 * Lightning's TQDM and Rich bars), fed in the order the trainers print
 * them; each test checks the count a trial would see.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainlog.h"

#define FULL "\xe2\x96\x88"
#define BAR10 FULL FULL FULL FULL FULL FULL FULL FULL FULL FULL
#define RICH "\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81\xe2\x94\x81"
#define BULLET " \xe2\x80\xa2 "

/* F5-TTS 1.1.22, src/f5_tts/model/dataset.py (DynamicBatchSampler) */
#define F5_SORT "Sorting with sampler... if slow, check whether dataset is provided with duration"
#define F5_CREATE "Creating dynamic batches with 38400 audio frames per gpu"

static double clock_s;

/* Feed one line; returns the count after it, and checks that the return
 * value says whether it grew. */
static long feed(struct trainlog *tl, const char *line)
{
    long before = tl->step, step = -7;
    double rate = 99;
    clock_s += 0.5;
    int grew = trainlog_line(tl, line, strlen(line), clock_s, &step, &rate);
    assert_int_equal(step, tl->step);
    assert_int_equal(grew, step > before);
    assert_true(step >= before);
    if (!grew)
        assert_true(rate < 0);
    return step;
}

/* Feed a line that must not grow the count. */
static void feed_none(struct trainlog *tl, const char *line)
{
    long before = tl->step;
    if (feed(tl, line) != before)
        fail_msg("counted as a training step (%ld -> %ld): \"%s\"", before, tl->step, line);
}

static void init(struct trainlog *tl, const char *bar, const char *unit, const char *postfix,
                 const char *line)
{
    struct trainlog_rules r = { bar, unit, postfix, line };
    char err[256] = "";
    if (trainlog_init(tl, &r, err, sizeof err) != 0)
        fail_msg("trainlog_init: %s", err);
}

static void expect_describe(const struct trainlog *tl, const char *needle)
{
    char buf[1024];
    trainlog_describe(tl, buf, sizeof buf);
    if (!strstr(buf, needle))
        fail_msg("describe says \"%s\", want it to hold \"%s\"", buf, needle);
}

/* The F5-TTS run of issue 9: the data preparation bars must not count,
 * the "update" bar must. */
static void test_f5_no_rules(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);

    feed_none(&tl, F5_SORT ":   0%|          | 0/400 [00:00<?, ?it/s]");
    feed_none(&tl, F5_SORT ":  62%|" FULL FULL FULL FULL FULL FULL "    | 250/400 [00:00<00:00, "
                   "1788615.78it/s]");
    feed_none(&tl, F5_SORT ": 100%|" BAR10 "| 400/400 [00:00<00:00, 1788615.78it/s]");
    feed_none(&tl, F5_CREATE ":   0%|          | 0/400 [00:00<?, ?it/s]");
    feed_none(&tl, F5_CREATE ":  62%|" FULL FULL FULL FULL FULL FULL "    | 250/400 [00:00<00:00, "
                   "2500.00it/s]");
    feed_none(&tl, F5_CREATE ": 100%|" BAR10 "| 400/400 [00:00<00:00, 2718.12it/s]");
    assert_int_equal(tl.step, 0);
    expect_describe(&tl, "2 progress bars seen, none of them training");
    expect_describe(&tl, "'Sorting with sampler... if slow, check...' is data preparation "
                         "(400/400 it)");
    expect_describe(&tl, "'Creating dynamic batches with 38400 audio...' is data "
                         "preparation (400/400 it)");

    /* trainer.py: tqdm(desc=f"Epoch {epoch + 1}/{self.epochs}", unit="update"),
     * set_postfix(update=str(global_update), loss=loss.item()), keys sorted */
    feed_none(&tl, "Epoch 1/100:   0%|          | 0/10 [00:00<?, ?update/s]");
    long step = -1;
    double rate = -1;
    const char *l = "Epoch 1/100:  10%|" FULL "         | 1/10 [00:05<00:46,  5.13s/update, "
                    "loss=0.98, update=1]";
    assert_int_equal(trainlog_line(&tl, l, strlen(l), 10.0, &step, &rate), 1);
    assert_int_equal(step, 1);
    assert_true(fabs(rate - 1 / 5.13) < 1e-9);
    assert_int_equal(feed(&tl, "Epoch 1/100:  20%|" FULL FULL "        | 2/10 [00:10<00:41,  "
                               "5.13s/update, loss=0.98, update=2]"),
                     2);
    assert_int_equal(tl.start, 0);
    expect_describe(&tl, "2 training steps seen, from the bar 'Epoch 1/100' (unit 'update')");
    trainlog_release(&tl);
}

/* The F5 preset's rules: the postfix carries the global count across the
 * bar drawn anew each epoch. */
static void test_f5_rules_epochs(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, "Epoch", "update", "update", NULL);
    char line[256];

    feed_none(&tl, F5_CREATE ": 100%|" BAR10 "| 400/400 [00:00<00:00, 2718.12it/s]");
    /* a bar in another unit that says Epoch is not it */
    feed_none(&tl, "Epoch 1/100:  50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:01<00:01, "
                   " 5.00it/s]");
    feed_none(&tl, "Epoch 1/100:  60%|" FULL FULL FULL FULL FULL FULL "    | 6/10 [00:01<00:01, "
                   " 5.00it/s]");
    for (int epoch = 1; epoch <= 3; epoch++) {
        snprintf(line, sizeof line, "Epoch %d/100:   0%%|          | 0/4 [00:00<?, ?update/s]",
                 epoch);
        feed_none(&tl, line);
        for (int n = 1; n <= 4; n++) {
            long global = (epoch - 1) * 4 + n;
            snprintf(line, sizeof line,
                     "Epoch %d/100:  %d%%|" FULL "    | %d/4 [00:05<00:10,  5.13s/update, "
                     "loss=0.98, update=%ld]",
                     epoch, n * 25, n, global);
            assert_int_equal(feed(&tl, line), global);
        }
    }
    assert_int_equal(tl.step, 12);
    trainlog_release(&tl);
}

/* Without a postfix a bar drawn anew each epoch carries its count on. */
static void test_epoch_bars_accumulate(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, "update", NULL, NULL);
    feed_none(&tl, "Epoch 1/100:   0%|          | 0/2 [00:00<?, ?update/s]");
    /* two updates an epoch, drawn only at the start and the end (fast) */
    feed_none(&tl, "Epoch 1/100: 100%|" BAR10 "| 2/2 [00:00<00:00,  9.10update/s]");
    /* epoch 2 drawn anew: the first bar was training after all */
    assert_int_equal(feed(&tl, "Epoch 2/100:   0%|          | 0/2 [00:00<?, ?update/s]"), 2);
    assert_int_equal(feed(&tl, "Epoch 2/100:  50%|" FULL FULL FULL FULL FULL "     | 1/2 "
                               "[00:00<00:00,  9.10update/s]"),
                     3);
    assert_int_equal(feed(&tl, "Epoch 2/100: 100%|" BAR10 "| 2/2 [00:00<00:00,  9.10update/s]"),
                     4);
    assert_int_equal(feed(&tl, "Epoch 3/100:  50%|" FULL FULL FULL FULL FULL "     | 1/2 "
                               "[00:00<00:00,  9.10update/s]"),
                     5);
    trainlog_release(&tl);
}

/* A resumed F5 run: the bar starts at its checkpoint's count. */
static void test_resumed_start(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, "Epoch", "update", "update", NULL);
    feed_none(&tl, "Epoch 3/100:  50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:00<?, "
                   "?update/s]");
    assert_int_equal(feed(&tl, "Epoch 3/100:  60%|" FULL FULL FULL FULL FULL FULL "    | 6/10 "
                               "[00:05<00:20,  5.13s/update, loss=0.9, update=26]"),
                     26);
    assert_int_equal(tl.start, 25);
    expect_describe(&tl, "counting on from step 25");
    trainlog_release(&tl);
}

/* Rule (b): a bar that is not known preparation but finishes before any
 * training step never counts. */
static void test_finished_before_training(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    feed_none(&tl, "Grouping by length:   0%|          | 0/400 [00:00<?, ?it/s]");
    feed_none(&tl, "Grouping by length: 100%|" BAR10 "| 400/400 [00:00<00:00, 51234.50it/s]");
    expect_describe(&tl, "1 progress bar seen, none of them training ('Grouping by length' "
                         "finished 400/400 before any training step)");
    feed_none(&tl, "Training:   0%|          | 0/1000 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, "Training:   0%|          | 1/1000 [00:01<16:39,  1.00it/s]"), 1);
    assert_int_equal(feed(&tl, "Training:   0%|          | 2/1000 [00:02<16:38,  1.00it/s]"), 2);
    trainlog_release(&tl);
}

/* Coqui prints STEP lines, bold on terminals; GLOBAL_STEP 0 follows the
 * first step.  Evaluation STEP lines and epoch summaries are not steps. */
static void test_coqui(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    feed_none(&tl, "\x1b[4m\x1b[1m > EPOCH: 0/999\x1b[0m");
    feed_none(&tl, "\x1b[1m > TRAINING (2024-01-01 12:00:00) \x1b[0m");
    assert_int_equal(feed(&tl, "\x1b[1m   --> TIME: 2024-01-01 12:00:01 -- STEP: 0/12 -- "
                               "GLOBAL_STEP: 0\x1b[0m"),
                     1);
    feed_none(&tl, "     | > loss: 3.21  (3.21)");
    feed_none(&tl, "     | > step_time: 0.52  (0.52)");
    assert_int_equal(feed(&tl, "[1m   --> TIME: 2024-01-01 12:00:02 -- STEP: 1/12 -- "
                               "GLOBAL_STEP: 1[0m"),
                     2);
    assert_int_equal(feed(&tl, "   --> STEP: 2/12 -- GLOBAL_STEP: 2"), 3);
    feed_none(&tl, "\x1b[1m   --> STEP: 3\x1b[0m");
    feed_none(&tl, "\x1b[1m   --> TRAIN PERFORMACE -- EPOCH TIME: 12.31 sec -- GLOBAL_STEP: 13"
                   "\x1b[0m");
    /* once Coqui lines are followed, bars do not count */
    feed_none(&tl, " 50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:05<00:05,  1.00it/s]");
    feed_none(&tl, " 60%|" FULL FULL FULL FULL FULL FULL "    | 6/10 [00:06<00:04,  1.00it/s]");
    assert_int_equal(tl.step, 3);
    expect_describe(&tl, "3 training steps seen, from Coqui STEP lines");
    trainlog_release(&tl);
}

/* Parler-TTS: an undescribed audio-encoding bar runs before the training
 * bar "Train steps ... ".  The Parler preset names its bar. */
static void test_parler_rules(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, "Train steps", NULL, NULL, NULL);
    feed_none(&tl, "preprocess datasets: 100%|" BAR10 "| 64/64 [00:00<00:00, 803.21 examples/s]");
    feed_none(&tl, "  0%|          | 0/16 [00:00<?, ?it/s]");
    feed_none(&tl, " 19%|" FULL "         | 3/16 [00:04<00:12,  1.50s/it]");
    feed_none(&tl, " 25%|" FULL FULL "        | 4/16 [00:06<00:19,  1.50s/it]");
    feed_none(&tl, "100%|" BAR10 "| 16/16 [00:24<00:00,  1.50s/it]");
    expect_describe(&tl, "an undescribed bar (unit 'it') is not the bar the preset names");
    feed_none(&tl, "Train steps ... :   0%|          | 0/1000 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, "Train steps ... :   0%|          | 1/1000 [00:02<33:18,  "
                               "2.00s/it]"),
                     1);
    assert_int_equal(feed(&tl, "Train steps ... :   0%|          | 2/1000 [00:04<33:16,  "
                               "2.00s/it]"),
                     2);
    trainlog_release(&tl);
}

/* Without rules the undescribed encoding bar is followed (it cannot be
 * told from the Hugging Face Trainer's); when it finishes and the real
 * training bar advances, that one takes over and the encoding bar's steps
 * are withdrawn: the count waits until training passes them. */
static void test_parler_no_rules(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    char line[128];
    feed_none(&tl, "  0%|          | 0/4 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, " 25%|" FULL FULL "        | 1/4 [00:01<00:04,  1.50s/it]"), 1);
    assert_int_equal(feed(&tl, "100%|" BAR10 "| 4/4 [00:06<00:00,  1.50s/it]"), 4);
    feed_none(&tl, "Train steps ... :   0%|          | 0/1000 [00:00<?, ?it/s]");
    for (int n = 1; n <= 4; n++) {
        snprintf(line, sizeof line, "Train steps ... :   0%%|          | %d/1000 [00:02<33:18,  "
                                    "2.00s/it]", n);
        feed_none(&tl, line);
    }
    assert_int_equal(feed(&tl, "Train steps ... :   0%|          | 5/1000 [00:10<33:10,  "
                               "2.00s/it]"),
                     5);
    trainlog_release(&tl);
}

/* The Hugging Face Trainer: one undescribed bar for the whole training,
 * an undescribed evaluation bar inside it, metric dicts now and then. */
static void test_hf_trainer(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    feed_none(&tl, "Loading checkpoint shards: 100%|" BAR10 "| 3/3 [00:02<00:00,  1.20it/s]");
    feed_none(&tl, "Map: 100%|" BAR10 "| 1000/1000 [00:00<00:00, 12345.67 examples/s]");
    feed_none(&tl, "  0%|          | 0/100 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, "  3%|\xe2\x96\x8e         | 3/100 [00:02<01:05,  1.49it/s]"), 3);
    /* evaluation inside training: another undescribed bar, not followed */
    feed_none(&tl, "\n  0%|          | 0/8 [00:00<?, ?it/s]");
    feed_none(&tl, " 50%|" FULL FULL FULL FULL FULL "     | 4/8 [00:00<00:00, 20.00it/s]");
    feed_none(&tl, "{'eval_loss': 2.1234, 'eval_runtime': 3.21, 'epoch': 0.05}");
    /* a metric dict does not add to the bar's count */
    feed_none(&tl, "{'loss': 2.3114, 'grad_norm': 1.2345, 'learning_rate': 5e-05, 'epoch': 0.01}");
    assert_int_equal(feed(&tl, "  4%|\xe2\x96\x8d         | 4/100 [00:03<01:04,  1.49it/s]"), 4);
    trainlog_release(&tl);
}

/* With the bar disabled (disable_tqdm=True) the dicts count, and a bar
 * that shows up later takes over without counting less. */
static void test_hf_dicts_then_bar(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    assert_int_equal(feed(&tl, "{'loss': '2.311', 'learning_rate': '5e-05', 'epoch': '0.01'}"), 1);
    assert_int_equal(feed(&tl, "{'loss': '2.101', 'learning_rate': '5e-05', 'epoch': '0.02'}"), 2);
    expect_describe(&tl, "2 training steps seen, from Hugging Face metric dicts");
    feed_none(&tl, "  0%|          | 0/100 [00:00<?, ?it/s]");
    feed_none(&tl, "  2%|\xe2\x96\x8f         | 2/100 [00:02<01:05,  1.49it/s]");
    assert_int_equal(feed(&tl, "  3%|\xe2\x96\x8e         | 3/100 [00:02<01:05,  1.49it/s]"), 3);
    /* now the bar is followed, and dicts no longer count */
    feed_none(&tl, "{'loss': '1.901', 'learning_rate': '5e-05', 'epoch': '0.03'}");
    feed_none(&tl, "{'loss': '1.801', 'learning_rate': '5e-05', 'epoch': '0.03'}");
    trainlog_release(&tl);
}

/* A preset that names the undescribed bar: described bars do not count. */
static void test_rule_undescribed_bar(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, "", "it", NULL, NULL);
    feed_none(&tl, "Training:   0%|          | 0/100 [00:00<?, ?it/s]");
    feed_none(&tl, "Training:   1%|          | 1/100 [00:00<00:50,  2.00it/s]");
    feed_none(&tl, "Training:   2%|          | 2/100 [00:01<00:50,  2.00it/s]");
    feed_none(&tl, "  0%|          | 0/100 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, "  1%|          | 1/100 [00:00<00:50,  2.00it/s]"), 1);
    trainlog_release(&tl);
}

/* Lightning's TQDM bar: the sanity check and validation are not training;
 * the epoch bar is drawn anew each epoch. */
static void test_lightning_tqdm(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    feed_none(&tl, "Sanity Checking DataLoader 0:  50%|" FULL FULL FULL FULL FULL "     | 1/2 "
                   "[00:00<00:00,  9.50it/s]");
    feed_none(&tl, "Sanity Checking DataLoader 0: 100%|" BAR10 "| 2/2 [00:00<00:00,  9.50it/s]");
    feed_none(&tl, "Epoch 0:   0%|          | 0/10 [00:00<?, ?it/s]");
    assert_int_equal(feed(&tl, "Epoch 0:  10%|" FULL "         | 1/10 [00:00<00:04,  2.50it/s, "
                               "v_num=0]"),
                     1);
    assert_int_equal(feed(&tl, "Epoch 0:  40%|" FULL FULL FULL FULL "      | 4/10 [00:01<00:02, "
                               " 2.50it/s, v_num=0, train_loss=1.23]"),
                     4);
    assert_int_equal(feed(&tl, "Epoch 0: 100%|" BAR10 "| 10/10 [00:04<00:00,  2.50it/s, v_num=0, "
                               "train_loss=1.10]"),
                     10);
    feed_none(&tl, "Validation DataLoader 0:  50%|" FULL FULL FULL FULL FULL "     | 1/2 "
                   "[00:00<00:00,  9.50it/s]");
    feed_none(&tl, "Validation DataLoader 0: 100%|" BAR10 "| 2/2 [00:00<00:00,  9.50it/s]");
    feed_none(&tl, "Epoch 1:   0%|          | 0/10 [00:00<?, ?it/s, v_num=0, train_loss=1.10]");
    assert_int_equal(feed(&tl, "Epoch 1:  10%|" FULL "         | 1/10 [00:00<00:04,  2.50it/s, "
                               "v_num=0, train_loss=1.05]"),
                     11);
    trainlog_release(&tl);
}

/* Lightning's RichProgressBar */
static void test_lightning_rich(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    feed_none(&tl, "Epoch 0/9  " RICH " 3/10 0:00:01" BULLET "0:00:02 2.50it/s v_num: 0");
    long step;
    double rate;
    const char *l = "Epoch 0/9  " RICH " 4/10 0:00:01" BULLET "0:00:02 2.50it/s v_num: 0";
    assert_int_equal(trainlog_line(&tl, l, strlen(l), 3.0, &step, &rate), 1);
    assert_int_equal(step, 4);
    assert_true(fabs(rate - 2.5) < 1e-9);
    expect_describe(&tl, "from the bar 'Epoch 0/9' (unit 'it')");
    trainlog_release(&tl);
}

/* A preset's line pattern: only matching lines count (the lines are
 * PyTorch's examples/word_language_model/main.py). */
static void test_line_rule(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, "^\\| epoch +[0-9]+ \\| +([0-9]+)/ *[0-9]+ batches");
    feed_none(&tl, " 50%|" FULL FULL FULL FULL FULL "     | 5/10 [00:05<00:05,  1.00it/s]");
    feed_none(&tl, " 60%|" FULL FULL FULL FULL FULL FULL "    | 6/10 [00:06<00:04,  1.00it/s]");
    feed_none(&tl, "   --> STEP: 2/12 -- GLOBAL_STEP: 2");
    expect_describe(&tl, "no line matched the preset's step pattern");
    expect_describe(&tl, "(1 progress bar seen, which do not count");
    assert_int_equal(feed(&tl, "| epoch   1 |   200/ 2983 batches | lr 20.00 | ms/batch 5.11 | "
                               "loss  7.63 | ppl  2058.06"), 200);
    assert_int_equal(feed(&tl, "| epoch   1 |   400/ 2983 batches | lr 5.00 | ms/batch 5.00"), 400);
    feed_none(&tl, "| epoch   1 |   400/ 2983 batches | lr 5.00 | ms/batch 5.00");
    /* a number too large to be a step is no step */
    feed_none(&tl, "| epoch   1 |   99999999999/ 2983 batches");
    expect_describe(&tl, "400 training steps seen, from lines matching the preset's step pattern");
    trainlog_release(&tl);
}

static void test_bad_rules(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    char err[256];
    struct trainlog_rules bad = { NULL, NULL, NULL, "step ([0-9]+" };
    assert_int_equal(trainlog_init(&tl, &bad, err, sizeof err), -1);
    assert_non_null(strstr(err, "bad step pattern 'step ([0-9]+': "));
    trainlog_release(&tl);

    struct trainlog_rules nogroup = { NULL, NULL, NULL, "step [0-9]+" };
    assert_int_equal(trainlog_init(&tl, &nogroup, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs a group"));
    trainlog_release(&tl);

    /* no rules at all, and a zero-sized error buffer, are fine */
    assert_int_equal(trainlog_init(&tl, NULL, NULL, 0), 0);
    trainlog_release(&tl);
    trainlog_release(&tl);
}

static void test_describe_bounds(void **state)
{
    (void)state;
    struct trainlog tl = TRAINLOG_INIT;
    init(&tl, NULL, NULL, NULL, NULL);
    char buf[1024];
    trainlog_describe(&tl, buf, sizeof buf);
    assert_string_equal(buf, "no progress bar, Coqui STEP line or Hugging Face metric dict seen");

    /* more bars than are kept: none of them is lost from the count */
    char line[160];
    for (int i = 0; i < 40; i++) {
        snprintf(line, sizeof line, "Downloading shard %c%c: 100%%|" BAR10 "| 2/2 [00:00<00:00, "
                                    " 9.00it/s]", 'a' + i % 26, 'a' + i / 26);
        feed_none(&tl, line);
    }
    expect_describe(&tl, "40 progress bars seen, none of them training ('Downloading shard");
    expect_describe(&tl, "; 36 more)");

    /* a small buffer is cut and terminated */
    memset(buf, 'x', sizeof buf);
    trainlog_describe(&tl, buf, 16);
    assert_int_equal(strlen(buf), 15);
    assert_int_equal(buf[17], 'x');
    trainlog_release(&tl);
}

static void test_desc_not_training(void **state)
{
    (void)state;
    enum trainlog_why why;
    assert_true(trainlog_desc_not_training("Loading checkpoint shards", &why));
    assert_int_equal(why, TRAINLOG_PREPARATION);
    assert_true(trainlog_desc_not_training("Map (num_proc=4)", &why));
    assert_true(trainlog_desc_not_training("tokenizing train split", &why));
    assert_true(trainlog_desc_not_training("Resampling audio", &why));
    assert_true(trainlog_desc_not_training("Validation DataLoader 0", &why));
    assert_int_equal(why, TRAINLOG_EVALUATION);
    assert_true(trainlog_desc_not_training("Evaluating - Generation ...", &why));
    assert_false(trainlog_desc_not_training("Epoch 1/100", &why));
    assert_false(trainlog_desc_not_training("Train steps ... ", &why));
    assert_false(trainlog_desc_not_training("bitmap training", &why));
    assert_false(trainlog_desc_not_training("", &why));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f5_no_rules),
        cmocka_unit_test(test_f5_rules_epochs),
        cmocka_unit_test(test_epoch_bars_accumulate),
        cmocka_unit_test(test_resumed_start),
        cmocka_unit_test(test_finished_before_training),
        cmocka_unit_test(test_coqui),
        cmocka_unit_test(test_parler_rules),
        cmocka_unit_test(test_parler_no_rules),
        cmocka_unit_test(test_hf_trainer),
        cmocka_unit_test(test_hf_dicts_then_bar),
        cmocka_unit_test(test_rule_undescribed_bar),
        cmocka_unit_test(test_lightning_tqdm),
        cmocka_unit_test(test_lightning_rich),
        cmocka_unit_test(test_line_rule),
        cmocka_unit_test(test_bad_rules),
        cmocka_unit_test(test_describe_bounds),
        cmocka_unit_test(test_desc_not_training),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
