/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the renderers: every report format (Markdown,
 * JUnit, HTML, the byte-budgeted step summary) and the hardware matrix
 * (Markdown and JSON), fed results documents made from the input in two
 * ways:
 *
 *   1. the input itself, when it parses as a JSON object (as `autobatch
 *      report` would load it): hostile structure, types and numbers;
 *   2. the input as one string (malformed UTF-8 and NUL replaced, as a
 *      loaded file cannot hold them), put into every string a results
 *      file has: command words, host and GPU names, the unit, outcomes,
 *      evidence, signatures, cell notes, re-test words, preset, config,
 *      started_at, the schema's tail, the baseline's file name and change
 *      texts: hostile text everywhere at once.
 *
 * What each output must be (tests/fuzz/fmtcheck.h):
 *   - JUnit: well-formed XML 1.0;
 *   - HTML: no "<script" at all (the page has no script of its own), and
 *     well-formed in the same strict sense, with only the elements the
 *     renderer writes and no event handler or link attribute;
 *   - Markdown, summary and matrix Markdown: tables keep their shape (no
 *     unescaped '|' or line break from the input inside a cell) and no
 *     line starts with text the renderer did not put there;
 *   - the summary fits its byte budget; the matrix JSON parses back;
 *   - a refusal comes with a one-line message and no output.
 * On a violation the problem and the text around it go to stderr, then
 * abort(), so libFuzzer keeps the input.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmtcheck.h"
#include "output/matrix.h"
#include "output/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The lines the Markdown renderers start (fmtcheck's fc_markdown). */
static const char *const report_md_lines[] = {
    "# autobatch results", "**Chosen:** ", "**No configuration", "The command failed in trial ",
    "- ", "The search was interrupted", "## ", "**Regression** against ", "No regression against ",
    "> **Different command:**", "Nothing changed.", "Throughput against ", "Empty: no trial fitted.",
    "Sizes that failed", "No trial ran.", "_", "<details><summary>", "</details>", NULL,
};

static const char *const matrix_md_lines[] = {
    "# autobatch hardware matrix", "Each cell column", "Command: ",
    "**The files are for different commands:**", "- ", "Only the first ", NULL,
};

static void fail(const char *what, const char *problem, const char *text, size_t len, size_t at)
{
    /* The line before, the one at `at` and the one after, at most 3000 bytes. */
    size_t from = at, to = at;
    for (int k = 0; k < 2 && from > 0; k++)
        for (from--; from > 0 && text[from - 1] != '\n'; from--)
            ;
    for (int k = 0; k < 2 && to < len; k++)
        for (to++; to < len && text[to - 1] != '\n'; to++)
            ;
    if (to - from > 3000)
        to = from + 3000;
    fprintf(stderr, "fuzz_report: %s: %s at byte %zu:\n---\n%.*s\n---\n", what, problem, at,
            (int)(to - from), text + from);
    abort();
}

