/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for baseline: the regression gate on a real results file
 * (tests/data/results-h100.json, found through $AB_SOURCE_DIR) against
 * edited copies of itself: a throughput drop on either side of the
 * threshold, cells that shrink, grow, appear and disappear, another
 * command, and a run that chose nothing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "output/baseline.h"
#include "fixture.h"

static void set_sps(json_t *doc, double sps)
{
    json_object_set_new(json_object_get(doc, "best"), "samples_per_s", json_real(sps));
}

/* The max_fit entry of a cell. */
static json_t *cell(json_t *doc, long ga, int ckpt)
{
    json_t *cells = json_object_get(doc, "max_fit");
    for (size_t i = 0; i < json_array_size(cells); i++) {
        json_t *c = json_array_get(cells, i);
        if (json_integer_value(json_object_get(c, "grad_accum")) == ga &&
            json_is_true(json_object_get(c, "checkpointing")) == ckpt)
            return c;
    }
    fail_msg("no cell (%ld, %d) in the fixture", ga, ckpt);
    return NULL;
}

static void set_fit(json_t *c, long mb, long fail)
{
    json_object_del(c, "bounded_by");
    json_object_del(c, "largest_tried_fit");
    json_object_set_new(c, "micro_batch", mb < 0 ? json_null() : json_integer(mb));
    json_object_set_new(c, "smallest_fail", fail < 0 ? json_null() : json_integer(fail));
}

static json_t *changes(json_t *doc)
{
    json_t *b = json_object_get(doc, "baseline");
    assert_true(json_is_object(b));
    json_t *c = json_object_get(b, "changes");
    assert_true(json_is_array(c));
    return c;
}

/* The only change of a kind (fails when there are none or several). */
static json_t *change(json_t *doc, const char *kind)
{
    json_t *found = NULL, *all = changes(doc);
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *c = json_array_get(all, i);
        if (!strcmp(json_string_value(json_object_get(c, "kind")), kind)) {
            if (found)
                fail_msg("more than one change of kind '%s'", kind);
            found = c;
        }
    }
    if (!found)
        fail_msg("no change of kind '%s'", kind);
    return found;
}

static int has_kind(json_t *doc, const char *kind)
{
    json_t *all = changes(doc);
    for (size_t i = 0; i < json_array_size(all); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(all, i), "kind")), kind))
            return 1;
    return 0;
}

static const char *text(json_t *c)
{
    return json_string_value(json_object_get(c, "text"));
}

static int compare(json_t *cur, json_t *base, double thr)
{
    char err[256] = "";
    int r = baseline_compare(cur, base, "base.json", thr, err, sizeof err);
    if (r < 0)
        fail_msg("baseline_compare failed: %s", err);
    return r;
}

/* ------------------------------------------------------------------ */

static void test_unchanged(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    assert_int_equal(compare(cur, base, BASELINE_THRESHOLD_DEFAULT), 0);
    json_t *b = json_object_get(cur, "baseline");
    assert_string_equal(json_string_value(json_object_get(b, "file")), "base.json");
    assert_true(fabs(json_real_value(json_object_get(b, "threshold")) - 0.05) < 1e-12);
    assert_true(json_is_false(json_object_get(b, "regression")));
    assert_true(json_is_false(json_object_get(b, "different_command")));
    assert_string_equal(json_string_value(json_object_get(b, "started_at")), "2026-11-21T08:58:32Z");
    /* Only the throughput line, saying it did not move. */
    assert_int_equal(json_array_size(changes(cur)), 1);
    json_t *t = change(cur, "throughput");
    assert_true(json_is_false(json_object_get(t, "regression")));
    assert_string_equal(text(t), "throughput of the chosen configuration is unchanged at 4540.3 samples/s");
    assert_true(json_real_value(json_object_get(t, "change")) == 0);
    json_decref(cur);
    json_decref(base);
}

