/* SPDX-License-Identifier: MIT */
/*
 * yedit: read and change one scalar of a YAML document without touching
 * any other byte.
 *
 * The document is parsed with libyaml's event API; every event is kept
 * with the byte offsets of its start and end marks.  libyaml 0.2.5 counts
 * its marks' `index` in characters (Unicode code points, a CR LF pair as
 * two), not bytes, and does not count a UTF-8 BOM at the very start of
 * the input (a BOM anywhere else counts as one character).  So the
 * offsets are found by walking the UTF-8 text with a cursor, one code
 * point per index step; marks come in almost increasing order, so the
 * walk is linear.
 *
 * A key path is resolved by walking the first document's events (a later
 * document of a multi-document stream is never addressed, though it must
 * parse and stays untouched).  An edit is a splice: the target scalar's
 * value bytes (after any tag or anchor) are replaced, or one new
 * "key: value" entry is inserted.  Before the new bytes are handed back
 * they are parsed again and the two event streams are compared event by
 * event: only the target scalar may differ (or exactly two new scalar
 * events may appear, before the end of the parent mapping), and it must
 * read back as the intended value.  Anything else is CEDIT_VERIFY.
 *
 * Library code: never prints, never exits, no global mutable state.
 */
#include "yedit.h"
#include "util/errbuf.h"
#include "util/sbuf.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

/* ------------------------------------------------------------------ */
/* Errors and small helpers                                            */
/* ------------------------------------------------------------------ */

static enum cedit_status failf(char *err, size_t errlen, enum cedit_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Fill err (one line: control characters from a hostile key or document
 * become spaces) and return st.
 */
static enum cedit_status failf(char *err, size_t errlen, enum cedit_status st, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        errbuf_vset(err, errlen, fmt, ap);
        va_end(ap);
        for (char *c = err; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = ' ';
    }
    return st;
}

static enum cedit_status nomem(char *err, size_t errlen)
{
    return failf(err, errlen, CEDIT_NOMEM, "out of memory");
}

/* printf precision for the first n bytes of a key (n is a key length). */
static int prec(size_t n)
{
    return n > 4096 ? 4096 : (int)n;
}

static bool ascii_caseeq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a, y = *b;
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return false;
    }
    return *a == *b;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Append n copies of c (indentation). */
static void sb_putrep(struct sbuf *b, char c, size_t n)
{
    while (n--)
        sb_putc(b, c);
}

/* ------------------------------------------------------------------ */
/* UTF-8                                                               */
/* ------------------------------------------------------------------ */

/* Length of the sequence a lead byte starts; 1 for a byte that is none. */
static size_t u8_len(unsigned char c)
{
    if (c < 0x80)
        return 1;
    if (c >= 0xC0 && c < 0xE0)
        return 2;
    if (c >= 0xE0 && c < 0xF0)
        return 3;
    if (c >= 0xF0 && c < 0xF8)
        return 4;
    return 1;
}

/* Strictly decode one code point of s[0..n): its length, or 0 if invalid. */
static size_t u8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t l = u8_len(s[0]);
    if (s[0] >= 0x80 && l == 1)
        return 0;
    if (l > n)
        return 0;
    uint32_t v = l == 1 ? s[0] : l == 2 ? s[0] & 0x1Fu : l == 3 ? s[0] & 0x0Fu : s[0] & 0x07u;
    for (size_t i = 1; i < l; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < min[l] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return l;
}

/* Code points in s[0..n) (its continuation bytes not counted). */
static size_t u8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

/* A code point that a YAML scalar can only hold as an escape. */
static bool needs_escape(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF;
}

