/* tests/fuzz/fuzz.h: what every libFuzzer target of tests/fuzz shares. */
#ifndef KGATE_TESTS_FUZZ_H
#define KGATE_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* libFuzzer's entry points (it ships no header for them): each target defines both. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property that must hold: otherwise say which and abort, and libFuzzer keeps the input. */
#define FUZZ_CHECK(cond, ...)                                                                                                      \
    do {                                                                                                                           \
        if (!(cond)) {                                                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s: ", __FILE__, __LINE__, #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                                                                          \
            fputc('\n', stderr);                                                                                                   \
            abort();                                                                                                               \
        }                                                                                                                          \
    } while (0)

/* An exact-size heap copy (never NULL), so that AddressSanitizer catches a read past `len`. */
static inline char *fuzz_copy(const void *base, size_t len)
{
    char *p = malloc(len != 0 ? len : 1);

    if (p == NULL)
        abort();
    if (len != 0)
        memcpy(p, base, len);
    return p;
}

/* Splits `len` bytes at `*data` at the first '\n': the line (without it) in `*line`, the rest left in `*data`. */
static inline void fuzz_take_line(const char **data, size_t *len, const char **line, size_t *line_len)
{
    const char *nl = memchr(*data, '\n', *len);
    size_t n = nl != NULL ? (size_t)(nl - *data) : *len;

    *line = *data;
    *line_len = n;
    *data += nl != NULL ? n + 1 : n;
    *len -= nl != NULL ? n + 1 : n;
}

#endif
