/* SPDX-License-Identifier: MIT */
/*
 * matrix: several machines' results for one command as one table (see
 * matrix.h).  The union of cells is collected first, sorted, then every
 * file becomes one row; Markdown is written through a memory stream,
 * JSON built with jansson.
 */
#include "output/matrix.h"

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

/*
 * The batch unit, as the reports take it (report.c): only a plain word
 * from the file, since it is written next to a number in a table cell;
 * anything else (table pipes, line breaks, markup) becomes "units".
 */
static const char *mx_unit(const json_t *doc)
{
    const char *u = json_string_value(mx_get(mx_get(doc, "space"), "unit"));
    if (!u || !*u)
        return "samples";
    size_t n = strlen(u);
    if (n > 32 || strspn(u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != n)
        return "units";
    return u;
}

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

/* A file's max_fit entry: its cell and its place in the file. */
struct mx_entry {
    struct mx_cell c;
    size_t idx;
};

static int mx_entry_cmp(const void *a, const void *b)
{
    const struct mx_entry *x = a, *y = b;
    int r = mx_cell_cmp(&x->c, &y->c);
    return r ? r : x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * For each of the nc (sorted) cells, the file's first max_fit entry for
 * it, or NULL, into row[0..nc).  The entries are sorted once and walked
 * beside the cells, so a row costs O(m log m + nc) for m entries, not
 * m * nc.  Returns 0, or -1 on ENOMEM.
 */
static int mx_row(const json_t *doc, const struct mx_cell *cells, size_t nc, const json_t **row)
{
    const json_t *fits = mx_get(doc, "max_fit");
    size_t m = json_array_size(fits), ne = 0;
    struct mx_entry *e = malloc((m ? m : 1) * sizeof *e);
    if (!e)
        return -1;
    for (size_t i = 0; i < m; i++)
        if (mx_cell_read(json_array_get(fits, i), &e[ne].c) == 0)
            e[ne++].idx = i;
    qsort(e, ne, sizeof *e, mx_entry_cmp);
    size_t j = 0;
    for (size_t k = 0; k < nc; k++) {
        while (j < ne && mx_cell_cmp(&e[j].c, &cells[k]) < 0)
            j++;
        row[k] = j < ne && !mx_cell_cmp(&e[j].c, &cells[k]) ? json_array_get(fits, e[j].idx) : NULL;
    }
    free(e);
    return 0;
}

/*
 * The sorted union of the documents' cells, at most MATRIX_MAX_CELLS of
 * them (the first in that order; *left_out says how many more there
 * were); *n entries, NULL on ENOMEM.  Sorting all of them and dropping
 * repeats keeps this O(N log N) for N entries in all the files.
 */
static struct mx_cell *mx_cells(json_t *const *docs, size_t ndocs, size_t *n, size_t *left_out)
{
    size_t cap = 0;
    for (size_t i = 0; i < ndocs; i++)
        cap += json_array_size(mx_get(docs[i], "max_fit"));
    struct mx_cell *v = malloc((cap ? cap : 1) * sizeof *v);
    if (!v)
        return NULL;
    size_t all = 0;
    for (size_t i = 0; i < ndocs; i++) {
        const json_t *cells = mx_get(docs[i], "max_fit");
        for (size_t k = 0; k < json_array_size(cells); k++)
            if (mx_cell_read(json_array_get(cells, k), &v[all]) == 0)
                all++;
    }
    qsort(v, all, sizeof *v, mx_cell_cmp);
    *n = 0;
    for (size_t i = 0; i < all; i++)
        if (!*n || mx_cell_cmp(&v[*n - 1], &v[i]))
            v[(*n)++] = v[i];
    *left_out = *n > MATRIX_MAX_CELLS ? *n - MATRIX_MAX_CELLS : 0;
    *n -= *left_out;
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
    const char *target = json_string_value(mx_get(mx_get(doc, "summary"), "slurm_target"));
    char *s = NULL;
    if (target) {
        /* job arrays from a login node: the GPUs are the target's */
        if (asprintf(&s, "Slurm target %s", target) < 0)
            s = NULL;
    } else if (json_array_size(gpus)) {
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
            fputc((unsigned char)*p < 0x20 || *p == 0x7f || *p == '`' ? ' ' : *p, f);
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
                       size_t nc, size_t left_out, char **out, size_t *len)
{
    size_t size = 0;
    const json_t **row = malloc((nc ? nc : 1) * sizeof *row);
    FILE *f = row ? open_memstream(out, &size) : NULL;
    if (!f) {
        free(row);
        return -1;
    }
    int bad = 0;
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
            const char *unit = mx_unit(doc);
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
                fprintf(f, " | %.1f%s%s | %s |", sps, strcmp(unit, "samples") ? " " : "",
                        strcmp(unit, "samples") ? unit : "", mem);
        } else {
            long long e = mx_int(mx_get(doc, "summary"), "exit");
            const char *pending = json_string_value(mx_get(mx_get(doc, "summary"), "slurm_pending"));
            if (pending) {
                fputs("PENDING (", f);
                mx_md(f, pending);
                fputs(") | " DASH " | " DASH " |", f);
            } else if (e >= 0)
                fprintf(f, "none (exit %lld) | " DASH " | " DASH " |", e);
            else
                fputs("none | " DASH " | " DASH " |", f);
        }
        bad |= mx_row(doc, cells, nc, row);
        for (size_t k = 0; k < nc && !bad; k++) {
            fputs(" ", f);
            mx_md_cell(f, row[k]);
            fputs(" |", f);
        }
        fputs("\n", f);
    }
    fputs("\nEach cell column is (gradient-accumulation steps, activation checkpointing); its entries are "
          "the largest micro-batch that fitted, \xe2\x89\xa5 N when the top of the range fitted, none when "
          "nothing fitted, " DASH " when not searched.\n", f);
    if (left_out)
        fprintf(f, "\nOnly the first %d cells are shown; the files search %zu more.\n", MATRIX_MAX_CELLS,
                left_out);
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
    free(row);
    if (ferror(f) || bad) {
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
                   size_t nc, size_t left_out, char **out, size_t *len)
{
    json_t *jc = json_array(), *rows = json_array();
    json_t *root = json_pack("{s:s, s:b, s:o, s:I, s:o}", "schema", "autobatch.matrix/1", "same_command",
                             mx_same_command(docs, n), "cells", jc, "cells_left_out",
                             (json_int_t)left_out, "rows", rows);
    const json_t **found = malloc((nc ? nc : 1) * sizeof *found);
    if (!root || !found) {
        json_decref(root);
        free(found);
        return -1;
    }
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
        bad |= mx_row(doc, cells, nc, found);
        for (size_t k = 0; fits && !bad && k < nc; k++)
            bad |= json_array_append_new(fits, mx_copy(found[k]));
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
        json_object_set_new(row, "slurm_target",
                            mx_copy(mx_get(mx_get(doc, "summary"), "slurm_target")));
        json_object_set_new(row, "slurm_pending",
                            mx_copy(mx_get(mx_get(doc, "summary"), "slurm_pending")));
        free(machine);
        bad |= json_array_append_new(rows, row);
    }
    free(found);
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
            /* The name on one line: a control character in it shows as \xNN. */
            char nb[32], shown[256];
            const unsigned char *nm = (const unsigned char *)mx_name(names, i, nb, sizeof nb);
            size_t o = 0;
            for (; *nm && o + 5 < sizeof shown; nm++)
                o += (size_t)snprintf(shown + o, sizeof shown - o, *nm < 0x20 || *nm == 0x7f ?
                                      "\\x%02x" : "%c", *nm);
            shown[o] = '\0';
            snprintf(err, errlen, "'%s' is not an autobatch results file", shown);
            return -1;
        }
    }
    size_t nc = 0, left_out = 0;
    struct mx_cell *cells = mx_cells(results, n, &nc, &left_out);
    int rc = -1;
    if (cells)
        rc = f == MATRIX_JSON ? mx_json(results, names, n, cells, nc, left_out, out, len)
                              : mx_markdown(results, names, n, cells, nc, left_out, out, len);
    free(cells);
    if (rc < 0)
        snprintf(err, errlen, "cannot render the matrix: out of memory");
    return rc;
}
