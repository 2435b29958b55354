/* SPDX-License-Identifier: MIT */
/*
 * webhook: tell a chat channel or a CI endpoint what a run found.
 *
 * `--webhook URL` (or AUTOBATCH_WEBHOOK_URL) makes autobatch POST a
 * summary of its results file when it finishes; `--webhook-format`
 * picks the body: the results file itself (generic) or a short human
 * summary shaped for Slack, Discord or Microsoft Teams.  A webhook that
 * stays down never changes autobatch's exit status: the caller warns and
 * keeps the payload in a spool directory, and `autobatch notify` sends
 * it later.
 *
 * Life cycle (the caller is outputs_post in tuner/cli/outputs.c, for a
 * run's end and for `autobatch notify`; this module never prints,
 * never exits and reads no environment variable):
 *
 *   1. webhook_global_init() once at start-up, before any thread exists
 *      (it is libcurl's global init); webhook_global_cleanup() at exit.
 *   2. webhook_payload(results, format, &body, &len, ...) builds the body
 *      from the parsed results document; the caller frees body.
 *   3. struct webhook_opts o; webhook_opts_default(&o); then set o.url,
 *      o.secret (from AUTOBATCH_WEBHOOK_SECRET only), o.insecure
 *      (--webhook-insecure: the caller prints the warning), o.cancel.
 *   4. webhook_send(&o, body, len, &r, err, errlen): 0 when a 2xx came
 *      back.  On -1, unless r.permanent, the caller warns and calls
 *      webhook_spool_save_delivery(dir, o.url, body, len, r.delivery_id,
 *      ...) with dir = state_dir() + "/" WEBHOOK_SPOOL_SUBDIR (older
 *      versions kept it under cache_dir(), which notify still flushes);
 *      the run's exit status is unchanged either way, and the hint names
 *      `autobatch notify`, which sends the payload to that URL.
 *   5. `autobatch notify RESULTS [--webhook URL]`: steps 2-4 for RESULTS,
 *      and nothing else (the spool is not flushed: its payloads belong
 *      to other runs and other URLs).  `autobatch notify [--webhook
 *      URL]`, without RESULTS: webhook_spool_flush(dirs, n, &o, url, ...)
 *      sends what is kept, each payload to its own URL (with --webhook,
 *      only the payloads kept for that URL).
 *
 * Delivery.  Every request carries `Content-Type: application/json`,
 * `X-Autobatch-Delivery: <uuid>` (a random version 4 UUID from
 * libcrypto's RAND_bytes, the same on every retry of one delivery and kept in the
 * spool, so that a receiver can drop a payload it already has), and,
 * when a secret is given, `X-Autobatch-Signature-256: sha256=<hex
 * HMAC-SHA256(secret, body)>` as GitHub signs its webhooks (libcrypto's
 * HMAC; autobatch links libcrypto, which libcurl's OpenSSL build loads
 * anyway).  TLS
 * certificates and host names are verified unless insecure is set.  Only
 * http:// and https:// URLs are accepted and redirects are not followed
 * (a POST that is redirected is answered as an error).
 *
 * Retries.  An attempt is retried when it ends in 408, 425, 429 or 5xx, or
 * without an HTTP answer (connection refused or reset, DNS failure,
 * timeout), up to max_attempts attempts in all.  The wait before attempt
 * n+1 is webhook_backoff(n, ...): a Retry-After header (seconds or an
 * HTTP date, as libcurl reads it: CURLINFO_RETRY_AFTER, libcurl 7.66 and
 * later) of more than 0 s is honoured up to max_delay_s; without one
 * (or with "0", a past date or a value libcurl cannot read) the wait is
 * exponential with "equal jitter".  With the defaults the worst case is
 * 5 attempts of at most 30 s and 4 waits of at most 60 s: 6.5 minutes.
 *
 * Final errors.  Any other answer (1xx, 3xx, 4xx but 408, 425, 429) is
 * final: resending the same body to the same URL will not help, so it is
 * not retried and r.permanent is set, which tells the caller not to spool
 * it (the results file still exists; `autobatch notify RESULTS --webhook
 * URL` resends it once the URL or the receiver is fixed).  A TLS
 * verification failure is not retried either (retrying at once will not
 * change the certificate) but is not permanent: it is spooled, since the
 * fix is on this machine (CA certificates, a proxy).
 *
 * Secrets.  The secret is used only to sign: it is never sent, printed,
 * put in an error message or written to the spool; buffers holding key
 * material are wiped.  Chat webhook URLs carry a token in their path
 * (hooks.slack.com/services/T/B/XXXX), so error messages name only the
 * URL's scheme and host (webhook_url_redact); the spool must hold the
 * full URL to resend, which is why its directory is 0700 and its files
 * 0600.
 *
 * Errors are one lowercase line in err, without a final period.
 *
 * The code is in four files, one concern each: webhook.c (format names,
 * options, delivery ids), webhook_payload.c (the bodies),
 * webhook_deliver.c (libcurl and libcrypto: URLs, signing, the POST and
 * its retries) and webhook_spool.c; webhook_int.h is what they share.
 */
