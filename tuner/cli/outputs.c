/* SPDX-License-Identifier: MIT */
/*
 * outputs: what a tuning run ends with (outputs.h).  outputs_check refuses before the first trial
 * what would fail at the end (a results or report path that cannot be
 * written, --events and --json both on stdout, a baseline that does not
 * load, a webhook URL or format that is not one) and opens the --events
 * stream.  outputs_write
 * applies the baseline gate to the results document, writes --json and
 * each report rendered from the document alone, appends the Markdown
 * summary to $GITHUB_STEP_SUMMARY within GitHub's limit, and posts the
 * webhook; a webhook that cannot be delivered is kept in the spool for
 * `autobatch notify`, and never changes the exit status.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/exit.h"
#include "cli/outputs.h"
#include "cli/say.h"
#include "output/baseline.h"
#include "output/events.h"
#include "output/report.h"
#include "output/results.h"
#include "search/cache.h"
#include "util/afile.h"
#include "util/sbuf.h"

/* Write text to path (see afile.h), or to stdout for NULL, "-" or
 * /dev/stdout (through our stdout stream, so it comes after what we have
 * printed there already). */
int outputs_emit(const char *path, const char *text, size_t len)
{
    char err[512];
    if (!path || !strcmp(path, "-") || !strcmp(path, "/dev/stdout")) {
        if (fwrite(text, 1, len, stdout) != len || fflush(stdout)) {
            cli_error("cannot write to stdout");
            return -1;
        }
        return 0;
    }
    if (afile_write(path, text, len, err, sizeof err)) {
        cli_error("%s", err);
        return -1;
    }
    return 0;
}

/* The webhook spool: state, not cache (a cache may be wiped at any time).
 * legacy: where versions before 0.1.0 kept it, under the cache directory,
 * still flushed by autobatch notify. */
int outputs_spool_dir(char *out, size_t len, int legacy)
{
    char dir[4000];
    if (legacy ? cache_dir(dir, sizeof dir) : state_dir(dir, sizeof dir))
        return -1;
    snprintf(out, len, "%s/%s", dir, WEBHOOK_SPOOL_SUBDIR);
    return 0;
}

void outputs_webhook_opts(struct webhook_opts *wo, const char *url, int insecure,
                                const volatile sig_atomic_t *cancel)
{
    webhook_opts_default(wo);
    wo->url = url;
    const char *secret = getenv(WEBHOOK_ENV_SECRET);
    wo->secret = secret && *secret ? secret : NULL;
    wo->insecure = insecure;
    wo->cancel = cancel;
}

/* Post doc; on failure warn and spool.  Returns 0 when delivered. */
int outputs_post(const json_t *doc, const char *url, const char *format, int insecure,
                       const volatile sig_atomic_t *cancel)
{
    char err[512], shown[512];
    enum webhook_format f = WEBHOOK_GENERIC;
    if (format && webhook_format_parse(format, &f)) {
        cli_error("--webhook-format '%s': use generic, slack, discord or teams", format);
        return -1;
    }
    webhook_url_redact(url, shown, sizeof shown);
    if (insecure)
        fprintf(stderr, "autobatch: WARNING: --webhook-insecure: the TLS certificate of '%s' is "
                        "NOT verified; anyone on the path can read and change this delivery\n",
                shown);
    char *body = NULL;
    size_t len = 0;
    if (webhook_payload(doc, f, &body, &len, err, sizeof err)) {
        fprintf(stderr, "autobatch: warning: webhook: %s\n", err);
        return -1;
    }
    struct webhook_opts wo;
    struct webhook_result wr;
    outputs_webhook_opts(&wo, url, insecure, cancel);
    int rc = webhook_send(&wo, body, len, &wr, err, sizeof err);
    if (rc) {
        char dir[4096], serr[512] = "";
        int nodir = outputs_spool_dir(dir, sizeof dir, 0);
        fprintf(stderr, "autobatch: warning: webhook '%s' not delivered: %s\n", shown, err);
        if (wr.permanent)
            fprintf(stderr, "autobatch: the server refused it (HTTP %ld); not kept for later\n",
                    wr.last_status);
        else if (nodir ||
                 webhook_spool_save_delivery(dir, url, body, len, wr.delivery_id, serr, sizeof serr))
            fprintf(stderr, "autobatch: warning: could not keep it for later either: %s\n",
                    nodir ? "no state directory (set HOME)" : serr);
        else
            fprintf(stderr, "autobatch: kept in '%s'; 'autobatch notify' sends it later, to the same "
                            "webhook\n", dir);
    }
    free(body);
    return rc;
}

