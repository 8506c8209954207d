/* tests/wire/test_signer.c: HMAC-SHA256 (RFC 4231) and jupyter_client signatures. */
#include <criterion/criterion.h>
#include <sodium.h>
#include "wire/errors.h"
#include "wire/signer.h"
#include "vectors_jupyter_client.h"
#include "wire_test.h"

TestSuite(signer, .init = wire_test_init);

/* Every test runs with both implementations: they must give the same digests. */
static const struct {
    wire_hmac_impl_t impl;
    const char *name;
} impls[] = {{WIRE_HMAC_OPENSSL, "OpenSSL"}, {WIRE_HMAC_SODIUM, "libsodium"}};
#define FOR_EACH_IMPL(m) for (size_t m = 0; m != sizeof(impls) / sizeof(impls[0]); ++m)

typedef struct {
    unsigned char key[131];
    size_t keylen;
    const char *data;
    size_t datalen;
    const char *mac_hex; /* case 5 is truncated to 128 bits by the RFC */
} rfc4231_case_t;

static void fill(unsigned char *p, unsigned char v, size_t n)
{
    memset(p, v, n);
}

static size_t rfc4231_cases(rfc4231_case_t *c)
{
    static unsigned char dd[50], cd[50];
    memset(c, 0, 7 * sizeof(*c));
    fill(dd, 0xdd, sizeof(dd));
    fill(cd, 0xcd, sizeof(cd));

    fill(c[0].key, 0x0b, c[0].keylen = 20);
    c[0].data = "Hi There";
    c[0].mac_hex = "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7";

    memcpy(c[1].key, "Jefe", c[1].keylen = 4);
    c[1].data = "what do ya want for nothing?";
    c[1].mac_hex = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    fill(c[2].key, 0xaa, c[2].keylen = 20);
    c[2].data = (const char *)dd;
    c[2].datalen = sizeof(dd);
    c[2].mac_hex = "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe";

    for (unsigned i = 0; i != 25; ++i)
        c[3].key[i] = (unsigned char)(i + 1);
    c[3].keylen = 25;
    c[3].data = (const char *)cd;
    c[3].datalen = sizeof(cd);
    c[3].mac_hex = "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b";

    fill(c[4].key, 0x0c, c[4].keylen = 20);
    c[4].data = "Test With Truncation";
    c[4].mac_hex = "a3b6167473100ee06e0c796c2955552b";

    fill(c[5].key, 0xaa, c[5].keylen = 131);
    c[5].data = "Test Using Larger Than Block-Size Key - Hash Key First";
    c[5].mac_hex = "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54";

    fill(c[6].key, 0xaa, c[6].keylen = 131);
    c[6].data = "This is a test using a larger than block-size key and a larger than block-size data. The key needs to be "
                "hashed before being used by the HMAC algorithm.";
    c[6].mac_hex = "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2";

    for (size_t i = 0; i != 7; ++i)
        if (c[i].datalen == 0)
            c[i].datalen = strlen(c[i].data);
    return 7;
}

Test(signer, rfc4231_cases_1_to_7)
{
    rfc4231_case_t cases[7];
    size_t n = rfc4231_cases(cases);

    FOR_EACH_IMPL(m)
    {
        for (size_t i = 0; i != n; ++i) {
            wire_signer_t s;
            unsigned char mac[32];
            char hex[65];
            wire_frame_t part = {(void *)cases[i].data, cases[i].datalen};

            wire_signer_init_impl(&s, impls[m].impl, cases[i].key, cases[i].keylen);
            wire_signer_digest(&s, &part, 1, mac);
            sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
            size_t cmp = strlen(cases[i].mac_hex);
            cr_assert(strncmp(hex, cases[i].mac_hex, cmp) == 0, "%s, RFC 4231 case %zu: got %s, want %s", impls[m].name, i + 1, hex,
                      cases[i].mac_hex);
            wire_signer_dispose(&s);
        }
    }
}

