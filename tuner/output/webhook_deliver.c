/* SPDX-License-Identifier: MIT */
/*
 * webhook_deliver: the POST of a payload (webhook_send() in webhook.h)
 * with its headers, signature and retries, and the URL checks and
 * redaction its messages need.
 *
 * The only global state of the module lives here: libcurl's, set up by
 * webhook_global_init(), and the tables of libcurl's and libcrypto's
 * calls.  Both libraries are loaded with dlopen when a webhook is first
 * used, so that a run without one does not pay for linking them and the
 * libraries they pull in (TLS, HTTP/2, IDN, Kerberos...: most of a short
 * run's instructions when they were linked).  What libraries already do
 * is not done here: libcrypto signs (HMAC) and draws the random bytes,
 * libcurl reads Retry-After and parses URLs.  No other part of the module
 * calls either library, except for random bytes (webhook_random()).
 *
 * Library code: returns statuses, prints nothing, reads no environment
 * variable.
 */
#include "output/webhook.h"
#include "util/mono.h"
#include "output/webhook_int.h"
#include "util/errbuf.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* ================================================================ */
/* libcurl and libcrypto, loaded on demand                           */

/* The libcurl calls used, from libcurl.so.4 (the soname of libcurl4 and
 * of the -dev package's libcurl.so).  curl.h's type-checking macros wrap
 * curl_easy_setopt and friends when they are called, not when named, so
 * __typeof__ sees the declarations. */
#define CURL_SONAME "libcurl.so.4"
static struct {
    void *dl;
    __typeof__(curl_global_init) *global_init;
    __typeof__(curl_global_cleanup) *global_cleanup;
    __typeof__(curl_easy_init) *easy_init;
    __typeof__(curl_easy_setopt) *easy_setopt;
    __typeof__(curl_easy_perform) *easy_perform;
    __typeof__(curl_easy_getinfo) *easy_getinfo;
    __typeof__(curl_easy_cleanup) *easy_cleanup;
    __typeof__(curl_easy_strerror) *easy_strerror;
    __typeof__(curl_slist_append) *slist_append;
    __typeof__(curl_slist_free_all) *slist_free_all;
    /* libcurl's URL parser (7.62): optional, URL checks and redaction
     * fall back to the scheme alone without it. */
    __typeof__(curl_url) *url;
    __typeof__(curl_url_set) *url_set;
    __typeof__(curl_url_get) *url_get;
    __typeof__(curl_url_cleanup) *url_cleanup;
    __typeof__(curl_free) *free;
} cu;

/* The libcrypto calls used, loaded like libcurl, and for the same reason:
 * linking it costs every run about 0.6 ms and 13 times the instructions
 * of a start (measured: `perf stat -r 200 autobatch --version`), for
 * calls only a webhook makes.  libcurl itself loads the same library. */
static const char *const crypto_sonames[] = { "libcrypto.so.3", "libcrypto.so.1.1" };
static struct {
    void *dl;
    __typeof__(HMAC) *hmac;
    __typeof__(EVP_sha256) *sha256;
    __typeof__(RAND_bytes) *rand_bytes;
    __typeof__(OPENSSL_cleanse) *cleanse;
} cr;

/* Load libcrypto once; later calls are free.  Returns 0, or -1 with why. */
static int crypto_load(char *err, size_t errlen)
{
    if (cr.dl)
        return 0;
    void *dl = NULL;
    for (size_t i = 0; !dl && i < sizeof crypto_sonames / sizeof *crypto_sonames; i++)
        dl = dlopen(crypto_sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        errbuf_set(err, errlen, "cannot load libcrypto for the webhook: apt-get install libssl3");
        return -1;
    }
    if (!(*(void **)&cr.hmac = dlsym(dl, "HMAC")) || !(*(void **)&cr.sha256 = dlsym(dl, "EVP_sha256")) ||
        !(*(void **)&cr.rand_bytes = dlsym(dl, "RAND_bytes")) ||
        !(*(void **)&cr.cleanse = dlsym(dl, "OPENSSL_cleanse"))) {
        errbuf_set(err, errlen, "libcrypto lacks a call the webhook needs; update libssl3");
        dlclose(dl);
        memset(&cr, 0, sizeof cr);
        return -1;
    }
    cr.dl = dl;
    return 0;
}

