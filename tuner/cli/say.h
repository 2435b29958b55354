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

#endif
