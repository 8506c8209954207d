/* tests/wire/json_agree.h: wire_json_parse against jansson, the verdict shared by test_json_in.c and tests/fuzz. */
#ifndef KGATE_TESTS_JSON_AGREE_H
#define KGATE_TESTS_JSON_AGREE_H

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "wire/json_in.h"

/* jansson as wire/json_in.h compares with it. */
static inline json_t *json_agree_jansson(const char *text, size_t len)
{
    return json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

/* Identical values: json_equal, and reals bit for bit (json_equal counts -0.0 equal to 0.0). */
static inline int json_agree_identical(json_t *a, json_t *b)
{
    const char *key;
    json_t *v;

    if (!json_equal(a, b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_REAL: {
        double x = json_real_value(a), y = json_real_value(b);
        return memcmp(&x, &y, sizeof(x)) == 0;
    }
    case JSON_ARRAY:
        for (size_t i = 0; i != json_array_size(a); ++i)
            if (!json_agree_identical(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    case JSON_OBJECT:
        json_object_foreach(a, key, v)
        {
            if (!json_agree_identical(v, json_object_get(b, key)))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

/* Levels of arrays and objects: 0 for a scalar, 1 for [] or {}. */
static inline size_t json_agree_depth(json_t *v)
{
    const char *key;
    json_t *item;
    size_t deepest = 0, d;

    if (json_is_array(v)) {
        for (size_t i = 0; i != json_array_size(v); ++i)
            if ((d = json_agree_depth(json_array_get(v, i))) > deepest)
                deepest = d;
    } else if (json_is_object(v)) {
        json_object_foreach(v, key, item)
        {
            if ((d = json_agree_depth(item)) > deepest)
                deepest = d;
        }
    } else {
        return 0;
    }
    return deepest + 1;
}

/*
 * The documented quirk (wire/json_in.h): jansson reads one byte past a number or a bare word and
 * loses it when it is a NUL, which is the same as reading a space there. Such a NUL follows a
 * letter or a digit outside a string. Copies `len` bytes of `text` into `out` with those NULs made
 * spaces, and returns whether another NUL remains (one jansson sees, and so refuses).
 */
static inline int json_agree_lose_nuls(const char *text, size_t len, char *out)
{
    int in_string = 0, other = 0;

    for (size_t i = 0; i != len; ++i) {
        char c = text[i];
        out[i] = c;
        if (in_string) {
            if (c == '\\' && i + 1 != len) {
                ++i; /* an escaped byte never ends the string */
                out[i] = text[i];
                other |= text[i] == '\0';
            } else if (c == '"') {
                in_string = 0;
            } else {
                other |= c == '\0';
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '\0') {
            if (i != 0 && isalnum((unsigned char)text[i - 1]))
                out[i] = ' ';
            else
                other = 1;
        }
    }
    return other;
}

/* jansson's value (or NULL) against wire_json_parse's: NULL when they agree, else what differs. */
static inline const char *json_agree_values(json_t *want, json_t *got)
{
    if (want == NULL)
        return got == NULL ? NULL : "wire_json_parse accepts what jansson refuses";
    if (got == NULL)
        /* the other documented difference: wire_json_parse nests less deeply */
        return json_agree_depth(want) > WIRE_JSON_MAX_DEPTH ? NULL : "wire_json_parse refuses what jansson accepts";
    return json_agree_identical(want, got) ? NULL : "the values differ";
}

/*
 * NULL when both parsers agree on the `len` bytes at `text`, else what differs. Without a raw NUL
 * byte, both refuse or both accept identical values (wire_json_parse may refuse what is nested
 * deeper than WIRE_JSON_MAX_DEPTH). With one, wire_json_parse refuses, and jansson accepts exactly
 * when the text with its lost NULs read as spaces has no other NUL and is valid, as that text.
 */
static inline const char *json_agree(const char *text, size_t len)
{
    char *exact = malloc(len != 0 ? len : 1); /* exact size: ASan catches a read past the end */
    json_t *want, *got;
    const char *why;

    memcpy(exact, text, len);
    want = json_agree_jansson(exact, len);
    got = wire_json_parse(exact, len);
    if (memchr(exact, '\0', len) == NULL) {
        why = json_agree_values(want, got);
    } else if (got != NULL) {
        why = "wire_json_parse accepts a raw NUL";
    } else {
        char *spaced = malloc(len);
        if (json_agree_lose_nuls(exact, len, spaced)) {
            why = want != NULL ? "jansson accepts a NUL it does not lose" : NULL;
        } else {
            json_t *as = wire_json_parse(spaced, len);
            why = json_agree_values(want, as);
            json_decref(as);
        }
        free(spaced);
    }
    json_decref(want);
    json_decref(got);
    free(exact);
    return why;
}

#endif
