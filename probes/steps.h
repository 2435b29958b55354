/*
 * steps: recognise training progress in a trial's output.
 *
 * Three kinds of evidence that a training step has completed:
 *   - tqdm progress bars, "  3/10 [00:02<00:05,  1.40it/s]" (or "s/it",
 *     or "?it/s"), redrawn with '\r', so each redraw arrives as one line;
 *   - Hugging Face Trainer metric dicts printed with Python repr, either
 *     generation: floats ({'loss': 2.31, 'learning_rate': 5e-05,
 *     'epoch': 0.01}) or :.4g strings ({'loss': '2.31', ...}); the final
 *     summary dict (with 'train_runtime') marks the end of training;
 *   - AUTOBATCH_REPORT lines, JSON objects the trainer appends to the
 *     report file: {"step": N, "samples": S, "time": T} with optional
 *     "peak_mem_bytes".  These are authoritative when present.
 *
 * The module is pure: one line in, at most one event out.  It never prints.
 */
#ifndef AB_STEPS_H
#define AB_STEPS_H

#include <stddef.h>

enum step_source {
    STEP_NONE = 0,
    STEP_TQDM,    /**< a tqdm bar: step and total known */
    STEP_HF_LOG,  /**< an HF metric dict with 'loss' (one logging step) */
    STEP_HF_DONE, /**< the HF summary dict (has 'train_runtime') */
    STEP_REPORT,  /**< an AUTOBATCH_REPORT JSON line */
};

struct step_event {
    enum step_source source;
    long step;               /**< completed steps (tqdm n, report step); -1 unknown */
    long total;              /**< tqdm total; -1 unknown */
    double rate_it_s;        /**< tqdm rate in it/s (s/it converted); <0 unknown */
    double samples;          /**< report "samples"; <0 unknown */
    double time_s;           /**< report "time"; <0 unknown */
    long long peak_mem_bytes;/**< report "peak_mem_bytes"; -1 unknown */
    double hf_samples_per_s; /**< HF summary 'train_samples_per_second'; <0 unknown */
};

/**
 * Parse one line of the command's output (no line ending; need not be
 * NUL-terminated).  Returns 1 and fills *ev when the line is progress
 * evidence, else 0 (and ev->source = STEP_NONE).  Fields the line does not
 * give are left "unknown" (-1, or < 0 for doubles).
 *
 * tqdm: any bar counting "it" is reported, the training bar or not
 * ("Loading checkpoint shards: ... 3/3 [...]"); the caller decides which
 * bar it follows.  A line holding several redraws yields the rightmost.
 * Bars with unit_scale counts ("1.2k/10.0k") are ignored: tqdm rounds them
 * to three digits, too coarse to count steps; so are bars in other units
 * ("examples/s", "MB/s").
 *
 * Hugging Face: the dict must run to the end of the line, after any
 * prefix.  'train_runtime' makes STEP_HF_DONE (hf_samples_per_s from
 * 'train_samples_per_second' when present); otherwise a numeric 'loss'
 * makes STEP_HF_LOG, with step -1 (the dicts carry no step number).
 * Eval dicts ('eval_loss' only) are not steps.
 */
int steps_parse_line(const char *line, size_t len, struct step_event *ev);

/**
 * Parse one line of the AUTOBATCH_REPORT file.  Returns 1 and fills *ev
 * (source STEP_REPORT) for a JSON object with a numeric "step", else 0
 * (and ev->source = STEP_NONE).  The step must be a whole number >= 0
 * (3 or 3.0).  "samples", "time" and "peak_mem_bytes" are optional; one
 * that is not a number >= 0 is left unknown without rejecting the line.
 */
int steps_parse_report(const char *line, size_t len, struct step_event *ev);

#endif
