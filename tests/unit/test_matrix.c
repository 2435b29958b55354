/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for matrix: three real results files of one command whose
 * host.gpus were edited to stand for three machines (H100, 2 x A100, L4;
 * tests/data/, found through $AB_SOURCE_DIR), and one without a GPU.
 * The Markdown of the three must equal tests/data/matrix.md byte for byte
 * (AB_UPDATE_GOLDEN=1 rewrites it after an intended change).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/matrix.h"
#include "fixture.h"
#include "timing.h"

static char *render(json_t *const *docs, const char *const *names, size_t n, enum matrix_format f)
{
    char *out = NULL, err[256] = "";
    size_t len = 0;
    if (matrix_render(docs, names, n, f, &out, &len, err, sizeof err) != 0)
        fail_msg("matrix_render failed: %s", err);
    assert_non_null(out);
    assert_int_equal(strlen(out), len);
    return out;
}

/* The table's lines: header, separator, rows; returns how many, and the lines in v. */
static size_t table_lines(const char *md, char v[][2048], size_t max)
{
    size_t n = 0;
    for (const char *p = md; *p && n < max; ) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[0] == '|') {
            assert_true(len < 2048);
            memcpy(v[n], p, len);
            v[n][len] = '\0';
            n++;
        }
        p += len + (e != NULL);
    }
    return n;
}

/* Columns of a table line: unescaped '|' minus one. */
static size_t columns(const char *line)
{
    size_t bars = 0;
    for (const char *p = line; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            continue;
        }
        bars += *p == '|';
    }
    return bars - 1;
}

static void test_markdown(void **state)
{
    (void)state;
    json_t *docs[3] = { fixture("results-h100.json"), fixture("results-a100.json"), fixture("results-l4.json") };
    const char *names[3] = { "results-h100.json", "results-a100.json", "results-l4.json" };
    char *md = render(docs, names, 3, MATRIX_MARKDOWN);

    static char lines[16][2048];
    size_t n = table_lines(md, lines, 16);
    assert_int_equal(n, 2 + 3); /* header, separator, one row per file */
    /* The union of cells, checkpointing off first, then accum ascending. */
    assert_string_equal(lines[0], "| machine | results | chosen | samples/s | peak memory | accum 1, ckpt off | "
                                  "accum 2, ckpt off | accum 4, ckpt off | accum 1, ckpt on | accum 2, ckpt on | "
                                  "accum 4, ckpt on |");
    for (size_t i = 0; i < n; i++)
        assert_int_equal(columns(lines[i]), 5 + 6);
    assert_string_equal(lines[2], "| NVIDIA H100 80GB HBM3, 79.6 GiB | results-h100.json | 256 \xc3\x97 1, ckpt off | "
                                  "4540.3 | 68.0 GiB | 304 | 304 | \xe2\x80\x94 | \xe2\x89\xa5 512 | \xe2\x89\xa5 512 | "
                                  "\xe2\x80\x94 |");
    assert_non_null(strstr(lines[3], "| 2 \xc3\x97 NVIDIA A100-SXM4-40GB, 40.0 GiB | results-a100.json | 128 \xc3\x97 1, "));
    assert_string_equal(lines[4], "| NVIDIA L4, 22.5 GiB | results-l4.json | 64 \xc3\x97 1, ckpt off | 3565.1 | "
                                  "20.0 GiB | 80 | \xe2\x80\x94 | 80 | 320 | \xe2\x80\x94 | 320 |");
    assert_non_null(strstr(md, "\nCommand: `./build/simtrain --report`\n"));
    assert_null(strstr(md, "different commands"));

    /* Byte for byte, and the same bytes every time. */
    char *gpath = data_path("matrix.md");
    if (getenv("AB_UPDATE_GOLDEN")) {
        FILE *f = fopen(gpath, "wb");
        assert_non_null(f);
        fputs(md, f);
        fclose(f);
    }
    FILE *f = fopen(gpath, "rb");
    if (!f)
        fail_msg("cannot read '%s' (AB_UPDATE_GOLDEN=1 writes it)", gpath);
    static char golden[65536];
    size_t glen = fread(golden, 1, sizeof golden - 1, f);
    fclose(f);
    golden[glen] = '\0';
    assert_string_equal(md, golden);
    free(gpath);

    /* The columns do not depend on the files' order; the rows follow it. */
    json_t *rev[3] = { docs[2], docs[1], docs[0] };
    const char *rnames[3] = { names[2], names[1], names[0] };
    char *md2 = render(rev, rnames, 3, MATRIX_MARKDOWN);
    n = table_lines(md2, lines, 16);
    assert_int_equal(n, 5);
    assert_memory_equal(md, md2, (size_t)(strstr(md, "\n|:---") - md));
    assert_non_null(strstr(lines[2], "| NVIDIA L4, 22.5 GiB | results-l4.json |"));
    free(md2);
    free(md);
    for (int i = 0; i < 3; i++)
        json_decref(docs[i]);
}

