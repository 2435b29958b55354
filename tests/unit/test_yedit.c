/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for yedit, the format-preserving YAML editor.
 *
 * Every YAML file of tests/corpus (found through $AB_SOURCE_DIR, the repo
 * root) has each knob that INDEX.md lists set to a value of a different
 * width.  The expected bytes are computed here independently: the
 * original file with only the old value's bytes on the line INDEX.md
 * names replaced (plus, for column-aligned comments, the documented
 * padding change).  Then the new value must read back, and setting the
 * old value again must give back the original file byte for byte.
 * Inline documents cover the hard cases: CRLF and non-ASCII text before
 * the key, a BOM, document markers, flow mappings, comments that look
 * like keys, insertion, and every refusal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yedit.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static char *read_corpus(const char *rel, size_t *len)
{
    const char *root = getenv("AB_SOURCE_DIR");
    if (!root || !*root)
        fail_msg("AB_SOURCE_DIR is not set: run with AB_SOURCE_DIR=<repository root>");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/corpus/%s", root, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read '%s' (is AB_SOURCE_DIR the repository root?)", path);
    size_t alloc = 1 << 16, n = 0;
    char *buf = malloc(alloc);
    assert_non_null(buf);
    for (;;) {
        n += fread(buf + n, 1, alloc - n, f);
        if (n < alloc)
            break;
        alloc *= 2;
        buf = realloc(buf, alloc);
        assert_non_null(buf);
    }
    assert_int_equal(ferror(f), 0);
    fclose(f);
    *len = n;
    return buf;
}

/* Byte offset where 1-based line n starts. */
static size_t line_off(const char *d, size_t len, int n)
{
    size_t off = 0;
    for (int l = 1; l < n; l++) {
        const char *nl = memchr(d + off, '\n', len - off);
        assert_non_null(nl);
        off = (size_t)(nl - d) + 1;
    }
    return off;
}

/* d with d[at..at+cut) replaced by text (malloc'd). */
static char *splice(const char *d, size_t len, size_t at, size_t cut, const char *text,
                    size_t *outlen)
{
    size_t tl = strlen(text);
    assert_true(at + cut <= len);
    char *o = malloc(len - cut + tl + 1);
    assert_non_null(o);
    memcpy(o, d, at);
    memcpy(o + at, text, tl);
    memcpy(o + at + tl, d + at + cut, len - at - cut);
    *outlen = len - cut + tl;
    o[*outlen] = '\0';
    return o;
}

static char *get_ok(const char *doc, size_t len, const char *key)
{
    char err[256], *v = NULL;
    enum cedit_status st = yedit_get(doc, len, key, &v, err, sizeof err);
    if (st != CEDIT_OK)
        fail_msg("get '%s' failed (%d): %s", key, st, err);
    assert_non_null(v);
    return v;
}

static void get_is(const char *doc, size_t len, const char *key, const char *want)
{
    char *v = get_ok(doc, len, key);
    assert_string_equal(v, want);
    free(v);
}

static char *set_ok(const char *doc, size_t len, const char *key, const char *value, size_t *outlen)
{
    char err[256], *out = NULL;
    enum cedit_status st = yedit_set(doc, len, key, value, &out, outlen, err, sizeof err);
    if (st != CEDIT_OK)
        fail_msg("set '%s'='%s' failed (%d): %s", key, value, st, err);
    assert_non_null(out);
    return out;
}

static void assert_bytes(const char *got, size_t gotlen, const char *want, size_t wantlen)
{
    if (gotlen != wantlen || memcmp(got, want, wantlen) != 0) {
        size_t i = 0;
        while (i < gotlen && i < wantlen && got[i] == want[i])
            i++;
        size_t from = i > 40 ? i - 40 : 0;
        fail_msg("output differs at byte %zu (got %zu bytes, want %zu)\n got: %.*s\nwant: %.*s", i,
                 gotlen, wantlen, (int)(gotlen - from < 100 ? gotlen - from : 100), got + from,
                 (int)(wantlen - from < 100 ? wantlen - from : 100), want + from);
    }
}

/* set must produce exactly want; then get reads newval and the old value restores doc. */
static void edit_is(const char *doc, size_t len, const char *key, const char *value,
                    const char *want, size_t wantlen, const char *readback, const char *restore)
{
    size_t outlen = 0;
    char *out = set_ok(doc, len, key, value, &outlen);
    assert_bytes(out, outlen, want, wantlen);
    get_is(out, outlen, key, readback);
    if (restore) {
        size_t backlen = 0;
        char *back = set_ok(out, outlen, key, restore, &backlen);
        assert_bytes(back, backlen, doc, len);
        free(back);
    }
    free(out);
}

static void edit_str(const char *doc, const char *key, const char *value, const char *want,
                     const char *readback)
{
    edit_is(doc, strlen(doc), key, value, want, strlen(want), readback, NULL);
}

/* A refused edit: the status, no output, and a one-line message containing what. */
static void refuse(const char *doc, const char *key, const char *value, enum cedit_status want,
                   const char *what)
{
    char err[256] = "untouched", *out = (char *)"sentinel";
    size_t outlen = 99;
    enum cedit_status st = yedit_set(doc, strlen(doc), key, value, &out, &outlen, err, sizeof err);
    if (st != want)
        fail_msg("set '%s' gave %d (%s), want %d", key, st, err, want);
    assert_null(out);
    assert_int_equal(outlen, 0);
    assert_true(err[0] != '\0');
    assert_null(strchr(err, '\n'));
    if (what && !strstr(err, what))
        fail_msg("message '%s' lacks '%s'", err, what);
}

