/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for jedit: every JSON file of the corpus (tests/corpus/,
 * found through AB_SOURCE_DIR), then the hard cases as inline documents.
 *
 * Corpus edits are checked against bytes the test computes itself: the
 * original with exactly the old value's bytes replaced on the line that
 * tests/corpus/INDEX.md names, so a bug in the editor cannot also be in
 * the expectation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jedit.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

struct buf {
    char *p;
    size_t n;
};

static void buf_free(struct buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = 0;
}

static const char *corpus_dir(void)
{
    static char dir[4096];
    const char *src = getenv("AB_SOURCE_DIR");
    if (!src || !*src)
        fail_msg("AB_SOURCE_DIR is not set: run with AB_SOURCE_DIR=<repository root> so the "
                 "corpus is found at $AB_SOURCE_DIR/tests/corpus/");
    snprintf(dir, sizeof dir, "%s/tests/corpus", src);
    return dir;
}

static struct buf slurp(const char *rel)
{
    char path[4608];
    snprintf(path, sizeof path, "%s/%s", corpus_dir(), rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open '%s'", path);
    struct buf b = { NULL, 0 };
    size_t cap = 0;
    for (;;) {
        if (b.n == cap) {
            cap = cap ? cap * 2 : 65536;
            b.p = realloc(b.p, cap);
            assert_non_null(b.p);
        }
        size_t got = fread(b.p + b.n, 1, cap - b.n, f);
        if (!got)
            break;
        b.n += got;
    }
    fclose(f);
    return b;
}

/* Fail, showing both texts, unless got[0..gn) equals want[0..wn). */
static void assert_bytes(const char *got, size_t gn, const char *want, size_t wn)
{
    if (gn == wn && !memcmp(got, want, wn))
        return;
    fprintf(stderr, "---- got (%zu bytes)\n%.*s\n---- want (%zu bytes)\n%.*s\n----\n", gn,
            (int)gn, got, wn, (int)wn, want);
    fail_msg("output differs from the expected bytes");
}

/* Set and return the new bytes, asserting success. */
static struct buf set_ok(const char *doc, size_t len, const char *key, const char *value)
{
    struct buf b = { NULL, 0 };
    char err[256] = "x";
    enum cedit_status st = jedit_set(doc, len, key, value, &b.p, &b.n, err, sizeof err);
    if (st != CEDIT_OK)
        fail_msg("set '%s'='%s' failed with %d: %s", key, value, (int)st, err);
    assert_non_null(b.p);
    assert_string_equal(err, "");
    return b;
}

static void expect_get(const char *doc, size_t len, const char *key, const char *want)
{
    char *v = NULL, err[256];
    enum cedit_status st = jedit_get(doc, len, key, &v, err, sizeof err);
    if (st != CEDIT_OK)
        fail_msg("get '%s' failed with %d: %s", key, (int)st, err);
    assert_non_null(v);
    assert_string_equal(v, want);
    free(v);
}

/* set on an inline document; the whole output must be want; get returns got_back. */
static void expect_set(const char *doc, const char *key, const char *value, const char *want,
                       const char *got_back)
{
    struct buf b = set_ok(doc, strlen(doc), key, value);
    assert_bytes(b.p, b.n, want, strlen(want));
    expect_get(b.p, b.n, key, got_back ? got_back : value);
    buf_free(&b);
}

/* A failing set: the status, no output, and a message holding `msg`. */
static void expect_set_fail_n(const char *doc, size_t len, const char *key, const char *value,
                              enum cedit_status want, const char *msg)
{
    char *out = (char *)"sentinel", err[256] = "";
    size_t outlen = 99;
    enum cedit_status st = jedit_set(doc, len, key, value, &out, &outlen, err, sizeof err);
    if (st != want)
        fail_msg("set '%s' gave %d, want %d (%s)", key ? key : "(null)", (int)st, (int)want, err);
    assert_null(out);
    assert_int_equal(outlen, 0);
    assert_true(err[0] != '\0');
    if (msg && !strstr(err, msg))
        fail_msg("message '%s' does not contain '%s'", err, msg);
}

static void expect_set_fail(const char *doc, const char *key, const char *value,
                            enum cedit_status want, const char *msg)
{
    expect_set_fail_n(doc, strlen(doc), key, value, want, msg);
}

static void expect_get_fail_n(const char *doc, size_t len, const char *key,
                              enum cedit_status want, const char *msg)
{
    char *v = (char *)"sentinel", err[256] = "";
    enum cedit_status st = jedit_get(doc, len, key, &v, err, sizeof err);
    if (st != want)
        fail_msg("get '%s' gave %d, want %d (%s)", key, (int)st, (int)want, err);
    assert_null(v);
    if (msg && !strstr(err, msg))
        fail_msg("message '%s' does not contain '%s'", err, msg);
}

static void expect_get_fail(const char *doc, const char *key, enum cedit_status want,
                            const char *msg)
{
    expect_get_fail_n(doc, strlen(doc), key, want, msg);
}

/* Byte offset where 1-based line `line` starts, and its length without the break. */
static size_t line_span(const struct buf *b, int line, size_t *len)
{
    size_t off = 0;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(b->p + off, '\n', b->n - off);
        if (!nl)
            fail_msg("the file has no line %d", line);
        off = (size_t)(nl - b->p) + 1;
    }
    const char *nl = memchr(b->p + off, '\n', b->n - off);
    *len = (nl ? (size_t)(nl - b->p) : b->n) - off;
    return off;
}

/* Offset of the one occurrence of needle on line `line`; fails unless there is exactly one. */
static size_t find_on_line(const struct buf *b, int line, const char *needle)
{
    size_t len, off = line_span(b, line, &len), nlen = strlen(needle), at = 0, count = 0;
    for (size_t i = 0; i + nlen <= len; i++)
        if (!memcmp(b->p + off + i, needle, nlen))
            at = off + i, count++;
    if (count != 1)
        fail_msg("'%s' occurs %zu times on line %d, want once", needle, count, line);
    return at;
}

