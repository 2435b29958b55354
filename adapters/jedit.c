/* SPDX-License-Identifier: MIT */
/*
 * jedit: the format-preserving JSON editor (see jedit.h for the contract).
 *
 * How it works.  A hand-written lexer cuts the document into tokens
 * (punctuation, strings, numbers, literals and comments), each with its
 * byte span; whitespace is not a token.  An iterative parser (no recursion,
 * so no nesting depth can exhaust the stack) walks the tokens and builds a
 * small tree of nodes that point back at them: a member knows its key
 * token and the comma after it, a container its brackets and children.
 * A key path is resolved on that tree, so text inside comments and strings
 * can never be taken for a key.
 *
 * An edit is one or two splices (byte position, bytes removed, bytes
 * inserted) applied to the original; nothing else is rewritten.  Before
 * the new bytes are handed back they are lexed and parsed again and
 * checked: every token outside the splices (comments included) equals the
 * old token in the same order, byte for byte; the bytes removed were
 * exactly the old value's token; the bytes inserted are exactly the
 * expected tokens with only whitespace between them; and the key resolves
 * to the new value.  Strict-JSON documents are also loaded with jansson,
 * as an independent parser: the old tree with the new value put in must
 * equal the new tree.
 */
#include "jedit.h"
#include "util/errbuf.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JNONE ((size_t)-1)

/* ------------------------------------------------------------------ */
/* Small helpers                                                      */
/* ------------------------------------------------------------------ */


/* ASCII classes without <ctype.h>, whose answers depend on the locale. */
static int jdigit(int c)
{
    return c >= '0' && c <= '9';
}

static int jalpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int jhex(int c)
{
    if (jdigit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int jlower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int jcaseeq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (jlower((unsigned char)*a) != jlower((unsigned char)*b))
            return 0;
    return *a == *b;
}

/* Whether s[0..n) is well-formed UTF-8 (no overlongs, no surrogates). */
static int jutf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, min = 0x80, c &= 0x1F;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, min = 0x800, c &= 0x0F;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, min = 0x10000, c &= 0x07;
        } else {
            return 0;
        }
        if (n - i <= k)
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
            c = (c << 6) | (s[i + j] & 0x3F);
        }
        if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

/*
 * Length of the JSON number (RFC 8259 grammar) at the start of s[0..n),
 * or 0 when s does not start with one.  The caller checks what follows.
 */
static size_t jnumber_len(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && jdigit((unsigned char)s[i])) {
        while (i < n && jdigit((unsigned char)s[i]))
            i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !jdigit((unsigned char)s[i]))
            return 0;
        while (i < n && jdigit((unsigned char)s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !jdigit((unsigned char)s[i]))
            return 0;
        while (i < n && jdigit((unsigned char)s[i]))
            i++;
    }
    return i;
}

/*
 * Whether a string's content looks like a number in any common spelling
 * ("4", "+4", ".5", "5.", "1e-4"): such a string stays a string when a
 * number replaces it.
 */
static int jnumeric_looking(const char *s, size_t n)
{
    size_t i = 0, digits = 0;
    if (i < n && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < n && jdigit((unsigned char)s[i]))
        i++, digits++;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && jdigit((unsigned char)s[i]))
            i++, digits++;
    }
    if (!digits)
        return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t e = 0;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < n && jdigit((unsigned char)s[i]))
            i++, e++;
        if (!e)
            return 0;
    }
    return i == n;
}

