/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for report: the Markdown, JUnit and HTML renderings of real
 * results files (tests/data/results-*.json, found through $AB_SOURCE_DIR;
 * see tests/data/README.md for how each was made).
 *
 * JUnit is parsed back with python3's xml.etree, a real XML parser, so a
 * test fails on anything a CI reporter would choke on.  The Markdown of
 * two fixtures must equal tests/data/results-{h100,crash}.md byte for byte; after an
 * intended change of format, AB_UPDATE_GOLDEN=1 rewrites those files
 * (then read the diff before committing it).
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

#include "output/report.h"
#include "fixture.h"
#include "timing.h"
#include "../fuzz/fmtcheck.h"

/* ------------------------------------------------------------------ */
/* Helpers.                                                            */

static char *render(const json_t *doc, enum report_format f, size_t *len)
{
    char *out = NULL, err[256] = "";
    size_t n = 0;
    if (report_render(doc, f, &out, &n, err, sizeof err) != 0)
        fail_msg("report_render(%s) failed: %s", report_format_name(f), err);
    assert_non_null(out);
    assert_int_equal(strlen(out), n);
    if (len)
        *len = n;
    return out;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0, k = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + k, needle))
        n++;
    return n;
}

static char *temp_write(const char *text, size_t len, const char *suffix)
{
    char *path = NULL;
    assert_true(asprintf(&path, "/tmp/ab_test_report_%ld_XXXXXX%s", (long)getpid(), suffix) > 0);
    int fd = mkstemps(path, (int)strlen(suffix));
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 2) {
            cap *= 2;
            s = realloc(s, cap);
        }
    }
    fclose(f);
    assert_non_null(s);
    s[n] = '\0';
    if (len)
        *len = n;
    return s;
}

/*
 * Parse JUnit XML with python3's xml.etree and return what it saw:
 * "tests failures errors skipped | counted failures errors skipped cases
 * | message-of-first-error-or-failure-or-skipped | its text", one field per line.
 */
static const char junit_py[] =
    "import sys, xml.etree.ElementTree as E\n"
    "r = E.parse(sys.argv[1]).getroot()\n"
    "assert r.tag == 'testsuites', r.tag\n"
    "s = r.find('testsuite')\n"
    "cases = s.findall('testcase')\n"
    "n = {k: sum(1 for c in cases if c.find(k) is not None) for k in ('failure', 'error', 'skipped')}\n"
    "for c in cases:\n"
    "    assert c.get('name') and c.get('classname') and c.get('time') is not None, c.attrib\n"
    "    float(c.get('time'))\n"
    "for k in ('tests', 'failures', 'errors'):\n"
    "    assert r.get(k) == s.get(k), k\n"
    "assert r.get('skipped') is None, 'skipped on testsuites'\n"
    "float(s.get('time'))\n"
    "print(s.get('tests'), s.get('failures'), s.get('errors'), s.get('skipped'))\n"
    "print(len(cases), n['failure'], n['error'], n['skipped'])\n"
    "bad = [e for c in cases for e in c if e.tag in ('failure', 'error', 'skipped')]\n"
    "sys.stdout.buffer.write(repr(bad[0].get('message') if bad else '').encode() + b'\\n')\n"
    "sys.stdout.buffer.write(repr(bad[0].text if bad else '').encode() + b'\\n')\n"
    "print(s.get('name'))\n";

struct junit_seen {
    long tests, failures, errors, skipped;
    long cases, n_failure, n_error, n_skipped;
    char message[4096], text[4096], suite[4096];
};

static void junit_parse(const char *xml, size_t len, struct junit_seen *js)
{
    char *xpath = temp_write(xml, len, ".xml");
    char *ppath = temp_write(junit_py, strlen(junit_py), ".py");
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "python3 %s %s 2>&1", ppath, xpath) > 0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[5][4096] = { "", "", "", "", "" };
    for (int i = 0; i < 5 && fgets(line[i], sizeof line[i], p); i++)
        line[i][strcspn(line[i], "\n")] = '\0';
    int rc = pclose(p);
    if (rc != 0)
        fail_msg("python3 could not parse the JUnit XML (is python3 installed?): %s %s %s", line[0], line[1],
                 line[2]);
    memset(js, 0, sizeof *js);
    assert_int_equal(sscanf(line[0], "%ld %ld %ld %ld", &js->tests, &js->failures, &js->errors, &js->skipped), 4);
    assert_int_equal(sscanf(line[1], "%ld %ld %ld %ld", &js->cases, &js->n_failure, &js->n_error, &js->n_skipped),
                     4);
    snprintf(js->message, sizeof js->message, "%s", line[2]);
    snprintf(js->text, sizeof js->text, "%s", line[3]);
    snprintf(js->suite, sizeof js->suite, "%s", line[4]);
    unlink(xpath);
    unlink(ppath);
    free(xpath);
    free(ppath);
    free(cmd);
}

/* ------------------------------------------------------------------ */
/* JUnit.                                                              */

static void test_junit_counts(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        long tests, failures, errors, skipped;
    } cases[] = {
        { "results-h100.json", 18, 0, 0, 2 },      /* 16 fits, 2 OOMs: skipped */
        { "results-nogpu.json", 10, 0, 0, 4 },
        { "results-joint.json", 5, 0, 0, 1 },
        { "results-crash.json", 1, 0, 1, 0 },      /* a crash is an error */
        { "results-hang.json", 1, 1, 0, 0 },       /* a hang is a failure */
        { "results-interrupted.json", 0, 0, 0, 0 },
        { "results-partial.json", 4, 1, 1, 1 },    /* fit, oom, timeout, an unknown outcome */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *doc = fixture(cases[i].file);
        size_t len;
        char *xml = render(doc, REPORT_JUNIT, &len);
        struct junit_seen js;
        junit_parse(xml, len, &js);
        if (js.tests != cases[i].tests || js.failures != cases[i].failures || js.errors != cases[i].errors ||
            js.skipped != cases[i].skipped)
            fail_msg("%s: tests=%ld failures=%ld errors=%ld skipped=%ld", cases[i].file, js.tests, js.failures,
                     js.errors, js.skipped);
        /* The attributes agree with the testcases' own elements. */
        assert_int_equal(js.cases, js.tests);
        assert_int_equal(js.n_failure, js.failures);
        assert_int_equal(js.n_error, js.errors);
        assert_int_equal(js.n_skipped, js.skipped);
        free(xml);
        json_decref(doc);
    }
}

static void test_junit_oom_evidence(void **state)
{
    (void)state;
    json_t *doc = fixture("results-nogpu.json");
    size_t len;
    char *xml = render(doc, REPORT_JUNIT, &len);
    struct junit_seen js;
    junit_parse(xml, len, &js);
    /* The first non-passing testcase is trial 6's OOM: skipped, with the evidence. */
    assert_non_null(strstr(js.message, "out of memory: torch.OutOfMemoryError: CUDA out of memory"));
    assert_non_null(strstr(js.text, "Tried to allocate 8.00 GiB"));
    assert_string_equal(js.suite, "autobatch: ./build/simtrain --capacity 8G");
    assert_non_null(strstr(xml, "<testcase name=\"micro_batch=32 grad_accum=1 checkpointing=off\" "
                                "classname=\"autobatch.grad_accum_1.checkpointing_off\""));
    free(xml);
    json_decref(doc);
}

