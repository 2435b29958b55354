/* SPDX-License-Identifier: MIT */
/*
 * udiff: Myers' diff on lines and the unified format around it (see
 * udiff.h).
 */
#include "util/udiff.h"
#include "util/sbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct line {
    const char *p;
    size_t len;   /* without the '\n' */
    int nl;       /* ended by '\n' */
};

static size_t udiff_split(const char *s, size_t n, struct line **out)
{
    size_t count = 0, i = 0;
    for (size_t k = 0; k < n; k++)
        count += s[k] == '\n';
    count += n && s[n - 1] != '\n';
    struct line *v = malloc((count ? count : 1) * sizeof *v);
    if (!v)
        return (size_t)-1;
    size_t start = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '\n') {
            v[i++] = (struct line){ s + start, k - start, 1 };
            start = k + 1;
        }
    }
    if (start < n)
        v[i++] = (struct line){ s + start, n - start, 0 };
    *out = v;
    return count;
}

static int udiff_eq(const struct line *a, const struct line *b)
{
    return a->len == b->len && a->nl == b->nl && !memcmp(a->p, b->p, a->len);
}

/* Edit script: for each line of a, kept (1) or deleted (0); same for b
 * (kept or inserted).  Myers' greedy forward search with the trace kept
 * for backtracking. */
static int udiff_myers(const struct line *a, long n, const struct line *b, long m,
                       char *keep_a, char *keep_b)
{
    long max = n + m, off = max + 1;
    long *v = calloc((size_t)(2 * max + 3), sizeof *v);
    long **trace = calloc((size_t)(max + 1), sizeof *trace);
    if (!v || !trace) {
        free(v);
        free(trace);
        return -1;
    }
    long d, found = -1;
    for (d = 0; d <= max && found < 0; d++) {
        trace[d] = malloc((size_t)(2 * max + 3) * sizeof **trace);
        if (!trace[d])
            break;
        for (long k = -d; k <= d; k += 2) {
            long x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                         ? v[off + k + 1] : v[off + k - 1] + 1;
            long y = x - k;
            while (x < n && y < m && udiff_eq(&a[x], &b[y]))
                x++, y++;
            v[off + k] = x;
            if (x >= n && y >= m) {
                found = d;
                break;
            }
        }
        memcpy(trace[d], v, (size_t)(2 * max + 3) * sizeof *v);
    }
    int rc = found < 0 ? -1 : 0;
    if (!rc) {
        memset(keep_a, 0, (size_t)n);
        memset(keep_b, 0, (size_t)m);
        long x = n, y = m;
        for (d = found; d > 0; d--) {
            long *pv = trace[d - 1], k = x - y;
            long pk = (k == -d || (k != d && pv[off + k - 1] < pv[off + k + 1])) ? k + 1 : k - 1;
            long px = pv[off + pk], py = px - pk;
            while (x > px && y > py)
                keep_a[--x] = 1, keep_b[--y] = 1;
            x = px;
            y = py;
        }
        while (x > 0 && y > 0)
            keep_a[--x] = 1, keep_b[--y] = 1;
    }
    for (long i = 0; i <= max; i++)
        free(trace[i]);
    free(trace);
    free(v);
    return rc;
}

static void sb_line(struct sbuf *s, char mark, const struct line *l)
{
    sb_putc(s, mark);
    sb_put(s, l->p, l->len);
    sb_putc(s, '\n');
    if (!l->nl)
        sb_put(s, "\\ No newline at end of file\n", 28);
}

#define CONTEXT 3

static void udiff_range(char *buf, size_t n, size_t first, size_t count)
{
    if (count == 1)
        snprintf(buf, n, "%zu", first + 1);
    else
        snprintf(buf, n, "%zu,%zu", count ? first + 1 : first, count);
}

int udiff(const char *a, size_t alen, const char *b, size_t blen, const char *label_a,
          const char *label_b, char **out)
{
    struct line *la = NULL, *lb = NULL;
    size_t n = udiff_split(a, alen, &la), m = udiff_split(b, blen, &lb);
    char *ka = malloc(n + 1), *kb = malloc(m + 1);
    struct sbuf s = SBUF_INIT;
    int rc = -1;
    if (n == (size_t)-1 || m == (size_t)-1 || !ka || !kb ||
        udiff_myers(la, (long)n, lb, (long)m, ka, kb))
        goto done;
    size_t i = 0, j = 0;
    int header = 0;
    while (i < n || j < m) {
        if (i < n && j < m && ka[i] && kb[j]) {
            i++, j++;
            continue;
        }
        /* A change starts at (i, j): grow the hunk while changes are
         * within 2*CONTEXT kept lines of each other. */
        size_t hi = i > CONTEXT ? i - CONTEXT : 0, hj = j - (i - hi);
        size_t ei = i, ej = j;
        for (;;) {
            while ((ei < n && !ka[ei]) || (ej < m && !kb[ej])) {
                if (ei < n && !ka[ei])
                    ei++;
                else
                    ej++;
            }
            size_t run = 0;
            while (ei + run < n && ej + run < m && ka[ei + run] && kb[ej + run] &&
                   run <= 2 * CONTEXT)
                run++;
            if (ei + run >= n && ej + run >= m) {
                size_t tail = run < CONTEXT ? run : CONTEXT;
                ei += tail;
                ej += tail;
                break;
            }
            if (run > 2 * CONTEXT) {
                ei += CONTEXT;
                ej += CONTEXT;
                break;
            }
            ei += run;
            ej += run;
        }
        if (!header) {
            char h[1024];
            int k = snprintf(h, sizeof h, "--- %s\n+++ %s\n", label_a, label_b);
            sb_put(&s, h, (size_t)k);
            header = 1;
        }
        /* diff -u writes "start,count", or just "start" when count is 1;
         * an empty side names the line before it. */
        char h[128], ra[48], rb[48];
        udiff_range(ra, sizeof ra, hi, ei - hi);
        udiff_range(rb, sizeof rb, hj, ej - hj);
        int k = snprintf(h, sizeof h, "@@ -%s +%s @@\n", ra, rb);
        sb_put(&s, h, (size_t)k);
        size_t x = hi, y = hj;
        while (x < ei || y < ej) {
            if (x < ei && y < ej && ka[x] && kb[y]) {
                sb_line(&s, ' ', &la[x]);
                x++, y++;
            } else if (x < ei && !ka[x]) {
                sb_line(&s, '-', &la[x]);
                x++;
            } else {
                sb_line(&s, '+', &lb[y]);
                y++;
            }
        }
        i = ei;
        j = ej;
    }
    if ((*out = sb_take(&s)) != NULL)
        rc = 0;
done:
    sb_release(&s);
    free(la);
    free(lb);
    free(ka);
    free(kb);
    return rc;
}
