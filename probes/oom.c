/* SPDX-License-Identifier: MIT */
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
 *
 * Every line a trial prints is matched, and almost none is an OOM, so the
 * regexes sit behind a prefilter: each row's regex yields a literal that
 * every matching line contains, and a line in which no row's literal
 * occurs is rejected in one pass over its bytes.
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
    char *lit;       /* what every matching line contains, or NULL */
    size_t litlen;
};

/*
 * The prefilter reads a line as windows of OOM_GRAM bytes, one window
 * every `stride` bytes, where stride + OOM_GRAM - 1 is the length of the
 * shortest literal: then each occurrence of a literal in the line holds a
 * window that was read, at one of any `stride` consecutive offsets of the
 * literal.  Those `stride` windows of each literal, its grams, are hashed
 * into a bitmap that fits in L1, so a line that cannot match costs one
 * load and one bit test per `stride` bytes (8 for the default table); a
 * set bit compares the grams and then the whole literal.
 */
#define OOM_GRAM 4
#define OOM_HASH_BITS 15

struct oom_gram {
    uint32_t w;   /* OOM_GRAM bytes of a literal, as a load from memory gives them */
    uint32_t off; /* where they start in the literal */
    size_t row;
};

struct oom_prefilter {
    uint64_t bits[((size_t)1 << OOM_HASH_BITS) / 64];
    struct oom_gram *grams;
    size_t ngrams;
    size_t stride;
    size_t min_len; /* the shortest literal of OOM_GRAM bytes or more */
    int all;        /* a row has no literal: every line must be tried */
    int short_lits; /* rows whose literal is shorter than OOM_GRAM */
};

/* ------------------------------------------------------------------ */
/* Required literals and the prefilter                                 */
/* ------------------------------------------------------------------ */

/* The characters an ERE escape makes literal.  glibc gives other escapes
 * meanings of its own (\w, \<, \b, \1), so they are not plain bytes. */
static const char oom_ere_special[] = ".[]()*+?{}|^$\\";

/* Past a bracket expression at p ('[').  "[]a]" and "[^]a]" hold a ']';
 * "[:alpha:]", "[.-.]" and "[=e=]" sit inside; a backslash is an ordinary
 * character between brackets (POSIX). */
static const char *oom_skip_bracket(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++;
    while (*p && *p != ']') {
        if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char close = p[1];
            p += 2;
            while (*p && !(*p == close && p[1] == ']'))
                p++;
            if (*p)
                p += 2;
            continue;
        }
        p++;
    }
    return *p ? p + 1 : p;
}

/* Past a parenthesised group at p ('('), with the groups inside it. */
static const char *oom_skip_group(const char *p)
{
    int depth = 0;
    while (*p) {
        if (*p == '\\') {
            p += p[1] ? 2 : 1;
            continue;
        }
        if (*p == '[') {
            p = oom_skip_bracket(p);
            continue;
        }
        if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p + 1;
        p++;
    }
    return p;
}

/* An alternation outside every group: its branches need not share a
 * byte, and finding what they all share is not worth it here. */
static int oom_top_alternation(const char *p)
{
    while (*p) {
        if (*p == '|')
            return 1;
        if (*p == '\\')
            p += p[1] ? 2 : 1;
        else if (*p == '[')
            p = oom_skip_bracket(p);
        else if (*p == '(')
            p = oom_skip_group(p);
        else
            p++;
    }
    return 0;
}

/* Past the quantifiers after an atom.  *optional: the atom may be absent
 * (any '*', '?' or interval among them; "{0,2}" may be zero times). */
static const char *oom_skip_quantifiers(const char *p, int *optional)
{
    *optional = 0;
    for (;;) {
        if (*p == '+') {
            p++;
        } else if (*p == '*' || *p == '?') {
            *optional = 1;
            p++;
        } else if (*p == '{') {
            *optional = 1;
            p++;
            while ((*p >= '0' && *p <= '9') || *p == ',')
                p++;
            if (*p == '}')
                p++;
        } else {
            return p;
        }
    }
}

/* One atom at p: returns what follows it; *byte is its byte when it is a
 * plain one, else -1. */