static void test_no_gpu_and_other_command(void **state)
{
    (void)state;
    json_t *docs[2] = { fixture("results-h100.json"), fixture("results-nogpu.json") };
    char *md = render(docs, NULL, 2, MATRIX_MARKDOWN);
    static char lines[16][2048];
    size_t n = table_lines(md, lines, 16);
    assert_int_equal(n, 4);
    assert_non_null(strstr(lines[3], "| no GPU (vm) | results 2 | 16 \xc3\x97 1, ckpt off | 1536.3 | \xe2\x80\x94 | 16 |"));
    assert_non_null(strstr(md, "**The files are for different commands:**\n\n- results 1: `./build/simtrain --report`\n"
                               "- results 2: `./build/simtrain --capacity 8G`\n"));
    free(md);
    json_decref(docs[0]);
    json_decref(docs[1]);
}

static void test_json(void **state)
{
    (void)state;
    json_t *docs[4] = { fixture("results-h100.json"), fixture("results-a100.json"), fixture("results-l4.json"),
                        fixture("results-crash.json") };
    const char *names[4] = { "h100.json", "a100.json", "l4.json", "crash.json" };
    char *text = render(docs, names, 4, MATRIX_JSON);
    json_error_t je;
    json_t *m = json_loads(text, 0, &je);
    if (!m)
        fail_msg("the matrix JSON does not parse: %s", je.text);
    assert_string_equal(json_string_value(json_object_get(m, "schema")), "autobatch.matrix/1");
    assert_true(json_is_false(json_object_get(m, "same_command")));
    json_t *cells = json_object_get(m, "cells"), *rows = json_object_get(m, "rows");
    assert_int_equal(json_array_size(cells), 6);
    assert_int_equal(json_array_size(rows), 4);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(cells, 2), "grad_accum")), 4);
    assert_true(json_is_false(json_object_get(json_array_get(cells, 2), "checkpointing")));
    for (size_t i = 0; i < 4; i++) {
        json_t *r = json_array_get(rows, i);
        assert_string_equal(json_string_value(json_object_get(r, "name")), names[i]);
        assert_int_equal(json_array_size(json_object_get(r, "max_fit")), 6);
    }
    json_t *h100 = json_array_get(rows, 0), *a100 = json_array_get(rows, 1), *crash = json_array_get(rows, 3);
    assert_string_equal(json_string_value(json_object_get(h100, "machine")), "NVIDIA H100 80GB HBM3, 79.6 GiB");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a100, "gpu"), "count")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(h100, "max_fit"), 0),
                                                        "micro_batch")), 304);
    assert_true(json_is_null(json_array_get(json_object_get(h100, "max_fit"), 2))); /* accum 4: not searched */
    assert_true(json_is_null(json_object_get(crash, "best")));
    assert_true(json_is_null(json_object_get(crash, "samples_per_s")));
    assert_true(json_is_null(json_object_get(crash, "gpu")));
    assert_int_equal(json_integer_value(json_object_get(crash, "exit")), 4);
    assert_true(text[strlen(text) - 1] == '\n');
    json_decref(m);
    free(text);
    for (int i = 0; i < 4; i++)
        json_decref(docs[i]);
}