/* One file the run reads or writes, as the kernel knows it: a device and
 * inode when it exists, else the would-be path (the directory's realpath
 * and the name), so that `r.json`, `./r.json` and a link to it agree. */
struct outputs_file {
    const char *opt, *path;
    int exists;
    dev_t dev;
    ino_t ino;
    char where[PATH_MAX + NAME_MAX + 2];
};

static void outputs_resolve(struct outputs_file *f)
{
    struct stat st;
    f->exists = !stat(f->path, &st);
    if (f->exists) {
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        /* Two outputs on one device or FIFO (/dev/null, a follower's
         * pipe) are written through in turn, not replaced: no clash. */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
            f->path = NULL;
        return;
    }
    char d[PATH_MAX], b[PATH_MAX];
    snprintf(d, sizeof d, "%s", f->path);
    snprintf(b, sizeof b, "%s", f->path);
    char *real = realpath(dirname(d), NULL);
    snprintf(f->where, sizeof f->where, "%s/%s", real ? real : dirname(d), basename(b));
    free(real);
}

/* Refuse two options naming the same file: the later write would replace
 * the earlier one (the results in place of the config, HTML in place of
 * the results).  0, or 2 after printing both options. */
static int outputs_distinct(const struct plan *plan, const char *config)
{
    struct outputs_file f[] = {
        { plan->config_path ? "--config" : "the config", config, 0, 0, 0, "" },
        { "--json", plan->json_path, 0, 0, 0, "" },
        { "--markdown", plan->markdown_path, 0, 0, 0, "" },
        { "--junit", plan->junit_path, 0, 0, 0, "" },
        { "--html", plan->html_path, 0, 0, 0, "" },
        { "--events", plan->events_path, 0, 0, 0, "" },
        { "--keep-traces", plan->keep_traces, 0, 0, 0, "" },
    };
    size_t n = sizeof f / sizeof f[0];
    for (size_t i = 0; i < n; i++) {
        /* "-" is stdout: --json - with --events - is refused below. */
        if (f[i].path && (!strcmp(f[i].path, "-") || !*f[i].path))
            f[i].path = NULL;
        if (f[i].path)
            outputs_resolve(&f[i]);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n && f[i].path; j++) {
            if (!f[j].path || f[i].exists != f[j].exists)
                continue;
            if (f[i].exists ? f[i].dev == f[j].dev && f[i].ino == f[j].ino
                            : !strcmp(f[i].where, f[j].where)) {
                cli_error("%s '%s' and %s '%s' are the same file; the one written last would "
                          "replace the other: give each its own path", f[i].opt, f[i].path,
                          f[j].opt, f[j].path);
                return AB_EXIT_USAGE;
            }
        }
    }
    return AB_EXIT_OK;
}

int outputs_check(const struct plan *plan, json_t **baseline)
{
    char err[512];
    *baseline = NULL;
    if (outputs_distinct(plan, plan->config_path))
        return AB_EXIT_USAGE;
    /* The warm-start cache in a directory others may write to is not
     * used (cache.c); say so here, where the user reads it. */
    char cdir[4000];
    if (!plan->no_cache && !cache_dir(cdir, sizeof cdir) && cache_dir_check(cdir, err, sizeof err))
        fprintf(stderr, "autobatch: note: %s; make it yours and private (chmod 700), or set "
                        "XDG_CACHE_HOME\n", err);
    if (plan->json_path && strcmp(plan->json_path, "-") &&
        afile_check_writable(plan->json_path, err, sizeof err)) {
        cli_error("--json: %s; choose a writable path", err);
        return AB_EXIT_USAGE;
    }
    if (plan->events_path && plan->json_path && !strcmp(plan->events_path, "-") &&
        !strcmp(plan->json_path, "-")) {
        cli_error("--events - and --json - both want stdout; send one of them to a file");
        return AB_EXIT_USAGE;
    }
    /* Several --slurm-targets: each target's run has its own events and
     * baseline (cli/targets.h); this one opens neither. */
    int split = plan->ntargets > 1;
    if (plan->events_path && !plan->dry_run && !split &&
        events_open(plan->events_path, err, sizeof err)) {
        cli_error("--events: %s; choose a writable path", err);
        return AB_EXIT_USAGE;
    }
    const char *paths[] = { plan->markdown_path, plan->junit_path, plan->html_path };
    const char *names[] = { "--markdown", "--junit", "--html" };
    for (size_t i = 0; i < 3; i++) {
        if (paths[i] && strcmp(paths[i], "-") && afile_check_writable(paths[i], err, sizeof err)) {
            cli_error("%s: %s; choose a writable path", names[i], err);
            return AB_EXIT_USAGE;
        }
    }
    if (plan->baseline_path && !split &&
        !(*baseline = baseline_load(plan->baseline_path, err, sizeof err))) {
        cli_error("--baseline: %s; give a results file written by --json", err);
        return AB_EXIT_USAGE;
    }
    if (plan->webhook_url && strncasecmp(plan->webhook_url, "https://", 8) &&
        strncasecmp(plan->webhook_url, "http://", 7)) {
        cli_error("--webhook: only http:// and https:// URLs are posted to; check the URL");
        return AB_EXIT_USAGE;
    }
    enum webhook_format f;
    if (plan->webhook_url && webhook_format_parse(plan->webhook_format, &f)) {
        cli_error("--webhook-format '%s': use generic, slack, discord or teams", plan->webhook_format);
        return AB_EXIT_USAGE;
    }
    return AB_EXIT_OK;
}