#ifndef AB_WEBHOOK_H
#define AB_WEBHOOK_H

#include <signal.h>
#include <stddef.h>
#include <time.h>

#include <jansson.h>

/** The environment variables the caller reads (the module reads none). */
#define WEBHOOK_ENV_URL "AUTOBATCH_WEBHOOK_URL"
#define WEBHOOK_ENV_SECRET "AUTOBATCH_WEBHOOK_SECRET"

/** The spool's directory under the state directory (state_dir()). */
#define WEBHOOK_SPOOL_SUBDIR "webhook-spool"

/** The headers this module sends. */
#define WEBHOOK_HDR_DELIVERY "X-Autobatch-Delivery"
#define WEBHOOK_HDR_SIGNATURE "X-Autobatch-Signature-256"

/** Bytes of "sha256=" and 64 hex digits with the NUL. */
#define WEBHOOK_SIG_LEN 72
/** Bytes of a UUID in its 8-4-4-4-12 form with the NUL. */
#define WEBHOOK_UUID_LEN 37

/** Start and end libcurl's global state: once per process, before threads. */
int webhook_global_init(char *err, size_t errlen);
void webhook_global_cleanup(void);

/* ---------------------------------------------------------------- */
/* Payloads                                                          */

enum webhook_format { WEBHOOK_GENERIC, WEBHOOK_SLACK, WEBHOOK_DISCORD, WEBHOOK_TEAMS };

/** "generic", "slack", "discord" or "teams" (exactly): 0, else -1. */
int webhook_format_parse(const char *s, enum webhook_format *f);

/** The name webhook_format_parse() accepts for f. */
const char *webhook_format_name(enum webhook_format f);

/**
 * Build the body for a results document (the parsed results file of
 * DESIGN.md 2.5).  On success *body is a NUL-terminated JSON text of
 * *len bytes that the caller frees, and 0 is returned; -1 with err when
 * results is not an object or memory runs out.
 *
 * WEBHOOK_GENERIC: the results document itself, compact.
 *
 * The chat formats carry the same short summary: the outcome (the chosen
 * micro_batch x grad_accum and checkpointing, with samples per second in
 * space.unit; or what the exit status says when nothing was chosen), the
 * trial count and wall time, the exit status, the first GPU's name and
 * memory (or "no GPU") and the host, the largest micro-batch of each
 * (grad_accum, checkpointing) cell (or why it has none: "no fit seen",
 * "not run: <skipped>", "≥ N (the top of the range fitted)"), the command
 * line, and, when the results carry "baseline" (baseline.h: {"regression":
 * bool, "different_command": bool, "changes": [{"text", "regression",
 * "improvement"}]}), a regression flag and the changes, regressions
 * first.  Any key may be missing or null: it is shown as unknown or left
 * out.  Long lists are cut with "... and N more", long strings with
 * "...", always on a UTF-8 character boundary, so that each format keeps
 * its service's limits whatever the size of the results (counted in
 * bytes, which is never fewer than the characters or UTF-16 units the
 * services count):
 *
 *   WEBHOOK_SLACK:   {"text", "blocks"}: "text" is the one-line headline
 *                    (the notification); at most 5 section blocks (Slack
 *                    allows 50) of mrkdwn text of at most 3000 bytes;
 *                    &, <, > escaped as Slack asks.
 *   WEBHOOK_DISCORD: {"content", "embeds", "allowed_mentions"}: content
 *                    (the headline) at most 2000 bytes; one embed with a
 *                    title of at most 256, a description (the command) of
 *                    at most 1024, at most 6 fields (Discord allows 25),
 *                    none empty, values at most 1024, and at most 6000 in
 *                    all; markdown escaped; mentions disabled so that an
 *                    "@everyone" in a command line pings nobody.
 *   WEBHOOK_TEAMS:   {"type": "message", "attachments": [{"contentType":
 *                    "application/vnd.microsoft.card.adaptive", "content":
 *                    an AdaptiveCard version 1.4 of TextBlocks and
 *                    FactSets}]}, at most 40 cells and 20 changes listed,
 *                    so the message stays under Teams' 28 KB.
 *
 * A matrix document (autobatch.matrix/1, matrix.h; --slurm-targets posts
 * one) goes as it is in the generic format; in the chat formats its rows
 * take the cells' place, each "MACHINE: the choice" (or PENDING, or why
 * nothing was chosen), under "autobatch matrix: K of N with a
 * configuration chosen".
 */
