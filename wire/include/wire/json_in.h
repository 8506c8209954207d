/* wire/json_in.h: a JSON parser producing jansson values, fast on the long strings kernels send. */
#ifndef WIRE_JSON_IN_H
#define WIRE_JSON_IN_H

#include <stddef.h>
#include <jansson.h>

/** Deepest nesting of arrays and objects accepted (the parser recurses once per level). */
#define WIRE_JSON_MAX_DEPTH 512

/**
 * Parses exactly one JSON value (RFC 8259; surrounding white space allowed) from `len` bytes of
 * `text` into a new jansson value, or returns NULL if the text is not valid JSON. It accepts what
 * json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) of jansson 2.14 accepts and builds
 * equal values (tests/wire/test_json_in.c compares the two):
 * - strings must be valid UTF-8 ("\u0000" allowed, but not in a key); escapes may not form lone
 *   surrogates; a later duplicate key replaces an earlier one;
 * - numbers may have any number of digits (memory use does not grow with them): an integer (no
 *   fraction, no exponent) must fit json_int_t, else the text is refused (jansson: "too big
 *   integer"); a real is rounded correctly to the nearest double, refused if it overflows
 *   (jansson: "real number overflow") and becomes zero or a subnormal, with its sign, if it
 *   underflows; "-0" is the integer 0 and "-0.0" the real -0.0.
 * Two differences, both refusals of what jansson accepts:
 * - a raw NUL byte is refused wherever it is, as JSON requires. jansson reads one byte past a
 *   number or a bare word (true, false, null) and loses that byte when it is NUL and is pushed
 *   back, so json_loadb accepts "1\0" as 1, "[1\0]" as [1] and "true\0" as true (but not "1\0\0",
 *   nor a NUL anywhere else);
 * - nesting deeper than WIRE_JSON_MAX_DEPTH is refused (jansson stops at 2048 levels).
 * Why not jansson: its lexer handles one character at a time (about 60 MB/s measured here), and
 * kernel output is mostly long strings; this copies runs of plain bytes and validates in bulk.
 */
json_t *wire_json_parse(const char *text, size_t len);

#endif
