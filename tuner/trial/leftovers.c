/* SPDX-License-Identifier: MIT */
/*
 * leftovers: sweeping up after runs that were killed (see leftovers.h).
 * Each run writes "PID STARTTIME" into its scratch directory's owner
 * file; a directory is another run's leftover when that process is gone
 * or its start time differs (the pid was reused).  Trial copies of a
 * config and temporary files of an unfinished atomic write carry their
 * writer's pid in their names and go when no process has that pid, in
 * each directory the run writes to, once per directory.  Only our own user's
 * directories are touched, and never through a symbolic link.
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
#include <sys/stat.h>
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
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/owner", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char line[96];
    int n = snprintf(line, sizeof line, "%ld %llu\n", (long)getpid(),
                     leftovers_starttime((long)getpid()));
    int rc = write(fd, line, (size_t)n) == n ? 0 : -1;
    if (close(fd))
        rc = -1;
    return rc;
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

/* Is the run that wrote DIR/owner gone?  0 also when there is no owner
 * file we can read: then it is not ours to judge. */
static int leftovers_dead_owner(const char *dir)
{
    char path[PATH_MAX], buf[96];
    if ((size_t)snprintf(path, sizeof path, "%s/owner", dir) >= sizeof path ||
        leftovers_read(path, buf, sizeof buf))
        return 0;
    long pid;
    unsigned long long start;
    if (sscanf(buf, "%ld %llu", &pid, &start) != 2 || pid <= 0)
        return 0;
    unsigned long long now = leftovers_starttime(pid);
    return now == 0 || now != start;
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

/* Remove the trial copies and temporary files in directory d whose pid
 * belongs to no live process. */
static void leftovers_sweep_dir(const char *d, struct leftovers_report *rep)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    while (dp && (e = readdir(dp))) {
        /* <stem>.autobatch-trial-<pid>-<trial><ext>, or afile's
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
        if (leftovers_starttime(pid) != 0)
            continue; /* a live process has that pid: maybe a run beside ours */
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", d, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
            continue;
        if (!unlink(path)) {
            leftovers_note(rep, path);
            if (temp)
                rep->temps++;
            else
                rep->copies++;
        }
    }
    if (dp)
        closedir(dp);
}

int leftovers_sweep(const char *tmpbase, const char *self, const char *const *dirs,
                    struct leftovers_report *rep)
{
    memset(rep, 0, sizeof *rep);
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
        if (leftovers_dead_owner(path)) {
            leftovers_remove_tree(path);
            leftovers_note(rep, path);
            rep->dirs++;
        }
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
            leftovers_sweep_dir(dirs[i], rep);
    }
    return rep->dirs + rep->copies + rep->temps;
}