/* 1-based line and column of byte off; the column counts UTF-8 characters. */
static void jpos(const char *s, size_t len, size_t bom, size_t off, size_t *line, size_t *col)
{
    size_t l = 1, c = 1;
    for (size_t i = bom; i < off && i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '\n') {
            l++, c = 1;
        } else if (ch == '\r') {
            if (i + 1 < len && s[i + 1] == '\n')
                continue; /* CRLF: counted at the LF */
            l++, c = 1;
        } else if ((ch & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

/* ------------------------------------------------------------------ */
/* The document: tokens and the tree built on them                    */
/* ------------------------------------------------------------------ */

enum jtok_type {
    JT_LBRACE,
    JT_RBRACE,
    JT_LBRACKET,
    JT_RBRACKET,
    JT_COLON,
    JT_COMMA,
    JT_STRING,
    JT_NUMBER,
    JT_TRUE,
    JT_FALSE,
    JT_NULL,
    JT_COMMENT,
};

/** One token: its type and the bytes [start, end) it covers. */
struct jtok {
    enum jtok_type type;
    size_t start, end;
};

enum jnode_type { JN_OBJECT, JN_ARRAY, JN_STRING, JN_NUMBER, JN_TRUE, JN_FALSE, JN_NULL };

/** A value in the tree; every link is an index, JNONE when absent. */
struct jnode {
    enum jnode_type type;
    size_t tok;       /**< the scalar's token, or a container's opening bracket */
    size_t close_tok; /**< a container's closing bracket; tok for scalars */
    size_t key_tok;   /**< the key string of an object member */
    size_t comma_tok; /**< the comma after this member or element */
    size_t parent, first, last, next;
    size_t count;     /**< members or elements of a container */
};

/** A parsed document; jdoc_release() frees it. */
struct jdoc {
    const char *s;
    size_t len;
    size_t bom;       /**< 3 when the bytes start with a UTF-8 byte order mark */
    struct jtok *tok;
    size_t ntok, tokcap;
    struct jnode *node;
    size_t nnode, nodecap;
    size_t root;
    int strict;       /**< no comments and no trailing commas */
    size_t err_off;   /**< where a syntax error was found */
    char err_msg[160];
};

static void jdoc_init(struct jdoc *d, const char *s, size_t len)
{
    memset(d, 0, sizeof *d);
    d->s = s ? s : "";
    d->len = s ? len : 0;
    d->root = JNONE;
    d->strict = 1;
}

static void jdoc_release(struct jdoc *d)
{
    free(d->tok);
    free(d->node);
    d->tok = NULL;
    d->node = NULL;
    d->ntok = d->tokcap = d->nnode = d->nodecap = 0;
}

__attribute__((format(printf, 3, 4)))
static enum cedit_status jsyntax(struct jdoc *d, size_t off, const char *fmt, ...)
{
    va_list ap;
    d->err_off = off;
    va_start(ap, fmt);
    vsnprintf(d->err_msg, sizeof d->err_msg, fmt, ap);
    va_end(ap);
    return CEDIT_MALFORMED;
}

static enum cedit_status jdoc_push_tok(struct jdoc *d, enum jtok_type t, size_t start, size_t end)
{
    if (d->ntok == d->tokcap) {
        size_t cap = d->tokcap ? d->tokcap * 2 : 256;
        if (cap > SIZE_MAX / sizeof *d->tok)
            return CEDIT_NOMEM;
        struct jtok *p = realloc(d->tok, cap * sizeof *p);
        if (!p)
            return CEDIT_NOMEM;
        d->tok = p;
        d->tokcap = cap;
    }
    d->tok[d->ntok++] = (struct jtok){ t, start, end };
    return CEDIT_OK;
}

/* Add a node under parent (JNONE: the root); returns its index or JNONE. */
static size_t jdoc_push_node(struct jdoc *d, enum jnode_type t, size_t tok, size_t parent,
                             size_t key_tok)
{
    if (d->nnode == d->nodecap) {
        size_t cap = d->nodecap ? d->nodecap * 2 : 128;
        if (cap > SIZE_MAX / sizeof *d->node)
            return JNONE;
        struct jnode *p = realloc(d->node, cap * sizeof *p);
        if (!p)
            return JNONE;
        d->node = p;
        d->nodecap = cap;
    }
    size_t i = d->nnode++;
    d->node[i] = (struct jnode){ .type = t, .tok = tok, .close_tok = tok, .key_tok = key_tok,
                                 .comma_tok = JNONE, .parent = parent, .first = JNONE,
                                 .last = JNONE, .next = JNONE, .count = 0 };
    if (parent == JNONE) {
        d->root = i;
    } else {
        struct jnode *p = &d->node[parent];
        if (p->last == JNONE)
            p->first = i;
        else
            d->node[p->last].next = i;
        p->last = i;
        p->count++;
    }
    return i;
}

/* ---- lexer ---- */

static enum cedit_status jlex_string(struct jdoc *d, size_t *pos)
{
    const char *s = d->s;
    size_t start = *pos, i = start + 1;
    for (;;) {
        if (i >= d->len)
            return jsyntax(d, start, "unterminated string");
        unsigned char c = (unsigned char)s[i];
        if (c == '"')
            break;
        if (c == '\n' || c == '\r')
            return jsyntax(d, start, "unterminated string");
        if (c < 0x20)
            return jsyntax(d, i, "control character 0x%02x in string", c);
        if (c == '\\') {
            if (i + 1 >= d->len)
                return jsyntax(d, start, "unterminated string");
            unsigned char e = (unsigned char)s[i + 1];
            if (e == 'u') {
                for (size_t k = 2; k < 6; k++)
                    if (i + k >= d->len || jhex((unsigned char)s[i + k]) < 0)
                        return jsyntax(d, i, "invalid \\u escape in string");
                i += 6;
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                e == 'r' || e == 't') {
                i += 2;
                continue;
            }
            if (e >= 0x20 && e < 0x7f)
                return jsyntax(d, i, "invalid escape '\\%c' in string", e);
            return jsyntax(d, i, "invalid escape in string");
        }
        i++;
    }
    *pos = i + 1;
    return CEDIT_OK;
}

static enum cedit_status jlex(struct jdoc *d)
{
    const char *s = d->s;
    size_t len = d->len, i = 0;
    enum cedit_status st;
    if (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3))
        d->bom = i = 3;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t start = i;
        enum jtok_type t;
        switch (c) {
        case ' ': case '\t': case '\n': case '\r':
            i++;
            continue;
        case '{': t = JT_LBRACE, i++; break;
        case '}': t = JT_RBRACE, i++; break;
        case '[': t = JT_LBRACKET, i++; break;
        case ']': t = JT_RBRACKET, i++; break;
        case ':': t = JT_COLON, i++; break;
        case ',': t = JT_COMMA, i++; break;
        case '"':
            if ((st = jlex_string(d, &i)))
                return st;
            t = JT_STRING;
            break;
        case '/':
            if (i + 1 < len && s[i + 1] == '/') {
                while (i < len && s[i] != '\n' && s[i] != '\r')
                    i++;
            } else if (i + 1 < len && s[i + 1] == '*') {
                const char *e = NULL;
                for (size_t k = i + 2; k + 1 < len; k++)
                    if (s[k] == '*' && s[k + 1] == '/') {
                        e = s + k;
                        break;
                    }
                if (!e)
                    return jsyntax(d, start, "unterminated /* comment");
                i = (size_t)(e - s) + 2;
            } else {
                return jsyntax(d, start, "unexpected character '/'");
            }
            t = JT_COMMENT;
            d->strict = 0;
            break;
        default:
            if (c == '-' && len - i >= 9 && !memcmp(s + i + 1, "Infinity", 8) &&
                (len - i == 9 || !(jalpha((unsigned char)s[i + 9]) ||
                                   jdigit((unsigned char)s[i + 9])))) {
                /* Python's json writes -Infinity (Coqui's saved configs) */
                i += 9;
                t = JT_NUMBER;
                d->strict = 0;
            } else if (c == '-' || jdigit(c)) {
                size_t n = jnumber_len(s + i, len - i);
                if (!n)
                    return jsyntax(d, start, "invalid number");
                i += n;
                if (i < len && (jalpha((unsigned char)s[i]) || jdigit((unsigned char)s[i]) ||
                                s[i] == '.' || s[i] == '_'))
                    return jsyntax(d, start, "invalid number");
                t = JT_NUMBER;
            } else if (jalpha(c)) {
                while (i < len && (jalpha((unsigned char)s[i]) || jdigit((unsigned char)s[i]) ||
                                   s[i] == '_'))
                    i++;
                size_t n = i - start;
                if (n == 4 && !memcmp(s + start, "true", 4))
                    t = JT_TRUE;
                else if (n == 5 && !memcmp(s + start, "false", 5))
                    t = JT_FALSE;
                else if (n == 4 && !memcmp(s + start, "null", 4))
                    t = JT_NULL;
                else if ((n == 8 && !memcmp(s + start, "Infinity", 8)) ||
                         (n == 3 && !memcmp(s + start, "NaN", 3))) {
                    /* Python's json writes these for float('inf') and
                     * float('nan'); they are numbers to Python's reader,
                     * and jansson cannot check such a file. */
                    t = JT_NUMBER;
                    d->strict = 0;
                } else
                    return jsyntax(d, start, "unexpected '%.*s'", n > 24 ? 24 : (int)n,
                                   s + start);
            } else if (c >= 0x20 && c < 0x7f) {
                return jsyntax(d, start, "unexpected character '%c'", c);
            } else {
                return jsyntax(d, start, "unexpected byte 0x%02x", c);
            }
        }
        if ((st = jdoc_push_tok(d, t, start, i)))
            return st;
    }
    return CEDIT_OK;
}

/* ---- parser ---- */

enum jstate {
    ST_VALUE,      /* a value must come (top level, or after ':') */
    ST_FIRST_KEY,  /* after '{' */
    ST_KEY,        /* after ',' in an object */
    ST_COLON,      /* after a key */
    ST_FIRST_ELEM, /* after '[' */
    ST_ELEM,       /* after ',' in an array */
    ST_AFTER,      /* after a member or element */
    ST_DONE,       /* after the top-level value */
};

static enum cedit_status jparse(struct jdoc *d)
{
    size_t cur = JNONE, key = JNONE;
    enum jstate st = ST_VALUE;
    for (size_t t = 0; t < d->ntok; t++) {
        const struct jtok *k = &d->tok[t];
        enum jtok_type y = k->type;
        if (y == JT_COMMENT)
            continue;
        switch (st) {
        case ST_FIRST_KEY:
        case ST_KEY:
            if (y == JT_STRING) {
                key = t;
                st = ST_COLON;
                continue;
            }
            if (y == JT_RBRACE) {
                if (st == ST_KEY)
                    d->strict = 0; /* a trailing comma */
                goto close;
            }
            return jsyntax(d, k->start, st == ST_FIRST_KEY ? "expected a string key or '}'"
                                                           : "expected a string key after ','");
        case ST_COLON:
            if (y != JT_COLON)
                return jsyntax(d, k->start, "expected ':' after key");
            st = ST_VALUE;
            continue;
        case ST_FIRST_ELEM:
        case ST_ELEM:
            if (y == JT_RBRACKET) {
                if (st == ST_ELEM)
                    d->strict = 0;
                goto close;
            }
            /* fall through */
        case ST_VALUE: {
            enum jnode_type nt;
            switch (y) {
            case JT_LBRACE: nt = JN_OBJECT; break;
            case JT_LBRACKET: nt = JN_ARRAY; break;
            case JT_STRING: nt = JN_STRING; break;
            case JT_NUMBER: nt = JN_NUMBER; break;
            case JT_TRUE: nt = JN_TRUE; break;
            case JT_FALSE: nt = JN_FALSE; break;
            case JT_NULL: nt = JN_NULL; break;
            default:
                return jsyntax(d, k->start, "expected a value");
            }
            size_t n = jdoc_push_node(d, nt, t, cur, key);
            if (n == JNONE)
                return CEDIT_NOMEM;
            key = JNONE;
            if (nt == JN_OBJECT || nt == JN_ARRAY) {
                cur = n;
                st = nt == JN_OBJECT ? ST_FIRST_KEY : ST_FIRST_ELEM;
            } else {
                st = cur == JNONE ? ST_DONE : ST_AFTER;
            }
            continue;
        }
        case ST_AFTER: {
            int obj = d->node[cur].type == JN_OBJECT;
            if (y == JT_COMMA) {
                d->node[d->node[cur].last].comma_tok = t;
                st = obj ? ST_KEY : ST_ELEM;
                continue;
            }
            if ((obj && y == JT_RBRACE) || (!obj && y == JT_RBRACKET))
                goto close;
            return jsyntax(d, k->start, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        case ST_DONE:
            return jsyntax(d, k->start, "unexpected text after the end of the document");
        }
    close:
        /* Only a matching bracket reaches here: the states above check it. */
        d->node[cur].close_tok = t;
        cur = d->node[cur].parent;
        st = cur == JNONE ? ST_DONE : ST_AFTER;
    }
    if (st == ST_DONE)
        return CEDIT_OK;
    if (cur == JNONE)
        return jsyntax(d, d->len, "the document holds no value");
    size_t line, col;
    const struct jnode *open = &d->node[cur];
    jpos(d->s, d->len, d->bom, d->tok[open->tok].start, &line, &col);
    return jsyntax(d, d->len, "unexpected end of input: the '%c' at line %zu, column %zu is not closed",
                   open->type == JN_OBJECT ? '{' : '[', line, col);
}

/* Lex and parse; on MALFORMED, d->err_off and d->err_msg say what and where. */
static enum cedit_status jdoc_parse(struct jdoc *d, const char *s, size_t len)
{
    jdoc_init(d, s, len);
    enum cedit_status st = jlex(d);
    return st ? st : jparse(d);
}

static void jdoc_report(const struct jdoc *d, const char *prefix, char *err, size_t errlen)
{
    size_t line, col;
    jpos(d->s, d->len, d->bom, d->err_off, &line, &col);
    errbuf_set(err, errlen, "%sline %zu, column %zu: %s", prefix, line, col, d->err_msg);
}

/* ---- strings ---- */

static void jutf8_put(char *out, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static unsigned jhex4(const char *p)
{
    return (unsigned)(jhex((unsigned char)p[0]) << 12 | jhex((unsigned char)p[1]) << 8 |
                      jhex((unsigned char)p[2]) << 4 | jhex((unsigned char)p[3]));
}

/*
 * Decode the string token raw[0..n) (quotes included, already checked by
 * the lexer) into out, which has room for n bytes: no escape decodes to
 * more bytes than it takes.  A lone surrogate decodes to U+FFFD.  Returns
 * the decoded length; out is NUL-terminated when it has room (n >= 2).
 */
static size_t jstr_decode(const char *raw, size_t n, char *out)
{
    size_t o = 0, i = 1, end = n - 1;
    while (i < end) {
        char c = raw[i];
        if (c != '\\') {
            out[o++] = c;
            i++;
            continue;
        }
        char e = raw[i + 1];
        i += 2;
        switch (e) {
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            unsigned cp = jhex4(raw + i);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= end && raw[i] == '\\' &&
                raw[i + 1] == 'u') {
                unsigned lo = jhex4(raw + i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000)
                cp = 0xFFFD;
            jutf8_put(out, &o, cp);
            break;
        }
        default: out[o++] = e; break; /* " \ / */
        }
    }
    out[o] = '\0';
    return o;
}

/* Decode a string token into a new malloc'd buffer; NULL when out of memory. */
static char *jtok_decode(const struct jdoc *d, size_t tok, size_t *outlen)
{
    const struct jtok *k = &d->tok[tok];
    size_t n = k->end - k->start;
    char *buf = malloc(n);
    if (!buf)
        return NULL;
    *outlen = jstr_decode(d->s + k->start, n, buf);
    return buf;
}

/* Whether string token tok decodes to want[0..wlen): 1, 0, or -1 (no memory). */
static int jtok_equals(const struct jdoc *d, size_t tok, const char *want, size_t wlen)
{
    const struct jtok *k = &d->tok[tok];
    const char *raw = d->s + k->start + 1;
    size_t rawlen = k->end - k->start - 2;
    if (!memchr(raw, '\\', rawlen))
        return rawlen == wlen && !memcmp(raw, want, wlen);
    size_t n;
    char *buf = jtok_decode(d, tok, &n);
    if (!buf)
        return -1;
    int eq = n == wlen && !memcmp(buf, want, wlen);
    free(buf);
    return eq;
}

/* ------------------------------------------------------------------ */
/* Key paths                                                          */
/* ------------------------------------------------------------------ */

/** A dotted key split into NUL-terminated components (all in buf). */
struct jpath {
    const char *key;
    char *buf;
    char **comp;
    size_t *off; /**< where each component starts in key */
    size_t n;
};

static void jpath_release(struct jpath *p)
{
    free(p->buf);
    free(p->comp);
    free(p->off);
    memset(p, 0, sizeof *p);
}

static enum cedit_status jpath_parse(struct jpath *p, const char *key, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->key = key;
    if (!key || !*key) {
        errbuf_set(err, errlen, "empty key");
        return CEDIT_BAD_KEY;
    }
    size_t len = strlen(key), n = 1;
    if (!jutf8_valid((const unsigned char *)key, len)) {
        errbuf_set(err, errlen, "key '%s' is not valid UTF-8", key);
        return CEDIT_BAD_KEY;
    }
    for (size_t i = 0; i < len; i++)
        n += key[i] == '.';
    p->buf = malloc(len + 1);
    p->comp = malloc(n * sizeof *p->comp);
    p->off = malloc(n * sizeof *p->off);
    if (!p->buf || !p->comp || !p->off) {
        jpath_release(p);
        return CEDIT_NOMEM;
    }
    memcpy(p->buf, key, len + 1);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (key[i] != '.' && key[i] != '\0')
            continue;
        if (i == start) {
            errbuf_set(err, errlen, "key '%s' has an empty component (check for a stray '.')", key);
            jpath_release(p);
            return CEDIT_BAD_KEY;
        }
        p->buf[i] = '\0';
        p->comp[p->n] = p->buf + start;
        p->off[p->n] = start;
        p->n++;
        start = i + 1;
    }
    return CEDIT_OK;
}

/* Length of key up to and including component i, for messages. */
static int jpath_prefix(const struct jpath *p, size_t i)
{
    size_t n = p->off[i] + strlen(p->comp[i]);
    return n > 200 ? 200 : (int)n;
}

/* A component that is a whole number, as an array index. */
static int jindex(const char *comp, size_t *idx)
{
    size_t v = 0;
    if (!*comp)
        return 0;
    for (const char *c = comp; *c; c++) {
        if (!jdigit((unsigned char)*c))
            return 0;
        if (v > (SIZE_MAX - 9) / 10)
            return 0;
        v = v * 10 + (size_t)(*c - '0');
    }
    *idx = v;
    return 1;
}

/** Where a key path led. */
struct jres {
    size_t node;    /**< the value at the key (CEDIT_OK) */
    size_t parent;  /**< the container holding, or that would hold, component `missing` */
    size_t missing; /**< the first component not found; p->n when all were */
};

static const char *jtype_name(enum jnode_type t)
{
    switch (t) {
    case JN_OBJECT: return "an object";
    case JN_ARRAY: return "a list";
    case JN_STRING: return "a string";
    case JN_NUMBER: return "a number";
    case JN_TRUE:
    case JN_FALSE: return "a boolean";
    case JN_NULL: return "null";
    }
    return "a value";
}

/*
 * Follow the path from the root.  Returns CEDIT_OK with r->node set,
 * CEDIT_NOT_FOUND with r->parent and r->missing saying where it stopped
 * (r->parent is JNONE when the stop was not at a container), or
 * CEDIT_AMBIGUOUS / CEDIT_NOMEM.  err says why on failure.
 */
static enum cedit_status jresolve(const struct jdoc *d, const struct jpath *p, struct jres *r,
                                  char *err, size_t errlen)
{
    size_t cur = d->root;
    r->node = r->parent = JNONE;
    r->missing = 0;
    for (size_t i = 0; i < p->n; i++) {
        const struct jnode *c = &d->node[cur];
        const char *comp = p->comp[i];
        size_t found = JNONE, dup = JNONE;
        r->missing = i;
        if (c->type == JN_OBJECT) {
            size_t clen = strlen(comp);
            for (size_t m = c->first; m != JNONE; m = d->node[m].next) {
                int eq = jtok_equals(d, d->node[m].key_tok, comp, clen);
                if (eq < 0)
                    return CEDIT_NOMEM;
                if (!eq)
                    continue;
                if (found == JNONE) {
                    found = m;
                } else {
                    dup = m;
                    break;
                }
            }
            if (dup != JNONE) {
                size_t l1, l2, col;
                jpos(d->s, d->len, d->bom, d->tok[d->node[found].key_tok].start, &l1, &col);
                jpos(d->s, d->len, d->bom, d->tok[d->node[dup].key_tok].start, &l2, &col);
                errbuf_set(err, errlen,
                     "key '%.*s' is ambiguous: it occurs more than once in one object (lines %zu and %zu)",
                     jpath_prefix(p, i), p->key, l1, l2);
                return CEDIT_AMBIGUOUS;
            }
            if (found == JNONE) {
                r->parent = cur;
                errbuf_set(err, errlen, "key '%.*s' not found", jpath_prefix(p, i), p->key);
                return CEDIT_NOT_FOUND;
            }
        } else if (c->type == JN_ARRAY) {
            size_t idx;
            if (!jindex(comp, &idx)) {
                if (i)
                    errbuf_set(err, errlen, "key '%s' not found: '%.*s' is a list and '%s' is not an index",
                         p->key, jpath_prefix(p, i - 1), p->key, comp);
                else
                    errbuf_set(err, errlen, "key '%s' not found: the document is a list and '%s' is not an index",
                         p->key, comp);
                return CEDIT_NOT_FOUND;
            }
            if (idx >= c->count) {
                errbuf_set(err, errlen, "key '%.*s' not found: the list has %zu item%s",
                     jpath_prefix(p, i), p->key, c->count, c->count == 1 ? "" : "s");
                return CEDIT_NOT_FOUND;
            }
            found = c->first;
            while (idx--)
                found = d->node[found].next;
        } else {
            if (i)
                errbuf_set(err, errlen, "key '%s' not found: '%.*s' is %s, not an object or list",
                     p->key, jpath_prefix(p, i - 1), p->key, jtype_name(c->type));
            else
                errbuf_set(err, errlen, "key '%s' not found: the document is %s, not an object",
                     p->key, jtype_name(c->type));
            return CEDIT_NOT_FOUND;
        }
        cur = found;
    }
    r->node = cur;
    r->missing = p->n;
    r->parent = d->node[cur].parent;
    return CEDIT_OK;
}

/* ------------------------------------------------------------------ */
/* Spelling the new value                                             */
/* ------------------------------------------------------------------ */

/** The new value: the bytes to write and what a reader must find there. */
struct jval {
    char *text;          /**< bytes written into the document */
    size_t len;
    enum jtok_type type; /**< the token those bytes form */
    char *content;       /**< a string's decoded content, else the text */
    size_t clen;
};

static void jval_release(struct jval *v)
{
    free(v->text);
    free(v->content);
    memset(v, 0, sizeof *v);
}

/* JSON-quote s[0..n): the minimal escapes, everything else as is. */
static char *jquote(const char *s, size_t n, size_t *outlen)
{
    if (n > (SIZE_MAX - 3) / 6)
        return NULL;
    char *q = malloc(n * 6 + 3), *o = q;
    if (!q)
        return NULL;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            memcpy(o, esc, 2);
            o += 2;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    *o = '\0';
    *outlen = (size_t)(o - q);
    return q;
}

static char *jdup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

enum jkind { JK_STRING, JK_NUMBER, JK_BOOL, JK_NULL };

static enum jkind jclassify(const char *value)
{
    size_t n = strlen(value);
    if (jcaseeq(value, "true") || jcaseeq(value, "false"))
        return JK_BOOL;
    if (n && jnumber_len(value, n) == n)
        return JK_NUMBER;
    if (!strcmp(value, "null"))
        return JK_NULL;
    return JK_STRING;
}

/*
 * Spell value for the place it goes.  old_str/old_len is the decoded old
 * value when it was a string (NULL otherwise, and for an insertion).
 */
static enum cedit_status jval_make(struct jval *v, const char *value, const char *old_str,
                                   size_t old_len)
{
    memset(v, 0, sizeof *v);
    enum jkind k = jclassify(value);
    char word[6];
    const char *w = value;
    int quote = 0;
    v->type = JT_NUMBER;
    switch (k) {
    case JK_BOOL: {
        int t = jlower((unsigned char)value[0]) == 't';
        strcpy(word, t ? "true" : "false");
        v->type = t ? JT_TRUE : JT_FALSE;
        if (old_str && old_len < 6 && (jcaseeq(old_str, "true") || jcaseeq(old_str, "false")) &&
            strlen(old_str) == old_len) {
            /* A quoted "True" keeps its case pattern: "False". */
            int upper0 = old_str[0] >= 'A' && old_str[0] <= 'Z';
            int upper1 = old_str[1] >= 'A' && old_str[1] <= 'Z';
            for (size_t i = 0; word[i]; i++)
                if (upper1 || (upper0 && i == 0))
                    word[i] = (char)(word[i] - 'a' + 'A');
            quote = 1;
        }
        w = word;
        break;
    }
    case JK_NUMBER:
        quote = old_str && jnumeric_looking(old_str, old_len);
        break;
    case JK_NULL:
        v->type = JT_NULL;
        quote = old_str && old_len == 4 && !memcmp(old_str, "null", 4);
        break;
    case JK_STRING:
        quote = 1;
        break;
    }
    size_t wlen = strlen(w);
    if (quote) {
        v->type = JT_STRING;
        v->text = jquote(w, wlen, &v->len);
    } else {
        v->text = jdup(w, wlen);
        v->len = wlen;
    }
    v->content = jdup(w, wlen);
    v->clen = wlen;
    if (!v->text || !v->content) {
        jval_release(v);
        return CEDIT_NOMEM;
    }
    return CEDIT_OK;
}

/* ------------------------------------------------------------------ */
/* Edits                                                              */
/* ------------------------------------------------------------------ */

/** Replace del bytes at pos (in the original) with text. */
struct jsplice {
    size_t pos, del;
    char *text;
    size_t len;
};

#define JMAX_SPLICE 2
#define JMAX_NEWTOK 6

/**
 * An edit: its splices, in order, the token types they insert, and how
 * many old tokens they remove (the bytes removed must be exactly those).
 */
struct jchange {
    struct jsplice sp[JMAX_SPLICE];
    size_t nsp;
    enum jtok_type newtok[JMAX_NEWTOK];
    size_t nnewtok;
    size_t nremoved;
};

static void jchange_release(struct jchange *e)
{
    for (size_t i = 0; i < e->nsp; i++)
        free(e->sp[i].text);
    memset(e, 0, sizeof *e);
}

/* Add a splice whose text is the concatenation of up to 6 pieces. */
static enum cedit_status jchange_add(struct jchange *e, size_t pos, size_t del, const char *const *piece,
                                   const size_t *plen, size_t npiece)
{
    size_t n = 0;
    for (size_t i = 0; i < npiece; i++)
        n += plen[i];
    char *t = malloc(n + 1), *o = t;
    if (!t)
        return CEDIT_NOMEM;
    for (size_t i = 0; i < npiece; i++) {
        memcpy(o, piece[i], plen[i]);
        o += plen[i];
    }
    *o = '\0';
    e->sp[e->nsp++] = (struct jsplice){ pos, del, t, n };
    return CEDIT_OK;
}

static void jchange_expect(struct jchange *e, enum jtok_type t)
{
    e->newtok[e->nnewtok++] = t;
}

static char *jchange_apply(const struct jdoc *d, const struct jchange *e, size_t *outlen)
{
    size_t n = d->len;
    for (size_t i = 0; i < e->nsp; i++)
        n = n - e->sp[i].del + e->sp[i].len;
    char *out = malloc(n ? n : 1), *o = out;
    if (!out)
        return NULL;
    size_t at = 0;
    for (size_t i = 0; i < e->nsp; i++) {
        const struct jsplice *s = &e->sp[i];
        memcpy(o, d->s + at, s->pos - at);
        o += s->pos - at;
        memcpy(o, s->text, s->len);
        o += s->len;
        at = s->pos + s->del;
    }
    memcpy(o, d->s + at, d->len - at);
    *outlen = n;
    return out;
}

static size_t jtok_end(const struct jdoc *d, size_t n)
{
    return d->tok[d->node[n].close_tok].end;
}

/* Whether only blanks (space, tab) lie in s[a..b). */
static int jblank(const char *s, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return 0;
    return 1;
}

/* Start of the line holding byte off. */
static size_t jline_start(const struct jdoc *d, size_t off)
{
    while (off > d->bom && d->s[off - 1] != '\n' && d->s[off - 1] != '\r')
        off--;
    return off;
}

/*
 * From q, pass blanks and block comments that end on the same line.  When
 * the line ends there (or a // comment runs to its end), return the offset
 * of the line break (the '\r' of a CRLF) with *eol set; otherwise return
 * the end of the last thing passed over (q itself, or a comment) with
 * *eol clear.
 */
static size_t jline_rest(const struct jdoc *d, size_t q, int *eol)
{
    const char *s = d->s;
    size_t i = q, last = q, len = d->len;
    while (i < len) {
        if (s[i] == ' ' || s[i] == '\t') {
            i++;
        } else if (s[i] == '\n' || s[i] == '\r') {
            *eol = 1;
            return i;
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
            while (i < len && s[i] != '\n' && s[i] != '\r')
                i++;
            *eol = 1;
            return i;
        } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
            size_t k = i + 2;
            while (k + 1 < len && !(s[k] == '*' && s[k + 1] == '/'))
                k++;
            if (memchr(s + i, '\n', k - i) || memchr(s + i, '\r', k - i))
                break;
            i = last = k + 2;
        } else {
            break;
        }
    }
    *eol = 0;
    return last;
}

/* The line break to write: the one at off if there is one, else the file's first. */
static const char *jeol(const struct jdoc *d, size_t off, int at)
{
    const char *s = d->s;
    if (!at) {
        const char *nl = memchr(s, '\n', d->len);
        if (nl)
            return nl > s && nl[-1] == '\r' ? "\r\n" : "\n";
        return memchr(s, '\r', d->len) ? "\r" : "\n";
    }
    if (off < d->len && s[off] == '\r')
        return off + 1 < d->len && s[off + 1] == '\n' ? "\r\n" : "\r";
    return "\n";
}

/*
 * The bytes between a member's key and its value, when they are only
 * blanks around the colon ("key" : v, "key":v); ": " otherwise, e.g. when
 * a comment or a line break sits there.
 */
static void jkey_sep(const struct jdoc *d, size_t member, const char **sep, size_t *seplen)
{
    const struct jnode *m = &d->node[member];
    size_t a = d->tok[m->key_tok].end, b = d->tok[m->tok].start;
    const char *colon = memchr(d->s + a, ':', b - a);
    *sep = ": ";
    *seplen = 2;
    if (colon && jblank(d->s, a, (size_t)(colon - d->s)) &&
        jblank(d->s, (size_t)(colon - d->s) + 1, b)) {
        *sep = d->s + a;
        *seplen = b - a;
    }
}

/* Plan the insertion of "key": value as the last member of object obj. */
static enum cedit_status jplan_insert(const struct jdoc *d, size_t obj, const char *key,
                                      const struct jval *v, struct jchange *e)
{
    const struct jnode *o = &d->node[obj];
    size_t klen;
    char *qkey = jquote(key, strlen(key), &klen);
    if (!qkey)
        return CEDIT_NOMEM;
    enum cedit_status st;

    if (o->count == 0) {
        /* {} -> {"key": value}, right after the brace. */
        const char *pc[] = { qkey, ": ", v->text };
        size_t pl[] = { klen, 2, v->len };
        st = jchange_add(e, d->tok[o->tok].end, 0, pc, pl, 3);
        jchange_expect(e, JT_STRING);
        jchange_expect(e, JT_COLON);
        jchange_expect(e, v->type);
        free(qkey);
        return st;
    }

    size_t last = o->last;
    const struct jnode *m = &d->node[last];
    size_t kstart = d->tok[m->key_tok].start;
    size_t lstart = jline_start(d, kstart);
    size_t vend = jtok_end(d, last);
    int trailing = m->comma_tok != JNONE;
    size_t after = trailing ? d->tok[m->comma_tok].end : vend;
    const char *ksep;
    size_t kseplen;
    jkey_sep(d, last, &ksep, &kseplen);

    if (jblank(d->s, lstart, kstart)) {
        /* Block style: a new line with the last member's indentation. */
        if (!trailing) {
            const char *pc[] = { "," };
            size_t pl[] = { 1 };
            if ((st = jchange_add(e, vend, 0, pc, pl, 1))) {
                free(qkey);
                return st;
            }
            jchange_expect(e, JT_COMMA);
        }
        int eol;
        size_t at = jline_rest(d, after, &eol);
        const char *nl = jeol(d, at, eol);
        const char *pc[] = { nl, d->s + lstart, qkey, ksep, v->text, "," };
        size_t pl[] = { strlen(nl), kstart - lstart, klen, kseplen, v->len, trailing ? 1u : 0u };
        st = jchange_add(e, at, 0, pc, pl, 6);
    } else {
        /*
         * Inline style (the last member shares its line with what comes
         * before it): ", key: value" after it, with the blanks the previous
         * separator used.
         */
        const char *blank = " ";
        size_t blen = 1;
        for (size_t p = o->first; p != JNONE && d->node[p].next != JNONE; p = d->node[p].next) {
            if (d->node[p].next != last)
                continue;
            size_t a = d->tok[d->node[p].comma_tok].end;
            if (jblank(d->s, a, kstart)) {
                blank = d->s + a;
                blen = kstart - a;
            }
        }
        if (!trailing) {
            jchange_expect(e, JT_COMMA);
            const char *pc[] = { ",", blank, qkey, ksep, v->text };
            size_t pl[] = { 1, blen, klen, kseplen, v->len };
            st = jchange_add(e, vend, 0, pc, pl, 5);
        } else {
            const char *pc[] = { blank, qkey, ksep, v->text, "," };
            size_t pl[] = { blen, klen, kseplen, v->len, 1 };
            st = jchange_add(e, after, 0, pc, pl, 5);
        }
    }
    jchange_expect(e, JT_STRING);
    jchange_expect(e, JT_COLON);
    jchange_expect(e, v->type);
    if (trailing)
        jchange_expect(e, JT_COMMA);
    free(qkey);
    return st;
}

/* ------------------------------------------------------------------ */
/* Verification                                                       */
/* ------------------------------------------------------------------ */

/*
 * Which region a token [a, b) falls in: 1 inside one of the n regions,
 * 0 outside all, -1 across a boundary.
 */
static int jin_regions(size_t a, size_t b, const size_t *rs, const size_t *re, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (a >= rs[i] && b <= re[i] && rs[i] < re[i])
            return 1;
        if (a < re[i] && b > rs[i])
            return -1;
    }
    return 0;
}