/* An empty key (an unsigned signer's) still has a defined HMAC: that of a key of 64 zero bytes. */
Test(signer, empty_key_digest)
{
    static const struct {
        const char *data, *mac_hex; /* from Python's hmac module */
    } cases[] = {
        {"", "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"},
        {"Hi There", "e48411262715c8370cd5e7bf8e82bef53bd53712d007f3429351843b77c7bb9b"},
    };
    FOR_EACH_IMPL(m)
    {
        for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
            wire_signer_t s;
            unsigned char mac[32];
            char hex[65];
            wire_frame_t part = wire_test_str(cases[i].data);

            wire_signer_init_impl(&s, impls[m].impl, "", 0);
            wire_signer_digest(&s, &part, 1, mac);
            sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
            cr_expect_str_eq(hex, cases[i].mac_hex, "%s, case %zu", impls[m].name, i);
            wire_signer_dispose(&s);
        }
    }
}

/* The two implementations agree on messages of every length around SHA-256's 64-byte blocks and on
 * large ones, whole or in parts (this is what makes either a reference for the other). */
Test(signer, implementations_agree_on_every_length)
{
    size_t big = 3 * 1024 * 1024 + 17;
    unsigned char *data = malloc(big);
    wire_signer_t a, b;
    const char *key = "a jupyter key, 36 bytes long........";

    for (size_t i = 0; i != big; ++i)
        data[i] = (unsigned char)(i * 2654435761u >> 13);
    wire_signer_init_impl(&a, WIRE_HMAC_OPENSSL, key, strlen(key));
    wire_signer_init_impl(&b, WIRE_HMAC_SODIUM, key, strlen(key));
    for (size_t len = 0; len <= big; len = len < 300 ? len + 1 : len * 3 + 1) {
        size_t cut = len / 3;
        wire_frame_t whole = {data, len}, parts[3] = {{data, cut}, {NULL, 0}, {data + cut, len - cut}};
        unsigned char da[32], db[32], dp[32];
        wire_signer_digest(&a, &whole, 1, da);
        wire_signer_digest(&b, &whole, 1, db);
        wire_signer_digest(&a, parts, 3, dp);
        cr_expect(memcmp(da, db, 32) == 0, "length %zu", len);
        cr_expect(memcmp(da, dp, 32) == 0, "length %zu in parts", len);
    }
    wire_signer_dispose(&a);
    wire_signer_dispose(&b);
    free(data);
}

/* RFC 2104's key handling: a key of up to one block (64 bytes) is padded, a longer one hashed first. */
Test(signer, implementations_agree_on_every_key_length)
{
    unsigned char key[200], msg[] = "{\"msg_type\":\"execute_request\"}";
    wire_frame_t part = {msg, sizeof(msg) - 1};

    for (size_t i = 0; i != sizeof(key); ++i)
        key[i] = (unsigned char)(i * 131 + 7);
    for (size_t keylen = 1; keylen <= sizeof(key); ++keylen) {
        wire_signer_t a, b;
        unsigned char da[32], db[32];
        wire_signer_init_impl(&a, WIRE_HMAC_OPENSSL, key, keylen);
        wire_signer_init_impl(&b, WIRE_HMAC_SODIUM, key, keylen);
        wire_signer_digest(&a, &part, 1, da);
        wire_signer_digest(&b, &part, 1, db);
        cr_expect(memcmp(da, db, 32) == 0, "a key of %zu bytes", keylen);
        wire_signer_dispose(&a);
        wire_signer_dispose(&b);
    }
}

