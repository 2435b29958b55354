/* SPDX-License-Identifier: MIT */
/*
 * errbuf: the one way library modules fill their caller's error buffer.
 *
 * Every library function that can fail takes `char *err, size_t errlen`
 * and writes one lowercase line there; these two calls do the writing, and
 * tolerate a NULL or empty buffer (the caller did not ask why).
 */
#ifndef AB_ERRBUF_H
#define AB_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>

/** printf into err[0..errlen); nothing when err is NULL or errlen 0. */
void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** The same with a va_list, for modules' own wrappers. */
void errbuf_vset(char *err, size_t errlen, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif
