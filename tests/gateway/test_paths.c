/* tests/gateway/test_paths.c: the lexical path normaliser the workspace and isolated sessions share (core/paths.h). */
#include <criterion/criterion.h>
#include <string.h>
#include "core/paths.h"
#include "gw_test.h"

TestSuite(paths, .init = gw_test_init);

typedef struct st_norm_case_t {
    const char *base; /* NULL: relative paths are refused */
    const char *path;
    const char *want; /* NULL: refused (0) */
} norm_case_t;

Test(paths, normalises_lexically_and_never_climbs_above_the_root)
{
    static const norm_case_t cases[] = {
        /* "." and ".." */
        {NULL, "/a/./b/../c", "/a/c"},
        {NULL, "/a/b/.", "/a/b"},
        {NULL, "/a/b/..", "/a"},
        {NULL, "/a/..b/.c", "/a/..b/.c"},
        /* never above the root */
        {NULL, "/..", "/"},
        {NULL, "/../../a", "/a"},
        {NULL, "/a/../..", "/"},
        /* slashes: repeated, trailing, alone */
        {NULL, "/", "/"},
        {NULL, "//", "/"},
        {NULL, "///a//b///", "/a/b"},
        {NULL, "/a/b/", "/a/b"},
        /* relative without a base, and the empty path: refused */
        {NULL, "..", NULL},
        {NULL, "a/b", NULL},
        {NULL, "", NULL},
        /* from a base */
        {"/ws", "..", "/"},
        {"/ws", "", "/ws"},
        {"/ws", "a/../b/", "/ws/b"},
        {"/ws", "/etc/passwd", "/etc/passwd"},
        /* a base is normalised too, and must be absolute */
        {"/ws/", "./x", "/ws/x"},
        {"/", "a", "/a"},
        {"ws", "a", NULL},
    };
    char out[64];

    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const norm_case_t *c = &cases[i];
        size_t n = gw_path_normalize(c->base, c->path, strlen(c->path), out, sizeof(out));
        if (c->want == NULL) {
            cr_expect_eq(n, 0, "\"%s\" from %s: refused, got \"%.*s\"", c->path, c->base ? c->base : "(none)", (int)n, out);
        } else {
            cr_expect_eq(n, strlen(c->want), "\"%s\" from %s: length %zu", c->path, c->base ? c->base : "(none)", n);
            cr_expect_str_eq(n != 0 ? out : "", c->want, "\"%s\" from %s", c->path, c->base ? c->base : "(none)");
        }
    }
}

Test(paths, reads_only_len_bytes_and_refuses_what_does_not_fit)
{
    char out[8];

    /* the bytes after len are not part of the path */
    cr_expect_eq(gw_path_normalize(NULL, "/ab/cd", 3, out, sizeof(out)), 3);
    cr_expect_str_eq(out, "/ab");
    /* "/abcdef" and its NUL need 8 bytes; one more component does not fit */
    cr_expect_eq(gw_path_normalize(NULL, "/abcdef", 7, out, sizeof(out)), 7);
    cr_expect_eq(gw_path_normalize(NULL, "/abcdefg", 8, out, sizeof(out)), 0);
    cr_expect_eq(gw_path_normalize(NULL, "/abcdefg/..", 11, out, sizeof(out)), 0, "a component that does not fit is refused");
    cr_expect_eq(gw_path_normalize("/abcdefgh", "x", 1, out, sizeof(out)), 0, "a base that does not fit is refused");
    cr_expect_eq(gw_path_normalize(NULL, "/", 1, out, 1), 0, "\"/\" needs 2 bytes");
    cr_expect_eq(gw_path_normalize(NULL, "/", 1, out, 2), 1);
    cr_expect_str_eq(out, "/");
}
