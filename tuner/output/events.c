/* SPDX-License-Identifier: MIT */
/*
 * events: the --events stream (see events.h).  One process-wide stream:
 * stdout for "-", else the file opened for appending (a FIFO a follower
 * already reads works).  Each event is one jansson object, "event" and
 * "t" (seconds on the monotonic clock since events_open) first, dumped
 * compact on one line and flushed at once; emit takes ownership of the
 * object, also when no stream is open.
 */
#include "output/events.h"
#include "util/mono.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/errbuf.h"

static FILE *events_f;
static double events_t0;

int events_open(const char *path, char *err, size_t errlen)
{
    events_t0 = mono_now();
    if (!strcmp(path, "-")) {
        events_f = stdout;
        return 0;
    }
    /* appended: a FIFO or a file that a follower already tails */
    events_f = fopen(path, "a");
    if (!events_f) {
        errbuf_set(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int events_on(void)
{
    return events_f != NULL;
}

void events_emit(const char *name, json_t *obj)
{
    if (!events_f || !obj) {
        json_decref(obj);
        return;
    }
    json_t *line = json_pack("{s:s, s:f}", "event", name, "t", mono_now() - events_t0);
    if (line)
        json_object_update(line, obj);
    char *text = line ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (text) {
        fprintf(events_f, "%s\n", text);
        fflush(events_f);
    }
    free(text);
    json_decref(line);
    json_decref(obj);
}

void events_close(void)
{
    if (events_f && events_f != stdout)
        fclose(events_f);
    events_f = NULL;
}