/* A copy of b with n bytes at off replaced by text. */
static struct buf splice(const struct buf *b, size_t off, size_t n, const char *text)
{
    size_t tl = strlen(text);
    struct buf r = { malloc(b->n - n + tl + 1), b->n - n + tl };
    assert_non_null(r.p);
    memcpy(r.p, b->p, off);
    memcpy(r.p + off, text, tl);
    memcpy(r.p + off + tl, b->p + off + n, b->n - off - n);
    return r;
}

/* ------------------------------------------------------------------ */
/* The corpus                                                         */
/* ------------------------------------------------------------------ */

/**
 * A knob of a corpus file (from tests/corpus/INDEX.md): on `line`, the
 * bytes `old` follow `before`; setting `value` must write `bytes` there
 * instead, and jedit_get on the original returns `was`.
 */
struct knob {
    const char *file, *key;
    int line;
    const char *before, *old, *value, *bytes, *was;
};

static const struct knob knobs[] = {
    { "parler-tts/starting_point_v1.json", "per_device_train_batch_size", 47,
      "\"per_device_train_batch_size\": ", "6", "128", "128", "6" },
    { "parler-tts/starting_point_v1.json", "gradient_accumulation_steps", 45,
      "\"gradient_accumulation_steps\": ", "4", "16", "16", "4" },
    { "parler-tts/starting_point_v1.json", "gradient_checkpointing", 46,
      "\"gradient_checkpointing\": ", "false", "true", "true", "false" },
    { "coqui-TTS/tacotron2-DDC.json", "batch_size", 47, "\"batch_size\": ", "32", "128", "128",
      "32" },
    { "coqui-TTS/tacotron2-DDC.json", "gradual_training.2.2", 89, "[50000, 3, ", "32", "1024",
      "1024", "32" },
    { "coqui-TTS/test_tacotron2_config.json", "batch_size", 64, "\"batch_size\": ", "8", "32",
      "32", "8" },
    { "coqui-TTS/test_tacotron2_config.json", "gradual_training.1.2", 67, "[1, 5, ", "2", "16",
      "16", "2" },
    { "vits/ljs_base.json", "train.batch_size", 10, "\"batch_size\": ", "64", "8", "8", "64" },
    { "accelerate/zero_stage2_config.json", "train_micro_batch_size_per_gpu", 41,
      "\"train_micro_batch_size_per_gpu\": ", "\"auto\"", "16", "16", "auto" },
    { "accelerate/zero_stage2_config.json", "train_batch_size", 40, "\"train_batch_size\": ",
      "\"auto\"", "128", "128", "auto" },
    { "accelerate/zero_stage2_config.json", "gradient_accumulation_steps", 37,
      "\"gradient_accumulation_steps\": ", "1", "16", "16", "1" },
    { "CosyVoice/ds_stage2.json", "train_micro_batch_size_per_gpu", 2,
      "\"train_micro_batch_size_per_gpu\": ", "1", "32", "32", "1" },
    { "CosyVoice/ds_stage2.json", "gradient_accumulation_steps", 3,
      "\"gradient_accumulation_steps\": ", "1", "16", "16", "1" },
    { "GPT-SoVITS/s2.json", "train.batch_size", 13, "\"batch_size\": ", "32", "4", "4", "32" },
    { "GPT-SoVITS/s2.json", "train.grad_ckpt", 22, "\"grad_ckpt\": ", "false", "true", "true",
      "false" },
    { "Amphion/base.json", "train.batch_size", 125, "\"batch_size\": ", "16", "4", "4", "16" },
    { "Amphion/base.json", "train.gradient_accumulation_step", 177,
      "\"gradient_accumulation_step\": ", "1", "32", "32", "1" },
    { "Amphion/vits.json", "train.batch_size", 86, "\"batch_size\": ", "16", "128", "128", "16" },
};

#define NKNOBS (sizeof knobs / sizeof knobs[0])

static void test_corpus_knob(void **state)
{
    const struct knob *k = *state;
    struct buf orig = slurp(k->file);
    expect_get(orig.p, orig.n, k->key, k->was);

    /* The expectation, computed from the line INDEX.md names. */
    size_t at = find_on_line(&orig, k->line, k->before) + strlen(k->before);
    assert_memory_equal(orig.p + at, k->old, strlen(k->old));
    struct buf want = splice(&orig, at, strlen(k->old), k->bytes);
    assert_true(strlen(k->bytes) != strlen(k->old)); /* a different width */

    struct buf got = set_ok(orig.p, orig.n, k->key, k->value);
    assert_bytes(got.p, got.n, want.p, want.n);
    expect_get(got.p, got.n, k->key, k->value);

    /* Setting the old value back gives the original, byte for byte. */
    struct buf back = set_ok(got.p, got.n, k->key, k->was);
    assert_bytes(back.p, back.n, orig.p, orig.n);

    buf_free(&back);
    buf_free(&got);
    buf_free(&want);
    buf_free(&orig);
}

/**
 * Insertion into a corpus file: the expectation adds "," after `comma_after`
 * on `line` (unless NULL: the member already has a trailing comma) and a
 * new line `newline` after that line.
 */
struct insertion {
    const char *file, *key, *value;
    int line;
    const char *comma_after, *newline;
};

