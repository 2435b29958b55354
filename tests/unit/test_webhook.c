/* SPDX-License-Identifier: MIT */
/* Unit tests for webhook: payload shapes and limits for each format,
 * delivery against a real HTTP server on 127.0.0.1 (tests/webhook_server.py,
 * python3's standard library) with retries, Retry-After in both forms,
 * timeouts, refused connections, final 4xx answers, signatures checked
 * with our own HMAC, delivery ids, the spool, and that the secret never
 * shows in a message or a spool file.  The pure parts (backoff,
 * Retry-After parsing, format names) are tested without the server. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "output/webhook.h"

/* A results file as autobatch writes it (a --checkpointing both run of
 * simtrain, two trials kept), with a GPU and a baseline added. */
static const char sample_results[] =
    "{\n"
    " \"schema\": \"autobatch.results/1\",\n"
    " \"command\": [\"accelerate\", \"launch\", \"train.py\", \"--config\", \"conf/tts base.yaml\"],\n"
    " \"started_at\": \"2026-11-21T08:00:00Z\",\n"
    " \"host\": {\"hostname\": \"gpu-node-7\", \"gpus\": [{\"index\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"memory_total_bytes\": 85520809984}]},\n"
    " \"space\": {\"batch\": {\"min\": 1, \"max\": 64, \"step\": 1}, \"grad_accum\": [1, 2], \"checkpointing\": [false, true], \"global_batch\": null, \"world_size\": 1, \"unit\": \"samples\", \"headroom\": 0.0},\n"
    " \"trials\": [\n"
    "  {\"id\": 1, \"micro_batch\": 16, \"grad_accum\": 1, \"checkpointing\": false, \"outcome\": \"fit\", \"exit_code\": null, \"signal\": 15, \"wall_s\": 0.1355, \"steps_measured\": 5, \"samples_per_s\": 1530.1395, \"peak_mem_bytes\": null, \"evidence\": null, \"step_time_s\": 0.0105, \"step_time_mad_s\": 0.0001, \"teardown_s\": 0.0542, \"signature\": null},\n"
    "  {\"id\": 2, \"micro_batch\": 17, \"grad_accum\": 1, \"checkpointing\": false, \"outcome\": \"oom\", \"exit_code\": null, \"signal\": 15, \"wall_s\": 0.0197, \"steps_measured\": 0, \"samples_per_s\": null, \"peak_mem_bytes\": null, \"evidence\": \"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which 1.75 GiB is free. Including non-PyTorch \", \"step_time_s\": null, \"step_time_mad_s\": null, \"teardown_s\": 0.0018, \"signature\": \"torch-cuda-current\"}\n"
    " ],\n"
    " \"max_fit\": [\n"
    "  {\"grad_accum\": 1, \"checkpointing\": false, \"micro_batch\": 16, \"smallest_fail\": 17, \"trials\": 3},\n"
    "  {\"grad_accum\": 2, \"checkpointing\": false, \"micro_batch\": 16, \"smallest_fail\": 17, \"trials\": 2},\n"
    "  {\"grad_accum\": 1, \"checkpointing\": true, \"micro_batch\": null, \"bounded_by\": \"batch.max\", \"largest_tried_fit\": 64, \"smallest_fail\": null, \"trials\": 3},\n"
    "  {\"grad_accum\": 2, \"checkpointing\": true, \"micro_batch\": null, \"bounded_by\": \"batch.max\", \"largest_tried_fit\": 64, \"smallest_fail\": null, \"trials\": 2}\n"
    " ],\n"
    " \"frontier\": [\n"
    "  {\"micro_batch\": 16, \"grad_accum\": 2, \"checkpointing\": false, \"samples_per_s\": 1549.3, \"peak_mem_bytes\": null},\n"
    "  {\"micro_batch\": 14, \"grad_accum\": 2, \"checkpointing\": false, \"samples_per_s\": 1424.9, \"peak_mem_bytes\": null}\n"
    " ],\n"
    " \"best\": {\"micro_batch\": 32, \"grad_accum\": 1, \"checkpointing\": true, \"samples_per_s\": 2343.7, \"peak_mem_bytes\": null},\n"
    " \"contradictions\": [],\n"
    " \"summary\": {\"trials\": 10, \"wall_s\": 1.8, \"exit\": 0, \"interrupted\": false},\n"
    " \"preset\": \"hf\",\n"
    " \"config\": null,\n"
    " \"baseline\": {\"regression\": true, \"changes\": [{\"text\": \"largest micro-batch with checkpointing off: 16 (was 16)\", \"regression\": false}, {\"text\": \"best samples/s fell 12% (2343.7 -> 2062.4)\", \"regression\": true}]}\n"
    "}\n"
    ;

#define SECRET "autobatch-test-secret-7f3a"

static char tmpdir[] = "/tmp/ab-webhook-XXXXXX";
static char logpath[4200];
static pid_t server_pid = -1;
static int server_stdin = -1;
static int server_port;
static int dead_port;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *url(const char *path)
{
    static char buf[8][256];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "http://127.0.0.1:%d%s", server_port, path);
    return b;
}

/* A port where nothing listens: bind one, note it, close it. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Start tests/webhook_server.py and read its port from its first line. */
static int start_server(void)
{
    const char *src = getenv("AB_SOURCE_DIR");
    if (!src) {
        fprintf(stderr, "test_webhook: set AB_SOURCE_DIR to the source tree\n");
        return -1;
    }
    char script[4200];
    snprintf(script, sizeof script, "%s/tests/webhook_server.py", src);
    if (access(script, R_OK) < 0) {
        fprintf(stderr, "test_webhook: cannot read '%s'\n", script);
        return -1;
    }
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
        return -1;
    char *argv[] = { "python3", script, logpath, "--time-limit", "120", "--exit-on-stdin-eof", NULL };
    server_pid = fork();
    if (server_pid < 0)
        return -1;
    if (server_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp("python3", argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    server_stdin = in[1];

    char line[64];
    size_t n = 0;
    double end = now_s() + 20;
    while (n < sizeof line - 1 && !memchr(line, '\n', n)) {
        struct pollfd p = { out[0], POLLIN, 0 };
        int left = (int)((end - now_s()) * 1000);
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t r = read(out[0], line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(out[0]);
    line[n] = '\0';
    server_port = atoi(line);
    if (server_port <= 0) {
        fprintf(stderr, "test_webhook: the server did not say its port (is python3 on PATH?)\n");
        return -1;
    }
    return 0;
}

static int rm_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            char p[4200];
            snprintf(p, sizeof p, "%s/%s", path, de->d_name);
            rm_tree(p);
        }
        closedir(d);
        return rmdir(path);
    }
    return unlink(path);
}

static int group_setup(void **state)
{
    (void)state;
    /* Only 127.0.0.1 is used: make sure no proxy from the environment
     * gets in between. */
    setenv("no_proxy", "127.0.0.1,localhost", 1);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(logpath, sizeof logpath, "%s/requests.jsonl", tmpdir);
    char err[256];
    if (webhook_global_init(err, sizeof err) < 0)
        return -1;
    dead_port = free_port();
    return dead_port > 0 ? start_server() : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    if (server_stdin >= 0)
        close(server_stdin);
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        int st;
        double end = now_s() + 5;
        while (waitpid(server_pid, &st, WNOHANG) == 0) {
            if (now_s() > end) {
                kill(server_pid, SIGKILL);
                waitpid(server_pid, &st, 0);
                break;
            }
            usleep(20000);
        }
    }
    webhook_global_cleanup();
    rm_tree(tmpdir);
    return 0;
}

