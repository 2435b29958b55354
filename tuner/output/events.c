/* SPDX-License-Identifier: MIT */
/*
 * events: the --events stream (see events.h).  One process-wide stream:
 * stdout for "-", else the file opened for appending, non-blocking (a
 * FIFO gets EVENTS_READER_WAIT_S for its reader to come).  Each event is one jansson object, "event" and
 * "t" (seconds on the monotonic clock since events_open) first, dumped
 * compact on one line and flushed at once; emit takes ownership of the
 * object, also when no stream is open.
 */
#include "output/events.h"
#include "util/mono.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    /* Appended: a FIFO or a file that a follower already tails.
     * O_NONBLOCK, so that a FIFO nobody reads answers ENXIO at once
     * instead of hanging the open; we then wait a while for its reader. */
    int fd;
    double deadline = events_t0 + EVENTS_READER_WAIT_S;
    while ((fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                      0666)) < 0) {
        if (errno == EINTR)
            continue;
        if (errno != ENXIO) {
            errbuf_set(err, errlen, "cannot open '%s': %s", path, strerror(errno));
            return -1;
        }
        if (mono_now() > deadline) {
            errbuf_set(err, errlen, "'%s' is a FIFO and nothing opened it for reading in %d s; "
                       "start its reader first", path, EVENTS_READER_WAIT_S);
            return -1;
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) || fl < 0) {
        errbuf_set(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
        errbuf_set(err, errlen, "cannot write '%s': not a file, FIFO or character device", path);
        close(fd);
        return -1;
    }
    /* From now on writes wait for the reader, as a pipe's do. */
    if (fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) || !(events_f = fdopen(fd, "a"))) {
        errbuf_set(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        close(fd);
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