static const struct insertion insertions[] = {
    /* After the last member of a nested object. */
    { "vits/ljs_base.json", "train.gradient_checkpointing", "true", 17, "\"c_kl\": 1.0",
      "    \"gradient_checkpointing\": true" },
    /* The last member has a trailing // comment: the comma goes before it. */
    { "Amphion/base.json", "train.gradient_checkpointing", "true", 183,
      "\"multi_speaker_training\": false", "    \"gradient_checkpointing\": true" },
    /* The object uses a trailing comma: the new member gets one too. */
    { "Amphion/vits.json", "train.AdamW.weight_decay", "0.01", 98, NULL,
      "            \"weight_decay\": 0.01," },
    /* The last member is an object: the comma follows its '}'. */
    { "CosyVoice/ds_stage2.json", "gradient_checkpointing", "false", 41, "  }",
      "  \"gradient_checkpointing\": false" },
    /* The last member is a list whose key line ends in a comment. */
    { "coqui-TTS/test_tacotron2_config.json", "grad_accum", "2", 174, "        ]",
      "    \"grad_accum\": 2" },
    /* A string value, into a tab-indented sibling's object (L43 closes gst). */
    { "coqui-TTS/tacotron2-DDC.json", "gst.gst_style", "calm", 42,
      "\"gst_use_speaker_embedding\": false", "        \"gst_style\": \"calm\"" },
    { "parler-tts/starting_point_v1.json", "gradient_checkpointing_kwargs", "x y", 75,
      "\"attn_implementation\": \"sdpa\"", "    \"gradient_checkpointing_kwargs\": \"x y\"" },
};

#define NINSERTIONS (sizeof insertions / sizeof insertions[0])

static void test_corpus_insertion(void **state)
{
    const struct insertion *t = *state;
    struct buf orig = slurp(t->file);
    expect_get_fail_n(orig.p, orig.n, t->key, CEDIT_NOT_FOUND, "not found");

    struct buf tmp = { NULL, 0 }, want;
    const struct buf *base = &orig;
    if (t->comma_after) {
        size_t at = find_on_line(&orig, t->line, t->comma_after) + strlen(t->comma_after);
        tmp = splice(&orig, at, 0, ",");
        base = &tmp;
    }
    size_t len, off = line_span(base, t->line, &len);
    char text[512];
    snprintf(text, sizeof text, "\n%s", t->newline);
    want = splice(base, off + len, 0, text);

    struct buf got = set_ok(orig.p, orig.n, t->key, t->value);
    assert_bytes(got.p, got.n, want.p, want.n);
    expect_get(got.p, got.n, t->key, t->value);

    buf_free(&got);
    buf_free(&want);
    buf_free(&tmp);
    buf_free(&orig);
}

/* Every JSON file in the corpus must have its knobs in the table above. */
static char seen_json[64][256];
static size_t nseen_json;

static int collect_json(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    size_t n = strlen(path);
    if (type == FTW_F && n > 5 && !strcmp(path + n - 5, ".json") && nseen_json < 64)
        snprintf(seen_json[nseen_json++], sizeof seen_json[0], "%s", path);
    return 0;
}

static void test_corpus_every_json_file(void **state)
{
    (void)state;
    const char *dir = corpus_dir();
    nseen_json = 0;
    assert_int_equal(nftw(dir, collect_json, 16, FTW_PHYS), 0);
    assert_int_equal(nseen_json, 9); /* INDEX.md lists 9 JSON files */
    for (size_t i = 0; i < nseen_json; i++) {
        const char *rel = seen_json[i] + strlen(dir) + 1;
        int found = 0;
        for (size_t k = 0; k < NKNOBS; k++)
            found |= !strcmp(knobs[k].file, rel);
        if (!found)
            fail_msg("corpus file '%s' has no knob in this test's table", rel);
        /* It parses, and a missing key is reported as such. */
        struct buf b = slurp(rel);
        char *v = NULL, err[256];
        assert_int_equal(jedit_get(b.p, b.n, "no_such_key_anywhere", &v, err, sizeof err),
                         CEDIT_NOT_FOUND);
        assert_null(v);
        buf_free(&b);
    }
}

/* coqui's duplicated ga_alpha/loss_masking refuse edits of themselves only. */
static void test_corpus_duplicates_elsewhere(void **state)
{
    (void)state;
    struct buf b = slurp("coqui-TTS/test_tacotron2_config.json");
    char *out = NULL, *v = NULL, err[256];
    size_t outlen = 0;
    assert_int_equal(jedit_get(b.p, b.n, "ga_alpha", &v, err, sizeof err), CEDIT_AMBIGUOUS);
    assert_non_null(strstr(err, "lines 69 and 85"));
    assert_int_equal(jedit_set(b.p, b.n, "loss_masking", "false", &out, &outlen, err, sizeof err),
                     CEDIT_AMBIGUOUS);
    assert_null(out);
    assert_int_equal(outlen, 0);
    /* Non-scalars and decoys. */
    assert_int_equal(jedit_get(b.p, b.n, "datasets", &v, err, sizeof err), CEDIT_NOT_SCALAR);
    assert_int_equal(jedit_get(b.p, b.n, "gradual_training", &v, err, sizeof err),
                     CEDIT_NOT_SCALAR);
    /* "characters" exists only inside a comment. */
    assert_int_equal(jedit_get(b.p, b.n, "characters.pad", &v, err, sizeof err), CEDIT_NOT_FOUND);
    expect_get(b.p, b.n, "datasets.0.path", "tests/data/ljspeech/");
    expect_get(b.p, b.n, "distributed.url", "tcp://localhost:54321");
    expect_get(b.p, b.n, "gst.gst_num_heads", "4");
    expect_get(b.p, b.n, "checkpoint", "true");
    buf_free(&b);

    /* The same key in sibling objects (fp16.enabled, bf16.enabled) is fine. */
    b = slurp("CosyVoice/ds_stage2.json");
    struct buf got = set_ok(b.p, b.n, "bf16.enabled", "true");
    size_t at = find_on_line(&b, 17, "\"enabled\": ") + strlen("\"enabled\": ");
    struct buf want = splice(&b, at, strlen("false"), "true");
    assert_bytes(got.p, got.n, want.p, want.n);
    buf_free(&want);
    buf_free(&got);
    buf_free(&b);
}