int webhook_payload(const json_t *results, enum webhook_format f, char **body, size_t *len,
                    char *err, size_t errlen);

/* ---------------------------------------------------------------- */
/* Sending                                                           */

struct webhook_opts {
    const char *url;            /**< http:// or https:// URL; required */
    const char *secret;         /**< NULL or "": no signature header */
    int insecure;               /**< non-zero: do not verify TLS peer and host */
    double connect_timeout_s;   /**< per attempt; default 10 */
    double total_timeout_s;     /**< per attempt, connect included; default 30 */
    int max_attempts;           /**< attempts in all, at least 1; default 5 */
    double base_delay_s;        /**< backoff base; default 1 */
    double max_delay_s;         /**< cap on any wait, Retry-After too; default 60 */
    /** NULL: a fresh random UUID; else reused (the spool's), when it is
     * shaped like a UUID (anything else is replaced by a fresh one, so a
     * tampered spool file cannot inject a header) */
    const char *delivery_id;
    const char *user_agent;     /**< NULL: "autobatch" */
    /**
     * NULL, or a flag a signal handler sets: once non-zero, the transfer
     * in progress is aborted and no further attempt is made (-1, not
     * permanent, so the payload is spooled).
     */
    const volatile sig_atomic_t *cancel;
};

/** Fill o with the defaults above (url NULL, no secret, verification on). */
void webhook_opts_default(struct webhook_opts *o);

struct webhook_result {
    int attempts;               /**< requests made (0: none, e.g. a bad URL) */
    long last_status;           /**< last HTTP status; 0 = no HTTP response */
    int permanent;              /**< a final answer that resending will not fix */
    char delivery_id[WEBHOOK_UUID_LEN]; /**< the X-Autobatch-Delivery sent */
};

/**
 * POST body (len bytes) to o->url with the retries described at the
 * top.  Returns 0 when a 2xx came back, else -1 with err, e.g.
 * "webhook 'https://hooks.slack.com/...' answered 404 after 1 attempt:
 * no_service" (never the secret, never the URL's path).  r is always
 * filled.  Blocks for at most about max_attempts x (total_timeout_s +
 * max_delay_s).
 */
int webhook_send(const struct webhook_opts *o, const char *body, size_t len,
                 struct webhook_result *r, char *err, size_t errlen);

/**
 * The wait in seconds before the attempt after failed attempt number
 * `attempt` (1 = the first; values below 1 count as 1).
 *
 * With retry_after_s >= 0 (the server's Retry-After) the wait is
 * min(retry_after_s, cap): the server's word, not jittered, capped so a
 * "Retry-After: 86400" cannot hold a CI job for a day.
 *
 * Otherwise "equal jitter": d = min(cap, base x 2^(attempt-1)), and the
 * wait is d/2 + u x d/2 where u = rand_bits / 2^32 in [0, 1).  Half the
 * wait is jitter, so many jobs whose webhook failed together spread
 * out, and the other half keeps a floor, so a retry never comes at once
 * (which full jitter allows).  Pure: the caller supplies the randomness.
 */