/* Valid UTF-8 with nothing that needs an escape (tabs included). */
static bool all_printable(const char *v, size_t n)
{
    const unsigned char *s = (const unsigned char *)v;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = u8_decode(s + i, n - i, &cp);
        if (!l || needs_escape(cp))
            return false;
        i += l;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* The parsed stream                                                   */
/* ------------------------------------------------------------------ */

/** One parser event with byte offsets. */
struct yev {
    yaml_event_t e;
    size_t start; /**< byte offset of the start mark */
    size_t end;   /**< byte offset of the end mark */
    size_t pair;  /**< a collection's start <-> its end; others: own index */
};

/** All events of a document stream, STREAM_START to STREAM_END. */
struct ystream {
    struct yev *ev;
    size_t n, alloc;
};
#define YSTREAM_INIT { NULL, 0, 0 }

static void ystream_release(struct ystream *s)
{
    for (size_t i = 0; i < s->n; i++)
        yaml_event_delete(&s->ev[i].e);
    free(s->ev);
    s->ev = NULL;
    s->n = s->alloc = 0;
}

static bool has_bom(const char *doc, size_t len)
{
    return len >= 3 && (unsigned char)doc[0] == 0xEF && (unsigned char)doc[1] == 0xBB &&
           (unsigned char)doc[2] == 0xBF;
}

/* 1-based line and column (in code points) of a byte offset. */
static void byte_linecol(const char *doc, size_t len, size_t off, size_t *line, size_t *col)
{
    size_t i = has_bom(doc, len) ? 3 : 0;
    *line = 1;
    *col = 1;
    if (off > len)
        off = len;
    while (i < off) {
        if (doc[i] == '\n' || doc[i] == '\r') {
            i += (doc[i] == '\r' && i + 1 < len && doc[i + 1] == '\n') ? 2 : 1;
            ++*line;
            *col = 1;
        } else {
            i += u8_len((unsigned char)doc[i]);
            ++*col;
        }
    }
}

static enum cedit_status parse_failure(const yaml_parser_t *p, const char *doc, size_t len,
                                       char *err, size_t errlen)
{
    if (p->error == YAML_MEMORY_ERROR)
        return nomem(err, errlen);
    size_t line, col;
    if (p->error == YAML_READER_ERROR) {
        byte_linecol(doc, len, p->problem_offset, &line, &col);
    } else {
        line = p->problem_mark.line + 1;
        col = p->problem_mark.column + 1;
    }
    const char *problem = p->problem ? p->problem : "syntax error";
    if (p->context)
        return failf(err, errlen, CEDIT_MALFORMED,
                     "malformed yaml at line %zu, column %zu: %s (%s at line %zu, column %zu)",
                     line, col, problem, p->context, p->context_mark.line + 1,
                     p->context_mark.column + 1);
    return failf(err, errlen, CEDIT_MALFORMED, "malformed yaml at line %zu, column %zu: %s", line,
                 col, problem);
}

/*
 * Converts libyaml's character indexes to byte offsets by walking the
 * text from the last position asked for, forward or backward.
 */
struct cursor {
    const unsigned char *s;
    size_t len, base; /* base: byte offset of character 0 (after a BOM) */
    size_t ci, bi;    /* current character index and its byte offset */
};

static bool cursor_seek(struct cursor *c, size_t idx, size_t *byte)
{
    while (c->ci < idx && c->bi < c->len) {
        size_t l = u8_len(c->s[c->bi]);
        c->bi = l > c->len - c->bi ? c->len : c->bi + l;
        c->ci++;
    }
    while (c->ci > idx && c->bi > c->base) {
        do
            c->bi--;
        while (c->bi > c->base && (c->s[c->bi] & 0xC0) == 0x80);
        c->ci--;
    }
    if (c->ci != idx)
        return false;
    *byte = c->bi;
    return true;
}

/*
 * Parse the whole stream into s (which the caller releases, also on
 * failure).  UTF-16 input is refused: its marks would not map to bytes.
 */
static enum cedit_status ystream_parse(struct ystream *s, const char *doc, size_t len, char *err,
                                       size_t errlen)
{
    if (len >= 2 && (((unsigned char)doc[0] == 0xFE && (unsigned char)doc[1] == 0xFF) ||
                     ((unsigned char)doc[0] == 0xFF && (unsigned char)doc[1] == 0xFE)))
        return failf(err, errlen, CEDIT_MALFORMED,
                     "malformed yaml at line 1, column 1: utf-16 input is not supported");

    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return nomem(err, errlen);
    yaml_parser_set_input_string(&p, (const unsigned char *)doc, len);

    enum cedit_status st = CEDIT_OK;
    size_t *stack = NULL, depth = 0, salloc = 0;
    for (;;) {
        if (s->n == s->alloc) {
            size_t want = s->alloc ? s->alloc * 2 : 64;
            struct yev *ev = realloc(s->ev, want * sizeof *ev);
            if (!ev) {
                st = nomem(err, errlen);
                break;
            }
            s->ev = ev;
            s->alloc = want;
        }
        struct yev *v = &s->ev[s->n];
        if (!yaml_parser_parse(&p, &v->e)) {
            st = parse_failure(&p, doc, len, err, errlen);
            break;
        }
        v->pair = s->n;
        yaml_event_type_t t = v->e.type;
        s->n++;
        if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT) {
            /* Stop before libyaml's flow scanner, whose cost per token
             * grows with the nesting, goes quadratic on `[[[[...`. */
            if (depth >= YEDIT_MAX_DEPTH) {
                st = failf(err, errlen, CEDIT_MALFORMED,
                           "malformed yaml at line %zu, column %zu: nested deeper than %d levels",
                           (size_t)v->e.start_mark.line + 1, (size_t)v->e.start_mark.column + 1,
                           YEDIT_MAX_DEPTH);
                s->n--;
                yaml_event_delete(&v->e);
                break;
            }
            if (depth == salloc) {
                size_t want = salloc ? salloc * 2 : 32;
                size_t *ns = realloc(stack, want * sizeof *ns);
                if (!ns) {
                    st = nomem(err, errlen);
                    break;
                }
                stack = ns;
                salloc = want;
            }
            stack[depth++] = s->n - 1;
        } else if (t == YAML_MAPPING_END_EVENT || t == YAML_SEQUENCE_END_EVENT) {
            if (!depth) {
                st = failf(err, errlen, CEDIT_MALFORMED, "malformed yaml: unbalanced collections");
                break;
            }
            size_t open = stack[--depth];
            s->ev[open].pair = s->n - 1;
            v->pair = open;
        }
        if (t == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&p);
    free(stack);
    if (st != CEDIT_OK)
        return st;

    size_t base = has_bom(doc, len) ? 3 : 0;
    struct cursor c = { (const unsigned char *)doc, len, base, 0, base };
    for (size_t i = 0; i < s->n; i++) {
        struct yev *v = &s->ev[i];
        if (!cursor_seek(&c, v->e.start_mark.index, &v->start) ||
            !cursor_seek(&c, v->e.end_mark.index, &v->end) || v->end < v->start)
            return failf(err, errlen, CEDIT_VERIFY,
                         "internal error: a parser position lies outside the document");
    }
    return CEDIT_OK;
}

static const char *ev_anchor(const yaml_event_t *e)
{
    switch (e->type) {
    case YAML_SCALAR_EVENT:
        return (const char *)e->data.scalar.anchor;
    case YAML_MAPPING_START_EVENT:
        return (const char *)e->data.mapping_start.anchor;
    case YAML_SEQUENCE_START_EVENT:
        return (const char *)e->data.sequence_start.anchor;
    case YAML_ALIAS_EVENT:
        return (const char *)e->data.alias.anchor;
    default:
        return NULL;
    }
}

/* Index of the event after the node that starts at event i. */
static size_t node_next(const struct ystream *s, size_t i)
{
    yaml_event_type_t t = s->ev[i].e.type;
    if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT)
        return s->ev[i].pair + 1;
    return i + 1;
}

/* The node the alias at event i names: the latest one before it with that anchor. */
static size_t alias_target(const struct ystream *s, size_t i)
{
    const char *name = (const char *)s->ev[i].e.data.alias.anchor;
    for (size_t j = i; j-- > 0;) {
        if (s->ev[j].e.type == YAML_ALIAS_EVENT)
            continue;
        const char *a = ev_anchor(&s->ev[j].e);
        if (a && strcmp(a, name) == 0)
            return j;
    }
    return SIZE_MAX;
}

/* Whether the anchor on node i is used by an alias (before any redefinition). */
static bool anchor_used(const struct ystream *s, size_t i)
{
    const char *name = ev_anchor(&s->ev[i].e);
    if (!name)
        return false;
    for (size_t j = i + 1; j < s->n; j++) {
        const char *a = ev_anchor(&s->ev[j].e);
        if (!a || strcmp(a, name) != 0)
            continue;
        if (s->ev[j].e.type == YAML_ALIAS_EVENT)
            return true;
        return false; /* redefined: later aliases name the new node */
    }
    return false;
}

static bool scalar_is(const yaml_event_t *e, const char *v, size_t n)
{
    return e->type == YAML_SCALAR_EVENT && e->data.scalar.length == n &&
           memcmp(e->data.scalar.value, v, n) == 0;
}

/* ------------------------------------------------------------------ */
/* Key paths                                                           */
/* ------------------------------------------------------------------ */

struct ypath {
    char *buf;    /* a copy of the key with every '.' replaced by NUL */
    char **comp;  /* the n components, pointing into buf */
    size_t *clen; /* their lengths */
    size_t *cend; /* where each ends in the key: key[0..cend[k]) names it */
    size_t n;
};
#define YPATH_INIT { NULL, NULL, NULL, NULL, 0 }

static void ypath_release(struct ypath *p)
{
    free(p->buf);
    free(p->comp);
    free(p->clen);
    free(p->cend);
    memset(p, 0, sizeof *p);
}

