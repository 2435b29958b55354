/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for trial: real subprocesses (sh), each outcome, teardown of
 * SIGTERM-ignoring and escaped processes, checked through /proc and kill(0)
 * rather than by sleeping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "output/results.h"
#include "trial/gpu.h"
#include "trial/proctree.h"
#include "trial/trial.h"

extern char **environ;
static struct oom_table oom = OOM_TABLE_INIT;

static struct trial_opts opts(void)
{
    struct trial_opts o = { 0 };
    o.oom = &oom;
    o.trial_timeout_s = 30;
    o.hang_timeout_s = 30;
    o.grace_s = 1;
    return o;
}

static void run_sh(const char *script, const struct trial_opts *o, struct trial_result *r)
{
    char *argv[] = { "sh", "-c", (char *)script, NULL };
    struct trial_spec spec = { argv, environ, NULL };
    assert_int_equal(trial_run(&spec, o, r), 0);
    /* Whatever happened, nothing of the tree is left. */
    pid_t left[8];
    assert_int_equal(proctree_descendants(getpid(), left, 8), 0);
}

static struct trial_result res;

/* Exit 0 is no evidence of fitting: it needs a training step. */
static void test_exit_zero_without_steps(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("echo hello; exit 0", &o, &res);
    assert_int_equal(res.outcome, TRIAL_NO_STEPS);
    assert_int_equal(res.exit_code, 0);
    assert_int_equal(res.tail_count, 1);
    assert_string_equal(res.tail[0], "hello");
    /* A finished data-preparation bar is not a step either. */
    run_sh("printf 'Sorting with sampler... : 100%%|##########| 400/400 [00:00<00:00, 1788615.78it/s]\\n'",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_NO_STEPS);
    assert_int_equal(res.steps_seen, 0);
    assert_non_null(strstr(res.log_seen, "Sorting with sampler"));
}

static void test_exit_zero_after_steps_is_fit(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("for i in 0 1 2 3; do printf ' %d/100 [00:01<00:10,  9.00it/s]\\r' $i; sleep 0.05; done; exit 0",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_seen, 3);
    assert_int_equal(res.steps_from, STEPS_FROM_LOG);
}

/* The probe's report: steps from the lowest rank, the loader's batch
 * size checked against the candidate. */
static void test_probe_steps_and_mismatch(void **state)
{
    (void)state;
    char path[] = "/tmp/ab-trial-probe-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char script[1024];
    snprintf(script, sizeof script,
             "printf '{\"ab\":\"torch\",\"pid\":77,\"rank\":0,\"version\":\"2.8.0\",\"hook\":\"global\"}\\n' >> %s; "
             "for i in 1 2 3 4; do "
             "printf '{\"ab\":\"step\",\"pid\":78,\"rank\":1,\"world\":2,\"step\":%%d,\"t\":%%d.5,"
             "\"res\":900,\"bs\":4,\"nb\":2}\\n' $i $i >> %s; "
             "printf '{\"ab\":\"step\",\"pid\":77,\"rank\":0,\"world\":2,\"step\":%%d,\"t\":%%d,"
             "\"res\":1000,\"alloc\":800,\"bs\":4,\"nb\":2}\\n' $i $i >> %s; "
             "sleep 0.1; done; sleep 30", path, path, path);
    struct trial_opts o = opts();
    o.probe_path = path;
    o.target_steps = 4;
    o.warmup_steps = 1;
    o.expect_batch = 4;
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_from, STEPS_FROM_PROBE);
    assert_int_equal(res.steps_seen, 4);
    assert_int_equal(res.steps_measured, 3);
    assert_true(res.step_time_s > 0.99 && res.step_time_s < 1.01); /* rank 0's clock: 1 s a step */
    assert_int_equal(res.probe_processes, 1);
    assert_string_equal(res.probe_torch, "2.8.0");
    assert_int_equal(res.probe_world, 2);
    assert_int_equal(res.probe_ranks, 2);
    assert_int_equal(res.loader_batch, 4);
    assert_int_equal(res.loader_batches_per_step, 2);
    assert_int_equal(res.peak_mem_bytes, 1000);
    assert_int_equal(res.peak_allocated_bytes, 800);

    assert_int_equal(truncate(path, 0), 0);
    o.expect_batch = 16;
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_MISMATCH);
    assert_non_null(strstr(res.evidence, "batch_size=4"));
    assert_true(res.wall_s < 5.0);
    unlink(path);
}

