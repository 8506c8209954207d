/* wire/text.h: byte-level text checks shared by the JSON codecs and output relaying (pure). */
#ifndef WIRE_TEXT_H
#define WIRE_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
 * Parses `s` as a whole decimal number no larger than `max` into `*out`: digits only (no sign, no
 * spaces, which strtoull would take, negating "-1" into its maximum). Returns 0, or -1 when `s`
 * is empty, holds anything else, or is out of range.
 */
int wire_parse_decimal(const char *s, uint64_t max, uint64_t *out);

/** Reads the 4 hexadecimal digits at `s` (either case; a JSON \u escape's) into `*out`: 0, or -1 when one is not a digit. */
int wire_hex4(const unsigned char *s, unsigned *out);

/**
 * The length of the longest prefix of `s` (`len` bytes) in which no byte needs attention in a JSON
 * string: no control character, '"' or '\\', and, unless `allow_non_ascii`, no byte above 0x7f.
 * Lets the JSON codecs pass plain text in bulk: 16 bytes per step with SSE2 (every x86-64 has it),
 * 8 with SWAR elsewhere (a zero byte in v shows as a set high bit of (v - 0x01..) & ~v & 0x80..).
 */
static inline size_t wire_json_plain_run(const unsigned char *s, size_t len, int allow_non_ascii)
{
    size_t i = 0;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), last_control = _mm_set1_epi8(0x1f);
    const __m128i high = allow_non_ascii ? _mm_setzero_si128() : _mm_set1_epi8((char)0x80);
    for (; len - i >= 16; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        /* a control byte is one that min(v, 0x1f) leaves unchanged; movemask reads each high bit */
        __m128i attention = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                                         _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v), _mm_and_si128(v, high)));
        int mask = _mm_movemask_epi8(attention);
        if (mask != 0)
            return i + (size_t)__builtin_ctz((unsigned)mask);
    }
#else
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    for (; len - i >= 8; i += 8) {
        uint64_t v, quote, backslash, control;
        memcpy(&v, s + i, sizeof(v));
        quote = v ^ (ones * '"');
        backslash = v ^ (ones * '\\');
        control = (v - ones * 0x20) & ~v;
        if (((((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | control | (allow_non_ascii ? 0 : v)) & highs) != 0)
            break;
    }
#endif
    for (; i != len; ++i)
        if (s[i] < 0x20 || s[i] == '"' || s[i] == '\\' || (!allow_non_ascii && s[i] >= 0x80))
            break;
    return i;
}

#endif
