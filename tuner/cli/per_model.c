/* SPDX-License-Identifier: MIT */
/*
 * per_model: --gpus over GPUs of several models (per_model.h).  The
 * GPUs are grouped by model and memory; for each group this binary is
 * run again (/proc/self/exe) with the same command line but --gpus
 * naming the group, the output files suffixed with the model's slug, and
 * --write dropped.  A signal while one runs is passed on to it, once.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/per_model.h"
#include "control/exit.h"
#include "control/plan.h"
#include "trial/gpu.h"
#include "util/strvec.h"

/* "NVIDIA A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb", for file names. */
void per_model_slug(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < len; p++) {
        char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        int keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (keep)
            out[k++] = c;
        else if (k && out[k - 1] != '-')
            out[k++] = '-';
    }
    while (k && out[k - 1] == '-')
        k--;
    out[k] = '\0';
}

/* PATH with -SLUG before its extension ("r.json" -> "r-nvidia-l4.json"). */
char *per_model_suffixed(const char *path, const char *slug)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    size_t stem = dot && (!slash || dot > slash) && dot != path ? (size_t)(dot - path) : strlen(path);
    char *out = NULL;
    if (asprintf(&out, "%.*s-%s%s", (int)stem, path, slug, path + stem) < 0)
        return NULL;
    return out;
}

/* Whether arg is the option `name`, alone or as name=value. */
static int per_model_opt(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

int per_model_argv(struct strvec *av, int argc, char **argv, const struct plan *plan,
                   const struct split_part *part)
{
    int rc = strvec_push(av, argv[0]);
    if (part->json)
        rc |= strvec_pushf(av, "--json=%s", part->json);
    for (int i = 1; i < argc && !rc; i++) {
        const char *arg = argv[i];
        if (plan->command && argv + i >= plan->command) {
            rc |= strvec_push(av, arg);
            continue;
        }
        if (!strcmp(arg, "--")) {
            rc |= strvec_push(av, arg);
            continue;
        }
        static const char *const files[] = { "--json", "--markdown", "--html", "--junit",
                                             "--events" };
        static const char *const valued[] = { "--gpus", "--slurm-targets", "--write-target",
                                              "--webhook", "--webhook-format" };
        int file = 0, which = -1;
        for (size_t f = 0; f < sizeof files / sizeof *files; f++)
            file |= per_model_opt(arg, files[f]);
        if ((part->suffix_baseline || part->drop_baseline) && per_model_opt(arg, "--baseline")) {
            if (part->drop_baseline) {
                i += !strchr(arg, '=');
                continue;
            }
            file = 1;
        }
        for (size_t f = 0; f < sizeof valued / sizeof *valued; f++)
            if (per_model_opt(arg, valued[f]))
                which = (int)f;
        if ((!strcmp(arg, "--write") && !part->keep_write) ||
            (!strcmp(arg, "--webhook-insecure") && part->drop_webhook))
            continue;
        if (!file && which < 0) {
            rc |= strvec_push(av, arg);
            continue;
        }
        const char *eq = strchr(arg, '=');
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : "";
        size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
        const char *set = which == 0 && part->gpus ? part->gpus
                        : which == 1 && part->target ? part->target : NULL;
        if ((which == 2 && !part->keep_write) || (which >= 3 && part->drop_webhook))
            continue;
        char *nv = set ? strdup(set) : file && strcmp(val, "-") ? per_model_suffixed(val, part->tag)
                                                               : strdup(val);
        rc |= !nv || strvec_pushf(av, "%.*s=%s", (int)nl, arg, nv ? nv : "");
        free(nv);
    }
    return rc ? -1 : 0;
}

int per_model_run(int argc, char **argv, const struct plan *plan, const struct gpu *g,
                  volatile sig_atomic_t *interrupted)
{
    int idx[GPU_MAX], n = 0;
    if (!strcmp(plan->gpus, "all")) {
        for (int i = 0; i < g->n; i++)
            idx[n++] = i;
    } else {
        char buf[256], *save = NULL;
        snprintf(buf, sizeof buf, "%s", plan->gpus);
        for (char *t = strtok_r(buf, ",", &save); t && n < GPU_MAX; t = strtok_r(NULL, ",", &save)) {
            int found = -1;
            for (int i = 0; i < g->n; i++)
                if (!strcmp(gpu_uuid(g, i), t))
                    found = i;
            idx[n++] = found >= 0 ? found : atoi(t);
        }
    }
    int done[GPU_MAX] = { 0 }, status = 0;
    for (int a = 0; a < n; a++) {
        if (done[a])
            continue;
        const char *name, *other;
        uint64_t total, ot;
        gpu_info(g, idx[a], &name, &total);
        char list[256] = "", slug[128];
        size_t off = 0;
        for (int b = a; b < n; b++) {
            gpu_info(g, idx[b], &other, &ot);
            if (strcmp(name, other) || total != ot)
                continue;
            done[b] = 1;
            if (off < sizeof list)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", off ? "," : "",
                                        idx[b]);
        }
        per_model_slug(name, slug, sizeof slug);
        char gib[32];
        snprintf(gib, sizeof gib, "%.0fg", (double)total / (1 << 30));
        char tag[160];
        snprintf(tag, sizeof tag, "%s-%s", slug, gib);
        /* The same command line, with this model's GPUs and file names. */
        struct strvec av = STRVEC_INIT;
        struct split_part part = { .gpus = list, .tag = tag };
        if (per_model_argv(&av, argc, argv, plan, &part)) {
            strvec_release(&av);
            cli_error("out of memory");
            return AB_EXIT_USAGE;
        }
        fprintf(stderr, "autobatch: %s, %.1f GiB (GPUs %s): searched on its own%s\n", name,
                (double)total / (1 << 30), list, plan->write ? " (--write left out: one choice "
                                                                "per model)" : "");
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            execv("/proc/self/exe", av.v);
            _exit(127);
        }
        strvec_release(&av);
        int ws = 0, forwarded = 0;
        while (pid > 0 && waitpid(pid, &ws, 0) < 0) {
            if (errno != EINTR)
                break;
            if (*interrupted && !forwarded) {
                forwarded = 1;
                kill(pid, SIGTERM);
            }
        }
        int st = pid < 0 ? AB_EXIT_USAGE : WIFEXITED(ws) ? WEXITSTATUS(ws) : AB_EXIT_INTERRUPTED;
        if (st && !status)
            status = st;
        if (*interrupted)
            break;
    }
    return status;
}