static void get_refused(const char *doc, const char *key, enum cedit_status want, const char *what)
{
    char err[256] = "", *v = (char *)"sentinel";
    enum cedit_status st = yedit_get(doc, strlen(doc), key, &v, err, sizeof err);
    if (st != want)
        fail_msg("get '%s' gave %d (%s), want %d", key, st, err, want);
    assert_null(v);
    assert_true(err[0] != '\0');
    if (what && !strstr(err, what))
        fail_msg("message '%s' lacks '%s'", err, what);
}

/* ------------------------------------------------------------------ */
/* The corpus: every knob INDEX.md lists in a YAML file                */
/* ------------------------------------------------------------------ */

struct knob {
    const char *file;
    const char *key;
    int line;         /* 1-based line number from INDEX.md */
    const char *lead; /* the line's text before the value */
    const char *old;  /* the value's bytes in the file */
    const char *set;  /* what the user asks for */
    const char *now;  /* the bytes that must replace old */
};

static const struct knob knobs[] = {
    /* F5-TTS: frames batch, capitalised booleans, no final newline. */
    { "F5-TTS/F5TTS_v1_Base.yaml", "datasets.batch_size_per_gpu", 7, "  batch_size_per_gpu: ", "38400", "9600", "9600" },
    { "F5-TTS/F5TTS_v1_Base.yaml", "optim.grad_accumulation_steps", 16, "  grad_accumulation_steps: ", "1", "16", "16" },
    { "F5-TTS/F5TTS_v1_Base.yaml", "model.arch.checkpoint_activations", 37, "    checkpoint_activations: ", "False", "true", "True" },
    { "F5-TTS/E2TTS_Base.yaml", "datasets.batch_size_per_gpu", 7, "  batch_size_per_gpu: ", "38400", "153600", "153600" },
    { "F5-TTS/E2TTS_Base.yaml", "optim.grad_accumulation_steps", 16, "  grad_accumulation_steps: ", "1", "128", "128" },
    { "Orpheus-TTS/finetune/config.yaml", "batch_size", 8, "batch_size: ", "1", "16", "16" },
    { "Orpheus-TTS/pretrain/config.yaml", "batch_size", 7, "batch_size: ", "1", "24", "24" },
    { "StyleTTS2/config.yml", "batch_size", 8, "batch_size: ", "16", "8", "8" },
    { "accelerate/fsdp.yaml", "fsdp_config.fsdp_activation_checkpointing", 9, "  fsdp_activation_checkpointing: ", "false", "TRUE", "true" },
    { "accelerate/deepspeed.yaml", "deepspeed_config.zero3_init_flag", 9, "  zero3_init_flag: ", "false", "true", "true" },
    { "CosyVoice/cosyvoice2.yaml", "batch.max_frames_in_batch", 175, "    max_frames_in_batch: ", "2000", "12000", "12000" },
    { "CosyVoice/cosyvoice2.yaml", "train_conf.accum_grad", 219, "    accum_grad: ", "2", "16", "16" },
    { "CosyVoice/cosyvoice2.yaml", "train_conf_gan.accum_grad", 235, "    accum_grad: ", "1", "10", "10" },
    { "GPT-SoVITS/s1.yaml", "train.batch_size", 4, "  batch_size: ", "8", "32", "32" },
    { "GPT-SoVITS/s1.yaml", "train.gradient_accumulation", 5, "  gradient_accumulation: ", "4", "12", "12" },
    { "fish-speech/text2semantic_finetune.yaml", "data.batch_size", 53, "  batch_size: ", "4", "16", "16" },
    { "fish-speech/text2semantic_finetune.yaml", "trainer.accumulate_grad_batches", 11, "  accumulate_grad_batches: ", "1", "32", "32" },
    { "NATSpeech/config_base.yaml", "max_tokens", 35, "max_tokens: ", "40000", "8000", "8000" },
    { "NATSpeech/config_base.yaml", "max_sentences", 36, "max_sentences: ", "100000", "64", "64" },
    { "NATSpeech/config_base.yaml", "accumulate_grad_batches", 26, "accumulate_grad_batches: ", "1", "16", "16" },
    { "FastSpeech2/train.yaml", "optimizer.batch_size", 6, "  batch_size: ", "16", "8", "8" },
    { "FastSpeech2/train.yaml", "optimizer.grad_acc_step", 11, "  grad_acc_step: ", "1", "10", "10" },
    { "vall-e/config.yaml", "hyperparameters.batch_size", 50, "  batch_size: ", "16", "128", "128" },
    { "vall-e/config.yaml", "hyperparameters.gradient_accumulation_steps", 51, "  gradient_accumulation_steps: ", "4", "16", "16" },
    { "vall-e/config.yaml", "trainer.gradient_checkpointing", 87, "  gradient_checkpointing: ", "True", "false", "False" },
    { "vall-e/config.yaml", "evaluation.batch_size", 66, "  batch_size: ", "8", "32", "32" },
    { "MOSS-TTSD/training_config.yaml", "per_device_train_batch_size", 1, "per_device_train_batch_size: ", "1", "16", "16" },
    { "MOSS-TTSD/training_config.yaml", "gradient_accumulation_steps", 2, "gradient_accumulation_steps: ", "1", "12", "12" },
    { "MOSS-TTSD/training_config.yaml", "gradient_checkpointing", 12, "gradient_checkpointing: ", "true", "False", "false" },
    { "NeMo/quartznet_15x5.yaml", "model.train_ds.batch_size", 15, "    batch_size: ", "32", "8", "8" },
    { "NeMo/quartznet_15x5.yaml", "model.validation_ds.batch_size", 33, "    batch_size: ", "32", "128", "128" },
    { "NeMo/quartznet_15x5.yaml", "model.test_ds.batch_size", 42, "    batch_size: ", "32", "4", "4" },
    { "NeMo/quartznet_15x5.yaml", "trainer.accumulate_grad_batches", 268, "  accumulate_grad_batches: ", "1", "16", "16" },
    /* Same-named keys elsewhere in the file stay untouched (whole-file compare). */
    { "StyleTTS2/config.yml", "max_len", 9, "max_len: ", "400", "4000", "4000" },
    { "StyleTTS2/config.yml", "slmadv_params.max_len", 110, "  max_len: ", "500", "5000", "5000" },
};