static void test_junit_escaping(void **state)
{
    (void)state;
    json_t *doc = fixture("results-crash.json");
    json_t *t = json_array_get(json_object_get(doc, "trials"), 0);
    /* <&"' markup characters, a BEL, an ANSI colour, DEL and a NUL inside. */
    static const char ev[] = "bad <tag> & \"quoted\" 'single' \x07\x1b[31mred\x7f \x00" "end";
    json_object_set_new(t, "evidence", json_stringn(ev, sizeof ev - 1));
    json_array_set_new(json_object_get(doc, "command"), 0, json_string("./train <&\"'>"));
    size_t len;
    char *xml = render(doc, REPORT_JUNIT, &len);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)xml[i];
        if (c < 0x20 && c != '\n')
            fail_msg("raw control character 0x%02x at byte %zu of the XML", c, i);
        assert_true(c != 0x7f);
    }
    assert_non_null(strstr(xml, "bad &lt;tag&gt; &amp; &quot;quoted&quot; &#39;single&#39; \\x07\\x1b[31mred\\x7f \\x00end"));
    struct junit_seen js;
    junit_parse(xml, len, &js);
    assert_int_equal(js.errors, 1);
    /* What a parser reads back is the evidence, control characters made visible. */
    assert_string_equal(js.text, "'bad <tag> & \"quoted\" \\'single\\' \\\\x07\\\\x1b[31mred\\\\x7f \\\\x00end'");
    assert_non_null(strstr(js.message, "exit code 1"));
    assert_non_null(strstr(js.message, "bad <tag> & \"quoted\" \\'single\\'"));
    assert_string_equal(js.suite, "autobatch: './train <&\"'\\''>' --crash-at-step 3");
    free(xml);

    /* The same evidence in HTML and Markdown: no raw markup gets through. */
    char *html = render(doc, REPORT_HTML, NULL);
    assert_null(strstr(html, "<tag>"));
    assert_non_null(strstr(html, "&lt;tag&gt; &amp; &quot;quoted&quot;"));
    free(html);
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    /* In the trial table as escaped text; in the failure line as a code span, where it is literal. */
    assert_non_null(strstr(md, "| exit code 1: bad &lt;tag&gt; &amp; \"quoted\" 'single'   \\[31mred   end |\n"));
    assert_non_null(strstr(md, "(crash, exit code 1): `bad <tag> & \"quoted\" 'single'   [31mred   end`\n"));
    assert_null(strchr(md, '\x07'));
    assert_null(strchr(md, '\x1b'));
    free(md);
    json_decref(doc);
}

/* The batch unit reached every format unescaped: a hostile one is
 * replaced by a neutral word in all three. */
static void test_hostile_unit(void **state)
{
    (void)state;
    json_t *doc = fixture("results-h100.json");
    json_object_set_new(json_object_get(doc, "space"), "unit",
                        json_string("<script>alert(1)</script>|x\n# y"));
    enum report_format fs[] = { REPORT_HTML, REPORT_MARKDOWN, REPORT_JUNIT };
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        char *out = render(doc, fs[i], &len);
        assert_null(strstr(out, "<script"));
        assert_null(strstr(out, "alert(1)"));
        assert_non_null(strstr(out, "units"));
        if (fs[i] == REPORT_JUNIT) {
            struct junit_seen js;
            junit_parse(out, len, &js);
        }
        free(out);
    }
    /* An ordinary unit is kept. */
    json_object_set_new(json_object_get(doc, "space"), "unit", json_string("frames"));
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "frames/s"));
    free(md);
    json_decref(doc);
}

/* Invalid UTF-8 cannot come from jansson, but U+FFFE can: XML forbids it. */
static void test_junit_xml_forbidden_chars(void **state)
{
    (void)state;
    json_t *doc = fixture("results-crash.json");
    json_t *t = json_array_get(json_object_get(doc, "trials"), 0);
    json_object_set_new(t, "evidence", json_string("x\xef\xbf\xbey \xf0\x9f\x94\xa5 z"));
    size_t len;
    char *xml = render(doc, REPORT_JUNIT, &len);
    assert_null(strstr(xml, "\xef\xbf\xbe"));
    assert_non_null(strstr(xml, "x\xef\xbf\xbdy \xf0\x9f\x94\xa5 z"));
    struct junit_seen js;
    junit_parse(xml, len, &js);
    free(xml);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* Markdown.                                                           */

static void check_golden(const char *fixture_name, const char *golden_name)
{
    json_t *doc = fixture(fixture_name);
    size_t len;
    char *md = render(doc, REPORT_MARKDOWN, &len);
    char *gpath = data_path(golden_name);
    if (getenv("AB_UPDATE_GOLDEN")) {
        FILE *f = fopen(gpath, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(md, 1, len, f), len);
        fclose(f);
    }
    size_t glen = 0;
    char *golden = read_all(gpath, &glen);
    if (!golden)
        fail_msg("cannot read '%s' (AB_UPDATE_GOLDEN=1 writes it)", gpath);
    if (glen != len || memcmp(golden, md, len)) {
        size_t i = 0;
        while (i < len && i < glen && golden[i] == md[i])
            i++;
        fail_msg("%s differs from %s at byte %zu: expected \"%.40s\", got \"%.40s\"", fixture_name, golden_name, i,
                 golden + i, md + i);
    }
    /* Deterministic: a second rendering gives the same bytes. */
    char *again = render(doc, REPORT_MARKDOWN, NULL);
    assert_string_equal(again, md);
    free(again);
    free(golden);
    free(gpath);
    free(md);
    json_decref(doc);
}

static void test_markdown_golden(void **state)
{
    (void)state;
    check_golden("results-h100.json", "results-h100.md");
    check_golden("results-crash.json", "results-crash.md");
}

static void test_markdown_content(void **state)
{
    (void)state;
    json_t *doc = fixture("results-joint.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "**Chosen:** micro-batch 64 \xc3\x97 grad-accum 4, checkpointing off: 3584.9 samples/s, "
                               "peak memory not measured\n"));
    assert_non_null(strstr(md, "global batch 256"));
    /* One table row per cell, per frontier point and per trial. */
    assert_int_equal(count(md, "\n| 8 | off |"), 1);
    assert_int_equal(count(md, " | **chosen** |"), 2); /* the frontier's and the trial's */
    assert_non_null(strstr(md, "| 8 | on | 32 | \xe2\x80\x94 | 0 | inferred from other cells; fits without "
                               "checkpointing, which is faster |\n"));
    assert_non_null(strstr(md, "Throughput against micro-batch (peak memory was not measured)"));
    size_t rows = count(md, "\n| ");
    /* headers: cells, frontier, trials (3); rows: 8 cells + 4 frontier points + 5 trials */
    assert_int_equal(rows, 3 + 8 + 4 + 5);
    free(md);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* HTML.                                                               */

static void check_html(const char *name)
{
    json_t *doc = fixture(name);
    size_t len;
    char *html = render(doc, REPORT_HTML, &len);
    size_t ntrials = json_array_size(json_object_get(doc, "trials")), nfit = 0;
    for (size_t i = 0; i < ntrials; i++) {
        json_t *t = json_array_get(json_object_get(doc, "trials"), i);
        nfit += json_is_string(json_object_get(t, "outcome")) &&
                !strcmp(json_string_value(json_object_get(t, "outcome")), "fit") &&
                json_is_number(json_object_get(t, "samples_per_s"));
    }
    if (strncmp(html, "<!DOCTYPE html>\n", 16) || !strstr(html, "</html>\n"))
        fail_msg("%s: not a whole HTML document", name);
    /* Three charts, and the fourth (peak memory against the micro-batch)
     * when any fit has a measured peak. */
    size_t npeak = 0;
    for (size_t i = 0; i < ntrials; i++) {
        json_t *t = json_array_get(json_object_get(doc, "trials"), i);
        npeak += json_is_string(json_object_get(t, "outcome")) &&
                 !strcmp(json_string_value(json_object_get(t, "outcome")), "fit") &&
                 json_number_value(json_object_get(t, "peak_mem_bytes")) > 0 &&
                 json_integer_value(json_object_get(t, "micro_batch")) > 0;
    }
    assert_int_equal(count(html, "<svg"), npeak ? 4 : 3);
    assert_int_equal(count(html, "</svg>"), npeak ? 4 : 3);
    assert_int_equal(count(html, "<svg id=\"memory\""), npeak ? 1 : 0);
    assert_int_equal(count(html, "class=\"mem\""), npeak);
    /* Self-contained: nothing to fetch, nothing to run. */
    const char *banned[] = { "<script", "<link", " src=", "href=", "url(", "@import", "@font-face", "<iframe",
                             "<img", "<object" };
    for (size_t i = 0; i < sizeof banned / sizeof *banned; i++)
        if (strstr(html, banned[i]))
            fail_msg("%s: the HTML holds '%s'", name, banned[i]);
    /* One mark per trial in the timeline, one point per measured fit. */
    if (count(html, "class=\"trial\"") != ntrials)
        fail_msg("%s: %zu class=\"trial\" marks for %zu trials", name, count(html, "class=\"trial\""), ntrials);
    assert_int_equal(count(html, "class=\"point\""), nfit);
    assert_int_equal(count(html, "class=\"choice\""), json_is_object(json_object_get(doc, "best")) ? 1 : 0);
    /* A light page as wide as the window (to 1800 px), its charts scaled
     * to their column, two side by side when there is room. */
    assert_non_null(strstr(html, "background:#ffffff"));
    assert_non_null(strstr(html, "max-width:1800px;"));
    assert_null(strstr(html, "main{width:"));
    assert_non_null(strstr(html, "svg{display:block;margin:4px 0;width:100%;height:auto"));
    assert_non_null(strstr(html, "<div class=\"charts\">"));
    assert_non_null(strstr(html, "<tr><th>Capacity</th><td>"));

    /* Without the evidence (PyTorch's messages carry a link), no address at all. */
    for (size_t i = 0; i < ntrials; i++)
        json_object_set_new(json_array_get(json_object_get(doc, "trials"), i), "evidence", json_null());
    char *bare = render(doc, REPORT_HTML, NULL);
    if (strstr(bare, "http://") || strstr(bare, "https://"))
        fail_msg("%s: the HTML refers to an address: %.80s", name,
                 strstr(bare, "http://") ? strstr(bare, "http://") : strstr(bare, "https://"));
    free(bare);
    free(html);
    json_decref(doc);
}

static void test_html(void **state)
{
    (void)state;
    const char *names[] = { "results-h100.json", "results-nogpu.json", "results-joint.json", "results-crash.json",
                            "results-hang.json", "results-interrupted.json", "results-partial.json",
                            "results-a100.json", "results-l4.json" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        check_html(names[i]);
}

/* The capacity and headroom line, in both formats, from the file's numbers. */
static void test_capacity_headroom(void **state)
{
    (void)state;
    json_t *doc = fixture("results-h100.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Capacity:** NVIDIA H100 80GB HBM3, 79.6 GiB; headroom 0% (none kept free); "
                               "the choice peaks at 68.0 GiB, 85.4% of 79.6 GiB\n"));
    free(md);
    /* 20%: a fit may peak at up to 63.7 GiB; every fit above is named once
     * (304 x 1 ran once, 256 x 1 is the recorded choice), four at most */
    json_object_set_new(json_object_get(doc, "space"), "headroom", json_real(0.2));
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "; headroom 20%: fits may peak at up to 63.7 GiB; excluded for it: "
                               "256 \xc3\x97 1 (peak 68.0 GiB), 304 \xc3\x97 1 (peak 80.0 GiB), "
                               "304 \xc3\x97 2 (peak 80.0 GiB), 273 \xc3\x97 2 (peak 72.2 GiB); "
                               "the choice peaks at"));
    free(md);
    char *html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<tr><th>Capacity</th><td>NVIDIA H100 80GB HBM3, 79.6 GiB; headroom 20%"));
    free(html);
    /* Several devices, emulated memory; no capacity: nothing is judged. */
    json_t *a100 = fixture("results-a100.json");
    json_object_set_new(json_object_get(a100, "host"), "emulated_gpu_memory",
                        json_pack("{s:I, s:s, s:I}", "bytes", (json_int_t)24 << 30, "with", "preload",
                                  "real_total_bytes", (json_int_t)40 << 30));
    md = render(a100, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "- **Capacity:** 2 \xc3\x97 NVIDIA A100-SXM4-40GB, 24.0 GiB each, emulated with "
                               "preload on 40.0 GiB of real memory; headroom 0%"));
    free(md);
    json_t *nogpu = fixture("results-nogpu.json");
    json_object_set_new(json_object_get(nogpu, "space"), "headroom", json_real(0.1));
    md = render(nogpu, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "- **Capacity:** no GPU: capacity unknown; headroom 10% (what it excluded "
                               "cannot be told: the capacity is unknown); the choice's peak memory was not measured\n"));
    free(md);
    json_decref(nogpu);
    json_decref(a100);
    json_decref(doc);
}

