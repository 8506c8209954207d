/* tests/gateway/gw_test.h: small helpers shared by the gateway unit tests. */
#ifndef KGATE_TESTS_GW_TEST_H
#define KGATE_TESTS_GW_TEST_H

#include <stdlib.h>
#include <string.h>
#include <h2o.h>
#include "wire/alloc.h"

/* Suite .init for every gateway unit test: each test runs in its own worker process. */
static inline void gw_test_init(void)
{
    wire_global_init();
}

/* An exact-size heap copy, so that AddressSanitizer catches any read past `len`. */
static inline char *gw_test_exact_copy(const void *base, size_t len)
{
    char *p = malloc(len != 0 ? len : 1);
    if (len != 0)
        memcpy(p, base, len);
    return p;
}

/* A request with only what the pure helpers read: a pool, headers, a path and its query offset. */
typedef struct st_gw_test_req_t {
    h2o_req_t req;
    char *path; /* exact-size copy, owned */
} gw_test_req_t;

static inline void gw_test_req_init(gw_test_req_t *t, const char *path)
{
    const char *q;

    memset(t, 0, sizeof(*t));
    h2o_mem_init_pool(&t->req.pool);
    t->path = gw_test_exact_copy(path, strlen(path));
    t->req.path = h2o_iovec_init(t->path, strlen(path));
    q = memchr(t->path, '?', strlen(path));
    t->req.query_at = q != NULL ? (size_t)(q - t->path) : SIZE_MAX;
}

/* Adds a header as h2o's parsers do: the name lower-cased (and interned as a token when it is one). */
static inline void gw_test_req_add_header(gw_test_req_t *t, const char *name, const char *value)
{
    size_t len = strlen(name);
    char *lower = h2o_mem_alloc_pool(&t->req.pool, len + 1);

    memcpy(lower, name, len + 1);
    h2o_strtolower(lower, len);
    h2o_add_header_by_str(&t->req.pool, &t->req.headers, lower, len, 1, NULL, value, strlen(value));
}

static inline void gw_test_req_dispose(gw_test_req_t *t)
{
    h2o_mem_clear_pool(&t->req.pool);
    free(t->path);
}

#endif
