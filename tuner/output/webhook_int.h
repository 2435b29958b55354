/* SPDX-License-Identifier: MIT */
/*
 * webhook_int: what the four files of the webhook module share, and
 * nothing else includes.  webhook.h is the contract with the callers;
 * this header is the contract between the parts:
 *
 *   webhook.c          the small calls that configure a webhook (format
 *                      names, default options) and what the parts
 *                      share: delivery ids, the JSON builder
 *   webhook_payload.c  the bodies: generic, Slack, Discord, Teams, with
 *                      the escaping and cutting each service needs
 *   webhook_deliver.c  libcurl and libcrypto, loaded with dlopen and
 *                      used nowhere else: URLs checked and redacted, the
 *                      signature, the POST and its retries
 *   webhook_spool.c    the payloads kept for later, and their flushing
 *
 * Text is built with sbuf (util/sbuf.h) and JSON with jansson; chat
 * markup is escaped in one place (webhook_payload.c).  Like webhook.h, nothing here
 * prints, exits or reads the environment.
 */
#ifndef AB_WEBHOOK_INT_H
#define AB_WEBHOOK_INT_H

#include <stddef.h>

#include <jansson.h>

/* ---------------------------------------------------------------- */
/* libcrypto, loaded on demand (webhook_deliver.c)                   */

/** n random bytes into buf from libcrypto's RAND_bytes: 0, or -1 with why. */
int webhook_random(void *buf, size_t n, char *err, size_t errlen);

/* ---------------------------------------------------------------- */
/* Shared pieces (webhook.c)                                         */

/**
 * Non-zero when s is shaped like a UUID (8-4-4-4-12 hex digits).  A
 * delivery id read back from a spool file goes into a header: only this
 * shape is used, so a tampered file cannot inject header lines.  NULL is
 * not shaped.
 */
int webhook_uuid_shaped(const char *s);

/**
 * json_object_set_new(o, k, v), for builders that check once at the end:
 * a NULL o or v, or a failed insertion (which releases v, as jansson
 * does), sets *bad.  Never clears *bad.
 */
void webhook_put(json_t *o, const char *k, json_t *v, int *bad);

#endif