/* "run_with": the command with the choice, and the config diff, escaped. */
static void test_run_with(void **state)
{
    (void)state;
    json_t *doc = fixture("results-h100.json");
    /* an older file: the knob values, and no invented command */
    char *html = render(doc, REPORT_HTML, NULL), *md;
    assert_non_null(strstr(html, "<h2>Run with</h2>\n<p>The choice: micro-batch 256 \xc3\x97 grad-accum 1, "
                                 "checkpointing off, set in the command above"));
    free(html);
    json_object_set_new(doc, "run_with", json_pack("{s:[s, s, s, s], s:[s], s:[{s:s, s:s, s:b}]}",
        "command", "./train.py", "--bs", "256", "it's", "env", "GA=1 2", "files", "path", "cfg <1>.yaml",
        "diff", "--- cfg\n+++ cfg\n@@ -1 +1 @@\n-bs: 8\n+bs: 256 # <b>\n", "written", 0));
    html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<p>The command with the chosen knobs set:</p>\n"
                                 "<pre>GA=&#39;1 2&#39; ./train.py --bs 256 &#39;it&#39;\\&#39;&#39;s&#39;</pre>"));
    assert_non_null(strstr(html, "<p>Config <code>cfg &lt;1&gt;.yaml</code>: not written;"));
    assert_non_null(strstr(html, "<pre class=\"diff\">--- cfg\n+++ cfg\n@@ -1 +1 @@\n"
                                 "<span class=\"del\">-bs: 8\n</span><span class=\"add\">+bs: 256 # &lt;b&gt;\n</span></pre>"));
    free(html);
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Run with:** `GA='1 2' ./train.py --bs 256 'it'\\''s'`\n"));
    assert_non_null(strstr(md, "\n- **Config:** `cfg <1>.yaml` not written: add --write"));
    free(md);
    /* nothing chosen: no section */
    json_object_set_new(doc, "best", json_null());
    html = render(doc, REPORT_HTML, NULL);
    assert_null(strstr(html, "Run with"));
    free(html);
    json_decref(doc);
}

/* A notice is given once: the headline's "interrupted" is not repeated
 * below it, and the advice after shortened tables comes with the first. */
static void test_no_repeated_notices(void **state)
{
    (void)state;
    json_t *intr = fixture("results-interrupted.json");
    char *md = render(intr, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "**No configuration was chosen: interrupted**"));
    assert_null(strstr(md, "The search was interrupted"));
    free(md);
    json_decref(intr);
    json_t *doc = fixture("results-h100.json");
    md = render(doc, REPORT_MARKDOWN, NULL);
    char *out = NULL, err[256];
    /* the smallest budget it renders in: every table is cut */
    size_t budget = 300;
    while (report_summary_markdown(doc, budget, &out, NULL, err, sizeof err))
        budget += 50;
    assert_true(budget < strlen(md));
    assert_non_null(strstr(out, "\n_4 more cells not shown; the results file has them all (autobatch report)._\n"));
    assert_non_null(strstr(out, " more frontier points not shown._\n"));
    assert_non_null(strstr(out, "\n_18 more trials not shown._\n"));
    assert_int_equal(count(out, "the results file has them all"), 1);
    free(out);
    free(md);
    json_decref(doc);
}

