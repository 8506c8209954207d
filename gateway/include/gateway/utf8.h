/* gateway/utf8.h: turning arbitrary process output into valid UTF-8 for JSON events (pure). */
#ifndef GW_UTF8_H
#define GW_UTF8_H

#include <stddef.h>

/**
 * Converts `len` bytes of `in` into valid UTF-8 in a new buffer (`*out`, wire_malloc, NUL-terminated,
 * `*out_len` bytes): valid sequences are copied, each invalid byte becomes U+FFFD. Unless `final`,
 * an incomplete sequence at the very end is not consumed, so a character split between two reads
 * survives. Returns the number of input bytes consumed.
 */
size_t gw_utf8_sanitize(const char *in, size_t len, int final, char **out, size_t *out_len);

#endif
