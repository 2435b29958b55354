/* SPDX-License-Identifier: MIT */
/*
 * outq: bounded, non-blocking output for stdout and stderr (see outq.h).
 * Only a pipe or socket is queued (a terminal or file never blocks for
 * long): outq_install makes its fd non-blocking and puts a stdio cookie
 * stream in place of stdout/stderr, so every fprintf lands in
 * outq_write.  That writes what the fd takes now and keeps the rest in a
 * fixed ring per fd; when the ring is full the oldest output is dropped
 * and counted, and a note says how much once the reader catches up.
 * outq_pump (from the trial loop's tick) drains the rings; outq_finish
 * gives a slow reader a last few seconds at exit.
 */
#include "cli/outq.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct queue {
    int fd;
    int active;          /* the fd is non-blocking and queued */
    char *buf;           /* ring of OUTQ_CAP bytes, allocated on first use */
    size_t head, len;
    size_t dropped;      /* bytes dropped since the last note */
    size_t dropped_total;
};

static struct queue outq[3] = { { 0 }, { 1, 0, NULL, 0, 0, 0, 0 }, { 2, 0, NULL, 0, 0, 0, 0 } };

/* Write what the fd takes now; returns bytes written (0 when it would block). */
static size_t outq_try(int fd, const char *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return n; /* a closed reader (EPIPE): nothing will ever take it */
        break;
    }
    return done;
}

static void outq_drain(struct queue *q)
{
    while (q->len) {
        size_t chunk = q->len;
        if (q->head + chunk > OUTQ_CAP)
            chunk = OUTQ_CAP - q->head;
        size_t w = outq_try(q->fd, q->buf + q->head, chunk);
        q->head = (q->head + w) % OUTQ_CAP;
        q->len -= w;
        if (w < chunk)
            return;
    }
    if (q->dropped) {
        char note[128];
        int k = snprintf(note, sizeof note, "\nautobatch: %zu bytes of output were dropped: "
                         "nobody read them in time\n", q->dropped);
        size_t w = outq_try(q->fd, note, (size_t)k);
        if (w == (size_t)k)
            q->dropped = 0;
    }
}

static void outq_push(struct queue *q, const char *data, size_t n)
{
    if (!q->buf && !(q->buf = malloc(OUTQ_CAP))) {
        q->dropped += n;
        q->dropped_total += n;
        return;
    }
    size_t room = OUTQ_CAP - q->len;
    size_t take = n < room ? n : room;
    for (size_t i = 0; i < take; i++)
        q->buf[(q->head + q->len + i) % OUTQ_CAP] = data[i];
    q->len += take;
    q->dropped += n - take;
    q->dropped_total += n - take;
}

void outq_write(int fd, const char *data, size_t n)
{
    struct queue *q = fd == 1 || fd == 2 ? &outq[fd] : NULL;
    if (!q || !q->active) {
        while (n) {
            ssize_t w = write(fd, data, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return;
            data += w;
            n -= (size_t)w;
        }
        return;
    }
    outq_drain(q);
    if (!q->len) {
        size_t w = outq_try(fd, data, n);
        data += w;
        n -= w;
    }
    if (n)
        outq_push(q, data, n);
}

static ssize_t outq_cookie_write(void *cookie, const char *data, size_t n)
{
    outq_write((int)(long)cookie, data, n);
    return (ssize_t)n; /* queued or dropped: stdio must not see an error */
}

void outq_install(void)
{
    for (int fd = 1; fd <= 2; fd++) {
        struct stat st;
        if (fstat(fd, &st) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
            continue;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            continue;
        cookie_io_functions_t io = { NULL, outq_cookie_write, NULL, NULL };
        FILE *f = fopencookie((void *)(long)fd, "w", io);
        if (!f)
            continue;
        setvbuf(f, NULL, fd == 2 ? _IONBF : _IOLBF, 0);
        fflush(fd == 1 ? stdout : stderr);
        if (fd == 1)
            stdout = f;
        else
            stderr = f;
        outq[fd].active = 1;
    }
}

void outq_pump(void)
{
    for (int fd = 1; fd <= 2; fd++)
        if (outq[fd].active && (outq[fd].len || outq[fd].dropped))
            outq_drain(&outq[fd]);
}

size_t outq_finish(double max_wait_s)
{
    fflush(stdout);
    fflush(stderr);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        outq_pump();
        int busy = 0;
        struct pollfd pf[2];
        nfds_t k = 0;
        for (int fd = 1; fd <= 2; fd++)
            if (outq[fd].active && (outq[fd].len || outq[fd].dropped)) {
                pf[k].fd = fd;
                pf[k].events = POLLOUT;
                k++;
                busy = 1;
            }
        if (!busy)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = max_wait_s - ((double)(now.tv_sec - t0.tv_sec) +
                                    (double)(now.tv_nsec - t0.tv_nsec) / 1e9);
        if (left <= 0)
            break;
        poll(pf, k, (int)(left * 1000) + 1);
    }
    size_t total = 0;
    for (int fd = 1; fd <= 2; fd++) {
        total += outq[fd].dropped_total + outq[fd].len; /* what is still queued is lost too */
        free(outq[fd].buf);
        outq[fd].buf = NULL;
        outq[fd].len = 0;
    }
    return total;
}
