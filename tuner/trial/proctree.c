/* SPDX-License-Identifier: MIT */
/*
 * proctree: the /proc scan and the reaping loop behind trial teardown
 * (see proctree.h).
 */
#include "trial/proctree.h"

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

/* Read pid and parent of every process; the comm field may hold spaces
 * and parentheses, so the fields after it are found from the last ')'. */
static long proctree_snapshot(struct proctree_entry **out)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0, alloc = 256;
    struct proctree_entry *v = malloc(alloc * sizeof *v);
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
            struct proctree_entry *nv = realloc(v, 2 * alloc * sizeof *v);
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

static int by_ppid(const void *a, const void *b)
{
    const struct proctree_entry *x = a, *y = b;
    return (x->ppid > y->ppid) - (x->ppid < y->ppid);
}

/* The first entry of v (sorted by ppid) whose parent is ppid, or n. */
static long first_child(const struct proctree_entry *v, long n, pid_t ppid)
{
    long lo = 0, hi = n;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (v[mid].ppid < ppid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

long proctree_mark(struct proctree_entry *v, long n, pid_t root, pid_t *out, size_t max)
{
    /*
     * Breadth first from root over the parent links, v sorted by parent
     * so that a process's children are one binary search away: O(n log n)
     * however deep the tree.  The queue holds indices into v; each
     * process enters it at most once (a pid has one parent).
     */
    qsort(v, (size_t)n, sizeof *v, by_ppid);
    long *queue = malloc(((size_t)n ? (size_t)n : 1) * sizeof *queue);
    if (!queue)
        return -1;
    long head = 0, tail = 0, count = 0;
    pid_t parent = root;
    for (;;) {
        for (long i = first_child(v, n, parent); i < n && v[i].ppid == parent; i++)
            if (v[i].pid != root && tail < n)
                queue[tail++] = i;
        if (head == tail)
            break;
        const struct proctree_entry *p = &v[queue[head++]];
        parent = p->pid;
        if (p->state == 'Z' || p->state == 'X')
            continue; /* a zombie has no children: they went to us */
        if ((size_t)count < max)
            out[count] = p->pid;
        count++;
    }
    free(queue);
    return count;
}

long proctree_descendants(pid_t root, pid_t *out, size_t max)
{
    struct proctree_entry *v;
    long n = proctree_snapshot(&v);
    if (n < 0)
        return -1;
    long count = proctree_mark(v, n, root, out, max);
    free(v);
    return count;
}

/* Append the pids in `path` (a children file: "pid pid ...") to out. */
static int read_children(const char *path, pid_t *out, size_t *n, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
        if (*n < cap)
            out[*n] = (pid_t)pid;
        ++*n;
    }
    fclose(f);
    return 0;
}

long proctree_subtree(pid_t root, pid_t *out, size_t max)
{
    /*
     * Every process found is also the next to expand, so out doubles as
     * the queue; past max the walk goes on in a scratch queue only to
     * count.  A thread's children file lists the children that thread
     * forked, so every thread of a process is read.
     */
    size_t cap = max < 4096 ? 4096 : max;
    pid_t *q = malloc(cap * sizeof *q);
    if (!q)
        return -1;
    size_t n = 0, head = 0;
    pid_t cur = root;
    int first = 1;
    for (;;) {
        char path[96];
        snprintf(path, sizeof path, "/proc/%ld/task", (long)cur);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.')
                    continue;
                snprintf(path, sizeof path, "/proc/%ld/task/%.20s/children", (long)cur, e->d_name);
                if (read_children(path, q, &n, cap) && first && errno == ENOENT) {
                    closedir(d);
                    free(q);
                    return -2; /* no children files in this kernel */
                }
            }
            closedir(d);
        } else if (first) {
            free(q);
            return -1;
        }
        first = 0;
        if (head >= n || head >= cap)
            break;
        cur = q[head++];
    }
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = q[i];
    free(q);
    return (long)n;
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
