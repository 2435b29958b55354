/* SPDX-License-Identifier: MIT */
/*
 * trainlog: tell a trial's training steps from everything else it prints
 * (see trainlog.h for the rules and the life cycle).
 *
 * steps.c turns a line into at most one event; this file holds what one
 * trial's output has shown so far: the bars drawn, which of them is the
 * training bar, and the count handed out.  The count only grows, so a
 * decision that turns out wrong (a followed bar that finishes and gives
 * way to another) costs steps not counted, never steps made up: a trial
 * that counts too few steps runs on, one that counts too many is a fit
 * that never trained.
 */
#include "trainlog.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Lines longer than this are matched against the `line` pattern cut. */
#define TRAINLOG_LINE_MAX 65536

/* A count carried over restarts stays below this; no overflow. */
#define TRAINLOG_COUNT_MAX (STEPS_MAX * 1000L)

static char *trainlog_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void trainlog_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void trainlog_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int trainlog_init(struct trainlog *tl, const struct trainlog_rules *rules, char *err,
                  size_t errlen)
{
    struct trainlog_rules none = { NULL, NULL, NULL, NULL };
    if (!rules)
        rules = &none;
    memset(tl, 0, sizeof *tl);
    tl->followed = -1;
    tl->start = -1;

    tl->bar = trainlog_strdup(rules->bar);
    tl->unit = trainlog_strdup(rules->unit);
    tl->postfix = trainlog_strdup(rules->postfix);
    tl->line = trainlog_strdup(rules->line);
    if ((rules->bar && !tl->bar) || (rules->unit && !tl->unit) ||
        (rules->postfix && !tl->postfix) || (rules->line && !tl->line)) {
        trainlog_err(err, errlen, "out of memory");
        trainlog_release(tl);
        return -1;
    }
    if (tl->line) {
        int rc = regcomp(&tl->re, tl->line, REG_EXTENDED);
        if (rc != 0) {
            char why[128];
            regerror(rc, &tl->re, why, sizeof why);
            trainlog_err(err, errlen, "bad step pattern '%s': %s", tl->line, why);
            trainlog_release(tl);
            return -1;
        }
        tl->have_re = 1;
        if (tl->re.re_nsub < 1) {
            trainlog_err(err, errlen,
                         "bad step pattern '%s': it needs a group around the step number, "
                         "as in 'step ([0-9]+)'",
                         tl->line);
            trainlog_release(tl);
            return -1;
        }
    }
    return 0;
}

void trainlog_release(struct trainlog *tl)
{
    if (!tl)
        return;
    if (tl->have_re)
        regfree(&tl->re);
    free(tl->bar);
    free(tl->unit);
    free(tl->postfix);
    free(tl->line);
    free(tl->buf);
    memset(tl, 0, sizeof *tl);
    tl->followed = -1;
    tl->start = -1;
}

/* ------------------------------------------------------------------ */
/* Which bars are never training                                       */
/* ------------------------------------------------------------------ */

static int trainlog_word_at(const char *desc, const char *word)
{
    for (size_t i = 0; word[i]; i++) {
        if (tolower((unsigned char)desc[i]) != tolower((unsigned char)word[i]))
            return 0;
    }
    return 1;
}

int trainlog_desc_not_training(const char *desc, enum trainlog_why *why)
{
    static const char *const prep[] = {
        "Sorting",  "Creating",   "Loading",   "Map",      "Filter",    "Downloading",
        "Resolving", "Generating", "Tokeniz",  "Preprocess", "Encoding", "Fetching",
        "Extracting", "Computing", "Casting",  "Saving",   "Resampl",   "Preparing",
    };
    static const char *const eval[] = {
        "Validat", "Eval", "Sanity", "Testing", "Predict", "Inference",
    };
    enum trainlog_why dummy;
    if (!why)
        why = &dummy;
    if (!desc)
        return 0;
    for (size_t i = 0; desc[i]; i++) {
        /* at the start of a word: "bitmap" is no Map */
        if (i > 0 && isalpha((unsigned char)desc[i - 1]))
            continue;
        if (!isalpha((unsigned char)desc[i]))
            continue;
        for (size_t k = 0; k < sizeof prep / sizeof prep[0]; k++) {
            if (trainlog_word_at(desc + i, prep[k])) {
                *why = TRAINLOG_PREPARATION;
                return 1;
            }
        }
        for (size_t k = 0; k < sizeof eval / sizeof eval[0]; k++) {
            if (trainlog_word_at(desc + i, eval[k])) {
                *why = TRAINLOG_EVALUATION;
                return 1;
            }
        }
    }
    return 0;
}

