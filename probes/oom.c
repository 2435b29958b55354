/*
 * oom: recognise out-of-memory reports in a trial's output (see oom.h).
 *
 * A trial is an "oom" rather than a "crash" only when its output says so,
 * and that decision steers the whole search, so the knowledge of what the
 * frameworks print lives in one data file, configs/oom-signatures.tsv,
 * compiled in as `ab_oom_signatures`.  This file turns that table into
 * compiled POSIX regular expressions, matches output lines against them in
 * table order, and pulls the byte counts out of PyTorch's allocator
 * message so the memory model can learn from a failed trial too.
 */
#include "oom.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from configs/oom-signatures.tsv by the build (ab_embed). */
extern const char ab_oom_signatures[];
extern const size_t ab_oom_signatures_len;

/* Only this much of a line is examined: every known message fits many
 * times over, and a child that prints a megabyte of progress bar without
 * a newline must not cost a megabyte copy per signature. */
#define OOM_LINE_MAX (64 * 1024)

/* Most lines are short; they are copied to the stack, longer ones to the
 * heap. */
#define OOM_STACK_LINE 1024

struct oom_signature {
    char *name;      /* one allocation holding "name\0framework\0" */
    char *framework; /* points into the allocation of name */
    regex_t re;
};

/* ------------------------------------------------------------------ */
/* Loading the table                                                   */
/* ------------------------------------------------------------------ */

static void oom_sig_release(struct oom_signature *s)
{
    regfree(&s->re);
    free(s->name);
}

void oom_table_release(struct oom_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nr; i++)
        oom_sig_release(&t->sigs[i]);
    free(t->sigs);
    t->sigs = NULL;
    t->nr = 0;
}

static int oom_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t')
            return 0;
    return 1;
}