static void check_knob(const struct knob *k)
{
    size_t len;
    char *doc = read_corpus(k->file, &len);
    size_t at = line_off(doc, len, k->line);
    size_t ll = strlen(k->lead), ol = strlen(k->old);
    if (memcmp(doc + at, k->lead, ll) != 0 || memcmp(doc + at + ll, k->old, ol) != 0)
        fail_msg("%s line %d does not start with '%s%s'", k->file, k->line, k->lead, k->old);
    size_t wantlen;
    char *want = splice(doc, len, at + ll, ol, k->now, &wantlen);

    get_is(doc, len, k->key, k->old);
    edit_is(doc, len, k->key, k->set, want, wantlen, k->now, k->old);
    free(want);
    free(doc);
}

static void test_corpus_knobs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof knobs / sizeof *knobs; i++)
        check_knob(&knobs[i]);
}

/* A whole line replaced (column-aligned comments keep their column). */
static void check_line(const char *file, const char *key, int line, const char *oldline,
                       const char *newline, const char *set, const char *readback, const char *restore)
{
    size_t len;
    char *doc = read_corpus(file, &len);
    size_t at = line_off(doc, len, line), ol = strlen(oldline);
    if (memcmp(doc + at, oldline, ol) != 0 || doc[at + ol] != '\n')
        fail_msg("%s line %d is not '%s'", file, line, oldline);
    size_t wantlen;
    char *want = splice(doc, len, at, ol, newline, &wantlen);
    edit_is(doc, len, key, set, want, wantlen, readback, restore);
    free(want);
    free(doc);
}

static void test_espnet_aligned_comments(void **state)
{
    (void)state;
    /* Value grows by 1: the padding shrinks by 1, the comment stays at column 27. */
    check_line("espnet/train_vits.yaml", "accum_grad", 158,
               "accum_grad: 1             # gradient accumulation",
               "accum_grad: 16            # gradient accumulation", "16", "16", "1");
    /* Value shrinks by 1: the padding grows by 1. */
    check_line("espnet/train_vits.yaml", "batch_bins", 159,
               "batch_bins: 10000000      # batch bins (feats_type=raw)",
               "batch_bins: 5000000       # batch bins (feats_type=raw)", "5000000", "5000000",
               "10000000");
    /* Wider than the padding: one space is kept, the comment moves right. */
    check_line("espnet/train_vits.yaml", "batch_type", 160,
               "batch_type: numel         # how to make batch",
               "batch_type: a_very_long_batch_type_name # how to make batch",
               "a_very_long_batch_type_name", "a_very_long_batch_type_name", NULL);
    /* In a nested aligned block too. */
    check_line("espnet/train_vits.yaml", "tts_conf.mel_loss_params.n_fft", 111,
               "        n_fft: 1024        # fft points",
               "        n_fft: 512         # fft points", "512", "512", "1024");
    /* A comment that lines up with nothing keeps its padding. */
    check_line("espnet/train_vits.yaml", "generator_first", 151,
               "generator_first: false # whether to start updating generator first",
               "generator_first: true # whether to start updating generator first", "true",
               "true", "false");
}

static void test_styletts2_coincident_alignment(void **state)
{
    (void)state;
    /*
     * "min_len: 400 # ..." and "max_len: 500 # ..." put their comments in
     * the same column, so shrinking max_len keeps that column; growing it
     * back restores the file.
     */
    check_line("StyleTTS2/config.yml", "slmadv_params.max_len", 110,
               "  max_len: 500 # maximum length of samples",
               "  max_len: 50  # maximum length of samples", "50", "50", "500");
    size_t len;
    char *doc = read_corpus("StyleTTS2/config.yml", &len);
    get_is(doc, len, "max_len", "400");
    get_is(doc, len, "slmadv_params.max_len", "500");
    get_is(doc, len, "slmadv_params.batch_percentage", "0.5");
    free(doc);
}

/* Insert a line before 1-based line `before` (or append at EOF when 0). */
static void check_insert(const char *file, const char *key, int before, const char *text,
                         const char *set, const char *readback)
{
    size_t len;
    char *doc = read_corpus(file, &len);
    char err[256], *v = NULL;
    assert_int_equal(yedit_get(doc, len, key, &v, err, sizeof err), CEDIT_NOT_FOUND);
    assert_null(v);
    size_t at = before ? line_off(doc, len, before) : len;
    size_t wantlen;
    char *want = splice(doc, len, at, 0, text, &wantlen);
    edit_is(doc, len, key, set, want, wantlen, readback, NULL);
    free(want);
    free(doc);
}

