/* SPDX-License-Identifier: MIT */
/*
 * trainlog: tell a trial's training steps from everything else it prints.
 *
 * steps.h reads one line at a time and reports every progress bar it
 * sees.  A training command also draws bars that are not training: data
 * preparation (F5-TTS's "Sorting with sampler... : 100%|...| 400/400"),
 * checkpoint loading, evaluation.  Counting those as steps turns a trial
 * that never trained into a "fit".  trainlog keeps the state of one trial's
 * output and decides, line by line, which evidence is the training step
 * count, so that the count it hands out only ever grows and never holds a
 * preparation bar's steps.
 *
 * Life cycle, for one trial:
 *   1. struct trainlog tl = TRAINLOG_INIT;
 *   2. trainlog_init(&tl, &rules, err, sizeof err) with the preset's
 *      rules (or NULL for none).  It copies what it keeps; the rules may
 *      be freed afterwards.  On -1 (a bad regular expression, or out of
 *      memory) err says why and tl needs no release, though one is fine.
 *   3. trainlog_line(&tl, line, len, now, &step, &rate) for every line of
 *      the trial's output, in order, stdout and stderr alike.
 *   4. When the trial ended with no training step, trainlog_describe()
 *      says what was seen, for the message that tells the user.
 *   5. trainlog_release(&tl); the struct may be initialised again.
 *
 * What counts as a training step:
 *   - With a `line` rule: only lines the regular expression matches; its
 *     first group is the global step number.  Nothing else counts.
 *   - With `bar` and/or `unit` rules: only bars that match all given
 *     rules.  The step is the `postfix` key's value when that rule is
 *     given and the line has the key, else the bar's count.
 *   - Without rules: Coqui STEP lines, Hugging Face metric dicts (each one
 *     counts one), and progress bars other than these, which are never
 *     training:
 *       (a) preparation and evaluation bars, told by a word in the
 *           description (trainlog_desc_not_training()) or by a unit that
 *           counts data (steps_unit_is_data(), "samples", "tokens");
 *       (b) bars that finish (count == total) before any training step:
 *           a bar is only followed once a draw shows it advancing while
 *           unfinished, so a bar that jumps from 0/400 to 400/400 never
 *           is, and its steps never reach the count.
 *     The first source that shows a training step is kept for the rest
 *     of the trial, except that a bar replaces HF metric dicts (both
 *     come from the Hugging Face Trainer; the bar counts every step).
 *
 * Which bar is followed (with bar/unit rules or without rules):
 *   - A bar is identified by its description with digit runs folded
 *     ("Epoch 1/100" and "Epoch 2/100" are one bar, drawn anew each
 *     epoch), its unit and its total.
 *   - A bar becomes the training bar when a draw shows it past the count
 *     of its first draw and short of its total, or when it starts over
 *     (a count lower than its last one).  The first such bar is followed.
 *     Another bar never takes over while the followed one is unfinished
 *     (the Hugging Face Trainer's evaluation bar runs inside training).
 *   - A followed bar that starts over carries its count on: epoch bars
 *     give the global count (10 updates an epoch: epoch 2's 3/10 is 13).
 *   - When the followed bar has finished and another bar advances, that
 *     one is followed and the finished bar's steps are withdrawn: the
 *     count does not grow until the new bar's count passes it.
 *   - An undescribed bar (no text before its percentage: the Hugging Face
 *     Trainer's, but also Parler-TTS's audio encoding "3/16 [..., 1.50s/it]")
 *     is followed like any other.  Ignoring it would make every trainer
 *     that prints a plain bar look like it never trains; a preprocessing
 *     bar without a description, seen in progress, cannot be told from a
 *     training bar.  A preset for such a trainer names its bar.
 *
 * The step count is global, as the trainer prints it: a trainer resumed
 * from a checkpoint starts high.  `start` tells what the count was before
 * the first step seen in this trial.  No number from the output sizes
 * anything: counts above STEPS_MAX are not read, and the bars kept are
 * at most TRAINLOG_BARS.
 */
#ifndef AB_TRAINLOG_H
#define AB_TRAINLOG_H

#include <regex.h>
#include <stddef.h>

#include "steps.h"

/** How a trainer marks its training steps; from the preset.  All optional. */
struct trainlog_rules {
    /** a substring of the training bar's description; "" names the bar
     *  with no description (the Hugging Face Trainer's) */
    const char *bar;
    /** the training bar's unit, e.g. "update" (whole word, as steps.h reads it) */
    const char *unit;
    /** the postfix key that holds the global step, e.g. "update" */
    const char *postfix;
    /** POSIX extended regular expression; its first group is the global step */
    const char *line;
};

/** How many distinct bars a trial keeps track of; the least recently drawn
 *  one not followed makes room for a new one. */
#define TRAINLOG_BARS 16