int webhook_random(void *buf, size_t n, char *err, size_t errlen)
{
    if (crypto_load(err, errlen))
        return -1;
    if (cr.rand_bytes(buf, (int)n) != 1) {
        errbuf_set(err, errlen, "libcrypto has no random bytes (RAND_bytes failed)");
        return -1;
    }
    return 0;
}

/* Load libcurl once; later calls are free.  Returns 0, or -1 with why. */
static int curl_load(char *err, size_t errlen)
{
    if (cu.dl)
        return 0;
    void *dl = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        errbuf_set(err, errlen, "cannot load %s for the webhook (%s): apt-get install libcurl4",
                   CURL_SONAME, why ? why : "unknown error");
        return -1;
    }
#define CU_LOAD(field, name) (*(void **)&cu.field = dlsym(dl, name))
    if (!CU_LOAD(global_init, "curl_global_init") || !CU_LOAD(global_cleanup, "curl_global_cleanup") ||
        !CU_LOAD(easy_init, "curl_easy_init") || !CU_LOAD(easy_setopt, "curl_easy_setopt") ||
        !CU_LOAD(easy_perform, "curl_easy_perform") || !CU_LOAD(easy_getinfo, "curl_easy_getinfo") ||
        !CU_LOAD(easy_cleanup, "curl_easy_cleanup") || !CU_LOAD(easy_strerror, "curl_easy_strerror") ||
        !CU_LOAD(slist_append, "curl_slist_append") || !CU_LOAD(slist_free_all, "curl_slist_free_all")) {
        errbuf_set(err, errlen, "%s lacks a call the webhook needs; update libcurl4", CURL_SONAME);
        dlclose(dl);
        memset(&cu, 0, sizeof cu);
        return -1;
    }
    if (!CU_LOAD(url, "curl_url") || !CU_LOAD(url_set, "curl_url_set") ||
        !CU_LOAD(url_get, "curl_url_get") || !CU_LOAD(url_cleanup, "curl_url_cleanup") ||
        !CU_LOAD(free, "curl_free"))
        cu.url = NULL;
#undef CU_LOAD
    cu.dl = dl;
    return 0;
}

int webhook_global_init(char *err, size_t errlen)
{
    if (curl_load(err, errlen))
        return -1;
    CURLcode c = cu.global_init(CURL_GLOBAL_DEFAULT);
    if (c != CURLE_OK) {
        errbuf_set(err, errlen, "cannot initialise libcurl: %s", cu.easy_strerror(c));
        return -1;
    }
    return 0;
}

void webhook_global_cleanup(void)
{
    /* libcurl stays loaded: unloading it would gain nothing at exit. */
    if (cu.dl)
        cu.global_cleanup();
}

/* ================================================================ */
/* URLs                                                              */

/* url parsed by libcurl's URL API (the caller frees it with
 * cu.url_cleanup), or NULL when libcurl or that API is missing or url
 * does not parse with flags. */
static CURLU *url_parse(const char *url, unsigned flags)
{
    if (curl_load(NULL, 0) || !cu.url)
        return NULL;
    CURLU *u = cu.url();
    if (u && cu.url_set(u, CURLUPART_URL, url, flags) != CURLUE_OK) {
        cu.url_cleanup(u);
        u = NULL;
    }
    return u;
}

/* A part of u as libcurl hands it (free with cu.free), or NULL. */
static char *url_part(CURLU *u, CURLUPart what)
{
    char *v = NULL;
    return cu.url_get(u, what, &v, 0) == CURLUE_OK ? v : NULL;
}

/* The scheme url starts with ("https"), in out; "" when none. */
static void url_scheme(const char *url, char *out, size_t outlen)
{
    size_t n = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    if (!n || n >= outlen || strncmp(url + n, "://", 3))
        n = 0;
    memcpy(out, url, n);
    out[n] = '\0';
}

