/* SPDX-License-Identifier: MIT */
/* Unit tests for sha256: the FIPS 180-2 example vectors (appendix B) and
 * the RFC 4231 HMAC-SHA256 test cases 1-7, plus incremental hashing with
 * every split point and block-boundary lengths. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "sha256.h"

static void hex_of(const void *data, size_t n, char out[SHA256_HEX_LEN])
{
    unsigned char d[SHA256_DIGEST_LEN];
    sha256(data, n, d);
    sha256_hex(d, sizeof d, out);
}

static void test_fips_vectors(void **state)
{
    (void)state;
    char hex[SHA256_HEX_LEN];
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* The 448-bit message: its padding needs a second block. */
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_int_equal(strlen(m448) * 8, 448);
    hex_of(m448, strlen(m448), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    hex_of(m896, strlen(m896), hex);
    assert_string_equal(hex, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

static void test_million_a(void **state)
{
    (void)state;
    const char *want = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char hex[SHA256_HEX_LEN];
    unsigned char d[SHA256_DIGEST_LEN];

    char *a = malloc(1000000);
    assert_non_null(a);
    memset(a, 'a', 1000000);
    hex_of(a, 1000000, hex);
    assert_string_equal(hex, want);

    /* Fed in uneven chunks (7, 13, 64, 1000 ...) the digest is the same. */
    static const size_t chunks[] = { 7, 13, 64, 1000, 1, 63, 65 };
    struct sha256 c;
    sha256_init(&c);
    size_t done = 0;
    for (int i = 0; done < 1000000; i++) {
        size_t n = chunks[i % 7];
        if (n > 1000000 - done)
            n = 1000000 - done;
        sha256_update(&c, a + done, n);
        done += n;
    }
    sha256_final(&c, d);
    sha256_hex(d, sizeof d, hex);
    assert_string_equal(hex, want);
    free(a);
}

static void test_splits_and_lengths(void **state)
{
    (void)state;
    /* Lengths around the padding boundaries (55, 56, 63, 64, 65 ...): the
     * one-shot digest equals the digest of every two-part split. */
    unsigned char msg[200];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 31 + 7);
    static const size_t lens[] = { 0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 200 };
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t n = lens[li];
        unsigned char whole[SHA256_DIGEST_LEN], part[SHA256_DIGEST_LEN];
        sha256(msg, n, whole);
        for (size_t cut = 0; cut <= n; cut++) {
            struct sha256 c;
            sha256_init(&c);
            sha256_update(&c, msg, cut);
            sha256_update(&c, msg + cut, n - cut);
            sha256_final(&c, part);
            assert_memory_equal(whole, part, sizeof whole);
        }
    }
    /* The digests of different lengths differ (padding carries the length). */
    unsigned char d55[SHA256_DIGEST_LEN], d56[SHA256_DIGEST_LEN];
    sha256(msg, 55, d55);
    sha256(msg, 56, d56);
    assert_false(sha256_equal(d55, d56, sizeof d55));
}

static void check_hmac(const void *key, size_t klen, const void *msg, size_t mlen,
                       const char *want, size_t want_bytes)
{
    unsigned char mac[SHA256_DIGEST_LEN];
    char hex[SHA256_HEX_LEN];
    hmac_sha256(key, klen, msg, mlen, mac);
    sha256_hex(mac, want_bytes, hex);
    assert_string_equal(hex, want);
}

static void test_rfc4231(void **state)
{
    (void)state;
    unsigned char k[131], d[50];

    /* Test case 1 */
    memset(k, 0x0b, 20);
    check_hmac(k, 20, "Hi There", 8,
               "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32);
    /* Test case 2: a key shorter than the output */
    check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
               "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32);
    /* Test case 3 */
    memset(k, 0xaa, 20);
    memset(d, 0xdd, 50);
    check_hmac(k, 20, d, 50,
               "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32);
    /* Test case 4 */
    for (int i = 0; i < 25; i++)
        k[i] = (unsigned char)(i + 1);
    memset(d, 0xcd, 50);
    check_hmac(k, 25, d, 50,
               "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32);
    /* Test case 5: output truncated to 128 bits */
    memset(k, 0x0c, 20);
    check_hmac(k, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b", 16);
    /* Test case 6: a 131-byte key, longer than the 64-byte block */
    memset(k, 0xaa, 131);
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    check_hmac(k, 131, m6, strlen(m6),
               "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32);
    /* Test case 7: key and data both longer than the block */
    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    check_hmac(k, 131, m7, strlen(m7),
               "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32);
}

static void test_hmac_edges(void **state)
{
    (void)state;
    /* Values computed with python3's hmac module. */
    check_hmac("", 0, "", 0,
               "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad", 32);
    char k64[64];
    memset(k64, 'k', sizeof k64);   /* exactly one block: used as is, not hashed */
    check_hmac(k64, 64, "exactly one block key", 21,
               "e73e6474ed2f863bbf5500617c3b577e141d3c1543e1563f3630b762d038f14c", 32);
}

static void test_equal_and_wipe(void **state)
{
    (void)state;
    unsigned char a[4] = { 1, 2, 3, 4 }, b[4] = { 1, 2, 3, 4 };
    assert_true(sha256_equal(a, b, 4));
    b[3] = 5;
    assert_false(sha256_equal(a, b, 4));
    assert_true(sha256_equal(a, b, 3));
    sha256_wipe(a, sizeof a);
    static const unsigned char zero[4];
    assert_memory_equal(a, zero, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fips_vectors),
        cmocka_unit_test(test_million_a),
        cmocka_unit_test(test_splits_and_lengths),
        cmocka_unit_test(test_rfc4231),
        cmocka_unit_test(test_hmac_edges),
        cmocka_unit_test(test_equal_and_wipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
