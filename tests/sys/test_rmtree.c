/* tests/sys/test_rmtree.c: removing a tree (ksys/rmtree.h) never follows a link and never leaves the tree, even while the
 * tree's writer swaps its directories for links; trees deeper than the walk's levels, and directories of mode 000, go too. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/rmtree.h"
#include "wire/alloc.h"

static char base[64];

static void make_base(void)
{
    wire_global_init();
    /* a tmpfs where there is one: tens of thousands of files are made and removed, which a VM's disk can make seconds */
    snprintf(base, sizeof(base), "/dev/shm/kgate-test-rmtree-XXXXXX");
    if (mkdtemp(base) == NULL) {
        snprintf(base, sizeof(base), "/tmp/kgate-test-rmtree-XXXXXX");
        cr_assert_not_null(mkdtemp(base));
    }
}

static void remove_base(void)
{
    char cmd[256];

    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", base, base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
}

TestSuite(rmtree, .init = make_base, .fini = remove_base, .timeout = 60);

static char *at(const char *rel)
{
    static char paths[8][256];
    static unsigned next;
    char *p = paths[next++ % 8];

    snprintf(p, sizeof(paths[0]), "%s/%s", base, rel);
    return p;
}

static void write_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    cr_assert_neq(fd, -1, "%s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, "x", 1), 1);
    close(fd);
}

static int exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

/* Links to a directory and a file outside, a FIFO, and a directory of mode 000 with content: the tree goes, the outside
 * stays. */
Test(rmtree, links_are_removed_never_followed)
{
    cr_assert_eq(mkdir(at("outside"), 0700), 0);
    write_file(at("outside/keep"));
    cr_assert_eq(mkdir(at("tree"), 0700), 0);
    cr_assert_eq(mkdir(at("tree/a"), 0700), 0);
    cr_assert_eq(mkdir(at("tree/a/b"), 0700), 0);
    write_file(at("tree/a/b/f"));
    cr_assert_eq(symlink(at("outside"), at("tree/a/to-dir")), 0);
    cr_assert_eq(symlink(at("outside/keep"), at("tree/to-file")), 0);
    cr_assert_eq(mkfifo(at("tree/fifo"), 0600), 0);
    cr_assert_eq(mkdir(at("tree/ovl-wd"), 0700), 0);
    write_file(at("tree/ovl-wd/inside"));
    cr_assert_eq(chmod(at("tree/ovl-wd"), 0), 0); /* as overlayfs leaves its work directory */

    ksys_rmtree(at("tree"));
    cr_expect_not(exists(at("tree")), "the tree is still there");
    cr_expect(exists(at("outside/keep")), "a file outside, behind a link, was removed");
}

/* A top that is a link is removed as a link. */
Test(rmtree, a_top_that_is_a_link_goes_as_a_link)
{
    cr_assert_eq(mkdir(at("outside"), 0700), 0);
    write_file(at("outside/keep"));
    cr_assert_eq(symlink(at("outside"), at("tree")), 0);
    ksys_rmtree(at("tree"));
    cr_expect_not(exists(at("tree")));
    cr_expect(exists(at("outside/keep")));
}

/* 300 levels, a file in each: deeper than the walk holds descriptors for, so its directories are moved up and removed. */
Test(rmtree, a_tree_deeper_than_the_walks_levels_goes_whole)
{
    int fd;

    cr_assert_eq(mkdir(at("tree"), 0700), 0);
    cr_assert_neq(fd = open(at("tree"), O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1);
    for (int i = 0; i != 300; ++i) {
        int next, f;
        cr_assert_eq(mkdirat(fd, "d", 0700), 0);
        cr_assert_neq(f = openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600), -1);
        close(f);
        cr_assert_neq(next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1);
        close(fd);
        fd = next;
    }
    close(fd);
    ksys_rmtree(at("tree"));
    cr_expect_not(exists(at("tree")), "a tree of 300 levels is still there");
}

static volatile int swapping;
static char tree[256], tree_d[256], tree_away[256], outside[256]; /* the writer's paths, made before it starts */

/* The tree's writer, still running while the tree is removed: tree/d (full of files) swapped again and again for a link to
 * the outside directory, whose files have the same names. */
