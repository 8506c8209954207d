/* wire/src/signer.c: HMAC-SHA256 signing and constant-time verification of Jupyter messages. */
#include <string.h>
#include <sodium.h>
#include "wire/errors.h"
#include "wire/signer.h"

void wire_signer_init(wire_signer_t *signer, const void *key, size_t keylen)
{
    /* The one-shot crypto_auth_hmacsha256 assumes a 32-byte key; Jupyter keys have any length. The
     * state is keyed even for an empty key so that wire_signer_digest is always defined. */
    static const unsigned char no_key[1];
    crypto_auth_hmacsha256_init(&signer->keyed, keylen != 0 ? key : no_key, keylen); /* key is declared nonnull */
    signer->enabled = keylen != 0;
}

void wire_signer_dispose(wire_signer_t *signer)
{
    sodium_memzero(signer, sizeof(*signer));
}

void wire_signer_digest(const wire_signer_t *signer, const wire_frame_t *parts, size_t n, unsigned char out[32])
{
    crypto_auth_hmacsha256_state st = signer->keyed;
    for (size_t i = 0; i != n; ++i)
        crypto_auth_hmacsha256_update(&st, parts[i].base, parts[i].len);
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
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