static void check_err(const char *what, const char *err)
{
    if (!*err)
        fail(what, "refused without a message", "", 0, 0);
    for (const char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            fail(what, "a control character in the message", err, strlen(err), (size_t)(p - err));
}

static void check_markdown(const char *what, const char *out, size_t len,
                           const char *const *lines)
{
    size_t at = 0;
    if (strlen(out) != len)
        fail(what, "a NUL inside the output", out, len, strlen(out));
    const char *why = fc_markdown(out, len, lines, &at);
    if (why)
        fail(what, why, out, len, at);
}

static void check_reports(const json_t *doc, size_t budget)
{
    static const enum report_format fmts[] = { REPORT_MARKDOWN, REPORT_HTML, REPORT_JUNIT };
    for (size_t k = 0; k < 3; k++) {
        char *out = (char *)"sentinel", err[512] = "";
        size_t len = 0, at = 0;
        const char *what = report_format_name(fmts[k]), *why = NULL;
        if (report_render(doc, fmts[k], &out, &len, err, sizeof err)) {
            if (out)
                fail(what, "output left on failure", "", 0, 0);
            check_err(what, err);
            continue;
        }
        switch (fmts[k]) {
        case REPORT_MARKDOWN:
            check_markdown(what, out, len, report_md_lines);
            break;
        case REPORT_HTML:
            if (fc_count_ci(out, len, "<script"))
                fail(what, "<script in the page", out, len, 0);
            why = fc_html(out, len, &at);
            break;
        case REPORT_JUNIT:
            why = fc_xml(out, len, &at);
            break;
        }
        if (why)
            fail(what, why, out, len, at);
        free(out);
    }

    char *out = NULL, err[512] = "";
    size_t len = 0;
    if (report_summary_markdown(doc, budget, &out, &len, err, sizeof err)) {
        check_err("summary", err);
    } else {
        if (len > budget)
            fail("summary", "over its byte budget", out, len, budget);
        check_markdown("summary", out, len, report_md_lines);
        free(out);
    }
}

static void check_matrix(json_t *doc, json_t *other)
{
    json_t *docs[2] = { doc, other };
    const char *names[2] = { "first|results\n.json", NULL };
    for (int f = 0; f < 2; f++) {
        char *out = NULL, err[512] = "";
        size_t len = 0;
        if (matrix_render(docs, names, 2, f ? MATRIX_JSON : MATRIX_MARKDOWN, &out, &len, err,
                          sizeof err)) {
            check_err("matrix", err);
            continue;
        }
        if (f) {
            json_error_t je;
            json_t *back = json_loadb(out, len, 0, &je);
            if (!back)
                fail("matrix json", je.text, out, len, (size_t)je.position);
            json_decref(back);
        } else {
            check_markdown("matrix", out, len, matrix_md_lines);
        }
        free(out);
    }
}

/* A small but complete results document; every string is replaced below. */
static const char template_doc[] =
    "{\"schema\": \"autobatch.results/1\", \"command\": [\"python\", \"S\", \"S\"],"
    " \"started_at\": \"S\", \"preset\": \"S\", \"config\": \"S\","
    " \"host\": {\"hostname\": \"S\", \"gpus\": [{\"index\": 0, \"name\": \"S\","
    "   \"memory_total_bytes\": 85520809984}, {\"index\": 1, \"name\": \"S\"}]},"
    " \"space\": {\"batch\": {\"min\": 1, \"max\": 64, \"step\": 1}, \"grad_accum\": [1, 2],"
    "   \"checkpointing\": [false, true], \"global_batch\": null, \"world_size\": 1,"
    "   \"unit\": \"S\", \"headroom\": 0.1},"
    " \"trials\": ["
    "  {\"id\": 1, \"micro_batch\": 8, \"grad_accum\": 1, \"checkpointing\": false, \"outcome\": \"fit\","
    "   \"wall_s\": 1.5, \"steps_measured\": 5, \"samples_per_s\": 100.0, \"peak_mem_bytes\": 1000000,"
    "   \"evidence\": \"S\", \"signature\": \"S\", \"retest\": true},"
    "  {\"id\": 2, \"micro_batch\": 16, \"grad_accum\": 1, \"checkpointing\": false, \"outcome\": \"oom\","
    "   \"wall_s\": 1.0, \"evidence\": \"S\", \"signature\": \"S\"},"
    "  {\"id\": 3, \"micro_batch\": 12, \"grad_accum\": 2, \"checkpointing\": true, \"outcome\": \"S\","
    "   \"exit_code\": 1, \"evidence\": \"S\"},"
    "  {\"id\": 4, \"micro_batch\": 12, \"grad_accum\": 2, \"checkpointing\": true, \"outcome\": \"crash\","
    "   \"exit_code\": 1, \"evidence\": \"S\", \"signature\": \"S\"},"
    "  {\"id\": 5, \"micro_batch\": 2, \"grad_accum\": 1, \"checkpointing\": true, \"outcome\": \"hang\","
    "   \"signal\": 9, \"evidence\": \"S\"}],"
    " \"max_fit\": ["
    "  {\"grad_accum\": 1, \"checkpointing\": false, \"micro_batch\": 8, \"smallest_fail\": 16,"
    "   \"trials\": 2, \"skipped\": \"S\"},"
    "  {\"grad_accum\": 2, \"checkpointing\": true, \"micro_batch\": null, \"bounded_by\": \"S\","
    "   \"largest_tried_fit\": 64, \"trials\": 3, \"inferred\": true}],"
    " \"frontier\": [{\"micro_batch\": 8, \"grad_accum\": 1, \"checkpointing\": false,"
    "   \"samples_per_s\": 100.0, \"peak_mem_bytes\": 1000000}],"
    " \"best\": {\"micro_batch\": 8, \"grad_accum\": 1, \"checkpointing\": false,"
    "   \"samples_per_s\": 100.0, \"peak_mem_bytes\": 1000000},"
    " \"contradictions\": [{\"grad_accum\": 1, \"checkpointing\": false, \"micro_batch\": 4,"
    "   \"larger_fit\": 8, \"retest\": \"S\"}],"
    " \"summary\": {\"trials\": 5, \"wall_s\": 9.5, \"exit\": 0, \"interrupted\": true, \"preset\": \"S\"},"
    " \"baseline\": {\"file\": \"S\", \"threshold\": 0.05, \"regression\": true,"
    "   \"changes\": [{\"kind\": \"command\", \"text\": \"S\", \"regression\": true},"
    "                 {\"kind\": \"max_fit\", \"text\": \"S\", \"improvement\": true}]}}";

/* Every string "S" in v (recursively) becomes s; the schema gets s as its tail. */
static void fill(json_t *v, json_t *s, json_t *schema)
{
    const char *key;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, key, x) {
            if (!strcmp(key, "schema"))
                json_object_set(v, key, schema);
            else if (json_is_string(x) && !strcmp(json_string_value(x), "S"))
                json_object_set(v, key, s);
            else
                fill(x, s, schema);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) {
            if (json_is_string(x) && !strcmp(json_string_value(x), "S"))
                json_array_set(v, i, s);
            else
                fill(x, s, schema);
        }
    }
}

