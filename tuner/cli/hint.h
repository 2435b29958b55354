/* SPDX-License-Identifier: MIT */
/*
 * hint: "did you mean" for words the user typed: an option's name, a
 * preset's, a subcommand's, a help topic.  Pure functions over strings;
 * the caller words the message (cli.c, subcmd.c).  Compiled into abcore
 * so that its unit test links it; it prints nothing.
 *
 * Words are compared without regard to case, and '-' and '_' count as the
 * same letter (--grad_accum is --grad-accum, as in the trainers' own
 * spellings).
 */
#ifndef AB_HINT_H
#define AB_HINT_H

#include <stddef.h>

/**
 * The optimal-string-alignment distance between a[0..alen) and b: the
 * fewest insertions, deletions, substitutions and swaps of two adjacent
 * letters that turn one into the other (Damerau-Levenshtein, each part
 * edited once).  Words longer than HINT_MAX_WORD compare as far apart
 * (HINT_FAR).
 */
#define HINT_MAX_WORD 64
#define HINT_FAR 1000
size_t hint_distance(const char *a, size_t alen, const char *b);

/**
 * The name in names[0..n) (or up to a NULL entry, whichever comes first)
 * the user most likely meant by word[0..len), or NULL when none is close
 * enough to name.  In order:
 *   1. the nearest name within 1 edit (words of 3 or 4 letters) or 2
 *      (5 letters and more), the first listed on a tie; words of 1 or 2
 *      letters are too short to guess from;
 *   2. the one name that starts with word (an abbreviation, 3 letters or
 *      more: "trial-mem" for "trial-memory-limit");
 *   3. the longest name of 4 letters or more that word starts with
 *      ("batch-size" for "batch").
 * A name equal to word is returned as it is.
 */
const char *hint_closest(const char *word, size_t len, const char *const *names, size_t n);

#endif