/* The requests the server recorded for path, oldest first. */
static json_t *requests(const char *path)
{
    json_t *all = json_array();
    FILE *f = fopen(logpath, "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *e = json_loads(line, 0, NULL);
        assert_non_null(e);
        if (!strcmp(json_string_value(json_object_get(e, "path")), path))
            json_array_append_new(all, e);
        else
            json_decref(e);
    }
    free(line);
    fclose(f);
    return all;
}

static const char *header(const json_t *req, const char *name)
{
    return json_string_value(json_object_get(json_object_get(req, "headers"), name));
}

static void assert_uuid4(const char *s)
{
    assert_non_null(s);
    assert_int_equal(strlen(s), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            assert_int_equal(s[i], '-');
        else
            assert_non_null(strchr("0123456789abcdef", s[i]));
    }
    assert_int_equal(s[14], '4');
    assert_non_null(strchr("89ab", s[19]));
}

/* Check a recorded request's signature with libcrypto's HMAC. */
static void assert_signed(const json_t *req, const char *secret)
{
    const char *sig = header(req, "x-autobatch-signature-256");
    assert_non_null(sig);
    const char *body = json_string_value(json_object_get(req, "body"));
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    char want[7 + 64 + 1] = "sha256=";
    assert_non_null(HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)body,
                         strlen(body), mac, &n));
    assert_int_equal(n, 32);
    for (unsigned i = 0; i < n; i++)
        snprintf(want + 7 + 2 * i, 3, "%02x", mac[i]);
    assert_string_equal(sig, want);
}

static json_t *sample(void)
{
    json_error_t je;
    json_t *r = json_loads(sample_results, 0, &je);
    if (!r)
        fail_msg("sample results: %s", je.text);
    return r;
}

static struct webhook_opts fast_opts(const char *u)
{
    struct webhook_opts o;
    webhook_opts_default(&o);
    o.url = u;
    o.connect_timeout_s = 2;
    o.total_timeout_s = 5;
    o.max_attempts = 3;
    o.base_delay_s = 0.02;
    o.max_delay_s = 5;
    return o;
}

/* ---------------------------------------------------------------- */
/* Pure functions                                                    */

static void test_format_parse(void **state)
{
    (void)state;
    enum webhook_format f;
    const char *names[] = { "generic", "slack", "discord", "teams" };
    for (int i = 0; i < 4; i++) {
        assert_int_equal(webhook_format_parse(names[i], &f), 0);
        assert_int_equal(f, i);
        assert_string_equal(webhook_format_name(f), names[i]);
    }
    assert_int_equal(webhook_format_parse("email", &f), -1);
    assert_int_equal(webhook_format_parse("", &f), -1);
    assert_int_equal(webhook_format_parse("Slack ", &f), -1);
    assert_int_equal(webhook_format_parse(NULL, &f), -1);
}

static void test_backoff(void **state)
{
    (void)state;
    /* Equal jitter: [d/2, d) with d = base * 2^(attempt-1), capped. */
    assert_true(webhook_backoff(1, 1, 60, -1, 0) == 0.5);
    double hi = webhook_backoff(1, 1, 60, -1, 0xffffffffu);
    assert_true(hi > 0.99 && hi < 1.0);
    assert_true(webhook_backoff(3, 1, 60, -1, 0) == 2.0);
    assert_true(webhook_backoff(3, 1, 60, -1, 0x80000000u) == 3.0);
    assert_true(webhook_backoff(0, 1, 60, -1, 0) == 0.5);     /* below 1 counts as 1 */
    assert_true(webhook_backoff(-7, 1, 60, -1, 0) == 0.5);
    /* The cap bounds every wait, even after many attempts. */
    assert_true(webhook_backoff(7, 1, 60, -1, 0) == 30.0);    /* 64 capped to 60 */
    double big = webhook_backoff(100000, 1, 60, -1, 0xffffffffu);
    assert_true(big >= 30.0 && big < 60.0);
    /* The waits grow with the attempt (at the same random draw). */
    for (int a = 1; a < 6; a++)
        assert_true(webhook_backoff(a + 1, 0.1, 60, -1, 12345) >
                    webhook_backoff(a, 0.1, 60, -1, 12345));
    /* Retry-After is the server's word, unjittered, capped. */
    assert_true(webhook_backoff(1, 1, 60, 5, 0xffffffffu) == 5.0);
    assert_true(webhook_backoff(4, 1, 60, 0, 0xffffffffu) == 0.0);
    assert_true(webhook_backoff(1, 1, 60, 86400, 0) == 60.0);
    assert_true(webhook_backoff(1, 1, 60, 2.5, 7) == 2.5);
}

static void test_uuid_and_redact(void **state)
{
    (void)state;
    char a[WEBHOOK_UUID_LEN], b[WEBHOOK_UUID_LEN], err[256];
    assert_int_equal(webhook_uuid4(a, err, sizeof err), 0);
    assert_int_equal(webhook_uuid4(b, err, sizeof err), 0);
    assert_uuid4(a);
    assert_uuid4(b);
    assert_string_not_equal(a, b);

    /* libcurl's parser: a bare "/" path is nothing more; a query, a
     * fragment or user info alone is; IPv6 hosts keep their brackets; what
     * libcurl cannot parse shows its scheme alone (a host with a blank
     * would otherwise be shown as typed). */
    static const char *const redact[][2] = {
        { "https://hooks.slack.com/services/T000/B000/XXXXSECRET", "https://hooks.slack.com/..." },
        { "http://user:pass@example.com:8080/x?y=1", "http://example.com:8080/..." },
        { "http://127.0.0.1:9", "http://127.0.0.1:9" },
        { "hooks.example.com/token", "hooks.example.com/..." },
        { "https://hooks.slack.com/", "https://hooks.slack.com" },
        { "https://example.com?token=abc", "https://example.com/..." },
        { "https://example.com#abc", "https://example.com/..." },
        { "https://tok@example.com", "https://example.com/..." },
        { "https://[::1]:8443/hook/xyz", "https://[::1]:8443/..." },
        { "https://exa mple.com/secret", "https://..." },
        { "not a url", "(not a url)" },
    };
    char out[256];
    for (size_t i = 0; i < sizeof redact / sizeof *redact; i++) {
        webhook_url_redact(redact[i][0], out, sizeof out);
        assert_string_equal(out, redact[i][1]);
    }
    webhook_url_redact(NULL, out, sizeof out);
    assert_string_equal(out, "(none)");
    /* Cut to the buffer, never past it. */
    char small[12];
    webhook_url_redact("https://hooks.slack.com/x", small, sizeof small);
    assert_string_equal(small, "https://hoo");
}

/* RFC 4231's HMAC-SHA256 test cases (all but case 5, whose output is
 * truncated), through the function that signs webhooks; none of their
 * keys holds a zero byte, so each is also a C string secret. */