static void test_throughput_threshold(void **state)
{
    (void)state;
    static const struct {
        double base, cur, thr;
        int regression, improvement;
    } cases[] = {
        { 1000, 940, 0.05, 1, 0 },   /* -6%: more than 5% */
        { 1000, 960, 0.05, 0, 0 },   /* -4%: within */
        { 1000, 950, 0.05, 0, 0 },   /* exactly 5%: not "more than" */
        { 1000, 940, 0.10, 0, 0 },   /* a looser threshold */
        { 1000, 960, 0.03, 1, 0 },   /* a tighter one */
        { 1000, 1000, 0.0, 0, 0 },   /* no tolerance, no change */
        { 1000, 999, 0.0, 1, 0 },    /* no tolerance at all */
        { 1000, 1100, 0.05, 0, 1 },  /* +10%: an improvement, never a regression */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
        set_sps(base, cases[i].base);
        set_sps(cur, cases[i].cur);
        int r = compare(cur, base, cases[i].thr);
        if (r != cases[i].regression)
            fail_msg("%g -> %g at %g: returned %d", cases[i].base, cases[i].cur, cases[i].thr, r);
        json_t *t = change(cur, "throughput");
        assert_int_equal(json_is_true(json_object_get(t, "regression")), cases[i].regression);
        assert_int_equal(json_is_true(json_object_get(t, "improvement")), cases[i].improvement);
        assert_int_equal(json_is_true(json_object_get(json_object_get(cur, "baseline"), "regression")),
                         cases[i].regression);
        assert_true(fabs(json_real_value(json_object_get(t, "baseline")) - cases[i].base) < 1e-9);
        assert_true(fabs(json_real_value(json_object_get(t, "current")) - cases[i].cur) < 1e-9);
        assert_true(fabs(json_real_value(json_object_get(t, "change")) -
                         (cases[i].cur - cases[i].base) / cases[i].base) < 1e-9);
        json_decref(cur);
        json_decref(base);
    }

    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    set_sps(base, 1000);
    set_sps(cur, 940);
    compare(cur, base, 0.05);
    assert_string_equal(text(change(cur, "throughput")),
                        "throughput of the chosen configuration fell 6.0%, from 1000.0 to 940.0 samples/s, "
                        "more than the 5% threshold");
    set_sps(cur, 960);
    compare(cur, base, 0.05); /* a second comparison replaces the first */
    assert_string_equal(text(change(cur, "throughput")),
                        "throughput of the chosen configuration fell 4.0%, from 1000.0 to 960.0 samples/s, "
                        "within the 5% threshold");
    json_decref(cur);
    json_decref(base);
}

static void test_choice_changed(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    json_t *best = json_object_get(cur, "best");
    json_object_set_new(best, "micro_batch", json_integer(128));
    json_object_set_new(best, "grad_accum", json_integer(2));
    assert_int_equal(compare(cur, base, 0.05), 0);
    json_t *t = change(cur, "throughput");
    assert_non_null(strstr(text(t), "; the choice changed from micro-batch 256 \xc3\x97 grad-accum 1, checkpointing off "
                                    "to micro-batch 128 \xc3\x97 grad-accum 2, checkpointing off"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "current_config"), "micro_batch")), 128);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "baseline_config"), "micro_batch")), 256);
    json_decref(cur);
    json_decref(base);
}

static void test_cell_shrinks(void **state)
{
    (void)state;
    /* Both exact: 304 (305 fails) -> 280 (281 fails). */
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    set_fit(cell(cur, 1, 0), 280, 281);
    assert_int_equal(compare(cur, base, 0.05), 1);
    json_t *c = change(cur, "max_fit");
    assert_true(json_is_true(json_object_get(c, "regression")));
    assert_string_equal(text(c), "largest micro-batch for grad-accum 1, checkpointing off shrank from 304 to 280");
    assert_int_equal(json_integer_value(json_object_get(c, "baseline")), 304);
    assert_int_equal(json_integer_value(json_object_get(c, "current")), 280);
    assert_int_equal(json_integer_value(json_object_get(c, "grad_accum")), 1);
    assert_true(json_is_false(json_object_get(c, "checkpointing")));
    /* The throughput did not move: the cell alone is the regression. */
    assert_true(json_is_false(json_object_get(change(cur, "throughput"), "regression")));
    json_decref(cur);
    json_decref(base);

    /* The baseline's range topped out at 512; now 305 fails. */
    cur = fixture("results-h100.json");
    base = fixture("results-h100.json");
    set_fit(cell(cur, 2, 1), 304, 305);
    assert_int_equal(compare(cur, base, 0.05), 1);
    assert_string_equal(text(change(cur, "max_fit")),
                        "largest micro-batch for grad-accum 2, checkpointing on shrank from at least 512 "
                        "(the top of its range) to 304");
    json_decref(cur);
    json_decref(base);

    /* Nothing fits any more in a cell that fitted 304. */
    cur = fixture("results-h100.json");
    base = fixture("results-h100.json");
    set_fit(cell(cur, 2, 0), -1, 1);
    assert_int_equal(compare(cur, base, 0.05), 1);
    assert_string_equal(text(change(cur, "max_fit")),
                        "largest micro-batch for grad-accum 2, checkpointing off shrank from 304 to none "
                        "(micro-batch 1 fails)");
    json_decref(cur);
    json_decref(base);
}