/* Escaped slashes elsewhere in the file survive an edit next to them. */
static void test_corpus_escaped_slashes(void **state)
{
    (void)state;
    struct buf b = slurp("coqui-TTS/tacotron2-DDC.json");
    struct buf got = set_ok(b.p, b.n, "distributed.backend", "gloo");
    size_t at = find_on_line(&b, 51, "\"nccl\"");
    struct buf want = splice(&b, at, strlen("\"nccl\""), "\"gloo\"");
    assert_bytes(got.p, got.n, want.p, want.n);
    const char *url = "\"tcp:\\/\\/localhost:54321\"";
    assert_non_null(memmem(got.p, got.n, url, strlen(url)));
    buf_free(&want);
    buf_free(&got);
    buf_free(&b);
}

/* ------------------------------------------------------------------ */
/* Hard cases                                                         */
/* ------------------------------------------------------------------ */

static void test_comment_decoys(void **state)
{
    (void)state;
    const char *doc = "{\n"
                      "  // \"batch_size\": 99,\n"
                      "  /* \"batch_size\": 98, */\n"
                      "  \"batch_size\": 4, // \"batch_size\": 97\n"
                      "  \"x\": 1 /* \"batch_size\": 96 */\n"
                      "}\n";
    expect_get(doc, strlen(doc), "batch_size", "4");
    expect_set(doc, "batch_size", "16",
               "{\n"
               "  // \"batch_size\": 99,\n"
               "  /* \"batch_size\": 98, */\n"
               "  \"batch_size\": 16, // \"batch_size\": 97\n"
               "  \"x\": 1 /* \"batch_size\": 96 */\n"
               "}\n",
               NULL);
    /* A key that is only in comments is not there. */
    expect_get_fail("{\n  // \"lr\": 1\n  \"a\": 2\n}", "lr", CEDIT_NOT_FOUND, "'lr' not found");
}

static void test_key_inside_string(void **state)
{
    (void)state;
    const char *doc = "{\"note\": \"\\\"batch_size\\\": 3, batch_size: 2\", \"batch_size\": 4}";
    expect_get(doc, strlen(doc), "note", "\"batch_size\": 3, batch_size: 2");
    expect_set(doc, "batch_size", "64",
               "{\"note\": \"\\\"batch_size\\\": 3, batch_size: 2\", \"batch_size\": 64}", NULL);
    /* "a.b" inside a string value is not a path. */
    expect_get_fail("{\"a\": \"{\\\"b\\\": 1}\"}", "a.b", CEDIT_NOT_FOUND, "is a string");
}

static void test_block_comments_around_colon(void **state)
{
    (void)state;
    expect_set("{\"a\" /* k */ : /* v */ 1, \"b\"/**/:/**/2}", "a", "22",
               "{\"a\" /* k */ : /* v */ 22, \"b\"/**/:/**/2}", NULL);
    expect_set("{\"a\" /* k */ : /* v */ 1, \"b\"/**/:/**/2}", "b", "false",
               "{\"a\" /* k */ : /* v */ 1, \"b\"/**/:/**/false}", NULL);
    /* A multi-line block comment between key and value. */
    expect_set("{\n  \"a\": /* one\n  two */ \"x\"\n}", "a", "y",
               "{\n  \"a\": /* one\n  two */ \"y\"\n}", NULL);
}

static void test_comment_then_value_on_next_line(void **state)
{
    (void)state;
    const char *doc = "{\n"
                      "    \"datasets\":   // List of datasets.\n"
                      "        8,\n"
                      "    \"b\": 1\n"
                      "}";
    expect_set(doc, "datasets", "16",
               "{\n"
               "    \"datasets\":   // List of datasets.\n"
               "        16,\n"
               "    \"b\": 1\n"
               "}",
               NULL);
    /* The same shape holding a list is not a scalar; its items are. */
    const char *lst = "{\n    \"datasets\":   // c\n        [\n            {\"p\": \"x\"}\n        ]\n}";
    expect_set_fail(lst, "datasets", "1", CEDIT_NOT_SCALAR, "is a list");
    expect_set(lst, "datasets.0.p", "y",
               "{\n    \"datasets\":   // c\n        [\n            {\"p\": \"y\"}\n        ]\n}",
               NULL);
}

static void test_trailing_commas(void **state)
{
    (void)state;
    const char *doc = "{\n  \"a\": 1,\n  \"b\": [1, 2,],\n  \"c\": {\"d\": true,},\n}";
    expect_set(doc, "b.1", "20", "{\n  \"a\": 1,\n  \"b\": [1, 20,],\n  \"c\": {\"d\": true,},\n}",
               NULL);
    expect_set(doc, "c.d", "FALSE", "{\n  \"a\": 1,\n  \"b\": [1, 2,],\n  \"c\": {\"d\": false,},\n}",
               "false");
    /* A comma with nothing before it is not a trailing comma. */
    expect_set_fail("{,}", "a", "1", CEDIT_MALFORMED, "line 1, column 2");
    expect_set_fail("[1,,]", "0", "1", CEDIT_MALFORMED, "line 1, column 4");
}

/* Python's json writes Infinity, -Infinity and NaN (Coqui's saved
 * config.json holds "max_audio_len": Infinity); they stay byte for byte. */
static void test_python_float_literals(void **state)
{
    (void)state;
    const char *doc = "{\n    \"batch_size\": 32,\n    \"max_audio_len\": Infinity,\n"
                      "    \"min\": -Infinity,\n    \"x\": [NaN, 1]\n}";
    expect_set(doc, "batch_size", "7", "{\n    \"batch_size\": 7,\n    \"max_audio_len\": Infinity,\n"
               "    \"min\": -Infinity,\n    \"x\": [NaN, 1]\n}", NULL);
    expect_set(doc, "x.1", "2", "{\n    \"batch_size\": 32,\n    \"max_audio_len\": Infinity,\n"
               "    \"min\": -Infinity,\n    \"x\": [NaN, 2]\n}", NULL);
    /* Only the exact words: other bare words are still errors. */
    expect_set_fail("{\"a\": Inf}", "a", "1", CEDIT_MALFORMED, "unexpected 'Inf'");
    expect_set_fail("{\"a\": -Infinityx}", "a", "1", CEDIT_MALFORMED, "line 1");
}