/* Issue 25 item 6: the probe's CUDA figures steer the search.  Two ranks;
 * rank 1 holds more outside the allocator (its CUDA context and NCCL) and
 * needed allocator retries: the trial's CUDA view is its reserved peak
 * plus that, the capacity CUDA's total, and the fit is at the edge. */
static void test_probe_cuda_view(void **state)
{
    (void)state;
    char path[] = "/tmp/ab-trial-probe-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char script[1600];
    snprintf(script, sizeof script,
             "printf '{\"ab\":\"torch\",\"pid\":77,\"rank\":0,\"version\":\"2.8.0\",\"hook\":\"global\"}\\n' >> %s; "
             "for i in 1 2 3 4; do "
             "c=null; [ $i = 1 ] && c=150000; "
             "printf '{\"ab\":\"step\",\"pid\":78,\"rank\":1,\"world\":2,\"step\":%%d,\"t\":%%d.5,"
             "\"res\":900,\"alloc\":700,\"retries\":%%d,\"outside\":400,\"ctotal\":%%s}\\n' $i $i $((i %% 2)) $c >> %s; "
             "printf '{\"ab\":\"step\",\"pid\":77,\"rank\":0,\"world\":2,\"step\":%%d,\"t\":%%d,"
             "\"res\":1000,\"alloc\":800,\"retries\":0,\"outside\":200,\"ctotal\":%%s}\\n' $i $i "
             "$( [ $i = 1 ] && echo 160000 || echo null ) >> %s; "
             "sleep 0.05; done; sleep 30", path, path, path);
    struct trial_opts o = opts();
    o.probe_path = path;
    o.target_steps = 4;
    o.warmup_steps = 1;
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.peak_mem_bytes, 1000);   /* the reserved peak, as before */
    assert_int_equal(res.cuda_peak_bytes, 1300);  /* rank 1: 900 + 400 > rank 0: 1000 + 200 */
    assert_int_equal(res.cuda_peak_rank, 1);
    assert_int_equal(res.cuda_outside_bytes, 400);
    assert_int_equal(res.cuda_total_bytes, 150000); /* the smaller device */
    assert_int_equal(res.alloc_retries, 2);       /* rank 1: steps 1 and 3 */
    assert_int_equal(res.alloc_retries_rank, 1);

    /* The search's view: CUDA's peak over NVML's, CUDA's total as the capacity. */
    struct gpu g;
    memset(&g, 0, sizeof g);
    g.peak = -1;
    assert_true(gpu_capacity(&g) < 0); /* no NVML, nothing from CUDA yet */
    assert_int_equal(gpu_trial_view(&g, 5000, &res), 1300);
    assert_true(gpu_capacity(&g) == 150000.0);
    gpu_emulate(&g, 100000);            /* an emulated card smaller than CUDA's total */
    assert_true(gpu_capacity(&g) == 100000.0);

    /* The results file says it. */
    struct results_trial rt;
    memset(&rt, 0, sizeof rt);
    rt.outcome = TRIAL_FIT;
    results_trial_seen(&rt, &res);
    json_t *j = results_trial_json(&rt);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "alloc_retries")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "alloc_retries_rank")), 1);
    assert_true(json_is_true(json_object_get(j, "at_edge")));
    json_decref(j);

    /* Off CUDA (no such fields: an older probe, a CPU trial): NVML's
     * figures stand and the results carry no retries. */
    assert_int_equal(truncate(path, 0), 0);
    snprintf(script, sizeof script,
             "for i in 1 2 3 4; do "
             "printf '{\"ab\":\"step\",\"pid\":77,\"rank\":0,\"world\":1,\"step\":%%d,\"t\":%%d,"
             "\"res\":null}\\n' $i $i >> %s; sleep 0.05; done; sleep 30", path);
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.cuda_peak_bytes, -1);
    assert_int_equal(res.cuda_total_bytes, -1);
    assert_int_equal(res.alloc_retries, -1);
    struct gpu g2;
    memset(&g2, 0, sizeof g2);
    assert_int_equal(gpu_trial_view(&g2, 5000, &res), 5000);
    assert_true(gpu_capacity(&g2) < 0);
    memset(&rt, 0, sizeof rt);
    results_trial_seen(&rt, &res);
    j = results_trial_json(&rt);
    assert_null(json_object_get(j, "alloc_retries"));
    assert_null(json_object_get(j, "at_edge"));
    json_decref(j);
    unlink(path);
}

