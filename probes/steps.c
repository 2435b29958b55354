/*
 * steps: recognise training progress in a trial's output (see steps.h).
 *
 * The throughput meter and the hang detector only need to know that a step
 * has completed, and how fast steps come.  Trainers say so in three ways:
 * a tqdm bar redrawn with '\r', the metric dicts that the Hugging Face
 * Trainer prints, and, authoritative when a trainer cooperates, JSON lines
 * in the AUTOBATCH_REPORT file.  Each parser here takes one line and
 * returns at most one event; deciding which bar is the training bar, and
 * what a rate means, is left to the caller.
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
/* tqdm                                                                */
/* ------------------------------------------------------------------ */

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

/* Read the counter of plain digits ending just before `stop`, backwards. */
static int steps_count_back(const char *line, const char *stop, const char **start, long *out)
{
    const char *p = stop;
    while (p > line && steps_digit(p[-1]))
        p--;
    if (p == stop || stop - p > 18)
        return 0;
    long v = 0;
    for (const char *q = p; q < stop; q++)
        v = v * 10 + (*q - '0');
    *start = p;
    *out = v;
    return 1;
}

/* The count must stand on its own: a '.', a letter or a '/' in front means
 * a float or a scaled count ("1.2k/10.0k"), or a word, a version or a date. */
static int steps_count_alone(const char *line, const char *start)
{
    return start == line ||
           !(steps_alnum(start[-1]) || start[-1] == '.' || start[-1] == '/');
}

/*
 * Try the bar whose bracket opens at line[b]:
 *   "... N/TOTAL [ELAPSED<REMAINING, RATE{postfix}]"  (TOTAL may be '?')
 *   "... Nit [ELAPSED, RATE{postfix}]"                (no total)
 * with RATE "X.XXit/s", "X.XXs/it" or "?it/s".
 */
static int steps_tqdm_at(const char *line, const char *end, const char *b,
                         struct step_event *ev)
{
    long n = -1, total = -1;
    const char *start;

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
    } else if (q - line >= 3 && q[-2] == 'i' && q[-1] == 't') {
        if (!steps_count_back(line, q - 2, &start, &n) || !steps_count_alone(line, start))
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

    double rate = -1.0;
    if (steps_starts(p, end, "?it/s")) {
        p += 5;
    } else {
        double x;
        const char *r = p;
        /* No exponent or sign here: tqdm prints '{0:5.2f}'. */
        while (r < end && (steps_digit(*r) || *r == '.'))
            r++;
        if (r == p || !steps_number(p, r, &x))
            return 0;
        if (steps_starts(r, end, "it/s")) {
            rate = x;
            p = r + 4;
        } else if (steps_starts(r, end, "s/it")) {
            rate = x > 0 ? 1.0 / x : -1.0;
            p = r + 4;
        } else {
            return 0;
        }
    }
    if (p >= end || (*p != ']' && *p != ','))
        return 0;

    ev->source = STEP_TQDM;
    ev->step = n;
    ev->total = total;
    ev->rate_it_s = rate;
    return 1;
}

/* A redraw that was not split from the next one holds several bars; the
 * last is the newest, so the line is searched from the right. */
static int steps_parse_tqdm(const char *line, size_t len, struct step_event *ev)
{
    const char *end = line + len;
    for (const char *b = end; b > line; b--) {
        if (b[-1] == '[' && steps_tqdm_at(line, end, b - 1, ev))
            return 1;
    }
    return 0;
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


/* ------------------------------------------------------------------ */
/* Lightning's RichProgressBar                                          */
/* ------------------------------------------------------------------ */

/*
 * "Epoch 0/9 ━━━━━━━━━ 45/100 0:00:10 • 0:00:12 4.50it/s v_num: 0":
 * the count N/TOTAL and the elapsed time come before the bullet (U+2022),
 * the remaining time and the rate after it.  The epoch counter "0/9" has
 * no time after it, which is how it is told from the step counter.
 */
static int steps_parse_rich(const char *line, size_t len, struct step_event *ev)
{
    const char *end = line + len;
    const char *bullet = steps_find(line, end, " \xE2\x80\xA2 ");
    if (!bullet)
        return 0;
    /* backwards: elapsed "H:MM:SS", spaces, TOTAL, '/', N */
    const char *p = bullet;
    while (p > line && (steps_digit(p[-1]) || p[-1] == ':'))
        p--;
    if (p == bullet || !steps_interval(p, bullet) || steps_interval(p, bullet) != bullet)
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
    double rate;
    const char *after = steps_number(q, end, &rate);
    ev->source = STEP_TQDM;
    ev->step = n;
    ev->total = total;
    if (after && steps_starts(after, end, "it/s"))
        ev->rate_it_s = rate;
    else if (after && steps_starts(after, end, "s/it") && rate > 0)
        ev->rate_it_s = 1.0 / rate;
    return 1;
}

int steps_parse_line(const char *line, size_t len, struct step_event *ev)
{
    struct step_event local;
    if (!ev)
        ev = &local;
    steps_event_reset(ev);
    if (!line || len == 0)
        return 0;
    if (steps_parse_hf(line, len, ev))
        return 1;
    if (steps_parse_tqdm(line, len, ev))
        return 1;
    steps_event_reset(ev);
    if (steps_parse_rich(line, len, ev))
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
