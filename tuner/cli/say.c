/* SPDX-License-Identifier: MIT */
/*
 * say: untrusted text made safe for a terminal (see say.h), through
 * util/tclean: a whole, printable UTF-8 character is copied, anything
 * else becomes "\xNN" (four visible characters); newlines are kept.
 */
#include "cli/say.h"
#include "util/tclean.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

char *say_clean(const char *s, char *out, size_t outlen)
{
    return tclean(out, outlen, s, (size_t)-1, 1);
}

void say_vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    char *text = NULL, *safe = NULL;
    if (vasprintf(&text, fmt, ap) < 0)
        text = NULL;
    size_t cap = text ? strlen(text) * 4 + 1 : 0;
    if (text && (safe = malloc(cap)))
        say_clean(text, safe, cap);
    fprintf(f, "%s%s\n", prefix, safe ? safe : "out of memory");
    free(safe);
    free(text);
}

void say_line(FILE *f, const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_vline(f, prefix, fmt, ap);
    va_end(ap);
}

void say_fputs(FILE *f, const char *s)
{
    size_t cap = strlen(s) * 4 + 1;
    char *safe = malloc(cap);
    fputs(safe ? say_clean(s, safe, cap) : "(out of memory)", f);
    free(safe);
}

size_t say_width(int fd)
{
    if (!isatty(fd))
        return 0;
    struct winsize ws;
    long cols = 0;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        cols = ws.ws_col;
    else if (getenv("COLUMNS"))
        cols = strtol(getenv("COLUMNS"), NULL, 10);
    if (cols < 20)
        cols = cols > 0 ? 20 : 80; /* too narrow to lay out: let it wrap */
    return (size_t)cols - 1;
}

size_t say_columns(const char *s, size_t n)
{
    size_t cols = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        cols += ((unsigned char)s[i] & 0xC0) != 0x80;
    return cols;
}

/* The bytes of s that fit in cols columns, never ending inside a character. */
static size_t say_fit(const char *s, size_t len, size_t cols)
{
    size_t i = 0, used = 0;
    while (i < len) {
        size_t j = i + 1;
        while (j < len && ((unsigned char)s[j] & 0xC0) == 0x80)
            j++;
        if (used + 1 > cols)
            break;
        used++;
        i = j;
    }
    return i;
}

/* say_wrap and say_fold: at spaces (words) or at the width (fold). */
static void say_lines(FILE *f, const char *prefix, const char *indent, size_t width,
                      const char *text, int words)
{
    size_t cap = strlen(text) * 4 + 1;
    char *safe = malloc(cap);
    if (!safe || !width) {
        if (safe)
            fprintf(f, "%s%s\n", prefix, say_clean(text, safe, cap));
        else
            fprintf(f, "%sout of memory\n", prefix);
        free(safe);
        return;
    }
    say_clean(text, safe, cap);
    /* A line break in the text starts a new line too. */
    const char *lead = prefix, *s = safe;
    for (;;) {
        size_t room = width > strlen(lead) ? width - strlen(lead) : 1;
        size_t len = strcspn(s, "\n");
        size_t take = len;
        if (say_columns(s, len) > room) {
            /* The last space that leaves the line within room; else cut
             * the word between two characters. */
            size_t fit = say_fit(s, len, room), cut = fit;
            while (words && cut > 0 && s[cut] != ' ')
                cut--;
            take = words && cut > 0 ? cut : (fit > 0 ? fit : 1);
        }
        size_t end = take;
        while (words && end > 0 && s[end - 1] == ' ')
            end--;
        fprintf(f, "%s%.*s\n", lead, (int)end, s);
        s += take;
        while (words && *s == ' ')
            s++;
        if (*s == '\n')
            s++;
        else if (!*s)
            break;
        if (!*s)
            break;
        lead = indent;
    }
    free(safe);
}

void say_wrap(FILE *f, const char *prefix, const char *indent, size_t width, const char *text)
{
    say_lines(f, prefix, indent, width, text, 1);
}

void say_fold(FILE *f, const char *prefix, const char *indent, size_t width, const char *text)
{
    say_lines(f, prefix, indent, width, text, 0);
}
