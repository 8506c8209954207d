/* wire/src/buf.c: bytes shared by reference (wire/buf.h). */
#include <stdio.h>
#include <stdlib.h>
#include "wire/alloc.h"
#include "wire/buf.h"

wire_buf_t *wire_buf_new(size_t cap)
{
    wire_buf_t *b = wire_malloc(offsetof(wire_buf_t, data) + cap);

    b->refcnt = 1;
    b->cap = cap;
    return b;
}

wire_buf_t *wire_buf_ref(wire_buf_t *b)
{
    ++b->refcnt;
    return b;
}

void wire_buf_unref(wire_buf_t *b)
{
    if (b != NULL && --b->refcnt == 0)
        free(b);
}

wire_buf_t *wire_buf_grow(wire_buf_t *b, size_t cap)
{
    if (b->refcnt != 1) {
        /* another holder's view would move under it: a broken caller, not an input */
        fprintf(stderr, "kgate: wire_buf_grow on a shared buffer\n");
        abort();
    }
    b = wire_realloc(b, offsetof(wire_buf_t, data) + cap);
    b->cap = cap;
    return b;
}