static void test_signature_rfc4231(void **state)
{
    (void)state;
    char k1[21], k3[21], k4[26], k6[132], d3[51], d4[51], sig[WEBHOOK_SIG_LEN];
    memset(k1, 0x0b, 20), k1[20] = '\0';
    memset(k3, 0xaa, 20), k3[20] = '\0';
    for (int i = 0; i < 25; i++)
        k4[i] = (char)(i + 1);
    k4[25] = '\0';
    memset(k6, 0xaa, 131), k6[131] = '\0';
    memset(d3, 0xdd, 50), d3[50] = '\0';
    memset(d4, 0xcd, 50), d4[50] = '\0';
    static const char t6[] = "Test Using Larger Than Block-Size Key - Hash Key First";
    static const char t7[] = "This is a test using a larger than block-size key and a larger "
                             "than block-size data. The key needs to be hashed before being "
                             "used by the HMAC algorithm.";
    const struct { const char *key, *data, *want; } v[] = {
        { k1, "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
        { "Jefe", "what do ya want for nothing?",
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
        { k3, d3, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
        { k4, d4, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
        { k6, t6, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
        { k6, t7, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        webhook_signature(v[i].key, v[i].data, strlen(v[i].data), sig);
        assert_int_equal(strncmp(sig, "sha256=", 7), 0);
        assert_string_equal(sig + 7, v[i].want);
    }
    /* An empty body is signed too (HMAC of nothing). */
    webhook_signature("key", "", 0, sig);
    assert_string_equal(sig, "sha256=5d5d139563c95b5967b9bd9a8c9b233a9dedb45072794cd232dc1b74832607d0");
}

static void test_signature_vector(void **state)
{
    (void)state;
    /* Computed with python3: hmac.new(key, body, hashlib.sha256).hexdigest() */
    char sig[WEBHOOK_SIG_LEN];
    webhook_signature("It's a Secret to Everybody", "Hello, World!", 13, sig);
    assert_string_equal(sig, "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
    const char *body = "{\"schema\":\"autobatch.results/1\"}";
    webhook_signature(SECRET, body, strlen(body), sig);
    assert_string_equal(sig, "sha256=1791f77480854a3ce7c048dcfdfd25217e47f3cbdda720cb87f2fa5a69b76c1f");
}

/* ---------------------------------------------------------------- */
/* Delivery                                                          */

static void test_send_ok_generic(void **state)
{
    (void)state;
    json_t *res = sample();
    char *body, err[512];
    size_t len;
    assert_int_equal(webhook_payload(res, WEBHOOK_GENERIC, &body, &len, err, sizeof err), 0);
    assert_int_equal(strlen(body), len);

    struct webhook_opts o = fast_opts(url("/ok/generic"));
    struct webhook_result r;
    assert_int_equal(webhook_send(&o, body, len, &r, err, sizeof err), 0);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.last_status, 200);
    assert_int_equal(r.permanent, 0);
    assert_uuid4(r.delivery_id);

    json_t *reqs = requests("/ok/generic");
    assert_int_equal(json_array_size(reqs), 1);
    json_t *q = json_array_get(reqs, 0);
    assert_string_equal(json_string_value(json_object_get(q, "method")), "POST");
    assert_string_equal(header(q, "content-type"), "application/json");
    assert_string_equal(header(q, "x-autobatch-delivery"), r.delivery_id);
    assert_null(header(q, "x-autobatch-signature-256"));    /* no secret, no signature */
    /* The generic body is the results document itself. */
    json_t *got = json_loads(json_string_value(json_object_get(q, "body")), 0, NULL);
    assert_non_null(got);
    assert_true(json_equal(got, res));
    json_decref(got);
    json_decref(reqs);
    free(body);
    json_decref(res);
}

static void test_send_flaky_signed(void **state)
{
    (void)state;
    const char *body = "{\"hello\":\"flaky\"}";
    struct webhook_opts o = fast_opts(url("/flaky/signed"));
    o.secret = SECRET;
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, body, strlen(body), &r, err, sizeof err), 0);
    double took = now_s() - t0;
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.last_status, 200);
    /* Retry-After: 1 was honoured, not the 0.02 s backoff. */
    assert_true(took >= 0.9);
    assert_true(took < 10);

    json_t *reqs = requests("/flaky/signed");
    assert_int_equal(json_array_size(reqs), 2);
    const char *id0 = header(json_array_get(reqs, 0), "x-autobatch-delivery");
    const char *id1 = header(json_array_get(reqs, 1), "x-autobatch-delivery");
    assert_uuid4(id0);
    assert_string_equal(id0, id1);              /* one delivery, one id */
    assert_string_equal(id0, r.delivery_id);
    for (int i = 0; i < 2; i++)
        assert_signed(json_array_get(reqs, i), SECRET);
    /* And the server saw the second attempt at least a second later. */
    double gap = json_real_value(json_object_get(json_array_get(reqs, 1), "t")) -
                 json_real_value(json_object_get(json_array_get(reqs, 0), "t"));
    assert_true(gap >= 0.9);
    json_decref(reqs);

    /* A second delivery of the same body gets a new id. */
    struct webhook_result r2;
    o.url = url("/ok/second");
    assert_int_equal(webhook_send(&o, body, strlen(body), &r2, err, sizeof err), 0);
    assert_string_not_equal(r.delivery_id, r2.delivery_id);
}

/* path answers with a Retry-After of about 1 s once, then 200: delivered
 * on the second attempt, after waiting as told. */
static void expect_one_retry_after(const char *path)
{
    struct webhook_opts o = fast_opts(url(path));
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), 0);
    double took = now_s() - t0;
    assert_int_equal(r.attempts, 2);
    assert_true(took >= 0.9 && took < 10);
    json_t *reqs = requests(path);
    assert_int_equal(json_array_size(reqs), 2);
    json_decref(reqs);
}

static void test_send_ratelimit(void **state)
{
    (void)state;
    expect_one_retry_after("/ratelimit/a");
}

static void test_send_http_date(void **state)
{
    (void)state;
    expect_one_retry_after("/date/a");
}

/* A Retry-After on the first answer only: the second wait is the short
 * backoff, not the first answer's second (one curl handle makes every
 * attempt, so a value libcurl kept from the transfer before would show). */
static void test_send_retry_after_not_reused(void **state)
{
    (void)state;
    struct webhook_opts o = fast_opts(url("/stale/a"));
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), 0);
    double took = now_s() - t0;
    assert_int_equal(r.attempts, 3);
    assert_true(took >= 0.9);
    assert_true(took < 1.7);
    json_t *reqs = requests("/stale/a");
    assert_int_equal(json_array_size(reqs), 3);
    double gap = json_real_value(json_object_get(json_array_get(reqs, 2), "t")) -
                 json_real_value(json_object_get(json_array_get(reqs, 1), "t"));
    assert_true(gap < 0.7);
    json_decref(reqs);
}

/* A Retry-After libcurl cannot read is no advice: the backoff applies. */
static void test_send_retry_after_garbage(void **state)
{
    (void)state;
    struct webhook_opts o = fast_opts(url("/garbage/a"));
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), 0);
    assert_int_equal(r.attempts, 2);
    assert_true(now_s() - t0 < 0.8);
}