static void test_oom_line_stops_at_once(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("echo '[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
           "GPU 0 has a total capacity of 23.99 GiB of which 1.00 GiB is free.' >&2; sleep 60",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
    assert_non_null(strstr(res.evidence, "Tried to allocate 2.00 GiB"));
    assert_int_equal(res.signal, SIGTERM);
    assert_true(res.teardown_s < 1.0);
    assert_true(res.wall_s < 5.0);
    assert_true(res.oom_numbers.tried == 2LL << 30);
}

static void test_sigterm_ignored_gets_sigkill(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.grace_s = 0.5;
    run_sh("trap '' TERM; echo 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB "
           "(GPU 0; 6.00 GiB total capacity; 5.1 GiB already allocated; 3.00 MiB free; "
           "5.2 GiB reserved in total by PyTorch)'; while :; do sleep 1; done",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
    assert_int_equal(res.signal, SIGKILL);
    assert_true(res.teardown_s >= 0.5 && res.teardown_s < 3.0);
}

/* Once an OOM line decided the trial, processes that ignore SIGTERM get
 * SIGKILL after half a second, not after the full grace; other outcomes
 * still wait the full grace. */
static void test_oom_line_short_grace(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.grace_s = 10;
    run_sh("trap '' TERM; (while :; do sleep 1; done) & "
           "echo 'RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB "
           "(GPU 0; 6.00 GiB total capacity; 5.1 GiB already allocated; 3.00 MiB free; "
           "5.2 GiB reserved in total by PyTorch)'; while :; do sleep 1; done",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
    assert_int_equal(res.signal, SIGKILL);
    assert_true(res.teardown_s >= 0.5 && res.teardown_s < 2.0);
    assert_true(res.wall_s < 3.0);

    o = opts();
    o.grace_s = 1.5;
    o.hang_timeout_s = 0.3;
    run_sh("trap '' TERM; echo started; while :; do sleep 1; done", &o, &res);
    assert_int_equal(res.outcome, TRIAL_HANG);
    assert_int_equal(res.signal, SIGKILL);
    assert_true(res.teardown_s >= 1.5);
}

/* Live processes whose command line holds `mark`. */
static int count_cmdline(const char *mark)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[k] = '\0';
        n += strstr(buf, mark) != NULL;
    }
    if (d)
        closedir(d);
    return n;
}

static void escaped_grandchild(enum trial_isolation iso)
{
    char pidfile[] = "/tmp/ab-trial-pid-XXXXXX";
    int fd = mkstemp(pidfile);
    close(fd);
    char script[256];
    /* The grandchild leaves the process group (setsid), closes the pipes,
     * and its parent exits 0 at once. */
    snprintf(script, sizeof script,
             "setsid sh -c 'echo $$ > %s; exec sleep 3001' </dev/null >/dev/null 2>&1 & "
             "while [ ! -s %s ]; do sleep 0.01; done; exit 0", pidfile, pidfile);
    struct trial_opts o = opts();
    o.isolation = iso;
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_NO_STEPS);
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    unlink(pidfile);
    assert_true(pid > 0);
    if (res.isolation == TRIAL_ISOLATED_TREE) {
        /* the pid it wrote is ours to check */
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(errno, ESRCH);
    }
    /* in a PID namespace the pid it wrote is the namespace's: look for it
     * by its command line instead (both modes) */
    assert_int_equal(count_cmdline("sleep 3001"), 0);
    assert_true(res.teardown_s > 0);
}

static void test_escaped_grandchild_is_killed(void **state)
{
    (void)state;
    escaped_grandchild(TRIAL_ISOLATE_NEVER);
    assert_int_equal(res.isolation, TRIAL_ISOLATED_TREE);
    escaped_grandchild(TRIAL_ISOLATE_AUTO);
}

static void test_crash_keeps_tail(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("for i in $(seq 1 30); do echo line$i; done; "
           "echo 'RuntimeError: Expected all tensors to be on the same device' >&2; exit 3",
           &o, &res);
    assert_int_equal(res.outcome, TRIAL_CRASH);
    assert_int_equal(res.exit_code, 3);
    assert_int_equal(res.tail_count, TRIAL_TAIL_LINES);
    assert_string_equal(res.tail[TRIAL_TAIL_LINES - 1],
                        "RuntimeError: Expected all tensors to be on the same device");
    assert_string_equal(res.evidence, "RuntimeError: Expected all tensors to be on the same device");
}