static void test_corpus_insertions(void **state)
{
    (void)state;
    /* E2TTS lacks model.arch.checkpoint_activations; the file writes True/False. */
    check_insert("F5-TTS/E2TTS_Base.yaml", "model.arch.checkpoint_activations", 32,
                 "    checkpoint_activations: True\n", "true", "True");
    /* Then it is an ordinary value. */
    size_t len, l1, l2;
    char *doc = read_corpus("F5-TTS/E2TTS_Base.yaml", &len);
    char *on = set_ok(doc, len, "model.arch.checkpoint_activations", "true", &l1);
    char *off = set_ok(on, l1, "model.arch.checkpoint_activations", "false", &l2);
    assert_non_null(strstr(off, "    pe_attn_head: 1\n    checkpoint_activations: False\n  mel_spec:\n"));
    assert_int_equal(l2, len + strlen("    checkpoint_activations: False\n"));
    free(on);
    free(off);
    free(doc);

    /* The commented-out knob is not found; a top-level insert goes after the last entry. */
    check_insert("accelerate/deepspeed.yaml", "mixed_precision", 13, "mixed_precision: bf16\n",
                 "bf16", "bf16");
    /* Before the commented-out block that ends fish-speech's trainer mapping. */
    check_insert("fish-speech/text2semantic_finetune.yaml", "trainer.devices", 18,
                 "  devices: 2\n", "2", "2");
    /* At the end of a file with no final newline: the file still has none. */
    check_insert("F5-TTS/F5TTS_v1_Base.yaml", "ckpts.keep_best", 0, "\n  keep_best: 3", "3", "3");
    /* StyleTTS2 ends with a whitespace-only line: the new entry goes before it. */
    check_insert("StyleTTS2/config.yml", "slmadv_params.min_batch", 116, "  min_batch: 2\n", "2",
                 "2");
    /* Into the deepest mapping at the very end of NeMo's file (which ends with a newline). */
    check_insert("NeMo/quartznet_15x5.yaml", "hydra.job_logging.root.level", 0,
                 "      level: INFO\n", "INFO", "INFO");
}

static void test_corpus_refusals(void **state)
{
    (void)state;
    size_t len;
    char *doc = read_corpus("NeMo/quartznet_15x5.yaml", &len);
    char err[256], *out = NULL;
    size_t outlen = 0;
    /* &sample_rate is used by *sample_rate: editing it would change both. */
    assert_int_equal(yedit_set(doc, len, "model.sample_rate", "8000", &out, &outlen, err, sizeof err), CEDIT_ALIAS);
    assert_null(out);
    assert_int_equal(yedit_set(doc, len, "model.preprocessor.sample_rate", "8000", &out, &outlen, err, sizeof err), CEDIT_ALIAS);
    assert_null(out);
    assert_int_equal(yedit_set(doc, len, "model.train_ds.labels.0", "x", &out, &outlen, err, sizeof err), CEDIT_ALIAS);
    assert_null(out);
    assert_int_equal(yedit_set(doc, len, "model.encoder.jasper.17.filters", "8", &out, &outlen, err, sizeof err), CEDIT_ALIAS);
    assert_null(out);
    assert_int_equal(yedit_set(doc, len, "model.train_ds", "8", &out, &outlen, err, sizeof err), CEDIT_NOT_SCALAR);
    assert_null(out);
    /* Reading through an alias is fine; reading a list item by index too. */
    get_is(doc, len, "model.preprocessor.sample_rate", "16000");
    get_is(doc, len, "model.encoder.jasper.1.repeat", "5");
    get_is(doc, len, "model.labels.27", "'");
    get_is(doc, len, "model.train_ds.manifest_filepath", "???");
    /* Not aliased: an ordinary edit inside the list. */
    char *o = set_ok(doc, len, "model.encoder.jasper.0.filters", "128", &outlen);
    get_is(o, outlen, "model.encoder.jasper.0.filters", "128");
    get_is(o, outlen, "model.encoder.jasper.1.filters", "256");
    assert_int_equal(outlen, len);
    free(o);
    free(doc);

    doc = read_corpus("CosyVoice/cosyvoice2.yaml", &len);
    /* Tags stay: the value after "!ref " is what changes. */
    o = set_ok(doc, len, "llm.llm_input_size", "<llm_output_size>", &outlen);
    assert_non_null(strstr(o, "    llm_input_size: !ref <llm_output_size>\n"));
    free(o);
    get_is(doc, len, "flow.decoder.estimator.static_chunk_size", "<chunk_size> * <token_mel_ratio>");
    assert_int_equal(yedit_set(doc, len, "data_pipeline", "x", &out, &outlen, err, sizeof err), CEDIT_NOT_SCALAR);
    assert_null(out);
    free(doc);
}

/* ------------------------------------------------------------------ */
/* Hard cases                                                          */
/* ------------------------------------------------------------------ */

static void test_crlf_non_ascii(void **state)
{
    (void)state;
    /* Multi-byte characters (CJK, emoji, IPA) and CRLF before the key. */
    const char *doc = "# 中文注释 🎉 ɪpə\r\n"
                      "name: \"语音合成 😀\"\r\n"
                      "note: ʃaɪ ðə ŋ # ünïcødé\r\n"
                      "train:\r\n"
                      "  speaker: 张三\r\n"
                      "  batch_size: 8   # 批大小\r\n"
                      "  lr: 1e-4\r\n";
    const char *want = "# 中文注释 🎉 ɪpə\r\n"
                       "name: \"语音合成 😀\"\r\n"
                       "note: ʃaɪ ðə ŋ # ünïcødé\r\n"
                       "train:\r\n"
                       "  speaker: 张三\r\n"
                       "  batch_size: 512   # 批大小\r\n"
                       "  lr: 1e-4\r\n";
    edit_is(doc, strlen(doc), "train.batch_size", "512", want, strlen(want), "512", "8");
    get_is(doc, strlen(doc), "name", "语音合成 😀");
    get_is(doc, strlen(doc), "train.speaker", "张三");
    /* A non-ASCII value, replacing a non-ASCII value. */
    edit_str(doc, "train.speaker", "李四🎤",
             "# 中文注释 🎉 ɪpə\r\nname: \"语音合成 😀\"\r\nnote: ʃaɪ ðə ŋ # ünïcødé\r\ntrain:\r\n"
             "  speaker: 李四🎤\r\n  batch_size: 8   # 批大小\r\n  lr: 1e-4\r\n",
             "李四🎤");
    /* Inserting uses CRLF too. */
    edit_str(doc, "train.grad_accum", "4",
             "# 中文注释 🎉 ɪpə\r\nname: \"语音合成 😀\"\r\nnote: ʃaɪ ðə ŋ # ünïcødé\r\ntrain:\r\n"
             "  speaker: 张三\r\n  batch_size: 8   # 批大小\r\n  lr: 1e-4\r\n  grad_accum: 4\r\n",
             "4");
    /* A string into a quoted value with non-ASCII before it. */
    edit_str(doc, "name", "tts \"v2\"",
             "# 中文注释 🎉 ɪpə\r\nname: \"tts \\\"v2\\\"\"\r\nnote: ʃaɪ ðə ŋ # ünïcødé\r\ntrain:\r\n"
             "  speaker: 张三\r\n  batch_size: 8   # 批大小\r\n  lr: 1e-4\r\n",
             "tts \"v2\"");
}

