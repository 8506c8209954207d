/* tests/gateway/test_idmap.c: the id map finds every object by its id through growth and removals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include "core/idmap.h"
#include "wire/ids.h"
#include "gw_test.h"

TestSuite(idmap, .init = gw_test_init);

typedef struct st_object_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_idmap_entry_t entry;
    int alive;
} object_t;

#define N 5000

Test(idmap, finds_every_id_through_growth_and_removals)
{
    static object_t objs[N];
    gw_idmap_t map;

    gw_idmap_init(&map);
    cr_assert_null(gw_idmap_find(&map, "anything"), "an empty map finds nothing");
    for (size_t i = 0; i != N; ++i) {
        wire_uuid4(objs[i].id);
        gw_idmap_insert(&map, &objs[i].entry, objs[i].id);
        objs[i].alive = 1;
    }
    cr_assert_eq(map.size, (size_t)N);
    cr_assert_geq(map.num_buckets, (size_t)N, "the table grew with its load");
    for (size_t i = 0; i != N; ++i)
        cr_assert_eq(gw_idmap_find(&map, objs[i].id), &objs[i].entry, "object %zu not found", i);
    for (size_t i = 0; i < N; i += 2) {
        gw_idmap_remove(&map, &objs[i].entry);
        objs[i].alive = 0;
    }
    cr_assert_eq(map.size, (size_t)N / 2);
    for (size_t i = 0; i != N; ++i) {
        gw_idmap_entry_t *e = gw_idmap_find(&map, objs[i].id);
        cr_assert_eq(e, objs[i].alive ? &objs[i].entry : NULL, "object %zu (%s)", i, objs[i].alive ? "kept" : "removed");
    }
    /* ids that were never inserted, and odd ones */
    cr_assert_null(gw_idmap_find(&map, ""));
    cr_assert_null(gw_idmap_find(&map, "00000000-0000-4000-8000-000000000000"));
    char prefix[WIRE_UUID_STRLEN + 1];
    snprintf(prefix, sizeof(prefix), "%.*s", WIRE_UUID_STRLEN - 1, objs[1].id);
    cr_assert_null(gw_idmap_find(&map, prefix), "a prefix of an id is not the id");
    gw_idmap_dispose(&map);
}