static enum cedit_status ypath_parse(struct ypath *p, const char *key, char *err, size_t errlen)
{
    if (!key || !*key)
        return failf(err, errlen, CEDIT_BAD_KEY, "empty key");
    size_t len = strlen(key), n = 1;
    for (size_t i = 0; i < len; i++)
        n += key[i] == '.';
    p->buf = malloc(len + 1);
    p->comp = malloc(n * sizeof *p->comp);
    p->clen = malloc(n * sizeof *p->clen);
    p->cend = malloc(n * sizeof *p->cend);
    if (!p->buf || !p->comp || !p->clen || !p->cend)
        return nomem(err, errlen);
    memcpy(p->buf, key, len + 1);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && key[i] != '.')
            continue;
        if (i == start)
            return failf(err, errlen, CEDIT_BAD_KEY, "empty component in key '%s'", key);
        p->buf[i] = '\0';
        p->comp[p->n] = p->buf + start;
        p->clen[p->n] = i - start;
        p->cend[p->n] = i;
        p->n++;
        start = i + 1;
    }
    return CEDIT_OK;
}

/* A component that is a whole number, as a sequence index. */
static bool comp_index(const char *c, size_t n, size_t *idx)
{
    if (!n || n > 15)
        return false;
    size_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(c[i]))
            return false;
        v = v * 10 + (size_t)(c[i] - '0');
    }
    *idx = v;
    return true;
}

/* ------------------------------------------------------------------ */
/* Resolving a key                                                     */
/* ------------------------------------------------------------------ */

/** Where a key path leads in the first document. */
struct yloc {
    bool found;
    size_t node;    /**< found: the target node's event */
    size_t parent;  /**< not found: the MAPPING_START that lacks the last component */
    bool in_flow;   /**< the target, or the new entry, sits inside a flow collection */
    size_t *anc;    /**< the collections passed through, root first */
    size_t nanc;
};
#define YLOC_INIT { false, 0, 0, false, NULL, 0 }

static void yloc_release(struct yloc *l)
{
    free(l->anc);
    l->anc = NULL;
}

/*
 * Walk the key path.  Returns CEDIT_OK with loc->found set, or with
 * loc->found false and loc->parent set when only the last component is
 * missing from an existing mapping; any other failure is returned.
 */
static enum cedit_status yresolve(const struct ystream *s, const struct ypath *kp, const char *key,
                                  struct yloc *loc, char *err, size_t errlen)
{
    loc->anc = malloc((kp->n + 1) * sizeof *loc->anc);
    if (!loc->anc)
        return nomem(err, errlen);
    if (s->n < 3 || s->ev[1].e.type != YAML_DOCUMENT_START_EVENT)
        return failf(err, errlen, CEDIT_NOT_FOUND, "key '%s' not found: the document is empty",
                     key);
    size_t i = 2;
    for (size_t k = 0; k < kp->n; k++) {
        const yaml_event_t *e = &s->ev[i].e;
        const char *c = kp->comp[k];
        size_t clen = kp->clen[k];
        int here = prec(k ? kp->cend[k - 1] : 0); /* the path to node i */
        bool last = k + 1 == kp->n;

        if (e->type == YAML_ALIAS_EVENT)
            return failf(err, errlen, CEDIT_ALIAS,
                         "'%.*s' is an alias (*%s); edit the anchored node instead", here, key,
                         (const char *)e->data.alias.anchor);
        if (e->type == YAML_SCALAR_EVENT) {
            if (k == 0)
                return failf(err, errlen, CEDIT_NOT_FOUND,
                             e->data.scalar.length
                                 ? "key '%s' not found: the document is not a mapping"
                                 : "key '%s' not found: the document is empty",
                             key);
            return failf(err, errlen, CEDIT_NOT_FOUND,
                         e->data.scalar.length
                             ? "key '%s' not found: '%.*s' is a scalar, not a mapping"
                             : "key '%s' not found: '%.*s' is empty, not a mapping",
                         key, here, key);
        }
        loc->anc[loc->nanc++] = i;
        if ((e->type == YAML_MAPPING_START_EVENT &&
             e->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE) ||
            (e->type == YAML_SEQUENCE_START_EVENT &&
             e->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE))
            loc->in_flow = true;

        if (e->type == YAML_SEQUENCE_START_EVENT) {
            size_t want;
            if (!comp_index(c, clen, &want))
                return failf(err, errlen, CEDIT_NOT_FOUND,
                             "key '%s' not found: '%.*s' is a list and '%.*s' is not an index", key,
                             here, key, prec(clen), c);
            size_t j = i + 1, n = 0;
            while (j < s->ev[i].pair && n < want) {
                j = node_next(s, j);
                n++;
            }
            if (j >= s->ev[i].pair)
                return failf(err, errlen, CEDIT_NOT_FOUND,
                             "key '%s' not found: index %zu is past the end of '%.*s'", key, want,
                             here, key);
            i = j;
            continue;
        }

        /* A mapping: look at every key, to catch duplicates. */
        size_t hits = 0, hit = 0, end = s->ev[i].pair;
        bool via_alias = false, merges = false;
        for (size_t j = i + 1; j < end;) {
            size_t val = node_next(s, j), next = node_next(s, val);
            const yaml_event_t *ke = &s->ev[j].e;
            if (ke->type == YAML_SCALAR_EVENT) {
                if (scalar_is(ke, c, clen)) {
                    hits++;
                    hit = val;
                } else if (scalar_is(ke, "<<", 2) &&
                           ke->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
                    merges = true;
                }
            } else if (ke->type == YAML_ALIAS_EVENT) {
                size_t t = alias_target(s, j);
                if (t != SIZE_MAX && scalar_is(&s->ev[t].e, c, clen)) {
                    hits++;
                    hit = val;
                    via_alias = true;
                }
            }
            j = next;
        }
        int upto = prec(kp->cend[k]);
        if (hits > 1)
            return failf(err, errlen, CEDIT_AMBIGUOUS,
                         "key '%.*s' is ambiguous: it occurs %zu times in the same mapping", upto,
                         key, hits);
        if (via_alias)
            return failf(err, errlen, CEDIT_ALIAS, "key '%.*s' is written as an alias", upto, key);
        if (hits == 0) {
            if (merges)
                return failf(err, errlen, CEDIT_ALIAS,
                             "key '%.*s' is not written in its mapping, which merges others with "
                             "'<<'; edit the merged mapping instead",
                             upto, key);
            if (last) {
                loc->found = false;
                loc->parent = i;
                return CEDIT_OK;
            }
            return failf(err, errlen, CEDIT_NOT_FOUND, "key '%s' not found: '%.*s' does not exist",
                         key, upto, key);
        }
        i = hit;
    }
    loc->found = true;
    loc->node = i;
    return CEDIT_OK;
}

/* ------------------------------------------------------------------ */
/* Spelling a value                                                    */
/* ------------------------------------------------------------------ */

/* Boolean words by family (true/false, yes/no, on/off), false first. */
static const char *const bool_words[3][2] = {
    { "false", "true" }, { "no", "yes" }, { "off", "on" },
};

