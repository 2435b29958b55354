/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for devices: devices_slots() cutting --gpus and
 * --gpus-per-trial into slots, and devices_emulate_lib() finding the
 * --emulate-gpu-memory preload library.  The plan is parsed from a
 * command line as main() parses it; the GPUs are NVML's view opened on a
 * library that does not exist (no GPU, as on a machine without a driver),
 * or, where CMake passes FAKE_NVML_LIB, on the fake libnvidia-ml of
 * tests/fake_nvml scripted through FAKE_NVML_* variables (real UUIDs,
 * masks, a GPU that does not exist, two models mixed).  Without NVML an
 * index names itself and a slot's mask is empty; under Slurm only the
 * count matters and every slot reads "(Slurm picks)"; from a login node
 * (Slurm without SLURM_JOB_ID) --gpus is that count and nothing else.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/devices.h"
#include "control/tune.h"
#include "trial/gpu.h"

#define NO_NVML "/nonexistent/libnvidia-ml.so.1"

/* A command line parsed into a plan; the plan points into argv, so both
 * live here. */
struct cmd {
    char buf[512];
    char *argv[32];
    struct plan plan;
};

static void cmd_parse(struct cmd *c, const char *line)
{
    memset(c, 0, sizeof *c);
    snprintf(c->buf, sizeof c->buf, "%s", line);
    int argc = 0;
    char *save = NULL;
    for (char *t = strtok_r(c->buf, " ", &save); t && argc < 31; t = strtok_r(NULL, " ", &save))
        c->argv[argc++] = t;
    c->argv[argc] = NULL;
    assert_int_equal(cli_parse(argc, c->argv, &c->plan), CLI_RUN);
}

/* Slots with a sentinel past each, so a slot written beyond the count
 * shows. */
#define NSLOTS 8
struct out {
    struct tune_slot slots[NSLOTS];
    char err[512];
};

static void out_init(struct out *o)
{
    for (size_t i = 0; i < NSLOTS; i++) {
        snprintf(o->slots[i].devices, sizeof o->slots[i].devices, "untouched");
        o->slots[i].mask = 0xdeadULL;
    }
    o->err[0] = '\0';
}

/* devices_slots() for LINE on g, max slots at most. */
static long slots_for(const char *line, const struct gpu *g, int slurm, size_t max, struct out *o)
{
    struct cmd c;
    cmd_parse(&c, line);
    out_init(o);
    return devices_slots(&c.plan, g, slurm, o->slots, max, o->err, sizeof o->err);
}

static void no_gpu(struct gpu *g)
{
    gpu_open(g, NO_NVML);
    assert_int_equal(g->n, 0);
}

static int group_setup(void **state)
{
    (void)state;
    /* None of the callers' environment decides a case here. */
    unsetenv("SLURM_JOB_ID");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("AUTOBATCH_GPUEMU_LIB");
    return 0;
}

/* Catches: a plan without --gpus treated as slots (or an error). */
static void test_no_gpus_no_slots(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    assert_int_equal(slots_for("autobatch -- /bin/true", &g, 0, NSLOTS, &o), 0);
    assert_string_equal(o.err, "");
    assert_string_equal(o.slots[0].devices, "untouched");
    gpu_release(&g);
}

/* --parallel N (devices_cpu_slots): N empty slots, or one line saying
 * why not.  Catches: a missing check (cap, cores, free memory, --gpus,
 * Slurm, GPUs in sight), slots written beyond N, devices set on a CPU
 * slot. */
