/* The route table matcher: literal segments, `{}` parameters and a rest-of-path tail, 404 versus 405. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/router.h"

/* The GW_ROUTE_REST tail: the end of the path, or '/' and whatever follows (its parameter). */
static int rest_matches(const char *s, const char *s_end, gw_route_params_t *params)
{
    if (params->size == GW_ROUTE_MAX_PARAMS || (s != s_end && *s != '/'))
        return 0;
    params->values[params->size++] = s == s_end ? h2o_iovec_init(s, 0) : h2o_iovec_init(s + 1, (size_t)(s_end - s - 1));
    return 1;
}

/* Matches `path` against `pattern` segment by segment; fills params on success. */
static int path_matches(const char *pattern, h2o_iovec_t path, gw_route_params_t *params)
{
    const char *p = pattern, *s = path.base, *s_end = path.base + path.len;

    params->size = 0;
    while (*p != '\0') {
        if (strcmp(p, GW_ROUTE_REST) == 0)
            return rest_matches(s, s_end, params);
        if (s == s_end)
            return 0;
        if (p[0] == '{' && p[1] == '}') {
            const char *seg_end = memchr(s, '/', (size_t)(s_end - s));
            if (seg_end == NULL)
                seg_end = s_end;
            if (seg_end == s || params->size == GW_ROUTE_MAX_PARAMS)
                return 0;
            params->values[params->size++] = h2o_iovec_init(s, (size_t)(seg_end - s));
            s = seg_end;
            p += 2;
        } else {
            if (*p != *s)
                return 0;
            ++p;
            ++s;
        }
    }
    return s == s_end;
}

static int method_matches(const char *route_method, h2o_iovec_t method)
{
    return strcmp(route_method, GW_ROUTE_ANY_METHOD) == 0 || h2o_memis(method.base, method.len, route_method, strlen(route_method));
}

gw_route_result_t gw_route_match(const gw_route_t *routes, size_t n, h2o_iovec_t method, h2o_iovec_t path, const gw_route_t **route,
                                 gw_route_params_t *params)
{
    gw_route_result_t result = GW_ROUTE_NO_PATH;
    gw_route_params_t scratch;
    size_t i;

    for (i = 0; i != n; ++i) {
        if (!path_matches(routes[i].pattern, path, &scratch))
            continue;
        if (method_matches(routes[i].method, method)) {
            *route = &routes[i];
            *params = scratch;
            return GW_ROUTE_FOUND;
        }
        result = GW_ROUTE_NO_METHOD;
    }
    return result;
}

void gw_route_table_add(gw_route_table_t *table, const gw_route_t *route)
{
    if (table->size == table->capacity) {
        table->capacity = table->capacity != 0 ? table->capacity * 2 : 32;
        table->entries = wire_realloc(table->entries, table->capacity * sizeof(table->entries[0]));
    }
    table->entries[table->size++] = *route;
}

void gw_route_table_dispose(gw_route_table_t *table)
{
    free(table->entries);
    table->entries = NULL;
    table->size = table->capacity = 0;
}
