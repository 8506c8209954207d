/* tests/wire/test_ids.c: UUIDv4, random hex keys and ISO-8601 dates. */
#include <ctype.h>
#include <stdlib.h>
#include <criterion/criterion.h>
#include "wire/ids.h"
#include "wire_test.h"

TestSuite(ids, .init = wire_test_init);

static int is_lower_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static void assert_uuid4(const char *u)
{
    cr_assert_eq(strlen(u), WIRE_UUID_STRLEN, "%s", u);
    for (size_t i = 0; i != WIRE_UUID_STRLEN; ++i) {
        if (i == 8 || i == 13 || i == 18 || i == 23)
            cr_assert_eq(u[i], '-', "%s", u);
        else
            cr_assert(is_lower_hex(u[i]), "%s", u);
    }
    cr_assert_eq(u[14], '4', "version nibble: %s", u);
    cr_assert(strchr("89ab", u[19]) != NULL, "variant nibble: %s", u);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

Test(ids, uuid4_format_and_uniqueness)
{
    enum { N = 1000 };
    static char ids[N][WIRE_UUID_STRLEN + 1];
    int seen_variant[4] = {0};

    for (size_t i = 0; i != N; ++i) {
        wire_uuid4(ids[i]);
        assert_uuid4(ids[i]);
        seen_variant[strchr("89ab", ids[i][19]) - "89ab"] = 1;
    }
    /* All four variant nibbles occur: the other two bits really are random. */
    cr_assert(seen_variant[0] && seen_variant[1] && seen_variant[2] && seen_variant[3]);
    qsort(ids, N, sizeof(ids[0]), cmp_str);
    for (size_t i = 1; i != N; ++i)
        cr_assert_str_neq(ids[i - 1], ids[i]);
}

Test(ids, random_hex_length_charset_and_variety)
{
    char a[2 * 100 + 1], b[2 * 100 + 1];

    memset(a, 'X', sizeof(a));
    wire_random_hex(a, 100); /* more than one internal chunk */
    wire_random_hex(b, 100);
    cr_assert_eq(strlen(a), 200);
    for (size_t i = 0; i != 200; ++i)
        cr_assert(is_lower_hex(a[i]));
    cr_assert_str_neq(a, b);
    wire_random_hex(a, 0);
    cr_assert_str_eq(a, "");
    wire_random_hex(a, 1);
    cr_assert_eq(strlen(a), 2);
}

Test(ids, iso8601_known_instants)
{
    char out[WIRE_DATE_STRLEN + 1];
    struct timespec ts = {1700000000, 123456789};

    wire_iso8601_format(&ts, out);
    cr_assert_str_eq(out, "2023-11-14T22:13:20.123456Z");
    ts = (struct timespec){0, 999};
    wire_iso8601_format(&ts, out);
    cr_assert_str_eq(out, "1970-01-01T00:00:00.000000Z");
    ts = (struct timespec){951782400 + 86399, 999999999}; /* 2000-02-29, a leap day */
    wire_iso8601_format(&ts, out);
    cr_assert_str_eq(out, "2000-02-29T23:59:59.999999Z");
}

Test(ids, iso8601_now_shape)
{
    char out[WIRE_DATE_STRLEN + 1];
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";

    wire_iso8601_now(out);
    cr_assert_eq(strlen(out), WIRE_DATE_STRLEN);
    cr_assert_eq(sizeof(shape) - 1, WIRE_DATE_STRLEN);
    for (size_t i = 0; i != WIRE_DATE_STRLEN; ++i) {
        if (shape[i] == 'd')
            cr_assert(isdigit((unsigned char)out[i]), "%s", out);
        else
            cr_assert_eq(out[i], shape[i], "%s", out);
    }
    cr_assert(strncmp(out, "20", 2) == 0, "%s", out);
}