/* The input as a string a loaded file could hold: valid UTF-8, no NUL. */
static json_t *as_string(const uint8_t *data, size_t size, const char *prefix)
{
    size_t pl = strlen(prefix);
    char *buf = malloc(pl + 3 * size + 1), *o = buf;
    if (!buf)
        abort();
    memcpy(o, prefix, pl);
    o += pl;
    for (size_t i = 0; i < size;) {
        uint32_t cp;
        size_t l = fc_utf8(data, i, size, &cp);
        if (!l || cp == 0) {
            memcpy(o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
            continue;
        }
        memcpy(o, data + i, l);
        o += l;
        i += l;
    }
    json_t *s = json_stringn(buf, (size_t)(o - buf));
    free(buf);
    if (!s)
        abort();
    return s;
}

static json_t *template_parsed;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!template_parsed) {
        json_error_t je;
        if (!(template_parsed = json_loads(template_doc, 0, &je))) {
            fprintf(stderr, "fuzz_report: the template does not parse: %s\n", je.text);
            abort();
        }
    }
    size_t budget = 300 + (size * 131) % 6000;

    /* 1. The input as a document. */
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, size, 0, &je);
    if (json_is_object(doc)) {
        check_reports(doc, budget);
        check_matrix(doc, template_parsed);
    } else if (doc) {
        char *out = NULL, err[512] = "";
        if (!report_render(doc, REPORT_HTML, &out, NULL, err, sizeof err))
            fail("html", "a document that is not an object was rendered", "", 0, 0);
        check_err("html", err);
    }
    json_decref(doc);

    /* 2. The input as every string of a document (the renderers cut
     * evidence at 200, 400, 500 and 1000 bytes; longer says nothing new). */
    if (size > 1200)
        return 0;
    json_t *s = as_string(data, size, ""), *schema = as_string(data, size, "autobatch.results/");
    doc = json_deep_copy(template_parsed);
    fill(doc, s, schema);
    check_reports(doc, budget);
    check_matrix(doc, template_parsed);
    json_decref(doc);
    json_decref(s);
    json_decref(schema);
    return 0;
}
