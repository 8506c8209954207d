/*
 * wire/text_scan.h: the content of a `stream` message ({"name": "stdout", "text": "..."}) scanned as its bytes come, in
 * pieces of any size, without holding it: its name, the head of its text up to a byte budget, and the exact decoded length
 * of the rest. Pure: no allocation, no I/O. kernelmgr uses it on a message over the message cap (kernelmgr/src/overcap.h),
 * which it never holds whole; tests/wire/test_text_scan.c feeds it at every split point, tests/fuzz/fuzz_text_scan.c fuzzes it.
 */
#ifndef WIRE_TEXT_SCAN_H
#define WIRE_TEXT_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* The longest "name" value kept, decoded ("stdout" and "stderr" are all a stream has); a longer one sets name_long. */
#define WIRE_TEXT_SCAN_NAME_MAX 16
/* Nesting of the values of other members (skipped by their structure) beyond which the content is refused. */
#define WIRE_TEXT_SCAN_MAX_DEPTH 64

typedef enum {
    WIRE_TEXT_SCAN_MORE, /* valid so far: more bytes, or wire_text_scan_end */
    WIRE_TEXT_SCAN_DONE, /* (wire_text_scan_end only) a whole object with a "name" and a "text" string */
    WIRE_TEXT_SCAN_BAD,  /* not such an object: see the contract of wire_text_scan_feed; sticky */
} wire_text_scan_status_t;

/**
 * A scan in progress. Zero-filled then wire_text_scan_init; the results are read from it at any time (complete at DONE).
 *
 * The head is the longest prefix of the text, whole characters only, whose bytes *as the kernel encoded them* fit
 * `head_max` and decode to at most `head_decoded_max` bytes: escapes and UTF-8 sequences are copied as they came (validated, never
 * cut in half), so `head` holds the inside of a valid JSON string token (no quotes) that decodes to `head_decoded` bytes (never
 * more than head_len). Keeping the encoded bytes, not decoded ones, is what lets a relay write them into its own JSON without a
 * second copy (gateway/core/event.h).
 */
typedef struct st_wire_text_scan_t {
    /* from wire_text_scan_init: where the head goes, and its room */
    char *head;
    size_t head_max;
    /* what the head may decode to at most: SIZE_MAX from init; a caller whose reader keeps less sets it before the first feed */
    size_t head_decoded_max;
    /* results */
    size_t head_len;       /* bytes of the head in `head` */
    size_t head_decoded;   /* what they decode to */
    uint64_t rest_decoded; /* the decoded bytes of the text after the head: what a relay of the head drops */
    int have_name, have_text;
    char name[WIRE_TEXT_SCAN_NAME_MAX]; /* the last "name" value, decoded (not NUL-terminated) */
    size_t name_len;
    int name_long; /* it did not fit `name` (not "stdout" nor "stderr") */
    struct {
        int state, target, head_closed, status;
        char key[8];
        size_t key_len;
        int key_long;
        unsigned char unit[12]; /* an escape or a UTF-8 sequence split between pieces */
        size_t unit_len;
        unsigned depth;
        char closers[WIRE_TEXT_SCAN_MAX_DEPTH]; /* '}' or ']' for each open level of a skipped value */
    } _private;
} wire_text_scan_t;

/** Starts a scan whose head goes to `head` (room for `head_max` bytes; NULL with 0: count only). */
void wire_text_scan_init(wire_text_scan_t *s, char *head, size_t head_max);

/**
 * Scans the next `len` bytes of the content (pieces in order; any split, down to single bytes). The content must be a JSON
 * object whose "text" member is a string, once only, and whose "name" member is a string (a repeated one: the last counts, as
 * in wire_json_parse); their keys may come in either order, escaped or not, among any other members. Strings are checked as
 * wire_json_parse checks them (control bytes, invalid UTF-8, bad escapes, lone surrogates, U+0000 in a member's key are
 * refused); the values of other members are skipped by their structure (strings checked, brackets matched up to
 * WIRE_TEXT_SCAN_MAX_DEPTH, numbers and literals taken as runs of their characters, not checked further: the content is the
 * signed output of a kernel, and only its name and text are read). Returns MORE, or BAD from the first byte that breaks
 * these rules on (nothing is written to the head after BAD).
 */
wire_text_scan_status_t wire_text_scan_feed(wire_text_scan_t *s, const void *p, size_t len);

/** The content ended: DONE when it was one such object (white space after it allowed) with both members, else BAD. */
wire_text_scan_status_t wire_text_scan_end(wire_text_scan_t *s);

/**
 * The longest prefix of the inside of a valid JSON string token (`inner`, `len` bytes, no quotes: as wire_json_scan_stream or
 * wire_text_scan_t found it) that decodes to at most `budget` bytes without cutting a character (an escape, a surrogate pair
 * or a UTF-8 sequence): returns its length in encoded bytes, and what it decodes to in `*decoded`.
 */
size_t wire_json_string_prefix(const char *inner, size_t len, size_t budget, size_t *decoded);

#endif
