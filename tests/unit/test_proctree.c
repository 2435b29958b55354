/* Unit tests for proctree: descendants across setsid, signalling, reaping. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proctree.h"

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

int main(void)
{
    if (proctree_become_subreaper())
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orphan_comes_back_and_dies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
