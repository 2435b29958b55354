/* SPDX-License-Identifier: MIT */
/* Unit tests for proctree: descendants across setsid, signalling, reaping;
 * the children-list walk against the /proc scan; the scan's marking in
 * O(n log n) on a deep chain (quadratic per level before). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trial/proctree.h"
#include "timing.h"

static void test_orphan_comes_back_and_dies(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    if (child == 0) {
        /* Double fork: the grandchild leaves the session, the child exits. */
        pid_t g = fork();
        if (g == 0) {
            setsid();
            pid_t me = getpid();
            if (write(p[1], &me, sizeof me) != sizeof me)
                _exit(1);
            for (;;)
                pause();
        }
        _exit(0);
    }
    pid_t grand;
    assert_int_equal(read(p[0], &grand, sizeof grand), sizeof grand);
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    /* Re-parented to us, the subreaper, not to init. */
    pid_t found[8];
    long n = proctree_descendants(getpid(), found, 8);
    assert_int_equal(n, 1);
    assert_int_equal(found[0], grand);
    assert_int_equal(proctree_signal(getpid(), SIGKILL), 1);
    int watched = 0, status = 0;
    long left;
    while ((left = proctree_reap(grand, &status, &watched)) > 0)
        usleep(1000);
    assert_int_equal(left, 0);
    assert_int_equal(watched, 1);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(proctree_descendants(getpid(), found, 8), 0);
    close(p[0]);
    close(p[1]);
}

static int pid_cmp(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static void *fork_from_thread(void *arg)
{
    pid_t *out = arg;
    *out = fork();
    if (*out == 0) {
        for (;;)
            pause();
    }
    return NULL;
}

/* A tree of five: a child that forks one grandchild from its main thread
 * and one from a second thread (listed in that thread's children file),
 * and a great-grandchild.  The walk and the scan find the same five. */
static void test_subtree_matches_scan(void **state)
{
    (void)state;
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t a = fork();
    if (a == 0) {
        pid_t b = fork();
        if (b == 0) {
            if (fork() == 0) {
                for (;;)
                    pause();
            }
            for (;;)
                pause();
        }
        pid_t c;
        pthread_t t;
        if (pthread_create(&t, NULL, fork_from_thread, &c) || pthread_join(t, NULL))
            _exit(1);
        /* The thread ended; its child was reparented to a live thread of
         * this process.  Fork once more from a thread that stays. */
        pthread_t t2;
        pid_t d;
        if (pthread_create(&t2, NULL, fork_from_thread, &d))
            _exit(1);
        usleep(100000);
        char ok = 1;
        if (write(ready[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    char ok;
    assert_int_equal(read(ready[0], &ok, 1), 1);
    pid_t walk[16], scan[16];
    long nw = proctree_subtree(getpid(), walk, 16);
    long ns = proctree_descendants(getpid(), scan, 16);
    if (nw == -2) {
        print_message("no children lists in this kernel: the walk is not used here\n");
    } else {
        assert_int_equal(ns, 5);
        assert_int_equal(nw, ns);
        qsort(walk, (size_t)nw, sizeof *walk, pid_cmp);
        qsort(scan, (size_t)ns, sizeof *scan, pid_cmp);
        for (long i = 0; i < nw; i++)
            assert_int_equal(walk[i], scan[i]);
    }
    assert_int_equal(proctree_signal(getpid(), SIGKILL), 5);
    int watched = 0, status = 0;
    while (proctree_reap(a, &status, &watched) > 0)
        usleep(1000);
    assert_int_equal(proctree_descendants(getpid(), scan, 16), 0);
    if (nw != -2)
        assert_int_equal(proctree_subtree(getpid(), walk, 16), 0);
    close(ready[0]);
    close(ready[1]);
}

/* The worst case of the old marking (a pass per level, each pass n^2): a
 * chain n/2 deep under root among n/2 unrelated processes. */
static double time_mark(size_t n, void *ctx)
{
    (void)ctx;
    struct proctree_entry *v = malloc(n * sizeof *v);
    pid_t *out = malloc(n * sizeof *out);
    assert_non_null(v);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        /* Shuffled so that neither order helps: pid 10+i, odd i chained. */
        size_t j = (i * 7919) % n;
        pid_t pid = (pid_t)(10 + j);
        pid_t ppid = (j % 2) ? (j == 1 ? 1 : (pid_t)(10 + j - 2)) : 5;
        v[i] = (struct proctree_entry){ pid, ppid, (j % 10 == 3) ? 'Z' : 'S' };
    }
    double t0 = timing_now();
    long got = proctree_mark(v, (long)n, 1, out, n);
    double t = timing_now() - t0;
    /* Every odd pid is below 1; a tenth of them (j % 10 == 3) are zombies. */
    long want = 0;
    for (size_t j = 1; j < n; j += 2)
        want += j % 10 != 3;
    assert_int_equal(got, want);
    free(v);
    free(out);
    return t;
}

static void test_mark_is_not_quadratic(void **state)
{
    (void)state;
    double r = timing_ratio("proctree_mark, chain n/2 deep", time_mark, NULL, 1000, 200000, NULL,
                            NULL, NULL);
    assert_true(r < TIMING_MAX_RATIO);
}

int main(void)
{
    if (proctree_become_subreaper())
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orphan_comes_back_and_dies),
        cmocka_unit_test(test_subtree_matches_scan),
        cmocka_unit_test(test_mark_is_not_quadratic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
