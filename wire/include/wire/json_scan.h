/* wire/json_scan.h: a validating scan of a stream message's content that finds its text without decoding it (pure). */
#ifndef WIRE_JSON_SCAN_H
#define WIRE_JSON_SCAN_H

#include <stddef.h>

/** What wire_json_scan_stream found: views into the scanned bytes, valid as long as they are. */
typedef struct st_wire_stream_fields_t {
    /** The raw JSON token of the top-level "text" member, quotes and escapes included, as it came. */
    const char *text;
    size_t text_len;
    /** The length in bytes of that string once decoded (what json_string_length of the parsed value says). */
    size_t text_decoded_len;
    /** The top-level "name" member between its quotes, or NULL when it has an escape (it is then not decoded). */
    const char *name;
    size_t name_len;
} wire_stream_fields_t;

/**
 * Scans `len` bytes of `json`, the content of a Jupyter `stream` message ({"name": "stdout", "text":
 * "..."}), and returns 1 when it is "simple": a JSON object (surrounding white space allowed) whose
 * every member is a string, whose keys have no backslash escape, and which has a "name" and one
 * "text" member (a duplicate "name": the last one counts, as in wire_json_parse). `*out` then says
 * where the text is and how long it is decoded. Returns 0 otherwise, `*out` undefined: anything
 * that is not simple (another member type, an escaped key, a missing member, a second "text", which
 * wire_text_scan refuses too), and anything that
 * wire_json_parse would refuse. A return of 1 promises that wire_json_parse accepts the bytes and
 * that its "text" and "name" members are what `*out` describes (tests/wire/scan_agree.h checks
 * it), so a relay may copy the text token as it is into another JSON document.
 * Plain runs are validated in bulk (wire_json_plain_run): nothing is copied or allocated.
 */
int wire_json_scan_stream(const char *json, size_t len, wire_stream_fields_t *out);

/** The most MIME types wire_json_scan_bundle reports; a bundle with more is not "simple". */
#define WIRE_BUNDLE_MAX_ENTRIES 64

/** One member of a MIME bundle: views into the scanned bytes. */
typedef struct st_wire_bundle_entry_t {
    const char *key; /* between its quotes (no escape in it) */
    size_t key_len;
    const char *value; /* the value's JSON text as it came (any JSON value; white space inside it kept) */
    size_t value_len;
    int is_string;   /* the value is a JSON string token */
    int has_newline; /* white space inside the value (outside strings) has a line break: see wire_json_compact */
} wire_bundle_entry_t;

/** What wire_json_scan_bundle found: the members of the content's "data" object, in their order. */
typedef struct st_wire_bundle_fields_t {
    wire_bundle_entry_t entries[WIRE_BUNDLE_MAX_ENTRIES];
    size_t count;
} wire_bundle_fields_t;

/**
 * Scans `len` bytes of `json`, the content of an `execute_result` or `display_data` message, and
 * returns 1 when it is valid JSON (RFC 8259 grammar: numbers of any size and precision are valid, unlike
 * in wire_json_parse, which refuses integers beyond 64 bits) and "simple": an object whose "data" member
 * (the last one, if repeated) is an object of at most WIRE_BUNDLE_MAX_ENTRIES members whose keys have no
 * escape and are all different. `*out` then lists them, so that a relay can copy each value as the
 * kernel's encoder wrote it. Returns 0 otherwise (`*out` undefined). Nesting deeper than
 * WIRE_JSON_MAX_DEPTH is refused. Nothing is copied or allocated.
 */
int wire_json_scan_bundle(const char *json, size_t len, wire_bundle_fields_t *out);

/**
 * Copies the JSON text `src` (`len` bytes, valid JSON as wire_json_scan_bundle checked it) into `dst`
 * (room for `len` bytes) without the white space outside strings, so that it fits one line (an SSE
 * `data:` line); strings are copied as they are. Returns the bytes written. With `dst` NULL it only
 * measures.
 */
size_t wire_json_compact(char *dst, const char *src, size_t len);

#endif