Test(signer, digest_of_parts_equals_digest_of_concatenation)
{
    rfc4231_case_t cases[7];
    rfc4231_cases(cases);
    const rfc4231_case_t *c = &cases[6]; /* longer than one SHA-256 block */

    FOR_EACH_IMPL(m)
    {
        wire_signer_t s;
        unsigned char whole[32], split[32];
        wire_frame_t one = {(void *)c->data, c->datalen};

        wire_signer_init_impl(&s, impls[m].impl, c->key, c->keylen);
        wire_signer_digest(&s, &one, 1, whole);
        for (size_t at = 0; at <= c->datalen; ++at) {
            wire_frame_t parts[3] = {{(void *)c->data, at}, {NULL, 0}, {(void *)(c->data + at), c->datalen - at}};
            wire_signer_digest(&s, parts, 3, split);
            cr_assert(memcmp(whole, split, 32) == 0, "%s: split at %zu", impls[m].name, at);
        }
        wire_signer_dispose(&s);
    }
}

Test(signer, keyed_state_is_reused_not_consumed)
{
    FOR_EACH_IMPL(m)
    {
        wire_signer_t s;
        unsigned char a[32], b[32];
        wire_frame_t part = wire_test_str("Hi There");

        wire_signer_init_impl(&s, impls[m].impl, "Jefe", 4);
        wire_signer_digest(&s, &part, 1, a);
        wire_signer_digest(&s, &part, 1, b);
        cr_assert(memcmp(a, b, 32) == 0, "%s", impls[m].name);
        wire_signer_dispose(&s);
    }
}

static void vector_parts(const jcv_vector_t *v, wire_frame_t parts[4], wire_frame_t *sig)
{
    size_t d = v->nidents; /* the delimiter */
    cr_assert_str_eq(v->frames[d].base, "<IDS|MSG>");
    *sig = (wire_frame_t){(void *)v->frames[d + 1].base, v->frames[d + 1].len};
    for (size_t i = 0; i != 4; ++i)
        parts[i] = (wire_frame_t){(void *)v->frames[d + 2 + i].base, v->frames[d + 2 + i].len};
}

Test(signer, reproduces_jupyter_client_signatures)
{
    FOR_EACH_IMPL(m)
    {
        for (size_t i = 0; i != JCV_COUNT; ++i) {
            const jcv_vector_t *v = &jcv_vectors[i];
            wire_frame_t parts[4], sig;
            wire_signer_t s;
            char hex[WIRE_SIG_HEX_LEN + 1];

            vector_parts(v, parts, &sig);
            wire_signer_init_impl(&s, impls[m].impl, v->key.base, v->key.len);
            wire_signer_sign(&s, parts, hex);
            cr_assert_eq(strlen(hex), sig.len, "%s: %s", impls[m].name, v->name);
            cr_assert(memcmp(hex, sig.base, sig.len) == 0, "%s: %s: got %s", impls[m].name, v->name, hex);
            cr_assert_eq(wire_signer_verify(&s, parts, sig.base, sig.len), 0, "%s: %s", impls[m].name, v->name);
            wire_signer_dispose(&s);
        }
    }
}

static void signed_vector(wire_signer_t *s, wire_frame_t parts[4], char sig[WIRE_SIG_HEX_LEN + 1])
{
    const jcv_vector_t *v = &jcv_vectors[0];
    wire_frame_t sigf;
    vector_parts(v, parts, &sigf);
    cr_assert_eq(sigf.len, WIRE_SIG_HEX_LEN);
    memcpy(sig, sigf.base, WIRE_SIG_HEX_LEN);
    sig[WIRE_SIG_HEX_LEN] = '\0';
    wire_signer_init(s, v->key.base, v->key.len);
    cr_assert_eq(wire_signer_verify(s, parts, sig, WIRE_SIG_HEX_LEN), 0);
}

Test(signer, verify_rejects_any_single_changed_hex_digit)
{
    wire_signer_t s;
    wire_frame_t parts[4];
    char sig[WIRE_SIG_HEX_LEN + 1];

    signed_vector(&s, parts, sig);
    for (size_t i = 0; i != WIRE_SIG_HEX_LEN; ++i) {
        char bad[WIRE_SIG_HEX_LEN + 1];
        memcpy(bad, sig, sizeof(bad));
        bad[i] = bad[i] == '0' ? '1' : '0';
        cr_assert_eq(wire_signer_verify(&s, parts, bad, WIRE_SIG_HEX_LEN), WIRE_EBADSIG, "digit %zu", i);
    }
    wire_signer_dispose(&s);
}

