/* SPDX-License-Identifier: MIT */
/*
 * tclean: untrusted text (a trainer's output, a file's bytes) made safe
 * to show.  One pass: a whole, printable UTF-8 character is copied;
 * anything else (C0 and C1 controls, DEL, malformed or overlong UTF-8)
 * becomes "\xNN", four visible characters.  Shared by the lines the
 * command line prints (tuner/cli/say.c) and the results reader's error
 * text (tuner/output/results.c).
 */
#ifndef AUTOBATCH_TCLEAN_H
#define AUTOBATCH_TCLEAN_H

#include <stddef.h>

/**
 * Write at most max bytes of s (up to its NUL) into out (outlen bytes,
 * always NUL-terminated when outlen > 0), escaped as above; newlines are
 * kept when keep_newline, else escaped too.  Output that would not fit
 * whole is cut before the character, never inside one.  Returns out.
 */
char *tclean(char *out, size_t outlen, const char *s, size_t max, int keep_newline);

#endif
