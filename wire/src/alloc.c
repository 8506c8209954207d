/* wire/src/alloc.c: allocation that aborts on exhaustion, and process-wide initialisation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <sodium.h>
#include "wire/alloc.h"

static void out_of_memory(size_t size)
{
    fprintf(stderr, "kgate: out of memory (allocating %zu bytes)\n", size);
    abort();
}

void *wire_malloc(size_t size)
{
    /* malloc(0) may return NULL, which must not read as exhaustion. */
    void *p = malloc(size != 0 ? size : 1);
    if (p == NULL)
        out_of_memory(size);
    return p;
}

void *wire_calloc(size_t n, size_t size)
{
    void *p = calloc(n != 0 ? n : 1, size != 0 ? size : 1);
    if (p == NULL)
        out_of_memory(n * size);
    return p;
}

void *wire_realloc(void *p, size_t size)
{
    void *np = realloc(p, size != 0 ? size : 1);
    if (np == NULL)
        out_of_memory(size);
    return np;
}

char *wire_strdup(const char *s)
{
    if (s == NULL)
        return NULL;
    return wire_strndup(s, strlen(s));
}

char *wire_strndup(const char *s, size_t len)
{
    char *p = wire_malloc(len + 1);
    if (len != 0)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void wire_global_init(void)
{
    /* Both calls are idempotent (sodium_init returns 1 once initialised), so no flag is needed. */
    if (sodium_init() < 0) {
        fprintf(stderr, "kgate: sodium_init failed\n");
        abort();
    }
    json_set_alloc_funcs(wire_malloc, free);
}