static void test_cell_grows(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    set_fit(cell(cur, 1, 0), 320, 321);
    assert_int_equal(compare(cur, base, 0.05), 0);
    json_t *c = change(cur, "max_fit");
    assert_true(json_is_false(json_object_get(c, "regression")));
    assert_true(json_is_true(json_object_get(c, "improvement")));
    assert_string_equal(text(c), "largest micro-batch for grad-accum 1, checkpointing off grew from 304 to 320");
    assert_true(json_is_false(json_object_get(json_object_get(cur, "baseline"), "regression")));
    json_decref(cur);
    json_decref(base);

    /* A cell where nothing fitted now fits. */
    cur = fixture("results-h100.json");
    base = fixture("results-h100.json");
    set_fit(cell(base, 1, 0), -1, 1);
    assert_int_equal(compare(cur, base, 0.05), 0);
    assert_true(json_is_true(json_object_get(change(cur, "max_fit"), "improvement")));
    json_decref(cur);
    json_decref(base);
}

static void test_cell_not_comparable(void **state)
{
    (void)state;
    /* This run's range stops at 256 and fits there: the baseline's 304 is not contradicted. */
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    json_t *c = cell(cur, 1, 0);
    set_fit(c, -1, -1);
    json_object_set_new(c, "bounded_by", json_string("batch.max"));
    json_object_set_new(c, "largest_tried_fit", json_integer(256));
    assert_int_equal(compare(cur, base, 0.05), 0);
    json_t *ch = change(cur, "max_fit");
    assert_true(json_is_false(json_object_get(ch, "regression")));
    assert_true(json_is_false(json_object_get(ch, "improvement")));
    assert_true(json_is_true(json_object_get(ch, "current_bounded")));
    assert_non_null(strstr(text(ch), "not comparable, the search range differs"));
    json_decref(cur);
    json_decref(base);
}

static void test_cells_added_removed(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-l4.json");
    /* Same command and machine class does not matter here: only the cells. */
    json_object_set(base, "best", json_object_get(cur, "best"));
    /* Where both searched, the H100 fits more: improvements, and the other cells come and go. */
    assert_int_equal(compare(cur, base, 0.05), 0);
    assert_true(json_is_true(json_object_get(json_array_get(changes(cur), 1), "improvement")));
    json_t *all = changes(cur);
    size_t added = 0, removed = 0;
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *c = json_array_get(all, i);
        const char *kind = json_string_value(json_object_get(c, "kind"));
        if (!strcmp(kind, "cell_added")) {
            added++;
            assert_true(json_is_false(json_object_get(c, "regression")));
            assert_int_equal(json_integer_value(json_object_get(c, "grad_accum")), 2);
            assert_non_null(strstr(text(c), "was not searched in the baseline"));
        } else if (!strcmp(kind, "cell_removed")) {
            removed++;
            assert_true(json_is_false(json_object_get(c, "regression")));
            assert_int_equal(json_integer_value(json_object_get(c, "grad_accum")), 4);
            assert_non_null(strstr(text(c), "but not in this run"));
        }
    }
    assert_int_equal(added, 2);   /* accum 2, off and on */
    assert_int_equal(removed, 2); /* accum 4, off and on */
    json_decref(cur);
    json_decref(base);

    /* Only cells that come and go: no regression. */
    cur = fixture("results-h100.json");
    base = fixture("results-h100.json");
    json_array_remove(json_object_get(base, "max_fit"), 3);
    json_array_remove(json_object_get(cur, "max_fit"), 0);
    assert_int_equal(compare(cur, base, 0.05), 0);
    assert_true(has_kind(cur, "cell_added"));
    assert_true(has_kind(cur, "cell_removed"));
    json_decref(cur);
    json_decref(base);
}

