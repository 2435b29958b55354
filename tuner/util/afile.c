/* SPDX-License-Identifier: MIT */
/*
 * afile: the temp-file-fsync-rename dance behind every file autobatch
 * writes, the results file and users' configs alike; the write-through
 * of devices and FIFOs; and the writers' lock (see afile.h).
 */
#include "util/afile.h"
#include "util/mono.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The mark in a temporary file's name, before the writer's pid. */
#define AFILE_TMP_MARK ".autobatch-tmp-"

/* ------------------------------------------------------- what a path is */

/* Does path name one of our open descriptors (then it is written through,
 * never replaced: replacing the file behind `2>log` would lose the log)? */
static int afile_fd_alias(const char *path)
{
    return !strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr") ||
           !strncmp(path, "/dev/fd/", 8) || !strncmp(path, "/proc/self/fd/", 14) ||
           !strncmp(path, "/proc/thread-self/fd/", 21);
}

/* Refuse what is never written: a directory, a socket, a block device.
 * 0 for a regular file, a character device or a FIFO. */
static int afile_refuse_kind(const char *path, const struct stat *st, char *err, size_t errlen)
{
    const char *what = S_ISDIR(st->st_mode)    ? "a directory"
                     : S_ISSOCK(st->st_mode)   ? "a socket"
                     : S_ISBLK(st->st_mode)    ? "a block device"
                     : S_ISREG(st->st_mode) || S_ISCHR(st->st_mode) || S_ISFIFO(st->st_mode)
                         ? NULL
                         : "not a file";
    if (what)
        snprintf(err, errlen, "cannot write '%s': it is %s", path, what);
    return what ? -1 : 0;
}

/* Is path something to write through rather than replace?  1 (st filled),
 * 0 for a regular file or a name that does not exist, -1 with a reason
 * for what is refused. */
static int afile_through(const char *path, struct stat *st, char *err, size_t errlen)
{
    if (stat(path, st))
        return 0; /* nothing there (or a dangling link): made anew */
    if (S_ISREG(st->st_mode) && !afile_fd_alias(path))
        return 0;
    return afile_refuse_kind(path, st, err, errlen) ? -1 : 1;
}

/* ------------------------------------------------------------ helpers */

int afile_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Write into the device, FIFO or descriptor at path, in place. */
static int afile_write_through(const char *path, const struct stat *st, const void *data,
                               size_t len, char *err, size_t errlen)
{
    int fifo = S_ISFIFO(st->st_mode);
    int flags = O_WRONLY | O_NOCTTY | O_CLOEXEC;
    if (fifo)
        flags |= O_NONBLOCK; /* no reader: ENXIO now, not a hang */
    if (S_ISREG(st->st_mode))
        flags |= O_APPEND; /* a descriptor's file: after what is there */
    int fd = open(path, flags);
    if (fd < 0) {
        if (fifo && errno == ENXIO)
            snprintf(err, errlen, "cannot write '%s': it is a FIFO and nothing reads it; start "
                                  "its reader first", path);
        else
            snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    /* It may have changed between the stat and the open. */
    struct stat now;
    if (fstat(fd, &now)) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (afile_refuse_kind(path, &now, err, errlen)) {
        close(fd);
        return -1;
    }
    /* The reader is there: from now on a full FIFO makes us wait for it. */
    int fl = fifo ? fcntl(fd, F_GETFL) : 0;
    if (fl < 0 || (fifo && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) ||
        afile_write_all(fd, data, len)) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (close(fd) && errno != EINTR) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------- atomic replacement */

/* Resolve symlinks so that the link's target is what gets replaced. */
static int afile_target(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char *real = realpath(path, NULL);
        if (!real) {
            snprintf(err, errlen, "cannot follow symlink '%s': %s", path, strerror(errno));
            return -1;
        }
        snprintf(out, outlen, "%s", real);
        free(real);
        return 0;
    }
    if (strlen(path) >= outlen) {
        snprintf(err, errlen, "path too long: '%s'", path);
        return -1;
    }
    snprintf(out, outlen, "%s", path);
    return 0;
}

/* ------------------------------------------------------ new files only */

/* n characters from [A-Za-z0-9], drawn from the kernel's random pool:
 * a name nobody can guess, so nobody can plant anything under it first. */
static int afile_random_chars(char *out, size_t n)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char raw[64];
    if (n > sizeof raw)
        return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(raw + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = set[raw[i] % (sizeof set - 1)]; /* 256 % 62: a bias of no use to a guesser */
    out[n] = '\0';
    return 0;
}

int afile_open_new(const char *dir, const char *prefix, size_t nrand, const char *suffix,
                   unsigned mode, char *out, size_t outlen, char *err, size_t errlen)
{
    for (int tries = 0; tries < 100; tries++) {
        char r[65];
        if (afile_random_chars(r, nrand)) {
            snprintf(err, errlen, "cannot make a file in '%s': no random bytes: %s", dir,
                     strerror(errno));
            return -1;
        }
        if ((size_t)snprintf(out, outlen, "%s/%s%s%s", dir, prefix, r, suffix) >= outlen) {
            snprintf(err, errlen, "path too long: '%s/%s'", dir, prefix);
            return -1;
        }
        /* O_EXCL|O_NOFOLLOW: a name that exists, a link above all, is
         * never opened; we only ever write a file we have just made. */
        int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                      (mode_t)mode & 0777);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            snprintf(err, errlen, "cannot make a file in '%s': %s", dir, strerror(errno));
            return -1;
        }
    }
    snprintf(err, errlen, "cannot make a file in '%s': every name tried exists", dir);
    return -1;
}