static void test_send_timeout(void **state)
{
    (void)state;
    struct webhook_opts o = fast_opts(url("/slow/a"));
    o.total_timeout_s = 1;
    o.max_attempts = 2;
    o.base_delay_s = 0.01;
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    double took = now_s() - t0;
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.last_status, 0);
    assert_int_equal(r.permanent, 0);
    assert_true(took >= 1.8 && took < 6);   /* two 1 s attempts, not the server's 3 s */
    assert_non_null(strstr(err, "after 2 attempts"));
}

static void test_send_refused(void **state)
{
    (void)state;
    char u[128];
    snprintf(u, sizeof u, "http://127.0.0.1:%d/hook", dead_port);
    struct webhook_opts o = fast_opts(u);
    o.max_attempts = 4;
    o.base_delay_s = 0.05;
    o.secret = SECRET;
    struct webhook_result r;
    char err[512];
    double t0 = now_s();
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    double took = now_s() - t0;
    assert_int_equal(r.attempts, 4);
    assert_int_equal(r.last_status, 0);
    assert_int_equal(r.permanent, 0);
    /* Waits of at least 0.025 + 0.05 + 0.1 (the floor of equal jitter),
     * at most 0.05 + 0.1 + 0.2. */
    assert_true(took >= 0.17);
    assert_true(took < 3);
    assert_non_null(strstr(err, "after 4 attempts"));
    assert_null(strstr(err, SECRET));
    assert_null(strstr(err, "/hook"));      /* the path may hold a token */
}

static void test_send_bad_permanent(void **state)
{
    (void)state;
    struct webhook_opts o = fast_opts(url("/bad/a"));
    o.secret = SECRET;
    struct webhook_result r;
    char err[512];
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.last_status, 400);
    assert_int_equal(r.permanent, 1);
    assert_non_null(strstr(err, "answered 400"));
    assert_non_null(strstr(err, "invalid_payload"));    /* the receiver's reason */
    assert_null(strstr(err, SECRET));
    json_t *reqs = requests("/bad/a");
    assert_int_equal(json_array_size(reqs), 1);
    assert_signed(json_array_get(reqs, 0), SECRET);
    json_decref(reqs);

    /* A redirect is not followed (a POST would become a GET): final. */
    o.url = url("/redirect/a");
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.last_status, 302);
    assert_int_equal(r.permanent, 1);
    reqs = requests("/ok/");
    assert_int_equal(json_array_size(reqs), 0);
    json_decref(reqs);
}

static void test_secret_never_in_errors(void **state)
{
    (void)state;
    struct webhook_result r;
    char err[512], u[256];
    struct webhook_opts o = fast_opts(NULL);
    o.secret = SECRET;
    o.max_attempts = 1;

    /* A URL that holds the secret (in user info, path, query) is not
     * echoed either: messages name the scheme and host only. */
    snprintf(u, sizeof u, "ftp://x:%s@example.com/%s", SECRET, SECRET);
    o.url = u;
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_int_equal(r.attempts, 0);
    assert_int_equal(r.permanent, 1);
    assert_non_null(strstr(err, "unsupported webhook url"));
    assert_null(strstr(err, SECRET));

    snprintf(u, sizeof u, "http://u:%s@127.0.0.1:%d/%s?k=%s", SECRET, dead_port, SECRET, SECRET);
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_int_equal(r.attempts, 1);
    assert_null(strstr(err, SECRET));

    snprintf(u, sizeof u, "http://127.0.0.1:%d/bad/%s", server_port, SECRET);
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_int_equal(r.last_status, 400);
    assert_null(strstr(err, SECRET));

    o.url = NULL;
    assert_int_equal(webhook_send(&o, "{}", 2, &r, err, sizeof err), -1);
    assert_null(strstr(err, SECRET));
}

static volatile sig_atomic_t cancel_flag;

static void on_alarm(int sig)
{
    (void)sig;
    cancel_flag = 1;
}

/* Send to path with a SIGALRM after 0.3 s setting the cancel flag. */
static int send_cancelled(const char *path, struct webhook_result *r, char *err, size_t errlen,
                          double *took)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    cancel_flag = 0;
    struct webhook_opts o = fast_opts(url(path));
    o.total_timeout_s = 10;
    o.cancel = &cancel_flag;
    struct itimerval it = { { 0, 0 }, { 0, 300000 } };
    double t0 = now_s();
    setitimer(ITIMER_REAL, &it, NULL);
    int rc = webhook_send(&o, "{}", 2, r, err, errlen);
    *took = now_s() - t0;
    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    return rc;
}

static void test_cancel(void **state)
{
    (void)state;
    struct webhook_result r;
    char err[512];
    double took;
    /* During a transfer (the server would take 3 s). */
    assert_int_equal(send_cancelled("/slow/cancel", &r, err, sizeof err, &took), -1);
    assert_true(took >= 0.25 && took < 1.5);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.permanent, 0);
    assert_non_null(strstr(err, "interrupted"));
    /* During the wait for a retry (Retry-After: 1). */
    assert_int_equal(send_cancelled("/flaky/cancel", &r, err, sizeof err, &took), -1);
    assert_true(took >= 0.25 && took < 0.9);
    assert_int_equal(r.attempts, 1);
    assert_non_null(strstr(err, "interrupted"));
}

static void test_send_large_body(void **state)
{
    (void)state;
    /* 2 MiB: curl would ask "Expect: 100-continue" and stall a second on
     * a receiver that does not answer it. */
    size_t n = 2u << 20;
    char *body = malloc(n + 1);
    assert_non_null(body);
    memset(body, 'x', n);
    body[0] = '"';
    body[n - 1] = '"';
    body[n] = '\0';
    struct webhook_opts o = fast_opts(url("/ok/large"));
    o.secret = SECRET;
    struct webhook_result r;
    char err[512];
    assert_int_equal(webhook_send(&o, body, n, &r, err, sizeof err), 0);
    assert_int_equal(r.attempts, 1);
    json_t *reqs = requests("/ok/large");
    assert_int_equal(json_array_size(reqs), 1);
    json_t *q = json_array_get(reqs, 0);
    assert_null(header(q, "expect"));
    assert_int_equal(strlen(json_string_value(json_object_get(q, "body"))), n);
    assert_signed(q, SECRET);
    json_decref(reqs);
    free(body);
}

/* ---------------------------------------------------------------- */
/* Payloads                                                          */

/* Send a payload to the server and give back the body it received. */
static json_t *deliver(enum webhook_format f, const json_t *res, const char *path)
{
    char *body, err[512];
    size_t len;
    assert_int_equal(webhook_payload(res, f, &body, &len, err, sizeof err), 0);
    struct webhook_opts o = fast_opts(url(path));
    struct webhook_result r;
    assert_int_equal(webhook_send(&o, body, len, &r, err, sizeof err), 0);
    free(body);
    json_t *reqs = requests(path);
    assert_int_equal(json_array_size(reqs), 1);
    json_error_t je;
    json_t *got = json_loads(json_string_value(json_object_get(json_array_get(reqs, 0), "body")),
                             0, &je);
    json_decref(reqs);
    if (!got)
        fail_msg("the %s body is not JSON: %s", webhook_format_name(f), je.text);
    return got;
}