static void test_aligned_comment_after_non_ascii(void **state)
{
    (void)state;
    /* Columns count characters, not bytes: these comments line up on screen. */
    const char *doc = "é: 1      # a\n"
                      "bs: 8     # b\n";
    edit_str(doc, "bs", "16", "é: 1      # a\nbs: 16    # b\n", "16");
    edit_str(doc, "é", "1000", "é: 1000   # a\nbs: 8     # b\n", "1000");
}

static void test_bom(void **state)
{
    (void)state;
    const char *doc = "\xEF\xBB\xBF# config\nbatch_size: 4 # per gpu\nname: \xC3\xA9t\xC3\xA9\n";
    edit_str(doc, "batch_size", "64",
             "\xEF\xBB\xBF# config\nbatch_size: 64 # per gpu\nname: \xC3\xA9t\xC3\xA9\n", "64");
    edit_str(doc, "name", "hiver",
             "\xEF\xBB\xBF# config\nbatch_size: 4 # per gpu\nname: hiver\n", "hiver");
    /* A BOM on the first key's line. */
    edit_str("\xEF\xBB\xBF" "a: 1\nb: 2\n", "a", "10", "\xEF\xBB\xBF" "a: 10\nb: 2\n", "10");
    edit_str("\xEF\xBB\xBF" "a: 1\n", "b", "2", "\xEF\xBB\xBF" "a: 1\nb: 2\n", "2");
    /* UTF-16 is refused rather than edited at the wrong bytes. */
    refuse("\xFF\xFE" "a\0:\0 \0" "1\0", "a", "2", CEDIT_MALFORMED, "utf-16");
}

static void test_document_markers(void **state)
{
    (void)state;
    const char *doc = "%YAML 1.1\n---\nbatch_size: 4 # first\n...\n---\nbatch_size: 9\n...\n";
    edit_str(doc, "batch_size", "32",
             "%YAML 1.1\n---\nbatch_size: 32 # first\n...\n---\nbatch_size: 9\n...\n", "32");
    /* Only the first document is addressed: insertion goes before its "...". */
    edit_str(doc, "lr", "0.1",
             "%YAML 1.1\n---\nbatch_size: 4 # first\nlr: 0.1\n...\n---\nbatch_size: 9\n...\n", "0.1");
    edit_str("--- # doc\na: 1\n", "a", "2", "--- # doc\na: 2\n", "2");
    get_refused("---\n...\n", "a", CEDIT_NOT_FOUND, "empty");
    get_refused("", "a", CEDIT_NOT_FOUND, "empty");
    get_refused("# only a comment\n", "a", CEDIT_NOT_FOUND, "empty");
    refuse("", "a", "1", CEDIT_NOT_FOUND, "empty");
    refuse("- 1\n- 2\n", "a", "1", CEDIT_NOT_FOUND, NULL);
    edit_str("- 1\n- 2\n", "1", "3", "- 1\n- 3\n", "3");
}

static void test_flow_mappings(void **state)
{
    (void)state;
    const char *doc = "optim: {lr: 1e-4, grad_accumulation_steps: 2}\nnext: 1\n";
    edit_str(doc, "optim.grad_accumulation_steps", "16",
             "optim: {lr: 1e-4, grad_accumulation_steps: 16}\nnext: 1\n", "16");
    edit_str(doc, "optim.lr", "3e-4", "optim: {lr: 3e-4, grad_accumulation_steps: 2}\nnext: 1\n",
             "3e-4");
    edit_str(doc, "optim.batch_size", "8",
             "optim: {lr: 1e-4, grad_accumulation_steps: 2, batch_size: 8}\nnext: 1\n", "8");
    /* A string with flow indicators is quoted inside a flow mapping. */
    edit_str(doc, "optim.name", "adam,w",
             "optim: {lr: 1e-4, grad_accumulation_steps: 2, name: \"adam,w\"}\nnext: 1\n", "adam,w");
    edit_str("o: {}\n", "o.a", "1", "o: {a: 1}\n", "1");
    /* Empty (implicit null) last values, and a trailing comma. */
    edit_str("o: {a: }\n", "o.c", "3", "o: {a: , c: 3}\n", "3");
    edit_str("o: {a, b}\n", "o.c", "3", "o: {a, b, c: 3}\n", "3");
    edit_str("o: {b, }\n", "o.c", "3", "o: {b, c: 3 }\n", "3");
    edit_str("o: {a: 1, }\n", "o.c", "3", "o: {a: 1, c: 3, }\n", "3");
    edit_str("o: { a: 1 , b: [1, 2] }\n", "o.c", "x", "o: { a: 1 , b: [1, 2], c: x }\n", "x");
    edit_str("o: {a: 1,\n    b: 2,  # two\n}\n", "o.c", "3", "o: {a: 1,\n    b: 2, c: 3,  # two\n}\n", "3");
    edit_str("l: [1, {bs: 4}, 3]\n", "l.1.bs", "16", "l: [1, {bs: 16}, 3]\n", "16");
    edit_str("l: [1, 2, 3]\n", "l.2", "30", "l: [1, 2, 30]\n", "30");
}

