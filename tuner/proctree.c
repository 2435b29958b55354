/*
 * proctree: the /proc scan and the reaping loop behind trial teardown
 * (see proctree.h).
 */
#include "proctree.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int proctree_become_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

struct pinfo {
    pid_t pid, ppid;
    char state;
};

/* Read pid and parent of every process; the comm field may hold spaces
 * and parentheses, so the fields after it are found from the last ')'. */
static long proctree_snapshot(struct pinfo **out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0, alloc = 256;
    struct pinfo *v = malloc(alloc * sizeof *v);
    if (!v) {
        closedir(d);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "re");
        if (!f)
            continue; /* gone since readdir */
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        char state;
        int ppid;
        if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
            continue;
        if (n == alloc) {
            struct pinfo *nv = realloc(v, 2 * alloc * sizeof *v);
            if (!nv)
                break;
            v = nv;
            alloc *= 2;
        }
        v[n].pid = (pid_t)pid;
        v[n].ppid = (pid_t)ppid;
        v[n].state = state;
        n++;
    }
    closedir(d);
    *out = v;
    return (long)n;
}

long proctree_descendants(pid_t root, pid_t *out, size_t max)
{
    struct pinfo *v;
    long n = proctree_snapshot(&v);
    if (n < 0)
        return -1;
    /* Mark descendants by repeated passes: a process is in the tree when
     * its parent is root or already marked.  Passes stop when nothing new
     * is found; a tree of depth d takes at most d+1 passes. */
    char *in = calloc((size_t)n ? (size_t)n : 1, 1);
    if (!in) {
        free(v);
        return -1;
    }
    int changed = 1;
    while (changed) {
        changed = 0;
        for (long i = 0; i < n; i++) {
            if (in[i])
                continue;
            int hit = v[i].ppid == root;
            for (long j = 0; !hit && j < n; j++)
                hit = in[j] && v[j].pid == v[i].ppid;
            if (hit) {
                in[i] = 1;
                changed = 1;
            }
        }
    }
    long count = 0;
    for (long i = 0; i < n; i++) {
        if (!in[i] || v[i].state == 'Z' || v[i].state == 'X')
            continue;
        if ((size_t)count < max)
            out[count] = v[i].pid;
        count++;
    }
    free(in);
    free(v);
    return count;
}

long proctree_signal(pid_t root, int sig)
{
    pid_t pids[4096];
    long n = proctree_descendants(root, pids, sizeof pids / sizeof *pids);
    if (n < 0)
        return -1;
    long sent = 0;
    for (long i = 0; i < n && (size_t)i < sizeof pids / sizeof *pids; i++)
        if (kill(pids[i], sig) == 0)
            sent++;
    return sent;
}

long proctree_reap(pid_t watch, int *status, int *watched)
{
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            if (p == watch) {
                *status = st;
                *watched = 1;
            }
            continue;
        }
        if (p == 0)
            return 1; /* children remain, none has exited */
        if (errno == EINTR)
            continue;
        if (errno == ECHILD)
            return 0;
        return -1;
    }
}
