/* SPDX-License-Identifier: MIT */
/*
 * leftovers: sweeping up after runs that were killed (see leftovers.h).
 * Ownership is a lock, not a pid: each run holds flock(LOCK_EX) on its
 * scratch directory's owner file for its whole life, and a sweep removes
 * a directory only while it holds that lock itself.  A pid means nothing
 * in another PID namespace (a container sharing /tmp, a job on another
 * node sharing the project), a lock means the same everywhere the file
 * is seen.  Trial copies of a config and temporary files of an unfinished
 * atomic write carry their writer's pid in their names: they are judged
 * with what the sweep learnt of the runs under the scratch base (below).
 * Only our own user's files are touched, and never through a symbolic
 * link.
 */
#include "trial/leftovers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/afile.h"

/* The start of a small file (never through a link), NUL-terminated; -1
 * when it cannot be read or is empty. */
static int leftovers_read(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* Start time of pid in clock ticks since boot, or 0 when it is gone (or
 * a zombie, which holds nothing). */
static unsigned long long leftovers_starttime(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (leftovers_read(path, buf, sizeof buf))
        return 0;
    /* comm may hold spaces and parentheses: fields start after the last ')' */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z')
        return 0;
    p += 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    return p ? strtoull(p, NULL, 10) : 0;
}

int leftovers_mark(const char *dir)
{
    /* Made under another name, locked, then renamed to `owner`: a sweep
     * never sees an owner file that is not yet locked. */
    char path[PATH_MAX], tmp[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/owner", dir) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/owner.new", dir) >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char line[96];
    int n = snprintf(line, sizeof line, "%ld %llu\n", (long)getpid(),
                     leftovers_starttime((long)getpid()));
    if (flock(fd, LOCK_EX | LOCK_NB) || write(fd, line, (size_t)n) != n || rename(tmp, path)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

void leftovers_unmark(int fd)
{
    if (fd >= 0)
        close(fd);
}

static int leftovers_rm(const char *path, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb;
    (void)f;
    if (type == FTW_DP)
        rmdir(path);
    else
        unlink(path); /* files, and links, which are never followed */
    return 0;
}

void leftovers_remove_tree(const char *path)
{
    nftw(path, leftovers_rm, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* What a sweep learns of the runs whose scratch directories it sees:
 * the pids of those alive (their lock is held) and of those it found
 * dead.  A pid is only meaningful in its writer's PID namespace, so a
 * trial copy or temporary file named with pid P is only judged dead when
 * no live run anywhere under the scratch base recorded P. */
struct leftovers_pids {
    long live[64], dead[64];
    int nlive, ndead;
};

static void leftovers_pids_add(long *v, int *n, long pid)
{
    if (*n < 64)
        v[(*n)++] = pid;
}

static int leftovers_pids_has(const long *v, int n, long pid)
{
    for (int i = 0; i < n; i++)
        if (v[i] == pid)
            return 1;
    return 0;
}

/* Lock DIR/owner (LOCK_EX|LOCK_NB).  Returns the descriptor that holds
 * the lock when its run is gone: nobody holds the lock, and the pid it
 * records is not a live process of ours with the same start time (a run
 * of an older autobatch, which held no lock).  -1 when the run is alive,
 * or when there is no owner file we can read (not ours to judge).  *pid
 * gets the pid the file records (0 when none). */
static int leftovers_lock_dead(const char *dir, long *pid)
{
    char path[PATH_MAX], buf[96];
    *pid = 0;
    if ((size_t)snprintf(path, sizeof path, "%s/owner", dir) >= sizeof path)
        return -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = fstat(fd, &st) || !S_ISREG(st.st_mode) ? -1 : read(fd, buf, sizeof buf - 1);
    unsigned long long start;
    if (n <= 0) {
        close(fd);
        return -1;
    }
    buf[n] = '\0';
    if (sscanf(buf, "%ld %llu", pid, &start) != 2 || *pid <= 0) {
        *pid = 0;
        close(fd);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        close(fd); /* held: its run is alive, in whatever PID namespace */
        return -1;
    }
    unsigned long long now = leftovers_starttime(*pid);
    if (now != 0 && now == start) {
        close(fd);
        return -1;
    }
    return fd;
}

static void leftovers_note(struct leftovers_report *rep, const char *path)
{
    size_t n = strlen(path);
    if (!rep->first[0]) {
        /* the end of a long path says more than its start */
        const char *tail = n < sizeof rep->first ? path : path + n - (sizeof rep->first - 1);
        memcpy(rep->first, tail, strlen(tail) + 1);
    }
}

/* How old a temporary file must be before a sweep may judge it: one
 * lives for a single write (milliseconds), so one older than this whose
 * writer is not found is a killed write's, whichever namespace it ran in. */
#define LEFTOVERS_TEMP_AGE_S 60

/* Remove the trial copies and temporary files in directory d whose
 * writer is gone.  A trial copy lives as long as its trial, so it goes
 * only when this sweep found its run's scratch directory dead (lock free);
 * a temporary file when its writer is not found and it is older than a
 * write takes.  Either way: never one whose pid is a live process here
 * or a live run's (lock held) anywhere under the scratch base, and only
 * while we hold its own lock (LOCK_EX|LOCK_NB), so a writer that locks
 * it keeps it. */
static void leftovers_sweep_dir(const char *d, const struct leftovers_pids *pids,
                                struct leftovers_report *rep)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    time_t now = time(NULL);
    while (dp && (e = readdir(dp))) {
        /* <stem>.autobatch-trial-<pid>-<trial>[-<random>]<ext>, or afile's
         * .<name>.autobatch-tmp-<pid>-XXXXXX */
        const char *m = strstr(e->d_name, ".autobatch-trial-");
        long pid = 0;
        char *end = NULL;
        if (m) {
            pid = strtol(m + 17, &end, 10);
            if (*end != '-')
                pid = 0;
        }
        int temp = !pid && (pid = afile_tmp_pid(e->d_name)) > 0;
        if (pid <= 0 || pid == (long)getpid())
            continue;
        if (leftovers_starttime(pid) != 0 || leftovers_pids_has(pids->live, pids->nlive, pid))
            continue; /* a live process or run has that pid: maybe a run beside ours */
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", d, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (temp ? now - st.st_mtime < LEFTOVERS_TEMP_AGE_S
                 : !leftovers_pids_has(pids->dead, pids->ndead, pid)) {
            rep->kept++;
            continue; /* its writer may be alive where we cannot see it */
        }
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB)) {
            close(fd);
            rep->kept++;
            continue;
        }
        if (!unlink(path)) {
            leftovers_note(rep, path);
            if (temp)
                rep->temps++;
            else
                rep->copies++;
        }
        close(fd);
    }
    if (dp)
        closedir(dp);
}

int leftovers_sweep(const char *tmpbase, const char *self, const char *const *dirs,
                    struct leftovers_report *rep)
{
    memset(rep, 0, sizeof *rep);
    struct leftovers_pids pids = { .nlive = 0 };
    DIR *d = opendir(tmpbase);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "autobatch-", 10) || strlen(e->d_name) != 16)
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", tmpbase, e->d_name);
        struct stat st;
        if (self && !strcmp(path, self))
            continue;
        if (lstat(path, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
            continue;
        long pid;
        int fd = leftovers_lock_dead(path, &pid);
        if (fd < 0) {
            if (pid > 0) {
                leftovers_pids_add(pids.live, &pids.nlive, pid);
                rep->kept++;
            }
            continue;
        }
        /* Removed while we hold its lock: its run is gone. */
        leftovers_remove_tree(path);
        close(fd);
        leftovers_pids_add(pids.dead, &pids.ndead, pid);
        leftovers_note(rep, path);
        rep->dirs++;
    }
    if (d)
        closedir(d);

    /* Each directory once, however many of the files live in it. */
    for (size_t i = 0; dirs && dirs[i]; i++) {
        struct stat si, sj;
        int seen = stat(dirs[i], &si) != 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !stat(dirs[j], &sj) && si.st_dev == sj.st_dev && si.st_ino == sj.st_ino;
        if (!seen)
            leftovers_sweep_dir(dirs[i], &pids, rep);
    }
    return rep->dirs + rep->copies + rep->temps;
}