int afile_create(const char *dir, const char *prefix, const char *suffix, const void *data,
                 size_t len, unsigned mode, char *out, size_t outlen, char *err, size_t errlen)
{
    int fd = afile_open_new(dir, prefix, AFILE_RANDOM_LEN, suffix, mode, out, outlen, err, errlen);
    if (fd < 0)
        return -1;
    /* The mode again, past the umask: a 0600 original gives a 0600 copy,
     * a 0644 one a 0644 copy. */
    if (fchmod(fd, (mode_t)mode & 0777) || afile_write_all(fd, data, len)) {
        snprintf(err, errlen, "cannot write '%s': %s", out, strerror(errno));
        close(fd);
        unlink(out);
        return -1;
    }
    if (close(fd) && errno != EINTR) {
        snprintf(err, errlen, "cannot write '%s': %s", out, strerror(errno));
        unlink(out);
        return -1;
    }
    return 0;
}

/* The temporary file beside target: same directory, hidden, our pid (so
 * that a sweep can tell a killed writer's file from a live one's), then
 * six random characters; made with O_EXCL|O_NOFOLLOW. */
static int afile_mktemp(const char *target, char *out, size_t outlen, char *err, size_t errlen)
{
    char a[PATH_MAX], b[PATH_MAX], prefix[PATH_MAX + 64];
    snprintf(a, sizeof a, "%s", target);
    snprintf(b, sizeof b, "%s", target);
    snprintf(prefix, sizeof prefix, ".%s" AFILE_TMP_MARK "%ld-", basename(b), (long)getpid());
    return afile_open_new(dirname(a), prefix, 6, "", 0600, out, outlen, err, errlen);
}

/* Resolve path, refuse a directory in its place, and create the temporary
 * file beside the target.  Returns the temporary file's fd (its name in
 * tmp), or -1 with a reason; st and exists describe the current target. */
static int afile_open_tmp(const char *path, char *target, size_t tlen, char *tmp, size_t tmplen,
                          struct stat *st, int *exists, char *err, size_t errlen)
{
    if (afile_target(path, target, tlen, err, errlen))
        return -1;
    *exists = stat(target, st) == 0;
    if (*exists && S_ISDIR(st->st_mode)) {
        snprintf(err, errlen, "cannot write '%s': it is a directory", path);
        return -1;
    }
    int fd = afile_mktemp(target, tmp, tmplen, err, errlen);
    if (fd < 0)
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    return fd;
}

int afile_write(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    mode_t um = umask(0);
    umask(um);
    return afile_write_mode(path, data, len, 0666 & ~um, err, errlen);
}

