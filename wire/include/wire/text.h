/* wire/text.h: byte-level text checks shared by the JSON codecs and output relaying (pure). */
#ifndef WIRE_TEXT_H
#define WIRE_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/**
 * The length (1-4) of the valid UTF-8 sequence starting at `s`, 0 when it is invalid (overlong
 * forms, surrogates and code points above U+10FFFF included), or -1 when it is valid so far but
 * `avail` bytes end before it does. `avail` must be at least 1.
 */
int wire_utf8_sequence(const unsigned char *s, size_t avail);

/**
 * Converts `len` bytes of `in` into valid UTF-8 in a new buffer (`*out`, wire_malloc, NUL-terminated,
 * `*out_len` bytes): valid sequences are copied, each invalid byte becomes U+FFFD. Unless `final`,
 * an incomplete sequence at the very end is not consumed, so a character split between two reads
 * survives. Returns the number of input bytes consumed.
 */
size_t wire_utf8_sanitize(const char *in, size_t len, int final, char **out, size_t *out_len);

/**
 * True when none of the eight bytes at `s` needs attention in a JSON string: no control
 * character, '"' or '\\', and, unless `allow_non_ascii`, no byte above 0x7f. Lets the JSON codecs
 * skip plain text eight bytes at a time (SWAR: a zero byte in v shows as a set high bit of
 * (v - 0x01..) & ~v & 0x80..).
 */
static inline int wire_json_plain8(const unsigned char *s, int allow_non_ascii)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t v, quote, backslash, control;

    memcpy(&v, s, sizeof(v));
    quote = v ^ (ones * '"');
    backslash = v ^ (ones * '\\');
    control = (v - ones * 0x20) & ~v;
    return ((((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | control | (allow_non_ascii ? 0 : v)) & highs) == 0;
}

#endif
