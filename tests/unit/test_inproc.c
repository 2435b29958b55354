/* SPDX-License-Identifier: MIT */
/* Unit tests for inproc: the probe's lines, range checks, installing it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inproc.h"

static int parse(const char *line, struct inproc_event *ev)
{
    return inproc_parse_line(line, strlen(line), ev);
}

static void test_step_line(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":4242,\"rank\":1,\"world\":2,\"step\":7,"
                           "\"t\":722.842295,\"res\":2147483648,\"alloc\":1073741824,\"held\":536870912,\"bs\":8,"
                           "\"blen\":8,\"nb\":4}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_STEP);
    assert_int_equal(ev.pid, 4242);
    assert_int_equal(ev.rank, 1);
    assert_int_equal(ev.world, 2);
    assert_int_equal(ev.step, 7);
    assert_true(ev.t > 722.84 && ev.t < 722.85);
    assert_int_equal(ev.reserved, 2147483648LL);
    assert_int_equal(ev.allocated, 1073741824LL);
    assert_int_equal(ev.held, 536870912LL);
    assert_int_equal(ev.batch_size, 8);
    assert_int_equal(ev.batch_len, 8);
    assert_int_equal(ev.batches, 4);
}

static void test_nulls_are_unknown(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":9,\"rank\":0,\"world\":1,\"step\":1,\"t\":1.5,"
                           "\"res\":null,\"alloc\":null,\"bs\":null,\"blen\":null,\"nb\":0}", &ev), 1);
    assert_int_equal(ev.reserved, -1);
    assert_int_equal(ev.held, -1); /* absent: an older probe */
    assert_int_equal(ev.allocated, -1);
    assert_int_equal(ev.batch_size, -1);
    assert_int_equal(ev.batches, 0);
}

/* Issue 25 item 6: the allocator's retries, the memory outside it and
 * CUDA's total; absent (an older probe, off CUDA) they are unknown. */
static void test_step_cuda_fields(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":9,\"rank\":0,\"world\":1,\"step\":1,\"t\":1.5,"
                           "\"res\":1073741824,\"retries\":3,\"outside\":545259520,"
                           "\"ctotal\":150109880320}", &ev), 1);
    assert_int_equal(ev.retries, 3);
    assert_int_equal(ev.outside, 545259520LL);
    assert_int_equal(ev.cuda_total, 150109880320LL);
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":9,\"rank\":0,\"world\":1,\"step\":2,\"t\":1.5,"
                           "\"res\":1,\"retries\":0,\"outside\":0,\"ctotal\":null}", &ev), 1);
    assert_int_equal(ev.retries, 0);
    assert_int_equal(ev.outside, 0);
    assert_int_equal(ev.cuda_total, -1);
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":9,\"rank\":0,\"world\":1,\"step\":2,\"t\":1.5}",
                           &ev), 1);
    assert_int_equal(ev.retries, -1);
    assert_int_equal(ev.outside, -1);
    assert_int_equal(ev.cuda_total, -1);
    /* Out of range or of the wrong type: no event. */
    const char *bad[] = {
        "{\"ab\":\"step\",\"pid\":9,\"step\":1,\"t\":1,\"retries\":-1}",
        "{\"ab\":\"step\",\"pid\":9,\"step\":1,\"t\":1,\"outside\":-5}",
        "{\"ab\":\"step\",\"pid\":9,\"step\":1,\"t\":1,\"ctotal\":0}",
        "{\"ab\":\"step\",\"pid\":9,\"step\":1,\"t\":1,\"outside\":1.5}",
        "{\"ab\":\"step\",\"pid\":9,\"step\":1,\"t\":1,\"retries\":\"2\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(parse(bad[i], &ev), 0);
}