/** Why a bar is not the training bar. */
enum trainlog_why {
    TRAINLOG_CANDIDATE = 0, /**< could be training; has not advanced (yet) */
    TRAINLOG_FOLLOWED,      /**< the training bar */
    TRAINLOG_PREPARATION,   /**< its description or unit says data preparation */
    TRAINLOG_EVALUATION,    /**< its description says evaluation */
    TRAINLOG_UNRULED,       /**< not the bar the preset's rules name */
    TRAINLOG_FINISHED,      /**< finished before any training step */
    TRAINLOG_WITHDRAWN,     /**< was followed, finished, and another bar took over */
};

/** One bar as trainlog remembers it (internal; read by trainlog_describe). */
struct trainlog_bar {
    char key[STEPS_DESC_MAX];  /**< description with digit runs folded to '#' */
    char desc[STEPS_DESC_MAX]; /**< description as last drawn */
    char unit[STEPS_UNIT_MAX];
    long total;                /**< -1 when the bar has none */
    long first_n;              /**< count at its first draw */
    long n;                    /**< count at its last draw */
    long base;                 /**< counts carried over from its restarts */
    unsigned long last_seen;   /**< draw sequence number, for eviction */
    int restarted;             /**< it started over at least once */
    int finished;              /**< its last draw had count >= total */
    enum trainlog_why why;
};

/** The evidence a trial's count comes from. */
enum trainlog_source {
    TRAINLOG_NONE = 0,
    TRAINLOG_SRC_BAR,   /**< a progress bar */
    TRAINLOG_SRC_COQUI, /**< Coqui STEP lines */
    TRAINLOG_SRC_HF,    /**< Hugging Face metric dicts */
    TRAINLOG_SRC_LINE,  /**< the preset's line pattern */
};

struct trainlog {
    /* the rules, copied; NULL when not given */
    char *bar, *unit, *postfix, *line;
    regex_t re;         /**< compiled `line`, when have_re */
    int have_re;
    char *buf;          /**< NUL-terminated copy of a line, for regexec */
    size_t buf_alloc;

    struct trainlog_bar bars[TRAINLOG_BARS];
    size_t nbars;
    int followed;       /**< index into bars, -1 for none */
    unsigned long draws;      /**< bar lines seen */
    long bars_seen;     /**< distinct bars seen (one evicted and seen again counts twice) */
    long lines_matched; /**< lines the `line` pattern matched */
    long hf_dicts;      /**< HF metric dicts seen */
    long coqui_lines;   /**< Coqui STEP lines seen */

    enum trainlog_source source; /**< what the count follows */
    /** The training step count handed out so far (global, monotone); 0
     *  before the first training step.  Read-only for callers. */
    long step;
    /** What the count was before the first step seen in this trial (a
     *  resumed trainer's bar starts at its checkpoint's step); -1 until
     *  a training step was seen.  Read-only for callers. */
    long start;
    double first_at, last_at; /**< `now` of the first and last training step */
};

#define TRAINLOG_INIT { 0 }

/**
 * Set tl up for one trial with `rules` (NULL or all-NULL: no rules).
 * Returns 0, or -1 with a message in err (errlen bytes, may be 0) when
 * the `line` pattern does not compile or has no group, or memory runs
 * out.  A bad pattern's message reads "bad step pattern '...': ...".
 */
int trainlog_init(struct trainlog *tl, const struct trainlog_rules *rules, char *err,
                  size_t errlen);

/**
 * Take one line of the trial's output (no line end; need not be
 * NUL-terminated) at time `now` (seconds, monotonic).  Returns 1 when the
 * training step count grew, with *step the new count and *rate_it_s the
 * bar's rate in steps per second (< 0 unknown, and always for lines and
 * dicts); else 0, with *step the count so far and *rate_it_s -1.
 * step and rate_it_s may be NULL.
 */
int trainlog_line(struct trainlog *tl, const char *line, size_t len, double now, long *step,
                  double *rate_it_s);

/**
 * Write what was seen into buf (len bytes, always NUL-terminated when len
 * > 0), for a message such as "no training step seen: 2 progress bars,
 * none of them training ('Sorting with sampler...' finished 400/400 before
 * any training step; 'Creating dynamic batches with # audio...' is data
 * preparation)".  When steps were seen it says how many and from what.
 * Lowercase, no final period, as messages are.
 */
void trainlog_describe(const struct trainlog *tl, char *buf, size_t len);

/**
 * 1 when a bar with this description is never a training bar without
 * rules, setting *why to TRAINLOG_PREPARATION or TRAINLOG_EVALUATION.
 * A word of the description (case-insensitive, at the start of a word)
 * begins with one of: Sorting, Creating, Loading, Map, Filter,
 * Downloading, Resolving, Generating, Tokeniz, Preprocess, Encoding,
 * Fetching, Extracting, Computing, Casting, Saving, Resampl, Preparing
 * (preparation; "Loading checkpoint shards" is one of them); Validat,
 * Eval, Sanity, Testing, Predict, Inference (evaluation: Lightning's
 * "Validation DataLoader 0" and "Sanity Checking", "Evaluating").
 */
int trainlog_desc_not_training(const char *desc, enum trainlog_why *why);

/** Free what tl holds; TRAINLOG_INIT or a failed init are fine. */
void trainlog_release(struct trainlog *tl);

#endif