enum bool_case { BC_LOWER, BC_CAP, BC_UPPER };

/* Whether v is a YAML 1.1 boolean word in one of its three spellings. */
static bool bool_word(const char *v, size_t n, int *family, enum bool_case *bc, int *truth)
{
    for (int f = 0; f < 3; f++)
        for (int t = 0; t < 2; t++) {
            const char *w = bool_words[f][t];
            if (strlen(w) != n)
                continue;
            bool lower = true, cap = true, upper = true;
            for (size_t i = 0; i < n; i++) {
                char lc = w[i], uc = (char)(w[i] - 'a' + 'A');
                lower = lower && v[i] == lc;
                cap = cap && v[i] == (i ? lc : uc);
                upper = upper && v[i] == uc;
            }
            if (lower || cap || upper) {
                *family = f;
                *truth = t;
                *bc = lower ? BC_LOWER : cap ? BC_CAP : BC_UPPER;
                return true;
            }
        }
    return false;
}

static void bool_spell(char out[8], int family, enum bool_case bc, int truth)
{
    const char *w = bool_words[family][truth];
    size_t i = 0;
    for (; w[i]; i++) {
        bool up = bc == BC_UPPER || (bc == BC_CAP && i == 0);
        out[i] = up ? (char)(w[i] - 'a' + 'A') : w[i];
    }
    out[i] = '\0';
}

/* An integer or decimal/exponent literal: [+-](d+[.d*]|.d+)[(e|E)[+-]d+]. */
static bool is_number(const char *v, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (v[i] == '+' || v[i] == '-'))
        i++;
    while (i < n && is_digit(v[i]))
        i++, digits++;
    if (i < n && v[i] == '.') {
        i++;
        while (i < n && is_digit(v[i]))
            i++, digits++;
    }
    if (!digits)
        return false;
    if (i < n && (v[i] == 'e' || v[i] == 'E')) {
        i++;
        if (i < n && (v[i] == '+' || v[i] == '-'))
            i++;
        size_t ed = 0;
        while (i < n && is_digit(v[i]))
            i++, ed++;
        if (!ed)
            return false;
    }
    return i == n;
}

static bool is_null_word(const char *v, size_t n)
{
    return (n == 1 && v[0] == '~') ||
           (n == 4 && (!memcmp(v, "null", 4) || !memcmp(v, "Null", 4) || !memcmp(v, "NULL", 4)));
}

/* Whether a YAML 1.1 or 1.2 resolver could read v as a number (generous). */
static bool looks_numeric(const char *v, size_t n)
{
    size_t i = 0;
    if (i < n && (v[i] == '+' || v[i] == '-'))
        i++;
    static const char *const special[] = { ".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN" };
    for (size_t k = 0; k < sizeof special / sizeof *special; k++)
        if (n - i == 4 && !memcmp(v + i, special[k], 4))
            return true;
    if (i >= n || !(is_digit(v[i]) || (v[i] == '.' && i + 1 < n && is_digit(v[i + 1]))))
        return false;
    for (; i < n; i++)
        if (!strchr("0123456789abcdefABCDEFxXoO_.:+-", v[i]) || v[i] == '\0')
            return false;
    return true;
}

/* Whether v can be written as a plain scalar and read back as the same string. */
static bool plain_safe(const char *v, size_t n, bool in_flow)
{
    if (!n || !all_printable(v, n) || memchr(v, '\t', n))
        return false;
    if (strchr("-?:,[]{}#&*!|>'\"%@`", v[0]) || v[0] == ' ' || v[n - 1] == ' ' || v[n - 1] == ':')
        return false;
    for (size_t i = 0; i + 1 < n; i++)
        if ((v[i] == ':' && v[i + 1] == ' ') || (v[i] == ' ' && v[i + 1] == '#'))
            return false;
    if (in_flow)
        for (size_t i = 0; i < n; i++)
            if (strchr(",[]{}:", v[i]))
                return false;
    int f, t;
    enum bool_case bc;
    if (is_null_word(v, n) || bool_word(v, n, &f, &bc, &t) || looks_numeric(v, n))
        return false;
    if ((n == 1 && (v[0] == 'y' || v[0] == 'Y' || v[0] == 'n' || v[0] == 'N' || v[0] == '=')) ||
        (n == 2 && !memcmp(v, "<<", 2)) || (n >= 3 && !memcmp(v, "...", 3)))
        return false;
    return true;
}

static void quote_single(struct sbuf *b, const char *v, size_t n)
{
    sb_putc(b, '\'');
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\'')
            sb_putc(b, '\'');
        sb_putc(b, v[i]);
    }
    sb_putc(b, '\'');
}

/* Double-quote v with YAML escapes; false when v is not valid UTF-8. */
static bool quote_double(struct sbuf *b, const char *v, size_t n)
{
    const unsigned char *s = (const unsigned char *)v;
    sb_putc(b, '"');
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = u8_decode(s + i, n - i, &cp);
        if (!l)
            return false;
        char tmp[12];
        const char *esc = NULL;
        switch (cp) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case 0x00: esc = "\\0"; break;
        case 0x07: esc = "\\a"; break;
        case 0x08: esc = "\\b"; break;
        case 0x09: esc = "\\t"; break;
        case 0x0A: esc = "\\n"; break;
        case 0x0B: esc = "\\v"; break;
        case 0x0C: esc = "\\f"; break;
        case 0x0D: esc = "\\r"; break;
        case 0x1B: esc = "\\e"; break;
        case 0x85: esc = "\\N"; break;
        case 0x2028: esc = "\\L"; break;
        case 0x2029: esc = "\\P"; break;
        default:
            if (needs_escape(cp)) {
                snprintf(tmp, sizeof tmp, cp < 0x100 ? "\\x%02X" : "\\u%04X", (unsigned)cp);
                esc = tmp;
            }
        }
        if (esc)
            sb_puts(b, esc);
        else
            sb_put(b, v + i, l);
        i += l;
    }
    sb_putc(b, '"');
    return true;
}

/** A new scalar: the bytes to write and what a parser must read back. */
struct spelling {
    struct sbuf text;
    const char *val; /* points into the caller's value or into word */
    size_t vlen;
    char word[8];
    yaml_scalar_style_t style;
};

static void spelling_release(struct spelling *sp)
{
    sb_release(&sp->text);
}

static enum cedit_status spell_write(struct spelling *sp, char *err, size_t errlen)
{
    switch (sp->style) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE:
        quote_single(&sp->text, sp->val, sp->vlen);
        break;
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE:
        if (!quote_double(&sp->text, sp->val, sp->vlen)) {
            spelling_release(sp);
            return failf(err, errlen, CEDIT_VERIFY, "the value is not valid utf-8");
        }
        break;
    default:
        sb_put(&sp->text, sp->val, sp->vlen);
    }
    if (sp->text.oom)
        return nomem(err, errlen);
    return CEDIT_OK;
}