/* The tail is kept as a ring while the trial runs; whoever reads it
 * afterwards gets the last lines oldest first, however often it wrapped. */
static void test_tail_in_order(void **state)
{
    (void)state;
    static const int counts[] = { 1, 19, 20, 21, 31, 40, 41, 59 };
    struct trial_opts o = opts();
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        char script[128];
        int n = counts[c];
        snprintf(script, sizeof script, "for i in $(seq 1 %d); do echo line$i; done; exit 3", n);
        run_sh(script, &o, &res);
        int want = n < TRIAL_TAIL_LINES ? n : TRIAL_TAIL_LINES;
        assert_int_equal(res.outcome, TRIAL_CRASH);
        assert_int_equal(res.tail_count, want);
        for (int i = 0; i < want; i++) {
            char line[32];
            snprintf(line, sizeof line, "line%d", n - want + 1 + i);
            assert_string_equal(res.tail[i], line);
        }
        char last[32];
        snprintf(last, sizeof last, "line%d", n);
        assert_string_equal(res.evidence, last);
    }
}

static void test_kernel_oom_kill(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("kill -KILL $$", &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
    assert_int_equal(res.kernel_oom, 1);
    run_sh("exit 137", &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
    assert_int_equal(res.kernel_oom, 1);
}

static void test_hang_and_timeout(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.hang_timeout_s = 0.4;
    run_sh("echo started; sleep 60", &o, &res);
    assert_int_equal(res.outcome, TRIAL_HANG);
    assert_true(res.wall_s < 3);
    o = opts();
    o.trial_timeout_s = 0.5;
    run_sh("while :; do echo tick; sleep 0.05; done", &o, &res);
    assert_int_equal(res.outcome, TRIAL_TIMEOUT);
    assert_true(res.wall_s < 3);
}

static void test_steps_end_a_fit(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.target_steps = 6;
    o.warmup_steps = 2;
    run_sh("i=0; while :; do i=$((i+1)); printf ' %d/100 [00:01<00:10,  9.50it/s]\\r' $i >&2; "
           "sleep 0.02; done", &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_true(res.steps_seen >= 6);
    assert_true(res.steps_measured >= 4);
    assert_true(res.step_time_s > 0.01 && res.step_time_s < 1.0);
}

/* A trainer that redraws its bar faster than we read: three redraws in
 * one write every 0.1 s.  The steps of one read share its time; they
 * took 0.1 s together, not 0.1 s and then nothing (the median step time
 * came out 0: samples/s without bound). */
static void test_redraws_read_together(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.target_steps = 15;
    o.warmup_steps = 3;
    run_sh("i=0; while :; do printf ' %d/300 [00:01<00:10,  30it/s]\r %d/300 [00:01<00:10,  30it/s]"
           "\r %d/300 [00:01<00:10,  30it/s]\r' $((i+1)) $((i+2)) $((i+3)) >&2; i=$((i+3)); "
           "sleep 0.1; done", &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_true(res.step_time_s > 0.02 && res.step_time_s < 0.08);
}

/* The speed is the steps between the first and the last measured step
 * boundary over the time between them, not a median of the intervals:
 * uneven intervals (by the trainer's own clock) count for what they
 * took.  A median took 0.55 s here; five steps took 1.25 s each. */
static void test_step_time_is_interval_over_steps(void **state)
{
    (void)state;
    char report[] = "/tmp/ab-trial-interval-XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    struct trial_opts o = opts();
    o.target_steps = 5;
    o.warmup_steps = 1;
    o.report_path = report;
    char script[512];
    snprintf(script, sizeof script,
             "printf '{\"step\": 1, \"time\": 1}\\n{\"step\": 2, \"time\": 2}\\n"
             "{\"step\": 3, \"time\": 2.1}\\n{\"step\": 4, \"time\": 2.2}\\n"
             "{\"step\": 5, \"time\": 6}\\n' >> %s; sleep 60", report);
    run_sh(script, &o, &res);
    unlink(report);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_measured, 4); /* boundaries 1 to 5 */
    assert_true(res.step_time_s > 1.2499 && res.step_time_s < 1.2501);
    assert_true(res.step_time_mad_s >= 0); /* the per-interval spread is kept */
}

/* A tqdm bar starts each redraw with '\r', so a redraw's line is ended by
 * the next one, a step later, and the last one by the exit.  Each counts
 * at the time it began to arrive: stamped at its end, the last interval
 * held two steps in one step's time and the speed came out 3/2 or 2x. */
static void test_bar_line_counts_when_it_began(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    o.target_steps = 100; /* never: the trainer exits after step 4 */
    o.warmup_steps = 1;
    run_sh("i=0; printf '\\r 0/100 [00:00<?, ?it/s]' >&2; "
           "while [ $i -lt 4 ]; do sleep 0.2; i=$((i+1)); "
           "printf '\\r %d/100 [00:01<00:10,  5.00it/s]' $i >&2; done", &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_seen, 4);
    assert_int_equal(res.steps_measured, 3);
    assert_true(res.step_time_s > 0.18 && res.step_time_s < 0.35);
}

/* A report line that claims 10^8 or 2^61 steps sizes nothing and makes
 * no fit: steps count only as fast as a trial can run them. */
static void test_absurd_step_numbers_ignored(void **state)
{
    (void)state;
    char report[] = "/tmp/ab-trial-absurd-XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    struct trial_opts o = opts();
    o.target_steps = 6;
    o.warmup_steps = 1;
    o.report_path = report;
    char script[768];
    snprintf(script, sizeof script,
             "echo '{\"step\": 1, \"time\": 1}' >> %s; "
             "echo '{\"step\": 100000000, \"time\": 1.5}' >> %s; "
             "echo '{\"step\": 2305843009213693952, \"time\": 1.6}' >> %s; "
             "for i in 2 3 4 5 6; do echo \"{\\\"step\\\": $i, \\\"time\\\": $i}\" >> %s; done; "
             "sleep 60", report, report, report, report);
    run_sh(script, &o, &res);
    unlink(report);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_seen, 6);
    assert_int_equal(res.steps_measured, 5);
    assert_true(res.step_time_s > 0.999 && res.step_time_s < 1.001);
}

static void test_noisy_trial_runs_longer(void **state)
{
    (void)state;
    char report[] = "/tmp/ab-trial-noisy-XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    struct trial_opts o = opts();
    o.target_steps = 6;
    o.warmup_steps = 1;
    o.extra_steps = 4;
    o.noise_rel = 0.10;
    o.report_path = report;
    char script[512];
    /* Step times alternate 1 s and 3 s by the trainer's clock: far noisier
     * than 10%, so the trial runs 4 steps past its target, once. */
    snprintf(script, sizeof script,
             "t=0; for i in $(seq 1 30); do t=$((t + 1 + 2 * (i %% 2))); "
             "echo \"{\\\"step\\\": $i, \\\"time\\\": $t}\" >> %s; done; sleep 60", report);
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.extended, 1);
    assert_true(res.steps_seen >= 10);
    assert_true(res.steps_measured >= 9);
    /* A steady trainer stops at its target. */
    assert_int_equal(truncate(report, 0), 0);
    snprintf(script, sizeof script,
             "for i in $(seq 1 30); do echo \"{\\\"step\\\": $i, \\\"time\\\": $i}\" >> %s; done; "
             "sleep 60", report);
    run_sh(script, &o, &res);
    unlink(report);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.extended, 0);
    assert_true(res.step_time_s > 0.999 && res.step_time_s < 1.001);
}

