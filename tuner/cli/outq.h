/* SPDX-License-Identifier: MIT */
/*
 * outq: autobatch's own output never blocks the supervision loop.
 *
 * When stdout or stderr is a pipe, FIFO or socket that nobody reads (CI
 * log collectors stall, `autobatch ... 2>&1 | slow`), a plain write blocks
 * once the pipe is full, and a blocked autobatch acts on no timeout and
 * no signal.  outq_install() makes those two descriptors non-blocking and
 * puts a bounded queue in front of each (stdout and stderr become
 * fopencookie streams over it): what cannot be written now waits in the
 * queue, up to OUTQ_CAP bytes; beyond that it is dropped and counted, and
 * a note saying how much was dropped goes out as soon as the reader
 * catches up.  Terminals and regular files are left as they are (a
 * terminal's file description is shared with the shell, which must not
 * inherit a non-blocking descriptor).
 *
 * Life cycle: outq_install() first thing in main; outq_write() for raw
 * bytes (the command's output passed through); outq_pump() from the
 * trial loop's tick; outq_finish(max_wait_s) before exit.
 */
#ifndef AB_OUTQ_H
#define AB_OUTQ_H

#include <stddef.h>

#define OUTQ_CAP (1 << 20)

/** Set up fds 1 and 2 as described.  Never fails: where it cannot, output
 *  stays as it was. */
void outq_install(void);

/** Write n bytes to fd (1 or 2) through its queue; never blocks on a
 *  queued descriptor.  Other fds are written directly. */
void outq_write(int fd, const char *data, size_t n);

/** Move queued bytes out as far as the readers allow, without blocking. */
void outq_pump(void);

/** Wait up to max_wait_s for the queues to drain; then give up on the
 *  rest.  Returns the bytes dropped over the whole run. */
size_t outq_finish(double max_wait_s);

#endif