static void test_torch_and_error_lines(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"torch\",\"pid\":12,\"rank\":0,\"version\":\"2.8.0+cu128\","
                           "\"hook\":\"global\"}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_TORCH);
    assert_string_equal(ev.text, "2.8.0+cu128");
    assert_string_equal(ev.hook, "global");
    assert_int_equal(parse("{\"ab\":\"error\",\"pid\":12,\"what\":\"DataLoader hooks: x\"}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_ERROR);
    assert_string_equal(ev.text, "DataLoader hooks: x");
}

/* A line that claims an absurd number is no event: nothing downstream is
 * ever sized by a number the child printed. */
static void test_out_of_range_rejected(void **state)
{
    (void)state;
    struct inproc_event ev;
    const char *bad[] = {
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":2305843009213693952,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":0,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":-3,\"world\":1,\"step\":1,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":-5}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":1,\"res\":1e300}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1.5,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":0,\"rank\":0,\"world\":1,\"step\":1,\"t\":1}",
        "{\"ab\":\"step\",\"pid\":1,\"rank\":0,\"world\":1,\"step\":1,\"t\":1,\"bs\":\"8\"}",
        "{\"ab\":\"nope\",\"pid\":1}",
        "{\"step\": 3}",
        "not json",
        "",
        "{\"ab\":\"step\",\"pid\":1,\"step\":1,\"t\":1,\"ab\":\"torch\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i], &ev), 0);
        assert_int_equal(ev.kind, INPROC_NONE);
    }
}

/* What the model got: the outermost module's forwards since the last step. */
static void test_step_seen_fields(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,"
                           "\"bs\":4,\"blen\":4,\"nb\":2,\"seen\":8,\"fw\":2,\"elems\":65536,"
                           "\"tok\":2048}", &ev), 1);
    assert_int_equal(ev.seen, 8);
    assert_int_equal(ev.forwards, 2);
    assert_int_equal(ev.elems, 65536);
    assert_int_equal(ev.tokens, 2048);
    /* No forward seen, or one without a tensor: unknown, whatever else it says. */
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,"
                           "\"seen\":null,\"fw\":0,\"elems\":null,\"tok\":null}", &ev), 1);
    assert_int_equal(ev.seen, -1);
    assert_int_equal(ev.forwards, 0);
    assert_int_equal(ev.elems, -1);
    assert_int_equal(ev.tokens, -1);
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,"
                           "\"seen\":null,\"fw\":3,\"elems\":9}", &ev), 1);
    assert_int_equal(ev.forwards, 0);
    assert_int_equal(ev.elems, -1);
    /* An older probe's line has none of them. */
    assert_int_equal(parse("{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5}", &ev), 1);
    assert_int_equal(ev.seen, -1);
    assert_int_equal(ev.forwards, 0);
    /* Out of range or of the wrong type: no event. */
    const char *bad[] = {
        "{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,\"seen\":-1,\"fw\":1}",
        "{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,\"seen\":8,\"fw\":\"2\"}",
        "{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,\"seen\":8,\"fw\":1,"
        "\"elems\":1e300}",
        "{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":3,\"t\":2.5,\"seen\":2305843009213693952,"
        "\"fw\":1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(parse(bad[i], &ev), 0);
}

static void test_worst_line(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"worst\",\"pid\":6089,\"rank\":1,\"mode\":\"lengths\","
                           "\"signal\":\"dataset.lengths\",\"batches_seen\":8,\"whole\":true,\"elems\":4096,"
                           "\"longest\":256,\"position\":7,\"median\":320,\"first\":2,\"scan_s\":0.013,"
                           "\"sizes\":[4096,320,320]}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_WORST);
    assert_int_equal(ev.pid, 6089);
    assert_int_equal(ev.rank, 1);
    assert_string_equal(ev.worst.mode, "lengths");
    assert_string_equal(ev.worst.signal, "dataset.lengths");
    assert_int_equal(ev.worst.rank, 1);
    assert_int_equal(ev.worst.batches_seen, 8);
    assert_true(ev.worst.whole);
    assert_true(ev.worst.elems == 4096);
    assert_true(ev.worst.longest == 256);
    assert_int_equal(ev.worst.position, 7);
    assert_true(ev.worst.median == 320);
    assert_int_equal(ev.worst.first, 2);
    assert_true(ev.worst.scan_s > 0.012 && ev.worst.scan_s < 0.014);
    assert_int_equal(ev.worst.nsizes, 3);
    assert_true(ev.worst.sizes[0] == 4096 && ev.worst.sizes[2] == 320);

    /* A scan: no signal, sizes in elements, a longest it could not tell;
     * durations in seconds are not whole numbers. */
    assert_int_equal(parse("{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"signal\":null,"
                           "\"batches_seen\":40,\"whole\":false,\"elems\":12.5,\"longest\":null,"
                           "\"position\":39,\"median\":1.25,\"first\":2,\"scan_s\":30.001,"
                           "\"sizes\":[12.5,1,2,3,4,5,6,7,8,9]}", &ev), 1);
    assert_string_equal(ev.worst.mode, "scan");
    assert_string_equal(ev.worst.signal, "");
    assert_false(ev.worst.whole);
    assert_true(ev.worst.elems == 12.5);
    assert_true(ev.worst.longest < 0);
    assert_int_equal(ev.worst.nsizes, INPROC_WORST_SIZES); /* more are not kept */

    /* Off: nothing was looked at. */
    assert_int_equal(parse("{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"off\",\"signal\":null,"
                           "\"batches_seen\":0,\"whole\":false,\"elems\":null,\"longest\":null,"
                           "\"position\":null,\"median\":null,\"first\":0,\"scan_s\":0.000,\"sizes\":[]}",
                           &ev), 1);
    assert_string_equal(ev.worst.mode, "off");
    assert_true(ev.worst.elems < 0);
    assert_int_equal(ev.worst.position, -1);
    assert_int_equal(ev.worst.nsizes, 0);

    const char *bad[] = {
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"everything\"}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"elems\":-3}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"elems\":1e300}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"sizes\":[1,\"2\"]}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"sizes\":{}}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"whole\":1}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"position\":-2}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":0,\"mode\":\"scan\",\"batches_seen\":2.5}",
        "{\"ab\":\"worst\",\"pid\":0,\"rank\":0,\"mode\":\"scan\"}",
        "{\"ab\":\"worst\",\"pid\":5,\"rank\":-4,\"mode\":\"scan\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i], &ev), 0);
        assert_int_equal(ev.kind, INPROC_NONE);
    }
}

