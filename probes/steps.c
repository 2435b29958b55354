/* SPDX-License-Identifier: MIT */
/*
 * steps: recognise training progress in a trial's output (see steps.h).
 *
 * The throughput meter and the hang detector only need to know that a step
 * has completed, and how fast steps come.  Trainers say so in four ways:
 * a progress bar (tqdm's, redrawn with '\r', or Rich's), Coqui's STEP
 * lines, the metric dicts that the Hugging Face Trainer prints, and,
 * authoritative when a trainer cooperates, JSON lines in the
 * AUTOBATCH_REPORT file.  Each parser here takes one line and returns at
 * most one event; deciding which bar is the training bar is left to
 * trainlog.c, and what a rate means to the caller.
 *
 * Every scan is bounded: counts are read over at most 11 digits, the
 * right-to-left search for a bar tries each '[' once with local work, and
 * the description and postfix are found only for the bar that matched, so
 * a line costs time linear in its length.
 *
 * Numbers are read by hand rather than with strtod so that the result does
 * not depend on the process's LC_NUMERIC (a decimal comma would turn
 * "1.49it/s" into 1).
 */
#include "steps.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static void steps_event_reset(struct step_event *ev)
{
    ev->source = STEP_NONE;
    ev->step = -1;
    ev->total = -1;
    ev->rate_it_s = -1.0;
    ev->samples = -1.0;
    ev->time_s = -1.0;
    ev->peak_mem_bytes = -1;
    ev->hf_samples_per_s = -1.0;
    ev->desc[0] = '\0';
    ev->unit[0] = '\0';
}

static int steps_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int steps_alnum(char c)
{
    return steps_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Bounded substring search: lines are not NUL-terminated. */
static const char *steps_find(const char *hay, const char *end, const char *needle)
{
    size_t k = strlen(needle);
    for (const char *p = hay; p && (size_t)(end - p) >= k; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p || (size_t)(end - p) < k)
            return NULL;
        if (!memcmp(p, needle, k))
            return p;
    }
    return NULL;
}

static int steps_starts(const char *p, const char *end, const char *word)
{
    size_t k = strlen(word);
    return (size_t)(end - p) >= k && !memcmp(p, word, k);
}

/*
 * Read a decimal number ("1.49", "5e-05", "1.333e+04", "-0.5") at p.
 * Returns a pointer past it and sets *out, or NULL when there is none.
 * Up to 19 significant digits are kept; with the exact powers of ten below
 * the usual cases ("0.887") come out exactly as strtod would give them.
 */
