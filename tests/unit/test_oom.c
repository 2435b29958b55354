/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probes/oom.c: the default signature table against real
 * OOM messages of every framework and generation (FACTS.md), against lines
 * that only talk about memory, and the byte counts read from PyTorch's
 * allocator message.  The prefilter in front of the regexes: the literal
 * it derives from each regex, and the same answer as without it on a
 * corpus of real, mutated and random lines.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oom.h"

extern const char ab_oom_signatures[];
extern const size_t ab_oom_signatures_len;

struct sample {
    const char *name;      /* expected signature */
    const char *framework; /* expected framework */
    const char *line;
};

/* Real-looking full lines, as a trial would print them. */
static const struct sample samples[] = {
    /* PyTorch up to 2.0: the parenthesised form, with each exception class. */
    { "torch-cuda-legacy", "pytorch",
      "RuntimeError: CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total "
      "capacity; 781.59 MiB already allocated; 3.03 GiB free; 1.24 GiB reserved in total by "
      "PyTorch)" },
    { "torch-cuda-legacy", "pytorch",
      "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total "
      "capacity; 8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)" },
    { "torch-cuda-legacy", "pytorch",
      "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB "
      "(GPU 1; 15.78 GiB total capacity; 14.61 GiB already allocated; 1.00 MiB free; 14.70 GiB "
      "reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
      "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
      "PYTORCH_CUDA_ALLOC_CONF" },
    /* PyTorch 2.1 with its typo. */
    { "torch-cuda-capacty", "pytorch",
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has "
      "a total capacty of 14.75 GiB of which 11.06 MiB is free. Process 3258 has 14.73 GiB "
      "memory in use. Of the allocated memory 14.04 GiB is allocated by PyTorch, and 509.85 MiB "
      "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
      "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
      "Management and PYTORCH_CUDA_ALLOC_CONF" },
    { "torch-cuda-capacty", "pytorch",
      "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 102.00 MiB. "
      "GPU 1 has a total capacty of 39.38 GiB of which 29.81 MiB is free. Including "
      "non-PyTorch memory, this process has 39.32 GiB memory in use. Of the allocated memory "
      "37.54 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. "
      "If reserved but unallocated memory is large try setting max_split_size_mb to avoid "
      "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF" },
    /* PyTorch now. */
    { "torch-cuda-current", "pytorch",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
      "total capacity of 79.15 GiB of which 3.81 MiB is free. Including non-PyTorch memory, "
      "this process has 79.14 GiB memory in use. Of the allocated memory 77.94 GiB is "
      "allocated by PyTorch, and 707.11 MiB is reserved by PyTorch but unallocated. If "
      "reserved but unallocated memory is large try setting "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
      "documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)" },
    { "torch-cuda-current", "pytorch",
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 1 "
      "has a total capacity of 23.65 GiB of which 0 bytes is free. Process 41877 has 23.64 GiB "
      "memory in use. Of the allocated memory 21.02 GiB is allocated by PyTorch, and 1.17 GiB "
      "is reserved by PyTorch but unallocated." },
    { "torch-cuda-current", "pytorch",
      "2025-03-14 09:12:44,120 ERROR train.py:212 step failed: CUDA out of memory. Tried to "
      "allocate 64.00 MiB. GPU 0 has a total capacity of 39.49 GiB of which 50.81 MiB is "
      "free." },
    /* rich renders tracebacks 80 columns wide when not on a terminal. */
    { "torch-cuda-partial", "pytorch",
      "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a" },
    { "torch-hip", "pytorch",
      "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
      "capacity of 191.98 GiB of which 1.21 GiB is free. Of the allocated memory 187.44 GiB is "
      "allocated by PyTorch, and 2.04 GiB is reserved by PyTorch but unallocated. If reserved "
      "but unallocated memory is large try setting PYTORCH_HIP_ALLOC_CONF=expandable_segments:"
      "True to avoid fragmentation." },
    { "torch-xpu", "pytorch",
      "[rank1]: torch.OutOfMemoryError: XPU out of memory. Tried to allocate 1.50 GiB. GPU 0 has "
      "a total capacity of 15.11 GiB. Of the allocated memory 13.64 GiB is allocated by "
      "PyTorch, and 142.00 MiB is reserved by PyTorch but unallocated. Please use `empty_cache` "
      "to release all unoccupied cached memory." },
    { "torch-mps", "pytorch",
      "RuntimeError: MPS backend out of memory (MPS allocated: 18.13 GB, other allocations: "
      "40.00 KB, max allowed: 18.13 GB). Tried to allocate 256 bytes on shared pool. Use "
      "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations (may "
      "cause system failure)." },
    { "torch-oom-exception", "pytorch",
      "[rank1]: torch.OutOfMemoryError: CUDA error: out of memory" },
    { "torch-oom-exception", "pytorch",
      "torch.cuda.OutOfMemoryError: CUDA error: out of memory" },
    { "torch-cuda-error", "pytorch", "RuntimeError: CUDA error: out of memory" },
    { "torch-cuda-error", "pytorch", "[rank0]: RuntimeError: HIP error: out of memory" },
    { "torch-cpu", "pytorch",
      "RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't "
      "allocate memory: you tried to allocate 268435456 bytes. Error code 12 (Cannot allocate "
      "memory)" },
    { "cpp-bad-alloc", "c++", "RuntimeError: std::bad_alloc" },
    { "cpp-bad-alloc", "c++", "  what():  std::bad_alloc" },
    { "cpp-bad-alloc", "c++", "terminate called after throwing an instance of 'std::bad_alloc'" },
    { "python-memoryerror", "python", "MemoryError" },
    { "python-memoryerror", "python", "[rank1]: MemoryError: Unable to allocate 7.45 GiB for an array" },
    { "cublas-alloc", "cublas",
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`" },
    { "cudnn-alloc", "cudnn", "[rank1]: RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED" },
    { "cudnn-not-supported", "cudnn",
      "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you "
      "passed in a non-contiguous input." },
    { "nccl-cuda-oom", "nccl",
      "gpu-node-3:21734:21980 [1] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'" },
    { "nccl-cuda-oom", "nccl",
      "node0:2011:2011 [0] include/alloc.h:320 (ncclCuMemAlloc) NCCL WARN Cuda failure 2 'out "
      "of memory'" },
    { "nccl-calloc", "nccl",
      "gpu-node-3:21734:21980 [1] include/alloc.h:110 NCCL WARN Failed to CUDA calloc 6291456 "
      "bytes" },
    { "nccl-calloc", "nccl", "[rank0]: Failed to CUDA calloc async 2432 bytes" },
    { "xla-oom", "xla",
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
      "allocate 7406166528 bytes." },
    { "xla-oom", "xla",
      "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 85898814480 "
      "bytes." },
    { "xla-alloc-request", "xla",
      "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
      "2.00GiB (2147483648B) on device ordinal 0" },
    { "slurm-oom-kill", "slurm",
      "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. Some of your processes "
      "may have been killed by the cgroup out-of-memory handler." },
    { "slurm-oom-kill", "slurm",
      "slurmstepd: error: Detected 3 oom_kill events in step 7.1 cgroup." },
    { "slurm-oom-kill", "slurm",
      "slurmstepd-abnode: error: Detected 1 oom-kill event(s) in StepId=9670.batch. Some of your "
      "processes may have been killed by the cgroup out-of-memory handler." },
    { "slurm-task-oom", "slurm", "srun: error: abnode: task 0: Out Of Memory" },
    { "slurm-task-oom", "slurm", "srun: error: gpu-node-17: tasks 0-3: Out Of Memory" },
    { "slurm-state-oom", "slurm", "autobatch: slurm job 260543_2 ended OUT_OF_MEMORY (exit code 0:125)" },
    { "tf-oom", "tensorflow",
      "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
      "tensor with shape[256,1024,1024] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc" },
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

/* Lines that mention memory, OOM or the same libraries but report no
 * allocation failure. */
static const char *const near_misses[] = {
    "    except MemoryError:",
    "catch (const std::bad_alloc &e) { /* handled */ }",
    "handled MemoryError by retrying with a smaller chunk",
    "Reserved memory: 3.2 GiB",
    "DataLoader(dataset, batch_size=32, pin_memory=True, num_workers=8)",
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "max memory allocated 12 GiB",
    "checking for out of memory conditions",
    "Call torch.cuda.empty_cache() to free memory between trials",
    "slurmstepd: error: *** STEP 42.0 ON node1 CANCELLED AT 2026-11-26T01:02:03 ***",
    " 98%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88"
    "\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8a| 2086/2120 [26:01<00:22,  1.49it/s]",
    "{'loss': 2.31, 'memory_allocated': 11.2, 'max_memory_reserved': 14.0, 'epoch': 0.5}",
    "OOM killer disabled",
    "    except torch.cuda.OutOfMemoryError:",
    "WARNING: reduce --per_device_train_batch_size to avoid CUDA out of memory errors",
    "Hint: If you want to see a list of allocated tensors when OOM happens, add "
    "report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
    "W external/xla/xla/tsl/framework/bfc_allocator.cc:482] Allocator (GPU_0_bfc) ran out of "
    "memory trying to allocate 2.20GiB with freed_by_count=0. The caller indicates that this is "
    "not a failure, but this may mean that there could be performance gains if more memory "
    "were available.",
    "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:1012] failed to alloc 2147483648 "
    "bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "grpc: RESOURCE_EXHAUSTED: Received message larger than max (5242880 vs. 4194304)",
    "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, "
    "unhandled cuda error, NCCL version 2.14.3",
    "[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600000 milliseconds "
    "before timing out.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.cuda.max_memory_allocated(): 12884901888",
    "gpu-node-3:21734:21734 [0] NCCL INFO Channel 00/02 :    0   1",
    "XLA_PYTHON_CLIENT_MEM_FRACTION=.75",
    "",
};

static int setup_default(void **state)
{
    static struct oom_table t;
    char err[256];
    t = (struct oom_table)OOM_TABLE_INIT;
    if (oom_table_load_default(&t, err, sizeof err) != 0) {
        fprintf(stderr, "default table: %s\n", err);
        return -1;
    }
    *state = &t;
    return 0;
}

static int teardown_default(void **state)
{
    oom_table_release(*state);
    return 0;
}

static void test_samples_match(void **state)
{
    const struct oom_table *t = *state;
    for (size_t i = 0; i < NSAMPLES; i++) {
        struct oom_match m;
        const char *line = samples[i].line;
        int hit = oom_table_match(t, line, strlen(line), &m);
        if (!hit || strcmp(m.name, samples[i].name) || strcmp(m.framework, samples[i].framework))
            fail_msg("sample %zu (%s): got %s/%s for \"%s\"", i, samples[i].name,
                     hit ? m.name : "no match", hit ? m.framework : "-", line);
    }
}

/* The first column of each row of the embedded TSV, so that a row added
 * to configs/oom-signatures.tsv without a sample fails here. */
static size_t table_names(char names[][64], size_t max)
{
    size_t n = 0;
    const char *p = ab_oom_signatures, *end = ab_oom_signatures + ab_oom_signatures_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        const char *tab = memchr(p, '\t', (size_t)(stop - p));
        if (p < stop && *p != '#' && tab) {
            assert_true(n < max);
            assert_true((size_t)(tab - p) < 64);
            memcpy(names[n], p, (size_t)(tab - p));
            names[n][tab - p] = '\0';
            n++;
        }
        p = nl ? nl + 1 : end;
    }
    return n;
}

static void test_every_row_has_a_sample(void **state)
{
    const struct oom_table *t = *state;
    char names[128][64];
    size_t n = table_names(names, 128);

    assert_int_equal(n, t->nr);
    for (size_t r = 0; r < n; r++) {
        int seen = 0;
        for (size_t i = 0; i < NSAMPLES && !seen; i++) {
            struct oom_match m;
            const char *line = samples[i].line;
            if (oom_table_match(t, line, strlen(line), &m) && !strcmp(m.name, names[r]))
                seen = 1;
        }
        if (!seen)
            fail_msg("signature '%s' is matched by no sample line", names[r]);
    }
}

static void test_near_misses(void **state)
{
    const struct oom_table *t = *state;
    for (size_t i = 0; i < sizeof near_misses / sizeof near_misses[0]; i++) {
        struct oom_match m = { "x", "x" };
        const char *line = near_misses[i];
        if (oom_table_match(t, line, strlen(line), &m))
            fail_msg("near miss matched %s: \"%s\"", m.name, line);
        assert_null(m.name);
    }
}

/* The line is not NUL-terminated: only line[0..len) may count. */
static void test_match_respects_len(void **state)
{
    const struct oom_table *t = *state;
    const char *line = "RuntimeError: CUDA error: out of memory";
    assert_int_equal(oom_table_match(t, line, strlen("RuntimeError: CUDA error: out of"), NULL), 0);
    assert_int_equal(oom_table_match(t, line, strlen(line), NULL), 1);

    /* A NUL from binary output in front of the message must not hide it. */
    char buf[] = "garbage\0 RuntimeError: CUDA error: out of memory";
    struct oom_match m;
    assert_int_equal(oom_table_match(t, buf, sizeof buf - 1, &m), 1);
    assert_string_equal(m.name, "torch-cuda-error");
}

static void test_long_line(void **state)
{
    const struct oom_table *t = *state;
    const char *msg = "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                      "20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.81 MiB is free.";
    size_t len = 200 * 1024;
    char *line = malloc(len);
    assert_non_null(line);
    memset(line, '=', len);
    memcpy(line, msg, strlen(msg));

    struct oom_match m;
    assert_int_equal(oom_table_match(t, line, len, &m), 1);
    assert_string_equal(m.name, "torch-cuda-current");

    /* Documented limit: only the first 64 KiB are examined. */
    memset(line, '=', len);
    memcpy(line + 65 * 1024, msg, strlen(msg));
    assert_int_equal(oom_table_match(t, line, len, NULL), 0);
    /* ... while a message just inside the limit is found. */
    memset(line, '=', len);
    memcpy(line + 64 * 1024 - strlen(msg), msg, strlen(msg));
    assert_int_equal(oom_table_match(t, line, len, &m), 1);
    free(line);
}

static void test_load_custom(void **state)
{
    (void)state;
    struct oom_table t = OOM_TABLE_INIT;
    char err[256] = "";
    const char *text = "# my signatures\r\n"
                       "\r\n"
                       "  # indented comment\n"
                       "mine-oom\tmyframework\tMyAlloc: out of (device|host) memory\r\n"
                       "other\tx\t^fatal: [0-9]+ bytes\n";
    assert_int_equal(oom_table_load(&t, text, err, sizeof err), 0);
    assert_int_equal(t.nr, 2);

    struct oom_match m;
    const char *l1 = "[rank3]: MyAlloc: out of device memory";
    assert_int_equal(oom_table_match(&t, l1, strlen(l1), &m), 1);
    assert_string_equal(m.name, "mine-oom");
    assert_string_equal(m.framework, "myframework");
    const char *l2 = "fatal: 12 bytes";
    assert_int_equal(oom_table_match(&t, l2, strlen(l2), &m), 1);
    assert_string_equal(m.name, "other");
    const char *l3 = "x fatal: 12 bytes";
    assert_int_equal(oom_table_match(&t, l3, strlen(l3), NULL), 0);
    oom_table_release(&t);
    assert_int_equal(t.nr, 0);
    assert_null(t.sigs);
    oom_table_release(&t); /* twice is harmless */
}

static void expect_load_error(const char *text, const char *want)
{
    struct oom_table t = OOM_TABLE_INIT;
    char err[256] = "";
    assert_int_equal(oom_table_load(&t, text, err, sizeof err), -1);
    assert_int_equal(t.nr, 0);
    assert_null(t.sigs);
    if (!strstr(err, want))
        fail_msg("error \"%s\" does not contain \"%s\"", err, want);
    /* lowercase one-liner */
    assert_null(strchr(err, '\n'));
    assert_true(err[0] >= 'a' && err[0] <= 'z');
}

static void test_load_errors(void **state)
{
    (void)state;
    expect_load_error("name-only\tpytorch\n", "line 1: expected 3 tab-separated columns");
    expect_load_error("# comment\n\nok\tpytorch\tfoo\nbad\tx\n", "line 4: expected 3");
    expect_load_error("a\tb\tc\td\n", "line 1: expected 3 tab-separated columns");
    expect_load_error("ok\tpytorch\tfoo\n\nbroken\tx\tfoo(bar\n", "line 3: bad regex for 'broken'");
    expect_load_error("x\ty\ta[b\n", "line 1: bad regex for 'x'");
    expect_load_error("x\t\tfoo\n", "line 1: empty framework column");
    expect_load_error("x\ty\t\n", "line 1: empty regex column");
    expect_load_error("x\ty\tfoo\nx\tz\tbar\n", "line 2: duplicate signature name 'x'");
    expect_load_error("# nothing here\n\n", "no signatures");
    expect_load_error("", "no signatures");

    /* A NULL err buffer is allowed. */
    struct oom_table t = OOM_TABLE_INIT;
    assert_int_equal(oom_table_load(&t, "a\tb\n", NULL, 0), -1);
}

static void expect_numbers(const char *line, int64_t tried, int64_t total, int64_t free_,
                           int gpu)
{
    struct oom_numbers n;
    assert_int_equal(oom_parse_numbers(line, strlen(line), &n), tried >= 0);
    assert_int_equal(n.tried, tried);
    assert_int_equal(n.total, total);
    assert_int_equal(n.free, free_);
    assert_int_equal(n.gpu, gpu);
}

static void test_parse_numbers(void **state)
{
    (void)state;
    /* up to 2.0: 2.26 GiB = 226 * 2^30 / 100 rounded to the byte */
    expect_numbers(samples[0].line, 2426656522LL, 6442450944LL, 3253437727LL, 0);
    expect_numbers(samples[2].line, 20971520LL, 16943645983LL, 1048576LL, 1);
    /* 2.1, "capacty" */
    expect_numbers(samples[3].line, 234881024LL, 15837691904LL, 11597251LL, 0);
    /* now */
    expect_numbers(samples[5].line, 20971520LL, 84986665370LL, 3995075LL, 0);
    expect_numbers(samples[6].line, 2104533975LL, 25393994138LL, 0LL, 1);
    /* HIP prints the same message */
    expect_numbers(samples[9].line, 2147483648LL, 206136955372LL, 1299227607LL, 0);
    /* cut short: what is there is read */
    expect_numbers("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a",
                   20971520LL, -1, -1, 3);
    /* MPS: no device numbers */
    expect_numbers(samples[11].line, 256, -1, -1, -1);
    /* KiB, TiB and bytes */
    expect_numbers("CUDA out of memory. Tried to allocate 512.00 KiB. GPU 0 has a total capacity "
                   "of 2.00 TiB of which 1024 bytes is free.",
                   524288LL, 2199023255552LL, 1024LL, 0);
    /* not an allocator message */
    expect_numbers("RuntimeError: CUDA error: out of memory", -1, -1, -1, -1);
    expect_numbers("Tried to allocate a new buffer", -1, -1, -1, -1);

    /* only line[0..len) is read */
    const char *l = samples[5].line;
    const char *cut = strstr(l, " of which");
    struct oom_numbers n;
    assert_int_equal(oom_parse_numbers(l, (size_t)(cut - l), &n), 1);
    assert_int_equal(n.total, 84986665370LL);
    assert_int_equal(n.free, -1);
    assert_int_equal(oom_parse_numbers(l, 10, &n), 0);
    assert_int_equal(n.tried, -1);
    assert_int_equal(oom_parse_numbers(l, strlen(l), NULL), 1);
}

/* ------------------------------------------------------------------ */
/* The prefilter                                                       */
/* ------------------------------------------------------------------ */

struct literal_case {
    const char *re;
    const char *want;    /* the literal every match must contain, "" for none */
    const char *example; /* a line glibc matches, or NULL */
};

static const struct literal_case literal_cases[] = {
    /* escapes of the special characters are plain bytes */
    { "CUDA out of memory\\. Tried to allocate [^(]*\\(GPU [0-9]+; ",
      "CUDA out of memory. Tried to allocate ",
      "CUDA out of memory. Tried to allocate 2 GiB (GPU 0; " },
    { "\\.\\*\\$\\|\\(", ".*$|(", "x.*$|(y" },
    /* other escapes are not: glibc's word class and word start */
    { "a\\wbcd", "bcd", "axbcd" },
    { "-\\<word", "word", "-word" },
    /* quantifiers after a run: the atom under them leaves it */
    { "ab*cdef", "cdef", "acdef" },
    { "abcd?ef", "abc", "abcef" },
    { "abcd{0,2}ef", "abc", "abcef" },
    { "abcd{2}ef", "abc", "abcddef" },
    { "xyz+w", "xyz", "xyzzzw" },
    { "abc+*de", "ab", "abde" },
    /* bracket expressions, with ']' first, classes and a backslash inside */
    { "[abc]def", "def", "bdef" },
    { "x[]yzzzzz]ab", "ab", "x]ab" },
    { "[^]abcdef]gh", "gh", "xgh" },
    { "[[:alpha:]abcdefgh]ok", "ok", "qok" },
    { "[\\]abc]", "abc", "\\abc]" },
    /* groups: opaque, whatever is inside or after them */
    { "(foo)barbaz", "barbaz", "foobarbaz" },
    { "(foo|quux)xyz", "xyz", "quuxxyz" },
    { "(a(b)c)*zz", "zz", "zz" },
    { "w(x)+yyy", "yyy", "wxxyyy" },
    { "torch\\.(cuda\\.)?OutOfMemoryError: .", "OutOfMemoryError: ",
      "torch.OutOfMemoryError: x" },
    { "(RuntimeError: |what\\(\\): +|instance of '|^)std::bad_alloc", "std::bad_alloc",
      "std::bad_alloc" },
    /* an alternation outside every group: nothing is proven */
    { "foo|barbaz", "", "foo" },
    { "ab(c|d)e|f", "", "f" },
    /* anchors, wildcards, bytes of multibyte characters */
    { "^(\\[rank[0-9]+\\]: )?MemoryError(: .*)?$", "MemoryError", "MemoryError" },
    { "a.b.c", "a", "axbyc" },
    { "\xc3\xa9" "abc", "abc", "\xc3\xa9" "abc" },
    { "[0-9]+.*", "", "7" },
    { "", "", NULL },
};

static void test_required_literal(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof literal_cases / sizeof literal_cases[0]; i++) {
        const struct literal_case *c = &literal_cases[i];
        char out[128];
        size_t n = oom_required_literal(c->re, out, sizeof out);
        if (n != strlen(c->want) || strcmp(out, c->want))
            fail_msg("'%s': got '%s' (%zu), want '%s'", c->re, out, n, c->want);
        if (!c->example)
            continue;
        /* glibc reads the regex as we do: its example matches and holds
         * the literal */
        regex_t re;
        assert_int_equal(regcomp(&re, c->re, REG_EXTENDED | REG_NOSUB), 0);
        if (regexec(&re, c->example, 0, NULL, 0) != 0)
            fail_msg("'%s' does not match its example '%s'", c->re, c->example);
        regfree(&re);
        assert_non_null(strstr(c->example, c->want));
    }
    /* A cut literal is still required. */
    char small[4];
    assert_int_equal(oom_required_literal("abcdef", small, sizeof small), 3);
    assert_string_equal(small, "abc");
    assert_int_equal(oom_required_literal("abc", small, 0), 0);
}

/* Each row's regex, from the embedded TSV (third column). */
static size_t table_regexes(char res[][512], size_t max)
{
    size_t n = 0;
    const char *p = ab_oom_signatures, *end = ab_oom_signatures + ab_oom_signatures_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        const char *t1 = memchr(p, '\t', (size_t)(stop - p));
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(stop - t1 - 1)) : NULL;
        if (p < stop && *p != '#' && t2) {
            assert_true(n < max);
            assert_true((size_t)(stop - t2 - 1) < 512);
            memcpy(res[n], t2 + 1, (size_t)(stop - t2 - 1));
            res[n][stop - t2 - 1] = '\0';
            n++;
        }
        p = nl ? nl + 1 : end;
    }
    return n;
}

/* Every default row has a literal long enough for the fast scan: one row
 * without would send every line through every regex again. */
static void test_default_rows_have_literals(void **state)
{
    (void)state;
    static char res[128][512];
    size_t n = table_regexes(res, 128);
    assert_true(n >= 20);
    for (size_t i = 0; i < n; i++) {
        char lit[512];
        if (oom_required_literal(res[i], lit, sizeof lit) < 8)
            fail_msg("row %zu: literal '%s' of '%s' is short", i, lit, res[i]);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    /* xorshift64*: a fixed sequence, so a failure reproduces */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static size_t rnd(size_t n)
{
    return n ? (size_t)(rng() % n) : 0;
}

#define LINE_CAP 2048

struct corpus_line {
    char buf[LINE_CAP];
    size_t len;
};

static char literals[128][512];
static size_t nliterals;

/* Bytes that make near misses likely: the literals' own, and noise. */
static char noise_byte(void)
{
    static const char extra[] = " .:;()[]'0123456789\t\x01\xe2\x96\x88";
    if (rnd(3) == 0) {
        const char *l = literals[rnd(nliterals)];
        return l[rnd(strlen(l))];
    }
    return extra[rnd(sizeof extra - 1)];
}

static void put(struct corpus_line *l, size_t at, const char *p, size_t n)
{
    if (at > l->len)
        at = l->len;
    if (l->len + n > LINE_CAP)
        n = LINE_CAP - l->len;
    memmove(l->buf + at + n, l->buf + at, l->len - at);
    memcpy(l->buf + at, p, n);
    l->len += n;
}

/* One random change: the kinds of damage a real log does to a message. */
static void mutate(struct corpus_line *l)
{
    size_t at = rnd(l->len + 1);
    switch (rnd(9)) {
    case 0: /* drop a byte */
        if (at < l->len) {
            memmove(l->buf + at, l->buf + at + 1, l->len - at - 1);
            l->len--;
        }
        break;
    case 1: /* change a byte */
        if (at < l->len)
            l->buf[at] = noise_byte();
        break;
    case 2: /* a NUL from binary output, or in place of a space */
        if (at < l->len && rnd(2))
            l->buf[at] = l->buf[at] == ' ' ? '\0' : l->buf[at];
        else
            put(l, at, "", 1);
        break;
    case 3: /* cut short */
        l->len = at;
        break;
    case 4: { /* a rank prefix, shifting the message by 9 to 12 bytes */
        char rank[32];
        int n = snprintf(rank, sizeof rank, "[rank%zu]: ", rnd(2000));
        put(l, 0, rank, (size_t)n);
        break;
    }
    case 5: { /* someone's literal somewhere */
        const char *lit = literals[rnd(nliterals)];
        put(l, at, lit, strlen(lit));
        break;
    }
    case 6: /* case of a letter */
        if (at < l->len && ((l->buf[at] | 0x20) >= 'a' && (l->buf[at] | 0x20) <= 'z'))
            l->buf[at] ^= 0x20;
        break;
    case 7: { /* a piece of itself again */
        size_t from = rnd(l->len + 1), n = rnd(l->len - from + 1);
        char tmp[LINE_CAP];
        memcpy(tmp, l->buf + from, n);
        put(l, at, tmp, n);
        break;
    }
    default: /* noise */
        for (size_t k = rnd(20); k > 0; k--) {
            char c = noise_byte();
            put(l, rnd(l->len + 1), &c, 1);
        }
        break;
    }
}

static void set_line(struct corpus_line *l, const char *s)
{
    l->len = 0;
    put(l, 0, s, strlen(s));
}

/* The two tables agree on this line; returns whether it matched. */
static int same_answer(const struct oom_table *fast, const struct oom_table *slow,
                       const char *line, size_t len)
{
    struct oom_match a, b;
    int x = oom_table_match(fast, line, len, &a);
    int y = oom_table_match(slow, line, len, &b);
    if (x != y || (x && strcmp(a.name, b.name)))
        fail_msg("prefilter says %s, regexes say %s for \"%.*s\" (%zu bytes)",
                 x ? a.name : "no match", y ? b.name : "no match", (int)len, line, len);
    return x;
}

static int has_literal(const char *line, size_t len)
{
    for (size_t i = 0; i < nliterals; i++)
        if (memmem(line, len, literals[i], strlen(literals[i])))
            return 1;
    return 0;
}

/*
 * The prefilter never changes an answer: every sample and near miss,
 * mutations of them, lines built around the literals, random noise and
 * long lines get the same answer (and the same signature) with the
 * prefilter as from trying every regex.
 */
static void test_prefilter_equivalence(void **state)
{
    const struct oom_table *fast = *state;
    struct oom_table slow = OOM_TABLE_INIT;
    char err[256];
    assert_int_equal(oom_table_load_default(&slow, err, sizeof err), 0);
    oom_table_prefilter(&slow, 0);

    static char res[128][512];
    size_t nres = table_regexes(res, 128);
    for (nliterals = 0; nliterals < nres; nliterals++)
        oom_required_literal(res[nliterals], literals[nliterals], sizeof literals[0]);

    const char *bases[NSAMPLES + sizeof near_misses / sizeof near_misses[0]];
    size_t nbases = 0;
    for (size_t i = 0; i < NSAMPLES; i++)
        bases[nbases++] = samples[i].line;
    for (size_t i = 0; i < sizeof near_misses / sizeof near_misses[0]; i++)
        bases[nbases++] = near_misses[i];

    static struct corpus_line l;
    size_t lines = 0, hits = 0, literal_only = 0;
#define CHECK()                                                              \
    do {                                                                     \
        int hit_ = same_answer(fast, &slow, l.buf, l.len);                   \
        hits += hit_;                                                        \
        literal_only += !hit_ && has_literal(l.buf, l.len);                  \
        lines++;                                                             \
    } while (0)

    for (size_t i = 0; i < nbases; i++) {
        /* at every alignment to the prefilter's stride */
        for (size_t shift = 0; shift < 24; shift++) {
            set_line(&l, bases[i]);
            put(&l, 0, "........................", shift);
            CHECK();
        }
        for (int k = 0; k < 150; k++) {
            set_line(&l, bases[i]);
            for (size_t m = 1 + rnd(3); m > 0; m--)
                mutate(&l);
            CHECK();
        }
    }
    for (size_t i = 0; i < nliterals; i++) {
        for (int k = 0; k < 40; k++) {
            set_line(&l, literals[i]);
            for (size_t m = rnd(4); m > 0; m--)
                mutate(&l);
            CHECK();
        }
    }
    for (int k = 0; k < 3000; k++) {
        l.len = rnd(200);
        for (size_t j = 0; j < l.len; j++)
            l.buf[j] = noise_byte();
        CHECK();
    }
#undef CHECK
    /* The corpus reaches both sides of the prefilter and of the regexes. */
    assert_true(hits > 500);
    assert_true(literal_only > 500);
    assert_true(lines - hits - literal_only > 3000);

    /* Long lines: the heap copy and the 64 KiB cut, a message straddling it. */
    size_t len = 70 * 1024;
    char *big = malloc(len);
    assert_non_null(big);
    for (size_t at = 0; at < len; at += 997) {
        for (size_t j = 0; j < len; j++)
            big[j] = noise_byte();
        const char *msg = samples[rnd(NSAMPLES)].line;
        size_t n = strlen(msg);
        if (at + n <= len)
            memcpy(big + at, msg, n);
        same_answer(fast, &slow, big, len);
        same_answer(fast, &slow, big, at + n / 2 < len ? at + n / 2 : len);
    }
    free(big);
    oom_table_release(&slow);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_match),
        cmocka_unit_test(test_every_row_has_a_sample),
        cmocka_unit_test(test_near_misses),
        cmocka_unit_test(test_match_respects_len),
        cmocka_unit_test(test_long_line),
        cmocka_unit_test(test_load_custom),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_required_literal),
        cmocka_unit_test(test_default_rows_have_literals),
        cmocka_unit_test(test_prefilter_equivalence),
    };
    return cmocka_run_group_tests(tests, setup_default, teardown_default);
}
