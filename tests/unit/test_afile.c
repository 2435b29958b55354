/* SPDX-License-Identifier: MIT */
/* Unit tests for afile: atomic replace, modes, symlinks, failures. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/afile.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/ab-afile-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void slurp(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* No temporary file may be left behind in the directory. */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void test_replace_keeps_mode(void **state)
{
    (void)state;
    char p[128], buf[64], err[256];
    snprintf(p, sizeof p, "%s/train.yaml", dir);
    FILE *f = fopen(p, "w");
    fputs("old\n", f);
    fclose(f);
    chmod(p, 0640);
    assert_int_equal(afile_write(p, "new\n", 4, err, sizeof err), 0);
    slurp(p, buf, sizeof buf);
    assert_string_equal(buf, "new\n");
    struct stat st;
    stat(p, &st);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(entries(), 1);
}

static void test_symlink_target_is_edited(void **state)
{
    (void)state;
    char real[128], link[128], buf[64], err[256];
    snprintf(real, sizeof real, "%s/real.json", dir);
    snprintf(link, sizeof link, "%s/link.json", dir);
    FILE *f = fopen(real, "w");
    fputs("{}", f);
    fclose(f);
    assert_int_equal(symlink("real.json", link), 0);
    assert_int_equal(afile_write(link, "{\"a\":1}", 7, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    slurp(real, buf, sizeof buf);
    assert_string_equal(buf, "{\"a\":1}");
    assert_int_equal(entries(), 2);
}

static void test_failures_leave_nothing(void **state)
{
    (void)state;
    char p[128], sub[128], err[256];
    snprintf(sub, sizeof sub, "%s/ro", dir);
    mkdir(sub, 0755);
    snprintf(p, sizeof p, "%s/ro/r.json", dir);
    FILE *f = fopen(p, "w");
    fputs("keep", f);
    fclose(f);
    chmod(sub, 0555);
    if (geteuid() != 0) { /* root ignores directory permissions */
        assert_int_equal(afile_write(p, "x", 1, err, sizeof err), -1);
        assert_non_null(strstr(err, "r.json"));
        assert_int_equal(afile_check_writable(p, err, sizeof err), -1);
    }
    chmod(sub, 0755);
    /* A directory in the file's place is refused. */
    assert_int_equal(afile_write(sub, "x", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "directory"));
    assert_int_equal(afile_check_writable(sub, err, sizeof err), -1);
    /* A missing directory is refused by the early check. */
    snprintf(p, sizeof p, "%s/nope/r.json", dir);
    assert_int_equal(afile_check_writable(p, err, sizeof err), -1);
    snprintf(p, sizeof p, "%s/fresh.json", dir);
    assert_int_equal(afile_check_writable(p, err, sizeof err), 0);
    assert_int_equal(access(p, F_OK), -1); /* the check leaves no file */
}

/* A character device is written through and stays one.  A private
 * node (1,3 is what /dev/null is), never the system's. */
static void test_char_device(void **state)
{
    (void)state;
    char p[128], err[256];
    snprintf(p, sizeof p, "%s/null", dir);
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3))) {
        print_message("no mknod here (%s): skipped\n", strerror(errno));
        return;
    }
    assert_int_equal(afile_check_writable(p, err, sizeof err), 0);
    assert_int_equal(afile_write(p, "{}\n", 3, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(entries(), 1);
}

static void test_fifo(void **state)
{
    (void)state;
    char p[128], err[256], buf[64];
    snprintf(p, sizeof p, "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0600), 0);
    /* The early check does not open it: that would end a reader's input. */
    assert_int_equal(afile_check_writable(p, err, sizeof err), 0);
    /* Nobody reads: refused at once, not a hang. */
    assert_int_equal(afile_write(p, "x", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "nothing reads it"));
    /* With a reader: it gets the bytes. */
    int r = open(p, O_RDONLY | O_NONBLOCK);
    assert_true(r >= 0);
    assert_int_equal(afile_write(p, "{\"a\":1}\n", 8, err, sizeof err), 0);
    ssize_t n = read(r, buf, sizeof buf);
    assert_int_equal(n, 8);
    assert_memory_equal(buf, "{\"a\":1}\n", 8);
    close(r);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(entries(), 1);
}

/* A socket (and a directory) is refused, by the early check too. */
static void test_socket_refused(void **state)
{
    (void)state;
    char err[256];
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s/sock", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(afile_check_writable(a.sun_path, err, sizeof err), -1);
    assert_non_null(strstr(err, "it is a socket"));
    assert_int_equal(afile_write(a.sun_path, "x", 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "it is a socket"));
    struct stat st;
    assert_int_equal(lstat(a.sun_path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    close(s);
    assert_int_equal(entries(), 1);
}

/* /dev/fd/N is written through: a pipe gets the bytes, a regular file
 * behind it is appended to and stays the same file. */
static void test_fd_alias(void **state)
{
    (void)state;
    char p[128], alias[64], err[256], buf[64];
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    snprintf(alias, sizeof alias, "/dev/fd/%d", pfd[1]);
    assert_int_equal(afile_write(alias, "piped", 5, err, sizeof err), 0);
    assert_int_equal(read(pfd[0], buf, sizeof buf), 5);
    close(pfd[0]);
    close(pfd[1]);
    snprintf(p, sizeof p, "%s/log", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "log\n", 4), 4);
    struct stat before, after;
    fstat(fd, &before);
    snprintf(alias, sizeof alias, "/dev/fd/%d", fd);
    assert_int_equal(afile_check_writable(alias, err, sizeof err), 0);
    assert_int_equal(afile_write(alias, "json\n", 5, err, sizeof err), 0);
    close(fd);
    assert_int_equal(stat(p, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    slurp(p, buf, sizeof buf);
    assert_string_equal(buf, "log\njson\n");
    assert_int_equal(entries(), 1);
}

/* A writer waiting for the lock while the holder replaces the file ends
 * up holding the lock of the new file, not of the old inode. */
static void test_lock_follows_replacement(void **state)
{
    (void)state;
    char p[128], err[256];
    snprintf(p, sizeof p, "%s/c.yaml", dir);
    FILE *f = fopen(p, "w");
    fputs("a: 1\n", f);
    fclose(f);
    int held = afile_lock(p, err, sizeof err);
    assert_true(held >= 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char e[256];
        close(held); /* a shared open file description would share the lock */
        int fd = afile_lock(p, e, sizeof e);
        struct stat a, b;
        _exit(fd >= 0 && !fstat(fd, &a) && !stat(p, &b) && a.st_ino == b.st_ino ? 0 : 1);
    }
    usleep(100 * 1000); /* the child is waiting now */
    assert_int_equal(afile_write(p, "a: 2\n", 5, err, sizeof err), 0);
    afile_unlock(held);
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(entries(), 1); /* no lock file */
    /* Not a regular file: refused. */
    assert_int_equal(afile_lock(dir, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
}

static void test_tmp_pid(void **state)
{
    (void)state;
    assert_int_equal(afile_tmp_pid(".train.yaml.autobatch-tmp-4242-aB3xYz"), 4242);
    assert_int_equal(afile_tmp_pid(".a.autobatch-tmp-1.autobatch-tmp-77-000000"), 77);
    assert_int_equal(afile_tmp_pid("train.yaml.autobatch-tmp-4242-aB3xYz"), 0);
    assert_int_equal(afile_tmp_pid(".train.yaml.autobatch-Ab12Cd"), 0);
    assert_int_equal(afile_tmp_pid(".train.yaml.autobatch-tmp--42-aB3xYz"), 0);
    assert_int_equal(afile_tmp_pid(".train.yaml.autobatch-tmp-42-aB3xY"), 0);
    assert_int_equal(afile_tmp_pid(".train.yaml.autobatch-tmp-42-aB3xYz.bak"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_char_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_alias, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_follows_replacement, setup, teardown),
        cmocka_unit_test(test_tmp_pid),
        cmocka_unit_test_setup_teardown(test_replace_keeps_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_target_is_edited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_leave_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