static void test_escapes_untouched(void **state)
{
    (void)state;
    const char *doc = "{\"url\": \"tcp:\\/\\/localhost:54321\", \"u\": \"\\u00e9\\ud83d\\ude00\\n\","
                      " \"raw\": \"\xc9\x99\", \"n\": 1}";
    expect_get(doc, strlen(doc), "url", "tcp://localhost:54321");
    expect_get(doc, strlen(doc), "u", "\xc3\xa9\xf0\x9f\x98\x80\n");
    expect_get(doc, strlen(doc), "raw", "\xc9\x99");
    expect_set(doc, "n", "200",
               "{\"url\": \"tcp:\\/\\/localhost:54321\", \"u\": \"\\u00e9\\ud83d\\ude00\\n\","
               " \"raw\": \"\xc9\x99\", \"n\": 200}",
               NULL);
    /* Keys are compared after decoding. */
    expect_set("{\"b\\u0061tch\": 1}", "batch", "2", "{\"b\\u0061tch\": 2}", NULL);
    /* A lone surrogate reads as U+FFFD. */
    const char *lone = "{\"s\": \"\\ud800x\"}";
    expect_get(lone, strlen(lone), "s", "\xef\xbf\xbdx");
}

static void test_duplicate_target(void **state)
{
    (void)state;
    expect_set_fail("{\"a\": 1, \"b\": 2, \"a\": 3}", "a", "5", CEDIT_AMBIGUOUS, "ambiguous");
    expect_get_fail("{\"a\": 1, \"b\": 2, \"a\": 3}", "a", CEDIT_AMBIGUOUS, "lines 1 and 1");
    /* Spelled differently, decoded the same. */
    expect_set_fail("{\"a\": 1, \"\\u0061\": 3}", "a", "5", CEDIT_AMBIGUOUS, NULL);
    /* A duplicated step of the path is ambiguous too. */
    expect_set_fail("{\"t\": {\"x\": 1}, \"t\": {\"y\": 2}}", "t.x", "5", CEDIT_AMBIGUOUS,
                    "'t' is ambiguous");
    /* Duplicates at another level do not matter. */
    expect_set("{\"a\": 1, \"a\": 2, \"t\": {\"a\": 3}}", "t.a", "4",
               "{\"a\": 1, \"a\": 2, \"t\": {\"a\": 4}}", NULL);
}

static void test_insert_block(void **state)
{
    (void)state;
    expect_set("{\n  \"a\": 1\n}", "b", "2", "{\n  \"a\": 1,\n  \"b\": 2\n}", NULL);
    /* Nested, no final newline, blank line and comment lines kept below. */
    expect_set("{\n    \"t\": {\n        \"a\": \"x\"\n\n        // end\n    }\n}", "t.b", "on",
               "{\n    \"t\": {\n        \"a\": \"x\",\n        \"b\": \"on\"\n\n        // end\n    }\n}",
               NULL);
    /* The separator style of the last member is kept. */
    expect_set("{\n\t\"a\" : 1\n}", "b", "true", "{\n\t\"a\" : 1,\n\t\"b\" : true\n}", NULL);
    expect_set("{\n  \"a\":1\n}", "b", "x", "{\n  \"a\":1,\n  \"b\":\"x\"\n}", NULL);
    /* A closing brace on the last member's line stays after the new member. */
    expect_set("{\n  \"a\": 1 }", "b", "2", "{\n  \"a\": 1,\n  \"b\": 2 }", NULL);
    /* The last member's value is an object spanning lines. */
    expect_set("{\n  \"a\": {\n    \"x\": 1\n  }\n}", "b", "null",
               "{\n  \"a\": {\n    \"x\": 1\n  },\n  \"b\": null\n}", NULL);
    /* The key is escaped. */
    expect_set("{\n  \"a\": 1\n}", "q\"k", "v", "{\n  \"a\": 1,\n  \"q\\\"k\": \"v\"\n}", NULL);
}

static void test_insert_after_comment(void **state)
{
    (void)state;
    expect_set("{\n  \"a\": 1 // one\n}", "b", "2", "{\n  \"a\": 1, // one\n  \"b\": 2\n}", NULL);
    expect_set("{\n  \"a\": 1 /* x */ // one\n}", "b", "2",
               "{\n  \"a\": 1, /* x */ // one\n  \"b\": 2\n}", NULL);
    expect_set("{\n  \"a\": \"s\", // one\n}", "b", "2",
               "{\n  \"a\": \"s\", // one\n  \"b\": 2,\n}", NULL);
}

static void test_insert_empty_object(void **state)
{
    (void)state;
    expect_set("{}", "k", "1", "{\"k\": 1}", NULL);
    expect_set("{\"a\": {}}", "a.k", "v", "{\"a\": {\"k\": \"v\"}}", NULL);
    expect_set("{\n  \"a\": { }\n}", "a.k", "true", "{\n  \"a\": {\"k\": true }\n}", NULL);
    /* Into an empty list: never. */
    expect_set_fail("{\"a\": []}", "a.0", "1", CEDIT_NOT_FOUND, "0 items");
}

static void test_insert_trailing_comma(void **state)
{
    (void)state;
    expect_set("{\n  \"a\": 1,\n}", "b", "2", "{\n  \"a\": 1,\n  \"b\": 2,\n}", NULL);
    expect_set("{\"a\": 1, \"c\": 3,}", "b", "2", "{\"a\": 1, \"c\": 3, \"b\": 2,}", NULL);
}