/* Where the memory goes: a real CUDA line (a torch 2.8 job on an H100)
 * and a CPU one, whose allocator figures are null. */
static void test_mem_line(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":7001,\"rank\":1,\"step\":2,\"device\":\"cuda\","
                           "\"params\":4194304,\"grads\":4194304,\"optim\":8388608,"
                           "\"peak_alloc\":1073741824,\"peak_res\":1275068416,\"held\":16908288,"
                           "\"outside\":545259520}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_MEM);
    assert_int_equal(ev.pid, 7001);
    assert_int_equal(ev.rank, 1);
    assert_int_equal(ev.step, 2);
    assert_string_equal(ev.mem.device, "cuda");
    assert_int_equal(ev.mem.rank, 1);
    assert_true(ev.mem.params == 4194304 && ev.mem.grads == 4194304 && ev.mem.optim == 8388608);
    assert_true(ev.mem.peak_alloc == 1073741824LL && ev.mem.peak_res == 1275068416LL);
    assert_true(ev.mem.held == 16908288 && ev.mem.outside == 545259520);

    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":7002,\"rank\":0,\"step\":2,\"device\":\"cpu\","
                           "\"params\":1063680,\"grads\":1063680,\"optim\":2127460,"
                           "\"peak_alloc\":null,\"peak_res\":null,\"held\":null,\"outside\":null}", &ev), 1);
    assert_string_equal(ev.mem.device, "cpu");
    assert_true(ev.mem.optim == 2127460);
    assert_true(ev.mem.peak_alloc == -1 && ev.mem.peak_res == -1 && ev.mem.held == -1 &&
                ev.mem.outside == -1);

    const char *bad[] = {
        /* the probe's own counts are never null */
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cpu\",\"params\":null,"
        "\"grads\":0,\"optim\":0}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cpu\",\"params\":1,\"optim\":0}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"tpu\",\"params\":1,"
        "\"grads\":0,\"optim\":0}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"params\":1,\"grads\":0,\"optim\":0}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"device\":\"cpu\",\"params\":1,"
        "\"grads\":0,\"optim\":0}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cuda\",\"params\":1,"
        "\"grads\":0,\"optim\":-1}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cuda\",\"params\":1,"
        "\"grads\":0,\"optim\":0,\"peak_alloc\":1e300}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cuda\",\"params\":1,"
        "\"grads\":0,\"optim\":0,\"peak_res\":\"2\"}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cuda\",\"params\":1,"
        "\"grads\":0,\"optim\":0,\"outside\":144115188075855873}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i], &ev), 0);
        assert_int_equal(ev.kind, INPROC_NONE);
    }
}

/* Where the memory went in a process that failed before its second
 * step: real lines of the probe (train_tts.py at d_model 1024 under a
 * 1.5 GiB limit on torch 1.13, and a CUDA one), with what the gradients
 * and AdamW's state take once allocated; an optimizer torch does not
 * ship has no expected size. */
