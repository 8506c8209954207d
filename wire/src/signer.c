/* wire/src/signer.c: HMAC-SHA256 signing and constant-time verification of Jupyter messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sodium.h>
#include "wire/errors.h"
#include "wire/signer.h"

/* OpenSSL fails here only when it cannot allocate (or its default provider is missing), which
 * kgate treats like any exhaustion: it aborts. */
static void openssl_failed(const char *what)
{
    fprintf(stderr, "kgate: OpenSSL HMAC-SHA256: %s failed\n", what);
    ERR_print_errors_fp(stderr);
    abort();
}

/* A SHA-256 state that has absorbed one block: the key XORed with `pad` (RFC 2104's ipad or opad). */
static EVP_MD_CTX *keyed_state(EVP_MD *sha256, const unsigned char k0[64], unsigned char pad)
{
    unsigned char block[64];
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    for (size_t i = 0; i != sizeof(block); ++i)
        block[i] = k0[i] ^ pad;
    if (ctx == NULL || !EVP_DigestInit_ex(ctx, sha256, NULL) || !EVP_DigestUpdate(ctx, block, sizeof(block)))
        openssl_failed("keying");
    OPENSSL_cleanse(block, sizeof(block));
    return ctx;
}

void wire_signer_init_impl(wire_signer_t *signer, wire_hmac_impl_t impl, const void *key, size_t keylen)
{
    /* Both libraries declare the key nonnull even when its length is 0. The state is keyed even for
     * an empty key so that wire_signer_digest is always defined. */
    static const unsigned char no_key[1];
    const unsigned char *k = keylen != 0 ? key : no_key;
    unsigned char k0[64] = {0};
    unsigned int hashed_len = 0;

    memset(signer, 0, sizeof(*signer));
    signer->impl = impl;
    signer->enabled = keylen != 0;
    if (impl == WIRE_HMAC_SODIUM) {
        /* The one-shot crypto_auth_hmacsha256 assumes a 32-byte key; Jupyter keys have any length. */
        crypto_auth_hmacsha256_init(&signer->keyed.sodium, k, keylen);
        return;
    }
    /* RFC 2104: a key longer than the block is hashed first; either way it is zero-padded to a block */
    EVP_MD *sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    if (sha256 == NULL)
        openssl_failed("fetching SHA256");
    if (keylen > sizeof(k0)) {
        if (!EVP_Digest(k, keylen, k0, &hashed_len, sha256, NULL))
            openssl_failed("hashing the key");
    } else {
        memcpy(k0, k, keylen);
    }
    signer->keyed.openssl.inner = keyed_state(sha256, k0, 0x36);
    signer->keyed.openssl.outer = keyed_state(sha256, k0, 0x5c);
    OPENSSL_cleanse(k0, sizeof(k0));
    EVP_MD_free(sha256); /* the states hold their own references */
}

void wire_signer_init(wire_signer_t *signer, const void *key, size_t keylen)
{
    wire_signer_init_impl(signer, WIRE_HMAC_OPENSSL, key, keylen);
}

void wire_signer_dispose(wire_signer_t *signer)
{
    if (signer->impl == WIRE_HMAC_OPENSSL) {
        EVP_MD_CTX_free(signer->keyed.openssl.inner);
        EVP_MD_CTX_free(signer->keyed.openssl.outer);
    }
    sodium_memzero(signer, sizeof(*signer));
}

void wire_signer_digest(const wire_signer_t *signer, const wire_frame_t *parts, size_t n, unsigned char out[32])
{
    if (signer->impl == WIRE_HMAC_SODIUM) {
        crypto_auth_hmacsha256_state st = signer->keyed.sodium;
        for (size_t i = 0; i != n; ++i)
            crypto_auth_hmacsha256_update(&st, parts[i].base, parts[i].len);
        crypto_auth_hmacsha256_final(&st, out);
        sodium_memzero(&st, sizeof(st));
        return;
    }
    /*
     * HMAC from the two keyed states (RFC 2104), each copied rather than re-keyed: two SHA-256 blocks
     * less per message. OpenSSL's EVP_MAC_CTX_dup copies a whole HMAC context with its key (about 9
     * allocations against 3 here): 2.3x slower at 100 bytes, 1.7x at 400, 1.4x at 1000, the same at
     * 1 MiB (bench/hmac.c). Kernel messages are mostly a few hundred bytes.
     */
    EVP_MD_CTX *st = EVP_MD_CTX_new();
    unsigned char inner[32];
    unsigned int len = 0;
    if (st == NULL || !EVP_MD_CTX_copy_ex(st, signer->keyed.openssl.inner))
        openssl_failed("copying the keyed state");
    for (size_t i = 0; i != n; ++i)
        if (parts[i].len != 0 && !EVP_DigestUpdate(st, parts[i].base, parts[i].len))
            openssl_failed("EVP_DigestUpdate");
    if (!EVP_DigestFinal_ex(st, inner, &len) || !EVP_MD_CTX_copy_ex(st, signer->keyed.openssl.outer) ||
        !EVP_DigestUpdate(st, inner, sizeof(inner)) || !EVP_DigestFinal_ex(st, out, &len) || len != 32)
        openssl_failed("EVP_DigestFinal_ex");
    OPENSSL_cleanse(inner, sizeof(inner));
    EVP_MD_CTX_free(st);
}

