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
 * json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) accepts and builds equal values:
 * strings must be valid UTF-8 ("\u0000" allowed), escapes may not form lone surrogates, integers
 * must fit json_int_t (else the text is refused), a later duplicate key replaces an earlier one;
 * beyond that, nesting deeper than WIRE_JSON_MAX_DEPTH is refused.
 * Why not jansson: its lexer handles one character at a time (about 60 MB/s measured here), and
 * kernel output is mostly long strings; this copies runs of plain bytes and validates in bulk.
 */
json_t *wire_json_parse(const char *text, size_t len);

#endif