void webhook_url_redact(const char *url, char *out, size_t outlen)
{
    if (!outlen)
        return;
    if (!url) {
        snprintf(out, outlen, "(none)");
        return;
    }
    /* Any scheme, and a url without one ("hooks.example.com/token") is
     * shown without one. */
    int guessed = 0;
    CURLU *u = url_parse(url, CURLU_NON_SUPPORT_SCHEME);
    if (!u && (u = url_parse(url, CURLU_NON_SUPPORT_SCHEME | CURLU_GUESS_SCHEME)))
        guessed = 1;
    char *scheme = u ? url_part(u, CURLUPART_SCHEME) : NULL;
    char *host = u ? url_part(u, CURLUPART_HOST) : NULL;
    if (scheme && host) {
        char *port = url_part(u, CURLUPART_PORT);   /* only when the url names one */
        char *path = url_part(u, CURLUPART_PATH), *user = url_part(u, CURLUPART_USER);
        char *query = url_part(u, CURLUPART_QUERY), *frag = url_part(u, CURLUPART_FRAGMENT);
        int more = user || query || frag || (path && strcmp(path, "/"));
        snprintf(out, outlen, "%s%s%.200s%s%s%s", guessed ? "" : scheme, guessed ? "" : "://",
                 host, port ? ":" : "", port ? port : "", more ? "/..." : "");
        cu.free(port);
        cu.free(path);
        cu.free(user);
        cu.free(query);
        cu.free(frag);
    } else {
        /* Not a url libcurl reads (or no libcurl): its scheme alone. */
        char sch[32];
        url_scheme(url, sch, sizeof sch);
        snprintf(out, outlen, "%s%s", *sch ? sch : "(not a url)", *sch ? "://..." : "");
    }
    if (u) {
        cu.free(scheme);
        cu.free(host);
        cu.url_cleanup(u);
    }
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

/* An http:// or https:// url that libcurl parses (only the scheme is
 * checked when libcurl has no URL API). */
static int url_ok(const char *url)
{
    if (!url)
        return 0;
    char *scheme = NULL;
    CURLU *u = url_parse(url, 0);
    if (u)
        scheme = url_part(u, CURLUPART_SCHEME);
    else if (!cu.url && (scheme = malloc(8)))
        url_scheme(url, scheme, 8);
    int ok = scheme && (!strcasecmp(scheme, "http") || !strcasecmp(scheme, "https"));
    if (u) {
        cu.free(scheme);
        cu.url_cleanup(u);
    } else {
        free(scheme);
    }
    return ok;
}

/* ================================================================ */
/* Signing and waiting                                               */

void webhook_signature(const char *secret, const char *body, size_t len,
                       char out[WEBHOOK_SIG_LEN])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    /* HMAC() fails only when memory runs out: the header then carries a
     * signature no receiver accepts, rather than none at all. */
    char err[128];
    if (crypto_load(err, sizeof err) ||
        !cr.hmac(cr.sha256(), secret, (int)strlen(secret), (const unsigned char *)body, len, mac, &n))
        n = 0;
    memcpy(out, "sha256=", 7);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", i < n ? mac[i] : 0);
    if (cr.dl)
        cr.cleanse(mac, sizeof mac);
}

double webhook_backoff(int attempt, double base, double cap, double retry_after_s,
                       unsigned rand_bits)
{
    if (cap < 0)
        cap = 0;
    if (retry_after_s >= 0)
        return retry_after_s < cap ? retry_after_s : cap;
    if (attempt < 1)
        attempt = 1;
    if (base < 0)
        base = 0;
    /* Doubling stops at the cap, so a large attempt cannot overflow. */
    double d = base;
    for (int i = 1; i < attempt && d < cap; i++)
        d *= 2;
    if (d > cap)
        d = cap;
    double u = (double)rand_bits / ((double)UINT_MAX + 1.0);
    return d / 2 + u * (d / 2);
}


/* ================================================================ */
/* Sending                                                           */

/* What one attempt saw. */
struct attempt {
    char answer[160];       /* the start of the response body, for messages */
    size_t answer_len;
    const volatile sig_atomic_t *cancel;
};

static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    struct attempt *a = ud;
    size_t n = size * nitems;
    /* A new status line starts a new response (after a 100 Continue):
     * forget what the one before said. */
    if (n >= 5 && !strncmp(buf, "HTTP/", 5)) {
        a->answer_len = 0;
        a->answer[0] = '\0';
    }
    return n;
}

static size_t on_body(char *buf, size_t size, size_t nmemb, void *ud)
{
    struct attempt *a = ud;
    size_t n = size * nmemb, room = sizeof a->answer - 1 - a->answer_len;
    size_t take = n < room ? n : room;
    memcpy(a->answer + a->answer_len, buf, take);
    a->answer_len += take;
    a->answer[a->answer_len] = '\0';
    return n;   /* the rest is read and dropped */
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct attempt *a = ud;
    return a->cancel && *a->cancel;
}

/* Sleep s seconds in slices, so a cancel flag set by a signal handler
 * is seen within 0.1 s.  Returns -1 when cancelled. */
