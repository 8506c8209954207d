/* tests/kernelmgr/test_bytebuf.c: the byte queue never writes, moves or grows storage another holder keeps (a message's view). */
#include <criterion/criterion.h>
#include <string.h>
#include "bytebuf.h"

/* `n` bytes of a pattern that says where each byte was */
static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i != n; ++i)
        p[i] = (uint8_t)(seed + i * 7);
}

/* A holder keeps the storage with `kept` pending bytes and consumed `consumed` of them; `op` then acts on the queue. */
static void check_kept(size_t kept, size_t consumed, void (*op)(kmgr_bytebuf_t *b))
{
    kmgr_bytebuf_t b = {0};
    uint8_t bytes[3000], copy[3000];

    pattern(bytes, kept, 11);
    kmgr_bytebuf_append(&b, bytes, kept);
    wire_buf_t *held = wire_buf_ref(b.buf);
    memcpy(copy, held->data, kept);
    b.start += consumed;
    op(&b);
    cr_assert(b.buf != held, "the queue still writes the storage a holder keeps");
    cr_assert(memcmp(held->data, copy, kept) == 0, "bytes a holder keeps changed");
    cr_assert_eq(held->refcnt, 1, "the queue kept its reference to storage it left");
    wire_buf_unref(held);
    kmgr_bytebuf_free(&b);
}

static void op_append_small(kmgr_bytebuf_t *b)
{
    size_t size = kmgr_bytebuf_size(b);
    kmgr_bytebuf_append(b, "ab", 2);
    cr_assert_eq(kmgr_bytebuf_size(b), size + 2, "the pending bytes moved with the queue");
}

static void op_append_big(kmgr_bytebuf_t *b)
{
    static uint8_t big[100000];
    size_t size = kmgr_bytebuf_size(b);
    kmgr_bytebuf_append(b, big, sizeof(big));
    cr_assert_eq(kmgr_bytebuf_size(b), size + sizeof(big));
}

static void op_prepend(kmgr_bytebuf_t *b)
{
    kmgr_bytebuf_prepend(b, "greeting", 8);
    cr_assert(memcmp(b->data + b->start, "greeting", 8) == 0);
}

static void op_clear_then_append(kmgr_bytebuf_t *b)
{
    kmgr_bytebuf_clear(b);
    cr_assert_eq(kmgr_bytebuf_size(b), 0);
    kmgr_bytebuf_append(b, "x", 1);
}

Test(bytebuf, a_kept_storage_is_never_written_again)
{
    check_kept(3000, 2500, op_append_small);
    check_kept(3000, 0, op_append_small);
    check_kept(3000, 1000, op_append_big);
    check_kept(3000, 2990, op_prepend);
    check_kept(3000, 3000, op_clear_then_append);
}

Test(bytebuf, the_pending_bytes_follow_the_queue_to_new_storage)
{
    kmgr_bytebuf_t b = {0};
    uint8_t bytes[40000];

    pattern(bytes, sizeof(bytes), 3);
    kmgr_bytebuf_append(&b, bytes, sizeof(bytes));
    wire_buf_t *held = wire_buf_ref(b.buf);
    b.start += 1000;
    kmgr_bytebuf_reserve(&b, 1);
    cr_assert_eq(kmgr_bytebuf_size(&b), sizeof(bytes) - 1000);
    cr_assert(memcmp(b.data + b.start, bytes + 1000, sizeof(bytes) - 1000) == 0);
    cr_assert_geq(b.cap - b.end, 1);
    wire_buf_unref(held);
    /* the sole holder again: the queue grows and moves its own storage as before */
    kmgr_bytebuf_reserve(&b, 1 << 20);
    cr_assert(memcmp(b.data + b.start, bytes + 1000, sizeof(bytes) - 1000) == 0);
    kmgr_bytebuf_free(&b);
}
