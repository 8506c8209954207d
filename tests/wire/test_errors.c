/* tests/wire/test_errors.c: the wire error table and wire_strerror. */
#include <criterion/criterion.h>
#include "wire/errors.h"

TestSuite(errors);

Test(errors, every_code_is_negative_distinct_and_described)
{
    static const int codes[] = {
#define XX(name, msg) WIRE_E##name,
        WIRE_ERRNO_MAP(XX)
#undef XX
    };
    static const char *const msgs[] = {
#define XX(name, msg) msg,
        WIRE_ERRNO_MAP(XX)
#undef XX
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);

    cr_assert_gt(n, 0);
    for (size_t i = 0; i != n; ++i) {
        cr_assert_lt(codes[i], 0);
        cr_assert_str_eq(wire_strerror(codes[i]), msgs[i]);
        for (size_t j = 0; j != i; ++j)
            cr_assert_neq(codes[i], codes[j]);
    }
}

Test(errors, unknown_and_success)
{
    cr_assert_str_eq(wire_strerror(0), "success");
    cr_assert_str_eq(wire_strerror(-1), "unknown error");
    cr_assert_str_eq(wire_strerror(12345), "unknown error");
    cr_assert_str_eq(wire_strerror(WIRE_EBADSIG), "message signature does not match");
}