static void *swap_dir_for_link(void *arg)
{
    (void)arg;
    while (swapping) {
        if (rename(tree_d, tree_away) == 0) {
            if (symlink(outside, tree_d) == 0) {
                sched_yield();
                unlink(tree_d);
            }
            rename(tree_away, tree_d);
        }
        sched_yield();
    }
    return NULL;
}

Test(rmtree, a_directory_swapped_for_a_link_while_walking_never_leads_outside)
{
    enum { FILES = 200, ROUNDS = 20 };
    char name[64];

    snprintf(tree, sizeof(tree), "%s", at("tree"));
    snprintf(tree_d, sizeof(tree_d), "%s", at("tree/d"));
    snprintf(tree_away, sizeof(tree_away), "%s", at("tree/d.away"));
    snprintf(outside, sizeof(outside), "%s", at("outside"));
    cr_assert_eq(mkdir(outside, 0700), 0);
    for (int i = 0; i != FILES; ++i) {
        snprintf(name, sizeof(name), "outside/f%d", i);
        write_file(at(name));
    }
    for (int round = 0; round != ROUNDS; ++round) {
        pthread_t writer;
        cr_assert_eq(mkdir(at("tree"), 0700), 0);
        cr_assert_eq(mkdir(at("tree/d"), 0700), 0);
        for (int i = 0; i != FILES; ++i) {
            snprintf(name, sizeof(name), "tree/d/f%d", i);
            write_file(at(name));
        }
        swapping = 1;
        cr_assert_eq(pthread_create(&writer, NULL, swap_dir_for_link, NULL), 0);
        ksys_rmtree(tree);
        swapping = 0;
        pthread_join(writer, NULL);
        /* what the writer left after the walk (the directory moved back in at the end) goes now */
        ksys_rmtree(tree);
        cr_assert_not(exists(tree), "round %d: the tree is still there", round);
        for (int i = 0; i != FILES; ++i) {
            snprintf(name, sizeof(name), "outside/f%d", i);
            cr_assert(exists(at(name)), "round %d: %s, outside the tree, was removed through a link", round, name);
        }
    }
}

/* Fills a new directory `name` with `files` empty files. */
static void make_tree(const char *name, int files)
{
    char file[32];
    int fd;

    cr_assert_eq(mkdir(at(name), 0700), 0);
    cr_assert_neq(fd = open(at(name), O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1);
    for (int i = 0; i != files; ++i) {
        int f;
        snprintf(file, sizeof(file), "f%d", i);
        cr_assert_neq(f = openat(fd, file, O_WRONLY | O_CREAT | O_CLOEXEC, 0600), -1);
        close(f);
    }
    close(fd);
}

/*
 * Eight trees of 2,000 files, then four of one file, given to the remover at once: the last small one is still there when
 * its call returns, behind the big ones (before, eight trees took the eight detached threads and the caller, kgate's loop,
 * removed the next ones itself, a sandbox's directory of millions of files among them), and all go.
 */
Test(rmtree, a_burst_of_trees_waits_for_the_remover_and_never_takes_the_callers_time)
{
    enum { BIG = 8, SMALL = 4 };
    char name[32];

    for (int t = 0; t != BIG + SMALL; ++t) {
        snprintf(name, sizeof(name), "t%d", t);
        make_tree(name, t < BIG ? 2000 : 1);
    }
    for (int t = 0; t != BIG + SMALL; ++t) {
        snprintf(name, sizeof(name), "t%d", t);
        ksys_rmtree_detached(wire_strdup(at(name)));
    }
    snprintf(name, sizeof(name), "t%d", BIG + SMALL - 1);
    cr_expect(exists(at(name)), "the last tree was removed by its caller, before the big ones");
    for (int i = 0; i != 6000 && ksys_rmtree_in_flight() != 0; ++i)
        usleep(10 * 1000); /* a hang guard of 60 s */
    cr_assert_eq(ksys_rmtree_in_flight(), 0, "trees still waiting after 60 s");
    for (int t = 0; t != BIG + SMALL; ++t) {
        snprintf(name, sizeof(name), "t%d", t);
        cr_expect_not(exists(at(name)), "%s is still there", name);
    }
}
