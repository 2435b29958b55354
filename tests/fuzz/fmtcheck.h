/* SPDX-License-Identifier: MIT */
/*
 * fmtcheck: small, strict checkers for what the report renderers write,
 * used by the fuzz targets (tests/fuzz/fuzz_report.c) and the unit tests.
 * Each returns NULL when the text is fine, or a static description of
 * the first problem with its byte offset in *at.
 *
 *   fc_xml()       well-formed XML 1.0: one root element, balanced tags,
 *                  quoted and unique attributes, entities only
 *                  &amp; &lt; &gt; &quot; &apos; and character references
 *                  to characters XML allows, no raw '<' or '&' in text or
 *                  attributes, valid UTF-8 with no character XML 1.0
 *                  forbids (C0 controls but tab, LF, CR; U+FFFE, U+FFFF;
 *                  surrogates);
 *   fc_html()      the same rules for the HTML report, with its doctype
 *                  and <meta> (a void element) allowed, every element
 *                  name in the renderer's own small set, and no event
 *                  handler (on...), href or src attribute anywhere: any
 *                  tag that text from a results file could smuggle in
 *                  fails one of these;
 *   fc_markdown()  GitHub tables keep their shape: every table is a header
 *                  row, a delimiter row and body rows with the same number
 *                  of unescaped '|' (a backslash escapes the next byte),
 *                  each row ending in one; a line starting with '|' is
 *                  part of such a table; no control character but '\n';
 *                  and every other non-empty line starts with one of the
 *                  caller's prefixes, so a line break smuggled in from the
 *                  input cannot start a line of its own.
 *
 * Header-only (static functions) so that both the fuzz targets, built by
 * hand with clang, and the cmocka tests (tests/unit/test_report.c) can
 * include it.
 */
#ifndef AB_FMTCHECK_H
#define AB_FMTCHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The checkers are not what a fuzz target explores: keep libFuzzer's
 * coverage feedback (and its cost per byte checked) out of them. */
#if defined(__clang__)
#define FC_FN static __attribute__((unused, no_sanitize("coverage")))
#else
#define FC_FN static __attribute__((unused))
#endif

/* ------------------------------------------------------------------ */
/* Characters                                                          */

/* Decode one UTF-8 character at s[i..n): its length, or 0 when malformed. */
FC_FN size_t fc_utf8(const unsigned char *s, size_t i, size_t n, uint32_t *cp)
{
    unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3
               : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (!len || i + len > n)
        return 0;
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i + k] & 0x3Fu);
    }
    static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* XML 1.0's Char production. */
FC_FN int fc_xml_char(uint32_t c)
{
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
           (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

/* ------------------------------------------------------------------ */
/* XML and HTML                                                        */

FC_FN int fc_name_start(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

FC_FN int fc_name_char(unsigned char c)
{
    return fc_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

FC_FN int fc_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* An entity or character reference at s[i] == '&': its length, or 0. */
FC_FN size_t fc_entity(const char *s, size_t i, size_t n)
{
    static const char *const named[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };
    for (size_t k = 0; k < 5; k++) {
        size_t l = strlen(named[k]);
        if (i + l <= n && !memcmp(s + i, named[k], l))
            return l;
    }
    if (i + 2 >= n || s[i + 1] != '#')
        return 0;
    size_t j = i + 2;
    int hex = s[j] == 'x';
    j += (size_t)hex;
    uint32_t v = 0;
    size_t digits = 0;
    for (; j < n && s[j] != ';'; j++, digits++) {
        char c = s[j];
        int d = c >= '0' && c <= '9' ? c - '0'
              : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
              : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0 || digits > 7)
            return 0;
        v = v * (hex ? 16u : 10u) + (uint32_t)d;
    }
    if (j >= n || !digits || !fc_xml_char(v))
        return 0;
    return j + 1 - i;
}

FC_FN int fc_in(const char *name, size_t len, const char *const *set)
{
    for (size_t k = 0; set[k]; k++)
        if (strlen(set[k]) == len && !memcmp(set[k], name, len))
            return 1;
    return 0;
}

/* The elements the HTML report is made of (svg included). */
static const char *const fc_html_elements[] = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "div", "b", "code",
    "table", "tr", "th", "td", "p", "ul", "li", "span", "pre", "svg", "g", "rect", "line", "text",
    "circle", "polyline", NULL,
};

FC_FN int fc_ci_prefix(const char *s, size_t len, const char *p)
{
    size_t k = strlen(p);
    if (len < k)
        return 0;
    for (size_t i = 0; i < k; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != p[i])
            return 0;
    }
    return 1;
}

/* The shared parser; html: the HTML report's rules (see the top). */
FC_FN const char *fc_markup(const char *s, size_t n, int html, size_t *at)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = fc_utf8(u, i, n, &cp);
        *at = i;
        if (!l)
            return "malformed UTF-8";
        if (!fc_xml_char(cp))
            return "a character XML 1.0 forbids";
        i += l;
    }

    size_t cap = 64, depth = 0, i = 0;
    size_t *open = malloc(cap * 2 * sizeof *open); /* name offset, name length */
    const char *why = NULL;
    int root_done = 0, root_seen = 0;
    if (!open) {
        *at = 0;
        return "out of memory";
    }