static void test_insert_inline(void **state)
{
    (void)state;
    expect_set("{\"a\": 1, \"c\": 3}", "b", "2", "{\"a\": 1, \"c\": 3, \"b\": 2}", NULL);
    expect_set("{\"a\":1,\"c\":3}", "b", "2", "{\"a\":1,\"c\":3,\"b\":2}", NULL);
    /* The blanks after the last separator are copied, not the first. */
    expect_set("{\"a\": 1,\"b\": 2,  \"c\": 3}", "d", "4",
               "{\"a\": 1,\"b\": 2,  \"c\": 3,  \"d\": 4}", NULL);
    expect_set("{\"t\": {\"a\": 1,  \"c\": 3}\n}", "t.b", "x",
               "{\"t\": {\"a\": 1,  \"c\": 3,  \"b\": \"x\"}\n}", NULL);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_set_fail("{\"a\": \"abc", "a", "1", CEDIT_MALFORMED,
                    "line 1, column 7: unterminated string");
    expect_set_fail("{\n  \"a\": \"abc\n}", "a", "1", CEDIT_MALFORMED,
                    "line 2, column 8: unterminated string");
    expect_set_fail("{\n  \"a\" 1\n}", "a", "2", CEDIT_MALFORMED,
                    "line 2, column 7: expected ':' after key");
    expect_set_fail("{\n  \"a\": 1\n", "a", "2", CEDIT_MALFORMED,
                    "line 3, column 1: unexpected end of input: the '{' at line 1, column 1");
    expect_get_fail("{\"a\": [1, 2}", "a", CEDIT_MALFORMED, "line 1, column 12: expected ',' or ']'");
    expect_get_fail("{\"a\": 1} x", "a", CEDIT_MALFORMED, "line 1, column 10");
    expect_get_fail("{\"a\": 1}\n\n 2", "a", CEDIT_MALFORMED,
                    "line 3, column 2: unexpected text after the end of the document");
    /* Old Mac line ends (lone CR) count as lines too. */
    expect_get_fail("{\r\"a\"\r1}", "a", CEDIT_MALFORMED, "line 3, column 1: expected ':'");
    expect_get_fail("{\"a\": 01}", "a", CEDIT_MALFORMED, "line 1, column 7: invalid number");
    expect_get_fail("{\"a\": True}", "a", CEDIT_MALFORMED, "line 1, column 7: unexpected 'True'");
    expect_get_fail("{\"a\": \"\\x\"}", "a", CEDIT_MALFORMED, "invalid escape");
    expect_get_fail("{\"a\": \"\t\"}", "a", CEDIT_MALFORMED, "control character");
    expect_get_fail("{\"a\": 1 /* x", "a", CEDIT_MALFORMED, "line 1, column 9: unterminated");
    expect_get_fail("{a: 1}", "a", CEDIT_MALFORMED, "line 1, column 2");
    expect_get_fail("{'a': 1}", "a", CEDIT_MALFORMED, "line 1, column 2");
    expect_get_fail("", "a", CEDIT_MALFORMED, "line 1, column 1: the document holds no value");
    expect_get_fail("  // only\n", "a", CEDIT_MALFORMED, "no value");
    /* Columns count characters: 'é' is one. */
    expect_get_fail("{\"\xc3\xa9\": 1,, }", "a", CEDIT_MALFORMED, "line 1, column 9");
    /* Deep nesting is no problem for the parser (it is iterative). */
    size_t n = 200000;
    char *deep = malloc(n + 1);
    assert_non_null(deep);
    memset(deep, '[', n);
    deep[n] = '\0';
    expect_get_fail(deep, "0", CEDIT_MALFORMED, "is not closed");
    free(deep);
}

static void test_not_scalar_and_missing_parent(void **state)
{
    (void)state;
    const char *doc = "{\"train\": {\"b\": [1, 2], \"o\": {}}, \"n\": 1}";
    expect_set_fail(doc, "train", "1", CEDIT_NOT_SCALAR, "is an object");
    expect_set_fail(doc, "train.b", "1", CEDIT_NOT_SCALAR, "is a list");
    expect_get_fail(doc, "train.o", CEDIT_NOT_SCALAR, NULL);
    expect_set_fail(doc, "nope.x", "1", CEDIT_NOT_FOUND, "parent 'nope' does not exist");
    expect_set_fail(doc, "train.nope.x", "1", CEDIT_NOT_FOUND, "parent 'train.nope'");
    expect_set_fail(doc, "n.x", "1", CEDIT_NOT_FOUND, "'n' is a number");
    expect_get_fail(doc, "train.zzz", CEDIT_NOT_FOUND, "'train.zzz' not found");
    expect_set_fail("[1]", "a", "1", CEDIT_NOT_FOUND, "is a list");
    expect_set_fail("5", "a", "1", CEDIT_NOT_FOUND, "the document is a number");
}

static void test_array_index(void **state)
{
    (void)state;
    const char *doc = "{\"a\": [[1, 2], [3, 4]], \"o\": {\"0\": \"zero\"}}";
    expect_get(doc, strlen(doc), "a.1.0", "3");
    expect_set(doc, "a.1.0", "333", "{\"a\": [[1, 2], [333, 4]], \"o\": {\"0\": \"zero\"}}", NULL);
    expect_set_fail(doc, "a.2.0", "1", CEDIT_NOT_FOUND, "the list has 2 items");
    expect_set_fail(doc, "a.x", "1", CEDIT_NOT_FOUND, "'x' is not an index");
    expect_set_fail(doc, "a.-1", "1", CEDIT_NOT_FOUND, "not an index");
    expect_set_fail(doc, "a.99999999999999999999999", "1", CEDIT_NOT_FOUND, NULL);
    /* A digit component in an object is a member name. */
    expect_set(doc, "o.0", "nil", "{\"a\": [[1, 2], [3, 4]], \"o\": {\"0\": \"nil\"}}", NULL);
    /* A top-level list. */
    expect_set("[1, {\"b\": 2}]", "1.b", "3", "[1, {\"b\": 3}]", NULL);
}