/* Parse one row (no line ending) into *s.  Returns 0, or -1 with err set. */
static int oom_parse_row(struct oom_table *t, const char *row, size_t n,
                         size_t lineno, struct oom_signature *s,
                         char *err, size_t errlen)
{
    const char *col[3];
    size_t colen[3];
    size_t ncol = 0;
    const char *p = row, *end = row + n;

    for (;;) {
        const char *tab = memchr(p, '\t', (size_t)(end - p));
        const char *stop = tab ? tab : end;
        if (ncol < 3) {
            col[ncol] = p;
            colen[ncol] = (size_t)(stop - p);
        }
        ncol++;
        if (!tab)
            break;
        p = tab + 1;
    }
    if (ncol != 3) {
        snprintf(err, errlen,
                 "line %zu: expected 3 tab-separated columns (name, framework, regex), found %zu",
                 lineno, ncol);
        return -1;
    }
    static const char *const what[3] = { "name", "framework", "regex" };
    for (int i = 0; i < 3; i++) {
        if (colen[i] == 0 || oom_blank(col[i], colen[i])) {
            snprintf(err, errlen, "line %zu: empty %s column", lineno, what[i]);
            return -1;
        }
        if (memchr(col[i], '\0', colen[i])) {
            snprintf(err, errlen, "line %zu: NUL byte in %s column", lineno, what[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < t->nr; i++) {
        if (strlen(t->sigs[i].name) == colen[0] &&
            !memcmp(t->sigs[i].name, col[0], colen[0])) {
            snprintf(err, errlen, "line %zu: duplicate signature name '%.*s'",
                     lineno, (int)colen[0], col[0]);
            return -1;
        }
    }

    char *names = malloc(colen[0] + colen[1] + 2);
    char *pattern = malloc(colen[2] + 1);
    if (!names || !pattern) {
        free(names);
        free(pattern);
        snprintf(err, errlen, "line %zu: out of memory", lineno);
        return -1;
    }
    memcpy(names, col[0], colen[0]);
    names[colen[0]] = '\0';
    memcpy(names + colen[0] + 1, col[1], colen[1]);
    names[colen[0] + 1 + colen[1]] = '\0';
    memcpy(pattern, col[2], colen[2]);
    pattern[colen[2]] = '\0';

    int rc = regcomp(&s->re, pattern, REG_EXTENDED | REG_NOSUB);
    free(pattern);
    if (rc != 0) {
        char why[160];
        regerror(rc, &s->re, why, sizeof why);
        snprintf(err, errlen, "line %zu: bad regex for '%s': %s", lineno, names, why);
        free(names);
        return -1;
    }
    s->name = names;
    s->framework = names + colen[0] + 1;
    return 0;
}

static int oom_table_load_n(struct oom_table *t, const char *text, size_t len,
                            char *err, size_t errlen)
{
    /* Build into a local table so that *t is either complete or empty. */
    struct oom_table nt = OOM_TABLE_INIT;
    size_t alloc = 0;
    size_t lineno = 0;
    const char *p = text, *end = text + len;
    char dummy[1];

    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    t->sigs = NULL;
    t->nr = 0;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        size_t n = (size_t)(stop - p);
        const char *row = p;
        p = nl ? nl + 1 : end;
        lineno++;

        /* Tolerate files saved with CRLF line endings. */
        if (n && row[n - 1] == '\r')
            n--;
        size_t lead = 0;
        while (lead < n && (row[lead] == ' ' || row[lead] == '\t'))
            lead++;
        if (lead == n || row[lead] == '#')
            continue;

        if (nt.nr == alloc) {
            size_t na = alloc ? 2 * alloc : 16;
            struct oom_signature *ns = realloc(nt.sigs, na * sizeof *ns);
            if (!ns) {
                snprintf(err, errlen, "line %zu: out of memory", lineno);
                goto fail;
            }
            nt.sigs = ns;
            alloc = na;
        }
        if (oom_parse_row(&nt, row, n, lineno, &nt.sigs[nt.nr], err, errlen) < 0)
            goto fail;
        nt.nr++;
    }
    if (nt.nr == 0) {
        /* An empty table would silently turn every OOM into a crash. */
        snprintf(err, errlen, "no signatures in table");
        goto fail;
    }
    *t = nt;
    return 0;

fail:
    oom_table_release(&nt);
    return -1;
}

int oom_table_load(struct oom_table *t, const char *text, char *err, size_t errlen)
{
    return oom_table_load_n(t, text, text ? strlen(text) : 0, err, errlen);
}

int oom_table_load_default(struct oom_table *t, char *err, size_t errlen)
{
    return oom_table_load_n(t, ab_oom_signatures, ab_oom_signatures_len, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Matching                                                            */
/* ------------------------------------------------------------------ */

int oom_table_match(const struct oom_table *t, const char *line, size_t len,
                    struct oom_match *m)
{
    char small[OOM_STACK_LINE + 1];
    char *buf = small;
    int found = 0;

    if (m) {
        m->name = NULL;
        m->framework = NULL;
    }
    if (!t || t->nr == 0 || !line)
        return 0;
    if (len > OOM_LINE_MAX)
        len = OOM_LINE_MAX;
    if (len > OOM_STACK_LINE) {
        buf = malloc(len + 1);
        if (!buf) {
            /* Better to look at the start of the line than at nothing:
             * the messages sit at the start of their line. */
            buf = small;
            len = OOM_STACK_LINE;
        }
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    /* regexec stops at a NUL; a stray one (binary output) must not hide
     * the rest of the line. */
    for (char *z = memchr(buf, '\0', len); z; z = memchr(z, '\0', len - (size_t)(z - buf)))
        *z = ' ';

    for (size_t i = 0; i < t->nr; i++) {
        if (regexec(&t->sigs[i].re, buf, 0, NULL, 0) == 0) {
            if (m) {
                m->name = t->sigs[i].name;
                m->framework = t->sigs[i].framework;
            }
            found = 1;
            break;
        }
    }
    if (buf != small)
        free(buf);
    return found;
}

/* ------------------------------------------------------------------ */
/* Numbers from the PyTorch allocator message                          */
/* ------------------------------------------------------------------ */

/* Bounded substring search: the line is not NUL-terminated. */
static const char *oom_find(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    if (k == 0 || k > n)
        return NULL;
    for (size_t i = 0; i + k <= n; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, k))
            return hay + i;
    return NULL;
}

/*
 * Parse "<number> <unit>" at p (up to end) as PyTorch's format_size prints
 * it ("2.26 GiB", "0 bytes", "512 B").  Integer arithmetic keeps the result
 * exact: 2.26 GiB is 226 * 2^30 / 100, rounded to the nearest byte.
 * Returns the byte count and sets *after, or -1.
 */
static int64_t oom_parse_size(const char *p, const char *end, const char **after)
{
    static const struct { const char *unit; int shift; } units[] = {
        { "bytes", 0 }, { "B", 0 }, { "KiB", 10 }, { "MiB", 20 },
        { "GiB", 30 }, { "TiB", 40 },
    };
    int64_t mant = 0, scale = 1;
    int digits = 0, frac = 0;

    while (p < end && *p >= '0' && *p <= '9') {
        if (mant > (INT64_MAX - 9) / 10)
            return -1;
        mant = mant * 10 + (*p++ - '0');
        digits++;
    }
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') {
            /* Beyond six decimals there is nothing PyTorch prints. */
            if (frac < 6) {
                if (mant > (INT64_MAX - 9) / 10)
                    return -1;
                mant = mant * 10 + (*p - '0');
                scale *= 10;
                frac++;
            }
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    if (p < end && *p == ' ')
        p++;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t k = strlen(units[i].unit);
        if ((size_t)(end - p) < k || memcmp(p, units[i].unit, k))
            continue;
        /* "B" must not be the start of some other word. */
        if ((size_t)(end - p) > k && ((p[k] >= 'A' && p[k] <= 'Z') ||
                                      (p[k] >= 'a' && p[k] <= 'z')))
            continue;
        int64_t mult = (int64_t)1 << units[i].shift;
        if (mant > (INT64_MAX - scale) / mult)
            return -1;
        *after = p + k;
        return (mant * mult + scale / 2) / scale;
    }
    return -1;
}

static int oom_parse_int(const char *p, const char *end)
{
    int v = 0, any = 0;
    while (p < end && *p >= '0' && *p <= '9' && v < 100000) {
        v = v * 10 + (*p++ - '0');
        any = 1;
    }
    return any ? v : -1;
}

int oom_parse_numbers(const char *line, size_t len, struct oom_numbers *out)
{
    struct oom_numbers r = { -1, -1, -1, -1 };
    const char *end, *p, *after;

    if (out)
        *out = r;
    if (!line)
        return 0;
    if (len > OOM_LINE_MAX)
        len = OOM_LINE_MAX;
    end = line + len;

    p = oom_find(line, len, "Tried to allocate ");
    if (!p)
        return 0;
    p += strlen("Tried to allocate ");
    r.tried = oom_parse_size(p, end, &after);
    if (r.tried < 0)
        return 0;
    p = after;

    const char *q;
    if ((q = oom_find(p, (size_t)(end - p), "(GPU ")) != NULL) {
        /* Up to 2.0: "(GPU 0; 6.00 GiB total capacity; 781.59 MiB already
         * allocated; 3.03 GiB free; 1.24 GiB reserved in total by PyTorch)".
         * Walk the ';'-separated fields and take each size by the words
         * that follow it. */
        q += strlen("(GPU ");
        r.gpu = oom_parse_int(q, end);
        const char *close = memchr(q, ')', (size_t)(end - q));
        const char *stop = close ? close : end;
        const char *f = memchr(q, ';', (size_t)(stop - q));
        while (f && f < stop) {
            f++;
            while (f < stop && *f == ' ')
                f++;
            const char *fend = memchr(f, ';', (size_t)(stop - f));
            if (!fend)
                fend = stop;
            int64_t v = oom_parse_size(f, fend, &after);
            if (v >= 0) {
                size_t rest = (size_t)(fend - after);
                if (rest == strlen(" total capacity") &&
                    !memcmp(after, " total capacity", rest))
                    r.total = v;
                else if (rest == strlen(" free") && !memcmp(after, " free", rest))
                    r.free = v;
            }
            f = fend < stop ? fend : NULL;
        }
    } else if ((q = oom_find(p, (size_t)(end - p), "GPU ")) != NULL) {
        /* From 2.1: "GPU 0 has a total capacity of 79.15 GiB of which
         * 3.81 MiB is free", 2.1 spelling it "capacty". */
        q += strlen("GPU ");
        r.gpu = oom_parse_int(q, end);
        const char *c = oom_find(q, (size_t)(end - q), " has a total capacity of ");
        size_t clen = strlen(" has a total capacity of ");
        if (!c) {
            c = oom_find(q, (size_t)(end - q), " has a total capacty of ");
            clen = strlen(" has a total capacty of ");
        }
        if (c) {
            c += clen;
            r.total = oom_parse_size(c, end, &after);
            if (r.total >= 0 && (size_t)(end - after) >= strlen(" of which ") &&
                !memcmp(after, " of which ", strlen(" of which "))) {
                int64_t f = oom_parse_size(after + strlen(" of which "), end, &after);
                if (f >= 0 && (size_t)(end - after) >= strlen(" is free") &&
                    !memcmp(after, " is free", strlen(" is free")))
                    r.free = f;
            }
        }
    }
    if (out)
        *out = r;
    return 1;
}