static void test_parallel_cpu_slots(void **state)
{
    (void)state;
    char info[] = "/tmp/ab-test-meminfo-XXXXXX";
    int fd = mkstemp(info);
    assert_true(fd >= 0);
    const char text[] = "MemTotal:        8388608 kB\nMemAvailable:    2097152 kB\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    struct cmd c;
    struct out o;
    struct { const char *line; int gpus, slurm; const char *err; } bad[] = {
        { "autobatch --parallel 2 -- /bin/true", 0, 0, "needs --trial-memory-limit" },
        { "autobatch --parallel 2 --gpus 0 --trial-memory-limit 1G -- /bin/true", 0, 0, "keep one" },
        { "autobatch --parallel 2 --trial-memory-limit 1G -- /bin/true", 0, 1, "--launcher slurm" },
        { "autobatch --parallel 2 --trial-memory-limit 1G -- /bin/true", 2, 0, "use --gpus" },
        { "autobatch --parallel 2 --trial-memory-limit 1500M -- /bin/true", 0, 0,
          "more than the 2.00 GiB available; give --parallel 1" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (cores < 2 && strstr(bad[i].err, "available"))
            continue; /* the cores check comes first */
        cmd_parse(&c, bad[i].line);
        out_init(&o);
        assert_int_equal(devices_cpu_slots(&c.plan, bad[i].gpus, bad[i].slurm, info, o.slots,
                                           NSLOTS, o.err, sizeof o.err), -1);
        assert_non_null(strstr(o.err, bad[i].err));
        assert_string_equal(o.slots[0].devices, "untouched");
    }
    char line[128];
    snprintf(line, sizeof line, "autobatch --parallel %ld --trial-memory-limit 64M -- /bin/true",
             cores + 1);
    cmd_parse(&c, line);
    out_init(&o);
    assert_int_equal(devices_cpu_slots(&c.plan, 0, 0, info, o.slots, NSLOTS, o.err, sizeof o.err),
                     -1);
    assert_non_null(cores + 1 > NSLOTS ? strstr(o.err, "at most") : strstr(o.err, "cores online"));
    if (cores >= 2) {
        cmd_parse(&c, "autobatch --parallel 2 --trial-memory-limit 1G -- /bin/true");
        out_init(&o);
        assert_int_equal(devices_cpu_slots(&c.plan, 0, 0, info, o.slots, NSLOTS, o.err,
                                           sizeof o.err), 2);
        assert_string_equal(o.slots[0].devices, "");
        assert_string_equal(o.slots[1].devices, "");
        assert_true(o.slots[0].mask == 0 && o.slots[1].mask == 0);
        assert_string_equal(o.slots[2].devices, "untouched");
    }
    /* --parallel 1 or none: no slots, no error */
    cmd_parse(&c, "autobatch --parallel 1 -- /bin/true");
    out_init(&o);
    assert_int_equal(devices_cpu_slots(&c.plan, 0, 0, info, o.slots, NSLOTS, o.err, sizeof o.err),
                     0);
    assert_string_equal(o.err, "");
    unlink(info);
}

/* Catches: groups cut wrongly (off by one, one device a slot), the
 * separator, indices replaced by something else without NVML, a mask
 * set for devices NVML does not know. */
static void test_indices_in_pairs(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1,2,3 --gpus-per-trial 2 -- /bin/true", &g, 0,
                               NSLOTS, &o), 2);
    assert_string_equal(o.slots[0].devices, "0,1");
    assert_string_equal(o.slots[1].devices, "2,3");
    assert_true(o.slots[0].mask == 0 && o.slots[1].mask == 0);
    assert_string_equal(o.slots[2].devices, "untouched");
    /* one a trial: four slots, in the order given */
    assert_int_equal(slots_for("autobatch --gpus 3,1,2,0 -- /bin/true", &g, 0, NSLOTS, &o), 4);
    assert_string_equal(o.slots[0].devices, "3");
    assert_string_equal(o.slots[1].devices, "1");
    assert_string_equal(o.slots[2].devices, "2");
    assert_string_equal(o.slots[3].devices, "0");
    gpu_release(&g);
}

/* Catches: the duplicate check dropped or comparing the wrong entries
 * (the repeat is not adjacent to its first). */
static void test_listed_twice(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1,2,0 --gpus-per-trial 2 -- /bin/true", &g, 0,
                               NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "listed twice"));
    assert_non_null(strstr(o.err, "GPU 0"));
    gpu_release(&g);
}

/* Catches: the multiple check dropped (3 GPUs would make one slot and
 * leave one idle) or fewer GPUs than one trial needs accepted. */
