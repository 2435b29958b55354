/* SPDX-License-Identifier: MIT */
/*
 * steps: recognise training progress in a trial's output.
 *
 * Four kinds of evidence that a training step has completed:
 *   - progress bars: tqdm's, "desc:  40%|####      | 4/10 [00:01<00:02,
 *     2.50it/s, loss=0.1]", in any unit ("5.13s/update", "3.1step/s",
 *     "?batch/s"), with or without a total ("3it [00:00, 9.1it/s]"),
 *     redrawn with '\r', so each redraw arrives as one line; and Rich's,
 *     as Lightning's RichProgressBar draws it ("Epoch 0/9 ━━━ 4/10 0:00:01
 *     • 0:00:02 2.50it/s v_num: 0");
 *   - Coqui Trainer step lines, "   --> TIME: 2024-01-01 12:00:00 -- STEP:
 *     3/13 -- GLOBAL_STEP: 3", printed every print_step steps;
 *   - Hugging Face Trainer metric dicts printed with Python repr, either
 *     generation: floats ({'loss': 2.31, 'learning_rate': 5e-05,
 *     'epoch': 0.01}) or :.4g strings ({'loss': '2.31', ...}); the final
 *     summary dict (with 'train_runtime') marks the end of training;
 *   - AUTOBATCH_REPORT lines, JSON objects the trainer appends to the
 *     report file: {"step": N, "samples": S, "time": T} with optional
 *     "peak_mem_bytes".  These are authoritative when present.
 *
 * The module is pure: one line in, at most one event out.  It never prints
 * and keeps no state; which bar is the training bar is decided by
 * trainlog.h.  Every parser is bounded and linear in the line length, and
 * every count is range-checked: a count above STEPS_MAX is rejected, so a
 * number from the output can never size anything.
 */
#ifndef AB_STEPS_H
#define AB_STEPS_H

#include <stddef.h>

/** The largest step count or total taken from a line; larger is no step. */
#define STEPS_MAX 1000000000L

/** Sizes of the text fields of struct step_event, NUL included. */
#define STEPS_DESC_MAX 96
#define STEPS_UNIT_MAX 24

enum step_source {
    STEP_NONE = 0,
    STEP_TQDM,    /**< a progress bar (tqdm or Rich): step, desc, unit */
    STEP_HF_LOG,  /**< an HF metric dict with 'loss' (one logging step) */
    STEP_HF_DONE, /**< the HF summary dict (has 'train_runtime') */
    STEP_REPORT,  /**< an AUTOBATCH_REPORT JSON line */
    STEP_COQUI,   /**< a Coqui Trainer "--> ... STEP: a/b -- GLOBAL_STEP: g" line */
};

struct step_event {
    enum step_source source;
    long step;               /**< completed steps (bar n, Coqui GLOBAL_STEP + 1, report
                              *   step); -1 unknown */
    long total;              /**< a bar's total; -1 unknown or none */
    double rate_it_s;        /**< a bar's rate in its units a second ("s/unit"
                              *   converted); <0 unknown */
    double samples;          /**< report "samples"; <0 unknown */
    double time_s;           /**< report "time"; <0 unknown */
    long long peak_mem_bytes;/**< report "peak_mem_bytes"; -1 unknown */
    double hf_samples_per_s; /**< HF summary 'train_samples_per_second'; <0 unknown */
    /**
     * A bar's description: the text in front of its percentage (or of its
     * count when it has none), with ANSI escapes and control characters
     * left out, blanks and tqdm's ": " trimmed, cut to the first
     * STEPS_DESC_MAX - 1 bytes on a UTF-8 character boundary.  "" for an
     * undescribed bar (the Hugging Face Trainer's) and for other sources.
     */
    char desc[STEPS_DESC_MAX];
    /**
     * A bar's unit as its rate names it: "it" (tqdm's default), "update"
     * from "5.13s/update", "step", "batch", ...; a leading blank, as in
     * tqdm(unit=" examples"), is dropped.  "" for other sources.
     */
    char unit[STEPS_UNIT_MAX];
};