static void test_html_axes(void **state)
{
    (void)state;
    json_t *gpu = fixture("results-h100.json"), *nogpu = fixture("results-nogpu.json");
    char *a = render(gpu, REPORT_HTML, NULL), *b = render(nogpu, REPORT_HTML, NULL);
    assert_non_null(strstr(a, ">peak memory (GiB)</text>"));
    assert_null(strstr(a, "peak memory not measured"));
    assert_non_null(strstr(b, ">micro-batch (peak memory not measured)</text>"));
    assert_non_null(strstr(a, "chosen: 256 \xc3\x97 1</text>"));
    assert_non_null(strstr(a, "class=\"frontier\""));
    /* The largest fit per cell: four bars, two of them ranges that topped out. */
    assert_int_equal(count(a, "<g class=\"cell\">"), 4);
    assert_int_equal(count(a, ">\xe2\x89\xa5" "512</text>"), 2);
    free(a);
    free(b);
    json_decref(gpu);
    json_decref(nogpu);
}

/* ------------------------------------------------------------------ */
/* The summary within a byte budget.                                   */

static json_t *many_trials(size_t n)
{
    json_t *doc = fixture("results-h100.json"), *trials = json_object_get(doc, "trials");
    json_t *fit = json_deep_copy(json_array_get(trials, 0)), *oom = json_deep_copy(json_array_get(trials, 9));
    json_array_clear(trials);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_deep_copy(i % 2 ? oom : fit);
        json_object_set_new(t, "id", json_integer((json_int_t)i + 1));
        json_object_set_new(t, "micro_batch", json_integer((json_int_t)(i % 500) + 1));
        json_array_append_new(trials, t);
    }
    json_object_set_new(json_object_get(doc, "summary"), "trials", json_integer((json_int_t)n));
    json_decref(fit);
    json_decref(oom);
    return doc;
}

/* How many trial rows a Markdown report shows: the lines after "## Trials" that start a row. */
static size_t trial_rows(const char *md)
{
    const char *p = strstr(md, "\n## Trials\n");
    assert_non_null(p);
    return count(p, "\n| ") - 1; /* not the header */
}

static void test_summary_budget(void **state)
{
    (void)state;
    const size_t n = 8000;
    json_t *doc = many_trials(n);
    size_t full_len;
    char *full = render(doc, REPORT_MARKDOWN, &full_len);
    assert_true(full_len > REPORT_STEP_SUMMARY_LIMIT); /* else the test proves nothing */
    assert_int_equal(trial_rows(full), n);

    const size_t budgets[] = { REPORT_STEP_SUMMARY_LIMIT, 100000, 20000, 6000 };
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++) {
        char *out = NULL, err[256] = "";
        size_t len = 0;
        assert_int_equal(report_summary_markdown(doc, budgets[i], &out, &len, err, sizeof err), 0);
        if (len > budgets[i])
            fail_msg("%zu bytes for a budget of %zu", len, budgets[i]);
        assert_int_equal(strlen(out), len);
        assert_true(len > budgets[i] - 700); /* it fills the budget, give or take a row and the notes */
        size_t shown = trial_rows(out);
        char note[128];
        snprintf(note, sizeof note, "\n_%zu more trials not shown;", n - shown);
        if (!strstr(out, note))
            fail_msg("budget %zu: %zu rows shown, no note '%s'", budgets[i], shown, note + 1);
        /* The rows shown are the first ones, whole, and the head is intact. */
        assert_memory_equal(out, full, (size_t)(strstr(full, "\n## Trials\n") - full));
        assert_non_null(strstr(out, "\n| 1 | 1 | 1 | off | fit |"));
        free(out);
    }

    /* Too small for even the head: an error that says so. */
    char *out = NULL, err[256] = "";
    assert_int_equal(report_summary_markdown(doc, 300, &out, NULL, err, sizeof err), -1);
    assert_null(out);
    assert_non_null(strstr(err, "only 300 are allowed"));

    /* A budget that fits it all gives exactly the Markdown report. */
    json_t *small = fixture("results-h100.json");
    char *md = render(small, REPORT_MARKDOWN, NULL);
    assert_int_equal(report_summary_markdown(small, REPORT_STEP_SUMMARY_LIMIT, &out, NULL, err, sizeof err), 0);
    assert_string_equal(out, md);
    assert_null(strstr(out, "not shown"));
    free(out);
    assert_int_equal(report_summary_markdown(small, strlen(md), &out, NULL, err, sizeof err), 0);
    assert_string_equal(out, md);
    free(out);
    assert_int_equal(report_summary_markdown(small, strlen(md) - 1, &out, NULL, err, sizeof err), 0);
    assert_true(strlen(out) <= strlen(md) - 1);
    assert_non_null(strstr(out, "more trials not shown"));
    free(out);
    free(md);
    json_decref(small);
    free(full);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* Partial, old and broken documents.                                  */

static void test_missing_and_null(void **state)
{
    (void)state;
    const char *docs[] = {
        "{}",
        "{\"schema\": \"autobatch.results/1\", \"trials\": [], \"best\": null, \"summary\": null}",
        "{\"trials\": [null, 1, {}, {\"outcome\": 5, \"micro_batch\": \"x\", \"evidence\": 7}], "
        "\"max_fit\": [null, {}, {\"grad_accum\": 1, \"checkpointing\": true, \"bounded_by\": \"batch.max\"}], "
        "\"frontier\": [{}], \"best\": {}, \"host\": {\"gpus\": [{}]}, \"space\": {\"batch\": null}, "
        "\"command\": [null, 3], \"contradictions\": [{}], \"baseline\": {\"changes\": [{}]}}",
        "{\"trials\": [{\"id\": 1, \"micro_batch\": 8, \"grad_accum\": 1, \"checkpointing\": false, "
        "\"outcome\": \"fit\", \"samples_per_s\": 10.0, \"peak_mem_bytes\": 0, \"wall_s\": -1}], "
        "\"best\": {\"micro_batch\": 8, \"grad_accum\": 1, \"checkpointing\": false, \"samples_per_s\": 10.0}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        json_error_t je;
        json_t *doc = json_loads(docs[i], 0, &je);
        assert_non_null(doc);
        for (int f = REPORT_MARKDOWN; f <= REPORT_JUNIT; f++) {
            char *out = render(doc, (enum report_format)f, NULL);
            assert_true(strlen(out) > 100);
            free(out);
        }
        char *out = NULL, err[256];
        assert_int_equal(report_summary_markdown(doc, 4096, &out, NULL, err, sizeof err), 0);
        free(out);
        json_decref(doc);
    }

    /* The fixtures of runs that ended early. */
    json_t *crash = fixture("results-crash.json");
    char *md = render(crash, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "**No configuration was chosen: the command failed for a reason other than memory**"));
    assert_non_null(strstr(md, "The command failed in trial 1 (crash, exit code 1): `RuntimeError: Expected all tensors"));
    free(md);
    json_decref(crash);
    json_t *intr = fixture("results-interrupted.json");
    md = render(intr, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "No trial ran."));
    assert_non_null(strstr(md, "- **Exit:** 130 (interrupted)"));
    free(md);
    char *html = render(intr, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "no trial ran"));
    assert_int_equal(count(html, "class=\"trial\""), 0);
    free(html);
    json_decref(intr);
    json_t *part = fixture("results-partial.json");
    md = render(part, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "| 3 | \xe2\x80\x94 | \xe2\x80\x94 | \xe2\x80\x94 | timeout |"));
    assert_non_null(strstr(md, "- **Exit:** unknown"));
    free(md);
    json_decref(part);
}

