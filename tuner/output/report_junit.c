/* SPDX-License-Identifier: MIT */
/*
 * report_junit: the JUnit XML report (report.h's REPORT_JUNIT) from a
 * loaded struct rdoc (report_int.h): one testcase per trial, named by
 * its configuration, and one for the regression gate when the document
 * holds one.  Text is escaped with report.c's report_xml_esc().
 */
#include "output/report_int.h"
#include "util/sbuf.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EVIDENCE_ATTR_MAX 500 /* bytes of evidence in a message="" attribute */

/* A testcase is named by its configuration, not its trial number, so that
 * CI history follows a size from one night to the next; a configuration
 * run again (a re-test, a noisy finalist) is "(run 2)", ... */
static void junit_trial(struct sbuf *b, const struct rdoc *d, const struct rtrial *t)
{
    char x[32], y[32], z[32], again[32] = "";
    int runs = 1;
    for (const struct rtrial *o = d->t; o < t; o++)
        runs += o->mb == t->mb && o->ga == t->ga && o->ckpt == t->ckpt;
    if (runs > 1)
        snprintf(again, sizeof again, " (run %d)", runs);
    sb_printf(b, "    <testcase name=\"micro_batch=%s grad_accum=%s checkpointing=%s%s\" "
                 "classname=\"autobatch.grad_accum_%s.checkpointing_%s\" time=\"%.3f\"",
              t->mb < 0 ? "null" : report_fmt_int(y, sizeof y, t->mb),
              t->ga < 0 ? "null" : report_fmt_int(z, sizeof z, t->ga), t->ckpt < 0 ? "null" : report_ckpt_word(t->ckpt),
              again, t->ga < 0 ? "null" : z, t->ckpt < 0 ? "null" : report_ckpt_word(t->ckpt),
              isnan(t->wall) || t->wall < 0 ? 0.0 : t->wall);
    report_fmt_int(x, sizeof x, t->id);
    const char *elem = NULL, *why = NULL;
    switch (t->oc) {
    case OC_FIT:
        sb_printf(b, ">\n      <system-out>trial %s: fit: ", x);
        sb_printf(b, "%s %s/s over %s measured steps, peak memory %s%s</system-out>\n"
                     "    </testcase>\n",
                  report_fmt_rate(x, sizeof x, t->sps), d->unit, report_fmt_int(y, sizeof y, t->steps),
                  report_fmt_bytes(z, sizeof z, t->peak), t->chosen ? " (chosen)" : "");
        return;
    case OC_OOM: elem = "skipped"; why = "out of memory"; break;
    case OC_INTERRUPTED: elem = "skipped"; why = "interrupted"; break;
    case OC_CRASH: elem = "error"; why = "the command failed for a reason other than memory"; break;
    case OC_SPAWN: elem = "error"; why = "the command could not be started"; break;
    case OC_TIMEOUT: elem = "failure"; why = "ran past the trial timeout"; break;
    case OC_HANG: elem = "failure"; why = "printed nothing for the hang timeout"; break;
    case OC_NO_STEPS: elem = "error"; why = "no training step was seen"; break;
    case OC_MISMATCH: elem = "error"; why = "the batch-size knob did not reach the trainer"; break;
    default: elem = "error"; why = "unknown outcome"; break;
    }
    sb_printf(b, ">\n      <%s", elem);
    if (strcmp(elem, "skipped")) {
        sb_puts(b, " type=\"");
        report_xml_str(b, t->outcome, 1);
        sb_puts(b, "\"");
    }
    sb_printf(b, " message=\"%s", why);
    if (t->oc == OC_UNKNOWN) {
        sb_puts(b, " &#39;");
        report_xml_str(b, t->outcome, 1);
        sb_puts(b, "&#39;");
    }
    struct sbuf st = SBUF_INIT;
    report_text_status(&st, t);
    if (st.len && t->oc != OC_OOM && t->oc != OC_INTERRUPTED)
        sb_printf(b, " (%s)", st.p);
    sb_release(&st);
    if (t->evidence) {
        size_t cut = report_utf8_cut(t->evidence, t->evlen, EVIDENCE_ATTR_MAX);
        sb_puts(b, ": ");
        report_xml_esc(b, t->evidence, cut, 1);
        if (cut < t->evlen)
            sb_puts(b, "\xe2\x80\xa6");
    }
    sb_puts(b, "\"");
    if (!t->evidence && !t->signature) {
        sb_puts(b, "/>\n    </testcase>\n");
        return;
    }
    sb_puts(b, ">");
    if (t->signature) {
        sb_puts(b, "signature: ");
        report_xml_str(b, t->signature, 0);
        sb_puts(b, "\n");
    }
    if (t->evidence)
        report_xml_esc(b, t->evidence, t->evlen, 0);
    sb_printf(b, "</%s>\n    </testcase>\n", elem);
}

static void junit_property(struct sbuf *b, const char *name, struct sbuf *val)
{
    sb_printf(b, "      <property name=\"%s\" value=\"", name);
    report_xml_esc(b, val->p ? val->p : "", val->len, 1);
    sb_puts(b, "\"/>\n");
    sb_release(val);
}

/* The facts every report states, as properties: the capacity line and
 * its figures (empty when unknown), the warm start, the search space and
 * the settings. */
