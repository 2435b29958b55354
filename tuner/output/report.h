/* SPDX-License-Identifier: MIT */
/*
 * report: the results file (DESIGN.md 2.5) rendered for people and for
 * CI: Markdown, JUnit XML and one self-contained HTML page.
 *
 * Every renderer reads the parsed results document and nothing else (no
 * clock, no environment, no other file), so `autobatch report RESULTS`
 * redoes a report later byte for byte, and the same document always gives
 * the same bytes.  Numbers are printed with printf in the C locale (the
 * program never calls setlocale()).
 *
 * Older and partial results files (an interrupted run, a crash at the
 * first trial, a file from before a key was added) lack keys or hold null
 * where a number is unknown: such values render as "—" (or are left out of
 * a chart), never as a made-up figure and never as an error.  The only
 * documents refused are those that are not a JSON object, or whose
 * "schema" is a string that does not start with "autobatch.results/".
 *
 * The reports also show the regression gate that baseline_compare() (see
 * baseline.h) stores in the document as "baseline".
 *
 * Life cycle of a call: render into a malloc'd, NUL-terminated string
 * (*out, its length in *len when len is not NULL), which the caller
 * free()s.  On failure *out is NULL, err holds a one-line lowercase
 * message, and nothing was printed.
 */
#ifndef AB_REPORT_H
#define AB_REPORT_H

#include <stddef.h>

#include <jansson.h>

enum report_format {
    /**
     * A summary (the choice, the command, how to run the choice when the
     * file's "run_with" changes the command line or names config files,
     * the host, the capacity line, the warm start, the search space, the
     * settings, the trial counts and the exit status), the regression
     * gate when there is one, then tables: the largest micro-batch per
     * (grad_accum, checkpointing) cell (a pruned cell's note starts
     * "pruned: could not beat the fastest fit"), the Pareto frontier (the
     * choice marked "chosen"; a choice that is not a frontier point gets
     * a row of its own, "**chosen** (not on the frontier)"),
     * contradictions when there were any, and every trial.
     * GitHub-flavoured: tables use pipes; text from the file is escaped
     * so that evidence cannot break a table or inject HTML.  A notice is
     * given once: "interrupted" is not repeated under a headline that
     * says it, and of the "N more ... not shown" notes only the first
     * says where the rest is.
     *
     * The capacity line (HTML and JUnit too): the GPU model(s) and the
     * capacity the choice measured against with its source ("capacity":
     * NVML, CUDA, emulated, the OOM messages, --trial-memory-limit; in
     * older files the smallest device memory from host.gpus and
     * host.emulated_gpu_memory), --headroom and the fits it excluded (the
     * run's own count when the file has it; named are the measured fits
     * whose peak is above (1 - headroom) x capacity, at most four), or
     * that it could not be checked, and the choice's peak as a percentage
     * of the capacity.  What the file lacks is said ("capacity unknown",
     * "not measured", "not recorded"), never computed.
     */
    REPORT_MARKDOWN,
    /**
     * One HTML5 file with nothing to fetch: no scripts, no stylesheets or
     * fonts from elsewhere, no images but inline SVG.  On a white
     * background, it is as wide as the window up to 1800 CSS pixels,
     * tables full width; the charts scale to their column, one column in
     * a window under about 1330 px (an 800 px window shows the page as a
     * 760 px column, as before), two side by side above.  After the facts
     * (the capacity line among them), "Run with": the command with the
     * choice and each config file's diff from "run_with", or for a file
     * without it the chosen knob values.  Three charts, four when memory
     * was measured:
     *
     *  1. samples/s against peak memory, every fitting trial a
     *     class="point" mark, the frontier a class="frontier" line and
     *     the choice a class="choice" ring, each size that did not fit
     *     (OOM, timeout, hang) a red class="failed" cross (at its
     *     micro-batch, or at the capacity on a memory axis), and the
     *     capacity and headroom as class="capacity" and class="headroom"
     *     lines when known; when any fitting trial lacks a peak memory
     *     figure the x axis is the micro-batch instead, and its label
     *     says so;
     *  2. the largest fitting micro-batch per cell as bars (the chosen
     *     configuration's cell highlighted, a cell whose range top fitted
     *     drawn dashed and labelled ">= N", a pruned cell grey, class="cell
     *     pruned", labelled ">=N pruned");
     *  3. a timeline of the trials back to back (x: elapsed seconds, y:
     *     micro-batch), coloured by outcome.  Each trial is exactly one
     *     element with class="trial" there, and that class is used
     *     nowhere else in the page, so counting `class="trial"` counts
     *     the trials;
     *  4. only when a fit's peak was measured: peak memory against the
     *     micro-batch, a class="mem" mark per measured fit, the failed
     *     sizes' class="failed" crosses at the capacity (the top when it
     *     is unknown), the capacity and headroom lines, and each cell's
     *     memory line (max_fit[].memory_model) as class="model".
     *
     * Then the same tables as the Markdown report.
     */
    REPORT_HTML,
    /**
     * JUnit XML for CI test reporters:
     *
     *   <testsuites ...><testsuite name tests failures errors skipped time>
     *     <testcase name="trial N: micro_batch=.. grad_accum=.. checkpointing=.."
     *               classname="autobatch.grad_accum_G.checkpointing_off|on" time>
     *
     * One testcase per trial, in the file's order.  What each outcome
     * becomes:
     *
     *   fit            passed (the throughput in <system-out>)
     *   oom            <skipped>, with the evidence line: a size that does
     *                  not fit is an answer, not a failure
     *   interrupted    <skipped>
     *   crash          <error>, exit code or signal and evidence
     *   spawn_failed   <error>
     *   timeout, hang  <failure>: the command did not finish a trial, and
     *                  autobatch counted the size as not fitting, so
     *                  someone should look (raise --trial-timeout or
     *                  --hang-timeout, or fix the job)
     *   anything else  <error> naming the unknown outcome
     *
     * The suite's <properties>: command, host, result, exit, capacity
     * (the Markdown's line), capacity_bytes, capacity_source, headroom
     * (empty when unknown), warm_start, search_space and settings.
     *
     * When the document holds a "baseline" object, one more testcase,
     * name="regression gate" classname="autobatch.baseline", fails when
     * "regression" is true and lists every change.
     *
     * Text is escaped for XML (& < > " ' as references; tab, newline and
     * carriage return kept, as references inside attributes); the other
     * control characters, which XML 1.0 cannot carry at all, appear as the
     * visible text "\xNN".
     */
    REPORT_JUNIT,
};