/* All string values under j, joined by newlines, for "does it say X". */
static void all_text(const json_t *j, char *out, size_t len)
{
    if (json_is_string(j)) {
        size_t n = strlen(out);
        snprintf(out + n, len - n, "%s\n", json_string_value(j));
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v)
            all_text(v, out, len);
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v)
            all_text(v, out, len);
    }
}

/* Characters as Discord counts them (UTF-16 code units). */
static size_t u16len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p & 0xc0) != 0x80)
            n++;
        if ((*p & 0xf8) == 0xf0)
            n++;    /* a surrogate pair */
    }
    return n;
}

static size_t slen(const json_t *s)
{
    return json_is_string(s) ? strlen(json_string_value(s)) : 0;
}

static void check_slack_limits(const json_t *p)
{
    assert_true(json_is_string(json_object_get(p, "text")));
    assert_true(slen(json_object_get(p, "text")) <= 3000);
    const json_t *blocks = json_object_get(p, "blocks");
    assert_true(json_is_array(blocks));
    assert_true(json_array_size(blocks) >= 1 && json_array_size(blocks) <= 50);
    size_t i;
    json_t *b;
    json_array_foreach(blocks, i, b) {
        assert_string_equal(json_string_value(json_object_get(b, "type")), "section");
        const json_t *t = json_object_get(b, "text");
        assert_string_equal(json_string_value(json_object_get(t, "type")), "mrkdwn");
        assert_true(slen(json_object_get(t, "text")) >= 1);
        assert_true(slen(json_object_get(t, "text")) <= 3000);
    }
}

static void check_discord_limits(const json_t *p)
{
    const json_t *content = json_object_get(p, "content");
    assert_true(json_is_string(content));
    assert_true(slen(content) <= 2000);
    assert_true(u16len(json_string_value(content)) <= 2000);
    const json_t *embeds = json_object_get(p, "embeds");
    assert_true(json_array_size(embeds) >= 1 && json_array_size(embeds) <= 10);
    const json_t *e = json_array_get(embeds, 0);
    size_t total = slen(json_object_get(e, "title")) + slen(json_object_get(e, "description")) +
                   slen(json_object_get(json_object_get(e, "footer"), "text"));
    assert_true(slen(json_object_get(e, "title")) <= 256);
    assert_true(slen(json_object_get(e, "description")) <= 4096);
    assert_true(slen(json_object_get(json_object_get(e, "footer"), "text")) <= 2048);
    const json_t *fields = json_object_get(e, "fields");
    assert_true(json_array_size(fields) <= 25);
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f) {
        assert_true(slen(json_object_get(f, "name")) >= 1);
        assert_true(slen(json_object_get(f, "name")) <= 256);
        assert_true(slen(json_object_get(f, "value")) >= 1);
        assert_true(slen(json_object_get(f, "value")) <= 1024);
        total += slen(json_object_get(f, "name")) + slen(json_object_get(f, "value"));
    }
    assert_true(total <= 6000);
    /* Nobody is pinged by what a command line says. */
    const json_t *am = json_object_get(p, "allowed_mentions");
    assert_true(json_is_array(json_object_get(am, "parse")));
    assert_int_equal(json_array_size(json_object_get(am, "parse")), 0);
}

static const json_t *teams_card(const json_t *p)
{
    assert_string_equal(json_string_value(json_object_get(p, "type")), "message");
    const json_t *atts = json_object_get(p, "attachments");
    assert_int_equal(json_array_size(atts), 1);
    const json_t *a = json_array_get(atts, 0);
    assert_string_equal(json_string_value(json_object_get(a, "contentType")),
                        "application/vnd.microsoft.card.adaptive");
    const json_t *card = json_object_get(a, "content");
    assert_string_equal(json_string_value(json_object_get(card, "type")), "AdaptiveCard");
    assert_string_equal(json_string_value(json_object_get(card, "version")), "1.4");
    const json_t *body = json_object_get(card, "body");
    assert_true(json_array_size(body) >= 2);
    size_t i;
    json_t *el;
    int factsets = 0;
    json_array_foreach(body, i, el) {
        const char *type = json_string_value(json_object_get(el, "type"));
        assert_non_null(type);
        if (!strcmp(type, "TextBlock")) {
            assert_true(json_is_string(json_object_get(el, "text")));
        } else {
            assert_string_equal(type, "FactSet");
            factsets++;
            size_t k;
            json_t *fact;
            json_array_foreach(json_object_get(el, "facts"), k, fact) {
                assert_true(json_is_string(json_object_get(fact, "title")));
                assert_true(json_is_string(json_object_get(fact, "value")));
            }
        }
    }
    assert_true(factsets >= 1);
    return card;
}

static void test_payload_formats(void **state)
{
    (void)state;
    json_t *res = sample();
    char text[32768];

    json_t *p = deliver(WEBHOOK_SLACK, res, "/ok/slack");
    check_slack_limits(p);
    text[0] = '\0';
    all_text(p, text, sizeof text);
    assert_non_null(strstr(json_string_value(json_object_get(p, "text")), "micro_batch 32"));
    assert_non_null(strstr(text, "grad_accum 1, checkpointing on"));
    assert_non_null(strstr(text, "2343.7 samples/s"));
    assert_non_null(strstr(text, "10 trials in 1.8 s"));
    assert_non_null(strstr(text, "NVIDIA H100 80GB HBM3"));
    assert_non_null(strstr(text, "grad_accum 2, checkpointing off: 16 (17 fails)"));
    assert_non_null(strstr(text, "the top of the range fitted"));
    assert_non_null(strstr(text, "Regression against the baseline"));
    /* Regressions come first, and "->" is escaped for Slack. */
    const char *reg = strstr(text, "best samples/s fell 12% (2343.7 -&gt; 2062.4)");
    const char *other = strstr(text, "largest micro-batch with checkpointing off");
    assert_non_null(reg);
    assert_non_null(other);
    assert_true(reg < other);
    assert_non_null(strstr(text, "`accelerate launch train.py --config 'conf/tts base.yaml'`"));
    json_decref(p);

    p = deliver(WEBHOOK_DISCORD, res, "/ok/discord");
    check_discord_limits(p);
    text[0] = '\0';
    all_text(p, text, sizeof text);
    assert_non_null(strstr(json_string_value(json_object_get(p, "content")), "micro\\_batch 32"));
    assert_non_null(strstr(text, "2343.7 samples/s"));
    assert_non_null(strstr(text, "NVIDIA H100 80GB HBM3, 80 GiB on gpu-node-7"));
    assert_non_null(strstr(text, "Largest micro-batch per cell"));
    assert_non_null(strstr(text, "Regression against the baseline"));
    json_decref(p);

    p = deliver(WEBHOOK_TEAMS, res, "/ok/teams");
    teams_card(p);
    text[0] = '\0';
    all_text(p, text, sizeof text);
    assert_non_null(strstr(text, "micro_batch 32"));
    assert_non_null(strstr(text, "2343.7 samples/s"));
    assert_non_null(strstr(text, "grad_accum 1, checkpointing off"));
    assert_non_null(strstr(text, "Regression against the baseline"));
    json_decref(p);
    json_decref(res);
}

/* A results file far past every limit: hundreds of trials and cells, a
 * command line of 2000 words with markup and non-ASCII characters, a
 * huge GPU name, hundreds of long baseline changes. */
