/* kernelmgr/src/reqtable.c: a kernel's request table, msg_id -> request, to route messages by their parent's msg_id. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "kernel_private.h"

/* FNV-1a: msg_ids are uuids, evenly spread already; the hash only has to be cheap. */
static size_t hash_id(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s != '\0'; ++s)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

void kmgr_reqtable_insert(kmgr_reqtable_t *t, kmgr_request_t *req)
{
    if (t->size + 1 > t->nbuckets) {
        size_t n = t->nbuckets != 0 ? t->nbuckets * 2 : 16;
        kmgr_request_t **b = wire_calloc(n, sizeof(*b));
        for (size_t i = 0; i != t->nbuckets; ++i) {
            while (t->buckets[i] != NULL) {
                kmgr_request_t *r = t->buckets[i];
                t->buckets[i] = r->hash_next;
                r->hash_next = b[hash_id(r->msg_id) & (n - 1)];
                b[hash_id(r->msg_id) & (n - 1)] = r;
            }
        }
        free(t->buckets);
        t->buckets = b;
        t->nbuckets = n;
    }
    size_t i = hash_id(req->msg_id) & (t->nbuckets - 1);
    req->hash_next = t->buckets[i];
    t->buckets[i] = req;
    req->hashed = 1;
    ++t->size;
}

kmgr_request_t *kmgr_reqtable_find(const kmgr_reqtable_t *t, const char *msg_id)
{
    if (t->nbuckets == 0 || msg_id[0] == '\0')
        return NULL;
    for (kmgr_request_t *r = t->buckets[hash_id(msg_id) & (t->nbuckets - 1)]; r != NULL; r = r->hash_next)
        if (strcmp(r->msg_id, msg_id) == 0)
            return r;
    return NULL;
}

void kmgr_reqtable_remove(kmgr_reqtable_t *t, kmgr_request_t *req)
{
    if (!req->hashed)
        return;
    for (kmgr_request_t **p = &t->buckets[hash_id(req->msg_id) & (t->nbuckets - 1)]; *p != NULL; p = &(*p)->hash_next) {
        if (*p == req) {
            *p = req->hash_next;
            break;
        }
    }
    req->hashed = 0;
    --t->size;
}

void kmgr_reqtable_dispose(kmgr_reqtable_t *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->size = 0;
}
