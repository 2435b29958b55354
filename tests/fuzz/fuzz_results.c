/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for everything that reads a results file back: the
 * loader (results_loadb, behind `autobatch report`, `matrix`, `notify`
 * and --baseline), the regression gate (baseline_compare, both ways
 * round and against itself), the reports of the compared document, the
 * matrix, and the webhook payloads.  Arbitrary bytes; besides not
 * crashing (ASan, UBSan) and not hanging (-timeout), it checks what the
 * callers rely on:
 *   - the loader returns an object, or NULL with a one-line message that
 *     holds no control character (it goes to the user's terminal);
 *   - baseline_compare() on a loaded document succeeds, stores an object
 *     with a "changes" array, and the stored verdict agrees with the
 *     return value;
 *   - every renderer either renders or refuses with a message;
 *   - every webhook payload is JSON.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/baseline.h"
#include "output/matrix.h"
#include "output/report.h"
#include "output/results.h"
#include "output/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * results.c's writer names outcomes through trial.c, which the loader
 * does not need and which would pull the whole trial runner into this
 * binary: nothing here writes a results file, so reaching this is a bug.
 */
const char *trial_outcome_name(enum trial_outcome o)
{
    (void)o;
    abort();
}

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_results: check failed: %s (line %d)\n", #cond, __LINE__);       \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static void check_message(const char *err)
{
    CHECK(*err);
    for (const char *p = err; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
}

static void render_all(const json_t *doc)
{
    static const enum report_format fmts[] = { REPORT_MARKDOWN, REPORT_HTML, REPORT_JUNIT };
    for (size_t k = 0; k < 3; k++) {
        char *out = NULL, err[512] = "";
        size_t len = 0;
        if (report_render(doc, fmts[k], &out, &len, err, sizeof err))
            check_message(err);
        else
            CHECK(out && strlen(out) == len);
        free(out);
    }
    for (int f = 0; f < 4; f++) {
        char *body = NULL, err[512] = "";
        size_t len = 0;
        if (webhook_payload(doc, (enum webhook_format)f, &body, &len, err, sizeof err)) {
            check_message(err);
            continue;
        }
        json_error_t je;
        json_t *back = json_loadb(body, len, 0, &je);
        if (!back)
            fprintf(stderr, "fuzz_results: webhook payload %d is not JSON: %s\n%.*s\n", f, je.text,
                    (int)len, body);
        CHECK(back);
        json_decref(back);
        free(body);
    }
}

static void compare(const json_t *cur, const json_t *base)
{
    char err[512] = "";
    json_t *c = json_deep_copy(cur);
    CHECK(c);
    int r = baseline_compare(c, base, "base.json", 0.05, err, sizeof err);
    if (r < 0) {
        check_message(err);
    } else {
        const json_t *v = json_object_get(c, "baseline");
        CHECK(json_is_object(v) && json_is_array(json_object_get(v, "changes")));
        CHECK(json_is_true(json_object_get(v, "regression")) == (r == 1));
        render_all(c);
    }
    json_decref(c);
}

static json_t *seed_doc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512] = "";
    if (!seed_doc) {
        static const char seed[] =
            "{\"schema\": \"autobatch.results/1\", \"command\": [\"train\"], \"trials\": [],"
            " \"max_fit\": [{\"grad_accum\": 1, \"checkpointing\": false, \"micro_batch\": 8,"
            " \"smallest_fail\": 9}], \"best\": {\"micro_batch\": 8, \"grad_accum\": 1,"
            " \"checkpointing\": false, \"samples_per_s\": 10.0}}";
        seed_doc = results_loadb(seed, sizeof seed - 1, "results", "seed", err, sizeof err);
        CHECK(seed_doc);
    }
    json_t *doc = results_loadb((const char *)data, size, "results", "fuzz.json", err, sizeof err);
    if (!doc) {
        check_message(err);
        return 0;
    }
    CHECK(json_is_object(doc));
    render_all(doc);

    json_t *docs[2] = { doc, seed_doc };
    for (int f = 0; f < 2; f++) {
        char *out = NULL;
        size_t len = 0;
        err[0] = '\0';
        if (matrix_render(docs, NULL, 2, f ? MATRIX_JSON : MATRIX_MARKDOWN, &out, &len, err,
                          sizeof err))
            check_message(err);
        else
            CHECK(out && strlen(out) == len);
        free(out);
    }

    /* The gate both ways round, and against itself.  A document whose
     * "schema" is not a string is a valid current run but not a
     * baseline file; baseline_compare() takes it either way. */
    compare(doc, seed_doc);
    compare(seed_doc, doc);
    compare(doc, doc);
    json_decref(doc);
    return 0;
}
