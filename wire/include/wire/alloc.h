/* wire/alloc.h: allocation that never returns NULL (out of memory aborts, as in h2o). */
#ifndef WIRE_ALLOC_H
#define WIRE_ALLOC_H

#include <stddef.h>

/** malloc that aborts on exhaustion. */
void *wire_malloc(size_t size);
/** calloc that aborts on exhaustion (and on size overflow). */
void *wire_calloc(size_t n, size_t size);
/** realloc that aborts on exhaustion. */
void *wire_realloc(void *p, size_t size);
/** strdup that aborts on exhaustion; wire_strdup(NULL) returns NULL. */
char *wire_strdup(const char *s);
/** Copies `len` bytes of `s` into a new NUL-terminated string. */
char *wire_strndup(const char *s, size_t len);

/**
 * Process-wide initialisation: libsodium's sodium_init() and routing jansson through wire_malloc,
 * so that a NULL from jansson always means bad input, never exhaustion. Call once from main()
 * (and from each test binary) before anything else in kgate. Idempotent.
 */
void wire_global_init(void);

#endif