static json_t *huge_results(void)
{
    json_t *r = sample();
    json_t *cmd = json_array();
    for (int i = 0; i < 2000; i++) {
        char w[64];
        snprintf(w, sizeof w, "--opt%d=v\xc3\xa4l`*_|@everyone\xf0\x9f\x9a\x80", i);
        json_array_append_new(cmd, json_string(w));
    }
    json_object_set_new(r, "command", cmd);
    json_t *trials = json_array(), *cells = json_array(), *changes = json_array();
    for (int i = 0; i < 600; i++)
        json_array_append(trials, json_array_get(json_object_get(r, "trials"), i % 2));
    json_object_set_new(r, "trials", trials);
    for (int i = 0; i < 400; i++)
        json_array_append_new(cells, json_pack("{s:i, s:b, s:i, s:i, s:i}", "grad_accum", i / 2 + 1,
                                               "checkpointing", i % 2, "micro_batch", 1000 + i,
                                               "smallest_fail", 1001 + i, "trials", 3));
    json_object_set_new(r, "max_fit", cells);
    char longtext[2000];
    for (size_t i = 0; i + 3 < sizeof longtext; i += 3)
        memcpy(longtext + i, "\xe2\x82\xac", 3);    /* euro signs: cut points inside characters */
    longtext[sizeof longtext - 2] = '\0';
    longtext[1998 - 1998 % 3] = '\0';
    for (int i = 0; i < 300; i++)
        json_array_append_new(changes, json_pack("{s:s, s:b}", "text", longtext, "regression", i % 3 == 0));
    json_object_set_new(r, "baseline", json_pack("{s:b, s:o}", "regression", 1, "changes", changes));
    json_t *gpu = json_array_get(json_object_get(json_object_get(r, "host"), "gpus"), 0);
    json_object_set_new(gpu, "name", json_string(longtext));
    json_object_set_new(json_object_get(r, "host"), "hostname", json_string(longtext));
    json_object_set_new(json_object_get(r, "space"), "unit", json_string(longtext));
    return r;
}

static void test_payload_limits(void **state)
{
    (void)state;
    json_t *r = huge_results();
    char *body, err[256];
    size_t len;

    /* Discord goes through the server, as a receiver would see it. */
    json_t *p = deliver(WEBHOOK_DISCORD, r, "/ok/discord-huge");
    check_discord_limits(p);
    const json_t *fields = json_object_get(json_array_get(json_object_get(p, "embeds"), 0), "fields");
    int saw_more_cells = 0, saw_more_changes = 0;
    size_t i;
    json_t *f;
    json_array_foreach(fields, i, f) {
        const char *v = json_string_value(json_object_get(f, "value"));
        saw_more_cells |= strstr(v, "more cells") != NULL;
        saw_more_changes |= strstr(v, "more changes") != NULL;
    }
    assert_true(saw_more_cells);
    assert_true(saw_more_changes);
    json_decref(p);

    assert_int_equal(webhook_payload(r, WEBHOOK_SLACK, &body, &len, err, sizeof err), 0);
    p = json_loads(body, 0, NULL);      /* parses: so no UTF-8 character was cut */
    assert_non_null(p);
    check_slack_limits(p);
    json_decref(p);
    free(body);

    assert_int_equal(webhook_payload(r, WEBHOOK_TEAMS, &body, &len, err, sizeof err), 0);
    assert_true(len < 28 * 1024);       /* Teams' message size limit */
    p = json_loads(body, 0, NULL);
    assert_non_null(p);
    const json_t *card = teams_card(p);
    size_t k;
    json_t *el;
    json_array_foreach(json_object_get(card, "body"), k, el)
        assert_true(json_array_size(json_object_get(el, "facts")) <= 41);
    json_decref(p);
    free(body);
    json_decref(r);
}

static void test_payload_sparse(void **state)
{
    (void)state;
    char *body, err[256];
    size_t len;
    /* Nothing fits: no best, exit 3, no GPU. */
    json_t *r = json_loads("{\"schema\":\"autobatch.results/1\",\"command\":[\"python3\",\"t.py\"],"
                           "\"host\":{\"hostname\":\"vm\",\"gpus\":[]},\"best\":null,"
                           "\"max_fit\":[{\"grad_accum\":1,\"checkpointing\":false,"
                           "\"micro_batch\":null,\"smallest_fail\":1,\"trials\":1}],"
                           "\"summary\":{\"trials\":1,\"wall_s\":0.05,\"exit\":3}}", 0, NULL);
    assert_non_null(r);
    for (int f = WEBHOOK_SLACK; f <= WEBHOOK_TEAMS; f++) {
        assert_int_equal(webhook_payload(r, (enum webhook_format)f, &body, &len, err, sizeof err), 0);
        json_t *p = json_loads(body, 0, NULL);
        assert_non_null(p);
        char text[8192] = "";
        all_text(p, text, sizeof text);
        assert_non_null(strstr(text, "nothing fits, even the smallest candidate"));
        assert_non_null(strstr(text, "no GPU on vm"));
        assert_non_null(strstr(text, "no fit seen (1 fails)"));
        assert_non_null(strstr(text, "1 trial in 0.1 s"));
        assert_null(strstr(text, "baseline"));
        json_decref(p);
        free(body);
    }
    json_decref(r);

    /* An empty object: every key missing. */
    r = json_object();
    for (int f = WEBHOOK_GENERIC; f <= WEBHOOK_TEAMS; f++) {
        assert_int_equal(webhook_payload(r, (enum webhook_format)f, &body, &len, err, sizeof err), 0);
        json_t *p = json_loads(body, 0, NULL);
        assert_non_null(p);
        json_decref(p);
        free(body);
    }
    json_decref(r);

    /* Not an object: an error, and no body. */
    r = json_array();
    body = (char *)"unchanged";
    assert_int_equal(webhook_payload(r, WEBHOOK_SLACK, &body, &len, err, sizeof err), -1);
    assert_null(body);
    assert_non_null(strstr(err, "not a json object"));
    json_decref(r);
}

/* A matrix (--slurm-targets posts one): as it is in the generic format;
 * in the chat formats one line per row, a pending one said so. */
static void test_payload_matrix(void **state)
{
    (void)state;
    char *body, err[256];
    size_t len;
    json_t *m = json_loads(
        "{\"schema\":\"autobatch.matrix/1\",\"same_command\":true,\"cells\":[],\"rows\":["
        "{\"name\":\"debug:small\",\"machine\":\"Slurm target debug:small\",\"command\":[\"t.sh\"],"
        "\"best\":{\"micro_batch\":48,\"grad_accum\":1,\"checkpointing\":false},"
        "\"samples_per_s\":612.5,\"exit\":0},"
        "{\"name\":\"never\",\"machine\":\"Slurm target never\",\"command\":[\"t.sh\"],"
        "\"best\":null,\"exit\":5,\"slurm_pending\":\"PartitionDown\"}]}", 0, NULL);
    assert_non_null(m);
    assert_int_equal(webhook_payload(m, WEBHOOK_GENERIC, &body, &len, err, sizeof err), 0);
    json_t *g = json_loads(body, 0, NULL);
    assert_true(json_equal(g, m));
    json_decref(g);
    free(body);
    for (int f = WEBHOOK_SLACK; f <= WEBHOOK_TEAMS; f++) {
        assert_int_equal(webhook_payload(m, (enum webhook_format)f, &body, &len, err, sizeof err), 0);
        json_t *p = json_loads(body, 0, NULL);
        assert_non_null(p);
        char text[8192] = "";
        all_text(p, text, sizeof text);
        assert_non_null(strstr(text, "autobatch matrix: 1 of 2 with a configuration chosen"));
        /* (Discord's markdown escapes the underscores) */
        assert_non_null(strstr(text, "Slurm target debug:small"));
        assert_non_null(strstr(text, "batch 48 \xc3\x97 grad"));
        assert_non_null(strstr(text, "612.5/s"));
        assert_non_null(strstr(text, "PENDING in the queue (PartitionDown)"));
        json_decref(p);
        free(body);
    }
    json_decref(m);
}