static void test_mem_failure_line(void **state)
{
    (void)state;
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":4242,\"rank\":0,\"step\":0,\"at\":\"failure\","
                           "\"device\":\"cpu\",\"params\":475865248,\"grads\":390836384,\"optim\":0,"
                           "\"grads_expected\":475865248,\"optim_class\":\"AdamW\","
                           "\"optim_expected\":951731004,\"peak_alloc\":null,\"peak_res\":null,"
                           "\"held\":null,\"outside\":null}", &ev), 1);
    assert_int_equal(ev.kind, INPROC_MEM);
    assert_int_equal(ev.step, 0);
    assert_int_equal(ev.mem.failure, 1);
    assert_string_equal(ev.mem.device, "cpu");
    assert_true(ev.mem.params == 475865248 && ev.mem.grads == 390836384 && ev.mem.optim == 0);
    assert_true(ev.mem.grads_expected == 475865248 && ev.mem.optim_expected == 951731004LL);
    assert_string_equal(ev.mem.optim_class, "AdamW");
    assert_true(ev.mem.peak_alloc == -1 && ev.mem.held == -1);

    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":9,\"rank\":3,\"step\":1,\"at\":\"failure\","
                           "\"device\":\"cuda\",\"params\":1024,\"grads\":1024,\"optim\":512,"
                           "\"grads_expected\":1024,\"optim_class\":\"Lion\",\"optim_expected\":null,"
                           "\"peak_alloc\":8192,\"peak_res\":20971520,\"held\":2560,"
                           "\"outside\":545259520}", &ev), 1);
    assert_int_equal(ev.mem.failure, 1);
    assert_int_equal(ev.mem.rank, 3);
    assert_int_equal(ev.mem.step, 1);
    assert_true(ev.mem.optim_expected == -1 && ev.mem.peak_res == 20971520);
    assert_string_equal(ev.mem.optim_class, "Lion");

    /* No optimizer made: no class, nothing expected of it. */
    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":9,\"rank\":0,\"step\":0,\"at\":\"failure\","
                           "\"device\":\"cpu\",\"params\":1024,\"grads\":0,\"optim\":0,"
                           "\"grads_expected\":1024,\"optim_class\":null,\"optim_expected\":0}", &ev), 1);
    assert_string_equal(ev.mem.optim_class, "");
    assert_true(ev.mem.optim_expected == 0);

    /* A step line is no failure. */
    assert_int_equal(parse("{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"device\":\"cpu\","
                           "\"params\":1,\"grads\":1,\"optim\":2}", &ev), 1);
    assert_int_equal(ev.mem.failure, 0);

    const char *bad[] = {
        /* only "failure" is a place a line is said at */
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"at\":\"exit\",\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":1}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"at\":1,\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":1}",
        /* a failure after the second step has that step's line instead */
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":2,\"at\":\"failure\",\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":1}",
        /* the gradients' size is the probe's own count: never null */
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"at\":\"failure\",\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":null}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"at\":\"failure\",\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":1,\"optim_expected\":-5}",
        "{\"ab\":\"mem\",\"pid\":5,\"rank\":0,\"step\":0,\"at\":\"failure\",\"device\":\"cpu\","
        "\"params\":1,\"grads\":0,\"optim\":0,\"grads_expected\":1,\"optim_class\":7}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(parse(bad[i], &ev), 0);
        assert_int_equal(ev.kind, INPROC_NONE);
    }
}

static void seen_step(struct inproc_seen *s, long step, const char *fields)
{
    char line[512];
    struct inproc_event ev;
    snprintf(line, sizeof line, "{\"ab\":\"step\",\"pid\":7,\"rank\":0,\"world\":1,\"step\":%ld,"
             "\"t\":%ld.5,%s}", step, step, fields);
    assert_int_equal(parse(line, &ev), 1);
    assert_int_equal(inproc_seen_add(s, &ev), 0);
}

/* Medians per step after the warm-up: micro-batch x accumulation per
 * step, the micro-batch per forward; steps not fully seen left out. */