static void test_refused(void **state)
{
    (void)state;
    char *out = (char *)"untouched", err[256] = "";
    json_t *arr = json_array();
    assert_int_equal(report_render(arr, REPORT_HTML, &out, NULL, err, sizeof err), -1);
    assert_null(out);
    assert_string_equal(err, "the results are not a json object");
    json_decref(arr);
    json_t *other = json_pack("{s:s}", "schema", "something.else/2");
    assert_int_equal(report_render(other, REPORT_MARKDOWN, &out, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an autobatch results file (schema 'something.else/2')"));
    assert_int_equal(report_summary_markdown(other, 1000, &out, NULL, err, sizeof err), -1);
    json_decref(other);
    assert_int_equal(report_render(NULL, REPORT_JUNIT, &out, NULL, err, sizeof err), -1);
}

static void test_format_parse(void **state)
{
    (void)state;
    enum report_format f = REPORT_JUNIT;
    assert_int_equal(report_format_parse("markdown", &f), 0);
    assert_int_equal(f, REPORT_MARKDOWN);
    assert_int_equal(report_format_parse("html", &f), 0);
    assert_int_equal(f, REPORT_HTML);
    assert_int_equal(report_format_parse("junit", &f), 0);
    assert_int_equal(f, REPORT_JUNIT);
    assert_int_equal(report_format_parse("md", &f), 0);
    assert_int_equal(f, REPORT_MARKDOWN);
    assert_int_equal(report_format_parse("pdf", &f), -1);
    assert_int_equal(report_format_parse("", &f), -1);
    assert_int_equal(report_format_parse(NULL, &f), -1);
    assert_int_equal(f, REPORT_MARKDOWN);
    assert_string_equal(report_format_name(REPORT_HTML), "html");
}

/* ------------------------------------------------------------------ */
/* The regression gate, as baseline_compare() stores it.              */

static void test_regression_gate(void **state)
{
    (void)state;
    json_t *doc = fixture("results-nogpu.json");
    json_error_t je;
    json_t *bl = json_loads(
        "{\"file\": \"old <run>.json\", \"threshold\": 0.05, \"regression\": true, \"different_command\": true,"
        " \"changes\": ["
        "  {\"kind\": \"command\", \"text\": \"the baseline is for a different command: a (this run: b)\","
        "   \"regression\": false, \"improvement\": false},"
        "  {\"kind\": \"throughput\", \"text\": \"throughput of the chosen configuration fell 6.0%\","
        "   \"regression\": true, \"improvement\": false},"
        "  {\"kind\": \"max_fit\", \"text\": \"largest micro-batch for grad-accum 2 grew\","
        "   \"regression\": false, \"improvement\": true}]}", 0, &je);
    assert_non_null(bl);
    json_object_set_new(doc, "baseline", bl);

    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n## Regression gate\n\n**Regression** against `old <run>.json` (throughput threshold 5%).\n"));
    assert_non_null(strstr(md, "> **Different command:**"));
    assert_non_null(strstr(md, "- **regression:** throughput of the chosen configuration fell 6.0%\n"));
    assert_non_null(strstr(md, "- improvement: largest micro-batch for grad-accum 2 grew\n"));
    free(md);

    char *html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<b>Regression</b> against <code>old &lt;run&gt;.json</code>"));
    assert_non_null(strstr(html, "Different command:"));
    free(html);

    size_t len;
    char *xml = render(doc, REPORT_JUNIT, &len);
    struct junit_seen js;
    junit_parse(xml, len, &js);
    assert_int_equal(js.tests, 11);    /* 10 trials and the gate */
    assert_int_equal(js.failures, 1);  /* the gate */
    assert_int_equal(js.skipped, 4);
    assert_non_null(strstr(xml, "<testcase name=\"regression gate\" classname=\"autobatch.baseline\""));
    assert_non_null(strstr(xml, "<failure type=\"regression\" message=\"1 regression against old &lt;run&gt;.json\">"));
    free(xml);

    /* A gate that passed: a testcase that passes, and a calm sentence. */
    json_object_set_new(json_object_get(doc, "baseline"), "regression", json_false());
    json_object_set_new(json_object_get(doc, "baseline"), "changes", json_array());
    xml = render(doc, REPORT_JUNIT, &len);
    junit_parse(xml, len, &js);
    assert_int_equal(js.tests, 11);
    assert_int_equal(js.failures, 0);
    free(xml);
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "No regression against `old <run>.json`"));
    assert_null(strstr(md, "Different command"));
    free(md);
    json_decref(doc);
}

/* ------------------------------------------------------------------ */
/* Hostile text and hostile sizes.                                     */

static const char *const md_lines[] = {
    "# autobatch results", "**Chosen:** ", "**No configuration", "The command failed in trial ",
    "- ", "The search was interrupted", "## ", "**Regression** against ", "No regression against ",
    "> **Different command:**", "Nothing changed.", "Throughput against ", "Empty: no trial fitted.",
    "Sizes that failed", "No trial ran.", "_", "<details><summary>", "</details>", NULL,
};

/* Every format passes fmtcheck's checks (the fuzz target's, see tests/fuzz/). */
static void check_formats(const json_t *doc)
{
    size_t len, at = 0;
    const char *why;
    char *md = render(doc, REPORT_MARKDOWN, &len);
    if ((why = fc_markdown(md, len, md_lines, &at)))
        fail_msg("markdown: %s at byte %zu: %.80s", why, at, md + at);
    free(md);
    char *html = render(doc, REPORT_HTML, &len);
    assert_int_equal(fc_count_ci(html, len, "<script"), 0);
    if ((why = fc_html(html, len, &at)))
        fail_msg("html: %s at byte %zu: %.80s", why, at, html + at);
    free(html);
    char *xml = render(doc, REPORT_JUNIT, &len);
    if ((why = fc_xml(xml, len, &at)))
        fail_msg("junit: %s at byte %zu: %.80s", why, at, xml + at);
    free(xml);
}

/* A real file with markup, pipes, line breaks and control characters in
 * every string (tests/fuzz/seeds_results/results-hostile.json). */
static void test_hostile_strings(void **state)
{
    (void)state;
    const char *src = getenv("AB_SOURCE_DIR");
    assert_non_null(src);
    char *path = NULL;
    assert_true(asprintf(&path, "%s/tests/fuzz/seeds_results/results-hostile.json", src) > 0);
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc)
        fail_msg("cannot load '%s': %s", path, je.text);
    free(path);
    check_formats(doc);
    /* The same strings in the regression gate's texts and file name. */
    json_t *bl = json_pack("{s:s, s:b, s:[{s:s, s:s, s:b}]}", "file", "old|</code>\n.json",
                           "regression", 1, "changes", "kind", "command", "text",
                           "a | b\n| c |<script>x</script>\x1b[2J", "regression", 1);
    json_object_set_new(doc, "baseline", bl);
    check_formats(doc);
    json_decref(doc);
}

/*
 * A results document that grows with n in every direction: n trials (a
 * third of them OOMs with evidence), a frontier of n points, n cells, n
 * contradictions, n baseline changes, an n-word command, and one crash
 * whose evidence and one command word are 64n bytes long.
 */
