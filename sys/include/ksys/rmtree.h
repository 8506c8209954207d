/* ksys/rmtree.h: removing a directory tree that may be arbitrarily large (an isolated session's upper layer) off the event loop.
 */
#ifndef KSYS_RMTREE_H
#define KSYS_RMTREE_H

#include <stddef.h>

/**
 * Removes `path` and everything beneath it, never following a symbolic link and never leaving the tree, even while a
 * process (a sandbox being killed) still renames its entries or swaps a directory for a link: each directory is entered
 * from its parent's descriptor, at most 32 levels deep at once (deeper ones are moved up within the tree first). What cannot
 * be removed is left, and logged once. Now, in the caller (tear-down only).
 */
void ksys_rmtree(const char *path);
/**
 * Removes `path` as ksys_rmtree does, in the remover: one detached thread that removes the trees given to it in turn, owning
 * nothing but their paths (`path` is taken over: freed when done). Returns at once, however many trees wait; only when no
 * remover runs and no thread can be had for one (every detached thread busy, ksys/detach.h) does the caller remove what
 * waits itself.
 */
void ksys_rmtree_detached(char *path);
/** How many ksys_rmtree_detached removals have not finished yet (shutdown waits for 0). */
size_t ksys_rmtree_in_flight(void);

#endif