static void test_decoys_in_comments(void **state)
{
    (void)state;
    const char *doc = "# batch_size: 99\n"
                      "train:\n"
                      "  # batch_size: 4\n"
                      "  lr: 1 # batch_size: 99\n"
                      "  note: \"batch_size: 7\"\n"
                      "#batch_size: 5\n";
    get_refused(doc, "batch_size", CEDIT_NOT_FOUND, "batch_size");
    get_refused(doc, "train.batch_size", CEDIT_NOT_FOUND, "train.batch_size");
    get_is(doc, strlen(doc), "train.note", "batch_size: 7");
    edit_str(doc, "train.batch_size", "8",
             "# batch_size: 99\ntrain:\n  # batch_size: 4\n  lr: 1 # batch_size: 99\n"
             "  note: \"batch_size: 7\"\n  batch_size: 8\n#batch_size: 5\n",
             "8");
    edit_str(doc, "train.lr", "2",
             "# batch_size: 99\ntrain:\n  # batch_size: 4\n  lr: 2 # batch_size: 99\n"
             "  note: \"batch_size: 7\"\n#batch_size: 5\n",
             "2");
}

static void test_insertion(void **state)
{
    (void)state;
    /* Block mapping: after the line where the last entry's value ends. */
    edit_str("a:\n  b: 1\n  c:\n    d: 2\n\n# trailing\nz: 1\n", "a.e", "3",
             "a:\n  b: 1\n  c:\n    d: 2\n  e: 3\n\n# trailing\nz: 1\n", "3");
    edit_str("a:\n  b: [1,\n      2]  # x\nz: 1\n", "a.c", "3",
             "a:\n  b: [1,\n      2]  # x\n  c: 3\nz: 1\n", "3");
    edit_str("a:\n  b: |\n    text\n\n  c: 1\n", "a.d", "2", "a:\n  b: |\n    text\n\n  c: 1\n  d: 2\n",
             "2");
    edit_str("a:\n  s: |\n    text\n  # note\nz: 1\n", "a.d", "2",
             "a:\n  s: |\n    text\n  d: 2\n  # note\nz: 1\n", "2");
    /* EOF without a final newline, nested and top level. */
    edit_str("a:\n  b: 1", "a.c", "2", "a:\n  b: 1\n  c: 2", "2");
    edit_str("a: 1", "b", "2", "a: 1\nb: 2", "2");
    edit_str("a: 1\r\nb: 2", "c", "3", "a: 1\r\nb: 2\r\nc: 3", "3");
    /* In a list item's mapping. */
    edit_str("models:\n- name: a\n  size: 1\n- name: b\n", "models.0.bs", "4",
             "models:\n- name: a\n  size: 1\n  bs: 4\n- name: b\n", "4");
    /* The key and value are spelled safely. */
    edit_str("a: 1\n", "b c", "x: y", "a: 1\nb c: \"x: y\"\n", "x: y");
    edit_str("a: 1\n", "on", "1", "a: 1\n\"on\": 1\n", "1");
    /* YAML 1.1 reads a bare n as false: the key is quoted. */
    edit_str("a: 1\n", "n", "null", "a: 1\n\"n\": null\n", "null");
    edit_str("a: 1\n", "s", "", "a: 1\ns: \"\"\n", "");
}

static void test_aliases_refused(void **state)
{
    (void)state;
    refuse("base: &bs 8\nbatch_size: *bs\n", "batch_size", "16", CEDIT_ALIAS, "alias");
    refuse("base: &bs 8\nbatch_size: *bs\n", "base", "16", CEDIT_ALIAS, "&bs");
    get_is("base: &bs 8\nbatch_size: *bs\n", strlen("base: &bs 8\nbatch_size: *bs\n"), "batch_size", "8");
    /* Through an alias, or inside an anchored node that is aliased. */
    refuse("d: &d {bs: 1}\ne: *d\n", "e.bs", "2", CEDIT_ALIAS, "alias");
    refuse("d: &d {bs: 1}\ne: *d\n", "d.bs", "2", CEDIT_ALIAS, "&d");
    refuse("d: &d {bs: 1}\ne: *d\n", "d.lr", "2", CEDIT_ALIAS, "&d");
    refuse("d: &d\n  bs: 1\ne:\n  <<: *d\n  lr: 2\n", "e.bs", "2", CEDIT_ALIAS, "<<");
    refuse("k: &k bs\nm:\n  *k : 1\n", "m.bs", "2", CEDIT_ALIAS, "alias");
    /* An anchor nobody uses is no reason to refuse; it stays. */
    edit_str("a: &x 1\nb: 2\n", "a", "5", "a: &x 5\nb: 2\n", "5");
    edit_str("a: &x !!int 1\nb: *y\n", "a", "7", "a: &x !!int 7\nb: *y\n", "7");
    edit_str("a: !!str 1 # c\n", "a", "22", "a: !!str 22 # c\n", "22");
    /* A redefined anchor: the alias names the later node. */
    edit_str("a: &x 1\nb: &x 2\nc: *x\n", "a", "5", "a: &x 5\nb: &x 2\nc: *x\n", "5");
    refuse("a: &x 1\nb: &x 2\nc: *x\n", "b", "5", CEDIT_ALIAS, NULL);
}

