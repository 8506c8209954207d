/* sys/src/rmtree.c: directory trees removed without following a link or leaving the tree, and without the event loop: one
 * detached thread takes them in turn.
 * Why a thread rather than bounded steps on the loop: the only unbounded part is the file system's own work (one readdir of a
 * directory a sandbox filled with millions of entries, an unlink on a slow disk), and no step of ours can bound a single such
 * call; the thread shares nothing with the loop but the queue of paths (a lock held for a push or a pop) and a counter, and
 * needs no hand-back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/detach.h"
#include "ksys/rmtree.h"
#include "ksys/log.h"

/*
 * How the walk stays in the tree. The tree may still be written while it is removed: a sandbox's processes can outlive the
 * kill of its bwrap by a few milliseconds, and rename or swap the entries of their directory. A walk by path (nftw) would then
 * enter a directory swapped for a link to anywhere, or climb out through a renamed one, and remove what it finds there with
 * kgate's rights. So every directory is entered from its parent's descriptor (openat, O_NOFOLLOW: a link is removed as a
 * link, never entered), and never left by "..": a walk holds one descriptor per level it is in. Levels are bounded
 * (MAX_DEPTH, so descriptors are too): a directory found deeper is moved to the top of the tree (renameat within it) and
 * removed from there on a later pass. Entries the tree's writer can rename to lie only within the tree (a bind mount of it
 * is all it sees), so whatever a descriptor of ours leads to stays within it.
 */
#define MAX_DEPTH 32
/* Passes over the top at most: a tree of D levels takes about D / 31 of them; a writer still adding entries (it should be
 * dead) cannot keep the remover, and every tree queued behind it, forever. */
#define MAX_PASSES 256

typedef struct st_walk_t {
    int top;           /* the tree's top directory */
    unsigned moved;    /* names given to directories moved up: ".kgate-rm-<n>" */
    unsigned progress; /* entries removed or moved up in this pass over the top */
} walk_t;

static size_t in_flight; /* __atomic_* only */

/* Opens the directory `name` of `dirfd` for reading, without following a link; one that refuses us (an overlay's work
 * directory is left mode 000) gets mode 0700 first, through a descriptor of it, never its name again. -1 if it cannot. */
static int open_dir(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), path_fd;
    char proc[40];

    if (fd != -1 || errno != EACCES)
        return fd;
    if ((path_fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
        return -1;
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", path_fd);
    fd = chmod(proc, 0700) == 0 ? openat(path_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    close(path_fd);
    return fd;
}

/* Empties the directory open at `fd` (which it closes), `depth` levels below the top. */
static void empty_dir(walk_t *w, int fd, unsigned depth)
{
    DIR *dir = fdopendir(fd);
    struct dirent *e;

    if (dir == NULL) {
        close(fd);
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        int child, ret;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(fd, e->d_name, 0) == 0) { /* anything but a directory (a link among them) */
            ++w->progress;
            continue;
        }
        if (errno != EISDIR)
            continue;
        if (depth == MAX_DEPTH) {
            char name[32];
            do
                snprintf(name, sizeof(name), ".kgate-rm-%u", w->moved++);
            while ((ret = renameat2(fd, e->d_name, w->top, name, RENAME_NOREPLACE)) != 0 && errno == EEXIST);
            w->progress += ret == 0; /* moved up for a later pass, or left where it is */
            continue;
        }
        if ((child = open_dir(fd, e->d_name)) != -1)
            empty_dir(w, child, depth + 1);
        if (unlinkat(fd, e->d_name, AT_REMOVEDIR) == 0)
            ++w->progress;
    }
    closedir(dir);
}

void ksys_rmtree(const char *path)
{
    walk_t w = {.top = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};

    if (w.top == -1) {
        if (errno == ENOTDIR || errno == ELOOP) /* not a directory, or a link: removed as what it is */
            unlink(path);
        return;
    }
    /* passes over the top until one removes nothing: each takes the directories moved up by the one before */
    for (unsigned pass = 0; pass != MAX_PASSES; ++pass) {
        int fd = openat(w.top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* a reading of its own, from its start */
        w.progress = 0;
        if (fd == -1)
            break;
        empty_dir(&w, fd, 1);
        if (w.progress == 0)
            break;
    }
    close(w.top);
    if (rmdir(path) != 0 && errno != ENOENT)
        ksys_log_warn("cannot remove %s: %s", path, strerror(errno));
}

/* Trees waiting for the remover, oldest first. The remover is one detached thread that takes them in turn while there are
 * any: a burst of deletions (a language's fifty contexts, sandboxes that each filled their directory) queues behind it
 * rather than taking every detached thread and then the loop. */
typedef struct st_queued_tree_t {
    struct st_queued_tree_t *next;
    char *path;
} queued_tree_t;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static queued_tree_t *queue_head, **queue_tail = &queue_head; /* under queue_lock */
static int remover_running;                                   /* under queue_lock: a remover will take what is queued */

/* The remover: removes the queued trees until none is left, then ends (in a thread, or in the caller that had none). */
static void remove_queued(void *arg)
{
    (void)arg;
    for (;;) {
        queued_tree_t *t;
        pthread_mutex_lock(&queue_lock);
        if ((t = queue_head) != NULL && (queue_head = t->next) == NULL)
            queue_tail = &queue_head;
        if (t == NULL)
            remover_running = 0;
        pthread_mutex_unlock(&queue_lock);
        if (t == NULL)
            return;
        ksys_rmtree(t->path);
        free(t->path);
        free(t);
        __atomic_fetch_sub(&in_flight, 1, __ATOMIC_RELEASE);
    }
}

void ksys_rmtree_detached(char *path)
{
    queued_tree_t *t = wire_malloc(sizeof(*t));
    int start, ret;

    t->next = NULL;
    t->path = path;
    __atomic_fetch_add(&in_flight, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&queue_lock);
    *queue_tail = t;
    queue_tail = &t->next;
    start = !remover_running;
    remover_running = 1;
    pthread_mutex_unlock(&queue_lock);
    if (start && (ret = ksys_detach(remove_queued, NULL)) != 0) {
        if (ret != EAGAIN) /* EAGAIN: every detached thread is busy (big files' last closes), not worth a line each */
            ksys_log_warn("cannot start a thread to remove %s (error %d): removing it now", path, ret);
        remove_queued(NULL);
    }
}

size_t ksys_rmtree_in_flight(void)
{
    return __atomic_load_n(&in_flight, __ATOMIC_ACQUIRE);
}