static json_t *big_doc(size_t n)
{
    json_t *trials = json_array(), *front = json_array(), *cells = json_array(),
           *contra = json_array(), *cmd = json_array(), *changes = json_array();
    size_t big = 64 * n;
    char *longtext = malloc(big + 1);
    assert_non_null(longtext);
    for (size_t i = 0; i < big; i++)
        longtext[i] = "ab|<&`* \\x"[i % 10];
    longtext[big] = '\0';
    for (size_t i = 0; i < n; i++) {
        json_int_t mb = (json_int_t)i + 1;
        int oom = i % 3 == 2;
        json_array_append_new(trials, json_pack(
            "{s:I, s:I, s:I, s:b, s:s, s:f, s:I, s:o, s:o, s:o}", "id", mb, "micro_batch", mb,
            "grad_accum", (json_int_t)(1 + i % 4), "checkpointing", (int)(i % 2), "outcome",
            oom ? "oom" : "fit", "wall_s", 0.25, "steps_measured", (json_int_t)5, "samples_per_s",
            oom ? json_null() : json_real(10.0 + (double)i), "peak_mem_bytes",
            json_integer((json_int_t)(i + 1) << 20), "evidence",
            oom ? json_string("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB | <x>")
                : json_null()));
        if (!oom)
            json_array_append_new(front, json_pack("{s:I, s:I, s:b, s:f, s:I}", "micro_batch", mb,
                                                   "grad_accum", (json_int_t)(1 + i % 4), "checkpointing",
                                                   (int)(i % 2), "samples_per_s", 10.0 + (double)i,
                                                   "peak_mem_bytes", (json_int_t)(i + 1) << 20));
        json_array_append_new(cells, json_pack("{s:I, s:b, s:I, s:I, s:I, s:s}", "grad_accum", mb,
                                               "checkpointing", 0, "micro_batch", mb, "smallest_fail",
                                               mb + 1, "trials", (json_int_t)2, "skipped", "note | <b>"));
        json_array_append_new(contra, json_pack("{s:I, s:b, s:I, s:I, s:s}", "grad_accum", (json_int_t)1,
                                                "checkpointing", 0, "micro_batch", mb, "larger_fit",
                                                mb + 1, "retest", "fit"));
        json_array_append_new(changes, json_pack("{s:s, s:s, s:b}", "kind", "max_fit", "text",
                                                 "largest micro-batch shrank | <b>", "regression", 1));
        json_array_append_new(cmd, json_string("--flag=a value"));
    }
    json_array_append_new(cmd, json_string(longtext));
    json_array_append_new(trials, json_pack("{s:I, s:I, s:s, s:I, s:s}", "id", (json_int_t)n + 1,
                                            "micro_batch", (json_int_t)1, "outcome", "crash",
                                            "exit_code", (json_int_t)1, "evidence", longtext));
    free(longtext);
    json_t *doc = json_pack(
        "{s:s, s:o, s:s, s:{s:s, s:[{s:s, s:I}]}, s:{s:{s:I, s:I, s:I}, s:s}, s:o, s:o, s:o, s:o,"
        " s:{s:I, s:I, s:b, s:f, s:I}, s:{s:I, s:f, s:I}, s:{s:s, s:b, s:o}}",
        "schema", "autobatch.results/1", "command", cmd, "started_at", "2026-11-21T08:00:00Z",
        "host", "hostname", "node", "gpus", "name", "NVIDIA H100", "memory_total_bytes",
        (json_int_t)85520809984, "space", "batch", "min", (json_int_t)1, "max", (json_int_t)n,
        "step", (json_int_t)1, "unit", "samples", "trials", trials, "max_fit", cells, "frontier",
        front, "contradictions", contra, "best", "micro_batch", (json_int_t)1, "grad_accum",
        (json_int_t)1, "checkpointing", 0, "samples_per_s", 10.0, "peak_mem_bytes",
        (json_int_t)1 << 20, "summary", "trials", (json_int_t)n, "wall_s", 1.0, "exit",
        (json_int_t)0, "baseline", "file", "old.json", "regression", 1, "changes", changes);
    assert_non_null(doc);
    return doc;
}

static double time_reports(size_t n, void *ctx)
{
    (void)ctx;
    json_t *doc = big_doc(n);
    double t0 = timing_now();
    static const enum report_format fmts[] = { REPORT_MARKDOWN, REPORT_HTML, REPORT_JUNIT };
    size_t full = 0;
    for (size_t k = 0; k < 3; k++) {
        char *out = NULL, err[256];
        if (report_render(doc, fmts[k], &out, k ? NULL : &full, err, sizeof err))
            fail_msg("%s: %s", report_format_name(fmts[k]), err);
        free(out);
    }
    /* Half the Markdown: the byte-budgeted path drops rows. */
    char *out = NULL, err[256];
    size_t len = 0;
    if (report_summary_markdown(doc, full / 2, &out, &len, err, sizeof err))
        fail_msg("summary: %s", err);
    assert_true(len <= full / 2 && len > full / 4);
    free(out);
    double t = timing_now() - t0;
    json_decref(doc);
    return t;
}

/* n fitting trials, every one on an n-point frontier: nothing else. */
static double time_scatter(size_t n, void *ctx)
{
    (void)ctx;
    json_t *trials = json_array(), *front = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_pack("{s:I, s:I, s:b, s:f, s:I}", "micro_batch", (json_int_t)i + 1,
                              "grad_accum", (json_int_t)1, "checkpointing", 0, "samples_per_s",
                              10.0 + (double)i, "peak_mem_bytes", (json_int_t)(i + 1) << 20);
        json_array_append(front, p);
        json_object_set_new(p, "outcome", json_string("fit"));
        json_array_append_new(trials, p);
    }
    json_t *doc = json_pack("{s:o, s:o}", "trials", trials, "frontier", front);
    double t0 = timing_now();
    char *out = NULL, err[256];
    if (report_render(doc, REPORT_HTML, &out, NULL, err, sizeof err))
        fail_msg("html: %s", err);
    free(out);
    double t = timing_now() - t0;
    json_decref(doc);
    return t;
}

/* ------------------------------------------------------------------ */
/* Reports that agree with the terminal (issue 28).                    */

/* The capacity learnt from the OOM messages, what --headroom excluded by
 * the run's own count, the warm start and the settings, in every format. */
static void test_capacity_source(void **state)
{
    (void)state;
    json_t *doc = fixture("results-pruned.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL), *html, *xml;
    assert_non_null(strstr(md, "\n- **Capacity:** no GPU: 24.0 GiB (from the OOM messages); headroom 10%: fits may "
                               "peak at up to 21.6 GiB; it excluded 2 fitting configurations: 80 \xc3\x97 1 (peak "
                               "24.0 GiB), 72 \xc3\x97 1 (peak 22.0 GiB); the choice peaks at 21.0 GiB, 87.5% of "
                               "24.0 GiB\n"));
    assert_null(strstr(md, "capacity unknown"));
    assert_non_null(strstr(md, "\n- **Warm start:** not used: nothing cached for this command, config, GPUs and "
                               "batch range\n"));
    assert_non_null(strstr(md, "\n- **Settings:** 5 measured steps after 2 warm-up; confirm the choice: 20 steps or "
                               "60.0 s; worst case auto (scan up to 30.0 s); replay off; probe on; cache on; trial "
                               "timeout 1200 s, hang timeout 300 s, kill grace 3.00 s; budget none; trial memory "
                               "limit none\n"));
    html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<tr><th>Capacity</th><td>no GPU: 24.0 GiB (from the OOM messages); headroom 10%"));
    assert_non_null(strstr(html, "<tr><th>Warm start</th><td>not used"));
    assert_non_null(strstr(html, "<tr><th>Settings</th><td>5 measured steps after 2 warm-up;"));
    xml = render(doc, REPORT_JUNIT, NULL);
    assert_non_null(strstr(xml, "<property name=\"capacity_bytes\" value=\"25769803776\"/>"));
    assert_non_null(strstr(xml, "<property name=\"capacity_source\" value=\"oom-message\"/>"));
    assert_non_null(strstr(xml, "<property name=\"headroom\" value=\"0.1\"/>"));
    assert_non_null(strstr(xml, "<property name=\"capacity\" value=\"no GPU: 24.0 GiB (from the OOM messages);"));
    assert_non_null(strstr(xml, "<property name=\"warm_start\" value=\"not used: "));
    assert_non_null(strstr(xml, "<property name=\"settings\" value=\"5 measured steps after 2 warm-up;"));
    free(md);
    free(html);
    free(xml);

    /* The same figure from --trial-memory-limit, which the choice did not
     * measure against: nothing is named as excluded. */
    json_t *cap = json_object_get(doc, "capacity");
    json_object_set_new(cap, "bytes", json_integer(2LL << 30));
    json_object_set_new(cap, "source", json_string("trial-memory-limit"));
    json_object_set_new(cap, "headroom_checked", json_false());
    json_object_set_new(cap, "excluded", json_null());
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "- **Capacity:** no GPU: 2.0 GiB (--trial-memory-limit); headroom 10%: fits may peak "
                               "at up to 1.8 GiB; not checked: the choice had no capacity to measure against;"));
    assert_null(strstr(md, "excluded"));
    free(md);
    json_decref(doc);

    /* A warm start, with its cache entry. */
    doc = fixture("results-warm.json");
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Warm start:** used: the search started from the boundaries cached by an "
                               "earlier run (2 cells), cache entry db1fab442fd503fb "
                               "(/tmp/fx/cache/autobatch/db1fab442fd503fb.json); the trials it saved are not known\n"));
    assert_non_null(strstr(md, "; it excluded 4 fitting configurations: "));
    free(md);
    /* --no-cache says why it was not used */
    json_object_set_new(json_object_get(doc, "warm_start"), "used", json_false());
    json_object_set_new(json_object_get(doc, "settings"), "cache", json_false());
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Warm start:** not used (--no-cache)\n"));
    free(md);
    json_decref(doc);
}