/* Units of bars that count data, not steps, beyond steps_unit_is_data()'s:
 * these may still be named by a preset. */
static int trainlog_unit_not_steps(const char *unit)
{
    static const char *const units[] = { "samples", "sample", "tokens", "token", "tok" };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcmp(unit, units[i]))
            return 1;
    }
    return 0;
}

static int trainlog_has_bar_rules(const struct trainlog *tl)
{
    return tl->bar || tl->unit;
}

static enum trainlog_why trainlog_classify(const struct trainlog *tl, const struct step_event *ev)
{
    enum trainlog_why why;
    if (trainlog_has_bar_rules(tl)) {
        if (tl->bar && (tl->bar[0] ? !strstr(ev->desc, tl->bar) : ev->desc[0] != '\0'))
            return TRAINLOG_UNRULED;
        if (tl->unit && strcmp(ev->unit, tl->unit) != 0)
            return TRAINLOG_UNRULED;
        return TRAINLOG_CANDIDATE;
    }
    if (trainlog_desc_not_training(ev->desc, &why))
        return why;
    if (trainlog_unit_not_steps(ev->unit))
        return TRAINLOG_PREPARATION;
    return TRAINLOG_CANDIDATE;
}

/* ------------------------------------------------------------------ */
/* The count                                                           */
/* ------------------------------------------------------------------ */

/* Hand out `value` from `src` if it grows the count.  `before` is what the
 * count was before the first step of this trial, as far as src can tell. */
