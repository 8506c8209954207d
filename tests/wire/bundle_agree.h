/* tests/wire/bundle_agree.h: wire_json_scan_bundle and wire_json_compact against wire_json_parse, the verdict shared by
 * test_json_bundle.c and tests/fuzz. */
#ifndef KGATE_TESTS_BUNDLE_AGREE_H
#define KGATE_TESTS_BUNDLE_AGREE_H

#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "wire/json_in.h"
#include "wire/json_scan.h"

/* Skips the digits at `*i`; whether there was one. */
static inline int bundle_agree_digits(const char *s, size_t len, size_t *i)
{
    size_t start = *i;

    while (*i < len && s[*i] >= '0' && s[*i] <= '9')
        ++*i;
    return *i != start;
}

/* Whether `len` bytes at `s` are one number of RFC 8259's grammar. */
static inline int bundle_agree_is_number(const char *s, size_t len)
{
    size_t i = 0;

    if (i < len && s[i] == '-')
        ++i;
    if (i < len && s[i] == '0')
        ++i;
    else if (!bundle_agree_digits(s, len, &i))
        return 0;
    if (i < len && s[i] == '.' && (++i, !bundle_agree_digits(s, len, &i)))
        return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        ++i;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            ++i;
        if (!bundle_agree_digits(s, len, &i))
            return 0;
    }
    return i == len;
}

/*
 * `len` bytes of JSON text with what wire_json_parse refuses but the bundle scan takes (json_scan.h) made harmless: every
 * well-formed number outside strings becomes 0 (an integer beyond 64 bits, a real that overflows) and every "\u0000" inside strings
 * "\u0001" (a NUL in a key). Needs `len` + 1 bytes at `out`; returns how many it wrote.
 */
static inline size_t bundle_agree_tame(const char *text, size_t len, char *out)
{
    size_t n = 0;
    int in_string = 0;

    for (size_t i = 0; i != len; ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\' && i + 1 < len) {
                if (len - i >= 6 && memcmp(text + i, "\\u0000", 6) == 0) {
                    memcpy(out + n, "\\u0001", 6);
                    n += 6;
                    i += 5;
                } else {
                    out[n++] = c;
                    out[n++] = text[++i];
                }
                continue;
            }
            in_string = c != '"';
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t end = i + 1;
            while (end < len && text[end] != '\0' && strchr("0123456789.eE+-", text[end]) != NULL)
                ++end;
            /* only a number of RFC 8259's grammar: a malformed one stays, for the parser to refuse */
            if (bundle_agree_is_number(text + i, end - i)) {
                out[n++] = '0';
                i = end - 1;
                continue;
            }
        }
        out[n++] = c;
    }
    return n;
}

/* Whether the JSON text at `s` has white space outside its strings (a valid text: no raw control byte in a string). */
static inline int bundle_agree_has_space(const char *s, size_t len)
{
    int in_string = 0;

    for (size_t i = 0; i != len; ++i) {
        if (in_string && s[i] == '\\')
            ++i;
        else if (s[i] == '"')
            in_string = !in_string;
        else if (!in_string && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            return 1;
    }
    return 0;
}

/* One reported value: within the text, one line once compacted, and (when `member` is given) the parsed member. */
static inline const char *bundle_agree_entry(const char *text, size_t len, const wire_bundle_entry_t *e, json_t *member)
{
    const char *why = NULL;
    char *compact;
    size_t n;
    json_t *value = NULL, *again = NULL;

    if (e->key < text || e->key_len > (size_t)(text + len - e->key) || e->value < text ||
        e->value_len > (size_t)(text + len - e->value) || e->value_len == 0)
        return "a key or value lies outside the content";
    if (memchr(e->key, '\\', e->key_len) != NULL || memchr(e->key, '"', e->key_len) != NULL)
        return "a key with an escape or a quote";
    if (e->is_string != (e->value[0] == '"'))
        return "is_string is not whether the value is a string token";
    if (e->has_newline != (memchr(e->value, '\n', e->value_len) != NULL || memchr(e->value, '\r', e->value_len) != NULL))
        return "has_newline is not whether the value holds a line break";
    compact = malloc(e->value_len);
    n = wire_json_compact(compact, e->value, e->value_len);
    if (n != wire_json_compact(NULL, e->value, e->value_len) || n > e->value_len)
        why = "wire_json_compact measures what it does not write";
    else if (memchr(compact, '\n', n) != NULL || memchr(compact, '\r', n) != NULL || bundle_agree_has_space(compact, n))
        why = "wire_json_compact left white space outside strings";
    else if (member != NULL) {
        value = wire_json_parse(e->value, e->value_len);
        again = wire_json_parse(compact, n);
        if (value == NULL || !json_equal(value, member))
            why = "a value the scan reports is not the parsed member";
        else if (again == NULL || !json_equal(again, member))
            why = "a compacted value is not the parsed member";
    }
    json_decref(value);
    json_decref(again);
    free(compact);
    return why;
}

/*
 * NULL when the bundle scan of `len` bytes of `text` keeps json_scan.h's promises, else what breaks. Declining is always
 * allowed. When the scan says simple, its entries are distinct keys without escapes and values within the text, with
 * has_newline right and a compacted form on one line; wire_json_parse accepts the text, or accepts it once its numbers
 * and "\u0000" escapes are tamed (the only things it refuses that the scan takes), and where it accepts, "data" is an
 * object of exactly those members, each parsing from its reported value, compacted or not.
 */
static inline const char *bundle_agree(const char *text, size_t len)
{
    wire_bundle_fields_t f;
    json_t *v, *data;
    const char *why = NULL;
    int tamed = 0;

    if (!wire_json_scan_bundle(text, len, &f))
        return NULL;
    if (f.count > WIRE_BUNDLE_MAX_ENTRIES)
        return "more entries than WIRE_BUNDLE_MAX_ENTRIES";
    for (size_t i = 0; i != f.count; ++i)
        for (size_t j = 0; j != i; ++j)
            if (f.entries[i].key_len == f.entries[j].key_len &&
                memcmp(f.entries[i].key, f.entries[j].key, f.entries[i].key_len) == 0)
                return "two entries with the same key";
    if ((v = wire_json_parse(text, len)) == NULL) {
        char *tame = malloc(len + 1);
        v = wire_json_parse(tame, bundle_agree_tame(text, len, tame));
        free(tame);
        if (v == NULL)
            return "the scan called simple what wire_json_parse refuses for more than a number or a NUL in a key";
        tamed = 1;
    }
    data = json_object_get(v, "data");
    if (!json_is_object(data) || json_object_size(data) != f.count) {
        why = "the parsed data is not an object of the scan's entries";
        goto Exit;
    }
    for (size_t i = 0; why == NULL && i != f.count; ++i) {
        char *key = malloc(f.entries[i].key_len + 1);
        memcpy(key, f.entries[i].key, f.entries[i].key_len);
        key[f.entries[i].key_len] = '\0';
        json_t *member = json_object_get(data, key);
        free(key);
        /* tamed, the members are not the kernel's values any more: only the structure is compared */
        why = member == NULL ? "an entry's key is not in the parsed data"
                             : bundle_agree_entry(text, len, &f.entries[i], tamed ? NULL : member);
    }
Exit:
    json_decref(v);
    return why;
}

#endif