/* A pruned cell says it was pruned, in the tables and the chart. */
static void test_pruned_cell(void **state)
{
    (void)state;
    json_t *doc = fixture("results-pruned.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL), *html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(md, "\n| 1 | on | \xe2\x89\xa5 160 | \xe2\x80\x94 | 1 | pruned: could not beat the fastest "
                               "fit, so its limit was not searched; by the step-time line, no size it could fit "
                               "would beat the fastest point measured |\n"));
    assert_null(strstr(md, "top of the range"));
    assert_null(strstr(html, "top of the range"));
    assert_int_equal(count(html, "<g class=\"cell pruned\">"), 1);
    assert_non_null(strstr(html, ">pruned: could not beat the fastest fit</text>"));
    assert_non_null(strstr(html, ">\xe2\x89\xa5" "160 pruned</text>"));
    free(md);
    free(html);
    json_decref(doc);
}

/* The choice is always marked: off the frontier, its own row is added. */
static void test_choice_off_frontier(void **state)
{
    (void)state;
    json_t *doc = fixture("results-pruned.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL), *html;
    assert_int_equal(count(md, "| **chosen** |"), 2); /* on the frontier: its row and its trial's */
    assert_null(strstr(md, "not on the frontier"));
    free(md);
    /* Take the choice's point off the frontier (as when a faster fit with no
     * more memory was set aside by the headroom or a contradiction). */
    json_t *front = json_object_get(doc, "frontier"), *best = json_object_get(doc, "best");
    for (size_t i = json_array_size(front); i-- > 0;)
        if (json_equal(json_object_get(json_array_get(front, i), "micro_batch"), json_object_get(best, "micro_batch")) &&
            json_equal(json_object_get(json_array_get(front, i), "checkpointing"), json_object_get(best, "checkpointing")))
            json_array_remove(front, i);
    size_t nf = json_array_size(front);
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "**chosen** marks the choice, which is not on the frontier: its row is added.\n"));
    assert_non_null(strstr(md, "\n| 68 | 1 | off | 3625.4 | 21.0 GiB | **chosen** (not on the frontier) |\n"));
    /* in order of peak memory: after the 20.0 GiB point */
    assert_true(strstr(md, "| 68 | 1 | off | 3625.4") > strstr(md, "| 64 | 1 | off |"));
    const char *f = strstr(md, "## Pareto frontier"), *t = strstr(md, "## Trials");
    size_t rows = 0;
    for (const char *p = strstr(f, "\n| "); p && p < t; p = strstr(p + 1, "\n| "))
        rows++;
    assert_int_equal(rows, 1 + nf + 1); /* head, the frontier, the choice */
    html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<td>21.0 GiB</td><td>chosen (not on the frontier)</td></tr>"));
    free(md);
    free(html);
    json_decref(doc);
}

/* Failed sizes, the capacity and headroom lines, and the memory chart. */
static void test_charts_failed_memory(void **state)
{
    (void)state;
    json_t *doc = fixture("results-pruned.json");
    char *html = render(doc, REPORT_HTML, NULL);
    /* 4 OOMs: a cross each in the throughput chart and in the memory chart */
    assert_int_equal(count(html, "class=\"failed\""), 2 * 4);
    assert_int_equal(count(html, "class=\"failed\" data-trial=\"1\" data-micro-batch=\"256\""), 2);
    assert_int_equal(count(html, "<svg id=\"memory\""), 1);
    assert_non_null(strstr(html, "<h2>Peak memory against micro-batch</h2>"));
    assert_int_equal(count(html, "class=\"mem\""), 7);        /* every fit has a peak */
    assert_int_equal(count(html, "<g class=\"model\">"), 2);  /* both cells' memory lines */
    assert_int_equal(count(html, "<g class=\"capacity\">"), 2);
    assert_int_equal(count(html, "<g class=\"headroom\">"), 2);
    assert_non_null(strstr(html, ">capacity 24.0 GiB</text>"));
    assert_non_null(strstr(html, ">headroom 10%: 21.6 GiB</text>"));
    free(html);
    /* No measured memory: no memory chart, no capacity line; the failed
     * sizes at their micro-batch in the throughput chart. */
    json_t *nogpu = fixture("results-nogpu.json");
    html = render(nogpu, REPORT_HTML, NULL);
    size_t noom = 0;
    json_t *trials = json_object_get(nogpu, "trials");
    for (size_t i = 0; i < json_array_size(trials); i++)
        noom += !strcmp(json_string_value(json_object_get(json_array_get(trials, i), "outcome")), "oom");
    assert_true(noom > 0);
    assert_int_equal(count(html, "class=\"failed\""), noom);
    assert_null(strstr(html, "<svg id=\"memory\""));
    assert_null(strstr(html, "class=\"capacity\""));
    assert_non_null(strstr(html, ">did not fit</text>"));
    free(html);
    json_decref(nogpu);
    json_decref(doc);
}

/*
 * Every format stays linear in the size of the results file: all of it
 * growing at once, and the one product that used to be quadratic (each
 * fitting trial looked up in the frontier, in the HTML's scatter plot)
 * at a size where a pairwise scan would dominate.
 */
static void test_linear(void **state)
{
    (void)state;
    double r = timing_ratio("reports, every part growing", time_reports, NULL, 250, 4000, NULL,
                            NULL, NULL);
    assert_true(r < TIMING_MAX_RATIO);
    r = timing_ratio("html, n fits on an n-point frontier", time_scatter, NULL, 2000, 4000, NULL,
                     NULL, NULL);
    assert_true(r < TIMING_MAX_RATIO);
}

/* Where the memory goes: both trials with their shares of the capacity,
 * once when they are one trial; what was not measured is named; an older
 * file without a breakdown shows no line. */
static void test_memory_breakdown(void **state)
{
    (void)state;
    json_t *doc = fixture("results-h100.json");
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_null(strstr(md, "**Memory:**"));
    free(md);
    json_t *parts = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "device", "cuda",
                              "params", (json_int_t)1 << 30, "grads", (json_int_t)1 << 30,
                              "optimizer", (json_int_t)2 << 30, "activations", (json_int_t)60 << 30,
                              "cache", (json_int_t)4 << 30, "outside", (json_int_t)512 << 20,
                              "peak", (json_int_t)(68LL << 30) + (512 << 20), "held", (json_int_t)4 << 30);
    json_t *share = json_pack("{s:f, s:f}", "params", 1.0 / 79.6, "peak", 68.5 / 79.6);
    json_t *cpu = json_pack("{s:s, s:I, s:I, s:I, s:n, s:n, s:n, s:n}", "device", "cpu",
                            "params", (json_int_t)4096, "grads", (json_int_t)4096, "optimizer",
                            (json_int_t)8460, "activations", "cache", "outside", "peak");
    json_object_set_new(doc, "memory_breakdown",
        json_pack("{s:n, s:{s:I, s:I, s:I, s:b, s:s, s:o, s:o}, s:{s:I, s:I, s:I, s:b, s:s, s:o, s:o}}",
                  "capacity_bytes",
                  "smallest", "trial", (json_int_t)1, "micro_batch", (json_int_t)8, "grad_accum",
                  (json_int_t)2, "checkpointing", 1, "device", "cpu", "parts", cpu, "share", json_object(),
                  "choice", "trial", (json_int_t)7, "micro_batch", (json_int_t)256, "grad_accum",
                  (json_int_t)1, "checkpointing", 0, "device", "cuda", "parts", parts, "share", share));
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Memory:** the choice (trial 7, micro-batch 256, CUDA): parameters "
                               "1.0 GiB (1.3%), gradients 1.0 GiB (1.3%), optimizer state 2.0 GiB (2.5%), "
                               "activations and temporaries 60.0 GiB (75.3%), allocator cache and "
                               "fragmentation 4.0 GiB (5.0%), outside the allocator 512.0 MiB (0.63%); "
                               "peak 68.5 GiB (86.0%); the smallest fit (trial 1, micro-batch 8 \xc3\x97 2, "
                               "checkpointing, CPU): parameters 4 KiB (under 0.01%), gradients 4 KiB (under 0.01%), "
                               "optimizer state 8 KiB (under 0.01%); not measured: activations and temporaries, "
                               "allocator cache and fragmentation, outside the allocator (the CPU allocator "
                               "keeps no counters); shares of 79.6 GiB\n"));
    free(md);
    char *html = render(doc, REPORT_HTML, NULL);
    assert_non_null(strstr(html, "<tr><th>Memory</th><td>the choice (trial 7, micro-batch 256, CUDA): "));
    free(html);
    char *xml = render(doc, REPORT_JUNIT, NULL);
    assert_non_null(strstr(xml, "<property name=\"memory\" value=\"the choice (trial 7, "));
    free(xml);
    /* One trial: said once; no capacity: no shares. */
    json_t *mb = json_object_get(doc, "memory_breakdown");
    json_object_set(mb, "smallest", json_object_get(mb, "choice"));
    json_object_del(doc, "capacity");
    json_object_set_new(doc, "host", json_pack("{s:s, s:[]}", "hostname", "vm", "gpus"));
    md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "- **Memory:** the choice, also the smallest fit (trial 7, micro-batch 256, "
                               "CUDA): parameters 1.0 GiB, gradients"));
    assert_non_null(strstr(md, "; peak 68.5 GiB; no shares: the capacity is unknown\n"));
    assert_int_equal(count(md, "trial 7, micro-batch 256"), 1);
    free(md);
    json_decref(doc);
}