/**
 * Batch is not the problem: what to say when no size fits, from a
 * results document's "memory_breakdown.failure" (docs/results.md).  Two
 * sentences, each malloc'd, NUL-terminated and free()d by the caller:
 * *what, the breakdown ("micro_batch=1 does not fit: weights 470.2 MiB +
 * gradients 470.2 MiB (not yet allocated when it failed) + AdamW state
 * 940.5 MiB (not yet allocated when it failed) = 1.8 GiB of 1.5 GiB
 * before any activation"), and *next, what to try, with the knobs
 * autobatch does not try yet named as such.  Returns 1, or 0 with both
 * NULL when failure is not such an object (or out of memory).
 */
int report_nofit_text(const json_t *failure, char **what, char **next);

/**
 * GitHub's limit on one step's summary ($GITHUB_STEP_SUMMARY).  A caller
 * that appends to a summary file which already holds other text passes
 * this minus the file's size as max_bytes to report_summary_markdown().
 */
#define REPORT_STEP_SUMMARY_LIMIT ((size_t)1024 * 1024)

/**
 * "markdown" (or "md"), "html" or "junit" into *f.  Returns 0, or -1 for
 * any other word (f untouched).
 */
int report_format_parse(const char *s, enum report_format *f);

/** The format's name as report_format_parse() takes it ("markdown", ...). */
const char *report_format_name(enum report_format f);

/**
 * Render results (a parsed results document) as f.  Returns 0, or -1
 * with err filled (not a results document, out of memory).
 */
int report_render(const json_t *results, enum report_format f, char **out, size_t *len,
                  char *err, size_t errlen);

/**
 * The Markdown report in at most max_bytes bytes (not counting the
 * terminating NUL), for $GITHUB_STEP_SUMMARY.  When the whole report
 * fits it is exactly report_render()'s Markdown; otherwise tables lose
 * their last rows, in document order (per-cell answers, frontier,
 * contradictions, then trials, so the trial table goes first in practice:
 * it is last and longest), and each shortened table is followed by a line
 * "_N more trials not shown; ..._" (or "frontier points", "cells",
 * "contradictions").  Returns 0, or -1 with err filled, also when even
 * the report with empty tables would not fit in max_bytes.
 */
int report_summary_markdown(const json_t *results, size_t max_bytes, char **out, size_t *len,
                            char *err, size_t errlen);

#endif