static void test_duplicates(void **state)
{
    (void)state;
    refuse("train:\n  bs: 1\n  bs: 2\n", "train.bs", "3", CEDIT_AMBIGUOUS, "train.bs");
    get_refused("train:\n  bs: 1\n  'bs': 2\n", "train.bs", CEDIT_AMBIGUOUS, "ambiguous");
    refuse("a: 1\na: 2\nb:\n  c: 1\n", "a", "3", CEDIT_AMBIGUOUS, NULL);
    refuse("a: 1\na: 2\nb:\n  c: 1\n", "a.x", "3", CEDIT_AMBIGUOUS, NULL);
    /* Duplicates in another mapping do not matter. */
    edit_str("a:\n  x: 1\n  x: 2\nb:\n  x: 3\n", "b.x", "4", "a:\n  x: 1\n  x: 2\nb:\n  x: 4\n", "4");
    edit_str("train:\n  bs: 1\n  bs: 2\n", "train.lr", "3", "train:\n  bs: 1\n  bs: 2\n  lr: 3\n", "3");
}

static void test_malformed(void **state)
{
    (void)state;
    refuse("a: b: c\n", "a", "1", CEDIT_MALFORMED, "line 1, column 5");
    refuse("a:\n  - 1\n b: 2\n", "a", "1", CEDIT_MALFORMED, "line 3, column 2");
    refuse("a: [1, 2\nb: 3\n", "a", "1", CEDIT_MALFORMED, "line 2");
    refuse("x: 1\ny: \"\xff\"\n", "x", "1", CEDIT_MALFORMED, "line 2, column 5");
    refuse("a: 1\nb: \"unterminated\n", "a", "1", CEDIT_MALFORMED, "line 3");
    /* A later document that does not parse makes the whole stream malformed. */
    refuse("a: 1\n---\n]\n", "a", "2", CEDIT_MALFORMED, "line 3");
    get_refused("a: b: c\n", "a", CEDIT_MALFORMED, "line 1, column 5");
}

static void test_shapes_refused(void **state)
{
    (void)state;
    const char *doc = "train:\n  bs: 1\n  sizes: [1, 2]\nlist:\n  - a\n";
    refuse(doc, "train", "1", CEDIT_NOT_SCALAR, "mapping");
    refuse(doc, "train.sizes", "1", CEDIT_NOT_SCALAR, "list");
    refuse(doc, "list", "1", CEDIT_NOT_SCALAR, "list");
    get_refused(doc, "train", CEDIT_NOT_SCALAR, "mapping");
    /* Missing parents. */
    refuse(doc, "model.arch.ckpt", "true", CEDIT_NOT_FOUND, "'model' does not exist");
    refuse(doc, "train.opt.lr", "1", CEDIT_NOT_FOUND, "'train.opt' does not exist");
    refuse(doc, "train.bs.x", "1", CEDIT_NOT_FOUND, "scalar");
    refuse("a:\nb: 1\n", "a.c", "1", CEDIT_NOT_FOUND, "'a' is empty");
    refuse(doc, "list.3", "1", CEDIT_NOT_FOUND, "past the end");
    refuse(doc, "list.x", "1", CEDIT_NOT_FOUND, "not an index");
    get_refused(doc, "train.lr", CEDIT_NOT_FOUND, "train.lr");
    /* Bad key paths. */
    refuse(doc, "", "1", CEDIT_BAD_KEY, "empty");
    refuse(doc, "a..b", "1", CEDIT_BAD_KEY, "a..b");
    refuse(doc, ".a", "1", CEDIT_BAD_KEY, NULL);
    refuse(doc, "a.", "1", CEDIT_BAD_KEY, NULL);
    get_refused(doc, "train..bs", CEDIT_BAD_KEY, NULL);
    /* A new key longer than libyaml reads (1024 characters) is refused up front. */
    char longkey[1200];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    refuse(doc, longkey, "1", CEDIT_BAD_KEY, "too long");
}

