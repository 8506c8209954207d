/* tests/gateway/test_ring.c: the in-memory output ring of PTY sessions: growth, wrap-around, reads from any offset. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "procs/ring.h"
#include "gw_test.h"

TestSuite(ring, .init = gw_test_init);

/* Reads from `since` and checks the bytes against `all` (every byte ever appended). */
static void check_read(const gw_ring_t *ring, const unsigned char *all, uint64_t since)
{
    uint64_t oldest = ring->total > ring->cap ? ring->total - ring->cap : 0, start, expect_start;
    h2o_iovec_t segs[2];
    size_t len = gw_ring_read(ring, since, &start, segs);

    expect_start = since < oldest ? oldest : since > ring->total ? ring->total : since;
    cr_assert_eq(start, expect_start, "since %llu: start %llu, expected %llu", (unsigned long long)since, (unsigned long long)start,
                 (unsigned long long)expect_start);
    cr_assert_eq(len, ring->total - start);
    cr_assert_eq(segs[0].len + segs[1].len, len);
    cr_assert(segs[0].len == 0 || memcmp(segs[0].base, all + start, segs[0].len) == 0, "since %llu: first segment differs",
              (unsigned long long)since);
    cr_assert(segs[1].len == 0 || memcmp(segs[1].base, all + start + segs[0].len, segs[1].len) == 0, "second segment differs");
}

Test(ring, an_empty_ring_reads_nothing_at_its_end)
{
    gw_ring_t ring;
    h2o_iovec_t segs[2];
    uint64_t start = 99;

    gw_ring_init(&ring, 16);
    cr_assert_eq(gw_ring_read(&ring, 0, &start, segs), 0);
    cr_assert_eq(start, 0);
    cr_assert_eq(gw_ring_read(&ring, 5, &start, segs), 0);
    cr_assert_eq(start, 0);
    gw_ring_dispose(&ring);
}

Test(ring, random_appends_keep_the_newest_bytes_at_their_offsets)
{
    static const size_t caps[] = {1, 7, 4096, 10000, 65536};
    unsigned char *all = malloc(1 << 20);
    size_t total;

    srand(12345);
    for (size_t i = 0; i != sizeof(caps) / sizeof(caps[0]); ++i) {
        gw_ring_t ring;
        gw_ring_init(&ring, caps[i]);
        total = 0;
        while (total < (1 << 19)) {
            /* mostly small writes, sometimes one larger than the whole ring */
            size_t len = rand() % 8 == 0 ? (size_t)(rand() % (3 * (int)caps[i] + 1)) : (size_t)(rand() % 300);
            for (size_t j = 0; j != len; ++j)
                all[total + j] = (unsigned char)rand();
            gw_ring_append(&ring, all + total, len);
            total += len;
            cr_assert_eq(ring.total, total);
            cr_assert_leq(ring.size, ring.cap, "the ring grew past its bound");
            check_read(&ring, all, 0);
            check_read(&ring, all, total / 2);
            check_read(&ring, all, total > caps[i] ? total - caps[i] / 2 : 0);
            check_read(&ring, all, total + 5);
        }
        gw_ring_dispose(&ring);
    }
    free(all);
}

Test(ring, memory_grows_with_the_output)
{
    gw_ring_t ring;
    char byte = 'x';

    gw_ring_init(&ring, 1 << 20);
    gw_ring_append(&ring, &byte, 1);
    cr_assert_leq(ring.size, 4096, "one byte took %zu bytes of ring", ring.size);
    gw_ring_dispose(&ring);
}
