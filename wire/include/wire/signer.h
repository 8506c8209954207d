/* wire/signer.h: HMAC-SHA256 message signing and constant-time verification (libsodium). */
#ifndef WIRE_SIGNER_H
#define WIRE_SIGNER_H

#include <sodium.h>
#include "wire/frames.h"

/** Length of a hex-encoded HMAC-SHA256 signature, without the terminating NUL. */
#define WIRE_SIG_HEX_LEN 64

/**
 * A signer holds the HMAC state pre-keyed with the kernel's key; each message copies it, so the
 * key schedule runs once per kernel, not once per message. An empty key means messages are sent
 * with an empty signature and any signature is accepted (Jupyter's "unsigned" mode).
 */
typedef struct st_wire_signer_t {
    crypto_auth_hmacsha256_state keyed;
    int enabled;
} wire_signer_t;

/**
 * Keys a signer with the raw bytes of `key` (the connection file's key string, not hex-decoded).
 * `keylen == 0` yields an unsigned signer.
 */
void wire_signer_init(wire_signer_t *signer, const void *key, size_t keylen);
/** Wipes the key material (sodium_memzero). */
void wire_signer_dispose(wire_signer_t *signer);

/** Computes the raw HMAC-SHA256 of the concatenation of `n` parts. */
void wire_signer_digest(const wire_signer_t *signer, const wire_frame_t *parts, size_t n, unsigned char out[32]);

/**
 * Writes the lower-case hex signature of the four JSON frames (header, parent_header, metadata,
 * content) into `hex` (NUL-terminated). An unsigned signer writes the empty string.
 */
void wire_signer_sign(const wire_signer_t *signer, const wire_frame_t parts[4], char hex[WIRE_SIG_HEX_LEN + 1]);

/**
 * Verifies `sig` (`siglen` bytes of hex, as received) over the four JSON frames. The length is
 * checked first, then the digests are compared in constant time. Returns 0 or WIRE_EBADSIG.
 * An unsigned signer accepts anything.
 */
int wire_signer_verify(const wire_signer_t *signer, const wire_frame_t parts[4], const void *sig, size_t siglen);

#endif