static void test_quoted_numbers_and_strings(void **state)
{
    (void)state;
    const char *doc = "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'bf16'\nlr: 1e-4\n";
    edit_str(doc, "bs", "16", "bs: \"16\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'bf16'\nlr: 1e-4\n", "16");
    edit_str(doc, "ga", "128", "bs: \"4\"\nga: '128'\nmb: \"auto\"\nname: run\nmp: 'bf16'\nlr: 1e-4\n", "128");
    /* A number replacing a non-numeric string is written bare. */
    edit_str(doc, "mb", "8", "bs: \"4\"\nga: '2'\nmb: 8\nname: run\nmp: 'bf16'\nlr: 1e-4\n", "8");
    /* Strings keep their quote style... */
    edit_str(doc, "mp", "fp16", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'fp16'\nlr: 1e-4\n", "fp16");
    edit_str(doc, "mp", "it's", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'it''s'\nlr: 1e-4\n", "it's");
    edit_str(doc, "mb", "auto\tx", "bs: \"4\"\nga: '2'\nmb: \"auto\\tx\"\nname: run\nmp: 'bf16'\nlr: 1e-4\n", "auto\tx");
    /* ...and plain ones stay plain only while that reads back the same. */
    edit_str(doc, "name", "run2", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run2\nmp: 'bf16'\nlr: 1e-4\n", "run2");
    edit_str(doc, "name", "a: b", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"a: b\"\nmp: 'bf16'\nlr: 1e-4\n", "a: b");
    edit_str(doc, "name", "x #y", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"x #y\"\nmp: 'bf16'\nlr: 1e-4\n", "x #y");
    edit_str(doc, "name", "*x", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"*x\"\nmp: 'bf16'\nlr: 1e-4\n", "*x");
    edit_str(doc, "name", "yes", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"yes\"\nmp: 'bf16'\nlr: 1e-4\n", "yes");
    edit_str(doc, "name", "0x1F", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"0x1F\"\nmp: 'bf16'\nlr: 1e-4\n", "0x1F");
    edit_str(doc, "name", "16-mixed", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: 16-mixed\nmp: 'bf16'\nlr: 1e-4\n", "16-mixed");
    edit_str(doc, "name", "a\"b\\c\n\x01", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: \"a\\\"b\\\\c\\n\\x01\"\nmp: 'bf16'\nlr: 1e-4\n", "a\"b\\c\n\x01");
    edit_str(doc, "lr", "auto", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'bf16'\nlr: auto\n", "auto");
    edit_str(doc, "lr", "null", "bs: \"4\"\nga: '2'\nmb: \"auto\"\nname: run\nmp: 'bf16'\nlr: null\n", "null");
    /* Escapes are decoded by get. */
    get_is("a: \"x\\ty\\u00e9\"\n", strlen("a: \"x\\ty\\u00e9\"\n"), "a", "x\ty\xC3\xA9");
    /* Invalid UTF-8 in the value cannot be written. */
    refuse(doc, "name", "\xff", CEDIT_VERIFY, "utf-8");
    /* Empty values and block scalars. */
    edit_str("a:\nb: 1\n", "a", "5", "a: 5\nb: 1\n", "5");
    edit_str("a: # c\nb: 1\n", "a", "5", "a: 5 # c\nb: 1\n", "5");
    edit_str("a: |\n  x\n  y\nb: 1\n", "a", "z", "a: z\nb: 1\n", "z");
    edit_str("a: >-\n  x\n\nb: 1\n", "a", "7", "a: 7\n\nb: 1\n", "7");
}

static void test_booleans(void **state)
{
    (void)state;
    const char *doc = "a: False\nb: no\nc: TRUE\nd: off\ne: yes\nf: On\ng: 'false'\nn: 1\n";
    edit_str(doc, "a", "true", "a: True\nb: no\nc: TRUE\nd: off\ne: yes\nf: On\ng: 'false'\nn: 1\n", "True");
    edit_str(doc, "b", "true", "a: False\nb: yes\nc: TRUE\nd: off\ne: yes\nf: On\ng: 'false'\nn: 1\n", "yes");
    edit_str(doc, "c", "false", "a: False\nb: no\nc: FALSE\nd: off\ne: yes\nf: On\ng: 'false'\nn: 1\n", "FALSE");
    edit_str(doc, "d", "on", "a: False\nb: no\nc: TRUE\nd: on\ne: yes\nf: On\ng: 'false'\nn: 1\n", "on");
    edit_str(doc, "e", "No", "a: False\nb: no\nc: TRUE\nd: off\ne: no\nf: On\ng: 'false'\nn: 1\n", "no");
    edit_str(doc, "f", "FALSE", "a: False\nb: no\nc: TRUE\nd: off\ne: yes\nf: Off\ng: 'false'\nn: 1\n", "Off");
    /* A quoted boolean stays quoted. */
    edit_str(doc, "g", "True", "a: False\nb: no\nc: TRUE\nd: off\ne: yes\nf: On\ng: 'true'\nn: 1\n", "true");
    /* A non-boolean target takes the file's most used true/false spelling. */
    edit_str("x: 1\ny: True\nz: False\nw: true\n", "x", "TRUE", "x: True\ny: True\nz: False\nw: true\n", "True");
    edit_str("x: 1\ny: FALSE\n", "x", "true", "x: TRUE\ny: FALSE\n", "TRUE");
    edit_str("x: 1\n", "x", "True", "x: true\n", "true");
    edit_str("x: 1\ny: yes\n", "z", "true", "x: 1\ny: yes\nz: true\n", "true");
    /* yes/no/on/off are booleans only where the target already is one. */
    edit_str("x: 1\n", "x", "on", "x: \"on\"\n", "on");
}

static void test_multiline_and_nested_sequences(void **state)
{
    (void)state;
    const char *doc = "crit:\n-   - valid\n    - loss\n-   - train\n    - min\nk: 1\n";
    /* An anchor glued to its value ("&x:s": the anchor ends at ':') gets a blank. */
    edit_str("a: &x:s\nb: 1\n", "a", "tr", "a: &x tr\nb: 1\n", "tr");
    /* libyaml skips a BOM that starts a line: the value is found after it. */
    edit_str("a: !t\n\xEF\xBB\xBF  1\nb: 2\n", "a", "22", "a: !t\n\xEF\xBB\xBF  22\nb: 2\n", "22");
    edit_str("a: !t \xEF\xBB\xBFx\nb: 2\n", "a", "z", "a: !t z\nb: 2\n", "z");
    edit_str(doc, "crit.1.0", "eval", "crit:\n-   - valid\n    - loss\n-   - eval\n    - min\nk: 1\n", "eval");
    edit_str(doc, "k", "2", "crit:\n-   - valid\n    - loss\n-   - train\n    - min\nk: 2\n", "2");
    /* A plain scalar over two lines is replaced whole. */
    edit_str("a: one\n  two\nb: 1\n", "a", "x", "a: x\nb: 1\n", "x");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_knobs),
        cmocka_unit_test(test_espnet_aligned_comments),
        cmocka_unit_test(test_styletts2_coincident_alignment),
        cmocka_unit_test(test_corpus_insertions),
        cmocka_unit_test(test_corpus_refusals),
        cmocka_unit_test(test_crlf_non_ascii),
        cmocka_unit_test(test_aligned_comment_after_non_ascii),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_document_markers),
        cmocka_unit_test(test_flow_mappings),
        cmocka_unit_test(test_decoys_in_comments),
        cmocka_unit_test(test_insertion),
        cmocka_unit_test(test_aliases_refused),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_shapes_refused),
        cmocka_unit_test(test_quoted_numbers_and_strings),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_multiline_and_nested_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