static int nap(double s, const volatile sig_atomic_t *cancel)
{
    double end = mono_now() + s;
    for (;;) {
        if (cancel && *cancel)
            return -1;
        double left = end - mono_now();
        if (left <= 0)
            return 0;
        if (left > 0.1)
            left = 0.1;
        struct timespec ts = { (time_t)left, (long)((left - (double)(time_t)left) * 1e9) };
        nanosleep(&ts, NULL);   /* EINTR: the loop looks at the flag and the clock */
    }
}

/* The answer body as a short printable line for an error message. */
static void answer_line(const struct attempt *a, char *out, size_t len)
{
    size_t j = 0;
    int blank = 0;
    for (size_t i = 0; i < a->answer_len && j + 1 < len && j < 120; i++) {
        unsigned char c = (unsigned char)a->answer[i];
        if (c < 0x20 || c >= 0x7f || c == ' ') {
            if (!blank && j)
                out[j++] = ' ';
            blank = 1;
        } else {
            out[j++] = (char)c;
            blank = 0;
        }
    }
    while (j && out[j - 1] == ' ')
        j--;
    out[j] = '\0';
}

/* The seconds the last answer asked us to wait, or -1 for the backoff.
 * libcurl reads Retry-After, in seconds or as an HTTP date, for each
 * transfer (CURLINFO_RETRY_AFTER, 7.66; an older libcurl answers
 * CURLE_UNKNOWN_OPTION); its 0 stands for a header that was absent,
 * unreadable, "0" or a date in the past, so only more than 0 counts. */
static double retry_after(CURL *h)
{
#if LIBCURL_VERSION_NUM >= 0x074200
    curl_off_t s = 0;
    if (cu.easy_getinfo(h, CURLINFO_RETRY_AFTER, &s) == CURLE_OK && s > 0)
        return s > 1000000000 ? 1e9 : (double)s;
#else
    (void)h;
#endif
    return -1;
}

enum verdict { V_OK, V_RETRY, V_STOP, V_FINAL };

static enum verdict judge(CURLcode c, long status)
{
    if (c == CURLE_OK) {
        if (status >= 200 && status < 300)
            return V_OK;
        if (status == 408 || status == 425 || status == 429 || (status >= 500 && status < 600))
            return V_RETRY;
        return V_FINAL;
    }
    switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_AGAIN:
        return V_RETRY;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return V_FINAL;
    default:
        /* TLS verification and local failures: retrying at once will not
         * help, but the payload is worth keeping. */
        return V_STOP;
    }
}

/* Never let the secret reach a message, whatever a server echoed. */
static void scrub(const struct webhook_opts *o, const char *where, char *err, size_t errlen)
{
    if (err && errlen && o->secret && *o->secret && strstr(err, o->secret))
        errbuf_set(err, errlen, "webhook '%s' failed (the message is withheld: it held the secret)",
               where);
}

int webhook_send(const struct webhook_opts *o, const char *body, size_t len,
                 struct webhook_result *r, char *err, size_t errlen)
{
    char where[256];
    memset(r, 0, sizeof *r);
    webhook_url_redact(o->url, where, sizeof where);

    if (o->delivery_id && webhook_uuid_shaped(o->delivery_id)) {
        snprintf(r->delivery_id, sizeof r->delivery_id, "%s", o->delivery_id);
    } else if (webhook_uuid4(r->delivery_id, err, errlen) < 0) {
        return -1;
    }
    if (!url_ok(o->url)) {
        r->permanent = 1;
        errbuf_set(err, errlen, "unsupported webhook url '%s': use an http:// or https:// url", where);
        return -1;
    }

    if (curl_load(err, errlen)) {
        r->permanent = 1;
        return -1;
    }
    CURL *h = cu.easy_init();
    if (!h) {
        errbuf_set(err, errlen, "cannot start a webhook request: out of memory");
        return -1;
    }
    struct curl_slist *hdrs = NULL, *tmp;
    char line[128];
    int ok = 1;
#define ADD_HEADER(s) do { tmp = cu.slist_append(hdrs, (s)); if (!tmp) ok = 0; else hdrs = tmp; } while (0)
    ADD_HEADER("Content-Type: application/json");
    /* No "Expect: 100-continue" round trip for bodies over 1 MiB. */
    ADD_HEADER("Expect:");
    snprintf(line, sizeof line, WEBHOOK_HDR_DELIVERY ": %s", r->delivery_id);
    ADD_HEADER(line);
    if (o->secret && *o->secret) {
        char sig[WEBHOOK_SIG_LEN];
        webhook_signature(o->secret, body, len, sig);
        snprintf(line, sizeof line, WEBHOOK_HDR_SIGNATURE ": %s", sig);
        ADD_HEADER(line);
    }
#undef ADD_HEADER