/* Every results file of tests/data (real runs of autobatch: GPUs, a
 * crash, a hang, an interrupt, a joint search, a partial file) gives
 * a payload in each format that keeps the limits. */
static void test_payload_real_results(void **state)
{
    (void)state;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/tests/data", getenv("AB_SOURCE_DIR"));
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    int files = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "results-", 8) || l < 6 || strcmp(de->d_name + l - 5, ".json"))
            continue;
        char path[4600], *body, err[256];
        size_t len;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        json_t *r = json_load_file(path, 0, NULL);
        assert_non_null(r);
        files++;
        for (int f = WEBHOOK_GENERIC; f <= WEBHOOK_TEAMS; f++) {
            if (webhook_payload(r, (enum webhook_format)f, &body, &len, err, sizeof err) < 0)
                fail_msg("%s, %s: %s", de->d_name, webhook_format_name((enum webhook_format)f), err);
            json_t *p = json_loads(body, 0, NULL);
            assert_non_null(p);
            if (f == WEBHOOK_GENERIC)
                assert_true(json_equal(p, r));
            else if (f == WEBHOOK_SLACK)
                check_slack_limits(p);
            else if (f == WEBHOOK_DISCORD)
                check_discord_limits(p);
            else
                teams_card(p);
            json_decref(p);
            free(body);
        }
        json_decref(r);
    }
    closedir(d);
    assert_true(files >= 1);
}

/* ---------------------------------------------------------------- */
/* The spool                                                         */

static int count_json(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        n += de->d_name[0] != '.' && l > 5 && !strcmp(de->d_name + l - 5, ".json");
    }
    closedir(d);
    return n;
}

static char *slurp_first(const char *dir, char *name, size_t namelen)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    char *data = NULL;
    while ((de = readdir(d)) && !data) {
        if (de->d_name[0] == '.')
            continue;
        char p[4600];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        snprintf(name, namelen, "%s", p);
        FILE *f = fopen(p, "r");
        assert_non_null(f);
        data = calloc(1, 1 << 20);
        size_t n = fread(data, 1, (1 << 20) - 1, f);
        data[n] = '\0';
        fclose(f);
    }
    closedir(d);
    return data;
}

static void test_spool_save_and_flush(void **state)
{
    (void)state;
    char dir[4200], err[512], path[4600];
    snprintf(dir, sizeof dir, "%s/cache/autobatch/" WEBHOOK_SPOOL_SUBDIR, tmpdir);
    json_t *res = sample();
    char *body;
    size_t len;
    assert_int_equal(webhook_payload(res, WEBHOOK_SLACK, &body, &len, err, sizeof err), 0);

    /* First a delivery that fails: its id is kept with the payload. */
    struct webhook_opts o = fast_opts(url("/ok/spool-1"));
    o.secret = SECRET;
    const char *id = "0f0e0d0c-0b0a-4908-8706-050403020100";
    assert_int_equal(webhook_spool_save_delivery(dir, o.url, body, len, id, err, sizeof err), 0);
    assert_int_equal(webhook_spool_save(dir, url("/ok/spool-2"), "{\"n\":2}", 7, err, sizeof err), 0);

    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(count_json(dir), 2);
    char *data = slurp_first(dir, path, sizeof path);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_null(strstr(data, SECRET));
    json_t *doc = json_loads(data, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "autobatch.webhook-spool/1");
    assert_non_null(strstr(json_string_value(json_object_get(doc, "url")), "/ok/spool-"));
    assert_true(json_is_string(json_object_get(doc, "body")));
    json_decref(doc);
    free(data);

    const char *one[] = { dir };
    int sent = -1, left = -1;

    /* With a URL: only the payload kept for that URL is sent, to it; the
     * other is not touched, not counted, and stays. */
    assert_int_equal(webhook_spool_flush(one, 1, &o, url("/ok/spool-2"), &sent, &left, err,
                                         sizeof err), 0);
    assert_int_equal(sent, 1);
    assert_int_equal(left, 0);
    assert_int_equal(count_json(dir), 1);
    json_t *reqs = requests("/ok/spool-1");
    assert_int_equal(json_array_size(reqs), 0);
    json_decref(reqs);
    reqs = requests("/ok/spool-2");
    assert_int_equal(json_array_size(reqs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 0), "body")), "{\"n\":2}");
    assert_uuid4(header(json_array_get(reqs, 0), "x-autobatch-delivery"));
    json_decref(reqs);

    /* A URL nothing was kept for: nothing is sent anywhere. */
    assert_int_equal(webhook_spool_flush(one, 1, &o, url("/ok/other"), &sent, &left, err,
                                         sizeof err), 0);
    assert_int_equal(sent + left, 0);
    assert_int_equal(count_json(dir), 1);
    reqs = requests("/ok/other");
    assert_int_equal(json_array_size(reqs), 0);
    json_decref(reqs);

    /* Without a URL: the rest, to its own URL only, signed with the
     * caller's secret, with its original delivery id, and removed. */
    assert_int_equal(webhook_spool_flush(one, 1, &o, NULL, &sent, &left, err, sizeof err), 0);
    assert_int_equal(sent, 1);
    assert_int_equal(left, 0);
    assert_int_equal(count_json(dir), 0);
    reqs = requests("/ok/spool-1");
    assert_int_equal(json_array_size(reqs), 1);
    json_t *q = json_array_get(reqs, 0);
    assert_signed(q, SECRET);
    assert_string_equal(header(q, "x-autobatch-delivery"), id);    /* the original delivery */
    assert_string_equal(json_string_value(json_object_get(q, "body")), body);
    json_decref(reqs);
    reqs = requests("/ok/spool-2");
    assert_int_equal(json_array_size(reqs), 1);                     /* not sent again */
    json_decref(reqs);

    /* An empty spool, and a missing one, flush to nothing. */
    assert_int_equal(webhook_spool_flush(one, 1, &o, NULL, &sent, &left, err, sizeof err), 0);
    assert_int_equal(sent + left, 0);
    snprintf(path, sizeof path, "%s/none", tmpdir);
    const char *none[] = { path };
    assert_int_equal(webhook_spool_flush(none, 1, &o, NULL, &sent, &left, err, sizeof err), 0);
    assert_int_equal(sent + left, 0);
    free(body);
    json_decref(res);
}