/* Batch is not the problem: the sum before any activation against the
 * capacity, what was not yet allocated when it failed, and what to try
 * next (checkpointing only where it can help and was not tried; the
 * knobs autobatch does not try named as such); the reports show it
 * when nothing fitted. */
static void test_nofit_text(void **state)
{
    (void)state;
    json_t *f = json_pack("{s:I, s:I, s:I, s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:I,"
                          " s:b, s:b, s:[s, s, s]}",
                          "trial", (json_int_t)2, "micro_batch", (json_int_t)1, "grad_accum",
                          (json_int_t)1, "checkpointing", 0, "device", "cuda", "step", (json_int_t)0,
                          "params", (json_int_t)(6656LL << 20), "grads", (json_int_t)(6656LL << 20),
                          "grads_allocated", (json_int_t)(3LL << 30), "optimizer",
                          (json_int_t)(13312LL << 20), "optimizer_allocated", (json_int_t)0,
                          "optimizer_class", "AdamW", "before_activations", (json_int_t)(26624LL << 20),
                          "capacity_bytes", (json_int_t)(24LL << 30), "exceeds_capacity", 1,
                          "checkpointing_tried", 0, "suggestions", "mixed_precision",
                          "8bit_optimizer", "sharding");
    char *what, *next;
    assert_int_equal(report_nofit_text(f, &what, &next), 1);
    assert_string_equal(what, "micro_batch=1 does not fit: weights 6.5 GiB + gradients 6.5 GiB "
                              "(3.0 GiB allocated when it failed) + AdamW state 13.0 GiB (not yet "
                              "allocated when it failed) = 26.0 GiB of 24.0 GiB before any activation");
    assert_string_equal(next, "the batch is not the problem: the weights, gradients and optimizer "
                              "state alone are more than the memory, so no batch size fits (not "
                              "even micro_batch=1) and checkpointing cannot help (it saves "
                              "activations only); try what "
                              "autobatch does not try yet: mixed precision or bf16 weights, an 8-bit "
                              "Adam (bitsandbytes), or sharding the weights, gradients and optimizer "
                              "state over GPUs (FSDP, DeepSpeed ZeRO)");
    free(what);
    free(next);

    /* Room for activations, checkpointing not tried: it comes first;
     * gradients all there: nothing said of them; no capacity: no number. */
    json_object_set_new(f, "grads_allocated", json_integer(6656LL << 20));
    json_object_set_new(f, "capacity_bytes", json_null());
    json_object_set_new(f, "exceeds_capacity", json_null());
    json_array_insert_new(json_object_get(f, "suggestions"), 0, json_string("checkpointing"));
    assert_int_equal(report_nofit_text(f, &what, &next), 1);
    assert_string_equal(what, "micro_batch=1 does not fit: weights 6.5 GiB + gradients 6.5 GiB + "
                              "AdamW state 13.0 GiB (not yet allocated when it failed) = 26.0 GiB "
                              "before any activation (the capacity is not known)");
    assert_string_equal(next, "the batch is not the problem: micro_batch=1 is the smallest in "
                              "--batch; try --checkpointing on,off (it saves activations), then what "
                              "autobatch does not try yet: mixed precision or bf16 weights, an 8-bit "
                              "Adam (bitsandbytes), or sharding the weights, gradients and optimizer "
                              "state over GPUs (FSDP, DeepSpeed ZeRO)");
    free(what);
    free(next);

    /* An optimizer torch does not ship: a floor; checkpointing tried. */
    json_object_set_new(f, "optimizer", json_null());
    json_object_set_new(f, "optimizer_allocated", json_integer(1 << 20));
    json_object_set_new(f, "optimizer_class", json_string("Lion"));
    json_object_set_new(f, "before_activations", json_integer((13312LL << 20) + (1 << 20)));
    json_object_set_new(f, "capacity_bytes", json_integer(24LL << 30));
    json_object_set_new(f, "exceeds_capacity", json_false());
    json_object_set_new(f, "checkpointing_tried", json_true());
    json_array_remove(json_object_get(f, "suggestions"), 0);
    assert_int_equal(report_nofit_text(f, &what, &next), 1);
    assert_string_equal(what, "micro_batch=1 does not fit: weights 6.5 GiB + gradients 6.5 GiB + "
                              "Lion state (its size is not known; 1.0 MiB allocated when it failed) "
                              "= at least 13.0 GiB of 24.0 GiB before any activation");
    assert_non_null(strstr(next, "micro_batch=1 is the smallest in --batch; checkpointing did not "
                                 "make it fit either; try what autobatch does not try yet: mixed "
                                 "precision or bf16 weights, an 8-bit optimizer, or sharding"));
    free(what);
    free(next);
    assert_int_equal(report_nofit_text(json_null(), &what, &next), 0);
    assert_null(what);
    assert_null(next);

    /* The reports, for a file where nothing fitted. */
    json_t *doc = fixture("results-h100.json");
    json_object_set_new(doc, "memory_breakdown", json_pack("{s:n, s:n, s:n, s:O}", "capacity_bytes",
                                                           "smallest", "choice", "failure", f));
    char *md = render(doc, REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "\n- **Memory:** micro\\_batch=1 does not fit: weights 6.5 GiB + "));
    assert_non_null(strstr(md, "before any activation; the batch is not the problem: "));
    free(md);
    json_decref(doc);
    json_decref(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_junit_counts),
        cmocka_unit_test(test_junit_oom_evidence),
        cmocka_unit_test(test_junit_escaping),
        cmocka_unit_test(test_hostile_unit),
        cmocka_unit_test(test_junit_xml_forbidden_chars),
        cmocka_unit_test(test_markdown_golden),
        cmocka_unit_test(test_markdown_content),
        cmocka_unit_test(test_html),
        cmocka_unit_test(test_html_axes),
        cmocka_unit_test(test_capacity_headroom),
        cmocka_unit_test(test_run_with),
        cmocka_unit_test(test_no_repeated_notices),
        cmocka_unit_test(test_summary_budget),
        cmocka_unit_test(test_missing_and_null),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_format_parse),
        cmocka_unit_test(test_regression_gate),
        cmocka_unit_test(test_hostile_strings),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_capacity_source),
        cmocka_unit_test(test_pruned_cell),
        cmocka_unit_test(test_choice_off_frontier),
        cmocka_unit_test(test_charts_failed_memory),
        cmocka_unit_test(test_memory_breakdown),
        cmocka_unit_test(test_nofit_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