double webhook_backoff(int attempt, double base, double cap, double retry_after_s,
                       unsigned rand_bits);

/**
 * Write "sha256=" and the lowercase hex HMAC-SHA256(secret, body) to
 * out (libcrypto's HMAC; the key copy it makes is wiped).  The value of
 * the X-Autobatch-Signature-256 header.
 */
void webhook_signature(const char *secret, const char *body, size_t len,
                       char out[WEBHOOK_SIG_LEN]);

/** A random version 4 UUID (RFC 9562) from RAND_bytes: 0, or -1 with err. */
int webhook_uuid4(char out[WEBHOOK_UUID_LEN], char *err, size_t errlen);

/**
 * Copy url to out as its scheme, host and port, with "/..." when it has
 * more (user info, a path other than "/", a query, a fragment), for
 * messages: "https://hooks.slack.com/...".  Parsed by libcurl's URL API
 * (curl_url, which loads libcurl); a url without a scheme is shown
 * without one ("hooks.example.com/..."), and one that libcurl cannot
 * parse, or any url when libcurl or its URL API is missing, as its scheme
 * alone ("https://...", or "(not a url)").  Control characters become
 * '?'; the host is cut at 200 bytes.
 */
void webhook_url_redact(const char *url, char *out, size_t outlen);

/* ---------------------------------------------------------------- */
/* The spool                                                         */

/*
 * One file per undelivered payload in the spool directory, named
 * "<UTC time>-<delivery id>.json" (20261121T085806Z-6f1c....json) so that
 * names sort oldest first, written to a dot-file and renamed so a reader
 * never sees half a file.  The file is a JSON object:
 *
 *   {"schema": "autobatch.webhook-spool/1", "url": "...",
 *    "delivery_id": "...", "created_at": "2026-11-21T08:58:06Z",
 *    "body": "<the payload as a JSON string>"}
 *
 * The secret is not in it: flushing signs again with the caller's.
 */

/**
 * Save a payload for later: creates dir (and missing parents) with mode
 * 0700 if missing, then a file of mode 0600.  Returns 0, or -1 with err.
 * The body must be UTF-8 (all of webhook_payload()'s are).
 */
int webhook_spool_save(const char *dir, const char *url, const char *body, size_t len,
                       char *err, size_t errlen);

/** The same, keeping delivery_id (the one the failed send used). */
int webhook_spool_save_delivery(const char *dir, const char *url, const char *body, size_t len,
                                const char *delivery_id, char *err, size_t errlen);

/**
 * Send the payloads kept in the spool directories dirs[0..ndirs) (the
 * current one and where older versions kept it), directory by directory,
 * oldest first, each to the URL it was kept for and to no other: a kept
 * payload is one run's results, and another URL is another project's
 * channel.  With only_url, only the payloads kept for exactly that URL
 * are sent; the others are not touched and not counted.  o's secret,
 * timeouts and retries are used (o->url and o->delivery_id are ignored:
 * each file has its own).
 *
 * A payload that is delivered is removed.  One that is refused for good
 * (permanent) stays, to be removed by hand (its results file can be sent
 * to a corrected URL with `autobatch notify RESULTS --webhook URL`).
 * After a failure that is not permanent the URL counts as down for the
 * rest of the flush, in every directory: its other payloads are left for
 * next time, so a dead webhook costs one series of retries.  Files that
 * are not spool files are left alone; a spool file that cannot be read
 * or parsed counts as left.  A missing directory is an empty spool.
 * Sets *sent and *left; returns 0 when nothing is left, else -1 with err
 * naming the first failure.
 */
int webhook_spool_flush(const char *const *dirs, size_t ndirs, const struct webhook_opts *o,
                        const char *only_url, int *sent, int *left, char *err, size_t errlen);

#endif