static void test_spool_refused_and_junk(void **state)
{
    (void)state;
    char dir[4200], err[512], path[4600];
    snprintf(dir, sizeof dir, "%s/spool-2", tmpdir);
    struct webhook_opts o = fast_opts(NULL);
    o.secret = SECRET;
    int sent, left;

    const char *one[] = { dir };

    /* Refused for good: not retried, and kept (never sent anywhere else),
     * to be removed by hand. */
    assert_int_equal(webhook_spool_save(dir, url("/bad/spool"), "{}", 2, err, sizeof err), 0);
    assert_int_equal(webhook_spool_flush(one, 1, &o, NULL, &sent, &left, err, sizeof err), -1);
    assert_int_equal(sent, 0);
    assert_int_equal(left, 1);
    assert_non_null(strstr(err, "answered 400"));
    assert_int_equal(count_json(dir), 1);
    json_t *reqs = requests("/bad/spool");
    assert_int_equal(json_array_size(reqs), 1);
    json_decref(reqs);
    assert_int_equal(webhook_spool_flush(one, 1, &o, url("/ok/fixed"), &sent, &left, err,
                                         sizeof err), 0);
    assert_int_equal(sent + left, 0);
    reqs = requests("/ok/fixed");
    assert_int_equal(json_array_size(reqs), 0);
    json_decref(reqs);
    assert_int_equal(count_json(dir), 1);
    char kept[4600];
    free(slurp_first(dir, kept, sizeof kept));
    assert_int_equal(unlink(kept), 0);

    /* A broken .json file counts as left; other files are left alone. */
    snprintf(path, sizeof path, "%s/broken.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/README", dir);
    f = fopen(path, "w");
    fputs("hello", f);
    fclose(f);
    assert_int_equal(webhook_spool_flush(one, 1, &o, NULL, &sent, &left, err, sizeof err), -1);
    assert_int_equal(sent, 0);
    assert_int_equal(left, 1);
    assert_non_null(strstr(err, "broken.json"));
    assert_int_equal(access(path, F_OK), 0);

    /* A delivery id from a tampered file cannot inject a header. */
    snprintf(path, sizeof path, "%s/broken.json", dir);
    f = fopen(path, "w");
    fprintf(f, "{\"schema\":\"autobatch.webhook-spool/1\",\"url\":\"%s\","
               "\"delivery_id\":\"x\\r\\nX-Evil: 1\",\"body\":\"{}\"}", url("/ok/tampered"));
    fclose(f);
    assert_int_equal(webhook_spool_flush(one, 1, &o, NULL, &sent, &left, err, sizeof err), 0);
    assert_int_equal(sent, 1);
    reqs = requests("/ok/tampered");
    assert_int_equal(json_array_size(reqs), 1);
    assert_null(header(json_array_get(reqs, 0), "x-evil"));
    assert_uuid4(header(json_array_get(reqs, 0), "x-autobatch-delivery"));
    json_decref(reqs);
}

/* A webhook that is down gets one series of retries per flush, however
 * many payloads are kept for it and in however many directories (the
 * spool and where older versions kept it), while the payloads for
 * other URLs are still sent, each to its own URL. */
static void test_spool_dead_one_series(void **state)
{
    (void)state;
    char d1[4200], d2[4200], err[512];
    snprintf(d1, sizeof d1, "%s/state/" WEBHOOK_SPOOL_SUBDIR, tmpdir);
    snprintf(d2, sizeof d2, "%s/legacy/" WEBHOOK_SPOOL_SUBDIR, tmpdir);
    const char *dirs[] = { d1, d2 };
    struct webhook_opts o = fast_opts(NULL);
    char dead[128];
    snprintf(dead, sizeof dead, "http://127.0.0.1:%d/hook", dead_port);

    /* Two payloads for a URL down for 3 attempts (one series with
     * fast_opts), one in each directory; one payload for a dead port;
     * one for a URL that is up. */
    assert_int_equal(webhook_spool_save(d1, url("/down/3/series"), "{\"p\":1}", 7, err, sizeof err), 0);
    assert_int_equal(webhook_spool_save(d2, url("/down/3/series"), "{\"p\":2}", 7, err, sizeof err), 0);
    assert_int_equal(webhook_spool_save(d1, dead, "{\"p\":3}", 7, err, sizeof err), 0);
    assert_int_equal(webhook_spool_save(d2, dead, "{\"p\":4}", 7, err, sizeof err), 0);
    assert_int_equal(webhook_spool_save(d2, url("/ok/alive"), "{\"p\":5}", 7, err, sizeof err), 0);

    int sent = -1, left = -1;
    assert_int_equal(webhook_spool_flush(dirs, 2, &o, NULL, &sent, &left, err, sizeof err), -1);
    assert_int_equal(sent, 1);
    assert_int_equal(left, 4);
    assert_non_null(strstr(err, "after 3 attempts"));     /* the first failure, whichever */
    json_t *reqs = requests("/down/3/series");
    assert_int_equal(json_array_size(reqs), 3);         /* one series, not two */
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, i), "body")),
                            "{\"p\":1}");
    json_decref(reqs);
    reqs = requests("/hook");
    assert_int_equal(json_array_size(reqs), 0);         /* nothing went elsewhere */
    json_decref(reqs);
    reqs = requests("/ok/alive");
    assert_int_equal(json_array_size(reqs), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 0), "body")), "{\"p\":5}");
    json_decref(reqs);
    assert_int_equal(count_json(d1), 2);
    assert_int_equal(count_json(d2), 2);

    /* Back up: both its payloads go to it, in order, and nowhere else;
     * the dead port's stay. */
    assert_int_equal(webhook_spool_flush(dirs, 2, &o, url("/down/3/series"), &sent, &left, err,
                                         sizeof err), 0);
    assert_int_equal(sent, 2);
    assert_int_equal(left, 0);
    reqs = requests("/down/3/series");
    assert_int_equal(json_array_size(reqs), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 3), "body")), "{\"p\":1}");
    assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 4), "body")), "{\"p\":2}");
    json_decref(reqs);
    assert_int_equal(count_json(d1), 1);
    assert_int_equal(count_json(d2), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_parse),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_uuid_and_redact),
        cmocka_unit_test(test_signature_vector),
        cmocka_unit_test(test_signature_rfc4231),
        cmocka_unit_test(test_send_ok_generic),
        cmocka_unit_test(test_send_flaky_signed),
        cmocka_unit_test(test_send_ratelimit),
        cmocka_unit_test(test_send_http_date),
        cmocka_unit_test(test_send_retry_after_not_reused),
        cmocka_unit_test(test_send_retry_after_garbage),
        cmocka_unit_test(test_send_timeout),
        cmocka_unit_test(test_send_refused),
        cmocka_unit_test(test_send_bad_permanent),
        cmocka_unit_test(test_secret_never_in_errors),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_send_large_body),
        cmocka_unit_test(test_payload_formats),
        cmocka_unit_test(test_payload_limits),
        cmocka_unit_test(test_payload_sparse),
        cmocka_unit_test(test_payload_matrix),
        cmocka_unit_test(test_payload_real_results),
        cmocka_unit_test(test_spool_save_and_flush),
        cmocka_unit_test(test_spool_refused_and_junk),
        cmocka_unit_test(test_spool_dead_one_series),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
