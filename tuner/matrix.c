/*
 * matrix: several machines' results for one command as one table (see
 * matrix.h).  The union of cells is collected first, sorted, then every
 * file becomes one row; Markdown is written through a memory stream,
 * JSON built with jansson.
 */
#include "matrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const json_t *mx_get(const json_t *o, const char *k)
{
    return json_is_object(o) ? json_object_get(o, k) : NULL;
}

static long long mx_int(const json_t *o, const char *k)
{
    const json_t *v = mx_get(o, k);
    if (json_is_integer(v))
        return (long long)json_integer_value(v);
    if (json_is_real(v) && isfinite(json_real_value(v)) && fabs(json_real_value(v)) < 9e15)
        return (long long)llround(json_real_value(v));
    return -1;
}

static double mx_num(const json_t *o, const char *k)
{
    const json_t *v = mx_get(o, k);
    return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : NAN;
}

#define DASH "\xe2\x80\x94"

struct mx_cell {
    long long ga;
    int ckpt;
};

static int mx_cell_cmp(const void *a, const void *b)
{
    const struct mx_cell *x = a, *y = b;
    if (x->ckpt != y->ckpt)
        return x->ckpt - y->ckpt;
    return x->ga < y->ga ? -1 : x->ga > y->ga;
}

static int mx_cell_read(const json_t *o, struct mx_cell *c)
{
    const json_t *ck = mx_get(o, "checkpointing");
    c->ga = mx_int(o, "grad_accum");
    if (c->ga < 0 || !json_is_boolean(ck))
        return -1;
    c->ckpt = json_is_true(ck);
    return 0;
}

/* The file's max_fit entry for cell c, or NULL. */
static const json_t *mx_cell_find(const json_t *doc, const struct mx_cell *c)
{
    const json_t *cells = mx_get(doc, "max_fit");
    for (size_t i = 0; i < json_array_size(cells); i++) {
        struct mx_cell k;
        if (mx_cell_read(json_array_get(cells, i), &k) == 0 && k.ga == c->ga && k.ckpt == c->ckpt)
            return json_array_get(cells, i);
    }
    return NULL;
}

/* The sorted union of the documents' cells; *n entries, NULL on ENOMEM. */
static struct mx_cell *mx_cells(json_t *const *docs, size_t ndocs, size_t *n)
{
    size_t cap = 0;
    for (size_t i = 0; i < ndocs; i++)
        cap += json_array_size(mx_get(docs[i], "max_fit"));
    struct mx_cell *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!v)
        return NULL;
    *n = 0;
    for (size_t i = 0; i < ndocs; i++) {
        const json_t *cells = mx_get(docs[i], "max_fit");
        for (size_t k = 0; k < json_array_size(cells); k++) {
            struct mx_cell c;
            if (mx_cell_read(json_array_get(cells, k), &c) < 0)
                continue;
            int seen = 0;
            for (size_t j = 0; j < *n && !seen; j++)
                seen = v[j].ga == c.ga && v[j].ckpt == c.ckpt;
            if (!seen)
                v[(*n)++] = c;
        }
    }
    qsort(v, *n, sizeof *v, mx_cell_cmp);
    return v;
}

static void mx_bytes(char *buf, size_t n, double v)
{
    if (!(v > 0))
        snprintf(buf, n, DASH);
    else if (v >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.1f GiB", v / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.1f MiB", v / (1024.0 * 1024));
}

/* "NVIDIA H100 80GB HBM3, 79.6 GiB", "2 × NVIDIA L4, 22.5 GiB", "no GPU (host)". */
static char *mx_machine(const json_t *doc)
{
    const json_t *host = mx_get(doc, "host"), *gpus = mx_get(host, "gpus");
    const char *hostname = json_string_value(mx_get(host, "hostname"));
    char *s = NULL;
    if (json_array_size(gpus)) {
        const json_t *g = json_array_get(gpus, 0);
        const char *name = json_string_value(mx_get(g, "name"));
        char mem[48] = "", count[32] = "";
        double total = mx_num(g, "memory_total_bytes");
        if (total > 0) {
            mx_bytes(mem + 2, sizeof mem - 2, total);
            memcpy(mem, ", ", 2);
        }
        if (json_array_size(gpus) > 1)
            snprintf(count, sizeof count, "%zu \xc3\x97 ", json_array_size(gpus));
        if (asprintf(&s, "%s%s%s", count, name && *name ? name : "unknown GPU", mem) < 0)
            s = NULL;
    } else if (asprintf(&s, "%s%s%s%s", json_is_array(gpus) ? "no GPU" : "GPU unknown",
                        hostname ? " (" : "", hostname ? hostname : "", hostname ? ")" : "") < 0) {
        s = NULL;
    }
    return s;
}

/* Markdown text for a table cell: nothing can end the cell or start markup. */
static void mx_md(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            fputc(' ', f);
        else if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '&')
            fputs("&amp;", f);
        else if (strchr("\\`*_[]|~", c))
            fprintf(f, "\\%c", c);
        else
            fputc(c, f);
    }
}