static void test_not_a_multiple(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1,2 --gpus-per-trial 2 -- /bin/true", &g, 0,
                               NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "not a multiple"));
    assert_non_null(strstr(o.err, "gives 3 GPUs"));
    assert_int_equal(slots_for("autobatch --gpus 0 --gpus-per-trial 2 -- /bin/true", &g, 0,
                               NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "not a multiple"));
    gpu_release(&g);
}

/* Catches: a word that is neither an index nor a UUID taken as a label
 * (strtol's partial parse, a negative index). */
static void test_neither_index_nor_uuid(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    const char *bad[] = { "0,gpu1", "1x", "-1" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char line[128];
        snprintf(line, sizeof line, "autobatch --gpus %s -- /bin/true", bad[i]);
        assert_int_equal(slots_for(line, &g, 0, NSLOTS, &o), -1);
        assert_non_null(strstr(o.err, "neither an index nor a GPU UUID"));
    }
    gpu_release(&g);
}

/* Catches: "all" without NVML and outside Slurm giving 0 slots (or any
 * count) instead of saying there is nothing to count. */
static void test_all_without_nvml(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    setenv("CUDA_VISIBLE_DEVICES", "0,1", 1); /* not read outside Slurm */
    assert_int_equal(slots_for("autobatch --gpus all -- /bin/true", &g, 0, NSLOTS, &o), -1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_non_null(strstr(o.err, "no GPU seen"));
    gpu_release(&g);
}

/* Catches: Slurm's count not taken from CUDA_VISIBLE_DEVICES (the
 * allocation's), a slot naming devices Slurm hands out itself, a mask
 * set for them, the per-trial grouping ignored under Slurm. */
static void test_all_under_slurm(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    /* inside an allocation; not a number, so that no scontrol is asked */
    setenv("SLURM_JOB_ID", "unit-test", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3", 1);
    assert_int_equal(slots_for("autobatch --gpus all -- /bin/true", &g, 1, NSLOTS, &o), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(o.slots[i].devices, "(Slurm picks)");
        assert_true(o.slots[i].mask == 0);
    }
    assert_string_equal(o.slots[4].devices, "untouched");
    assert_int_equal(slots_for("autobatch --gpus all --gpus-per-trial 2 -- /bin/true", &g, 1,
                               NSLOTS, &o), 2);
    assert_string_equal(o.slots[0].devices, "(Slurm picks)");
    assert_string_equal(o.slots[1].devices, "(Slurm picks)");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("SLURM_JOB_ID");
    gpu_release(&g);
}

/* Catches: from a login node (job arrays) a list of GPUs or "all" taken
 * as if this machine's GPUs were the tasks' (Slurm picks their nodes),
 * or the count N not taken as N GPUs. */
static void test_login_node_count(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    unsetenv("SLURM_JOB_ID");
    assert_int_equal(slots_for("autobatch --gpus 4 -- /bin/true", &g, 1, NSLOTS, &o), 4);
    assert_string_equal(o.slots[3].devices, "(Slurm picks)");
    assert_true(o.slots[3].mask == 0);
    assert_int_equal(slots_for("autobatch --gpus 4 --gpus-per-trial 2 -- /bin/true", &g, 1,
                               NSLOTS, &o), 2);
    assert_int_equal(slots_for("autobatch --gpus 0,1 -- /bin/true", &g, 1, NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "--gpus '0,1' from a login node"));
    assert_non_null(strstr(o.err, "--gpus 4"));
    assert_int_equal(slots_for("autobatch --gpus all -- /bin/true", &g, 1, NSLOTS, &o), -1);
    assert_int_equal(slots_for("autobatch --gpus 0 -- /bin/true", &g, 1, NSLOTS, &o), -1);
    assert_int_equal(slots_for("autobatch --gpus 3 --gpus-per-trial 2 -- /bin/true", &g, 1,
                               NSLOTS, &o), -1);
    gpu_release(&g);
}

/* Catches: max ignored (slots written past the caller's array) or the
 * count returned uncapped. */
static void test_max_caps_the_count(void **state)
{
    (void)state;
    struct gpu g;
    no_gpu(&g);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1,2,3 -- /bin/true", &g, 0, 2, &o), 2);
    assert_string_equal(o.slots[0].devices, "0");
    assert_string_equal(o.slots[1].devices, "1");
    assert_string_equal(o.slots[2].devices, "untouched");
    assert_true(o.slots[2].mask == 0xdeadULL);
    gpu_release(&g);
}

/* Catches: $AUTOBATCH_GPUEMU_LIB not honoured, or a missing file
 * reported as found. */
static void test_emulate_lib_from_env(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_devices-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char lib[256], out[4096];
    snprintf(lib, sizeof lib, "%s/libautobatch-gpuemu.so", dir);
    FILE *f = fopen(lib, "w");
    assert_non_null(f);
    fclose(f);
    setenv("AUTOBATCH_GPUEMU_LIB", lib, 1);
    assert_int_equal(devices_emulate_lib(out, sizeof out), 0);
    assert_string_equal(out, lib);
    assert_int_equal(unlink(lib), 0);
    assert_int_equal(devices_emulate_lib(out, sizeof out), -1);
    unsetenv("AUTOBATCH_GPUEMU_LIB");
    assert_int_equal(rmdir(dir), 0);
}

/* The fake NVML with FAKE_NVML_GPUS GPUs (and NAME/TOTAL when given),
 * opened into fake_g; skips the test where CMake did not pass the
 * library.  fake_release, the tests' teardown, closes it even after a
 * failed assertion, so one failure does not leave the fake initialised
 * (and its script unread) for the next test. */
static struct gpu fake_g;
static int fake_is_open;

static struct gpu *fake_gpu(const char *count, const char *names, const char *totals)
{
    const char *lib = getenv("FAKE_NVML_LIB");
    if (!lib || !*lib)
        skip();
    if (fake_is_open)
        gpu_release(&fake_g);
    setenv("FAKE_NVML_GPUS", count, 1);
    if (names)
        setenv("FAKE_NVML_NAME", names, 1);
    if (totals)
        setenv("FAKE_NVML_TOTAL", totals, 1);
    gpu_open(&fake_g, lib);
    fake_is_open = 1;
    unsetenv("FAKE_NVML_GPUS");
    unsetenv("FAKE_NVML_NAME");
    unsetenv("FAKE_NVML_TOTAL");
    assert_int_equal(fake_g.n, atoi(count));
    return &fake_g;
}

static int fake_release(void **state)
{
    (void)state;
    if (fake_is_open)
        gpu_release(&fake_g);
    fake_is_open = 0;
    return 0;
}

/* Catches: NVML's UUIDs not used for CUDA_VISIBLE_DEVICES, a UUID not
 * matched to its index, masks of the wrong devices, an index NVML does
 * not have accepted, "all" not counting NVML's GPUs. */
static void test_fake_nvml_uuids(void **state)
{
    (void)state;
    const struct gpu *g = fake_gpu("4", NULL, NULL);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1,2,3 --gpus-per-trial 2 -- /bin/true", g, 0,
                               NSLOTS, &o), 2);
    assert_string_equal(o.slots[0].devices, "GPU-fake-00000000,GPU-fake-00000001");
    assert_string_equal(o.slots[1].devices, "GPU-fake-00000002,GPU-fake-00000003");
    assert_true(o.slots[0].mask == 0x3ULL);
    assert_true(o.slots[1].mask == 0xcULL);
    assert_int_equal(slots_for("autobatch --gpus GPU-fake-00000002 -- /bin/true", g, 0, NSLOTS,
                               &o), 1);
    assert_string_equal(o.slots[0].devices, "GPU-fake-00000002");
    assert_true(o.slots[0].mask == 0x4ULL);
    assert_int_equal(slots_for("autobatch --gpus 1,4 -- /bin/true", g, 0, NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "GPU 4 does not exist"));
    assert_int_equal(slots_for("autobatch --gpus all -- /bin/true", g, 0, NSLOTS, &o), 4);
    assert_string_equal(o.slots[3].devices, "GPU-fake-00000003");
    assert_true(o.slots[3].mask == 0x8ULL);
}