static void test_report_file_is_authoritative(void **state)
{
    (void)state;
    char report[] = "/tmp/ab-trial-report-XXXXXX";
    int fd = mkstemp(report);
    close(fd);
    struct trial_opts o = opts();
    o.target_steps = 5;
    o.warmup_steps = 1;
    o.report_path = report;
    char script[512];
    /* Exactly 1 s per step by the trainer's own clock, whatever the
     * machine's load: the meter must use the report's times. */
    snprintf(script, sizeof script,
             "for i in 1 2 3 4 5 6; do echo \"{\\\"step\\\": $i, \\\"samples\\\": 8, "
             "\\\"time\\\": $i.5, \\\"peak_mem_bytes\\\": $((i*1000))}\" >> %s; done; sleep 60",
             report);
    run_sh(script, &o, &res);
    unlink(report);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_true(res.steps_seen >= 5);
    assert_true(res.step_time_s > 0.999 && res.step_time_s < 1.001);
    assert_true(res.peak_mem_bytes >= 5000);
}

/* A report file the trainer makes late is still read: while the trial
 * runs, and when it was written just before the command exited. */
static void test_report_file_made_late(void **state)
{
    (void)state;
    char dir[] = "/tmp/ab-trial-late-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char report[64], script[512];
    snprintf(report, sizeof report, "%s/report.jsonl", dir);
    struct trial_opts o = opts();
    o.target_steps = 4;
    o.warmup_steps = 1;
    o.report_path = report;
    snprintf(script, sizeof script,
             "sleep 0.7; for i in 1 2 3 4 5; do echo \"{\\\"step\\\": $i, \\\"time\\\": $i}\" >> %s; "
             "done; sleep 60", report);
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_from, STEPS_FROM_REPORT);
    assert_true(res.wall_s < 5.0);
    unlink(report);

    /* Made and written at the end, between two looks of the backoff
     * (about 0.75 s and 1.15 s): the command's exit is judged with it. */
    o.target_steps = 0;
    snprintf(script, sizeof script,
             "sleep 0.9; for i in 1 2 3; do echo \"{\\\"step\\\": $i, \\\"time\\\": $i}\" >> %s; "
             "done; exit 0", report);
    run_sh(script, &o, &res);
    assert_int_equal(res.outcome, TRIAL_FIT);
    assert_int_equal(res.steps_from, STEPS_FROM_REPORT);
    assert_int_equal(res.steps_seen, 3);
    unlink(report);
    rmdir(dir);
}

