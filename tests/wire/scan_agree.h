/* tests/wire/scan_agree.h: wire_json_scan_stream against wire_json_parse, the verdict shared by test_json_scan.c and tests/fuzz. */
#ifndef KGATE_TESTS_SCAN_AGREE_H
#define KGATE_TESTS_SCAN_AGREE_H

#include <string.h>
#include <jansson.h>
#include "wire/json_in.h"
#include "wire/json_scan.h"

/* Every member a string, "name" and "text" among them: what the scan calls simple when no key is escaped. */
static inline int scan_agree_all_strings(json_t *v)
{
    const char *key;
    json_t *member;

    if (!json_is_object(v) || !json_is_string(json_object_get(v, "name")) || !json_is_string(json_object_get(v, "text")))
        return 0;
    json_object_foreach(v, key, member)
    {
        if (!json_is_string(member))
            return 0;
    }
    return 1;
}

/* How many members named "text" the bytes hold, for bytes with no backslash (every quote then delimits a token, so a
 * "text" token followed by a colon is a key). */
static inline int scan_agree_text_keys(const char *text, size_t len)
{
    int n = 0;

    for (size_t i = 0; i + 6 <= len; ++i) {
        size_t j = i + 6;
        if (memcmp(text + i, "\"text\"", 6) != 0)
            continue;
        while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
            ++j;
        n += j < len && text[j] == ':';
    }
    return n;
}

/* Whether a member's value in the bytes is not a string, for bytes with no backslash (as above): a colon outside strings
 * followed by anything but a quote. The parsed object does not say so when a later duplicate replaced that member. */
static inline int scan_agree_nonstring_member(const char *text, size_t len)
{
    int in_string = 0;

    for (size_t i = 0; i != len; ++i) {
        if (text[i] == '"') {
            in_string = !in_string;
        } else if (!in_string && text[i] == ':') {
            size_t j = i + 1;
            while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
                ++j;
            if (j == len || text[j] != '"')
                return 1;
        }
    }
    return 0;
}

/*
 * NULL when the scan of `len` bytes of `text` agrees with wire_json_parse, else what differs. When the
 * scan says simple, the parse must accept the bytes with a string "text" of the decoded length the scan
 * gave, which its token parses to, and a "name" equal to the scan's (when it gave one). When the bytes
 * hold no backslash at all and the parse finds an object of strings with "name" and "text", the scan
 * must say simple (it may decline only for an escaped key, a second "text" member, or a member that is no string in the
 * bytes although a later duplicate of it is: json_scan.h wants every member a string).
 */
static inline const char *scan_agree(const char *text, size_t len, wire_stream_fields_t *fields)
{
    wire_stream_fields_t f;
    json_t *v = wire_json_parse(text, len), *t, *token = NULL;
    const char *why = NULL;
    int simple = wire_json_scan_stream(text, len, &f);

    if (!simple) {
        if (v != NULL && memchr(text, '\\', len) == NULL && scan_agree_all_strings(v) && scan_agree_text_keys(text, len) < 2 &&
            !scan_agree_nonstring_member(text, len))
            why = "the scan declined an object of plain strings with name and text";
        goto Exit;
    }
    if (v == NULL) {
        why = "the scan called simple what wire_json_parse refuses";
        goto Exit;
    }
    if (!scan_agree_all_strings(v)) {
        why = "the scan called simple an object that is not all strings with name and text";
        goto Exit;
    }
    t = json_object_get(v, "text");
    if (json_string_length(t) != f.text_decoded_len) {
        why = "the scan's decoded length of text differs from the parsed one";
        goto Exit;
    }
    if ((token = wire_json_parse(f.text, f.text_len)) == NULL || !json_equal(token, t) || f.text[0] != '"' ||
        f.text[f.text_len - 1] != '"') {
        why = "the scan's text token is not the parsed text";
        goto Exit;
    }
    if (f.name != NULL && (json_string_length(json_object_get(v, "name")) != f.name_len ||
                           memcmp(json_string_value(json_object_get(v, "name")), f.name, f.name_len) != 0)) {
        why = "the scan's name is not the parsed name";
        goto Exit;
    }
    if (f.name == NULL && memchr(text, '\\', len) == NULL) {
        why = "the scan gave no name although nothing is escaped";
        goto Exit;
    }
    if (fields != NULL)
        *fields = f;
Exit:
    json_decref(token);
    json_decref(v);
    return why;
}

#endif
