/*
 * afile: the temp-file-fsync-rename dance behind every file autobatch
 * writes, the results file and users' configs alike (see afile.h).
 */
#include "afile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The temporary name: same directory, hidden, unique. */
static void afile_tmpname(const char *target, char *out, size_t outlen)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", target);
    snprintf(b, sizeof b, "%s", target);
    snprintf(out, outlen, "%s/.%s.autobatch-XXXXXX", dirname(a), basename(b));
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
    afile_tmpname(target, tmp, tmplen);
    int fd = mkstemp(tmp);
    if (fd < 0)
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    return fd;
}

static int afile_write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
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
    char target[PATH_MAX], tmp[PATH_MAX + 32];
    struct stat st;
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

int afile_check_writable(const char *path, char *err, size_t errlen)
{
    char target[PATH_MAX], tmp[PATH_MAX + 32];
    struct stat st;
    int exists;
    int fd = afile_open_tmp(path, target, sizeof target, tmp, sizeof tmp, &st, &exists, err, errlen);
    if (fd < 0)
        return -1;
    close(fd);
    unlink(tmp);
    return 0;
}