/* The case the file's true/false booleans mostly use (lowercase if none). */
static enum bool_case file_bool_case(const struct ystream *s)
{
    size_t count[3] = { 0, 0, 0 };
    for (size_t i = 0; i < s->n; i++) {
        const yaml_event_t *e = &s->ev[i].e;
        int f, t;
        enum bool_case bc;
        if (e->type == YAML_SCALAR_EVENT && e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            !e->data.scalar.tag &&
            bool_word((const char *)e->data.scalar.value, e->data.scalar.length, &f, &bc, &t) &&
            f == 0)
            count[bc]++;
    }
    enum bool_case best = BC_LOWER;
    for (int c = 1; c < 3; c++)
        if (count[c] > count[best])
            best = (enum bool_case)c;
    return best;
}

/*
 * Spell value for the place of old (NULL for a new key) following
 * cedit.h: booleans keep the old (or the file's) spelling, numbers stay
 * quoted only where a quoted number was, strings keep the quote style
 * when they can; null/~ is written bare.
 */
static enum cedit_status spell_value(struct spelling *sp, const char *value,
                                     const yaml_event_t *old, enum bool_case file_case,
                                     bool in_flow, char *err, size_t errlen)
{
    size_t n = strlen(value);
    yaml_scalar_style_t ostyle = old ? old->data.scalar.style : YAML_PLAIN_SCALAR_STYLE;
    bool oquoted =
        ostyle == YAML_SINGLE_QUOTED_SCALAR_STYLE || ostyle == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    const char *ov = old ? (const char *)old->data.scalar.value : "";
    size_t on = old ? old->data.scalar.length : 0;
    int ofam = 0, otruth = 0, truth = -1;
    enum bool_case ocase = BC_LOWER;
    bool obool = old && bool_word(ov, on, &ofam, &ocase, &otruth) &&
                 (oquoted || (ostyle == YAML_PLAIN_SCALAR_STYLE && !old->data.scalar.tag));
    bool obool11 = obool && !oquoted; /* a YAML 1.1 boolean, read as such */

    if (ascii_caseeq(value, "true"))
        truth = 1;
    else if (ascii_caseeq(value, "false"))
        truth = 0;
    else if (obool11 && (ascii_caseeq(value, "yes") || ascii_caseeq(value, "on")))
        truth = 1;
    else if (obool11 && (ascii_caseeq(value, "no") || ascii_caseeq(value, "off")))
        truth = 0;

    sp->val = value;
    sp->vlen = n;
    if (truth >= 0) {
        bool_spell(sp->word, obool ? ofam : 0, obool ? ocase : file_case, truth);
        sp->val = sp->word;
        sp->vlen = strlen(sp->word);
        sp->style = oquoted && obool ? ostyle : YAML_PLAIN_SCALAR_STYLE;
    } else if (is_number(value, n)) {
        sp->style = oquoted && is_number(ov, on) ? ostyle : YAML_PLAIN_SCALAR_STYLE;
    } else if (is_null_word(value, n)) {
        sp->style = YAML_PLAIN_SCALAR_STYLE;
    } else if (ostyle == YAML_SINGLE_QUOTED_SCALAR_STYLE && all_printable(value, n) &&
               !memchr(value, '\t', n)) {
        sp->style = YAML_SINGLE_QUOTED_SCALAR_STYLE;
    } else if (oquoted || !plain_safe(value, n, in_flow)) {
        sp->style = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    } else {
        sp->style = YAML_PLAIN_SCALAR_STYLE;
    }
    return spell_write(sp, err, errlen);
}

