/* The id map: FNV-1a over the key, chained buckets, doubling at a load factor of one. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/idmap.h"

#define INITIAL_BUCKETS 64

static uint64_t hash_key(const char *key)
{
    uint64_t h = 14695981039346656037ull;
    for (; *key != '\0'; ++key)
        h = (h ^ (unsigned char)*key) * 1099511628211ull;
    return h;
}

void gw_idmap_init(gw_idmap_t *map)
{
    memset(map, 0, sizeof(*map));
}

void gw_idmap_dispose(gw_idmap_t *map)
{
    free(map->buckets);
    gw_idmap_init(map);
}

static void grow(gw_idmap_t *map)
{
    size_t n = map->num_buckets != 0 ? map->num_buckets * 2 : INITIAL_BUCKETS;
    gw_idmap_entry_t **buckets = wire_calloc(n, sizeof(*buckets));

    for (size_t i = 0; i != map->num_buckets; ++i) {
        gw_idmap_entry_t *e = map->buckets[i], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            e->next = buckets[e->hash & (n - 1)];
            buckets[e->hash & (n - 1)] = e;
        }
    }
    free(map->buckets);
    map->buckets = buckets;
    map->num_buckets = n;
}

void gw_idmap_insert(gw_idmap_t *map, gw_idmap_entry_t *entry, const char *key)
{
    gw_idmap_entry_t **bucket;

    if (map->size >= map->num_buckets)
        grow(map);
    entry->key = key;
    entry->hash = hash_key(key);
    bucket = &map->buckets[entry->hash & (map->num_buckets - 1)];
    entry->next = *bucket;
    *bucket = entry;
    ++map->size;
}

gw_idmap_entry_t *gw_idmap_find(const gw_idmap_t *map, const char *key)
{
    uint64_t h;

    if (map->num_buckets == 0)
        return NULL;
    h = hash_key(key);
    for (gw_idmap_entry_t *e = map->buckets[h & (map->num_buckets - 1)]; e != NULL; e = e->next)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

void gw_idmap_remove(gw_idmap_t *map, gw_idmap_entry_t *entry)
{
    gw_idmap_entry_t **p = &map->buckets[entry->hash & (map->num_buckets - 1)];

    while (*p != entry)
        p = &(*p)->next;
    *p = entry->next;
    entry->next = NULL;
    --map->size;
}
