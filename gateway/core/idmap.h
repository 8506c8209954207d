/* core/idmap.h: objects found by their id string: an intrusive hash table (runs, contexts, commands). */
#ifndef GW_IDMAP_H
#define GW_IDMAP_H

#include <stddef.h>
#include <stdint.h>

/** Embedded in each object the map finds; the map never owns the objects. */
typedef struct st_gw_idmap_entry_t {
    struct st_gw_idmap_entry_t *next; /* in its bucket */
    const char *key;                  /* borrowed: the object's own id, alive while it is in the map */
    uint64_t hash;
} gw_idmap_entry_t;

/**
 * A map from ids to entries. Lookups and removals take O(1) on average; the table doubles as it
 * fills, and its memory is the bucket array alone. Keys of inserted entries are unique (the caller's
 * ids are); lookups may be any string, including a hostile one.
 */
typedef struct st_gw_idmap_t {
    gw_idmap_entry_t **buckets;
    size_t num_buckets; /* a power of two, 0 before the first insert */
    size_t size;
} gw_idmap_t;

/** An empty map (no allocation until the first insert). */
void gw_idmap_init(gw_idmap_t *map);
/** Frees the bucket array; the entries are the caller's. */
void gw_idmap_dispose(gw_idmap_t *map);
/** Adds `entry` under `key` (borrowed: it must stay valid while the entry is in the map). */
void gw_idmap_insert(gw_idmap_t *map, gw_idmap_entry_t *entry, const char *key);
/** The entry with `key`, or NULL. */
gw_idmap_entry_t *gw_idmap_find(const gw_idmap_t *map, const char *key);
/** Removes `entry`, which must be in the map. */
void gw_idmap_remove(gw_idmap_t *map, gw_idmap_entry_t *entry);

#endif
