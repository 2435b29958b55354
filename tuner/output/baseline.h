/* SPDX-License-Identifier: MIT */
/*
 * baseline: the regression gate.  A run's results are compared with an
 * earlier results file for the same command (--baseline FILE), and what
 * changed is stored in the current document, so that the results file,
 * and every report rendered from it (see report.h), carries the verdict.
 *
 * Call sequence (the CLI's, for --baseline FILE --regression-threshold T):
 *
 *   1. json_t *base = baseline_load(FILE, err, errlen);   before the first
 *      trial, so that a bad path fails in the first second;
 *   2. run the search, build the results document `cur`;
 *   3. int r = baseline_compare(cur, base, FILE, T, err, errlen);
 *      json_decref(base);
 *   4. write the results file and the reports from `cur`; exit 6 when r
 *      is 1 (and the run itself succeeded).
 *
 * What counts as a regression (each is one entry of "changes", with
 * "regression": true):
 *
 *   - throughput: the chosen configuration's samples/s is lower than the
 *     baseline's by more than the threshold, a fraction (0.05: a drop of
 *     more than 5%; exactly 5% is not a regression); or the baseline chose
 *     a configuration and this run chose none.  The chosen configuration
 *     itself may differ: what is gated is the best throughput found.
 *   - max_fit: a (grad_accum, checkpointing) cell searched by both runs
 *     where a micro-batch the baseline saw fit is now seen to fail (the
 *     largest fit shrank), or both runs give the cell's largest fit and it is
 *     smaller now.  A cell whose search stopped at the top of its range
 *     ("bounded_by") counts with the largest size it tried, as a lower
 *     bound: a baseline that fitted 512 at the top of its range regresses
 *     when 305 now fails, but a run whose range now stops at 256 does not
 *     regress against a baseline that fitted 304.
 *
 * Reported but never a regression on their own: throughput changes
 * within the threshold, improvements (a rise of more than the threshold;
 * a cell whose largest fit grew, "improvement": true), cells searched by
 * only one of the runs (cell_added, cell_removed: the search space
 * changed), a cell that cannot be compared (its range changed), and a
 * different command.  A baseline recorded for another command is still
 * compared, since a changed flag or path is the usual reason, but the
 * change of kind "command" comes first, "different_command" is true, and
 * every report shows it prominently; the other entries then say what they
 * say, so a real drop is still caught.
 *
 * The object stored as current["baseline"] (replacing any earlier one):
 *
 *   {"file": path or null, "threshold": 0.05, "regression": bool,
 *    "different_command": bool, "started_at": the baseline's or null,
 *    "changes": [{"kind": "command|throughput|max_fit|cell_added|cell_removed",
 *                 "text": "a sentence", "regression": bool,
 *                 "improvement": bool, ...numbers}]}
 *
 * with, per kind: command: "baseline" and "current" (the argv arrays);
 * throughput: "baseline", "current" (samples/s or null), "change" (the
 * relative change, or null), "baseline_config", "current_config"
 * ({micro_batch, grad_accum, checkpointing} or null); max_fit, cell_added,
 * cell_removed: "grad_accum", "checkpointing", "baseline", "current" (the
 * largest fit, or the largest size tried when bounded, or null),
 * "baseline_bounded", "current_bounded", "baseline_smallest_fail",
 * "current_smallest_fail".  Changes come in that order: command,
 * throughput, cells in the current file's order, then removed cells.
 */
#ifndef AB_BASELINE_H
#define AB_BASELINE_H

#include <stddef.h>

#include <jansson.h>

/** --regression-threshold's default: a drop of more than 5%. */
#define BASELINE_THRESHOLD_DEFAULT 0.05

/**
 * Read and check a baseline results file.  Returns the document (the
 * caller json_decref()s it), or NULL with err filled: the file cannot be
 * read, is not JSON, or is not an autobatch results file.
 */
json_t *baseline_load(const char *path, char *err, size_t errlen);

/**
 * Compare current with baseline (both results documents) and store the
 * verdict as current["baseline"], see above.  baseline_path is recorded
 * as "file" (NULL: null).  threshold is a fraction from 0 to 1.
 *
 * Returns 1 when a regression was found, 0 when not, and -1 with err
 * filled (a document is not a results file, the threshold is out of
 * range, out of memory); current is unchanged on -1.
 */
int baseline_compare(json_t *current, const json_t *baseline, const char *baseline_path,
                     double threshold, char *err, size_t errlen);

#endif