#define FC_FAIL(msg)                                                                               \
    do {                                                                                           \
        why = (msg);                                                                               \
        *at = i;                                                                                   \
        goto out;                                                                                  \
    } while (0)

    if (!html && n >= 5 && !memcmp(s, "<?xml", 5)) {
        const char *e = memmem(s, n, "?>", 2);
        if (!e)
            FC_FAIL("unterminated xml declaration");
        i = (size_t)(e - s) + 2;
    }
    if (html) {
        static const char doctype[] = "<!DOCTYPE html>";
        if (n < sizeof doctype - 1 || memcmp(s, doctype, sizeof doctype - 1))
            FC_FAIL("no <!DOCTYPE html> at the start");
        i = sizeof doctype - 1;
    }
    while (i < n) {
        unsigned char c = u[i];
        if (c == '<' && i + 1 < n && s[i + 1] == '/') {
            size_t ns = i + 2, ne = ns;
            while (ne < n && fc_name_char(u[ne]))
                ne++;
            size_t j = ne;
            while (j < n && fc_space(u[j]))
                j++;
            if (ne == ns || j >= n || s[j] != '>')
                FC_FAIL("malformed end tag");
            if (!depth)
                FC_FAIL("end tag without a start tag");
            depth--;
            if (open[2 * depth + 1] != ne - ns || memcmp(s + open[2 * depth], s + ns, ne - ns))
                FC_FAIL("end tag does not match its start tag");
            if (!depth)
                root_done = 1;
            i = j + 1;
            continue;
        }
        if (c == '<' && i + 3 < n && !memcmp(s + i, "<!--", 4)) {
            const char *e = NULL;
            for (size_t k = i + 4; k + 2 < n && !e; k++)
                if (!memcmp(s + k, "--", 2))
                    e = s + k;
            if (!e || e[2] != '>')
                FC_FAIL("malformed comment");
            i = (size_t)(e - s) + 3;
            continue;
        }
        if (c == '<') {
            size_t ns = i + 1, ne = ns;
            if (ns >= n || !fc_name_start(u[ns]))
                FC_FAIL("raw '<' that starts no tag");
            while (ne < n && fc_name_char(u[ne]))
                ne++;
            if (root_done && !html)
                FC_FAIL("a second root element");
            if (html && !fc_in(s + ns, ne - ns, fc_html_elements))
                FC_FAIL("an element the html report never writes");
            size_t j = ne, attrs[32][2], nattr = 0;
            int self_close = 0;
            for (;;) {
                size_t sp = j;
                while (j < n && fc_space(u[j]))
                    j++;
                if (j >= n)
                    FC_FAIL("unterminated start tag");
                if (s[j] == '>') {
                    j++;
                    break;
                }
                if (s[j] == '/' && j + 1 < n && s[j + 1] == '>') {
                    self_close = 1;
                    j += 2;
                    break;
                }
                if (j == sp || !fc_name_start(u[j]))
                    FC_FAIL("malformed attribute");
                size_t as = j;
                while (j < n && fc_name_char(u[j]))
                    j++;
                size_t al = j - as;
                for (size_t k = 0; k < nattr; k++)
                    if (attrs[k][1] == al && !memcmp(s + attrs[k][0], s + as, al))
                        FC_FAIL("duplicate attribute");
                if (nattr == 32)
                    FC_FAIL("too many attributes");
                attrs[nattr][0] = as;
                attrs[nattr++][1] = al;
                if (html && (fc_ci_prefix(s + as, al, "on") || fc_ci_prefix(s + as, al, "href") ||
                             fc_ci_prefix(s + as, al, "src") || fc_ci_prefix(s + as, al, "xlink")))
                    FC_FAIL("an event handler or link attribute");
                while (j < n && fc_space(u[j]))
                    j++;
                if (j >= n || s[j] != '=')
                    FC_FAIL("attribute without a value");
                j++;
                while (j < n && fc_space(u[j]))
                    j++;
                if (j >= n || (s[j] != '"' && s[j] != '\''))
                    FC_FAIL("unquoted attribute value");
                char q = s[j++];
                while (j < n && s[j] != q) {
                    if (s[j] == '<') {
                        i = j;
                        FC_FAIL("raw '<' in an attribute value");
                    }
                    if (s[j] == '&') {
                        size_t el = fc_entity(s, j, n);
                        if (!el) {
                            i = j;
                            FC_FAIL("raw '&' in an attribute value");
                        }
                        j += el;
                        continue;
                    }
                    j++;
                }
                if (j >= n)
                    FC_FAIL("unterminated attribute value");
                j++;
            }
            int is_void = html && ne - ns == 4 && !memcmp(s + ns, "meta", 4);
            if (!self_close && !is_void) {
                if (depth == cap) {
                    size_t *p = realloc(open, cap * 4 * sizeof *p);
                    if (!p)
                        FC_FAIL("out of memory");
                    open = p;
                    cap *= 2;
                }
                open[2 * depth] = ns;
                open[2 * depth + 1] = ne - ns;
                depth++;
            } else if (!depth) {
                root_done = 1;
            }
            root_seen = 1;
            i = j;
            continue;
        }
        if (c == '&') {
            size_t el = fc_entity(s, i, n);
            if (!el)
                FC_FAIL("raw '&' in text");
            if (!depth && !html)
                FC_FAIL("text outside the root element");
            i += el;
            continue;
        }
        if (c == ']' && i + 2 < n && !memcmp(s + i, "]]>", 3))
            FC_FAIL("']]>' in text");
        if (!depth && !fc_space(c))
            FC_FAIL("text outside the root element");
        i++;
    }
    if (depth)
        FC_FAIL("unclosed element");
    if (!root_seen)
        FC_FAIL("no root element");
