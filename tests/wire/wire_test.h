/* tests/wire/wire_test.h: small helpers shared by the wire unit tests. */
#ifndef KGATE_TESTS_WIRE_TEST_H
#define KGATE_TESTS_WIRE_TEST_H

#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/frames.h"

/* Suite .init for every wire test: the workers are separate processes, each needs it. */
static inline void wire_test_init(void)
{
    wire_global_init();
}

/* A frame view of a NUL-terminated string. */
static inline wire_frame_t wire_test_str(const char *s)
{
    return (wire_frame_t){(void *)s, strlen(s)};
}

/* An exact-size heap copy, so that AddressSanitizer catches any read past `len`. */
static inline void *wire_test_exact_copy(const void *base, size_t len)
{
    void *p = malloc(len != 0 ? len : 1);
    if (len != 0)
        memcpy(p, base, len);
    return p;
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* Nonzero if LeakSanitizer finds unreachable memory now (it also prints where it came from). */
static inline int wire_test_leaks(void)
{
    return __lsan_do_recoverable_leak_check();
}
#else
static inline int wire_test_leaks(void)
{
    return 0;
}
#endif

static inline int wire_test_frame_eq(const wire_frame_t *f, const void *base, size_t len)
{
    return f->len == len && (len == 0 || memcmp(f->base, base, len) == 0);
}

#endif