Test(signer, verify_rejects_wrong_length_and_non_hex)
{
    wire_signer_t s;
    wire_frame_t parts[4];
    char sig[WIRE_SIG_HEX_LEN + 1], longer[WIRE_SIG_HEX_LEN + 3];

    signed_vector(&s, parts, sig);
    cr_assert_eq(wire_signer_verify(&s, parts, sig, WIRE_SIG_HEX_LEN - 1), WIRE_EBADSIG);
    cr_assert_eq(wire_signer_verify(&s, parts, sig, 0), WIRE_EBADSIG);
    cr_assert_eq(wire_signer_verify(&s, parts, "", 0), WIRE_EBADSIG);
    memcpy(longer, sig, WIRE_SIG_HEX_LEN);
    memcpy(longer + WIRE_SIG_HEX_LEN, "00", 3);
    cr_assert_eq(wire_signer_verify(&s, parts, longer, WIRE_SIG_HEX_LEN + 2), WIRE_EBADSIG);
    cr_assert_eq(wire_signer_verify(&s, parts, longer, WIRE_SIG_HEX_LEN + 1), WIRE_EBADSIG);

    static const char nonhex[] = {'g', 'z', ' ', '-', 'x', '\0', '\n', (char)0xff};
    for (size_t p = 0; p < WIRE_SIG_HEX_LEN; p += 9) {
        for (size_t k = 0; k != sizeof(nonhex); ++k) {
            char bad[WIRE_SIG_HEX_LEN + 1];
            memcpy(bad, sig, sizeof(bad));
            bad[p] = nonhex[k];
            cr_assert_eq(wire_signer_verify(&s, parts, bad, WIRE_SIG_HEX_LEN), WIRE_EBADSIG, "pos %zu char %d", p, nonhex[k]);
        }
    }
    /* The right digits in the wrong frame order are a different message. */
    wire_frame_t swapped[4] = {parts[1], parts[0], parts[2], parts[3]};
    cr_assert_eq(wire_signer_verify(&s, swapped, sig, WIRE_SIG_HEX_LEN), WIRE_EBADSIG);
    wire_signer_dispose(&s);
}

Test(signer, wrong_key_rejects)
{
    wire_signer_t s;
    wire_frame_t parts[4];
    char sig[WIRE_SIG_HEX_LEN + 1];

    signed_vector(&s, parts, sig);
    wire_signer_dispose(&s);
    wire_signer_init(&s, "kgate-test-kez", 14);
    cr_assert_eq(wire_signer_verify(&s, parts, sig, WIRE_SIG_HEX_LEN), WIRE_EBADSIG);
    wire_signer_dispose(&s);
}

Test(signer, unsigned_signer_signs_empty_and_accepts_anything)
{
    wire_signer_t s;
    wire_frame_t parts[4] = {wire_test_str("{}"), wire_test_str("{}"), wire_test_str("{}"), wire_test_str("{}")};
    char hex[WIRE_SIG_HEX_LEN + 1];

    memset(hex, 'x', sizeof(hex));
    wire_signer_init(&s, "", 0);
    cr_assert_eq(s.enabled, 0);
    wire_signer_sign(&s, parts, hex);
    cr_assert_str_eq(hex, "");
    cr_assert_eq(wire_signer_verify(&s, parts, "", 0), 0);
    cr_assert_eq(wire_signer_verify(&s, parts, "nonsense", 8), 0);
    cr_assert_eq(wire_signer_verify(&s, parts, "0000000000000000000000000000000000000000000000000000000000000000", 64), 0);
    wire_signer_dispose(&s);
}