/* A new key: plain if it reads back as itself, else double-quoted. */
static enum cedit_status spell_key(struct spelling *sp, const char *k, size_t n, bool in_flow,
                                   char *err, size_t errlen)
{
    sp->val = k;
    sp->vlen = n;
    sp->style =
        plain_safe(k, n, in_flow) ? YAML_PLAIN_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE;
    return spell_write(sp, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Text positions                                                      */
/* ------------------------------------------------------------------ */

static bool is_break(char c)
{
    return c == '\n' || c == '\r';
}

static size_t line_start(const char *d, size_t pos)
{
    while (pos > 0 && !is_break(d[pos - 1]))
        pos--;
    return pos;
}

static size_t line_end(const char *d, size_t len, size_t pos)
{
    while (pos < len && !is_break(d[pos]))
        pos++;
    return pos;
}

/* From the end of a line, past its line break (CR LF, LF or CR). */
static size_t skip_break(const char *d, size_t len, size_t pos)
{
    if (pos < len && d[pos] == '\r') {
        pos++;
        if (pos < len && d[pos] == '\n')
            pos++;
    } else if (pos < len && d[pos] == '\n') {
        pos++;
    }
    return pos;
}

/* The file's line break: that of its first line, or LF. */
static const char *file_eol(const char *d, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (d[i] == '\n')
            return "\n";
        if (d[i] == '\r')
            return i + 1 < len && d[i + 1] == '\n' ? "\r\n" : "\r";
    }
    return "\n";
}

/*
 * Where a scalar's value text begins: its event starts at its first
 * property (&anchor, !tag), which may sit on an earlier line.
 */
static size_t value_start(const char *d, const struct yev *v)
{
    const yaml_event_t *e = &v->e;
    size_t p = v->start, end = v->end;
    if (!e->data.scalar.anchor && !e->data.scalar.tag)
        return p;
    while (p < end) {
        char c = d[p];
        if (c == '&' && e->data.scalar.anchor) {
            /* The anchor's text is exactly its name (it may end at a ':'). */
            size_t n = 1 + strlen((const char *)e->data.scalar.anchor);
            p = n > end - p ? end : p + n;
        } else if (c == '!' && !(p + 1 < end && d[p + 1] == '<')) {
            while (p < end && !strchr(" \t\r\n,[]{}", d[p]))
                p++;
        } else if (c == '!') {
            while (p < end && d[p] != '>')
                p++;
            if (p < end)
                p++;
        } else if (c == ' ' || c == '\t' || is_break(c)) {
            p++;
        } else if (end - p >= 3 && has_bom(d + p, 3) && p > 0 && is_break(d[p - 1])) {
            p += 3; /* libyaml skips a BOM that starts a line (elsewhere it is text) */
        } else if (c == '#') {
            p = line_end(d, end, p);
        } else {
            break;
        }
    }
    return p;
}

/* Whether a line d[ls..le) has a '#' after a blank at code-point column col. */
static bool comment_at_column(const char *d, size_t ls, size_t le, size_t col)
{
    size_t p = ls, c = 0;
    while (p < le && c < col) {
        size_t l = u8_len((unsigned char)d[p]);
        p = l > le - p ? le : p + l;
        c++;
    }
    return c == col && p < le && p > ls && d[p] == '#' && (d[p - 1] == ' ' || d[p - 1] == '\t');
}

/*
 * Whether the inline comment at byte hash is column-aligned: the line
 * above or the line below has a comment starting at the same column.
 */
static bool comment_aligned(const char *d, size_t len, size_t hash)
{
    size_t ls = line_start(d, hash);
    size_t col = u8_count(d + ls, hash - ls);
    if (ls > 0) {
        size_t pe = ls - 1;
        if (pe > 0 && d[pe] == '\n' && d[pe - 1] == '\r')
            pe--;
        if (comment_at_column(d, line_start(d, pe), pe, col))
            return true;
    }
    size_t le = line_end(d, len, hash);
    if (le < len) {
        size_t ns = skip_break(d, len, le);
        if (comment_at_column(d, ns, line_end(d, len, ns), col))
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* Verification                                                        */
/* ------------------------------------------------------------------ */

static bool str_eq(const yaml_char_t *a, const yaml_char_t *b)
{
    if (!a || !b)
        return a == b;
    return strcmp((const char *)a, (const char *)b) == 0;
}

/* Two events equal in everything but position. */
static bool ev_same(const yaml_event_t *a, const yaml_event_t *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case YAML_STREAM_START_EVENT:
        return a->data.stream_start.encoding == b->data.stream_start.encoding;
    case YAML_DOCUMENT_START_EVENT: {
        const yaml_version_directive_t *va = a->data.document_start.version_directive;
        const yaml_version_directive_t *vb = b->data.document_start.version_directive;
        if (a->data.document_start.implicit != b->data.document_start.implicit || !va != !vb ||
            (va && (va->major != vb->major || va->minor != vb->minor)))
            return false;
        const yaml_tag_directive_t *ta = a->data.document_start.tag_directives.start;
        const yaml_tag_directive_t *tb = b->data.document_start.tag_directives.start;
        size_t na = (size_t)(a->data.document_start.tag_directives.end - ta);
        size_t nb = (size_t)(b->data.document_start.tag_directives.end - tb);
        if (na != nb)
            return false;
        for (size_t i = 0; i < na; i++)
            if (!str_eq(ta[i].handle, tb[i].handle) || !str_eq(ta[i].prefix, tb[i].prefix))
                return false;
        return true;
    }
    case YAML_DOCUMENT_END_EVENT:
        return a->data.document_end.implicit == b->data.document_end.implicit;
    case YAML_ALIAS_EVENT:
        return str_eq(a->data.alias.anchor, b->data.alias.anchor);
    case YAML_SCALAR_EVENT:
        return str_eq(a->data.scalar.anchor, b->data.scalar.anchor) &&
               str_eq(a->data.scalar.tag, b->data.scalar.tag) &&
               a->data.scalar.length == b->data.scalar.length &&
               memcmp(a->data.scalar.value, b->data.scalar.value, a->data.scalar.length) == 0 &&
               a->data.scalar.plain_implicit == b->data.scalar.plain_implicit &&
               a->data.scalar.quoted_implicit == b->data.scalar.quoted_implicit &&
               a->data.scalar.style == b->data.scalar.style;
    case YAML_SEQUENCE_START_EVENT:
        return str_eq(a->data.sequence_start.anchor, b->data.sequence_start.anchor) &&
               str_eq(a->data.sequence_start.tag, b->data.sequence_start.tag) &&
               a->data.sequence_start.implicit == b->data.sequence_start.implicit &&
               a->data.sequence_start.style == b->data.sequence_start.style;
    case YAML_MAPPING_START_EVENT:
        return str_eq(a->data.mapping_start.anchor, b->data.mapping_start.anchor) &&
               str_eq(a->data.mapping_start.tag, b->data.mapping_start.tag) &&
               a->data.mapping_start.implicit == b->data.mapping_start.implicit &&
               a->data.mapping_start.style == b->data.mapping_start.style;
    default:
        return true;
    }
}

/* The new scalar reads back as sp, with the given anchor and tag. */
static bool ev_spelled(const yaml_event_t *e, const struct spelling *sp, const yaml_char_t *anchor,
                       const yaml_char_t *tag)
{
    return scalar_is(e, sp->val, sp->vlen) && e->data.scalar.style == sp->style &&
           str_eq(e->data.scalar.anchor, anchor) && str_eq(e->data.scalar.tag, tag);
}

/*
 * Re-parse out and compare it with the original stream a.  Replacement
 * (key == NULL): event `at` must read as val, all others unchanged.
 * Insertion: the key and val scalars must appear just before event `at`
 * (the parent's MAPPING_END), all others unchanged.
 */
static enum cedit_status verify(const struct ystream *a, const char *doc, size_t len,
                                const char *out, size_t outlen, size_t at,
                                const struct spelling *key, const struct spelling *val, char *err,
                                size_t errlen)
{
    struct ystream b = YSTREAM_INIT;
    char perr[160];
    enum cedit_status st = ystream_parse(&b, out, outlen, perr, sizeof perr);
    if (st == CEDIT_NOMEM) {
        ystream_release(&b);
        return nomem(err, errlen);
    }
    if (st != CEDIT_OK) {
        ystream_release(&b);
        return failf(err, errlen, CEDIT_VERIFY, "the edited document does not parse (%s)", perr);
    }
    size_t extra = key ? 2 : 0;
    size_t bad = SIZE_MAX;
    if (b.n != a->n + extra) {
        bad = at;
    } else {
        for (size_t i = 0, j = 0; i < a->n; i++, j++) {
            if (key && i == at) {
                if (!ev_spelled(&b.ev[j].e, key, NULL, NULL) ||
                    !ev_spelled(&b.ev[j + 1].e, val, NULL, NULL)) {
                    bad = i;
                    break;
                }
                j += 2;
            }
            if (!key && i == at) {
                const yaml_event_t *o = &a->ev[i].e;
                if (!ev_spelled(&b.ev[j].e, val, o->data.scalar.anchor, o->data.scalar.tag)) {
                    bad = i;
                    break;
                }
                continue;
            }
            if (!ev_same(&a->ev[i].e, &b.ev[j].e)) {
                bad = i;
                break;
            }
        }
    }
    ystream_release(&b);
    if (bad != SIZE_MAX) {
        size_t line, col;
        byte_linecol(doc, len, a->ev[bad < a->n ? bad : a->n - 1].start, &line, &col);
        return failf(err, errlen, CEDIT_VERIFY,
                     "the edited document does not read back as intended (near line %zu)", line);
    }
    return CEDIT_OK;
}

/* ------------------------------------------------------------------ */
/* Editing                                                             */
/* ------------------------------------------------------------------ */

/* Refuse to edit inside, or at, a node whose anchor an alias uses. */
static enum cedit_status check_anchors(const struct ystream *s, const struct yloc *loc,
                                       const char *key, char *err, size_t errlen)
{
    for (size_t k = 0; k < loc->nanc + (loc->found ? 1 : 0); k++) {
        size_t i = k < loc->nanc ? loc->anc[k] : loc->node;
        if (anchor_used(s, i))
            return failf(err, errlen, CEDIT_ALIAS,
                         "'%s' is at or inside a node anchored as &%s that an alias uses; "
                         "editing it would change the aliased copies too",
                         key, ev_anchor(&s->ev[i].e));
    }
    return CEDIT_OK;
}

/* Replace the target scalar's value bytes; keep aligned comments in place. */
static enum cedit_status edit_replace(const struct ystream *s, const char *doc, size_t len,
                                      const struct yloc *loc, const char *key, const char *value,
                                      char **out, size_t *outlen, char *err, size_t errlen)
{
    const struct yev *v = &s->ev[loc->node];
    const yaml_event_t *e = &v->e;
    size_t vs = value_start(doc, v), ve = v->end;
    yaml_scalar_style_t style = e->data.scalar.style;

    /* Check that the offsets really frame this scalar's text. */
    bool framed = vs <= ve;
    if (framed && style == YAML_PLAIN_SCALAR_STYLE && !memchr(doc + vs, '\n', ve - vs) &&
        !memchr(doc + vs, '\r', ve - vs))
        framed = ve - vs == e->data.scalar.length &&
                 memcmp(doc + vs, e->data.scalar.value, ve - vs) == 0;
    else if (framed && (style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                        style == YAML_DOUBLE_QUOTED_SCALAR_STYLE))
        framed = ve - vs >= 2 && doc[vs] == doc[ve - 1] &&
                 doc[vs] == (style == YAML_SINGLE_QUOTED_SCALAR_STYLE ? '\'' : '"');
    else if (framed && (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE))
        framed = ve > vs && (doc[vs] == '|' || doc[vs] == '>');
    if (!framed)
        return failf(err, errlen, CEDIT_VERIFY, "internal error: cannot find the text of '%s'",
                     key);

    /* A block scalar is replaced up to its last non-blank character. */
    if (style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE)
        while (ve > vs + 1 && (doc[ve - 1] == ' ' || doc[ve - 1] == '\t' || is_break(doc[ve - 1])))
            ve--;

    struct spelling sp = { SBUF_INIT, NULL, 0, "", YAML_PLAIN_SCALAR_STYLE };
    enum cedit_status st =
        spell_value(&sp, value, e, file_bool_case(s), loc->in_flow, err, errlen);
    if (st != CEDIT_OK) {
        spelling_release(&sp);
        return st;
    }

    /*
     * An empty value ("key:") needs a blank before the new text, and so
     * does a value glued to its anchor ("&x:s": the anchor ends at ':').
     */
    bool space = (vs == ve || vs != v->start) && vs > 0 && doc[vs - 1] != ' ' &&
                 doc[vs - 1] != '\t' && !is_break(doc[vs - 1]);

    /* Padding before a column-aligned inline comment absorbs the change. */
    size_t pad = 0, newpad = 0;
    bool realign = false;
    if (!loc->in_flow && style != YAML_LITERAL_SCALAR_STYLE && style != YAML_FOLDED_SCALAR_STYLE &&
        !memchr(doc + vs, '\n', ve - vs) && !memchr(doc + vs, '\r', ve - vs)) {
        while (ve + pad < len && doc[ve + pad] == ' ')
            pad++;
        if (pad && ve + pad < len && doc[ve + pad] == '#' && comment_aligned(doc, len, ve + pad)) {
            size_t oldw = u8_count(doc + vs, ve - vs);
            size_t neww = u8_count(sp.text.p, sp.text.len) + (space ? 1 : 0);
            realign = true;
            if (neww >= oldw)
                newpad = pad > neww - oldw ? pad - (neww - oldw) : 1;
            else
                newpad = pad + (oldw - neww);
        }
    }

    struct sbuf o = SBUF_INIT;
    sb_put(&o, doc, vs);
    if (space)
        sb_putc(&o, ' ');
    sb_put(&o, sp.text.p, sp.text.len);
    if (realign) {
        sb_putrep(&o, ' ', newpad);
        sb_put(&o, doc + ve + pad, len - ve - pad);
    } else {
        sb_put(&o, doc + ve, len - ve);
    }
    if (o.oom) {
        spelling_release(&sp);
        return nomem(err, errlen);
    }
    st = verify(s, doc, len, o.p, o.len, loc->node, NULL, &sp, err, errlen);
    spelling_release(&sp);
    if (st != CEDIT_OK) {
        sb_release(&o);
        return st;
    }
    *out = o.p;
    *outlen = o.len;
    return CEDIT_OK;
}

/*
 * The last byte of real content inside the collection that ends at event
 * m: skip back over the ends of block collections (whose marks point at
 * whatever follows them) to the last scalar, alias or flow bracket.
 */
static size_t content_end(const struct ystream *s, const char *doc, size_t m)
{
    size_t j = m;
    while (j > 0) {
        j--;
        const yaml_event_t *e = &s->ev[j].e;
        if (e->type == YAML_MAPPING_END_EVENT || e->type == YAML_SEQUENCE_END_EVENT) {
            const yaml_event_t *o = &s->ev[s->ev[j].pair].e;
            bool block = o->type == YAML_MAPPING_START_EVENT
                             ? o->data.mapping_start.style != YAML_FLOW_MAPPING_STYLE
                             : o->data.sequence_start.style != YAML_FLOW_SEQUENCE_STYLE;
            if (block)
                continue;
        }
        break;
    }
    size_t end = s->ev[j].end, start = s->ev[j].start;
    while (end > start && (doc[end - 1] == ' ' || doc[end - 1] == '\t' || is_break(doc[end - 1])))
        end--;
    return end;
}

/* Insert "key: value" as the last entry of the mapping at loc->parent. */
static enum cedit_status edit_insert(const struct ystream *s, const char *doc, size_t len,
                                     const struct yloc *loc, const struct ypath *kp,
                                     const char *value, char **out, size_t *outlen, char *err,
                                     size_t errlen)
{
    size_t pi = loc->parent, m = s->ev[pi].pair;
    bool flow = s->ev[pi].e.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    const char *kname = kp->comp[kp->n - 1];
    size_t klen = kp->clen[kp->n - 1];

    struct spelling ks = { SBUF_INIT, NULL, 0, "", YAML_PLAIN_SCALAR_STYLE };
    struct spelling vsp = { SBUF_INIT, NULL, 0, "", YAML_PLAIN_SCALAR_STYLE };
    enum cedit_status st = spell_key(&ks, kname, klen, loc->in_flow, err, errlen);
    /* libyaml reads a key only up to 1024 characters long. */
    if (st == CEDIT_OK && u8_count(ks.text.p, ks.text.len) > 1000)
        st = failf(err, errlen, CEDIT_BAD_KEY, "key component '%.40s...' is too long for yaml",
                   kname);
    if (st == CEDIT_OK)
        st = spell_value(&vsp, value, NULL, file_bool_case(s), loc->in_flow, err, errlen);
    if (st != CEDIT_OK) {
        spelling_release(&ks);
        spelling_release(&vsp);
        return st;
    }

    struct sbuf o = SBUF_INIT;
    if (flow) {
        /* After the last value: ", key: value"; into "{}": "key: value". */
        size_t at = s->ev[m].start;
        const char *sep = m == pi + 1 ? "" : ", ";
        const struct yev *lv = &s->ev[m - 1];
        if (m != pi + 1) {
            if (!(lv->e.type == YAML_SCALAR_EVENT && lv->start == lv->end)) {
                at = content_end(s, doc, m);
            } else if (lv->start < len && doc[lv->start] == ',') {
                /* An empty last value is marked at the next token: "{a, }". */
                at = lv->start + 1;
                sep = " ";
            } else {
                at = lv->start; /* "{a: }": at the brace */
            }
        }
        sb_put(&o, doc, at);
        sb_puts(&o, sep);
        sb_put(&o, ks.text.p, ks.text.len);
        sb_puts(&o, ": ");
        sb_put(&o, vsp.text.p, vsp.text.len);
        sb_put(&o, doc + at, len - at);
    } else {
        /* A new line after the line where the mapping's last value ends. */
        size_t col = s->ev[pi + 1].e.start_mark.column;
        size_t ce = content_end(s, doc, m);
        size_t le = line_end(doc, len, ce);
        const char *eol = file_eol(doc, len);
        bool at_eof = le == len;
        size_t at = at_eof ? len : skip_break(doc, len, le);
        sb_put(&o, doc, at);
        if (at_eof)
            sb_puts(&o, eol);
        sb_putrep(&o, ' ', col);
        sb_put(&o, ks.text.p, ks.text.len);
        sb_puts(&o, ": ");
        sb_put(&o, vsp.text.p, vsp.text.len);
        if (!at_eof)
            sb_puts(&o, eol);
        sb_put(&o, doc + at, len - at);
    }
    if (o.oom) {
        spelling_release(&ks);
        spelling_release(&vsp);
        return nomem(err, errlen);
    }
    st = verify(s, doc, len, o.p, o.len, m, &ks, &vsp, err, errlen);
    spelling_release(&ks);
    spelling_release(&vsp);
    if (st != CEDIT_OK) {
        sb_release(&o);
        return st;
    }
    *out = o.p;
    *outlen = o.len;
    return CEDIT_OK;
}

/* ------------------------------------------------------------------ */
/* The API                                                             */
/* ------------------------------------------------------------------ */

/* Parse key and document and resolve the path; the common first half. */
static enum cedit_status open_doc(const char *doc, size_t len, const char *key, struct ypath *kp,
                                  struct ystream *s, struct yloc *loc, char *err, size_t errlen)
{
    enum cedit_status st = ypath_parse(kp, key, err, errlen);
    if (st != CEDIT_OK)
        return st;
    if (!doc && len)
        return failf(err, errlen, CEDIT_MALFORMED, "no document");
    st = ystream_parse(s, doc ? doc : "", len, err, errlen);
    if (st != CEDIT_OK)
        return st;
    return yresolve(s, kp, key, loc, err, errlen);
}

enum cedit_status yedit_get(const char *doc, size_t len, const char *key, char **value,
                            char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!value)
        return failf(err, errlen, CEDIT_BAD_KEY, "no place for the value");
    *value = NULL;

    struct ypath kp = YPATH_INIT;
    struct ystream s = YSTREAM_INIT;
    struct yloc loc = YLOC_INIT;
    enum cedit_status st = open_doc(doc, len, key, &kp, &s, &loc, err, errlen);
    if (st == CEDIT_OK && !loc.found)
        st = failf(err, errlen, CEDIT_NOT_FOUND, "key '%s' not found", key);
    if (st == CEDIT_OK) {
        size_t i = loc.node;
        /* Reading through an alias is harmless: give the anchored scalar. */
        if (s.ev[i].e.type == YAML_ALIAS_EVENT) {
            size_t t = alias_target(&s, i);
            if (t == SIZE_MAX)
                st = failf(err, errlen, CEDIT_ALIAS, "'%s' is an alias to an undefined anchor",
                           key);
            else
                i = t;
        }
        const yaml_event_t *e = &s.ev[i].e;
        if (st == CEDIT_OK && e->type != YAML_SCALAR_EVENT)
            st = failf(err, errlen, CEDIT_NOT_SCALAR, "'%s' is a %s, not a scalar", key,
                       e->type == YAML_MAPPING_START_EVENT ? "mapping" : "list");
        if (st == CEDIT_OK) {
            *value = malloc(e->data.scalar.length + 1);
            if (!*value) {
                st = nomem(err, errlen);
            } else {
                memcpy(*value, e->data.scalar.value, e->data.scalar.length);
                (*value)[e->data.scalar.length] = '\0';
            }
        }
    }
    yloc_release(&loc);
    ystream_release(&s);
    ypath_release(&kp);
    return st;
}

enum cedit_status yedit_set(const char *doc, size_t len, const char *key, const char *value,
                            char **out, size_t *outlen, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (out)
        *out = NULL;
    if (outlen)
        *outlen = 0;
    if (!out || !outlen)
        return failf(err, errlen, CEDIT_BAD_KEY, "no place for the output");
    if (!value)
        return failf(err, errlen, CEDIT_BAD_KEY, "no value given for '%s'", key ? key : "");

    struct ypath kp = YPATH_INIT;
    struct ystream s = YSTREAM_INIT;
    struct yloc loc = YLOC_INIT;
    enum cedit_status st = open_doc(doc, len, key, &kp, &s, &loc, err, errlen);
    if (st == CEDIT_OK && loc.found) {
        yaml_event_type_t t = s.ev[loc.node].e.type;
        if (t == YAML_ALIAS_EVENT)
            st = failf(err, errlen, CEDIT_ALIAS,
                       "'%s' is an alias (*%s); set the anchored value instead", key,
                       (const char *)s.ev[loc.node].e.data.alias.anchor);
        else if (t != YAML_SCALAR_EVENT)
            st = failf(err, errlen, CEDIT_NOT_SCALAR, "'%s' is a %s, not a scalar", key,
                       t == YAML_MAPPING_START_EVENT ? "mapping" : "list");
    }
    if (st == CEDIT_OK)
        st = check_anchors(&s, &loc, key, err, errlen);
    if (st == CEDIT_OK) {
        if (loc.found)
            st = edit_replace(&s, doc, len, &loc, key, value, out, outlen, err, errlen);
        else
            st = edit_insert(&s, doc, len, &loc, &kp, value, out, outlen, err, errlen);
    }
    yloc_release(&loc);
    ystream_release(&s);
    ypath_release(&kp);
    return st;
}
