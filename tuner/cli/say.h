/* SPDX-License-Identifier: MIT */
/*
 * say: text autobatch did not write, made safe for a terminal before it
 * goes into one of autobatch's own lines.
 *
 * A trainer's output (an OOM line, a crash's last lines), a file's bytes
 * quoted in an error, a command line: any of them may hold escape
 * sequences (OSC 52 clipboard writes, a window title, clear-screen) that a
 * terminal would obey.  Every line of autobatch's own (progress.c's notes,
 * a crash's tail, cli_error) passes its text through here: printable
 * UTF-8 stays as it is, and every other byte (C0 controls but the line
 * break, DEL, C1 controls, malformed UTF-8) is shown as the visible text
 * \xNN, as `autobatch matrix` and the results reader show a hostile name.
 *
 * The trainer's own output, passed through as it arrives when it is shown
 * (not --quiet, not hidden on a terminal), is not autobatch's line and is
 * written unchanged, as running the trainer by hand would show it.
 */
#ifndef AB_SAY_H
#define AB_SAY_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/**
 * s made safe (see above) into out, cut to fit outlen without cutting an
 * escape or a UTF-8 character; returns out.  The line break is kept.
 */
char *say_clean(const char *s, char *out, size_t outlen);

/**
 * Write prefix (autobatch's own, written as it is), then the printf-style
 * text made safe, then a line break, to f.  Text that cannot be worded
 * (no memory) is written as "out of memory".
 */
void say_vline(FILE *f, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/** say_vline() with the arguments given here. */
void say_line(FILE *f, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Write s made safe to f, with nothing added (for a word of a line). */
void say_fputs(FILE *f, const char *s);

/**
 * The columns a line written to fd may use: the terminal's width less
 * one (a line that ends in the last column leaves some terminals' cursor
 * on the next line), from the terminal itself, else $COLUMNS, else 80;
 * 0 when fd is not a terminal (no limit: a log keeps its lines whole).
 */
size_t say_width(int fd);

/** The columns s's first n bytes take: one per UTF-8 character (text
 *  made safe holds no controls and no malformed sequences). */
size_t say_columns(const char *s, size_t n);

/**
 * Write prefix, then text made safe, to f as say_line() does, but broken
 * at spaces into lines of at most width columns; lines after the first
 * start with indent instead of prefix, and a word longer than a line is
 * cut between two characters.  prefix and indent are autobatch's own,
 * written as they are (no control characters: they count one column per
 * byte).  width 0: one line, as say_line().
 */
void say_wrap(FILE *f, const char *prefix, const char *indent, size_t width, const char *text);

/**
 * say_wrap() for text that is not prose (a traceback's line, code): cut
 * at the width between two characters, every space kept, as a terminal
 * would wrap it but under autobatch's own gutter (indent).
 */
void say_fold(FILE *f, const char *prefix, const char *indent, size_t width, const char *text);

#endif