static void test_different_command(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    json_array_append_new(json_object_get(base, "command"), json_string("--bf16 true"));
    assert_int_equal(compare(cur, base, 0.05), 0); /* flagged, not a regression on its own */
    json_t *b = json_object_get(cur, "baseline");
    assert_true(json_is_true(json_object_get(b, "different_command")));
    json_t *first = json_array_get(changes(cur), 0);
    assert_string_equal(json_string_value(json_object_get(first, "kind")), "command");
    assert_true(json_is_false(json_object_get(first, "regression")));
    assert_string_equal(text(first), "the baseline is for a different command: ./build/simtrain --report "
                                     "'--bf16 true' (this run: ./build/simtrain --report)");
    assert_int_equal(json_array_size(json_object_get(first, "baseline")), 3);
    assert_int_equal(json_array_size(json_object_get(first, "current")), 2);
    json_decref(cur);
    json_decref(base);

    /* A different command does not hide a real drop. */
    cur = fixture("results-h100.json");
    base = fixture("results-nogpu.json");
    set_sps(base, 5000);
    assert_int_equal(compare(cur, base, 0.05), 1);
    assert_true(has_kind(cur, "command"));
    assert_true(json_is_true(json_object_get(change(cur, "throughput"), "regression")));
    json_decref(cur);
    json_decref(base);
}

static void test_nothing_chosen(void **state)
{
    (void)state;
    /* The baseline chose something; this run crashed. */
    json_t *cur = fixture("results-crash.json"), *base = fixture("results-nogpu.json");
    assert_int_equal(compare(cur, base, 0.05), 1);
    json_t *t = change(cur, "throughput");
    assert_true(json_is_true(json_object_get(t, "regression")));
    assert_true(json_is_null(json_object_get(t, "current")));
    assert_non_null(strstr(text(t), "no configuration was chosen; the baseline chose micro-batch 16"));
    json_decref(cur);
    json_decref(base);

    /* The other way round is an improvement. */
    cur = fixture("results-nogpu.json");
    base = fixture("results-crash.json");
    assert_int_equal(compare(cur, base, 0.05), 0);
    assert_true(json_is_true(json_object_get(change(cur, "throughput"), "improvement")));
    json_decref(cur);
    json_decref(base);

    /* Two partial files: nothing to compare, nothing to crash on. */
    cur = fixture("results-partial.json");
    base = fixture("results-interrupted.json");
    assert_int_equal(compare(cur, base, 0.05), 0);
    json_decref(cur);
    json_decref(base);
}

/* The fit trials of doc at (micro, accum, ckpt): samples/s and spread. */
static void set_trial(json_t *doc, long micro, long accum, int ckpt, double sps, double spread)
{
    json_t *trials = json_object_get(doc, "trials");
    for (size_t i = 0; i < json_array_size(trials); i++) {
        json_t *t = json_array_get(trials, i);
        if (json_integer_value(json_object_get(t, "micro_batch")) != micro ||
            json_integer_value(json_object_get(t, "grad_accum")) != accum ||
            json_is_true(json_object_get(t, "checkpointing")) != ckpt)
            continue;
        json_object_set_new(t, "samples_per_s", json_real(sps));
        json_object_set_new(t, "step_time_s", json_real(0.1));
        json_object_set_new(t, "step_time_mad_s", json_real(0.1 * spread));
    }
}

/* A drop beyond the threshold but within the measured spread is noise. */
static void test_within_spread(void **state)
{
    (void)state;
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    set_sps(base, 1000);
    set_sps(cur, 920);
    set_trial(cur, 256, 1, 0, 920, 0.12); /* this run's step times vary by 12% */
    assert_int_equal(compare(cur, base, 0.05), 0);
    json_t *t = change(cur, "throughput");
    assert_true(json_is_false(json_object_get(t, "regression")));
    assert_true(fabs(json_real_value(json_object_get(t, "spread")) - 0.12) < 1e-9);
    assert_non_null(strstr(text(t), "within the step times' measured spread (12.0%)"));
    json_decref(cur);
    json_decref(base);
    /* the same drop with steady step times is one */
    cur = fixture("results-h100.json");
    base = fixture("results-h100.json");
    set_sps(base, 1000);
    set_sps(cur, 920);
    set_trial(cur, 256, 1, 0, 920, 0.01);
    assert_int_equal(compare(cur, base, 0.05), 1);
    json_decref(cur);
    json_decref(base);
}

/* The baseline chose 256 at 1000 samples/s; this run chose 128 at
 * best_sps and measured 256 at now_256.  Compares them into *cur (the
 * caller decrefs) and returns the verdict. */