static void test_seen_medians(void **state)
{
    (void)state;
    struct inproc_seen s = INPROC_SEEN_INIT;
    struct inproc_seen_summary sum;
    assert_int_equal(inproc_seen_median(&s, 1, &sum), 0);
    assert_int_equal(sum.seen_per_step, 0);
    assert_int_equal(sum.tokens_per_step, -1);

    seen_step(&s, 1, "\"seen\":9,\"fw\":3,\"tok\":90"); /* warm-up: a dummy forward too */
    seen_step(&s, 2, "\"seen\":8,\"fw\":2,\"tok\":80");
    seen_step(&s, 3, "\"seen\":null,\"fw\":0");          /* not seen: left out */
    seen_step(&s, 4, "\"seen\":8,\"fw\":2,\"tok\":800");
    seen_step(&s, 5, "\"seen\":6,\"fw\":2,\"tok\":60"); /* a short last batch */
    assert_int_equal(s.n, 4);
    assert_int_equal(inproc_seen_median(&s, 1, &sum), 3);
    assert_int_equal(sum.seen_per_step, 8);
    assert_int_equal(sum.forwards_per_step, 2);
    assert_int_equal(sum.per_forward, 4);
    assert_int_equal(sum.tokens_per_step, 80);

    /* Nothing after the warm-up (it ran out of memory at step 2): all steps. */
    assert_int_equal(inproc_seen_median(&s, 10, &sum), 4);
    assert_int_equal(sum.forwards_per_step, 2);
    inproc_seen_release(&s);
    assert_null(s.v);

    /* A step without a token count makes the tokens unknown, not smaller. */
    seen_step(&s, 1, "\"seen\":4,\"fw\":1,\"tok\":40");
    seen_step(&s, 2, "\"seen\":4,\"fw\":1");
    assert_int_equal(inproc_seen_median(&s, 0, &sum), 2);
    assert_int_equal(sum.per_forward, 4);
    assert_int_equal(sum.tokens_per_step, -1);
    inproc_seen_release(&s);

    /* Lines that are not steps are not counted. */
    struct inproc_event ev;
    assert_int_equal(parse("{\"ab\":\"error\",\"pid\":12,\"what\":\"x\"}", &ev), 1);
    assert_int_equal(inproc_seen_add(&s, &ev), 0);
    assert_int_equal(s.n, 0);
}

/* The probe's source documents every field of every line it writes. */
static void test_probe_documents_its_fields(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/ab-inproc-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char dir[128], file[160], err[256];
    snprintf(dir, sizeof dir, "%s/probe", tmpl);
    assert_int_equal(inproc_install(dir, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/sitecustomize.py", dir);
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *doc[] = {
        "\"seen\":S,\"fw\":F,\"elems\":E,\"tok\":X,\"retries\":Y,\"outside\":B,\"ctotal\":B}",
        "num_alloc_retries", "total - free -",
        "{\"ab\":\"worst\",\"pid\":P,\"rank\":R,\"mode\":M,\"signal\":G,\"batches_seen\":N,",
        "\"whole\":W,\"elems\":E,\"longest\":L,\"position\":I,\"median\":D,\"first\":K,",
        "\"scan_s\":S,\"sizes\":[E1,E2,...]}",
        "AUTOBATCH_WORST_CASE=off|auto|scan", "AUTOBATCH_WORST_CASE_SCAN",
        "{\"ab\":\"mem\",\"pid\":P,\"rank\":R,\"step\":2,\"device\":D,\"params\":B,\"grads\":B,",
        "\"optim\":B,\"peak_alloc\":B,\"peak_res\":B,\"held\":B,\"outside\":B}",
        "{\"ab\":\"mem\",\"pid\":P,\"rank\":R,\"step\":N,\"at\":\"failure\",\"device\":D,",
        "\"params\":B,\"grads\":B,\"optim\":B,\"grads_expected\":B,\"optim_class\":C,",
        "\"optim_expected\":B,\"peak_alloc\":B,\"peak_res\":B,\"held\":B,\"outside\":B}",
    };
    for (size_t i = 0; i < sizeof doc / sizeof *doc; i++)
        if (!strstr(buf, doc[i]))
            fail_msg("the probe's header does not document: %s", doc[i]);
    unlink(file);
    rmdir(dir);
    rmdir(tmpl);
}

static void test_install_writes_the_probe(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/ab-inproc-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char dir[128], file[160], err[256];
    snprintf(dir, sizeof dir, "%s/probe", tmpl);
    assert_int_equal(inproc_install(dir, err, sizeof err), 0);
    snprintf(file, sizeof file, "%s/sitecustomize.py", dir);
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "AUTOBATCH_PROBE"));
    assert_non_null(strstr(buf, "register_optimizer_step_post_hook"));
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    unlink(file);
    rmdir(dir);
    /* A directory that cannot be made is an error with a reason. */
    snprintf(dir, sizeof dir, "%s/missing/probe", tmpl);
    assert_int_equal(inproc_install(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot make"));
    rmdir(tmpl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_line),
        cmocka_unit_test(test_nulls_are_unknown),
        cmocka_unit_test(test_step_cuda_fields),
        cmocka_unit_test(test_torch_and_error_lines),
        cmocka_unit_test(test_out_of_range_rejected),
        cmocka_unit_test(test_step_seen_fields),
        cmocka_unit_test(test_worst_line),
        cmocka_unit_test(test_mem_line),
        cmocka_unit_test(test_mem_failure_line),
        cmocka_unit_test(test_seen_medians),
        cmocka_unit_test(test_probe_documents_its_fields),
        cmocka_unit_test(test_install_writes_the_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