    struct attempt a;
    char cerr[CURL_ERROR_SIZE];
    long ct_ms = (long)((o->connect_timeout_s > 0 ? o->connect_timeout_s : 10) * 1000);
    long tt_ms = (long)((o->total_timeout_s > 0 ? o->total_timeout_s : 30) * 1000);
    if (ct_ms < 1)
        ct_ms = 1;
    if (tt_ms < 1)
        tt_ms = 1;
    CURLcode sc = CURLE_OK;
    sc |= cu.easy_setopt(h, CURLOPT_URL, o->url);
    sc |= cu.easy_setopt(h, CURLOPT_POST, 1L);
    /* POSTFIELDS NULL would make curl read the body from stdin. */
    sc |= cu.easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
    sc |= cu.easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    sc |= cu.easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    sc |= cu.easy_setopt(h, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : "autobatch");
    sc |= cu.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ct_ms);
    sc |= cu.easy_setopt(h, CURLOPT_TIMEOUT_MS, tt_ms);
    sc |= cu.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    sc |= cu.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    sc |= cu.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    sc |= cu.easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    sc |= cu.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, o->insecure ? 0L : 1L);
    sc |= cu.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, o->insecure ? 0L : 2L);
    sc |= cu.easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    sc |= cu.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    sc |= cu.easy_setopt(h, CURLOPT_HEADERDATA, &a);
    sc |= cu.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    sc |= cu.easy_setopt(h, CURLOPT_WRITEDATA, &a);
    sc |= cu.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    sc |= cu.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    sc |= cu.easy_setopt(h, CURLOPT_XFERINFODATA, &a);
    if (!ok || sc != CURLE_OK) {
        errbuf_set(err, errlen, "cannot set up the webhook request to '%s'", where);
        cu.slist_free_all(hdrs);
        cu.easy_cleanup(h);
        return -1;
    }

    int max = o->max_attempts > 0 ? o->max_attempts : 1;
    int rc = -1;
    for (;;) {
        memset(&a, 0, sizeof a);
        a.cancel = o->cancel;
        cerr[0] = '\0';
        CURLcode c = cu.easy_perform(h);
        r->attempts++;
        long status = 0;
        if (c == CURLE_OK)
            cu.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        r->last_status = status;
        enum verdict v = judge(c, status);
        const char *s = r->attempts == 1 ? "" : "s";

        if (v == V_OK) {
            rc = 0;
            break;
        }
        if (c == CURLE_ABORTED_BY_CALLBACK || (o->cancel && *o->cancel)) {
            errbuf_set(err, errlen, "webhook '%s' interrupted after %d attempt%s", where,
                   r->attempts, s);
            break;
        }
        if (c == CURLE_OK) {
            char ans[128];
            answer_line(&a, ans, sizeof ans);
            errbuf_set(err, errlen, "webhook '%s' answered %ld after %d attempt%s%s%s", where, status,
                   r->attempts, s, *ans ? ": " : "", ans);
        } else {
            errbuf_set(err, errlen, "webhook '%s' failed after %d attempt%s: %s", where, r->attempts, s,
                   *cerr ? cerr : cu.easy_strerror(c));
        }
        if (v == V_FINAL) {
            r->permanent = 1;
            break;
        }
        if (v == V_STOP || r->attempts >= max)
            break;

        unsigned bits = 0;
        char rerr[128];
        if (webhook_random(&bits, sizeof bits, rerr, sizeof rerr))
            bits = (unsigned)(mono_now() * 1e9);
        double wait = webhook_backoff(r->attempts, o->base_delay_s, o->max_delay_s,
                                      retry_after(h), bits);
        if (nap(wait, o->cancel) < 0) {
            errbuf_set(err, errlen, "webhook '%s' interrupted after %d attempt%s", where,
                   r->attempts, s);
            break;
        }
    }
    cu.slist_free_all(hdrs);
    cu.easy_cleanup(h);
    if (rc < 0)
        scrub(o, where, err, errlen);
    return rc;
}
