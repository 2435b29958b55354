/* SPDX-License-Identifier: MIT */
/*
 * hint: the distance between two words and the closest of a list (see
 * hint.h).
 */
#include "cli/hint.h"

#include <ctype.h>
#include <string.h>

/* One letter as compared: lowercase, '_' as '-'. */
static int hint_fold(int c)
{
    c = tolower((unsigned char)c);
    return c == '_' ? '-' : c;
}

size_t hint_distance(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    if (alen > HINT_MAX_WORD || blen > HINT_MAX_WORD)
        return HINT_FAR;
    /* Three rows of the usual table: the one before last (for a swap),
     * the last, and this one. */
    size_t rows[3][HINT_MAX_WORD + 1];
    size_t *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= blen; j++)
        prev[j] = j;
    for (size_t i = 1; i <= alen; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= blen; j++) {
            int ca = hint_fold(a[i - 1]), cb = hint_fold(b[j - 1]);
            size_t best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == hint_fold(b[j - 2]) && hint_fold(a[i - 2]) == cb &&
                pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[blen];
}

/* Does s start with word[0..len), folded? */
static int hint_starts(const char *s, const char *word, size_t len)
{
    if (strlen(s) < len)
        return 0;
    for (size_t k = 0; k < len; k++)
        if (hint_fold(s[k]) != hint_fold(word[k]))
            return 0;
    return 1;
}

const char *hint_closest(const char *word, size_t len, const char *const *names, size_t n)
{
    const char *near = NULL, *abbrev = NULL, *stem = NULL;
    size_t near_d = len <= 2 ? 0 : len <= 4 ? 1 : 2;
    size_t nabbrev = 0;
    for (size_t i = 0; i < n && names[i]; i++) {
        const char *s = names[i];
        size_t slen = strlen(s);
        if (slen == len && !strncmp(s, word, len))
            return s;
        size_t d = hint_distance(word, len, s);
        if (d <= near_d && (!near || d < hint_distance(word, len, near)))
            near = s;
        if (len >= 3 && slen > len && hint_starts(s, word, len)) {
            abbrev = s;
            nabbrev++;
        }
        if (slen >= 4 && slen < len && hint_starts(word, s, slen) && (!stem || slen > strlen(stem)))
            stem = s;
    }
    if (near)
        return near;
    if (nabbrev == 1)
        return abbrev;
    return stem;
}
