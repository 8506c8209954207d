/* kernels/bash/src/utf8.h: UTF-8 sanitising of byte streams cut at arbitrary points, and code point offsets. */
#ifndef BK_UTF8_H
#define BK_UTF8_H

#include <stddef.h>

/** Bytes one input byte can grow to in bk_utf8_sanitize's output (an invalid byte becomes U+FFFD). */
#define BK_UTF8_EXPANSION 3

/**
 * Copies `len` bytes of `in` to `out` (room for BK_UTF8_EXPANSION * len bytes) as valid UTF-8: every
 * byte that does not start a well-formed sequence (overlong forms, surrogates and values above
 * U+10FFFF are not well formed) becomes U+FFFD. Unless `final`, a well-formed but incomplete
 * sequence at the very end is left unconsumed, so that the next chunk of the stream can complete it.
 * Returns the number of bytes of `in` consumed (len minus at most 3) and stores the output length in
 * `*out_len`. Pure: no state survives the call.
 */
size_t bk_utf8_sanitize(const unsigned char *in, size_t len, int final, char *out, size_t *out_len);

/** The number of code points in the first `nbytes` bytes of valid UTF-8 `s`. */
size_t bk_utf8_count(const char *s, size_t nbytes);

/** The byte offset of code point `cp` in valid UTF-8 `s` of `len` bytes (clamped to `len`). */
size_t bk_utf8_offset(const char *s, size_t len, size_t cp);

#endif
