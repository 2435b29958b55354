/* SPDX-License-Identifier: MIT */
/*
 * events: --events FILE|-, one JSON object per line as things happen, for
 * dashboards and CI that follow a run:
 *
 *   {"event":"start","t":0.0,"command":[...],"batch":{"min","max","step"},
 *    "launcher":"local","slots":1}
 *   {"event":"trial_start","t":T,"trial":N,"micro_batch":M,"grad_accum":A,
 *    "checkpointing":false,"round":R,"devices":"..."}   (round, devices: --gpus)
 *   {"event":"step","t":T,"trial":N,"step":S,"it_per_s":X}  (trials run one
 *    at a time; at most 10 a second per trial)
 *   {"event":"trial_end","t":T,"id":N,"micro_batch":M,...}  (the trial as in
 *    the results file's trials[]: outcome, samples_per_s, peak_mem_bytes, ...)
 *   {"event":"choice","t":T,"best":{trial}|null,"runner_up":{trial}|null}
 *   {"event":"end","t":T,"exit":0,"trials":N,"wall_s":W}
 *
 * t is seconds since the start.  Each line is written and flushed whole
 * (a reader never sees half an object); a FIFO or a pipe works.  The
 * file is opened non-blocking: a regular file (created when missing) is
 * appended to; a character device is written through; a FIFO waits at
 * most EVENTS_READER_WAIT_S for a reader to open it and is refused after
 * that (then the run stops before its first trial), and once open, a
 * reader that stops reading holds the run up as a full pipe does;
 * anything else (a directory, a socket) is refused.  The
 * stream is process-wide: only the controller writes it (workers of
 * --gpus never do).
 */
#ifndef AB_EVENTS_H
#define AB_EVENTS_H

#include <jansson.h>
#include <stddef.h>

/** How long events_open waits for a reader of a FIFO, in seconds. */
#define EVENTS_READER_WAIT_S 10

/** Open the stream ("-": stdout) as described above.  0, or -1 with a
 *  reason in err. */
int events_open(const char *path, char *err, size_t errlen);

/** 1 when a stream is open. */
int events_on(void);

/** Write obj (stolen) with "event": name and "t" first.  No-op when off. */
void events_emit(const char *name, json_t *obj);

void events_close(void);

#endif