int outputs_check_config(const struct plan *plan, const char *config)
{
    if (!config || plan->config_path)
        return AB_EXIT_OK; /* --config was checked by outputs_check */
    return outputs_distinct(plan, config);
}

/* Append the Markdown summary to $GITHUB_STEP_SUMMARY, within GitHub's
 * 1 MiB per step (counting what the step already wrote). */
static void outputs_step_summary(const json_t *doc)
{
    const char *path = getenv("GITHUB_STEP_SUMMARY");
    if (!path || !*path)
        return;
    struct stat st;
    size_t used = !stat(path, &st) && st.st_size > 0 ? (size_t)st.st_size : 0;
    if (used + 1024 >= REPORT_STEP_SUMMARY_LIMIT) {
        fprintf(stderr, "autobatch: warning: $GITHUB_STEP_SUMMARY is full; summary not added\n");
        return;
    }
    char *text = NULL, err[512];
    size_t len = 0;
    if (report_summary_markdown(doc, REPORT_STEP_SUMMARY_LIMIT - used - 1, &text, &len, err,
                                sizeof err)) {
        fprintf(stderr, "autobatch: warning: step summary: %s\n", err);
        return;
    }
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    ssize_t w = fd >= 0 ? write(fd, text, len) : -1;
    if (fd < 0 || w != (ssize_t)len)
        fprintf(stderr, "autobatch: warning: cannot append to $GITHUB_STEP_SUMMARY '%s'\n", path);
    if (fd >= 0)
        close(fd);
    free(text);
}

/* ---- where the outputs went, and what to run next */

/* path names stdout ("-", "/dev/stdout"). */
static int outputs_is_stdout(const char *path)
{
    return path && (!strcmp(path, "-") || !strcmp(path, "/dev/stdout"));
}

/* path as one word a shell reads back as path: as it is when it holds
 * only characters no shell treats specially, else in single quotes. */
static const char *outputs_program = "autobatch";

void outputs_set_program(const char *argv0)
{
    if (argv0 && strchr(argv0, '/') && !strpbrk(argv0, " \t\n'\"\\$`"))
        outputs_program = argv0;
}