static void test_crlf(void **state)
{
    (void)state;
    const char *doc = "{\r\n  \"a\": 1, // c\r\n  \"b\": \"x\"\r\n}\r\n";
    expect_set(doc, "a", "10", "{\r\n  \"a\": 10, // c\r\n  \"b\": \"x\"\r\n}\r\n", NULL);
    expect_set(doc, "c", "2", "{\r\n  \"a\": 1, // c\r\n  \"b\": \"x\",\r\n  \"c\": 2\r\n}\r\n",
               NULL);
    expect_set("{\r\n  \"a\": 1 // c\r\n}", "c", "2", "{\r\n  \"a\": 1, // c\r\n  \"c\": 2\r\n}",
               NULL);
    expect_set_fail("{\r\n  \"a\" 1\r\n}", "a", "1", CEDIT_MALFORMED, "line 2, column 7");
}

static void test_bom(void **state)
{
    (void)state;
    const char *doc = "\xef\xbb\xbf{\"a\": 1, \"b\": [true]}";
    expect_get(doc, strlen(doc), "b.0", "true");
    expect_set(doc, "a", "22", "\xef\xbb\xbf{\"a\": 22, \"b\": [true]}", NULL);
    expect_set(doc, "c", "x", "\xef\xbb\xbf{\"a\": 1, \"b\": [true], \"c\": \"x\"}", NULL);
    expect_set("\xef\xbb\xbf{\n\"a\": 1\n}", "c", "2", "\xef\xbb\xbf{\n\"a\": 1,\n\"c\": 2\n}", NULL);
    expect_get_fail("\xef\xbb\xbf{\"a\" 1}", "a", CEDIT_MALFORMED, "line 1, column 6");
}

static void test_bad_key(void **state)
{
    (void)state;
    const char *doc = "{\"a\": {\"b\": 1}}";
    expect_set_fail(doc, "", "1", CEDIT_BAD_KEY, "empty key");
    expect_set_fail(doc, ".a", "1", CEDIT_BAD_KEY, "empty component");
    expect_set_fail(doc, "a..b", "1", CEDIT_BAD_KEY, "empty component");
    expect_set_fail(doc, "a.", "1", CEDIT_BAD_KEY, "empty component");
    expect_set_fail(doc, NULL, "1", CEDIT_BAD_KEY, NULL);
    expect_set_fail(doc, "a.\xff", "1", CEDIT_BAD_KEY, "UTF-8");
    expect_get_fail(doc, "", CEDIT_BAD_KEY, NULL);
    /* The key is checked before the document. */
    expect_set_fail("{", "", "1", CEDIT_BAD_KEY, NULL);
}

static void test_value_spelling(void **state)
{
    (void)state;
    /* DeepSpeed's "auto" -> a bare number, and back to the string. */
    expect_set("{\"m\": \"auto\"}", "m", "16", "{\"m\": 16}", NULL);
    expect_set("{\"m\": 16}", "m", "auto", "{\"m\": \"auto\"}", NULL);
    expect_set("{\"m\": \"auto\"}", "m", "auto", "{\"m\": \"auto\"}", NULL);
    /* A numeric-looking string stays a string. */
    expect_set("{\"m\": \"4\"}", "m", "16", "{\"m\": \"16\"}", NULL);
    expect_set("{\"m\": \"1e-4\"}", "m", "2e-4", "{\"m\": \"2e-4\"}", NULL);
    /* Numbers are written as given; other numeric spellings are strings. */
    expect_set("{\"m\": 1}", "m", "-2.5E+3", "{\"m\": -2.5E+3}", NULL);
    expect_set("{\"m\": 1}", "m", "+5", "{\"m\": \"+5\"}", NULL);
    expect_set("{\"m\": 1}", "m", "0x10", "{\"m\": \"0x10\"}", NULL);
    /* Booleans: JSON has one spelling. */
    expect_set("{\"c\": false}", "c", "True", "{\"c\": true}", "true");
    expect_set("{\"c\": 0}", "c", "TRUE", "{\"c\": true}", "true");
    expect_set("{\"c\": \"off\"}", "c", "false", "{\"c\": false}", NULL);
    /* ...but a quoted boolean word keeps its quotes and case pattern. */
    expect_set("{\"c\": \"True\"}", "c", "false", "{\"c\": \"False\"}", "False");
    expect_set("{\"c\": \"TRUE\"}", "c", "false", "{\"c\": \"FALSE\"}", "FALSE");
    /* null. */
    expect_set("{\"c\": 1}", "c", "null", "{\"c\": null}", NULL);
    expect_set("{\"c\": \"null\"}", "c", "null", "{\"c\": \"null\"}", NULL);
    expect_set("{\"c\": null}", "c", "Null", "{\"c\": \"Null\"}", NULL);
    /* Strings: JSON escapes, '/' and UTF-8 as they are. */
    expect_set("{\"s\": 1}", "s", "a\"b\\c\n\t\x01/\xc3\xa9",
               "{\"s\": \"a\\\"b\\\\c\\n\\t\\u0001/\xc3\xa9\"}", NULL);
    expect_set("{\"s\": \"x\"}", "s", "", "{\"s\": \"\"}", NULL);
    expect_set("{\"s\": \"x\"}", "s", " 16", "{\"s\": \" 16\"}", NULL);
}

static void test_get_values(void **state)
{
    (void)state;
    const char *doc = "{\"n\": -1.5e3, \"t\": true, \"f\": false, \"z\": null, \"s\": \"a\\tb\"}";
    expect_get(doc, strlen(doc), "n", "-1.5e3");
    expect_get(doc, strlen(doc), "t", "true");
    expect_get(doc, strlen(doc), "f", "false");
    expect_get(doc, strlen(doc), "z", "null");
    expect_get(doc, strlen(doc), "s", "a\tb");
    char err[8];
    char *v = NULL;
    /* A short error buffer is truncated, not overrun; NULL is fine too. */
    assert_int_equal(jedit_get(doc, strlen(doc), "x", &v, err, sizeof err), CEDIT_NOT_FOUND);
    assert_int_equal(strlen(err), sizeof err - 1);
    assert_int_equal(jedit_get(doc, strlen(doc), "x", &v, NULL, 0), CEDIT_NOT_FOUND);
    assert_int_equal(jedit_get(NULL, 0, "x", &v, NULL, 0), CEDIT_MALFORMED);
    assert_null(v);
}

