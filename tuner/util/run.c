/* SPDX-License-Identifier: MIT */
/*
 * run: a helper command run to its end, its output captured (run.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/run.h"

int run_capture(char *const *argv, char *out, size_t len, int flags)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(p[1], 1);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(flags & RUN_ERR_TOO ? p[1] : devnull, 2);
        }
        /* ignored stays ignored across exec; the caller's handlers do not */
        if (flags & RUN_DEAF) {
            signal(SIGTERM, SIG_IGN);
            signal(SIGINT, SIG_IGN);
            signal(SIGHUP, SIG_IGN);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    for (;;) {
        char sink[512];
        char *dst = out && got + 1 < len ? out + got : sink;
        size_t room = out && got + 1 < len ? len - 1 - got : sizeof sink;
        ssize_t n = read(p[0], dst, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (dst != sink)
            got += (size_t)n;
    }
    close(p[0]);
    if (out && len)
        out[got] = '\0';
    int ws;
    if (pid < 0)
        return -1;
    while (waitpid(pid, &ws, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}