static void mx_md_cell(FILE *f, const json_t *cell)
{
    long long mb = mx_int(cell, "micro_batch"), tried = mx_int(cell, "largest_tried_fit"),
              fail = mx_int(cell, "smallest_fail");
    if (!cell)
        fputs(DASH, f);
    else if (json_is_string(mx_get(cell, "bounded_by")) && tried >= 0)
        fprintf(f, "\xe2\x89\xa5 %lld", tried);
    else if (mb >= 0)
        fprintf(f, "%lld", mb);
    else if (fail >= 0)
        fputs("none", f);
    else
        fputs(DASH, f);
}

static void mx_md_command(FILE *f, const json_t *cmd)
{
    fputs("`", f);
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        const char *w = json_string_value(json_array_get(cmd, i));
        w = w ? w : "";
        fputs(i ? " " : "", f);
        int quote = !*w || strpbrk(w, " \t'\"") != NULL;
        fputs(quote ? "'" : "", f);
        for (const char *p = w; *p; p++)
            fputc((unsigned char)*p < 0x20 || *p == '`' ? ' ' : *p, f);
        fputs(quote ? "'" : "", f);
    }
    if (!json_array_size(cmd))
        fputs("(unknown)", f);
    fputs("`", f);
}

static int mx_same_command(json_t *const *docs, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        const json_t *a = mx_get(docs[0], "command"), *b = mx_get(docs[i], "command");
        if (!(a && b && json_equal((json_t *)a, (json_t *)b)))
            return 0;
    }
    return 1;
}

static char *mx_name(const char *const *names, size_t i, char *buf, size_t n)
{
    if (names && names[i])
        return (char *)names[i];
    snprintf(buf, n, "results %zu", i + 1);
    return buf;
}