/* Catches: a GPU UUID that NVML does not know taken without a word (it
 * would reach CUDA_VISIBLE_DEVICES and fail in every trial), MIG UUIDs
 * refused (NVML does not list them as devices), the check made under
 * Slurm (the allocation's GPUs are not this node's), and the same GPU
 * listed twice in another spelling (an index and its UUID, 0 and 00). */
static void test_gpus_checked_against_nvml(void **state)
{
    (void)state;
    const struct gpu *g = fake_gpu("2", NULL, NULL);
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus GPU-typo -- /bin/true", g, 0, NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "GPU-typo is not a GPU that NVML sees"));
    assert_int_equal(slots_for("autobatch --gpus MIG-0a1b -- /bin/true", g, 0, NSLOTS, &o), 1);
    assert_string_equal(o.slots[0].devices, "MIG-0a1b");
    setenv("SLURM_JOB_ID", "unit-test", 1);
    assert_int_equal(slots_for("autobatch --gpus GPU-typo -- /bin/true", g, 1, NSLOTS, &o), 1);
    unsetenv("SLURM_JOB_ID");
    assert_int_equal(slots_for("autobatch --gpus 1,GPU-fake-00000001 -- /bin/true", g, 0, NSLOTS,
                               &o), -1);
    assert_non_null(strstr(o.err, "GPU GPU-fake-00000001 is listed twice (as 1)"));
    assert_int_equal(slots_for("autobatch --gpus 0,00 -- /bin/true", g, 0, NSLOTS, &o), -1);
    assert_non_null(strstr(o.err, "GPU 00 is listed twice (as 0)"));
    struct gpu none;
    no_gpu(&none); /* without NVML only the spelling can tell */
    assert_int_equal(slots_for("autobatch --gpus 0,00 -- /bin/true", &none, 0, NSLOTS, &o), -1);
    assert_int_equal(slots_for("autobatch --gpus GPU-a,GPU-b -- /bin/true", &none, 0, NSLOTS, &o),
                     2);
    gpu_release(&none);
}

