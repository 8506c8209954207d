/* wire/signer.h: HMAC-SHA256 message signing (OpenSSL) and constant-time verification (libsodium). */
#ifndef WIRE_SIGNER_H
#define WIRE_SIGNER_H

#include <openssl/types.h>
#include <sodium.h>
#include "wire/frames.h"

/** Length of a hex-encoded HMAC-SHA256 signature, without the terminating NUL. */
#define WIRE_SIG_HEX_LEN 64

/**
 * The HMAC-SHA256 implementations a signer can use. Both give the same digests (RFC 4231 and the
 * jupyter_client vectors are tested with each); they differ in speed only:
 * - WIRE_HMAC_OPENSSL, the default: HMAC (RFC 2104) over OpenSSL's SHA-256 (EVP_Digest), which
 *   uses the CPU's SHA extensions or AVX2/SSSE3 code, from two pre-keyed digest states. Measured
 *   with bench/hmac.c (bench/README.md): 5.1x libsodium's speed on 1 MiB messages, 4.9x at 4 KiB,
 *   2.8x at 100 bytes; 2.3x OpenSSL's EVP_MAC at 100 bytes, 1.7x at 400, the same at 1 MiB.
 * - WIRE_HMAC_SODIUM: libsodium's portable C, kept as the reference the benchmark compares against.
 */
typedef enum {
    WIRE_HMAC_OPENSSL,
    WIRE_HMAC_SODIUM,
} wire_hmac_impl_t;

/**
 * A signer holds the HMAC state pre-keyed with the kernel's key (OpenSSL: the inner and outer
 * SHA-256 states that have absorbed the padded key); each message copies it, so the key schedule
 * runs once per kernel, not once per message. An empty key means messages are sent
 * with an empty signature and any signature is accepted (Jupyter's "unsigned" mode).
 * A signer must not be copied by value (it owns the OpenSSL state through a pointer); it is not
 * modified between init and dispose.
 */
typedef struct st_wire_signer_t {
    wire_hmac_impl_t impl;
    int enabled;
    union {
        struct {
            EVP_MD_CTX *inner, *outer;
        } openssl;
        crypto_auth_hmacsha256_state sodium;
    } keyed;
} wire_signer_t;

/**
 * Keys a signer with the raw bytes of `key` (the connection file's key string, not hex-decoded),
 * using the default implementation (WIRE_HMAC_OPENSSL). `keylen == 0` yields an unsigned signer.
 * Pair with wire_signer_dispose. Aborts if OpenSSL cannot provide HMAC-SHA256 (out of memory).
 */
void wire_signer_init(wire_signer_t *signer, const void *key, size_t keylen);
/** wire_signer_init with a chosen implementation (the benchmark and the tests use both). */
void wire_signer_init_impl(wire_signer_t *signer, wire_hmac_impl_t impl, const void *key, size_t keylen);
/**
 * Releases the keyed state and wipes the key material: OpenSSL 3.0 clears the keyed SHA-256 states
 * as it frees them (its digests' freectx is OPENSSL_clear_free), the padded key was wiped at
 * init, and the signer itself is zeroed (sodium_memzero). Accepts a zero-filled signer and one already
 * disposed.
 */
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

/**
 * wire_signer_verify over bytes fed as they arrive, for a message never held whole (one over the message cap: kernelmgr's
 * overcap.c): the four JSON frames' bytes go in, in order and in pieces of any size, then the signature is checked as
 * wire_signer_verify checks it. The state is the signer's keyed one, copied (OpenSSL's digest states, or libsodium's
 * crypto_auth_hmacsha256 state). `signer` is borrowed and must outlive the stream.
 */
typedef struct st_wire_signer_stream_t {
    const wire_signer_t *signer;
    EVP_MD_CTX *openssl; /* WIRE_HMAC_OPENSSL: the inner digest in progress */
    crypto_auth_hmacsha256_state sodium;
} wire_signer_stream_t;

/** Starts a stream (zero-filled or ended ones alike). Pair with wire_signer_stream_verify or wire_signer_stream_dispose. */
void wire_signer_stream_begin(wire_signer_stream_t *st, const wire_signer_t *signer);
/** The next `len` bytes of the header, parent_header, metadata and content frames, in that order. */
void wire_signer_stream_update(wire_signer_stream_t *st, const void *p, size_t len);
/**
 * Ends the stream: 0 when `sig` (`siglen` bytes of hex, as received) is the HMAC of every byte fed (the length checked first,
 * the digests compared in constant time), WIRE_EBADSIG otherwise; an unsigned signer accepts anything. The state is wiped
 * and released either way.
 */
int wire_signer_stream_verify(wire_signer_stream_t *st, const void *sig, size_t siglen);
/** Wipes and releases a stream that will not be verified; accepts a zero-filled or ended one. */
void wire_signer_stream_dispose(wire_signer_stream_t *st);

#endif