static int mx_markdown(json_t *const *docs, const char *const *names, size_t n, const struct mx_cell *cells,
                       size_t nc, char **out, size_t *len)
{
    size_t size = 0;
    FILE *f = open_memstream(out, &size);
    if (!f)
        return -1;
    fputs("# autobatch hardware matrix\n\n| machine | results | chosen | samples/s | peak memory |", f);
    for (size_t k = 0; k < nc; k++)
        fprintf(f, " accum %lld, ckpt %s |", cells[k].ga, cells[k].ckpt ? "on" : "off");
    fputs("\n|:---|:---|:---|---:|---:|", f);
    for (size_t k = 0; k < nc; k++)
        fputs("---:|", f);
    fputs("\n", f);
    for (size_t i = 0; i < n; i++) {
        const json_t *doc = docs[i], *best = mx_get(doc, "best");
        char nb[32], mem[48];
        char *machine = mx_machine(doc);
        fputs("| ", f);
        mx_md(f, machine ? machine : "?");
        free(machine);
        fputs(" | ", f);
        mx_md(f, mx_name(names, i, nb, sizeof nb));
        fputs(" | ", f);
        if (json_is_object(best)) {
            long long mb = mx_int(best, "micro_batch"), ga = mx_int(best, "grad_accum");
            const json_t *ck = mx_get(best, "checkpointing");
            double sps = mx_num(best, "samples_per_s");
            const char *unit = json_string_value(mx_get(mx_get(doc, "space"), "unit"));
            mx_bytes(mem, sizeof mem, mx_num(best, "peak_mem_bytes"));
            if (mb >= 0)
                fprintf(f, "%lld", mb);
            else
                fputs("?", f);
            if (ga >= 0)
                fprintf(f, " \xc3\x97 %lld", ga);
            if (json_is_boolean(ck))
                fprintf(f, ", ckpt %s", json_is_true(ck) ? "on" : "off");
            if (isnan(sps))
                fprintf(f, " | " DASH " | %s |", mem);
            else
                fprintf(f, " | %.1f%s%s | %s |", sps, unit && strcmp(unit, "samples") ? " " : "",
                        unit && strcmp(unit, "samples") ? unit : "", mem);
        } else {
            long long e = mx_int(mx_get(doc, "summary"), "exit");
            if (e >= 0)
                fprintf(f, "none (exit %lld) | " DASH " | " DASH " |", e);
            else
                fputs("none | " DASH " | " DASH " |", f);
        }
        for (size_t k = 0; k < nc; k++) {
            fputs(" ", f);
            mx_md_cell(f, mx_cell_find(doc, &cells[k]));
            fputs(" |", f);
        }
        fputs("\n", f);
    }
    fputs("\nEach cell column is (gradient-accumulation steps, activation checkpointing); its entries are "
          "the largest micro-batch that fitted, \xe2\x89\xa5 N when the top of the range fitted, none when "
          "nothing fitted, " DASH " when not searched.\n", f);
    if (mx_same_command(docs, n)) {
        fputs("\nCommand: ", f);
        mx_md_command(f, mx_get(docs[0], "command"));
        fputs("\n", f);
    } else {
        fputs("\n**The files are for different commands:**\n\n", f);
        for (size_t i = 0; i < n; i++) {
            char nb[32];
            fputs("- ", f);
            mx_md(f, mx_name(names, i, nb, sizeof nb));
            fputs(": ", f);
            mx_md_command(f, mx_get(docs[i], "command"));
            fputs("\n", f);
        }
    }
    if (ferror(f)) {
        fclose(f);
        free(*out);
        *out = NULL;
        return -1;
    }
    if (fclose(f) != 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    if (len)
        *len = size;
    return 0;
}

static json_t *mx_copy(const json_t *v)
{
    return v ? json_deep_copy(v) : json_null();
}

static int mx_json(json_t *const *docs, const char *const *names, size_t n, const struct mx_cell *cells,
                   size_t nc, char **out, size_t *len)
{
    json_t *jc = json_array(), *rows = json_array();
    json_t *root = json_pack("{s:s, s:b, s:o, s:o}", "schema", "autobatch.matrix/1", "same_command",
                             mx_same_command(docs, n), "cells", jc, "rows", rows);
    if (!root)
        return -1;
    int bad = 0;
    for (size_t k = 0; k < nc; k++)
        bad |= json_array_append_new(jc, json_pack("{s:I, s:b}", "grad_accum", (json_int_t)cells[k].ga,
                                                   "checkpointing", cells[k].ckpt));
    for (size_t i = 0; i < n; i++) {
        const json_t *doc = docs[i], *host = mx_get(doc, "host"), *best = mx_get(doc, "best"),
                     *gpus = mx_get(host, "gpus");
        char nb[32];
        char *machine = mx_machine(doc);
        json_t *gpu = json_null(), *fits = json_array();
        if (json_array_size(gpus)) {
            const json_t *g = json_array_get(gpus, 0);
            gpu = json_pack("{s:o, s:o, s:I}", "name", mx_copy(mx_get(g, "name")), "memory_total_bytes",
                            mx_copy(mx_get(g, "memory_total_bytes")), "count", (json_int_t)json_array_size(gpus));
        }
        for (size_t k = 0; fits && k < nc; k++)
            bad |= json_array_append_new(fits, mx_copy(mx_cell_find(doc, &cells[k])));
        json_t *name = json_string(mx_name(names, i, nb, sizeof nb)); /* NULL when not UTF-8 */
        json_t *row = json_pack("{s:o, s:s?, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                                "name", name ? name : json_null(),
                                "machine", machine, "hostname", mx_copy(mx_get(host, "hostname")),
                                "gpu", gpu ? gpu : json_null(), "command", mx_copy(mx_get(doc, "command")),
                                "best", json_is_object(best) ? json_deep_copy(best) : json_null(),
                                "samples_per_s", mx_copy(mx_get(best, "samples_per_s")),
                                "peak_mem_bytes", mx_copy(mx_get(best, "peak_mem_bytes")),
                                "exit", mx_copy(mx_get(mx_get(doc, "summary"), "exit")),
                                "max_fit", fits ? fits : json_null());
        free(machine);
        bad |= json_array_append_new(rows, row);
    }
    char *s = bad ? NULL : json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (!s)
        return -1;
    size_t n0 = strlen(s);
    char *t = realloc(s, n0 + 2);
    if (!t) {
        free(s);
        return -1;
    }
    t[n0] = '\n';
    t[n0 + 1] = '\0';
    *out = t;
    if (len)
        *len = n0 + 1;
    return 0;
}

int matrix_format_parse(const char *s, enum matrix_format *f)
{
    if (!s)
        return -1;
    if (!strcmp(s, "markdown") || !strcmp(s, "md"))
        *f = MATRIX_MARKDOWN;
    else if (!strcmp(s, "json"))
        *f = MATRIX_JSON;
    else
        return -1;
    return 0;
}

int matrix_render(json_t *const *results, const char *const *names, size_t n, enum matrix_format f,
                  char **out, size_t *len, char *err, size_t errlen)
{
    *out = NULL;
    if (!n) {
        snprintf(err, errlen, "no results files to merge");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *schema = json_string_value(mx_get(results[i], "schema"));
        if (!json_is_object(results[i]) || (schema && strncmp(schema, "autobatch.results/", 18))) {
            char nb[32];
            snprintf(err, errlen, "'%s' is not an autobatch results file", mx_name(names, i, nb, sizeof nb));
            return -1;
        }
    }
    size_t nc = 0;
    struct mx_cell *cells = mx_cells(results, n, &nc);
    int rc = -1;
    if (cells)
        rc = f == MATRIX_JSON ? mx_json(results, names, n, cells, nc, out, len)
                              : mx_markdown(results, names, n, cells, nc, out, len);
    free(cells);
    if (rc < 0)
        snprintf(err, errlen, "cannot render the matrix: out of memory");
    return rc;
}