static const char *oom_atom(const char *p, int *byte)
{
    *byte = -1;
    if (*p == '\\' && p[1] && strchr(oom_ere_special, p[1])) {
        *byte = (unsigned char)p[1];
        return p + 2;
    }
    if (*p == '\\')
        return p[1] ? p + 2 : p + 1;
    if (*p == '[')
        return oom_skip_bracket(p);
    if (*p == '(')
        return oom_skip_group(p);
    /* A byte >= 0x80 may be part of a multibyte character, which a
     * quantifier after it would repeat as a whole. */
    if (strchr(".^$)]}*+?{|", *p) || (unsigned char)*p >= 0x80)
        return p + 1;
    *byte = (unsigned char)*p;
    return p + 1;
}

static void oom_keep_longer(const char *run, size_t n, char *out, size_t outlen, size_t *best)
{
    if (n > outlen - 1)
        n = outlen - 1;
    if (n > *best) {
        memcpy(out, run, n);
        out[n] = '\0';
        *best = n;
    }
}

/*
 * Without an alternation at the top, a match is the concatenation of a
 * match of each quantified atom in turn, so consecutive plain bytes that
 * are neither optional nor repeated appear side by side in every matching
 * line.  Anything else only ends such a run.
 */
size_t oom_required_literal(const char *re, char *out, size_t outlen)
{
    size_t best = 0, n = 0;
    if (!out || outlen == 0)
        return 0;
    out[0] = '\0';
    char *run = re ? malloc(strlen(re) + 1) : NULL;
    if (!run || oom_top_alternation(re)) {
        free(run);
        return 0;
    }
    const char *p = re;
    while (*p) {
        int byte, optional;
        const char *next = oom_atom(p, &byte);
        p = oom_skip_quantifiers(next, &optional);
        if (byte >= 0 && !optional)
            run[n++] = (char)byte;
        if (byte < 0 || p != next) {
            oom_keep_longer(run, n, out, outlen, &best);
            n = 0;
        }
    }
    oom_keep_longer(run, n, out, outlen, &best);
    free(run);
    return best;
}

/* How often a byte turns up in training logs, roughly: grams of rare
 * bytes ("CUDA", "OutO") rarely send a line that cannot match on to the
 * literal compare. */
static int oom_byte_weight(unsigned char c)
{
    if (c == ' ')
        return 3;
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        return 2;
    return 0;
}

static uint32_t oom_load(const char *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

static uint32_t oom_hash(uint32_t w)
{
    return (w * 0x9E3779B1u) >> (32 - OOM_HASH_BITS);
}

/* The row's literal from its pattern; none (or no memory for it) makes a
 * row that is tried on every line. */
static void oom_sig_literal(struct oom_signature *s, const char *pattern)
{
    size_t cap = strlen(pattern) + 1;
    s->lit = malloc(cap);
    s->litlen = s->lit ? oom_required_literal(pattern, s->lit, cap) : 0;
    if (s->litlen == 0) {
        free(s->lit);
        s->lit = NULL;
    }
}

/* The first of the literal's `stride` consecutive grams with the rarest
 * bytes. */
static size_t oom_rare_grams(const struct oom_signature *s, size_t stride)
{
    const unsigned char *l = (const unsigned char *)s->lit;
    size_t best_at = 0;
    int best = -1;
    for (size_t a = 0; a + stride + OOM_GRAM - 1 <= s->litlen; a++) {
        int w = 0;
        for (size_t k = a; k < a + stride + OOM_GRAM - 1; k++)
            w += oom_byte_weight(l[k]);
        if (best < 0 || w < best) {
            best = w;
            best_at = a;
        }
    }
    return best_at;
}

/* The grams of every literal of OOM_GRAM bytes or more, and their bitmap.
 * Without memory for it t->pf stays NULL and every line is tried against
 * every row, as is always correct. */
static void oom_prefilter_build(struct oom_table *t)
{
    struct oom_prefilter *pf = calloc(1, sizeof *pf);
    size_t nlong = 0;
    if (!pf)
        return;
    for (size_t i = 0; i < t->nr; i++) {
        size_t n = t->sigs[i].litlen;
        if (n == 0) {
            pf->all = 1;
        } else if (n < OOM_GRAM) {
            pf->short_lits = 1;
        } else {
            if (!nlong || n < pf->min_len)
                pf->min_len = n;
            nlong++;
        }
    }
    pf->stride = nlong ? pf->min_len - OOM_GRAM + 1 : 1;
    pf->grams = nlong ? calloc(nlong * pf->stride, sizeof *pf->grams) : NULL;
    if (nlong && !pf->grams) {
        free(pf);
        return;
    }
    for (size_t i = 0; i < t->nr; i++) {
        const struct oom_signature *s = &t->sigs[i];
        if (s->litlen < OOM_GRAM)
            continue;
        size_t a = oom_rare_grams(s, pf->stride);
        for (size_t k = a; k < a + pf->stride; k++) {
            struct oom_gram *g = &pf->grams[pf->ngrams++];
            g->w = oom_load(s->lit + k);
            g->off = (uint32_t)k;
            g->row = i;
            uint32_t h = oom_hash(g->w);
            pf->bits[h >> 6] |= (uint64_t)1 << (h & 63);
        }
    }
    t->pf = pf;
}

/* ------------------------------------------------------------------ */
/* Loading the table                                                   */
/* ------------------------------------------------------------------ */

static void oom_sig_release(struct oom_signature *s)
{
    regfree(&s->re);
    free(s->name);
    free(s->lit);
}

void oom_table_release(struct oom_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nr; i++)
        oom_sig_release(&t->sigs[i]);
    free(t->sigs);
    if (t->pf)
        free(t->pf->grams);
    free(t->pf);
    t->sigs = NULL;
    t->nr = 0;
    t->pf = NULL;
    t->pf_off = 0;
}

