/* tests/gateway/test_workspace.c: client paths confined beneath the workspace root, lexically and through symbolic links. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "files/workspace.h"
#include "support/proc.h"
#include "gw_test.h"

TestSuite(workspace, .init = gw_test_init);

/* ---- lexical resolution (pure) ---------------------------------------------------------------- */

typedef struct st_lexical_case_t {
    const char *root;
    const char *path;
    int expected; /* 0 or GW_EWORKSPACE_* */
    const char *rel;
    const char *abs;
} lexical_case_t;

static const lexical_case_t lexical_cases[] = {
    {"/ws", "a.txt", 0, "a.txt", "/ws/a.txt"},
    {"/ws", "a/b/c", 0, "a/b/c", "/ws/a/b/c"},
    {"/ws", "./a//b/./c/", 0, "a/b/c", "/ws/a/b/c"},
    {"/ws", ".", 0, "", "/ws"},
    {"/ws", "/ws", 0, "", "/ws"},
    {"/ws", "/ws/", 0, "", "/ws"},
    {"/ws", "/ws/x/../y", 0, "y", "/ws/y"},
    {"/ws", "a/../b", 0, "b", "/ws/b"},
    {"/ws", "a/..", 0, "", "/ws"},
    {"/ws", "../ws/a", 0, "a", "/ws/a"}, /* lexically back inside */
    {"/ws", "..", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "../../etc/passwd", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "a/../../b", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "/etc/passwd", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "/wsx/a", GW_EWORKSPACE_OUTSIDE, NULL, NULL}, /* a sibling sharing the root's prefix */
    {"/ws", "/", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "/ws/../ws2", GW_EWORKSPACE_OUTSIDE, NULL, NULL},
    {"/ws", "/../../ws/a", 0, "a", "/ws/a"}, /* "/.." is "/" */
    {"/ws", "", GW_EWORKSPACE_EMPTY, NULL, NULL},
    {"/", "/etc/passwd", 0, "etc/passwd", "/etc/passwd"},
    {"/", "../..", 0, "", "/"},
    {"/", "x", 0, "x", "/x"},
};

Test(workspace, lexical_table)
{
    size_t i;

    for (i = 0; i != sizeof(lexical_cases) / sizeof(lexical_cases[0]); ++i) {
        const lexical_case_t *c = &lexical_cases[i];
        gw_workspace_path_t p;
        int ret = gw_workspace_resolve_lexical(c->root, c->path, strlen(c->path), &p);
        cr_assert_eq(ret, c->expected, "root %s path \"%s\": got %d (%s), expected %d", c->root, c->path, ret, gw_strerror(ret),
                     c->expected);
        if (ret != 0)
            continue;
        cr_assert_str_eq(p.rel, c->rel, "root %s path \"%s\"", c->root, c->path);
        cr_assert_str_eq(p.abs, c->abs, "root %s path \"%s\"", c->root, c->path);
        cr_assert_str_eq(p.name, strrchr(c->rel, '/') != NULL ? strrchr(c->rel, '/') + 1 : c->rel);
    }
}

Test(workspace, nul_byte_refused)
{
    gw_workspace_path_t p;
    static const char path[] = "a\0/../../etc/passwd";

    cr_assert_eq(gw_workspace_resolve_lexical("/ws", path, sizeof(path) - 1, &p), GW_EWORKSPACE_NUL);
    cr_assert_eq(gw_workspace_resolve_lexical("/ws", "a\0", 2, &p), GW_EWORKSPACE_NUL);
}

Test(workspace, too_long_refused)
{
    gw_workspace_path_t p;
    size_t len = GW_WORKSPACE_PATH_MAX + 1;
    char *path = malloc(len);

    memset(path, 'a', len);
    cr_assert_eq(gw_workspace_resolve_lexical("/ws", path, len, &p), GW_EWORKSPACE_TOOLONG);
    free(path);
}

/* The longest client path is accepted, and resolves to a relative path just as long (found by
 * tests/fuzz/fuzz_workspace.c: it was refused as too long under any root but "/"). */
Test(workspace, longest_path_accepted)
{
    static const char *const roots[] = {"/ws", "/", "/a/b"};
    gw_workspace_path_t p;
    size_t len = GW_WORKSPACE_PATH_MAX;
    char *path = malloc(len + 1);

    memset(path, 'a', len);
    path[len] = '\0';
    for (size_t i = 0; i != sizeof(roots) / sizeof(roots[0]); ++i) {
        cr_assert_eq(gw_workspace_resolve_lexical(roots[i], path, len, &p), 0, "root %s", roots[i]);
        cr_assert_str_eq(p.rel, path, "root %s", roots[i]);
        cr_assert_eq(p.name, p.rel);
    }
    free(path);
}

/* ---- the root, symbolic links, *at operations ------------------------------------------------- */