/* Whether s[a..b) is only whitespace. */
static int jspace(const char *s, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return 0;
    return 1;
}

/*
 * Every token outside the splices is unchanged, in order; the bytes a
 * splice removed were exactly whole tokens (e->nremoved of them, with
 * nothing between them); the bytes it inserted are exactly the expected
 * tokens with only whitespace around them.  Bytes outside the splices are
 * copied, so with this nothing else can have changed.
 */
static int jverify_tokens(const struct jdoc *d0, const struct jdoc *d1, const struct jchange *e)
{
    size_t os[JMAX_SPLICE], oe[JMAX_SPLICE], ns[JMAX_SPLICE], ne[JMAX_SPLICE];
    size_t shift = 0, removed = 0, removed_bytes = 0, deleted = 0;
    for (size_t i = 0; i < e->nsp; i++) {
        const struct jsplice *s = &e->sp[i];
        os[i] = s->pos;
        oe[i] = s->pos + s->del;
        ns[i] = s->pos + shift;
        ne[i] = ns[i] + s->len;
        shift += s->len - s->del; /* modular arithmetic: shrinking works too */
        deleted += s->del;
    }
    size_t i = 0, j = 0, got = 0;
    for (;;) {
        while (i < d0->ntok) {
            int r = jin_regions(d0->tok[i].start, d0->tok[i].end, os, oe, e->nsp);
            if (r < 0)
                return 0;
            if (!r)
                break;
            removed++;
            removed_bytes += d0->tok[i].end - d0->tok[i].start;
            i++;
        }
        while (j < d1->ntok) {
            int r = jin_regions(d1->tok[j].start, d1->tok[j].end, ns, ne, e->nsp);
            if (r < 0)
                return 0;
            if (!r)
                break;
            if (got == e->nnewtok || d1->tok[j].type != e->newtok[got])
                return 0;
            got++;
            j++;
        }
        if (i == d0->ntok || j == d1->ntok)
            break;
        const struct jtok *a = &d0->tok[i], *b = &d1->tok[j];
        if (a->type != b->type || a->end - a->start != b->end - b->start ||
            memcmp(d0->s + a->start, d1->s + b->start, a->end - a->start))
            return 0;
        i++, j++;
    }
    if (i != d0->ntok || j != d1->ntok || got != e->nnewtok)
        return 0;
    if (removed != e->nremoved || removed_bytes != deleted)
        return 0;
    /* Between and around the inserted tokens, only whitespace. */
    for (size_t k = 0; k < e->nsp; k++) {
        size_t at = ns[k];
        for (size_t t = 0; t < d1->ntok; t++) {
            const struct jtok *tk = &d1->tok[t];
            if (tk->start < ns[k] || tk->end > ne[k])
                continue;
            if (!jspace(d1->s, at, tk->start))
                return 0;
            at = tk->end;
        }
        if (!jspace(d1->s, at, ne[k]))
            return 0;
    }
    return 1;
}