static void test_spawn_failure(void **state)
{
    (void)state;
    char *argv[] = { "/nonexistent/train", NULL };
    struct trial_spec spec = { argv, environ, NULL };
    struct trial_opts o = opts();
    assert_int_equal(trial_run(&spec, &o, &res), 0);
    assert_int_equal(res.outcome, TRIAL_SPAWN_FAILED);
    assert_int_equal(res.spawn_errno, ENOENT);
}

static void test_interrupt(void **state)
{
    (void)state;
    volatile sig_atomic_t flag = 1;
    struct trial_opts o = opts();
    o.interrupt = &flag;
    run_sh("echo x; sleep 60", &o, &res);
    assert_int_equal(res.outcome, TRIAL_INTERRUPTED);
    assert_true(res.wall_s < 3);
}

static void test_huge_line_then_oom(void **state)
{
    (void)state;
    struct trial_opts o = opts();
    run_sh("head -c 100000000 /dev/zero | tr '\\0' x; echo; "
           "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has "
           "a total capacity of 8.00 GiB of which 0 bytes is free.'; sleep 60", &o, &res);
    assert_int_equal(res.outcome, TRIAL_OOM);
}

int main(void)
{
    char err[256];
    if (oom_table_load_default(&oom, err, sizeof err) || proctree_become_subreaper()) {
        fprintf(stderr, "setup: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_zero_without_steps),
        cmocka_unit_test(test_exit_zero_after_steps_is_fit),
        cmocka_unit_test(test_probe_steps_and_mismatch),
        cmocka_unit_test(test_oom_line_stops_at_once),
        cmocka_unit_test(test_sigterm_ignored_gets_sigkill),
        cmocka_unit_test(test_escaped_grandchild_is_killed),
        cmocka_unit_test(test_crash_keeps_tail),
        cmocka_unit_test(test_tail_in_order),
        cmocka_unit_test(test_oom_line_short_grace),
        cmocka_unit_test(test_report_file_made_late),
        cmocka_unit_test(test_kernel_oom_kill),
        cmocka_unit_test(test_hang_and_timeout),
        cmocka_unit_test(test_steps_end_a_fit),
        cmocka_unit_test(test_redraws_read_together),
        cmocka_unit_test(test_step_time_is_interval_over_steps),
        cmocka_unit_test(test_bar_line_counts_when_it_began),
        cmocka_unit_test(test_report_file_is_authoritative),
        cmocka_unit_test(test_absurd_step_numbers_ignored),
        cmocka_unit_test(test_noisy_trial_runs_longer),
        cmocka_unit_test(test_spawn_failure),
        cmocka_unit_test(test_interrupt),
        cmocka_unit_test(test_huge_line_then_oom),
        cmocka_unit_test(test_probe_cuda_view),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    oom_table_release(&oom);
    return rc;
}
