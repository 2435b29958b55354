/* SPDX-License-Identifier: MIT */
/*
 * webhook: payloads for chat services, delivery with retries, and the
 * spool of payloads that could not be delivered.  See webhook.h for the
 * contract; this file is in four parts: small helpers, the payloads, the
 * sending, the spool.
 *
 * Library code: returns statuses, prints nothing, reads no environment
 * variable.  The only global state is libcurl's, set up by
 * webhook_global_init(), and the table of its calls: libcurl is loaded
 * with dlopen when a webhook is first used, so that a run without one
 * does not pay for linking it and the libraries it pulls in (TLS, HTTP/2,
 * IDN, Kerberos...: most of a short run's instructions when it was linked).
 * What libraries already do is not done here: libcrypto signs (HMAC) and
 * draws the random bytes, libcurl reads Retry-After and parses URLs (for
 * the check and the redaction), and text is built with sbuf.
 */
#include "output/webhook.h"
#include "util/errbuf.h"
#include "util/sbuf.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

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

/* Random bytes from libcrypto: 0, or -1 with why. */
static int crypto_random(void *buf, size_t n, char *err, size_t errlen)
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

/* ================================================================ */
/* Helpers                                                           */


/* Bytes in the UTF-8 character starting at s (1 for a stray byte, and
 * never past a NUL). */