Test(signer, dispose_wipes_key_material)
{
    wire_signer_t zero;

    memset(&zero, 0, sizeof(zero));
    FOR_EACH_IMPL(m)
    {
        wire_signer_t s;
        wire_signer_init_impl(&s, impls[m].impl, "secret", 6);
        cr_assert_eq(s.enabled, 1);
        cr_assert(memcmp(&s, &zero, sizeof(s)) != 0);
        wire_signer_dispose(&s); /* OpenSSL's copies: freed (LeakSanitizer checks) and cleared by OpenSSL */
        cr_assert(memcmp(&s, &zero, sizeof(s)) == 0, "%s", impls[m].name);
        wire_signer_dispose(&s); /* twice is harmless, as is a zero-filled signer never keyed */
    }
}

/* The default is the implementation bench/hmac.c measured fastest. */
Test(signer, default_implementation_is_openssl)
{
    wire_signer_t s;

    wire_signer_init(&s, "k", 1);
    cr_expect_eq(s.impl, WIRE_HMAC_OPENSSL);
    cr_expect_not_null(s.keyed.openssl.inner);
    cr_expect_not_null(s.keyed.openssl.outer);
    wire_signer_dispose(&s);
}

/* The four frames of jupyter_client's vectors fed to a stream in pieces of `piece` bytes (each an exact-size copy). */
static int stream_verify(const wire_signer_t *s, const wire_frame_t parts[4], size_t piece, const char *sig, size_t siglen)
{
    wire_signer_stream_t st;

    wire_signer_stream_begin(&st, s);
    for (size_t i = 0; i != 4; ++i) {
        for (size_t off = 0; off < parts[i].len; off += piece) {
            size_t n = parts[i].len - off < piece ? parts[i].len - off : piece;
            void *copy = wire_test_exact_copy((const char *)parts[i].base + off, n);
            wire_signer_stream_update(&st, copy, n);
            free(copy);
        }
    }
    return wire_signer_stream_verify(&st, sig, siglen);
}

Test(signer, a_stream_fed_in_pieces_verifies_what_verify_does)
{
    for (size_t k = 0; k != sizeof(jcv_vectors) / sizeof(jcv_vectors[0]); ++k) {
        const jcv_vector_t *v = &jcv_vectors[k];
        wire_frame_t parts[4], sig;
        vector_parts(v, parts, &sig);
        FOR_EACH_IMPL(m)
        {
            wire_signer_t s;
            wire_signer_init_impl(&s, impls[m].impl, v->key.base, v->key.len);
            for (size_t piece = 1; piece <= 64; piece = piece * 2 + 1) {
                cr_assert_eq(stream_verify(&s, parts, piece, sig.base, sig.len), wire_signer_verify(&s, parts, sig.base, sig.len),
                             "%s: %s, pieces of %zu", impls[m].name, v->name, piece);
                if (sig.len == WIRE_SIG_HEX_LEN) {
                    char bad[WIRE_SIG_HEX_LEN];
                    memcpy(bad, sig.base, sizeof(bad));
                    bad[piece % WIRE_SIG_HEX_LEN] = bad[piece % WIRE_SIG_HEX_LEN] == '0' ? '1' : '0';
                    cr_assert_eq(stream_verify(&s, parts, piece, bad, sizeof(bad)), s.enabled ? WIRE_EBADSIG : 0, "%s: %s",
                                 impls[m].name, v->name);
                    cr_assert_eq(stream_verify(&s, parts, piece, sig.base, sig.len - 1), s.enabled ? WIRE_EBADSIG : 0);
                }
            }
            /* a stream given up without verifying releases its state (ASan: no leak) */
            wire_signer_stream_t st;
            wire_signer_stream_begin(&st, &s);
            wire_signer_stream_update(&st, "abc", 3);
            wire_signer_stream_dispose(&st);
            wire_signer_dispose(&s);
        }
    }
}