static json_t *jj_child(json_t *c, const char *comp)
{
    size_t idx;
    if (json_is_object(c))
        return json_object_get(c, comp);
    if (json_is_array(c) && jindex(comp, &idx))
        return json_array_get(c, idx);
    return NULL;
}

/*
 * The jansson cross-check for strict JSON: the new document loads, the
 * key holds the new value, and the old document with that value put in
 * equals the new one.  Skipped (CEDIT_OK) when jansson refuses the
 * original, which it does for some documents this editor accepts:
 * integers beyond 64 bits, invalid UTF-8, lone surrogate escapes.
 */
static enum cedit_status jverify_jansson(const struct jdoc *d0, const char *out, size_t outlen,
                                         size_t bom, const struct jpath *p, const struct jval *v,
                                         char *err, size_t errlen)
{
    const size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL;
    json_error_t je;
    json_t *old = json_loadb(d0->s + d0->bom, d0->len - d0->bom, flags, &je);
    if (!old)
        return CEDIT_OK;
    enum cedit_status st = CEDIT_VERIFY;
    json_t *want = NULL, *nw = json_loadb(out + bom, outlen - bom, flags, &je);
    if (!nw) {
        errbuf_set(err, errlen, "the edited document is not valid JSON (jansson: %s)", je.text);
        json_decref(old);
        return CEDIT_VERIFY;
    }
    if (v->type == JT_STRING)
        want = json_stringn(v->content, v->clen);
    else
        want = json_loadb(v->text, v->len, JSON_DECODE_ANY, &je);
    json_t *op = old, *np = nw;
    for (size_t i = 0; i + 1 < p->n && op && np; i++) {
        op = jj_child(op, p->comp[i]);
        np = jj_child(np, p->comp[i]);
    }
    json_t *got = np ? jj_child(np, p->comp[p->n - 1]) : NULL;
    size_t idx;
    if (!want || !got || !op || !json_equal(got, want)) {
        errbuf_set(err, errlen, "jansson does not read the new value at key '%s'", p->key);
        goto done;
    }
    int put;
    if (json_is_object(op))
        put = json_object_set(op, p->comp[p->n - 1], got);
    else
        put = json_is_array(op) && jindex(p->comp[p->n - 1], &idx) ? json_array_set(op, idx, got)
                                                                     : -1;
    if (put) {
        errbuf_set(err, errlen, "jansson cannot put the new value at key '%s' of the original", p->key);
        goto done;
    }
    if (!json_equal(old, nw)) {
        errbuf_set(err, errlen, "jansson finds values other than '%s' changed", p->key);
        goto done;
    }
    st = CEDIT_OK;
done:
    json_decref(want);
    json_decref(nw);
    json_decref(old);
    return st;
}

