/* gateway/json_out.h: compact JSON rendering, byte for byte what jansson's JSON_COMPACT writes, faster; JSON strings of
 * text that need not be UTF-8. */
#ifndef GW_JSON_OUT_H
#define GW_JSON_OUT_H

#include <stddef.h>
#include <jansson.h>

/**
 * Renders `value` as compact one-line JSON into `out` and returns its length; with `out` NULL it
 * only measures. The output equals json_dumpb(value, ..., JSON_COMPACT | JSON_ENCODE_ANY).
 * Why not jansson: its encoder handles one character at a time (about 70 MB/s measured here for
 * two passes over a large string); stream text is most of what kgate relays, and this copies runs
 * of plain bytes with memcpy.
 */
size_t gw_json_render(const json_t *value, char *out);

/**
 * A JSON string of the `len` bytes at `text`, which may quote what a client sent: a header's bytes need not be UTF-8, and a
 * value quoted with a printf precision ("%.64s") may be cut inside a character. Each byte that is not part of a valid UTF-8
 * character becomes U+FFFD (wire_utf8_sanitize), only when jansson refuses the text, so valid text costs nothing more.
 * jansson's json_string returns NULL for such text, and a NULL where a message was meant crashed kgate when it was sent.
 * The one constructor of every message that quotes a client (error bodies, error events, WebSocket error frames).
 */
json_t *gw_json_text(const char *text, size_t len);

/** Sets `obj`'s member of key `key` (`len` bytes, made valid as gw_json_text makes text) to `value`, which it takes. A key
 * that is no UTF-8 made json_object_set_new fail, and the member went missing without a word. */
void gw_json_set_text_key(json_t *obj, const char *key, size_t len, json_t *value);

#endif