static const char *steps_number(const char *p, const char *end, double *out)
{
    static const double pow10[] = {
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    };
    uint64_t mant = 0;
    int sig = 0, exp10 = 0, digits = 0, neg = 0;

    if (p < end && (*p == '-' || *p == '+'))
        neg = *p++ == '-';
    while (p < end && steps_digit(*p)) {
        if (sig < 19) {
            mant = mant * 10 + (uint64_t)(*p - '0');
            if (mant)
                sig++;
        } else {
            exp10++;
        }
        p++;
        digits++;
    }
    if (p < end && *p == '.') {
        p++;
        while (p < end && steps_digit(*p)) {
            if (sig < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                if (mant)
                    sig++;
                exp10--;
            }
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        const char *q = p + 1;
        int eneg = 0, e = 0, edigits = 0;
        if (q < end && (*q == '-' || *q == '+'))
            eneg = *q++ == '-';
        while (q < end && steps_digit(*q)) {
            if (e < 10000)
                e = e * 10 + (*q - '0');
            q++;
            edigits++;
        }
        if (edigits) {
            exp10 += eneg ? -e : e;
            p = q;
        }
    }
    double v = (double)mant;
    int ae = exp10 < 0 ? -exp10 : exp10;
    double scale = ae <= 22 ? pow10[ae] : pow(10.0, ae);
    v = exp10 < 0 ? v / scale : v * scale;
    *out = neg ? -v : v;
    return p;
}

/* ------------------------------------------------------------------ */
/* Bars: counts, units, descriptions                                   */
/* ------------------------------------------------------------------ */

/* Where the parts of one bar lie in the line, and what they say. */
struct steps_bar {
    const char *count;    /* first byte of n */
    const char *desc_end; /* the description is the text before this */
    const char *post;     /* the postfix after the rate, or NULL */
    const char *post_end;
    char post_sep;        /* '=' for tqdm's "k=v", ':' for Rich's "k: v" */
    long n, total;
    double rate;          /* units per second; < 0 unknown */
    char unit[STEPS_UNIT_MAX];
};

static int steps_unit_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/*
 * A unit at p: an optional blank (tqdm(unit=" examples") prints one),
 * then letters and '_'.  Copies it without the blank into unit and
 * returns its end; returns p when there is none or it is too long.
 */
static const char *steps_unit_read(const char *p, const char *end, char *unit)
{
    const char *s = p < end && *p == ' ' ? p + 1 : p;
    const char *q = s;
    while (q < end && steps_unit_char(*q) && q - s < STEPS_UNIT_MAX - 1)
        q++;
    if (q == s || (q < end && steps_unit_char(*q)))
        return p;
    memcpy(unit, s, (size_t)(q - s));
    unit[q - s] = '\0';
    return q;
}

/* "MM:SS" or "H:MM:SS" (tqdm's format_interval); returns the end or NULL. */
static const char *steps_interval(const char *p, const char *end)
{
    int groups = 0;
    if (p >= end || !steps_digit(*p))
        return NULL;
    while (p < end && steps_digit(*p))
        p++;
    while (groups < 2 && end - p >= 3 && p[0] == ':' &&
           steps_digit(p[1]) && steps_digit(p[2])) {
        p += 3;
        groups++;
    }
    if (groups == 0 || (p < end && steps_digit(*p)))
        return NULL;
    return p;
}

/* At most 10 digits (STEPS_MAX has 10) to a value no larger than STEPS_MAX. */
static int steps_count_value(const char *p, const char *stop, long *out)
{
    if (p == stop || stop - p > 10)
        return 0;
    long long v = 0;
    for (const char *q = p; q < stop; q++)
        v = v * 10 + (*q - '0');
    if (v > STEPS_MAX)
        return 0;
    *out = (long)v;
    return 1;
}

/* Read the counter of plain digits ending just before `stop`, backwards.
 * The scan stops after 11 digits, so a run of digits costs no more. */
static int steps_count_back(const char *line, const char *stop, const char **start, long *out)
{
    const char *p = stop;
    while (p > line && steps_digit(p[-1]) && stop - p < 11)
        p--;
    if ((p > line && steps_digit(p[-1])) || !steps_count_value(p, stop, out))
        return 0;
    *start = p;
    return 1;
}

/* The same forwards; returns the end or NULL. */
static const char *steps_count_fwd(const char *p, const char *end, long *out)
{
    const char *q = p;
    while (q < end && steps_digit(*q) && q - p < 11)
        q++;
    if ((q < end && steps_digit(*q)) || !steps_count_value(p, q, out))
        return NULL;
    return q;
}

/* The count must stand on its own: a '.', a letter or a '/' in front means
 * a float or a scaled count ("1.2k/10.0k"), or a word, a version or a date. */
static int steps_count_alone(const char *line, const char *start)
{
    return start == line ||
           !(steps_alnum(start[-1]) || start[-1] == '.' || start[-1] == '/');
}

/*
 * The rate at p: "X.XX<unit>/s", "X.XXs/<unit>" (slower than one unit a
 * second) or "?<unit>/s" (not known yet).  Sets *rate in units per second
 * (< 0 unknown) and unit; returns the end, or NULL when there is no rate.
 * An SI prefix that unit_scale puts in front of the unit ("1.79Mit/s")
 * stays in the unit.
 */
static const char *steps_rate(const char *p, const char *end, double *rate, char *unit)
{
    *rate = -1.0;
    if (p < end && *p == '?') {
        p++;
    } else {
        double x;
        const char *r = p;
        /* No exponent or sign here: tqdm prints '{0:5.2f}'. */
        while (r < end && (steps_digit(*r) || *r == '.'))
            r++;
        if (r == p || !steps_number(p, r, &x))
            return NULL;
        p = r;
        if (steps_starts(p, end, "s/")) {
            /* "5.13s/update": but "2.00steps/s" is read below */
            const char *u = steps_unit_read(p + 2, end, unit);
            if (u != p + 2 && !steps_starts(u, end, "/s")) {
                *rate = x > 0 ? 1.0 / x : -1.0;
                return u;
            }
        }
        *rate = x;
    }
    const char *u = steps_unit_read(p, end, unit);
    if (u == p || !steps_starts(u, end, "/s")) {
        *rate = -1.0;
        return NULL;
    }
    return u + 2;
}

/*
 * Try the tqdm bar whose bracket opens at line[b]:
 *   "... N/TOTAL [ELAPSED<REMAINING, RATE{postfix}]"  (TOTAL may be '?')
 *   "... N<unit> [ELAPSED, RATE{postfix}]"            (no total)
 * with RATE as steps_rate() reads it.  In the second form the unit after
 * the count must be the rate's.
 */
static int steps_tqdm_at(const char *line, const char *end, const char *b,
                         struct steps_bar *bar)
{
    long n = -1, total = -1;
    const char *start;
    char count_unit[STEPS_UNIT_MAX] = "";

    if (b - line < 3 || b[-1] != ' ')
        return 0;
    const char *q = b - 1; /* the space */
    if (q[-1] == '?' || steps_digit(q[-1])) {
        const char *t = q;
        if (q[-1] == '?') {
            t = q - 1;
        } else if (!steps_count_back(line, q, &t, &total)) {
            return 0;
        }
        if (t - line < 2 || t[-1] != '/')
            return 0;
        if (!steps_count_back(line, t - 1, &start, &n) || !steps_count_alone(line, start))
            return 0;
    } else if (steps_unit_char(q[-1])) {
        const char *u = q;
        while (u > line && steps_unit_char(u[-1]) && q - u < STEPS_UNIT_MAX - 1)
            u--;
        if (u > line && steps_unit_char(u[-1]))
            return 0;
        memcpy(count_unit, u, (size_t)(q - u));
        count_unit[q - u] = '\0';
        /* "1000 examples [": the unit's own blank */
        if (u - line >= 2 && u[-1] == ' ' && steps_digit(u[-2]))
            u--;
        if (!steps_count_back(line, u, &start, &n) || !steps_count_alone(line, start))
            return 0;
    } else {
        return 0;
    }

    const char *p = steps_interval(b + 1, end);
    if (!p)
        return 0;
    if (p < end && *p == '<') {
        p++;
        if (p < end && *p == '?')
            p++;
        else if (!(p = steps_interval(p, end)))
            return 0;
    }
    if (!steps_starts(p, end, ", "))
        return 0;
    p += 2;
    while (p < end && *p == ' ')
        p++;

    p = steps_rate(p, end, &bar->rate, bar->unit);
    if (!p || p >= end || (*p != ']' && *p != ','))
        return 0;
    if ((count_unit[0] && strcmp(count_unit, bar->unit) != 0) || steps_unit_is_data(bar->unit))
        return 0;

    bar->post = NULL;
    bar->post_end = NULL;
    bar->post_sep = '=';
    if (*p == ',') {
        /* The postfix runs to the bracket that closes the bar, the last
         * one on the line (a value may hold brackets of its own). */
        const char *close = end;
        while (close > p && close[-1] != ']')
            close--;
        p++;
        while (p < end && *p == ' ')
            p++;
        bar->post = p;
        bar->post_end = close > p ? close - 1 : end;
    }
    bar->count = start;
    bar->n = n;
    bar->total = total;

    /* The description ends where the percentage and the bar begin:
     * "desc: 40%|####      | 4/10" (l_bar is "{desc}: {percentage}%|"). */
    const char *d = start;
    while (d > line && d[-1] == ' ')
        d--;
    if (d > line && d[-1] == '|') {
        const char *o = d - 1;
        while (o > line && o[-1] != '|')
            o--;
        if (o > line) {
            d = o - 1;
            while (d > line && d[-1] == ' ')
                d--;
            if (d > line && d[-1] == '%') {
                d--;
                while (d > line && (steps_digit(d[-1]) || d[-1] == '.'))
                    d--;
            }
        }
    }
    bar->desc_end = d;
    return 1;
}

/* A redraw that was not split from the next one holds several bars; the
 * last is the newest, so the line is searched from the right. */
static int steps_find_tqdm(const char *line, size_t len, struct steps_bar *bar)
{
    const char *end = line + len;
    for (const char *b = end; b > line; b--) {
        if (b[-1] == '[' && steps_tqdm_at(line, end, b - 1, bar))
            return 1;
    }
    return 0;
}

/*
 * Lightning's RichProgressBar:
 * "Epoch 0/9 ━━━━━━━━━ 45/100 0:00:10 • 0:00:12 4.50it/s v_num: 0":
 * the count N/TOTAL and the elapsed time come before the bullet (U+2022),
 * the remaining time, the rate and the metrics after it.  The epoch
 * counter "0/9" has no time after it, which is how it is told from the
 * step counter.
 */
static int steps_find_rich(const char *line, size_t len, struct steps_bar *bar)
{
    const char *end = line + len;
    const char *bullet = steps_find(line, end, " \xE2\x80\xA2 ");
    if (!bullet)
        return 0;
    /* backwards: elapsed "H:MM:SS", spaces, TOTAL, '/', N */
    const char *p = bullet;
    while (p > line && (steps_digit(p[-1]) || p[-1] == ':') && bullet - p < 16)
        p--;
    if (p == bullet || steps_interval(p, bullet) != bullet)
        return 0;
    while (p > line && p[-1] == ' ')
        p--;
    const char *tstart, *nstart;
    long total, n;
    if (!steps_count_back(line, p, &tstart, &total) || tstart == line || tstart[-1] != '/' ||
        !steps_count_back(line, tstart - 1, &nstart, &n) || !steps_count_alone(line, nstart) ||
        n > total)
        return 0;
    /* forwards: remaining ("0:00:12" or "-:--:--"), then the rate */
    const char *q = bullet + 5;
    while (q < end && *q != ' ')
        q++;
    while (q < end && *q == ' ')
        q++;
    const char *after = steps_rate(q, end, &bar->rate, bar->unit);
    if (!after) {
        strcpy(bar->unit, "it");
        bar->post = NULL;
        bar->post_end = NULL;
    } else {
        if (steps_unit_is_data(bar->unit))
            return 0;
        while (after < end && *after == ' ')
            after++;
        bar->post = after;
        bar->post_end = end;
    }
    bar->post_sep = ':';
    bar->count = nstart;
    bar->n = n;
    bar->total = total;
    /* the description: what precedes the bar's "━" and "╸" (U+2500..U+257F) */
    const char *d = nstart;
    for (;;) {
        if (d > line && d[-1] == ' ')
            d--;
        else if (d - line >= 3 && (unsigned char)d[-3] == 0xE2 &&
                 ((unsigned char)d[-2] == 0x94 || (unsigned char)d[-2] == 0x95))
            d -= 3;
        else
            break;
    }
    bar->desc_end = d;
    return 1;
}

static int steps_find_bar(const char *line, size_t len, struct steps_bar *bar)
{
    return steps_find_tqdm(line, len, bar) || steps_find_rich(line, len, bar);
}

/*
 * Copy the text [s, e) into out (cap bytes): ANSI escape sequences and
 * other control bytes left out, blanks trimmed, then one ':' and the
 * blanks before it (tqdm writes "{desc}: "), and cut so that no UTF-8
 * character is split.
 */
static void steps_copy_desc(const char *s, const char *e, char *out, size_t cap)
{
    size_t k = 0;
    /* Only this redraw: text before a '\r' belongs to an earlier one. */
    for (const char *r = e; r > s; r--) {
        if (r[-1] == '\r') {
            s = r;
            break;
        }
    }
    const char *p = s;
    while (p < e) {
        unsigned char c = (unsigned char)*p;
        if (c == 0x1b) {
            /* CSI: ESC '[' parameters final-byte; else ESC and one byte */
            p++;
            if (p < e && *p == '[') {
                p++;
                while (p < e && !((unsigned char)*p >= 0x40 && (unsigned char)*p <= 0x7e))
                    p++;
            }
            if (p < e)
                p++;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            p++;
            continue;
        }
        size_t w = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
        if (w > (size_t)(e - p))
            w = (size_t)(e - p);
        if (k + w >= cap)
            break;
        if (k == 0 && c == ' ') {
            p++;
            continue;
        }
        memcpy(out + k, p, w);
        k += w;
        p += w;
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    if (k > 0 && out[k - 1] == ':') {
        k--;
        while (k > 0 && out[k - 1] == ' ')
            k--;
    }
    out[k] = '\0';
}

int steps_unit_is_data(const char *unit)
{
    static const char *const data[] = {
        "B",   "kB",  "KB",  "MB",    "GB",   "TB", "PB", "KiB", "MiB", "GiB",
        "TiB", "PiB", "bytes", "byte", "examples", "example", "ex", "ba",
    };
    /* Every bar's unit is checked: the common "it" and "step" leave at
     * their first letter, which no data unit starts with. */
    if (!unit || !unit[0] || !strchr("BkKMGTPbe", unit[0]))
        return 0;
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++) {
        if (!strcmp(unit, data[i]))
            return 1;
    }
    return 0;
}

static int steps_parse_bar(const char *line, size_t len, struct step_event *ev)
{
    struct steps_bar bar;
    if (!steps_find_bar(line, len, &bar))
        return 0;
    ev->source = STEP_TQDM;
    ev->step = bar.n;
    ev->total = bar.total;
    ev->rate_it_s = bar.rate;
    memcpy(ev->unit, bar.unit, sizeof ev->unit);
    steps_copy_desc(line, bar.desc_end, ev->desc, sizeof ev->desc);
    return 1;
}

long steps_postfix_value(const char *line, size_t len, const char *key)
{
    struct steps_bar bar;
    if (!line || !key || !*key || !steps_find_bar(line, len, &bar) || !bar.post)
        return -1;
    size_t k = strlen(key);
    const char *end = bar.post_end;
    for (const char *p = bar.post; (size_t)(end - p) > k; p++) {
        /* a whole name: at the start, or after the separator's blank */
        if ((p != bar.post && p[-1] != ' ' && p[-1] != ',') || memcmp(p, key, k) != 0 ||
            p[k] != bar.post_sep)
            continue;
        const char *v = p + k + 1;
        while (v < end && *v == ' ')
            v++;
        long n;
        const char *ve = steps_count_fwd(v, end, &n);
        if (!ve || (ve < end && *ve != ',' && *ve != ' ' && *ve != ']'))
            return -1;
        return n;
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Coqui Trainer step lines                                            */
/* ------------------------------------------------------------------ */

/*
 * "\033[1m   --> TIME: 2024-01-01 12:00:00 -- STEP: 3/12 -- GLOBAL_STEP: 3\033[0m"
 * as trainer/logging/console_logger.py (print_train_step) writes it; the
 * evaluation's "--> STEP: 3" has no GLOBAL_STEP and is not a step.
 */
static int steps_parse_coqui(const char *line, size_t len, struct step_event *ev)
{
    const char *end = line + len;
    const char *a = steps_find(line, end, "--> ");
    long step, last, global;
    if (!a)
        return 0;
    /* In front: nothing, a blank, or the end of a colour sequence. */
    if (a > line && a[-1] != ' ' && a[-1] != '\t' && a[-1] != 'm')
        return 0;
    const char *p = a + 4;
    if (steps_starts(p, end, "TIME: ")) {
        const char *d = steps_find(p, end, " -- ");
        if (!d)
            return 0;
        p = d + 4;
    }
    if (!steps_starts(p, end, "STEP: "))
        return 0;
    p = steps_count_fwd(p + 6, end, &step);
    if (!p || p >= end || *p != '/')
        return 0;
    p = steps_count_fwd(p + 1, end, &last);
    if (!p || !steps_starts(p, end, " -- GLOBAL_STEP: "))
        return 0;
    p = steps_count_fwd(p + 17, end, &global);
    if (!p || global >= STEPS_MAX)
        return 0;
    if (p < end && *p != ' ' && *p != '\t' && *p != '\x1b' && *p != '[')
        return 0;
    ev->source = STEP_COQUI;
    /* printed before the trainer counts the step it follows */
    ev->step = global + 1;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Hugging Face metric dicts                                           */
/* ------------------------------------------------------------------ */

/* The value after "'key': " as a number, quoted (":.4g" generation) or
 * not.  Returns 1 and sets *out, or 0. */
static int steps_dict_number(const char *dict, const char *end, const char *key, double *out)
{
    const char *p = steps_find(dict, end, key);
    if (!p)
        return 0;
    p += strlen(key);
    if (p < end && *p == '\'')
        p++;
    if (steps_starts(p, end, "nan") || steps_starts(p, end, "inf")) {
        *out = steps_starts(p, end, "nan") ? NAN : INFINITY;
        return 1;
    }
    return steps_number(p, end, out) != NULL;
}

static int steps_parse_hf(const char *line, size_t len, struct step_event *ev)
{
    const char *end = line + len;
    const char *dict = steps_find(line, end, "{'");
    double v;

    if (!dict)
        return 0;
    /* A Python dict repr takes the rest of the line; a dict quoted inside
     * some other message (Namespace(...), a log sentence) does not. */
    while (end > dict && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        end--;
    if (end[-1] != '}')
        return 0;

    if (steps_find(dict, end, "'train_runtime': ")) {
        ev->source = STEP_HF_DONE;
        if (steps_dict_number(dict, end, "'train_samples_per_second': ", &v) && v >= 0 &&
            isfinite(v))
            ev->hf_samples_per_s = v;
        return 1;
    }
    /* The value must be a number: a config dict such as {'loss': 'ce'}
     * is not a logging step. */
    if (steps_dict_number(dict, end, "'loss': ", &v)) {
        ev->source = STEP_HF_LOG;
        return 1;
    }
    return 0;
}

int steps_parse_line(const char *line, size_t len, struct step_event *ev)
{
    struct step_event local;
    if (!ev)
        ev = &local;
    steps_event_reset(ev);
    if (!line || len == 0)
        return 0;
    if (steps_parse_hf(line, len, ev) || steps_parse_coqui(line, len, ev) ||
        steps_parse_bar(line, len, ev))
        return 1;
    steps_event_reset(ev);
    return 0;
}

/* ------------------------------------------------------------------ */
/* AUTOBATCH_REPORT lines                                              */
/* ------------------------------------------------------------------ */

/* A non-negative finite number from a JSON value, else -1. */
static double steps_json_nonneg(json_t *v)
{
    if (!json_is_number(v))
        return -1.0;
    double d = json_number_value(v);
    return isfinite(d) && d >= 0 ? d : -1.0;
}

int steps_parse_report(const char *line, size_t len, struct step_event *ev)
{
    struct step_event local;
    json_error_t jerr;
    int ok = 0;

    if (!ev)
        ev = &local;
    steps_event_reset(ev);
    if (!line || len == 0)
        return 0;
    json_t *root = json_loadb(line, len, 0, &jerr);
    if (!root)
        return 0;
    if (!json_is_object(root))
        goto out;

    json_t *step = json_object_get(root, "step");
    long n;
    if (json_is_integer(step)) {
        json_int_t i = json_integer_value(step);
        if (i < 0 || i > LONG_MAX)
            goto out;
        n = (long)i;
    } else if (json_is_real(step)) {
        /* 3.0 is a step count written by a float-minded trainer; 2.5 is not. */
        double d = json_real_value(step);
        if (!isfinite(d) || d < 0 || d >= (double)LONG_MAX || d != floor(d))
            goto out;
        n = (long)d;
    } else {
        goto out;
    }

    ev->source = STEP_REPORT;
    ev->step = n;
    /* The optional fields are ignored when they are not numbers rather
     * than losing the step they came with. */
    ev->samples = steps_json_nonneg(json_object_get(root, "samples"));
    ev->time_s = steps_json_nonneg(json_object_get(root, "time"));
    json_t *peak = json_object_get(root, "peak_mem_bytes");
    if (json_is_integer(peak)) {
        json_int_t i = json_integer_value(peak);
        ev->peak_mem_bytes = i >= 0 ? (long long)i : -1;
    } else {
        double d = steps_json_nonneg(peak);
        ev->peak_mem_bytes = d >= 0 && d < 9.2e18 ? (long long)d : -1;
    }
    ok = 1;

out:
    json_decref(root);
    return ok;
}