/* Re-read the edited bytes and check them (see the top of this file). */
static enum cedit_status jverify(const struct jdoc *d0, const char *out, size_t outlen,
                                 const struct jchange *e, const struct jpath *p,
                                 const struct jval *v, char *err, size_t errlen)
{
    struct jdoc d1;
    struct jres r;
    enum cedit_status st = jdoc_parse(&d1, out, outlen);
    if (st == CEDIT_NOMEM)
        goto done;
    if (st) {
        jdoc_report(&d1, "the edited document does not parse: ", err, errlen);
        st = CEDIT_VERIFY;
        goto done;
    }
    st = CEDIT_VERIFY;
    if (!jverify_tokens(d0, &d1, e)) {
        errbuf_set(err, errlen, "the edit of '%s' would change other parts of the document", p->key);
        goto done;
    }
    enum cedit_status rs = jresolve(&d1, p, &r, err, errlen);
    if (rs == CEDIT_NOMEM) {
        st = rs;
        goto done;
    }
    if (rs) {
        errbuf_set(err, errlen, "the edited document has no single value at key '%s'", p->key);
        goto done;
    }
    size_t tok = d1.node[r.node].tok;
    const struct jtok *k = &d1.tok[tok];
    int same;
    if (k->type != v->type)
        same = 0;
    else if (k->type == JT_STRING)
        same = jtok_equals(&d1, tok, v->content, v->clen);
    else
        same = k->end - k->start == v->len && !memcmp(out + k->start, v->text, v->len);
    if (same < 0) {
        st = CEDIT_NOMEM;
        goto done;
    }
    if (!same) {
        errbuf_set(err, errlen, "the edited document does not hold the new value at key '%s'", p->key);
        goto done;
    }
    st = d0->strict ? jverify_jansson(d0, out, outlen, d1.bom, p, v, err, errlen) : CEDIT_OK;
done:
    jdoc_release(&d1);
    return st;
}