int afile_write_mode(const char *path, const void *data, size_t len, unsigned new_mode,
                     char *err, size_t errlen)
{
    struct stat st;
    switch (afile_through(path, &st, err, errlen)) {
    case -1: return -1;
    case 1: return afile_write_through(path, &st, data, len, err, errlen);
    }
    char target[PATH_MAX], tmp[PATH_MAX + 64];
    int exists;
    int fd = afile_open_tmp(path, target, sizeof target, tmp, sizeof tmp, &st, &exists, err, errlen);
    if (fd < 0)
        return -1;
    mode_t mode;
    if (exists) {
        mode = st.st_mode & 07777;
        if (fchown(fd, st.st_uid, st.st_gid)) {
            /* Not ours to give away: the new file keeps our ownership. */
        }
    } else {
        mode = (mode_t)new_mode & 07777;
    }
    if (fchmod(fd, mode) || afile_write_all(fd, data, len) || fsync(fd)) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) || rename(tmp, target)) {
        snprintf(err, errlen, "cannot replace '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* Make the rename itself durable. */
    char d[PATH_MAX];
    snprintf(d, sizeof d, "%s", target);
    int dfd = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int afile_write_nofollow(const char *path, const void *data, size_t len, unsigned mode,
                         char *err, size_t errlen)
{
    char tmp[PATH_MAX + 64];
    int fd = afile_mktemp(path, tmp, sizeof tmp, err, errlen);
    if (fd < 0)
        return -1;
    if (fchmod(fd, (mode_t)mode & 07777) || afile_write_all(fd, data, len) || fsync(fd)) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    /* rename() replaces the name itself: a link planted at path is
     * replaced by our file, and what it pointed at is never touched. */
    if (close(fd) || rename(tmp, path)) {
        snprintf(err, errlen, "cannot replace '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int afile_check_writable(const char *path, char *err, size_t errlen)
{
    struct stat st;
    switch (afile_through(path, &st, err, errlen)) {
    case -1: return -1;
    case 1:
        if (access(path, W_OK)) {
            snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    char target[PATH_MAX], tmp[PATH_MAX + 64];
    int exists;
    int fd = afile_open_tmp(path, target, sizeof target, tmp, sizeof tmp, &st, &exists, err, errlen);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(tmp);
    return 0;
}

long afile_tmp_pid(const char *name)
{
    const char *m = NULL;
    for (const char *p = name; (p = strstr(p, AFILE_TMP_MARK)); p++)
        m = p;
    if (name[0] != '.' || !m || m == name)
        return 0;
    const char *d = m + strlen(AFILE_TMP_MARK);
    if (!isdigit((unsigned char)*d))
        return 0;
    char *end;
    errno = 0;
    long pid = strtol(d, &end, 10);
    if (errno || pid <= 0 || *end != '-' || strlen(end + 1) != 6)
        return 0;
    for (const char *x = end + 1; *x; x++)
        if (!isalnum((unsigned char)*x))
            return 0;
    return pid;
}

/* ------------------------------------------------------------- the lock */

int afile_lock(const char *path, char *err, size_t errlen)
{
    double deadline = mono_now() + AFILE_LOCK_WAIT_S;
    long pause_us = 1000;
    for (;;) {
        /* Read-only is enough for flock; O_NONBLOCK so that a FIFO put
         * in the file's place cannot hang the open. */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        struct stat held, now;
        if (fd < 0) {
            snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
            return -1;
        }
        if (fstat(fd, &held) || !S_ISREG(held.st_mode)) {
            snprintf(err, errlen, "cannot lock '%s': not a regular file", path);
            close(fd);
            return -1;
        }
        while (flock(fd, LOCK_EX | LOCK_NB)) {
            if (errno != EWOULDBLOCK && errno != EINTR) {
                snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(errno));
                close(fd);
                return -1;
            }
            if (mono_now() > deadline) {
                snprintf(err, errlen, "'%s' stayed locked by another writer for %ds; try again "
                                      "once it is done", path, AFILE_LOCK_WAIT_S);
                close(fd);
                return -1;
            }
            struct timespec ts = { 0, pause_us * 1000 };
            nanosleep(&ts, NULL);
            if (pause_us < 50000)
                pause_us *= 2;
        }
        /* The holder before us may have replaced the file (a rename):
         * then our lock is on the old inode, and the new one is what
         * counts. */
        if (!stat(path, &now) && now.st_dev == held.st_dev && now.st_ino == held.st_ino)
            return fd;
        close(fd);
    }
}

void afile_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* closing the last descriptor releases the flock */
}
