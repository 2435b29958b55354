/* Unit tests for afile: atomic replace, modes, symlinks, failures. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "afile.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replace_keeps_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_target_is_edited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_leave_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
