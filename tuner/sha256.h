/* SPDX-License-Identifier: MIT */
/*
 * sha256: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written from
 * the definitions so that signing webhooks needs no crypto library (the
 * project's dependencies are libyaml, jansson, libcurl and cmocka only).
 *
 * Used to sign webhook bodies: X-Autobatch-Signature-256 carries
 * "sha256=" and the hex HMAC-SHA256 of the raw body, keyed with the
 * secret.  This is an implementation for signing, not a general crypto
 * library: it is byte-oriented (no bit-length messages) and not hardened
 * against side channels beyond wiping key material it copied.
 *
 * Life cycle of an incremental hash:
 *
 *   1. struct sha256 c; sha256_init(&c);
 *   2. sha256_update(&c, data, n) any number of times, with any split;
 *   3. sha256_final(&c, digest): writes 32 bytes and wipes the context,
 *      which must be initialised again before reuse.
 *
 * sha256() and hmac_sha256() do all three in one call.  Nothing here
 * allocates, prints or fails.
 */
#ifndef AB_SHA256_H
#define AB_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32   /**< bytes in a digest */
#define SHA256_BLOCK_LEN 64    /**< bytes in a block (HMAC's B) */
#define SHA256_HEX_LEN 65      /**< a digest in lowercase hex, with its NUL */

/** An incremental SHA-256 computation; fields are private. */
struct sha256 {
    uint32_t h[8];                          /**< chaining state */
    uint64_t nbytes;                        /**< bytes hashed so far */
    unsigned char buf[SHA256_BLOCK_LEN];    /**< a partial block */
    size_t nbuf;                            /**< bytes held in buf */
};

/** Start a hash (the FIPS 180-4 initial values). */
void sha256_init(struct sha256 *c);

/** Hash n more bytes; n may be 0 and data NULL then. */
void sha256_update(struct sha256 *c, const void *data, size_t n);

/** Pad, write the 32-byte digest to out, and wipe the context. */
void sha256_final(struct sha256 *c, unsigned char out[SHA256_DIGEST_LEN]);

/** One-shot SHA-256 of n bytes. */
void sha256(const void *data, size_t n, unsigned char out[SHA256_DIGEST_LEN]);

/**
 * HMAC-SHA256(key, msg) as RFC 2104 defines it: a key longer than the
 * 64-byte block is hashed first, a shorter one zero-padded.  Copies of
 * the key made on the way are wiped before returning.
 */
void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                 unsigned char out[SHA256_DIGEST_LEN]);

/** Write n bytes as lowercase hex followed by a NUL (hex holds 2n+1). */
void sha256_hex(const unsigned char *bytes, size_t n, char *hex);

/**
 * Compare n bytes in time that does not depend on where they differ
 * (for checking signatures).  Returns 1 when equal, 0 when not.
 */
int sha256_equal(const void *a, const void *b, size_t n);

/** Overwrite n bytes with zeros in a way the compiler will not drop. */
void sha256_wipe(void *p, size_t n);

#endif