static void junit_facts(struct sbuf *b, const struct rdoc *d)
{
    struct sbuf v = SBUF_INIT;
    const char *src;
    double cap = report_capacity(d, &src), head = report_headroom(d);
    report_text_capacity(&v, d);
    junit_property(b, "capacity", &v);
    if (!isnan(cap))
        sb_printf(&v, "%.0f", cap);
    junit_property(b, "capacity_bytes", &v);
    sb_puts(&v, src ? src : "");
    junit_property(b, "capacity_source", &v);
    if (!isnan(head))
        sb_printf(&v, "%g", head);
    junit_property(b, "headroom", &v);
    if (report_text_memory(&v, d))
        junit_property(b, "memory", &v);
    report_text_warm_start(&v, d);
    junit_property(b, "warm_start", &v);
    report_text_space(&v, d);
    junit_property(b, "search_space", &v);
    report_text_settings(&v, d);
    junit_property(b, "settings", &v);
}

int report_render_junit(const struct rdoc *d, char **out, size_t *len, char *err, size_t errlen)
{
    size_t failures = 0, errors = 0, skipped = 0, tests = d->nt;
    double time = 0;
    for (size_t i = 0; i < d->nt; i++) {
        const struct rtrial *t = &d->t[i];
        if (!isnan(t->wall) && t->wall > 0)
            time += t->wall;
        switch (t->oc) {
        case OC_FIT: break;
        case OC_OOM: case OC_INTERRUPTED: skipped++; break;
        case OC_TIMEOUT: case OC_HANG: failures++; break;
        default: errors++; break;
        }
    }
    if (!isnan(d->wall) && d->wall > time)
        time = d->wall;
    const struct rgate *g = &d->gate;
    if (d->baseline) {
        tests++;
        failures += g->regression;
    }

    struct sbuf b = SBUF_INIT, cmd = SBUF_INIT, line = SBUF_INIT;
    report_text_command(&cmd, d->command);
    sb_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    /* <testsuites> takes no skipped="" in the common junit schema
     * (tests/data/junit.xsd); <testsuite> does */
    sb_printf(&b, "<testsuites name=\"autobatch\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
                  "time=\"%.3f\">\n", tests, failures, errors, time);
    sb_puts(&b, "  <testsuite name=\"autobatch: ");
    report_xml_esc(&b, cmd.p ? cmd.p : "", cmd.len, 1);
    sb_printf(&b, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\"",
              tests, failures, errors, skipped, time);
    if (d->started_at) {
        sb_puts(&b, " timestamp=\"");
        report_xml_str(&b, d->started_at, 1);
        sb_puts(&b, "\"");
    }
    const char *hostname = report_jstr(d->host, "hostname");
    if (hostname) {
        sb_puts(&b, " hostname=\"");
        report_xml_str(&b, hostname, 1);
        sb_puts(&b, "\"");
    }
    sb_puts(&b, ">\n    <properties>\n      <property name=\"command\" value=\"");
    report_xml_esc(&b, cmd.p ? cmd.p : "", cmd.len, 1);
    sb_puts(&b, "\"/>\n      <property name=\"host\" value=\"");
    report_text_host(&line, d);
    report_xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    int good;
    sb_puts(&b, "\"/>\n      <property name=\"result\" value=\"");
    report_text_headline(&line, d, &good);
    report_xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    sb_puts(&b, "\"/>\n      <property name=\"exit\" value=\"");
    report_text_exit(&line, d);
    report_xml_esc(&b, line.p ? line.p : "", line.len, 1);
    sb_release(&line);
    sb_puts(&b, "\"/>\n");
    junit_facts(&b, d);
    sb_puts(&b, "    </properties>\n");

    for (size_t i = 0; i < d->nt; i++)
        junit_trial(&b, d, &d->t[i]);

    if (d->baseline) {
        const char *file = g->file ? g->file : "the baseline";
        static const char *const mark[] = { [CHANGE_REGRESSION] = "regression: ", [CHANGE_NOTE] = "",
                                            [CHANGE_IMPROVEMENT] = "" };
        report_gate_list(&line, d, mark, sb_puts, "\n");
        sb_puts(&b, "    <testcase name=\"regression gate\" classname=\"autobatch.baseline\" time=\"0.000\">\n");
        if (g->regression) {
            sb_printf(&b, "      <failure type=\"regression\" message=\"%zu regression%s against ", g->nreg,
                      g->nreg == 1 ? "" : "s");
            report_xml_str(&b, file, 1);
            sb_puts(&b, "\">");
            report_xml_esc(&b, line.p ? line.p : "", line.len, 0);
            sb_puts(&b, "</failure>\n");
        } else {
            sb_puts(&b, "      <system-out>no regression against ");
            report_xml_str(&b, file, 0);
            sb_puts(&b, "\n");
            report_xml_esc(&b, line.p ? line.p : "", line.len, 0);
            sb_puts(&b, "</system-out>\n");
        }
        sb_puts(&b, "    </testcase>\n");
        sb_release(&line);
    }
    sb_puts(&b, "  </testsuite>\n</testsuites>\n");
    sb_release(&cmd);
    return report_finish(&b, out, len, err, errlen);
}