out:
#undef FC_FAIL
    free(open);
    return why;
}

FC_FN const char *fc_xml(const char *s, size_t n, size_t *at)
{
    return fc_markup(s, n, 0, at);
}

FC_FN const char *fc_html(const char *s, size_t n, size_t *at)
{
    return fc_markup(s, n, 1, at);
}

/* Occurrences of needle in s[0..n), ASCII case ignored. */
FC_FN size_t fc_count_ci(const char *s, size_t n, const char *needle)
{
    size_t k = strlen(needle), c = 0;
    for (size_t i = 0; i + k <= n; i++)
        c += (size_t)fc_ci_prefix(s + i, n - i, needle);
    return c;
}

/* ------------------------------------------------------------------ */
/* Markdown                                                            */

/* Cells of a table line: its unescaped '|', or 0 when it does not end in one. */
FC_FN size_t fc_pipes(const char *s, size_t n)
{
    size_t pipes = 0;
    int last_pipe = 0;
    for (size_t i = 0; i < n; i++) {
        last_pipe = 0;
        if (s[i] == '\\') {
            i++;
            continue;
        }
        if (s[i] == '|') {
            pipes++;
            last_pipe = 1;
        }
    }
    return last_pipe ? pipes : 0;
}

FC_FN int fc_delimiter_row(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr("|:-", s[i]))
            return 0;
    return n > 0 && s[0] == '|';
}

/* prefixes: NULL-terminated; a non-table, non-empty line must start with one. */
FC_FN const char *fc_markdown(const char *s, size_t n, const char *const *prefixes, size_t *at)
{
    size_t cols = 0; /* the current table's '|' count; 0: not in a table */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n') || c == 0x7f) {
            *at = i;
            return "a control character";
        }
    }
    for (size_t ls = 0; ls < n;) {
        const char *nl = memchr(s + ls, '\n', n - ls);
        size_t le = nl ? (size_t)(nl - s) : n, len = le - ls;
        const char *line = s + ls;
        *at = ls;
        if (len && line[0] == '|') {
            size_t p = fc_pipes(line, len);
            if (!p)
                return "a table row that does not end with '|'";
            if (!cols) {
                /* A header: the next line must be its delimiter row. */
                size_t ns = le + 1;
                const char *nl2 = ns < n ? memchr(s + ns, '\n', n - ns) : NULL;
                size_t ne = nl2 ? (size_t)(nl2 - s) : n;
                if (ns >= n || !fc_delimiter_row(s + ns, ne - ns) || fc_pipes(s + ns, ne - ns) != p)
                    return "a line starting with '|' outside a table";
                cols = p;
            } else if (p != cols) {
                return "a table row with a different number of cells";
            }
        } else {
            cols = 0;
            int ok = len == 0;
            for (size_t k = 0; !ok && prefixes[k]; k++)
                ok = len >= strlen(prefixes[k]) && !memcmp(line, prefixes[k], strlen(prefixes[k]));
            if (!ok)
                return "a line that the renderer does not start";
        }
        ls = le + 1;
    }
    return NULL;
}

#endif