static void test_partial_and_errors(void **state)
{
    (void)state;
    json_error_t je;
    json_t *docs[3] = { json_loads("{}", 0, &je), fixture("results-partial.json"), fixture("results-interrupted.json") };
    json_object_set_new(docs[0], "max_fit", json_pack("[{s:i, s:b, s:n}, {}]", "grad_accum", 8, "checkpointing", 1,
                                                      "micro_batch"));
    char *md = render(docs, NULL, 3, MATRIX_MARKDOWN);
    assert_non_null(strstr(md, "| GPU unknown | results 1 | none | \xe2\x80\x94 | \xe2\x80\x94 |"));
    assert_non_null(strstr(md, "| none (exit 130) |"));
    assert_non_null(strstr(md, " accum 1, ckpt off | accum 8, ckpt on |\n"));
    free(md);
    char *js = render(docs, NULL, 3, MATRIX_JSON);
    json_t *m = json_loads(js, 0, &je);
    assert_non_null(m);
    json_decref(m);
    free(js);

    char *out = (char *)"untouched", err[256] = "";
    assert_int_equal(matrix_render(docs, NULL, 0, MATRIX_MARKDOWN, &out, NULL, err, sizeof err), -1);
    assert_null(out);
    assert_string_equal(err, "no results files to merge");
    json_t *bad[2] = { docs[1], json_pack("{s:s}", "schema", "other/1") };
    const char *names[2] = { "a.json", "b.json" };
    assert_int_equal(matrix_render(bad, names, 2, MATRIX_JSON, &out, NULL, err, sizeof err), -1);
    assert_string_equal(err, "'b.json' is not an autobatch results file");
    json_decref(bad[1]);
    for (int i = 0; i < 3; i++)
        json_decref(docs[i]);

    enum matrix_format f = MATRIX_MARKDOWN;
    assert_int_equal(matrix_format_parse("json", &f), 0);
    assert_int_equal(f, MATRIX_JSON);
    assert_int_equal(matrix_format_parse("markdown", &f), 0);
    assert_int_equal(f, MATRIX_MARKDOWN);
    assert_int_equal(matrix_format_parse("csv", &f), -1);
    assert_int_equal(f, MATRIX_MARKDOWN);
}

/* A unit or command from the file cannot break the table or its text. */
static void test_hostile_text(void **state)
{
    (void)state;
    json_t *docs[2] = { fixture("results-h100.json"), fixture("results-l4.json") };
    json_object_set_new(json_object_get(docs[0], "space"), "unit", json_string("frames|</td>\n| x"));
    json_array_append_new(json_object_get(docs[1], "command"), json_string("a\x7f" "b|c\nd"));
    char *md = render(docs, NULL, 2, MATRIX_MARKDOWN);
    assert_null(strchr(md, 0x7f));
    assert_null(strstr(md, "</td>"));
    char lines[8][2048];
    size_t n = table_lines(md, lines, 8);
    assert_int_equal(n, 4); /* header, delimiter, two rows */
    for (size_t i = 1; i < n; i++)
        assert_int_equal(columns(lines[i]), columns(lines[0]));
    /* A unit that is not a plain word is shown as the reports show it. */
    assert_non_null(strstr(lines[2], " units | "));
    free(md);
    json_decref(docs[0]);
    json_decref(docs[1]);
}

/* A results document with cells (grad_accum from, from+1, ...; checkpointing off). */
static json_t *doc_with_cells(long long from, size_t count, int reverse)
{
    json_t *cells = json_array();
    for (size_t k = 0; k < count; k++) {
        long long ga = from + (long long)(reverse ? count - 1 - k : k);
        json_array_append_new(cells, json_pack("{s:I, s:b, s:I, s:I}", "grad_accum", (json_int_t)ga,
                                               "checkpointing", 0, "micro_batch", (json_int_t)ga,
                                               "smallest_fail", (json_int_t)ga + 1));
    }
    return json_pack("{s:s, s:[s], s:o}", "schema", "autobatch.results/1", "command", "train",
                     "max_fit", cells);
}

