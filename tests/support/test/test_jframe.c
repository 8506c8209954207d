/* tests/support/test/test_jframe.c: the v1 kernel WebSocket framing the tests and the bench write, against bytes worked out
 * by hand from Jupyter Server's description of it. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "support/jframe.h"

Test(jframe, offsets_are_little_endian_and_count_the_parts_plus_one)
{
    static const uint8_t le[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const char *parts[5] = {"shell", "{\"a\":1}", "{}", "{}", "{}"};
    /* 7 offsets (56 bytes): 6, then where the channel starts, then where each of the five parts ends */
    static const uint64_t table[7] = {6, 56, 61, 68, 70, 72, 74};
    size_t len;
    uint8_t *frame = ts_jframe_v1(parts, 5, &len);

    cr_assert_eq(ts_jframe_le64(le), 0x0807060504030201ull);
    cr_assert_eq(len, 74);
    cr_assert_eq(frame[0], 6, "the count's low byte comes first");
    for (int i = 0; i != 7; ++i)
        cr_expect_eq(ts_jframe_le64(frame + 8 * i), table[i], "offset %d: %llu", i,
                     (unsigned long long)ts_jframe_le64(frame + 8 * i));
    cr_assert_eq(memcmp(frame + 56, "shell{\"a\":1}{}{}{}", 18), 0);
    free(frame);
}