/* ------------------------------------------------------------------ */
/* The API                                                            */
/* ------------------------------------------------------------------ */

enum cedit_status jedit_get(const char *doc, size_t len, const char *key, char **value,
                            char *err, size_t errlen)
{
    struct jdoc d;
    struct jpath p;
    struct jres r;
    enum cedit_status st;
    if (value)
        *value = NULL;
    errbuf_set(err, errlen, "%s", "");
    if (!value) {
        errbuf_set(err, errlen, "no place for the value");
        return CEDIT_BAD_KEY;
    }
    if ((st = jpath_parse(&p, key, err, errlen)))
        return st;
    st = jdoc_parse(&d, doc, len);
    if (st == CEDIT_MALFORMED)
        jdoc_report(&d, "", err, errlen);
    if (st || (st = jresolve(&d, &p, &r, err, errlen)))
        goto done;
    const struct jnode *n = &d.node[r.node];
    const struct jtok *k = &d.tok[n->tok];
    if (n->type == JN_OBJECT || n->type == JN_ARRAY) {
        errbuf_set(err, errlen, "key '%s' is %s, not a single value", key, jtype_name(n->type));
        st = CEDIT_NOT_SCALAR;
    } else if (n->type == JN_STRING) {
        size_t vlen;
        *value = jtok_decode(&d, n->tok, &vlen);
        st = *value ? CEDIT_OK : CEDIT_NOMEM;
    } else {
        *value = jdup(d.s + k->start, k->end - k->start);
        st = *value ? CEDIT_OK : CEDIT_NOMEM;
    }
done:
    if (st == CEDIT_NOMEM)
        errbuf_set(err, errlen, "out of memory");
    jdoc_release(&d);
    jpath_release(&p);
    return st;
}