/* At most MATRIX_MAX_CELLS columns, the first in sorted order, and a word on the rest. */
static void test_cell_cap(void **state)
{
    (void)state;
    json_t *docs[2] = { doc_with_cells(1, 100, 1), doc_with_cells(1, 2, 0) };
    /* A repeated cell: the file's first entry for it counts. */
    json_array_append_new(json_object_get(docs[1], "max_fit"),
                          json_pack("{s:I, s:b, s:I}", "grad_accum", (json_int_t)1, "checkpointing", 0,
                                    "micro_batch", (json_int_t)999));
    char *md = render(docs, NULL, 2, MATRIX_MARKDOWN);
    char lines[4][2048];
    assert_int_equal(table_lines(md, lines, 4), 4);
    assert_int_equal(columns(lines[0]), 5 + MATRIX_MAX_CELLS);
    assert_non_null(strstr(lines[0], "| accum 1, ckpt off | accum 2, ckpt off |"));
    assert_non_null(strstr(lines[0], "| accum 64, ckpt off |"));
    assert_null(strstr(lines[0], "accum 65,"));
    assert_non_null(strstr(lines[3], "| 1 | 2 | \xe2\x80\x94 |"));
    assert_null(strstr(lines[3], "999"));
    assert_non_null(strstr(md, "\nOnly the first 64 cells are shown; the files search 36 more.\n"));
    free(md);

    char *js = render(docs, NULL, 2, MATRIX_JSON);
    json_error_t je;
    json_t *m = json_loads(js, 0, &je);
    assert_non_null(m);
    assert_int_equal(json_array_size(json_object_get(m, "cells")), MATRIX_MAX_CELLS);
    assert_int_equal(json_integer_value(json_object_get(m, "cells_left_out")), 36);
    json_t *row = json_array_get(json_object_get(m, "rows"), 1);
    assert_int_equal(json_array_size(json_object_get(row, "max_fit")), MATRIX_MAX_CELLS);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(row, "max_fit"), 0), "micro_batch")), 1);
    json_decref(m);
    free(js);
    json_decref(docs[0]);
    json_decref(docs[1]);
}

/* n files, each with 4 cells of its own and 4 shared, plus one file of n cells in reverse order. */
static double time_matrix(size_t n, void *ctx)
{
    (void)ctx;
    json_t **docs = calloc(n + 1, sizeof *docs);
    assert_non_null(docs);
    for (size_t i = 0; i < n; i++) {
        docs[i] = doc_with_cells(1000 + 4 * (long long)i, 4, 0);
        json_t *shared = doc_with_cells(1, 4, 1);
        json_array_extend(json_object_get(docs[i], "max_fit"), json_object_get(shared, "max_fit"));
        json_decref(shared);
    }
    docs[n] = doc_with_cells(1, n, 1);
    double t0 = timing_now();
    for (int f = 0; f < 2; f++) {
        char *out = NULL, err[256];
        if (matrix_render(docs, NULL, n + 1, f ? MATRIX_JSON : MATRIX_MARKDOWN, &out, NULL, err,
                          sizeof err))
            fail_msg("matrix_render: %s", err);
        free(out);
    }
    double t = timing_now() - t0;
    for (size_t i = 0; i <= n; i++)
        json_decref(docs[i]);
    free(docs);
    return t;
}

/* The matrix stays linear in the number of files and of their cells. */
static void test_linear(void **state)
{
    (void)state;
    double r = timing_ratio("matrix", time_matrix, NULL, 250, 4000, NULL, NULL, NULL);
    assert_true(r < TIMING_MAX_RATIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_no_gpu_and_other_command),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_partial_and_errors),
        cmocka_unit_test(test_hostile_text),
        cmocka_unit_test(test_cell_cap),
        cmocka_unit_test(test_linear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