static int trainlog_grow(struct trainlog *tl, enum trainlog_source src, long value, long before,
                         double rate, double now, long *step, double *rate_out)
{
    tl->source = src;
    if (value <= tl->step)
        return 0;
    if (tl->start < 0) {
        tl->start = before < 0 ? 0 : before >= value ? value - 1 : before;
        tl->first_at = now;
    }
    tl->step = value;
    tl->last_at = now;
    *step = value;
    *rate_out = rate;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Bars                                                                */
/* ------------------------------------------------------------------ */

/* The description with every run of digits folded to one '#': the epoch
 * number in "Epoch 2/100" does not make a new bar. */
static void trainlog_fold(const char *desc, char *key, size_t cap)
{
    size_t k = 0;
    for (const char *p = desc; *p && k + 1 < cap; p++) {
        if (isdigit((unsigned char)*p)) {
            if (k == 0 || key[k - 1] != '#')
                key[k++] = '#';
        } else {
            key[k++] = *p;
        }
    }
    key[k] = '\0';
}

/* The bar this event draws: found, or made (the least recently drawn bar
 * that is not followed gives its place when all are taken). */
static struct trainlog_bar *trainlog_bar_get(struct trainlog *tl, const struct step_event *ev,
                                             int *is_new)
{
    char key[STEPS_DESC_MAX];
    trainlog_fold(ev->desc, key, sizeof key);
    *is_new = 0;
    for (size_t i = 0; i < tl->nbars; i++) {
        struct trainlog_bar *b = &tl->bars[i];
        if (b->total == ev->total && !strcmp(b->key, key) && !strcmp(b->unit, ev->unit))
            return b;
    }
    size_t slot = tl->nbars;
    if (slot == TRAINLOG_BARS) {
        slot = tl->followed == 0 ? 1 : 0;
        for (size_t i = 0; i < TRAINLOG_BARS; i++) {
            if ((int)i != tl->followed && tl->bars[i].last_seen < tl->bars[slot].last_seen)
                slot = i;
        }
    } else {
        tl->nbars++;
    }
    struct trainlog_bar *b = &tl->bars[slot];
    memset(b, 0, sizeof *b);
    memcpy(b->key, key, sizeof b->key);
    memcpy(b->unit, ev->unit, sizeof b->unit);
    b->total = ev->total;
    b->first_n = ev->step;
    b->n = ev->step;
    b->why = trainlog_classify(tl, ev);
    tl->bars_seen++;
    *is_new = 1;
    return b;
}

static int trainlog_bar_line(struct trainlog *tl, const char *line, size_t len,
                             const struct step_event *ev, double now, long *step,
                             double *rate)
{
    int is_new;
    struct trainlog_bar *b = trainlog_bar_get(tl, ev, &is_new);

    tl->draws++;
    b->last_seen = tl->draws;
    memcpy(b->desc, ev->desc, sizeof b->desc);
    if (!is_new && ev->step < b->n) {
        /* drawn anew (the next epoch): what it counted carries on */
        b->base += b->n;
        if (b->base > TRAINLOG_COUNT_MAX)
            b->base = TRAINLOG_COUNT_MAX;
        b->restarted = 1;
    }
    b->n = ev->step;
    b->finished = b->total >= 0 && b->n >= b->total;

    if (b->why == TRAINLOG_PREPARATION || b->why == TRAINLOG_EVALUATION ||
        b->why == TRAINLOG_UNRULED || b->why == TRAINLOG_WITHDRAWN)
        return 0;
    if (tl->source == TRAINLOG_SRC_COQUI || tl->source == TRAINLOG_SRC_LINE)
        return 0;

    int idx = (int)(b - tl->bars);
    if (tl->followed != idx) {
        /* Past its first count and short of its total, or drawn anew:
         * a bar that only shows 0/400 and 400/400 never qualifies. */
        int advancing = b->restarted || (b->n > b->first_n && !b->finished);
        int free_to_take = tl->followed < 0 || tl->bars[tl->followed].finished;
        if (!advancing || !free_to_take) {
            if (b->finished && tl->step == 0)
                b->why = TRAINLOG_FINISHED;
            return 0;
        }
        if (tl->followed >= 0)
            tl->bars[tl->followed].why = TRAINLOG_WITHDRAWN;
        tl->followed = idx;
        b->why = TRAINLOG_FOLLOWED;
    }

    long counted = b->base + b->n;
    long value = counted;
    if (tl->postfix) {
        long v = steps_postfix_value(line, len, tl->postfix);
        if (v >= 0)
            value = v;
    }
    /* what the bar showed before this trial's first step */
    long before = value - (counted - b->first_n);
    return trainlog_grow(tl, TRAINLOG_SRC_BAR, value, before, ev->rate_it_s, now, step, rate);
}

/* ------------------------------------------------------------------ */
/* The preset's line pattern                                           */
/* ------------------------------------------------------------------ */

static int trainlog_match(struct trainlog *tl, const char *line, size_t len, long *value)
{
    if (len > TRAINLOG_LINE_MAX)
        len = TRAINLOG_LINE_MAX;
    if (tl->buf_alloc < len + 1) {
        size_t want = len + 1 < 256 ? 256 : len + 1;
        char *nb = realloc(tl->buf, want);
        if (!nb)
            return 0;
        tl->buf = nb;
        tl->buf_alloc = want;
    }
    memcpy(tl->buf, line, len);
    tl->buf[len] = '\0';

    regmatch_t m[2];
    if (regexec(&tl->re, tl->buf, 2, m, 0) != 0 || m[1].rm_so < 0)
        return 0;
    const char *p = tl->buf + m[1].rm_so, *e = tl->buf + m[1].rm_eo;
    if (e == p || e - p > 10)
        return 0;
    long long v = 0;
    for (; p < e; p++) {
        if (!isdigit((unsigned char)*p))
            return 0;
        v = v * 10 + (*p - '0');
    }
    if (v > STEPS_MAX)
        return 0;
    *value = (long)v;
    return 1;
}

/* ------------------------------------------------------------------ */
/* One line                                                            */
/* ------------------------------------------------------------------ */

int trainlog_line(struct trainlog *tl, const char *line, size_t len, double now, long *step,
                  double *rate_it_s)
{
    long step_local;
    double rate_local;
    if (!step)
        step = &step_local;
    if (!rate_it_s)
        rate_it_s = &rate_local;
    *step = tl->step;
    *rate_it_s = -1.0;
    if (!line || len == 0)
        return 0;

    if (tl->have_re) {
        long v;
        if (trainlog_match(tl, line, len, &v)) {
            tl->lines_matched++;
            return trainlog_grow(tl, TRAINLOG_SRC_LINE, v, v - 1, -1.0, now, step, rate_it_s);
        }
    }

    struct step_event ev;
    if (!steps_parse_line(line, len, &ev))
        return 0;
    int other_rules = tl->have_re || trainlog_has_bar_rules(tl);
    switch (ev.source) {
    case STEP_TQDM:
        if (tl->have_re) {
            /* only counted, for trainlog_describe */
            int is_new;
            struct trainlog_bar *b = trainlog_bar_get(tl, &ev, &is_new);
            b->last_seen = ++tl->draws;
            b->why = TRAINLOG_UNRULED;
            return 0;
        }
        return trainlog_bar_line(tl, line, len, &ev, now, step, rate_it_s);
    case STEP_COQUI:
        tl->coqui_lines++;
        if (other_rules || (tl->source != TRAINLOG_NONE && tl->source != TRAINLOG_SRC_COQUI))
            return 0;
        return trainlog_grow(tl, TRAINLOG_SRC_COQUI, ev.step, ev.step - 1, -1.0, now, step,
                             rate_it_s);
    case STEP_HF_LOG:
        tl->hf_dicts++;
        if (other_rules || (tl->source != TRAINLOG_NONE && tl->source != TRAINLOG_SRC_HF))
            return 0;
        return trainlog_grow(tl, TRAINLOG_SRC_HF, tl->hf_dicts, 0, -1.0, now, step, rate_it_s);
    default:
        return 0;
    }
}

/* ------------------------------------------------------------------ */
/* What was seen                                                       */
/* ------------------------------------------------------------------ */

/* Bounded appends; the text is cut, never overrun. */
struct trainlog_out {
    char *buf;
    size_t len, pos;
};

static void trainlog_put(struct trainlog_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void trainlog_put(struct trainlog_out *o, const char *fmt, ...)
{
    va_list ap;
    if (o->pos + 1 >= o->len)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    o->pos += (size_t)n;
    if (o->pos >= o->len)
        o->pos = o->len - 1;
}

/* A bar's name in a message: 'desc', cut to about 45 bytes, or "an
 * undescribed bar". */
static void trainlog_put_name(struct trainlog_out *o, const struct trainlog_bar *b)
{
    if (!b->desc[0]) {
        trainlog_put(o, "an undescribed bar");
        return;
    }
    size_t n = strlen(b->desc);
    if (n <= 48) {
        trainlog_put(o, "'%s'", b->desc);
        return;
    }
    /* at a word's end when one is near, else on a character boundary */
    n = 45;
    size_t w = n;
    while (w > 24 && b->desc[w] != ' ')
        w--;
    if (b->desc[w] == ' ')
        n = w;
    while (n > 0 && ((unsigned char)b->desc[n] & 0xc0) == 0x80)
        n--;
    while (n > 0 && b->desc[n - 1] == ' ')
        n--;
    trainlog_put(o, "'%.*s...'", (int)n, b->desc);
}

static void trainlog_put_count(struct trainlog_out *o, const struct trainlog_bar *b)
{
    if (b->total >= 0)
        trainlog_put(o, "%ld/%ld", b->n, b->total);
    else
        trainlog_put(o, "%ld", b->n);
}

static void trainlog_put_bar(struct trainlog_out *o, const struct trainlog_bar *b)
{
    trainlog_put_name(o, b);
    switch (b->why) {
    case TRAINLOG_PREPARATION:
        trainlog_put(o, " is data preparation (");
        trainlog_put_count(o, b);
        trainlog_put(o, " %s)", b->unit);
        break;
    case TRAINLOG_EVALUATION:
        trainlog_put(o, " is evaluation");
        break;
    case TRAINLOG_UNRULED:
        trainlog_put(o, " (unit '%s') is not the bar the preset names", b->unit);
        break;
    case TRAINLOG_FINISHED:
        trainlog_put(o, " finished ");
        trainlog_put_count(o, b);
        trainlog_put(o, " before any training step");
        break;
    case TRAINLOG_WITHDRAWN:
        trainlog_put(o, " finished ");
        trainlog_put_count(o, b);
        trainlog_put(o, " and another bar took over");
        break;
    case TRAINLOG_FOLLOWED:
    case TRAINLOG_CANDIDATE:
        trainlog_put(o, " did not advance (");
        trainlog_put_count(o, b);
        trainlog_put(o, " %s)", b->unit);
        break;
    }
}

void trainlog_describe(const struct trainlog *tl, char *buf, size_t len)
{
    struct trainlog_out o = { buf, len, 0 };
    if (!buf || len == 0)
        return;
    buf[0] = '\0';

    if (tl->step > 0) {
        trainlog_put(&o, "%ld training step%s seen, from ", tl->step, tl->step == 1 ? "" : "s");
        switch (tl->source) {
        case TRAINLOG_SRC_BAR:
            if (tl->followed >= 0) {
                trainlog_put(&o, "the bar ");
                trainlog_put_name(&o, &tl->bars[tl->followed]);
                trainlog_put(&o, " (unit '%s')", tl->bars[tl->followed].unit);
            } else {
                trainlog_put(&o, "a progress bar");
            }
            break;
        case TRAINLOG_SRC_COQUI:
            trainlog_put(&o, "Coqui STEP lines");
            break;
        case TRAINLOG_SRC_HF:
            trainlog_put(&o, "Hugging Face metric dicts");
            break;
        case TRAINLOG_SRC_LINE:
            trainlog_put(&o, "lines matching the preset's step pattern");
            break;
        case TRAINLOG_NONE:
            trainlog_put(&o, "nowhere");
            break;
        }
        if (tl->start > 0)
            trainlog_put(&o, ", counting on from step %ld", tl->start);
        return;
    }

    if (tl->have_re) {
        if (tl->lines_matched)
            trainlog_put(&o, "%ld line%s matched the preset's step pattern '%s', none with a step "
                             "above 0",
                         tl->lines_matched, tl->lines_matched == 1 ? "" : "s", tl->line);
        else
            trainlog_put(&o, "no line matched the preset's step pattern '%s'", tl->line);
        if (tl->bars_seen)
            trainlog_put(&o, " (%ld progress bar%s seen, which do not count when a preset names "
                             "a step pattern)",
                         tl->bars_seen, tl->bars_seen == 1 ? "" : "s");
        return;
    }
    if (trainlog_has_bar_rules(tl)) {
        trainlog_put(&o, "no bar matched the preset's");
        if (tl->bar && tl->bar[0])
            trainlog_put(&o, " bar '%s'", tl->bar);
        else if (tl->bar)
            trainlog_put(&o, " undescribed bar");
        if (tl->unit)
            trainlog_put(&o, " unit '%s'", tl->unit);
        if (tl->coqui_lines || tl->hf_dicts)
            trainlog_put(&o, " (step lines or metric dicts do not count when a preset names a "
                             "bar)");
        if (tl->bars_seen == 0) {
            trainlog_put(&o, ": no progress bar seen");
            return;
        }
        trainlog_put(&o, ": ");
    } else if (tl->bars_seen == 0) {
        trainlog_put(&o, "no progress bar, Coqui STEP line or Hugging Face metric dict seen");
        return;
    }
    trainlog_put(&o, "%ld progress bar%s seen, none of them training (", tl->bars_seen,
                 tl->bars_seen == 1 ? "" : "s");
    size_t shown = 0;
    for (size_t i = 0; i < tl->nbars && shown < 4; i++, shown++) {
        if (shown)
            trainlog_put(&o, "; ");
        trainlog_put_bar(&o, &tl->bars[i]);
    }
    if ((long)shown < tl->bars_seen)
        trainlog_put(&o, "; %ld more", tl->bars_seen - (long)shown);
    trainlog_put(&o, ")");
}
