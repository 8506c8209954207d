/* kernelmgr/src/util_private.h: helpers private to kernelmgr: an intrusive list (the clock, path joining and closing
 * descriptors are the system layer's, ksys/util.h). */
#ifndef KMGR_UTIL_PRIVATE_H
#define KMGR_UTIL_PRIVATE_H

#include <stddef.h>
#include "ksys/util.h"

/* An intrusive doubly-linked list (h2o_linklist_t style); a list head is a link to itself. */
typedef struct st_kmgr_link_t {
    struct st_kmgr_link_t *prev, *next;
} kmgr_link_t;

#define KMGR_FROM_MEMBER(type, member, ptr) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void kmgr_list_init(kmgr_link_t *head)
{
    head->prev = head->next = head;
}
static inline int kmgr_list_empty(const kmgr_link_t *head)
{
    return head->next == head;
}
static inline int kmgr_link_linked(const kmgr_link_t *link)
{
    return link->next != NULL && link->next != link;
}
static inline void kmgr_list_append(kmgr_link_t *head, kmgr_link_t *link)
{
    link->prev = head->prev;
    link->next = head;
    head->prev->next = link;
    head->prev = link;
}
static inline void kmgr_link_unlink(kmgr_link_t *link)
{
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->prev = link->next = link;
}

#endif