static char tmp[256], root[300], outside[300];
static gw_workspace_t ws;

static void touch(const char *dir, const char *rel, const char *content)
{
    char path[600];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    fp = fopen(path, "w");
    cr_assert_not_null(fp, "%s", path);
    fputs(content, fp);
    fclose(fp);
}

static void make_link(const char *target, const char *rel)
{
    char path[600];

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    cr_assert_eq(symlink(target, path), 0, "symlink %s -> %s: %s", path, target, strerror(errno));
}

static void setup(void)
{
    char path[600];

    gw_test_init();
    snprintf(tmp, sizeof(tmp), "/tmp/kgate-test-ws.XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    snprintf(root, sizeof(root), "%s/root", tmp);
    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    cr_assert_eq(mkdir(root, 0755), 0);
    cr_assert_eq(mkdir(outside, 0755), 0);
    snprintf(path, sizeof(path), "%s/sub", root);
    cr_assert_eq(mkdir(path, 0755), 0);
    touch(outside, "secret", "secret\n");
    touch(root, "sub/file", "inside\n");
    snprintf(path, sizeof(path), "%s/secret", outside);
    make_link(path, "abs_out");                /* absolute, outside */
    make_link("../outside/secret", "rel_out"); /* relative, outside */
    make_link("../outside", "dir_out");
    make_link("sub/file", "rel_in");
    make_link("/etc", "etc");
    cr_assert_eq(gw_workspace_init(&ws, root), 0);
}

static void teardown(void)
{
    char cmd[400];

    gw_workspace_dispose(&ws);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
}

static int open_rel(const char *rel, int flags, int *fd)
{
    gw_workspace_path_t p;
    int ret = gw_workspace_resolve(&ws, rel, strlen(rel), &p);
    if (ret != 0)
        return ret;
    return gw_workspace_open(&ws, p.rel, flags, 0644, fd);
}

Test(workspace, init_canonicalises_and_refuses_missing, .init = setup, .fini = teardown)
{
    gw_workspace_t other;
    char path[600];

    cr_assert_str_eq(ws.root, root); /* /tmp is not a link on these machines */
    snprintf(path, sizeof(path), "%s/sub/../sub", root);
    cr_assert_eq(gw_workspace_init(&other, path), 0);
    snprintf(path, sizeof(path), "%s/sub", root);
    cr_assert_str_eq(other.root, path, "the root is canonical");
    gw_workspace_dispose(&other);
    snprintf(path, sizeof(path), "%s/missing", root);
    cr_assert_eq(gw_workspace_init(&other, path), -ENOENT);
    snprintf(path, sizeof(path), "%s/sub/file", root);
    cr_assert_eq(gw_workspace_init(&other, path), -ENOTDIR);
}

Test(workspace, symlinks_out_refused, .init = setup, .fini = teardown)
{
    int fd = -1;

    cr_assert_eq(open_rel("abs_out", O_RDONLY, &fd), -EXDEV);
    cr_assert_eq(open_rel("rel_out", O_RDONLY, &fd), -EXDEV);
    cr_assert_eq(open_rel("dir_out/secret", O_RDONLY, &fd), -EXDEV);
    cr_assert_eq(open_rel("etc/passwd", O_RDONLY, &fd), -EXDEV);
    cr_assert_eq(open_rel("etc", O_PATH, &fd), -EXDEV);
    /* writing through a link out creates nothing outside */
    cr_assert_eq(open_rel("dir_out/new", O_WRONLY | O_CREAT, &fd), -EXDEV);
    {
        char path[600];
        snprintf(path, sizeof(path), "%s/new", outside);
        cr_assert_neq(access(path, F_OK), 0, "a file was created outside the root");
    }
}

Test(workspace, symlinks_in_followed, .init = setup, .fini = teardown)
{
    char buf[32] = {0};
    int fd = -1;

    cr_assert_eq(open_rel("rel_in", O_RDONLY, &fd), 0);
    cr_assert_eq(read(fd, buf, sizeof(buf) - 1), 7);
    cr_assert_str_eq(buf, "inside\n");
    close(fd);
    cr_assert_eq(open_rel(".", O_RDONLY | O_DIRECTORY, &fd), 0);
    close(fd);
}

Test(workspace, parent_and_final_component_not_followed, .init = setup, .fini = teardown)
{
    gw_workspace_path_t p;
    struct stat st;
    int dir_fd;

    cr_assert_eq(gw_workspace_resolve(&ws, "abs_out", 7, &p), 0);
    cr_assert_eq(gw_workspace_open_parent(&ws, &p, &dir_fd), 0);
    cr_assert_eq(fstatat(dir_fd, p.name, &st, AT_SYMLINK_NOFOLLOW), 0);
    cr_assert(S_ISLNK(st.st_mode));
    /* removing the link removes the link, not its target */
    cr_assert_eq(unlinkat(dir_fd, p.name, 0), 0);
    close(dir_fd);
    {
        char path[600];
        snprintf(path, sizeof(path), "%s/secret", outside);
        cr_assert_eq(access(path, F_OK), 0);
    }
    cr_assert_eq(gw_workspace_resolve(&ws, "dir_out/x", 9, &p), 0);
    cr_assert_eq(gw_workspace_open_parent(&ws, &p, &dir_fd), -EXDEV);
    cr_assert_eq(gw_workspace_resolve(&ws, ".", 1, &p), 0);
    cr_assert_eq(gw_workspace_open_parent(&ws, &p, &dir_fd), -EINVAL, "the root has no parent inside the workspace");
}

Test(workspace, mkdirs, .init = setup, .fini = teardown)
{
    char path[600];
    struct stat st;

    cr_assert_eq(gw_workspace_mkdirs(&ws, "a/b/c", 0755), 0);
    snprintf(path, sizeof(path), "%s/a/b/c", root);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(gw_workspace_mkdirs(&ws, "a/b/c", 0755), 0, "existing directories are fine");
    cr_assert_eq(gw_workspace_mkdirs(&ws, "sub/file/x", 0755), -ENOTDIR);
    cr_assert_eq(gw_workspace_mkdirs(&ws, "dir_out/x", 0755), -EXDEV);
    snprintf(path, sizeof(path), "%s/x", outside);
    cr_assert_neq(access(path, F_OK), 0, "a directory was created outside the root");
}

Test(workspace, remove_tree_never_follows_links, .init = setup, .fini = teardown)
{
    char path[600];
    int fd;

    cr_assert_eq(gw_workspace_mkdirs(&ws, "t/u", 0755), 0);
    touch(root, "t/u/f", "x");
    snprintf(path, sizeof(path), "%s/t/u/out", root);
    cr_assert_eq(symlink(outside, path), 0);
    cr_assert_eq(open_rel(".", O_PATH | O_DIRECTORY, &fd), 0);
    cr_assert_eq(gw_workspace_remove_tree(fd, "t", 16), 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/t", root);
    cr_assert_neq(access(path, F_OK), 0);
    snprintf(path, sizeof(path), "%s/secret", outside);
    cr_assert_eq(access(path, F_OK), 0, "the link's target survived");
}

Test(workspace, remove_tree_depth_bound, .init = setup, .fini = teardown)
{
    int fd;

    cr_assert_eq(gw_workspace_mkdirs(&ws, "d1/d2/d3/d4", 0755), 0);
    cr_assert_eq(open_rel(".", O_PATH | O_DIRECTORY, &fd), 0);
    cr_assert_eq(gw_workspace_remove_tree(fd, "d1", 2), -ELOOP);
    close(fd);
}

/* A big file removed through kgate: its name goes at once, and kgate's reference to it is let go (in a thread) soon after. */
Test(workspace, a_big_file_is_unlinked_and_let_go, .init = setup, .fini = teardown)
{
    char path[600];
    struct stat st;
    int fd, dir_fd, held;

    snprintf(path, sizeof(path), "%s/big", root);
    cr_assert_neq(fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600), -1);
    cr_assert_eq(ftruncate(fd, GW_WORKSPACE_BIG_FILE_BYTES), 0); /* sparse: the size is what counts */
    cr_assert_eq(fstat(fd, &st), 0);
    close(fd);
    cr_assert_neq(dir_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), -1);

    /* what is held: big regular files with one name, nothing else */
    cr_expect_eq(gw_workspace_hold_big_file(dir_fd, "sub/file"), -1, "a small file was held");
    cr_expect_eq(gw_workspace_hold_big_file(dir_fd, "rel_in"), -1, "a symbolic link was held");
    cr_expect_eq(gw_workspace_hold_big_file(dir_fd, "sub"), -1, "a directory was held");
    cr_assert_eq(linkat(dir_fd, "big", dir_fd, "big2", 0), 0);
    cr_expect_eq(gw_workspace_hold_big_file(dir_fd, "big"), -1, "a file with another name was held");
    cr_assert_eq(unlinkat(dir_fd, "big2", 0), 0);
    cr_assert_neq(held = gw_workspace_hold_big_file(dir_fd, "big"), -1, "a big file was not held");
    close(held);

    cr_assert_eq(gw_workspace_unlink(dir_fd, "big"), 0);
    cr_expect_eq(faccessat(dir_fd, "big", F_OK, AT_SYMLINK_NOFOLLOW), -1, "the name is still there");
    for (int waited = 0; waited < 2000 && ts_fd_of_file(&st) != -1; waited += 5)
        usleep(5000);
    cr_expect_eq(ts_fd_of_file(&st), -1, "kgate still holds the removed file after 2 s");
    cr_expect_eq(gw_workspace_unlink(dir_fd, "big"), -ENOENT);
    close(dir_fd);
}
