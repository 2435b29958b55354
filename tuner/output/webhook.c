/* SPDX-License-Identifier: MIT */
/*
 * webhook: tell a chat channel or a CI endpoint what a run found.  See
 * webhook.h for the contract.  The module is four files, one concern
 * each (webhook_int.h says what they share):
 *
 *   webhook.c          this file: the calls that configure a webhook (the
 *                      format names, the default options) and the pieces
 *                      the other parts share (delivery ids, the JSON
 *                      builder)
 *   webhook_payload.c  the bodies for the generic endpoint and the chats
 *   webhook_deliver.c  the POST with its retries, on libcurl and libcrypto
 *   webhook_spool.c    the payloads that could not be delivered
 *
 * Library code: returns statuses, prints nothing, reads no environment
 * variable, and holds no state of its own.
 */
#include "output/webhook.h"
#include "output/webhook_int.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* ================================================================ */
/* Configuration                                                     */

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

void webhook_opts_default(struct webhook_opts *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_s = 10;
    o->total_timeout_s = 30;
    o->max_attempts = 5;
    o->base_delay_s = 1;
    o->max_delay_s = 60;
}

/* ================================================================ */
/* Delivery ids                                                      */

int webhook_uuid4(char out[WEBHOOK_UUID_LEN], char *err, size_t errlen)
{
    unsigned char b[16];
    if (webhook_random(b, sizeof b, err, errlen))
        return -1;
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);   /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);   /* variant 10 */
    snprintf(out, WEBHOOK_UUID_LEN,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
    return 0;
}

int webhook_uuid_shaped(const char *s)
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

/* ================================================================ */
/* The JSON builder                                                  */

void webhook_put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!o || !v || json_object_set_new(o, k, v))
        *bad = 1;
}