void oom_table_prefilter(struct oom_table *t, int on)
{
    t->pf_off = !on;
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
    if (rc != 0) {
        char why[160];
        regerror(rc, &s->re, why, sizeof why);
        snprintf(err, errlen, "line %zu: bad regex for '%s': %s", lineno, names, why);
        free(pattern);
        free(names);
        return -1;
    }
    oom_sig_literal(s, pattern);
    free(pattern);
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
    oom_prefilter_build(&nt);
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
    int rc = oom_table_load_n(t, ab_oom_signatures, ab_oom_signatures_len, err, errlen);
#ifdef AB_BENCH_OOM_SWITCH
    /* bench/logthroughput.sh builds autobatch with this defined to time
     * the runner without the prefilter too; other builds never look. */
    if (rc == 0 && getenv("AB_BENCH_NO_PREFILTER"))
        oom_table_prefilter(t, 0);
#endif
    return rc;
}

/* ------------------------------------------------------------------ */
/* Matching                                                            */
/* ------------------------------------------------------------------ */

/* Is the window w read at line[at..] one of a literal's grams, in an
 * occurrence of the whole literal? */
static int oom_gram_hit(const struct oom_table *t, const char *line, size_t len, size_t at,
                        uint32_t w)
{
    const struct oom_prefilter *pf = t->pf;
    for (size_t i = 0; i < pf->ngrams; i++) {
        const struct oom_gram *g = &pf->grams[i];
        if (g->w != w || at < g->off)
            continue;
        const struct oom_signature *s = &t->sigs[g->row];
        size_t start = at - g->off;
        if (start + s->litlen <= len && !memcmp(line + start, s->lit, s->litlen))
            return 1;
    }
    return 0;
}

/* 0 only when no row's literal occurs in line[0..len): then no row can
 * match it. */
static int oom_may_match(const struct oom_table *t, const char *line, size_t len)
{
    const struct oom_prefilter *pf = t->pf;
    if (!pf || t->pf_off || pf->all)
        return 1;
    /* The regexes read a NUL as a space; the literals would not. */
    if (memchr(line, '\0', len))
        return 1;
    for (size_t i = 0; pf->short_lits && i < t->nr; i++) {
        const struct oom_signature *s = &t->sigs[i];
        if (s->litlen && s->litlen < OOM_GRAM && memmem(line, len, s->lit, s->litlen))
            return 1;
    }
    if (!pf->ngrams || len < pf->min_len)
        return 0;
    for (size_t at = 0; at + OOM_GRAM <= len; at += pf->stride) {
        uint32_t w = oom_load(line + at);
        uint32_t h = oom_hash(w);
        if ((pf->bits[h >> 6] >> (h & 63) & 1) && oom_gram_hit(t, line, len, at, w))
            return 1;
    }
    return 0;
}

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
    if (!oom_may_match(t, line, len))
        return 0;
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
        const struct oom_signature *s = &t->sigs[i];
        /* A row whose literal is not in the line cannot match it. */
        if (!t->pf_off && s->lit && !memmem(buf, len, s->lit, s->litlen))
            continue;
        if (regexec(&s->re, buf, 0, NULL, 0) == 0) {
            if (m) {
                m->name = s->name;
                m->framework = s->framework;
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