/**
 * Parse one line of the command's output (no line ending; need not be
 * NUL-terminated).  Returns 1 and fills *ev when the line is progress
 * evidence, else 0 (and ev->source = STEP_NONE).  Fields the line does not
 * give are left "unknown" (-1, or < 0 for doubles, "" for text).
 *
 * Bars (STEP_TQDM): every bar is reported with its desc and unit, the
 * training bar or not ("Loading checkpoint shards: ... 3/3 [...]",
 * "Sorting with sampler... : 100%|...| 400/400 [...]"); trainlog.h decides
 * which bar it follows.  step is the count n, total the total or -1 when
 * the bar has none ("Creating batches: 3it [00:00, 9.10it/s]", "12/?").
 * rate_it_s is in the bar's own unit per second ("5.13s/update" gives
 * 1/5.13), < 0 for "?it/s".  A line holding several redraws yields the
 * rightmost.  Not reported, because they count data and not steps:
 *   - bars with unit_scale counts ("1.2k/10.0k", "548M/548M"): tqdm rounds
 *     them to three digits, too coarse to count steps anyway;
 *   - bars whose unit is data throughput (steps_unit_is_data()): bytes
 *     ("212MB/s", "kB/s", "MiB/s", "B/s") and the Hugging Face datasets
 *     units ("examples/s", "ex/s", "ba/s").
 * A count or total above STEPS_MAX rejects the bar.
 *
 * Coqui (STEP_COQUI): "--> TIME: <date> -- STEP: a/b -- GLOBAL_STEP: g" or
 * "--> STEP: a/b -- GLOBAL_STEP: g", after any prefix that ends in a blank
 * or an ANSI colour sequence (Coqui prints bold "\033[1m" on terminals,
 * and "[1m" survives where the escape byte was stripped).  Coqui prints the
 * line after the step but before counting it (trainer.py: print_train_step
 * with total_steps_done, then total_steps_done += 1), so GLOBAL_STEP 0
 * follows the first completed step: step is g + 1, steps completed.
 * total is -1 (b is the epoch's last batch index, not a step total).  The
 * evaluation lines, "--> STEP: 3" without GLOBAL_STEP, are not steps.
 *
 * Hugging Face: the dict must run to the end of the line, after any
 * prefix.  'train_runtime' makes STEP_HF_DONE (hf_samples_per_s from
 * 'train_samples_per_second' when present); otherwise a numeric 'loss'
 * makes STEP_HF_LOG, with step -1 (the dicts carry no step number).
 * Eval dicts ('eval_loss' only) are not steps.
 */
int steps_parse_line(const char *line, size_t len, struct step_event *ev);

/**
 * The whole-number value of postfix key `key` of the bar on this line:
 * tqdm's "key=V" after the rate ("5.13s/update, loss=0.98, update=12]"
 * gives 12 for "update"), or Rich's "key: V" after the rate ("2.50it/s
 * v_num: 3" gives 3 for "v_num").  Returns -1 when the line holds no bar
 * (as steps_parse_line reads it), the bar has no such key, or the value
 * is not a whole number from 0 to STEPS_MAX ("loss=0.98").  The key must
 * match a whole postfix name: "update" does not match "num_update=3".
 */
long steps_postfix_value(const char *line, size_t len, const char *key);

/**
 * 1 when a bar's unit counts data rather than steps: bytes with or
 * without an SI or binary prefix (B, kB, KB, MB, GB, TB, KiB, MiB, GiB,
 * TiB, bytes, byte) and the units of Hugging Face datasets' map and
 * filter bars (examples, ex, ba).  Such bars are never training-step bars.
 * "samples" and "tokens" are not on the list: a preset may name such a bar
 * (trainlog.h leaves them out only when no preset rule names a bar).
 */
int steps_unit_is_data(const char *unit);

/**
 * Parse one line of the AUTOBATCH_REPORT file.  Returns 1 and fills *ev
 * (source STEP_REPORT) for a JSON object with a numeric "step", else 0
 * (and ev->source = STEP_NONE).  The step must be a whole number >= 0
 * (3 or 3.0).  "samples", "time" and "peak_mem_bytes" are optional; one
 * that is not a number >= 0 is left unknown without rejecting the line.
 */
int steps_parse_report(const char *line, size_t len, struct step_event *ev);

#endif