static const char *outputs_word(const char *path, char *buf, size_t len)
{
    if (*path && strspn(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "_./+,:@%=-") == strlen(path)) {
        snprintf(buf, len, "%s", path);
        return buf;
    }
    size_t k = 0;
    if (len < 3) {
        if (len)
            buf[0] = '\0';
        return buf;
    }
    buf[k++] = '\'';
    for (const char *c = path; *c && k + 6 < len; c++) {
        if (*c == '\'') {
            memcpy(buf + k, "'\\''", 4);
            k += 4;
        } else {
            buf[k++] = *c;
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

/*
 * The last lines of a run: where each output went (the results, each
 * report, the events), which config file still waits for --write, and
 * the next command.  On say's stream: stdout, unless an output went
 * there, then stderr (a report or results piped on stdout stay whole).
 * written[k]: whether the results (k 0) and each report (1-3) were
 * written.  Each line is one "autobatch: " line, wrapped on a terminal.
 */
static void outputs_say_where(const struct plan *plan, const json_t *doc, const int written[4])
{
    const char *paths[] = { plan->json_path, plan->markdown_path, plan->junit_path,
                            plan->html_path, plan->events_path };
    const char *what[] = { "results", "Markdown report", "JUnit report", "HTML report",
                           "events" };
    FILE *say = stdout;
    for (size_t k = 0; k < 5; k++)
        if (outputs_is_stdout(paths[k]))
            say = stderr;
    fflush(stdout);
    size_t width = say_width(fileno(say));
    char line[PATH_MAX * 2 + 256], word[PATH_MAX * 4 + 8];
    for (size_t k = 0; k < 5; k++) {
        if (!paths[k] || (k < 4 && !written[k]))
            continue;
        snprintf(line, sizeof line, "%s: %s", what[k],
                 outputs_is_stdout(paths[k]) ? "on stdout" : paths[k]);
        say_wrap(say, "autobatch: ", "  ", width, line);
    }
    if (json_is_null(json_object_get(doc, "best")) || !json_object_get(doc, "best"))
        return;
    if (!plan->json_path)
        say_wrap(say, "autobatch: ", "  ", width,
                 "results: not kept (--json FILE keeps them for 'autobatch report')");
    /* What to run next: write the choice where it waits for --write, and
     * render the results again from their file. */
    struct sbuf next = SBUF_INIT;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(doc, "run_with"), "files"), i, f) {
        const char *path = json_string_value(json_object_get(f, "path"));
        if (path && json_is_string(json_object_get(f, "diff")) &&
            !json_is_true(json_object_get(f, "written")) && !next.len)
            sb_printf(&next, "next: rerun with --write to write the choice into '%s'", path);
    }
    if (plan->json_path && written[0] && !outputs_is_stdout(plan->json_path))
        sb_printf(&next, "%s%s report %s", next.len ? "; " : "next: ", outputs_program,
                  outputs_word(plan->json_path, word, sizeof word));
    if (next.len && !next.oom)
        say_wrap(say, "autobatch: ", "  ", width, next.p);
    sb_release(&next);
    fflush(say);
}

int outputs_write(const struct plan *plan, json_t *doc, const json_t *baseline, int status,
                         const volatile sig_atomic_t *cancel)
{
    int written[4] = { 0 };
    char err[512];
    if (baseline) {
        int reg = baseline_compare(doc, baseline, plan->baseline_path, plan->regression_threshold,
                                   err, sizeof err);
        json_t *changes = json_object_get(json_object_get(doc, "baseline"), "changes");
        size_t i;
        json_t *c;
        json_array_foreach(changes, i, c)
            fprintf(stderr, "autobatch: baseline: %s%s\n",
                    json_is_true(json_object_get(c, "regression")) ? "REGRESSION: " : "",
                    json_string_value(json_object_get(c, "text")));
        if (reg < 0)
            fprintf(stderr, "autobatch: warning: --baseline: %s\n", err);
        if (reg == 1 && status == AB_EXIT_OK)
            status = AB_EXIT_REGRESSION;
        json_object_set_new(json_object_get(doc, "summary"), "exit", json_integer(status));
    }
    /* A results file or report that could not be written (a full disk,
     * a vanished directory) is not bad input: its own status, so that a
     * script can tell "retry with space" from "fix the command". */
    int unwritten = 0;
    if (plan->json_path && results_write_json(doc, plan->json_path, err, sizeof err)) {
        cli_error("could not write the results: %s", err);
        unwritten = 1;
    } else {
        written[0] = plan->json_path != NULL;
    }
    const char *paths[] = { plan->markdown_path, plan->junit_path, plan->html_path };
    enum report_format fmts[] = { REPORT_MARKDOWN, REPORT_JUNIT, REPORT_HTML };
    for (size_t k = 0; k < 3; k++) {
        if (!paths[k])
            continue;
        char *text = NULL;
        size_t len = 0;
        if (report_render(doc, fmts[k], &text, &len, err, sizeof err)) {
            cli_error("%s report: %s", report_format_name(fmts[k]), err);
            if (status == AB_EXIT_OK)
                status = AB_EXIT_USAGE;
        } else if (outputs_emit(paths[k], text, len)) {
            unwritten = 1;
        } else {
            written[k + 1] = 1;
        }
        free(text);
    }
    if (unwritten && status == AB_EXIT_OK)
        status = AB_EXIT_UNWRITTEN;
    outputs_say_where(plan, doc, written);
    outputs_step_summary(doc);
    if (plan->webhook_url) {
        if (webhook_global_init(err, sizeof err))
            fprintf(stderr, "autobatch: warning: webhook: %s\n", err);
        else {
            outputs_post(doc, plan->webhook_url, plan->webhook_format, plan->webhook_insecure, cancel);
            webhook_global_cleanup();
        }
    }
    return status;
}