void wire_signer_sign(const wire_signer_t *signer, const wire_frame_t parts[4], char hex[WIRE_SIG_HEX_LEN + 1])
{
    unsigned char mac[crypto_auth_hmacsha256_BYTES];

    if (!signer->enabled) {
        hex[0] = '\0';
        return;
    }
    wire_signer_digest(signer, parts, 4, mac);
    sodium_bin2hex(hex, WIRE_SIG_HEX_LEN + 1, mac, sizeof(mac));
}

int wire_signer_verify(const wire_signer_t *signer, const wire_frame_t parts[4], const void *sig, size_t siglen)
{
    unsigned char got[crypto_auth_hmacsha256_BYTES], want[crypto_auth_hmacsha256_BYTES];
    size_t gotlen = 0;

    if (!signer->enabled)
        return 0;
    if (siglen != WIRE_SIG_HEX_LEN)
        return WIRE_EBADSIG;
    /* With no ignore set and no end pointer, sodium_hex2bin fails unless all 64 characters are hex. */
    if (sodium_hex2bin(got, sizeof(got), sig, siglen, NULL, &gotlen, NULL) != 0 || gotlen != sizeof(got))
        return WIRE_EBADSIG;
    wire_signer_digest(signer, parts, 4, want);
    return sodium_memcmp(got, want, sizeof(want)) == 0 ? 0 : WIRE_EBADSIG;
}

void wire_signer_stream_begin(wire_signer_stream_t *st, const wire_signer_t *signer)
{
    memset(st, 0, sizeof(*st));
    st->signer = signer;
    if (signer->impl == WIRE_HMAC_SODIUM) {
        st->sodium = signer->keyed.sodium;
        return;
    }
    if ((st->openssl = EVP_MD_CTX_new()) == NULL || !EVP_MD_CTX_copy_ex(st->openssl, signer->keyed.openssl.inner))
        openssl_failed("copying the keyed state");
}

void wire_signer_stream_update(wire_signer_stream_t *st, const void *p, size_t len)
{
    if (len == 0)
        return;
    if (st->signer->impl == WIRE_HMAC_SODIUM)
        crypto_auth_hmacsha256_update(&st->sodium, p, len);
    else if (!EVP_DigestUpdate(st->openssl, p, len))
        openssl_failed("EVP_DigestUpdate");
}

void wire_signer_stream_dispose(wire_signer_stream_t *st)
{
    EVP_MD_CTX_free(st->openssl); /* OpenSSL 3 clears a digest context as it frees it */
    sodium_memzero(st, sizeof(*st));
}

int wire_signer_stream_verify(wire_signer_stream_t *st, const void *sig, size_t siglen)
{
    unsigned char got[crypto_auth_hmacsha256_BYTES], want[crypto_auth_hmacsha256_BYTES], inner[32];
    unsigned int len = 0;
    size_t gotlen = 0;
    int ret = WIRE_EBADSIG;

    if (!st->signer->enabled) {
        ret = 0;
        goto Exit;
    }
    if (siglen != WIRE_SIG_HEX_LEN || sodium_hex2bin(got, sizeof(got), sig, siglen, NULL, &gotlen, NULL) != 0 ||
        gotlen != sizeof(got))
        goto Exit;
    if (st->signer->impl == WIRE_HMAC_SODIUM) {
        crypto_auth_hmacsha256_final(&st->sodium, want);
    } else if (!EVP_DigestFinal_ex(st->openssl, inner, &len) || !EVP_MD_CTX_copy_ex(st->openssl, st->signer->keyed.openssl.outer) ||
               !EVP_DigestUpdate(st->openssl, inner, sizeof(inner)) || !EVP_DigestFinal_ex(st->openssl, want, &len) || len != 32) {
        openssl_failed("EVP_DigestFinal_ex");
    }
    ret = sodium_memcmp(got, want, sizeof(want)) == 0 ? 0 : WIRE_EBADSIG;
Exit:
    OPENSSL_cleanse(inner, sizeof(inner));
    OPENSSL_cleanse(want, sizeof(want));
    wire_signer_stream_dispose(st);
    return ret;
}