static int like_case(double best_sps, double now_256, json_t **cur)
{
    json_t *base = fixture("results-h100.json");
    *cur = fixture("results-h100.json");
    set_sps(base, 1000);
    json_t *best = json_object_get(*cur, "best");
    json_object_set_new(best, "micro_batch", json_integer(128));
    json_object_set_new(best, "samples_per_s", json_real(best_sps));
    set_trial(*cur, 256, 1, 0, now_256, 0.01);
    int r = compare(*cur, base, 0.05);
    json_decref(base);
    return r;
}

/* A choice that moved to a near-equal configuration is compared like with
 * like: the baseline's configuration as measured in this run. */
static void test_like_with_like(void **state)
{
    (void)state;
    json_t *cur;
    /* 128 at 940 is 6% below the baseline's 1000 for 256, but 256 itself
     * ran at 990: it did not regress */
    assert_int_equal(like_case(940, 990, &cur), 0);
    json_t *t = change(cur, "throughput");
    assert_true(json_is_true(json_object_get(t, "like_with_like")));
    assert_true(fabs(json_real_value(json_object_get(t, "current")) - 990) < 1e-9);
    assert_non_null(strstr(text(t), "throughput of the baseline's choice fell 1.0%"));
    json_decref(cur);
    /* 256 fell 10% and nothing this run found is as fast as it was */
    assert_int_equal(like_case(930, 900, &cur), 1);
    json_decref(cur);
    /* ... but when this run's choice is as fast as the baseline's was, not */
    assert_int_equal(like_case(1010, 900, &cur), 0);
    assert_non_null(strstr(text(change(cur, "throughput")), "is as fast as the baseline's was"));
    json_decref(cur);
}

static void test_errors(void **state)
{
    (void)state;
    char err[256] = "";
    json_t *cur = fixture("results-h100.json"), *base = fixture("results-h100.json");
    assert_int_equal(baseline_compare(cur, base, "b.json", -0.1, err, sizeof err), -1);
    assert_string_equal(err, "the regression threshold must be a fraction from 0 to 1, not -0.1");
    assert_int_equal(baseline_compare(cur, base, "b.json", NAN, err, sizeof err), -1);
    assert_int_equal(baseline_compare(cur, base, "b.json", 5, err, sizeof err), -1);
    assert_null(json_object_get(cur, "baseline")); /* untouched on error */

    json_t *other = json_pack("{s:s}", "schema", "something/1");
    assert_int_equal(baseline_compare(cur, other, "x.json", 0.05, err, sizeof err), -1);
    assert_string_equal(err, "baseline 'x.json' is not an autobatch results file");
    assert_int_equal(baseline_compare(other, base, "b.json", 0.05, err, sizeof err), -1);
    json_t *arr = json_array();
    assert_int_equal(baseline_compare(cur, arr, "b.json", 0.05, err, sizeof err), -1);
    assert_null(json_object_get(cur, "baseline"));

    /* A NULL path is recorded as null. */
    assert_int_equal(baseline_compare(cur, base, NULL, 0.05, err, sizeof err), 0);
    assert_true(json_is_null(json_object_get(json_object_get(cur, "baseline"), "file")));
    json_decref(arr);
    json_decref(other);
    json_decref(cur);
    json_decref(base);
}

static void test_load(void **state)
{
    (void)state;
    char err[256] = "";
    char *good = data_path("results-h100.json");
    json_t *j = baseline_load(good, err, sizeof err);
    assert_non_null(j);
    json_decref(j);
    free(good);

    assert_null(baseline_load("/nonexistent/base.json", err, sizeof err));
    assert_string_equal(err, "cannot read baseline '/nonexistent/base.json': No such file or directory");

    char path[] = "/tmp/ab_test_baseline_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "{\"schema\": ", 11), 11);
    close(fd);
    assert_null(baseline_load(path, err, sizeof err));
    assert_non_null(strstr(err, "cannot parse baseline '"));
    FILE *f = fopen(path, "w");
    fputs("{\"trials\": []}\n", f);
    fclose(f);
    assert_null(baseline_load(path, err, sizeof err));
    assert_non_null(strstr(err, "is not an autobatch results file"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unchanged),
        cmocka_unit_test(test_throughput_threshold),
        cmocka_unit_test(test_choice_changed),
        cmocka_unit_test(test_cell_shrinks),
        cmocka_unit_test(test_cell_grows),
        cmocka_unit_test(test_cell_not_comparable),
        cmocka_unit_test(test_cells_added_removed),
        cmocka_unit_test(test_different_command),
        cmocka_unit_test(test_nothing_chosen),
        cmocka_unit_test(test_within_spread),
        cmocka_unit_test(test_like_with_like),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