/* Catches: GPUs of two models (or two sizes of one) accepted as one
 * kind, or reported as a plain error (-1) instead of -2. */
static void test_fake_nvml_mixed_models(void **state)
{
    (void)state;
    const struct gpu *g = fake_gpu("4", "NVIDIA A100;NVIDIA A100;NVIDIA L4;NVIDIA L4",
                                   "24G 24G 12G 12G");
    struct out o;
    assert_int_equal(slots_for("autobatch --gpus 0,1 -- /bin/true", g, 0, NSLOTS, &o), 2);
    assert_int_equal(slots_for("autobatch --gpus 0,2 -- /bin/true", g, 0, NSLOTS, &o), -2);
    assert_non_null(strstr(o.err, "mixes GPU models"));
    assert_non_null(strstr(o.err, "NVIDIA A100"));
    assert_non_null(strstr(o.err, "NVIDIA L4"));
    /* one name, two sizes */
    g = fake_gpu("2", "NVIDIA A100", "40G 80G");
    assert_int_equal(slots_for("autobatch --gpus 0,1 -- /bin/true", g, 0, NSLOTS, &o), -2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_gpus_no_slots),
        cmocka_unit_test(test_parallel_cpu_slots),
        cmocka_unit_test(test_indices_in_pairs),
        cmocka_unit_test(test_listed_twice),
        cmocka_unit_test(test_not_a_multiple),
        cmocka_unit_test(test_neither_index_nor_uuid),
        cmocka_unit_test(test_all_without_nvml),
        cmocka_unit_test(test_all_under_slurm),
        cmocka_unit_test(test_login_node_count),
        cmocka_unit_test(test_max_caps_the_count),
        cmocka_unit_test(test_emulate_lib_from_env),
        cmocka_unit_test_teardown(test_fake_nvml_uuids, fake_release),
        cmocka_unit_test_teardown(test_gpus_checked_against_nvml, fake_release),
        cmocka_unit_test_teardown(test_fake_nvml_mixed_models, fake_release),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