enum cedit_status jedit_set(const char *doc, size_t len, const char *key, const char *value,
                            char **out, size_t *outlen, char *err, size_t errlen)
{
    struct jdoc d;
    struct jpath p;
    struct jres r;
    struct jval v = { 0 };
    struct jchange e = { 0 };
    char *res = NULL, *old = NULL;
    size_t reslen = 0;
    enum cedit_status st;

    if (out)
        *out = NULL;
    if (outlen)
        *outlen = 0;
    errbuf_set(err, errlen, "%s", "");
    if (!out || !outlen || !value) {
        errbuf_set(err, errlen, "no value, or no place for the result");
        return CEDIT_BAD_KEY;
    }
    if ((st = jpath_parse(&p, key, err, errlen)))
        return st;
    if (!jutf8_valid((const unsigned char *)value, strlen(value))) {
        /* Nothing else would catch it in JSON-with-comments files. */
        errbuf_set(err, errlen, "the value for '%s' is not valid UTF-8", key);
        jpath_release(&p);
        return CEDIT_VERIFY;
    }
    st = jdoc_parse(&d, doc, len);
    if (st == CEDIT_MALFORMED)
        jdoc_report(&d, "", err, errlen);
    if (st)
        goto done;

    st = jresolve(&d, &p, &r, err, errlen);
    if (st == CEDIT_NOT_FOUND && r.missing + 1 == p.n && r.parent != JNONE &&
        d.node[r.parent].type == JN_OBJECT) {
        /* Only the last key is missing and its object exists: insert. */
        if ((st = jval_make(&v, value, NULL, 0)) ||
            (st = jplan_insert(&d, r.parent, p.comp[p.n - 1], &v, &e)))
            goto done;
    } else if (st == CEDIT_NOT_FOUND) {
        if (r.missing + 1 < p.n && r.parent != JNONE) {
            errbuf_set(err, errlen, "cannot set '%s': its parent '%.*s' does not exist", key,
                 jpath_prefix(&p, p.n - 2), key);
        }
        goto done;
    } else if (st) {
        goto done;
    } else {
        const struct jnode *n = &d.node[r.node];
        const struct jtok *k = &d.tok[n->tok];
        size_t oldlen = 0;
        if (n->type == JN_OBJECT || n->type == JN_ARRAY) {
            errbuf_set(err, errlen, "key '%s' is %s, not a single value", key, jtype_name(n->type));
            st = CEDIT_NOT_SCALAR;
            goto done;
        }
        if (n->type == JN_STRING && !(old = jtok_decode(&d, n->tok, &oldlen))) {
            st = CEDIT_NOMEM;
            goto done;
        }
        if ((st = jval_make(&v, value, old, oldlen)))
            goto done;
        const char *pc[] = { v.text };
        size_t pl[] = { v.len };
        if ((st = jchange_add(&e, k->start, k->end - k->start, pc, pl, 1)))
            goto done;
        jchange_expect(&e, v.type);
        e.nremoved = 1;
    }

    if (!(res = jchange_apply(&d, &e, &reslen))) {
        st = CEDIT_NOMEM;
        goto done;
    }
    if ((st = jverify(&d, res, reslen, &e, &p, &v, err, errlen)))
        goto done;
    *out = res;
    *outlen = reslen;
    res = NULL;
    errbuf_set(err, errlen, "%s", "");
done:
    if (st == CEDIT_NOMEM)
        errbuf_set(err, errlen, "out of memory");
    free(res);
    free(old);
    jchange_release(&e);
    jval_release(&v);
    jdoc_release(&d);
    jpath_release(&p);
    return st;
}