static size_t u8len(const char *s)
{
    unsigned char c = (unsigned char)s[0];
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    for (size_t i = 1; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            return 1;
    return n;
}

#define ELLIPSIS "\xe2\x80\xa6" /* U+2026, 3 bytes */

/* How a piece of text is escaped for the markup it lands in. */
enum esc {
    ESC_PLAIN,          /* Teams, Slack plain_text: control characters to blanks */
    ESC_SLACK,          /* Slack mrkdwn: &, <, > as entities */
    ESC_SLACK_CODE,     /* inside `...` in Slack: entities, and ` as ' */
    ESC_DISCORD,        /* Discord markdown: \ before * _ ~ ` | > \ */
    ESC_CODE,           /* inside `...` in Discord: ` as ' */
};

/* The escaped form of the character at s, in out (at most 8 bytes);
 * returns its length, and *in the bytes of s consumed. */
static size_t esc_unit(const char *s, enum esc e, char *out, size_t *in)
{
    unsigned char c = (unsigned char)*s;
    *in = u8len(s);
    if (c < 0x20 || c == 0x7f) {
        out[0] = ' ';
        return 1;
    }
    switch (e) {
    case ESC_SLACK:
    case ESC_SLACK_CODE:
        if (c == '&')
            return (size_t)sprintf(out, "&amp;");
        if (c == '<')
            return (size_t)sprintf(out, "&lt;");
        if (c == '>')
            return (size_t)sprintf(out, "&gt;");
        if (c == '`' && e == ESC_SLACK_CODE) {
            out[0] = '\'';
            return 1;
        }
        break;
    case ESC_DISCORD:
        if (strchr("\\*_~`|>", c)) {
            out[0] = '\\';
            out[1] = (char)c;
            return 2;
        }
        break;
    case ESC_CODE:
        if (c == '`') {
            out[0] = '\'';
            return 1;
        }
        break;
    case ESC_PLAIN:
        break;
    }
    memcpy(out, s, *in);
    return *in;
}

/* Append s escaped, at most max bytes of it: when the whole does not
 * fit, as many whole characters as leave room for an ellipsis, then the
 * ellipsis.  Never splits a UTF-8 character or an escape. */
static void sb_put_esc(struct sbuf *b, const char *s, size_t max, enum esc e)
{
    char u[8];
    size_t in, total = 0;
    for (const char *p = s; *p; p += in)
        total += esc_unit(p, e, u, &in);
    int cut = total > max;
    size_t room = cut ? (max >= 3 ? max - 3 : 0) : max, used = 0;
    for (const char *p = s; *p; p += in) {
        size_t n = esc_unit(p, e, u, &in);
        if (used + n > room)
            break;
        sb_put(b, u, n);
        used += n;
    }
    if (cut && max >= 3)
        sb_puts(b, ELLIPSIS);
}

/* Append a list of lines (each escaped and cut to per_line bytes),
 * joined by newlines, keeping b at most limit bytes: lines that do not
 * fit are summed up as "... and N more <what>". */
static void sb_put_list(struct sbuf *b, size_t limit, char *const *lines, size_t n,
                        const char *prefix, size_t per_line, enum esc e, const char *what)
{
    const size_t tail = 48; /* room for "\n… and 1234567 more changes" */
    size_t i;
    for (i = 0; i < n; i++) {
        struct sbuf t = SBUF_INIT;
        if (b->len)
            sb_puts(&t, "\n");
        sb_puts(&t, prefix);
        sb_put_esc(&t, lines[i], per_line, e);
        if (t.oom) {
            b->oom = 1;
            free(t.p);
            return;
        }
        size_t reserve = i + 1 < n ? tail : 0;
        int fits = b->len + t.len + reserve <= limit;
        if (fits)
            sb_put(b, t.p, t.len);
        free(t.p);
        if (!fits)
            break;
    }
    if (i < n) {
        char more[64];
        snprintf(more, sizeof more, "%s" ELLIPSIS " and %zu more %s", b->len ? "\n" : "",
                 n - i, what);
        if (b->len + strlen(more) <= limit)
            sb_puts(b, more);
    }
}

int webhook_uuid4(char out[WEBHOOK_UUID_LEN], char *err, size_t errlen)
{
    unsigned char b[16];
    if (crypto_random(b, sizeof b, err, errlen))
        return -1;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* variant 10 */
    snprintf(out, WEBHOOK_UUID_LEN,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return 0;
}

/* A delivery id read back from a spool file goes into a header: accept
 * only the UUID shape, so a tampered file cannot inject header lines. */
static int uuid_shaped(const char *s)
{
    if (!s || strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return 0;
        } else if (!isxdigit((unsigned char)s[i])) {
            return 0;
        }
    }
    return 1;
}

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
/* Payloads                                                          */

static const char *const format_names[] = { "generic", "slack", "discord", "teams" };

int webhook_format_parse(const char *s, enum webhook_format *f)
{
    for (int i = 0; s && i < 4; i++)
        if (!strcmp(s, format_names[i])) {
            *f = (enum webhook_format)i;
            return 0;
        }
    return -1;
}

const char *webhook_format_name(enum webhook_format f)
{
    return (unsigned)f < 4 ? format_names[f] : "generic";
}

/* Limits, in bytes (see webhook.h). */
#define DISCORD_CONTENT_MAX 2000
#define DISCORD_TITLE_MAX 256
#define DISCORD_DESC_MAX 1024
#define DISCORD_FIELD_MAX 1024
#define DISCORD_SHORT_FIELD_MAX 256
#define DISCORD_FOOTER_MAX 256
#define DISCORD_TOTAL_MAX 6000
#define SLACK_SECTION_MAX 3000
#define TEAMS_MAX_CELLS 40
#define TEAMS_MAX_CHANGES 20
#define PIECE_MAX 200        /* a GPU name, a host name, a unit ... */
#define COMMAND_MAX 900      /* the command line in any format */
#define LINE_MAX_BYTES 300   /* one line of a list */

/* What the chat formats show, as plain text; each format escapes and
 * cuts it for its markup.  Strings are never NULL unless oom is set. */
struct summary {
    char *headline;     /* one line: "autobatch on vm: micro_batch 16 × ..." */
    char *title;        /* the outcome alone */
    char *throughput;
    char *trials;
    char *exit;
    char *gpu;
    char *started;
    char *command;
    size_t ncells;
    char **cell_label, **cell_value, **cell_line;
    int has_baseline, regression, different_command;
    size_t nchanges;
    char **change;      /* regressions first */
    int *change_regression; /* 1 regression, 2 improvement, 0 other */
    int ok;             /* a configuration was chosen, exit 0 */
    int oom;
};

static char *sdup(struct summary *s, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    char *r = n < 0 ? NULL : strdup(tmp);
    if (!r)
        s->oom = 1;
    return r;
}

/* The value of a JSON number as text ("?" when not a number). */
static void fmt_num(const json_t *v, char *out, size_t len)
{
    if (json_is_integer(v))
        snprintf(out, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(out, len, "%g", json_real_value(v));
    else
        snprintf(out, len, "?");
}

/* A JSON string cut to max bytes on a character boundary, into out. */
static void fmt_str(const json_t *v, const char *dflt, char *out, size_t outlen, size_t max)
{
    const char *s = json_is_string(v) ? json_string_value(v) : dflt;
    struct sbuf b = SBUF_INIT;
    sb_put_esc(&b, s, max < outlen ? max : outlen - 1, ESC_PLAIN);
    snprintf(out, outlen, "%s", b.oom || !b.p ? "" : b.p);
    free(b.p);
}

static const char *ckpt_text(const json_t *v)
{
    return json_is_true(v) ? "on" : json_is_false(v) ? "off" : "?";
}

static const char *exit_text(long code)
{
    switch (code) {
    case 0: return "a configuration was chosen";
    case 2: return "bad usage or bad input";
    case 3: return "nothing fits, even the smallest candidate";
    case 4: return "the command failed for a reason other than memory";
    case 5: return "the budget ran out before any candidate fitted";
    case 6: return "a regression against the baseline";
    case 130: return "interrupted";
    default: return "no configuration was chosen";
    }
}

static void human_seconds(double s, char *out, size_t len)
{
    if (s < 0 || s != s)
        snprintf(out, len, "?");
    else if (s < 60)
        snprintf(out, len, "%.1f s", s);
    else if (s < 3600)
        snprintf(out, len, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else if (s < 1e9)
        snprintf(out, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else
        snprintf(out, len, "%.0f s", s);
}

/* The command line, words joined by blanks, quoted where they hold
 * blanks or quotes so the line can be pasted into a shell. */
static char *join_command(const json_t *cmd)
{
    struct sbuf b = SBUF_INIT;
    size_t i;
    json_t *w;
    json_array_foreach(cmd, i, w) {
        if (b.len > 4 * COMMAND_MAX)
            break;  /* the formats show at most COMMAND_MAX bytes of it */
        const char *s = json_is_string(w) ? json_string_value(w) : "?";
        if (i)
            sb_puts(&b, " ");
        if (!*s || strpbrk(s, " \t\n'\"\\$`")) {
            sb_puts(&b, "'");
            for (const char *p = s; *p; p++)
                if (*p == '\'')
                    sb_puts(&b, "'\\''");
                else
                    sb_put(&b, p, 1);
            sb_puts(&b, "'");
        } else {
            sb_puts(&b, s);
        }
    }
    return sb_take(&b);
}

static void summary_release(struct summary *s)
{
    free(s->headline);
    free(s->title);
    free(s->throughput);
    free(s->trials);
    free(s->exit);
    free(s->gpu);
    free(s->started);
    free(s->command);
    for (size_t i = 0; i < s->ncells; i++) {
        free(s->cell_label[i]);
        free(s->cell_value[i]);
        free(s->cell_line[i]);
    }
    free(s->cell_label);
    free(s->cell_value);
    free(s->cell_line);
    for (size_t i = 0; i < s->nchanges; i++)
        free(s->change[i]);
    free(s->change);
    free(s->change_regression);
    memset(s, 0, sizeof *s);
}

static void summary_cells(struct summary *s, const json_t *max_fit)
{
    size_t n = json_array_size(max_fit);
    if (!n)
        return;
    s->cell_label = calloc(n, sizeof *s->cell_label);
    s->cell_value = calloc(n, sizeof *s->cell_value);
    s->cell_line = calloc(n, sizeof *s->cell_line);
    if (!s->cell_label || !s->cell_value || !s->cell_line) {
        s->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(max_fit, i);
        char ga[32], mb[32], sf[32], ltf[32], why[PIECE_MAX + 1];
        fmt_num(json_object_get(c, "grad_accum"), ga, sizeof ga);
        fmt_num(json_object_get(c, "micro_batch"), mb, sizeof mb);
        fmt_num(json_object_get(c, "smallest_fail"), sf, sizeof sf);
        fmt_num(json_object_get(c, "largest_tried_fit"), ltf, sizeof ltf);
        const json_t *skipped = json_object_get(c, "skipped");
        const json_t *bounded = json_object_get(c, "bounded_by");
        int has_sf = json_is_number(json_object_get(c, "smallest_fail"));

        /* A number when there is one (searched, or inferred from other
         * cells), else why there is none. */
        char value[PIECE_MAX + 128];
        if (json_is_string(skipped))
            fmt_str(skipped, "", why, sizeof why, PIECE_MAX);
        const json_t *ntr = json_object_get(c, "trials");
        if (json_is_number(json_object_get(c, "micro_batch"))) {
            int inferred = json_is_true(json_object_get(c, "inferred"));
            snprintf(value, sizeof value, "%s%s%s%s%s%s%s", mb, has_sf ? " (" : "",
                     has_sf ? sf : "", has_sf ? " fails)" : "", inferred ? ", inferred" : "",
                     json_is_string(skipped) ? ", not run: " : "",
                     json_is_string(skipped) ? why : "");
        } else if (json_is_string(skipped)) {
            snprintf(value, sizeof value, "not run: %s", why);
        } else if (json_is_string(bounded)) {
            if (json_is_number(json_object_get(c, "largest_tried_fit")))
                snprintf(value, sizeof value, "\xe2\x89\xa5 %s (the top of the range fitted)", ltf);
            else
                snprintf(value, sizeof value, "the top of the range fitted");
        } else if (has_sf) {
            snprintf(value, sizeof value, "no fit seen (%s fails)", sf);
        } else if (json_is_integer(ntr) && json_integer_value(ntr) == 0) {
            snprintf(value, sizeof value, "not searched");
        } else {
            snprintf(value, sizeof value, "unknown");
        }
        s->cell_label[i] = sdup(s, "grad_accum %s, checkpointing %s", ga,
                                ckpt_text(json_object_get(c, "checkpointing")));
        s->cell_value[i] = sdup(s, "%s", value);
        s->cell_line[i] = sdup(s, "grad_accum %s, checkpointing %s: %s", ga,
                               ckpt_text(json_object_get(c, "checkpointing")), value);
        s->ncells = i + 1;
        if (s->oom)
            return;
    }
}

static void summary_baseline(struct summary *s, const json_t *baseline)
{
    if (!json_is_object(baseline))
        return;
    s->has_baseline = 1;
    const json_t *changes = json_object_get(baseline, "changes");
    size_t n = json_array_size(changes);
    if (n) {
        s->change = calloc(n, sizeof *s->change);
        s->change_regression = calloc(n, sizeof *s->change_regression);
        if (!s->change || !s->change_regression) {
            s->oom = 1;
            return;
        }
    }
    /* Regressions first, then the other changes, each in file order. */
    int any = 0;
    for (int pass = 1; pass >= 0; pass--) {
        size_t i;
        json_t *c;
        json_array_foreach(changes, i, c) {
            int reg = json_is_true(json_object_get(c, "regression"));
            if (reg != pass)
                continue;
            any |= reg;
            const json_t *t = json_object_get(c, "text");
            struct sbuf b = SBUF_INIT;
            sb_put_esc(&b, json_is_string(t) ? json_string_value(t) : "(no text)",
                       LINE_MAX_BYTES, ESC_PLAIN);
            char *line = sb_take(&b);
            if (!line) {
                s->oom = 1;
                return;
            }
            s->change[s->nchanges] = line;
            s->change_regression[s->nchanges++] =
                reg ? 1 : json_is_true(json_object_get(c, "improvement")) ? 2 : 0;
        }
    }
    s->different_command = json_is_true(json_object_get(baseline, "different_command"));
    s->regression = json_is_true(json_object_get(baseline, "regression")) || any;
}

static int summary_make(struct summary *s, const json_t *r)
{
    memset(s, 0, sizeof *s);
    const json_t *space = json_object_get(r, "space");
    const json_t *best = json_object_get(r, "best");
    const json_t *summ = json_object_get(r, "summary");
    const json_t *host = json_object_get(r, "host");
    const json_t *gpus = json_object_get(host, "gpus");

    char unit[64], hostname[PIECE_MAX + 1], gpu[PIECE_MAX + 1], started[64];
    fmt_str(json_object_get(space, "unit"), "samples", unit, sizeof unit, 32);
    fmt_str(json_object_get(host, "hostname"), "", hostname, sizeof hostname, 100);
    fmt_str(json_object_get(r, "started_at"), "unknown", started, sizeof started, 40);

    long code = -1;
    const json_t *ex = json_object_get(summ, "exit");
    if (json_is_integer(ex))
        code = (long)json_integer_value(ex);
    int interrupted = json_is_true(json_object_get(summ, "interrupted"));
    int has_best = json_is_object(best) && json_is_number(json_object_get(best, "micro_batch"));

    /* The outcome. */
    char outcome[512];
    if (has_best) {
        char mb[32], ga[32];
        fmt_num(json_object_get(best, "micro_batch"), mb, sizeof mb);
        fmt_num(json_object_get(best, "grad_accum"), ga, sizeof ga);
        snprintf(outcome, sizeof outcome, "micro_batch %s \xc3\x97 grad_accum %s, checkpointing %s",
                 mb, ga, ckpt_text(json_object_get(best, "checkpointing")));
    } else {
        snprintf(outcome, sizeof outcome, "no configuration chosen: %s", exit_text(code));
    }
    const json_t *sps = has_best ? json_object_get(best, "samples_per_s") : NULL;
    if (json_is_number(sps))
        s->throughput = sdup(s, "%.1f %s/s", json_number_value(sps), unit);
    else
        s->throughput = sdup(s, has_best ? "unknown" : "none");
    s->title = sdup(s, "%s", outcome);

    /* Trials and time: the summary's, else counted. */
    const json_t *nt = json_object_get(summ, "trials");
    char ntrials[32], wall[32];
    if (json_is_number(nt))
        fmt_num(nt, ntrials, sizeof ntrials);
    else
        snprintf(ntrials, sizeof ntrials, "%zu", json_array_size(json_object_get(r, "trials")));
    const json_t *ws = json_object_get(summ, "wall_s");
    human_seconds(json_is_number(ws) ? json_number_value(ws) : -1, wall, sizeof wall);
    s->trials = sdup(s, "%s trial%s in %s", ntrials, strcmp(ntrials, "1") ? "s" : "", wall);

    if (code >= 0)
        s->exit = sdup(s, "%ld (%s)%s", code, exit_text(code), interrupted && code != 130 ? ", interrupted" : "");
    else
        s->exit = sdup(s, "unknown");
    s->ok = has_best && code == 0;

    /* The GPU, and the host. */
    size_t ngpus = json_array_size(gpus);
    const json_t *g0 = json_array_get(gpus, 0);
    if (ngpus) {
        char more[32] = "";
        fmt_str(json_object_get(g0, "name"), "", gpu, sizeof gpu, PIECE_MAX);
        if (!*gpu)
            snprintf(gpu, sizeof gpu, "an unnamed GPU");
        if (ngpus > 1)
            snprintf(more, sizeof more, " (%zu GPUs)", ngpus);
        const json_t *mem = json_object_get(g0, "memory_total_bytes");
        char memtxt[48] = "";
        if (json_is_number(mem) && json_number_value(mem) > 0)
            snprintf(memtxt, sizeof memtxt, ", %.0f GiB", json_number_value(mem) / 1073741824.0);
        s->gpu = sdup(s, "%s%s%s%s%s", gpu, memtxt, more, *hostname ? " on " : "", hostname);
    } else {
        s->gpu = sdup(s, "no GPU%s%s", *hostname ? " on " : "", hostname);
    }
    s->started = sdup(s, "%s", started);

    const json_t *cmd = json_object_get(r, "command");
    s->command = json_is_array(cmd) ? join_command(cmd) : strdup("");
    if (!s->command)
        s->oom = 1;

    summary_cells(s, json_object_get(r, "max_fit"));
    summary_baseline(s, json_object_get(r, "baseline"));

    s->headline = sdup(s, "%sautobatch%s%s: %s%s%s%s", s->regression ? "\xe2\x9a\xa0 " : "",
                       *hostname ? " on " : "", hostname, outcome,
                       json_is_number(sps) ? ", " : "", json_is_number(sps) ? s->throughput : "",
                       s->regression ? " (regression against the baseline)" : "");
    return s->oom ? -1 : 0;
}

/* jansson builders: a NULL value or a failed insertion marks *bad. */
static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!o || !v || json_object_set_new(o, k, v))
        *bad = 1;
}

static void push(json_t *a, json_t *v, int *bad)
{
    if (!a || !v || json_array_append_new(a, v))
        *bad = 1;
}

/* A string escaped and cut to max bytes, as a JSON string. */
static json_t *jstr(const char *s, size_t max, enum esc e)
{
    struct sbuf b = SBUF_INIT;
    sb_put_esc(&b, s, max, e);
    char *t = sb_take(&b);
    json_t *j = t ? json_string(t) : NULL;
    free(t);
    return j;
}

static json_t *jsb(struct sbuf *b)
{
    char *t = sb_take(b);
    json_t *j = t ? json_string(t) : NULL;
    free(t);
    memset(b, 0, sizeof *b);
    return j;
}

static json_t *slack_section(struct sbuf *b)
{
    json_t *sec = json_object(), *txt = json_object();
    int bad = 0;
    put(txt, "type", json_string("mrkdwn"), &bad);
    put(txt, "text", jsb(b), &bad);
    put(sec, "type", json_string("section"), &bad);
    put(sec, "text", txt, &bad);
    if (bad) {
        json_decref(sec);
        return NULL;
    }
    return sec;
}

/* The baseline's changes, each prefixed with the marker of its kind;
 * NULL when there are none or memory ran out. */
static char **marked_changes(const struct summary *s, const char *reg, const char *better,
                             const char *other)
{
    char **l = s->nchanges ? calloc(s->nchanges, sizeof *l) : NULL;
    for (size_t i = 0; l && i < s->nchanges; i++) {
        struct sbuf b = SBUF_INIT;
        sb_puts(&b, s->change_regression[i] == 1 ? reg : s->change_regression[i] == 2 ? better : other);
        sb_puts(&b, s->change[i]);
        if (!(l[i] = sb_take(&b))) {
            for (size_t k = 0; k < i; k++)
                free(l[k]);
            free(l);
            return NULL;
        }
    }
    return l;
}

static void free_lines(char **l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

static json_t *payload_slack(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *blocks = json_array();
    struct sbuf b = SBUF_INIT;

    put(root, "text", jstr(s->headline, SLACK_SECTION_MAX, ESC_SLACK), &bad);

    sb_puts(&b, "*");
    sb_put_esc(&b, s->headline, SLACK_SECTION_MAX - 2, ESC_SLACK);
    sb_puts(&b, "*");
    push(blocks, slack_section(&b), &bad);

    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU", "Started" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu, s->started };
    for (int i = 0; i < 5; i++) {
        sb_printf(&b, "%s*%s:* ", i ? "\n" : "", names[i]);
        sb_put_esc(&b, vals[i], PIECE_MAX + 100, ESC_SLACK);
    }
    push(blocks, slack_section(&b), &bad);

    if (s->ncells) {
        sb_puts(&b, "*Largest micro-batch per cell*");
        sb_put_list(&b, SLACK_SECTION_MAX, s->cell_line, s->ncells, "\xe2\x80\xa2 ",
                    LINE_MAX_BYTES, ESC_SLACK, "cells");
        push(blocks, slack_section(&b), &bad);
    }
    if (s->has_baseline) {
        sb_printf(&b, "*%s*%s", s->regression ? ":warning: Regression against the baseline"
                                              : "No regression against the baseline",
                  s->different_command ? " (the baseline ran a different command)" : "");
        char **lines = marked_changes(s, ":warning: ", ":arrow_up: ", "\xe2\x80\xa2 ");
        if (s->nchanges && !lines)
            bad = 1;
        else
            sb_put_list(&b, SLACK_SECTION_MAX, lines, s->nchanges, "", LINE_MAX_BYTES,
                        ESC_SLACK, "changes");
        free_lines(lines, s->nchanges);
        push(blocks, slack_section(&b), &bad);
    }
    if (*s->command) {
        sb_puts(&b, "*Command:* `");
        sb_put_esc(&b, s->command, COMMAND_MAX, ESC_SLACK_CODE);
        sb_puts(&b, "`");
        push(blocks, slack_section(&b), &bad);
    }
    put(root, "blocks", blocks, &bad);
    free(b.p);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static json_t *discord_field(const char *name, json_t *value, int inl, int *bad)
{
    json_t *f = json_object();
    put(f, "name", json_string(name), bad);
    put(f, "value", value, bad);
    put(f, "inline", json_boolean(inl), bad);
    return f;
}

/* Characters Discord counts towards an embed's 6000: title,
 * description, field names and values, footer text. */
static size_t discord_embed_size(const json_t *e)
{
    size_t n = json_string_length(json_object_get(e, "title")) +
               json_string_length(json_object_get(e, "description")) +
               json_string_length(json_object_get(json_object_get(e, "footer"), "text"));
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(e, "fields"), i, f)
        n += json_string_length(json_object_get(f, "name")) +
             json_string_length(json_object_get(f, "value"));
    return n;
}

static json_t *payload_discord(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *embeds = json_array(), *e = json_object(),
           *fields = json_array(), *footer = json_object(), *mentions = json_object();
    struct sbuf b = SBUF_INIT;

    sb_puts(&b, "**");
    sb_put_esc(&b, s->headline, DISCORD_CONTENT_MAX - 4, ESC_DISCORD);
    sb_puts(&b, "**");
    put(root, "content", jsb(&b), &bad);

    put(e, "title", jstr(s->title, DISCORD_TITLE_MAX, ESC_PLAIN), &bad);
    if (*s->command) {
        sb_puts(&b, "`");
        sb_put_esc(&b, s->command, COMMAND_MAX, ESC_CODE);
        sb_puts(&b, "`");
        put(e, "description", jsb(&b), &bad);
    }
    /* Green when chosen without regression, red on a regression, amber
     * when nothing was chosen. */
    put(e, "color", json_integer(s->regression ? 0xE01E5A : s->ok ? 0x2EB67D : 0xECB22E), &bad);

    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu };
    for (int i = 0; i < 4; i++)
        push(fields, discord_field(names[i], jstr(vals[i], DISCORD_SHORT_FIELD_MAX, ESC_DISCORD), 1,
                                   &bad), &bad);
    if (s->ncells) {
        sb_put_list(&b, DISCORD_FIELD_MAX, s->cell_line, s->ncells, "", LINE_MAX_BYTES,
                    ESC_DISCORD, "cells");
        push(fields, discord_field("Largest micro-batch per cell", jsb(&b), 0, &bad), &bad);
    }
    if (s->has_baseline) {
        char **lines = marked_changes(s, "\xe2\x9a\xa0 ", "\xe2\x96\xb2 ", "\xe2\x80\xa2 ");
        if (s->nchanges && !lines)
            bad = 1;
        else
            sb_put_list(&b, DISCORD_FIELD_MAX, lines, s->nchanges, "", LINE_MAX_BYTES,
                        ESC_DISCORD, "changes");
        free_lines(lines, s->nchanges);
        if (!s->nchanges)
            sb_puts(&b, "no changes");
        char name[128];
        snprintf(name, sizeof name, "%s%s",
                 s->regression ? "Regression against the baseline" : "Against the baseline",
                 s->different_command ? " (a different command)" : "");
        push(fields, discord_field(name, jsb(&b), 0, &bad), &bad);
    }
    put(e, "fields", fields, &bad);
    sb_puts(&b, "autobatch.results/1, started ");
    sb_put_esc(&b, s->started, 64, ESC_PLAIN);
    put(footer, "text", jsb(&b), &bad);
    put(e, "footer", footer, &bad);
    push(embeds, e, &bad);
    put(root, "embeds", embeds, &bad);
    put(mentions, "parse", json_array(), &bad);
    put(root, "allowed_mentions", mentions, &bad);
    free(b.p);
    if (bad || discord_embed_size(e) > DISCORD_TOTAL_MAX) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static json_t *teams_text(const char *text, size_t max, const char *weight, const char *color,
                          int subtle, int *bad)
{
    json_t *t = json_object();
    put(t, "type", json_string("TextBlock"), bad);
    put(t, "text", jstr(text, max, ESC_PLAIN), bad);
    put(t, "wrap", json_true(), bad);
    if (weight)
        put(t, "weight", json_string(weight), bad);
    if (color)
        put(t, "color", json_string(color), bad);
    if (subtle)
        put(t, "isSubtle", json_true(), bad);
    return t;
}

static json_t *teams_fact(const char *title, const char *value, int *bad)
{
    json_t *f = json_object();
    put(f, "title", jstr(title, PIECE_MAX, ESC_PLAIN), bad);
    put(f, "value", jstr(value, LINE_MAX_BYTES + 100, ESC_PLAIN), bad);
    return f;
}

static json_t *teams_factset(json_t *facts, int *bad)
{
    json_t *fs = json_object();
    put(fs, "type", json_string("FactSet"), bad);
    put(fs, "facts", facts, bad);
    return fs;
}

static json_t *payload_teams(const struct summary *s)
{
    int bad = 0;
    json_t *root = json_object(), *atts = json_array(), *att = json_object(),
           *card = json_object(), *body = json_array(), *facts = json_array();
    char more[64];

    push(body, teams_text(s->headline, 1000, "Bolder",
                          s->regression ? "Attention" : s->ok ? "Good" : "Warning", 0, &bad), &bad);
    const char *names[] = { "Throughput", "Trials", "Exit status", "GPU", "Started" };
    const char *vals[] = { s->throughput, s->trials, s->exit, s->gpu, s->started };
    for (int i = 0; i < 5; i++)
        push(facts, teams_fact(names[i], vals[i], &bad), &bad);
    push(body, teams_factset(facts, &bad), &bad);

    if (s->ncells) {
        push(body, teams_text("Largest micro-batch per cell", 100, "Bolder", NULL, 0, &bad), &bad);
        json_t *cells = json_array();
        for (size_t i = 0; i < s->ncells && i < TEAMS_MAX_CELLS; i++)
            push(cells, teams_fact(s->cell_label[i], s->cell_value[i], &bad), &bad);
        if (s->ncells > TEAMS_MAX_CELLS) {
            snprintf(more, sizeof more, "and %zu more cells", s->ncells - TEAMS_MAX_CELLS);
            push(cells, teams_fact(ELLIPSIS, more, &bad), &bad);
        }
        push(body, teams_factset(cells, &bad), &bad);
    }
    if (s->has_baseline) {
        char head[128];
        snprintf(head, sizeof head, "%s%s",
                 s->regression ? "\xe2\x9a\xa0 Regression against the baseline"
                               : "No regression against the baseline",
                 s->different_command ? " (the baseline ran a different command)" : "");
        push(body, teams_text(head, sizeof head, "Bolder", s->regression ? "Attention" : NULL, 0,
                              &bad), &bad);
        if (s->nchanges) {
            json_t *ch = json_array();
            for (size_t i = 0; i < s->nchanges && i < TEAMS_MAX_CHANGES; i++)
                push(ch, teams_fact(s->change_regression[i] == 1 ? "regression"
                                    : s->change_regression[i] == 2 ? "improvement" : "change",
                                    s->change[i], &bad), &bad);
            if (s->nchanges > TEAMS_MAX_CHANGES) {
                snprintf(more, sizeof more, "and %zu more changes", s->nchanges - TEAMS_MAX_CHANGES);
                push(ch, teams_fact(ELLIPSIS, more, &bad), &bad);
            }
            push(body, teams_factset(ch, &bad), &bad);
        }
    }
    if (*s->command) {
        json_t *t = teams_text(s->command, COMMAND_MAX, NULL, NULL, 1, &bad);
        put(t, "fontType", json_string("Monospace"), &bad);
        push(body, t, &bad);
    }

    put(card, "$schema", json_string("http://adaptivecards.io/schemas/adaptive-card.json"), &bad);
    put(card, "type", json_string("AdaptiveCard"), &bad);
    put(card, "version", json_string("1.4"), &bad);
    put(card, "body", body, &bad);
    put(att, "contentType", json_string("application/vnd.microsoft.card.adaptive"), &bad);
    put(att, "contentUrl", json_null(), &bad);
    put(att, "content", card, &bad);
    push(atts, att, &bad);
    put(root, "type", json_string("message"), &bad);
    put(root, "attachments", atts, &bad);
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int webhook_payload(const json_t *results, enum webhook_format f, char **body, size_t *len,
                    char *err, size_t errlen)
{
    *body = NULL;
    *len = 0;
    if (!json_is_object(results)) {
        errbuf_set(err, errlen, "the results are not a json object");
        return -1;
    }
    json_t *doc = NULL;
    struct summary s;
    if (f == WEBHOOK_GENERIC) {
        doc = json_incref((json_t *)results);
    } else {
        if (summary_make(&s, results) < 0) {
            summary_release(&s);
            errbuf_set(err, errlen, "out of memory building the webhook payload");
            return -1;
        }
        doc = f == WEBHOOK_SLACK ? payload_slack(&s)
            : f == WEBHOOK_DISCORD ? payload_discord(&s)
            : payload_teams(&s);
        summary_release(&s);
    }
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) {
        errbuf_set(err, errlen, "cannot build the %s webhook payload", webhook_format_name(f));
        return -1;
    }
    *body = text;
    *len = strlen(text);
    return 0;
}

/* ================================================================ */
/* Sending                                                           */

void webhook_opts_default(struct webhook_opts *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_s = 10;
    o->total_timeout_s = 30;
    o->max_attempts = 5;
    o->base_delay_s = 1;
    o->max_delay_s = 60;
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

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep s seconds in slices, so a cancel flag set by a signal handler
 * is seen within 0.1 s.  Returns -1 when cancelled. */
static int nap(double s, const volatile sig_atomic_t *cancel)
{
    double end = now_mono() + s;
    for (;;) {
        if (cancel && *cancel)
            return -1;
        double left = end - now_mono();
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

    if (o->delivery_id && uuid_shaped(o->delivery_id)) {
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
        if (crypto_random(&bits, sizeof bits, rerr, sizeof rerr))
            bits = (unsigned)(now_mono() * 1e9);
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

/* ================================================================ */
/* The spool                                                         */

#define SPOOL_SCHEMA "autobatch.webhook-spool/1"
#define SPOOL_FILE_MAX (64u << 20)

/* mkdir -p, new directories 0700. */
static int mkdirs(const char *dir, char *err, size_t errlen)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        errbuf_set(err, errlen, "spool directory name too long");
        return -1;
    }
    for (char *p = path + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0700) == 0) {
                /* The spool holds webhook URLs, which carry tokens: 0700
                 * whatever the umask. */
                chmod(path, 0700);
            } else if (errno != EEXIST) {
                errbuf_set(err, errlen, "cannot create '%s': %s", path, strerror(errno));
                return -1;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errbuf_set(err, errlen, "spool '%s' is not a directory", dir);
        return -1;
    }
    return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int webhook_spool_save_delivery(const char *dir, const char *url, const char *body, size_t len,
                                const char *delivery_id, char *err, size_t errlen)
{
    char id[WEBHOOK_UUID_LEN];
    if (!url || !*url) {
        errbuf_set(err, errlen, "no webhook url to spool the payload for");
        return -1;
    }
    if (delivery_id && uuid_shaped(delivery_id))
        snprintf(id, sizeof id, "%s", delivery_id);
    else if (webhook_uuid4(id, err, errlen) < 0)
        return -1;

    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32], iso[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);

    json_t *doc = json_object(), *jb = json_stringn(body, len);
    int bad = !jb;
    put(doc, "schema", json_string(SPOOL_SCHEMA), &bad);
    put(doc, "url", json_string(url), &bad);
    put(doc, "delivery_id", json_string(id), &bad);
    put(doc, "created_at", json_string(iso), &bad);
    put(doc, "body", jb, &bad);
    char *text = bad ? NULL : json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    if (!text) {
        errbuf_set(err, errlen, "cannot spool the webhook payload: not utf-8, or out of memory");
        return -1;
    }
    if (mkdirs(dir, err, errlen) < 0) {
        free(text);
        return -1;
    }

    char path[4200], tmpp[4200];
    snprintf(path, sizeof path, "%s/%s-%s.json", dir, stamp, id);
    snprintf(tmpp, sizeof tmpp, "%s/.%s-%s.tmp", dir, stamp, id);
    int fd = open(tmpp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = -1;
    if (fd < 0) {
        errbuf_set(err, errlen, "cannot create '%s': %s", tmpp, strerror(errno));
    } else if (fchmod(fd, 0600) < 0 || write_all(fd, text, strlen(text)) < 0 ||
               write_all(fd, "\n", 1) < 0 || fsync(fd) < 0) {
        errbuf_set(err, errlen, "cannot write '%s': %s", tmpp, strerror(errno));
    } else if (close(fd) < 0) {
        fd = -1;
        errbuf_set(err, errlen, "cannot write '%s': %s", tmpp, strerror(errno));
    } else if (fd = -1, rename(tmpp, path) < 0) {
        errbuf_set(err, errlen, "cannot rename '%s' to '%s': %s", tmpp, path, strerror(errno));
    } else {
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmpp);
    free(text);
    return rc;
}

int webhook_spool_save(const char *dir, const char *url, const char *body, size_t len,
                       char *err, size_t errlen)
{
    return webhook_spool_save_delivery(dir, url, body, len, NULL, err, errlen);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of spool files in dir, sorted (oldest first). */
static int list_spool(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        errbuf_set(err, errlen, "cannot read spool '%s': %s", dir, strerror(errno));
        return -1;
    }
    size_t alloc = 0;
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l < 6 || strcmp(de->d_name + l - 5, ".json"))
            continue;
        if (*n == alloc) {
            size_t na = alloc ? alloc * 2 : 16;
            char **nn = realloc(*names, na * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            *names = nn;
            alloc = na;
        }
        if (!((*names)[*n] = strdup(de->d_name))) {
            rc = -1;
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (rc < 0)
        errbuf_set(err, errlen, "cannot read spool '%s': out of memory", dir);
    else if (*n)
        qsort(*names, *n, sizeof **names, cmp_names);
    return rc;
}

/* Read and check one spool file; the caller decrefs. */
static json_t *read_spool_file(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        errbuf_set(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > SPOOL_FILE_MAX) {
        errbuf_set(err, errlen, "'%s' is not a spool file (too large or not a file)", path);
        close(fd);
        return NULL;
    }
    json_error_t je;
    json_t *doc = json_loadfd(fd, 0, &je);
    close(fd);
    if (!doc) {
        errbuf_set(err, errlen, "cannot parse '%s': %s", path, je.text);
        return NULL;
    }
    const json_t *schema = json_object_get(doc, "schema");
    if (!json_is_string(schema) || strcmp(json_string_value(schema), SPOOL_SCHEMA) ||
        !json_is_string(json_object_get(doc, "url")) ||
        !json_is_string(json_object_get(doc, "body"))) {
        errbuf_set(err, errlen, "'%s' is not a spool file (schema " SPOOL_SCHEMA ")", path);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int webhook_spool_flush(const char *dir, const struct webhook_opts *o, const char *override_url,
                        int *sent, int *left, char *err, size_t errlen)
{
    *sent = *left = 0;
    char **names;
    size_t n;
    if (list_spool(dir, &names, &n, err, errlen) < 0)
        return -1;

    /* URLs that failed for a reason other than a refusal in this flush:
     * their other payloads wait for the next one. */
    char **down = n ? calloc(n, sizeof *down) : NULL;
    size_t ndown = 0;
    int have_err = 0;
    char msg[1024];

    for (size_t i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (o->cancel && *o->cancel) {
            (*left)++;
            continue;
        }
        json_t *doc = read_spool_file(path, msg, sizeof msg);
        if (!doc) {
            (*left)++;
            if (!have_err++)
                errbuf_set(err, errlen, "%s", msg);
            continue;
        }
        const char *url = override_url ? override_url : json_string_value(json_object_get(doc, "url"));
        int skip = 0;
        for (size_t k = 0; k < ndown; k++)
            if (!strcmp(down[k], url))
                skip = 1;
        if (skip) {
            (*left)++;
            json_decref(doc);
            continue;
        }
        struct webhook_opts one = *o;
        one.url = url;
        const json_t *id = json_object_get(doc, "delivery_id");
        one.delivery_id = json_is_string(id) ? json_string_value(id) : NULL;
        const json_t *body = json_object_get(doc, "body");
        struct webhook_result r;
        if (webhook_send(&one, json_string_value(body), json_string_length(body), &r, msg,
                         sizeof msg) == 0) {
            (*sent)++;
            if (unlink(path) < 0 && !have_err++)
                errbuf_set(err, errlen, "delivered '%s' but cannot remove it: %s", path, strerror(errno));
        } else {
            (*left)++;
            if (!have_err++)
                errbuf_set(err, errlen, "spooled '%s': %s", names[i], msg);
            if (!r.permanent && down && (down[ndown] = strdup(url)))
                ndown++;
        }
        json_decref(doc);
    }
    for (size_t k = 0; k < ndown; k++)
        free(down[k]);
    free(down);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (*left && !have_err)
        errbuf_set(err, errlen, "%d spooled payload%s not sent", *left, *left == 1 ? "" : "s");
    return *left || have_err ? -1 : 0;
}
