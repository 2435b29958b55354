/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for everything that reads a trial's lines: the OOM
 * classifier, the progress parsers (steps_parse_line, steps_parse_report,
 * steps_postfix_value), the training-step detector (trainlog, with and
 * without rules) and the in-process probe's line parser.  The input is
 * split at '\n' and '\r' into lines, as the trial runner splits output.
 * Besides not crashing (ASan, UBSan), it checks what callers rely on: a
 * step count never goes down and never exceeds STEPS_MAX, and a probe
 * step is always within INPROC_MAX_STEP.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inproc.h"
#include "oom.h"
#include "steps.h"
#include "trainlog.h"

static struct oom_table table = OOM_TABLE_INIT;
static int loaded;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!loaded) {
        char err[256];
        if (oom_table_load_default(&table, err, sizeof err))
            abort();
        loaded = 1;
    }
    struct trainlog plain = TRAINLOG_INIT, ruled = TRAINLOG_INIT;
    struct trainlog_rules rules = { "Train steps", "update", "update", NULL };
    if (trainlog_init(&plain, NULL, NULL, 0) || trainlog_init(&ruled, &rules, NULL, 0))
        abort();
    long last_plain = 0, last_ruled = 0;
    const char *p = (const char *)data, *end = p + size;
    double now = 0;
    while (p <= end) {
        const char *e = p;
        while (e < end && *e != '\n' && *e != '\r')
            e++;
        size_t len = (size_t)(e - p);
        struct oom_match m;
        oom_table_match(&table, p, len, &m);
        struct oom_numbers nums;
        oom_parse_numbers(p, len, &nums);
        struct step_event ev;
        if (steps_parse_line(p, len, &ev) && (ev.step > STEPS_MAX || ev.total > STEPS_MAX))
            abort();
        steps_parse_report(p, len, &ev);
        steps_postfix_value(p, len, "update");
        struct inproc_event pe;
        if (inproc_parse_line(p, len, &pe) && pe.kind == INPROC_STEP &&
            (pe.step < 1 || pe.step > INPROC_MAX_STEP))
            abort();
        long step;
        double rate;
        now += 0.01;
        if (trainlog_line(&plain, p, len, now, &step, &rate)) {
            if (step < last_plain || step > STEPS_MAX)
                abort();
            last_plain = step;
        }
        if (trainlog_line(&ruled, p, len, now, &step, &rate)) {
            if (step < last_ruled || step > STEPS_MAX)
                abort();
            last_ruled = step;
        }
        p = e + 1;
    }
    char desc[256];
    trainlog_describe(&plain, desc, sizeof desc);
    trainlog_release(&plain);
    trainlog_release(&ruled);
    return 0;
}
