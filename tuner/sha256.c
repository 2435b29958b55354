/* SPDX-License-Identifier: MIT */
/*
 * sha256: SHA-256 from FIPS 180-4 section 6.2 and HMAC from RFC 2104.
 * See sha256.h.  The message schedule and compression follow the
 * standard's notation (Ch, Maj, Σ0, Σ1, σ0, σ1) so the code can be read
 * against it line by line.
 */
#include "sha256.h"

#include <string.h>

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

#define CH(x, y, z)  (((x) & (y)) ^ (~(x) & (z)))
#define MAJ(x, y, z) (((x) & (y)) ^ ((x) & (z)) ^ ((y) & (z)))
#define BSIG0(x) (rotr((x), 2) ^ rotr((x), 13) ^ rotr((x), 22))
#define BSIG1(x) (rotr((x), 6) ^ rotr((x), 11) ^ rotr((x), 25))
#define SSIG0(x) (rotr((x), 7) ^ rotr((x), 18) ^ ((x) >> 3))
#define SSIG1(x) (rotr((x), 17) ^ rotr((x), 19) ^ ((x) >> 10))

/* FIPS 180-4 6.2.2: process one 512-bit block. */
static void compress(uint32_t h[8], const unsigned char *blk)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)blk[4 * t] << 24 | (uint32_t)blk[4 * t + 1] << 16 |
               (uint32_t)blk[4 * t + 2] << 8 | (uint32_t)blk[4 * t + 3];
    for (int t = 16; t < 64; t++)
        w[t] = SSIG1(w[t - 2]) + w[t - 7] + SSIG0(w[t - 15]) + w[t - 16];

    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t t1 = hh + BSIG1(e) + CH(e, f, g) + K[t] + w[t];
        uint32_t t2 = BSIG0(a) + MAJ(a, b, c);
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
    /* The schedule of an HMAC key block is derived from the key. */
    sha256_wipe(w, sizeof w);
}

void sha256_init(struct sha256 *c)
{
    /* FIPS 180-4 5.3.3: the square roots of the first 8 primes. */
    static const uint32_t h0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->h, h0, sizeof h0);
    c->nbytes = 0;
    c->nbuf = 0;
}

void sha256_update(struct sha256 *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    if (!n)
        return;
    c->nbytes += n;
    if (c->nbuf) {
        size_t take = SHA256_BLOCK_LEN - c->nbuf;
        if (take > n)
            take = n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf < SHA256_BLOCK_LEN)
            return;
        compress(c->h, c->buf);
        c->nbuf = 0;
    }
    for (; n >= SHA256_BLOCK_LEN; p += SHA256_BLOCK_LEN, n -= SHA256_BLOCK_LEN)
        compress(c->h, p);
    if (n) {
        memcpy(c->buf, p, n);
        c->nbuf = n;
    }
}

void sha256_final(struct sha256 *c, unsigned char out[SHA256_DIGEST_LEN])
{
    /* FIPS 180-4 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the
     * message length in bits as a 64-bit big-endian number. */
    uint64_t bits = c->nbytes * 8;
    c->buf[c->nbuf++] = 0x80;
    if (c->nbuf > SHA256_BLOCK_LEN - 8) {
        memset(c->buf + c->nbuf, 0, SHA256_BLOCK_LEN - c->nbuf);
        compress(c->h, c->buf);
        c->nbuf = 0;
    }
    memset(c->buf + c->nbuf, 0, SHA256_BLOCK_LEN - 8 - c->nbuf);
    for (int i = 0; i < 8; i++)
        c->buf[SHA256_BLOCK_LEN - 1 - i] = (unsigned char)(bits >> (8 * i));
    compress(c->h, c->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
    sha256_wipe(c, sizeof *c);
}

void sha256(const void *data, size_t n, unsigned char out[SHA256_DIGEST_LEN])
{
    struct sha256 c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, out);
}

void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                 unsigned char out[SHA256_DIGEST_LEN])
{
    /* RFC 2104 section 2: H(K ^ opad, H(K ^ ipad, text)), K padded with
     * zeros to the block length B after hashing a key longer than B. */
    unsigned char k[SHA256_BLOCK_LEN], pad[SHA256_BLOCK_LEN], inner[SHA256_DIGEST_LEN];
    struct sha256 c;

    memset(k, 0, sizeof k);
    if (keylen > SHA256_BLOCK_LEN)
        sha256(key, keylen, k);
    else if (keylen)
        memcpy(k, key, keylen);

    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, msg, msglen);
    sha256_final(&c, inner);

    for (size_t i = 0; i < sizeof pad; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&c);
    sha256_update(&c, pad, sizeof pad);
    sha256_update(&c, inner, sizeof inner);
    sha256_final(&c, out);

    sha256_wipe(k, sizeof k);
    sha256_wipe(pad, sizeof pad);
    sha256_wipe(inner, sizeof inner);
}

void sha256_hex(const unsigned char *bytes, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = '\0';
}

int sha256_equal(const void *a, const void *b, size_t n)
{
    const volatile unsigned char *x = a, *y = b;
    unsigned char diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

void sha256_wipe(void *p, size_t n)
{
    /* Stores through a volatile pointer are observable behaviour, so the
     * compiler cannot remove them as dead (a plain memset before a buffer
     * goes out of scope may be removed). */
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}