static void test_odd_spacing(void **state)
{
    (void)state;
    const char *doc = "{\"key\" : 1,\"k2\":2,  \"k3\"  :  3\t,\n\n\n\t\"k4\":\t\"v\"   }";
    expect_set(doc, "key", "10", "{\"key\" : 10,\"k2\":2,  \"k3\"  :  3\t,\n\n\n\t\"k4\":\t\"v\"   }",
               NULL);
    expect_set(doc, "k2", "20", "{\"key\" : 1,\"k2\":20,  \"k3\"  :  3\t,\n\n\n\t\"k4\":\t\"v\"   }",
               NULL);
    expect_set(doc, "k3", "30", "{\"key\" : 1,\"k2\":2,  \"k3\"  :  30\t,\n\n\n\t\"k4\":\t\"v\"   }",
               NULL);
    expect_set(doc, "k4", "w", "{\"key\" : 1,\"k2\":2,  \"k3\"  :  3\t,\n\n\n\t\"k4\":\t\"w\"   }",
               NULL);
    expect_set(doc, "k5", "5",
               "{\"key\" : 1,\"k2\":2,  \"k3\"  :  3\t,\n\n\n\t\"k4\":\t\"v\",\n\t\"k5\":\t5   }",
               NULL);
}

static void test_verification_refusals(void **state)
{
    (void)state;
    /* A value that is not UTF-8 cannot go into JSON. */
    expect_set_fail("{\"s\": \"x\"}", "s", "\xff", CEDIT_VERIFY, "UTF-8");
    /* Strict JSON is also read by jansson, which cannot hold this integer... */
    expect_set_fail("{\"n\": 1}", "n", "123456789012345678901234567890", CEDIT_VERIFY, "jansson");
    /* ...which is fine in a file jansson does not read (it has a comment). */
    expect_set("{\"n\": 1 // c\n}", "n", "123456789012345678901234567890",
               "{\"n\": 123456789012345678901234567890 // c\n}", NULL);
    /* A strict file jansson refuses to begin with is edited without it. */
    expect_set("{\"big\": 1e400, \"n\": 1}", "n", "2", "{\"big\": 1e400, \"n\": 2}", NULL);
    /* NUL bytes escaped in strings are fine for jansson (JSON_ALLOW_NUL). */
    expect_set("{\"z\": \"a\\u0000b\", \"n\": 1}", "n", "2", "{\"z\": \"a\\u0000b\", \"n\": 2}",
               NULL);
    /* Arguments. */
    expect_set_fail("{\"n\": 1}", "n", NULL, CEDIT_BAD_KEY, NULL);
    char *out = (char *)"x";
    size_t outlen = 3;
    assert_int_equal(jedit_set("{\"n\": 1}", 8, "n", "2", &out, NULL, NULL, 0), CEDIT_BAD_KEY);
    assert_null(out);
    assert_int_equal(jedit_set(NULL, 0, "n", "2", &out, &outlen, NULL, 0), CEDIT_MALFORMED);
    assert_null(out);
    assert_int_equal(outlen, 0);
}

/* The document need not be NUL-terminated: len is honoured. */
static void test_length_honoured(void **state)
{
    (void)state;
    const char *doc = "{\"a\": 1}garbage";
    struct buf b = set_ok(doc, 8, "a", "2");
    assert_bytes(b.p, b.n, "{\"a\": 2}", 8);
    buf_free(&b);
    expect_set_fail_n("{\"a\": 1}\0{", 10, "a", "2", CEDIT_MALFORMED, "unexpected byte 0x00");
}

int main(void)
{
    static char names[NKNOBS + NINSERTIONS][160];
    struct CMUnitTest tests[NKNOBS + NINSERTIONS + 40];
    size_t n = 0;
    for (size_t i = 0; i < NKNOBS; i++) {
        snprintf(names[n], sizeof names[n], "set %s: %s", knobs[i].file, knobs[i].key);
        tests[n] = (struct CMUnitTest){ names[n], test_corpus_knob, NULL, NULL, (void *)&knobs[i] };
        n++;
    }
    for (size_t i = 0; i < NINSERTIONS; i++) {
        snprintf(names[n], sizeof names[n], "insert %s: %s", insertions[i].file, insertions[i].key);
        tests[n] = (struct CMUnitTest){ names[n], test_corpus_insertion, NULL, NULL,
                                        (void *)&insertions[i] };
        n++;
    }
    const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_corpus_every_json_file),
        cmocka_unit_test(test_corpus_duplicates_elsewhere),
        cmocka_unit_test(test_corpus_escaped_slashes),
        cmocka_unit_test(test_comment_decoys),
        cmocka_unit_test(test_key_inside_string),
        cmocka_unit_test(test_block_comments_around_colon),
        cmocka_unit_test(test_comment_then_value_on_next_line),
        cmocka_unit_test(test_trailing_commas),
        cmocka_unit_test(test_python_float_literals),
        cmocka_unit_test(test_escapes_untouched),
        cmocka_unit_test(test_duplicate_target),
        cmocka_unit_test(test_insert_block),
        cmocka_unit_test(test_insert_after_comment),
        cmocka_unit_test(test_insert_empty_object),
        cmocka_unit_test(test_insert_trailing_comma),
        cmocka_unit_test(test_insert_inline),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_not_scalar_and_missing_parent),
        cmocka_unit_test(test_array_index),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_bad_key),
        cmocka_unit_test(test_value_spelling),
        cmocka_unit_test(test_get_values),
        cmocka_unit_test(test_odd_spacing),
        cmocka_unit_test(test_verification_refusals),
        cmocka_unit_test(test_length_honoured),
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        tests[n++] = fixed[i];
    return _cmocka_run_group_tests("jedit", tests, n, NULL, NULL);
}
