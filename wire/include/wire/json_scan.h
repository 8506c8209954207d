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
 * every member is a string, whose keys have no backslash escape, and which has a "name" and a
 * "text" member (a duplicate key: the last one counts, as in wire_json_parse). `*out` then says
 * where the text is and how long it is decoded. Returns 0 otherwise, `*out` undefined: anything
 * that is not simple (another member type, an escaped key, a missing member), and anything that
 * wire_json_parse would refuse. A return of 1 promises that wire_json_parse accepts the bytes and
 * that its "text" and "name" members are what `*out` describes (tests/wire/scan_agree.h checks
 * it), so a relay may copy the text token as it is into another JSON document.
 * Plain runs are validated in bulk (wire_json_plain_run): nothing is copied or allocated.
 */
int wire_json_scan_stream(const char *json, size_t len, wire_stream_fields_t *out);

#endif
