/* tests/fuzz/fuzz_workspace.c: the lexical path resolver: never outside the root, always normalised, as a reference resolves it. */
#include "fuzz.h"
#include "files/workspace.h"
#include "wire/alloc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

typedef struct st_component_t {
    const char *base;
    size_t len;
} component_t;

/* Appends the components of `len` bytes at `s` to `stack` as path resolution does: "" and "." skipped, ".." pops. */
static void push_components(component_t *stack, size_t *n, const char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        size_t start = i;
        while (i < len && s[i] != '/')
            ++i;
        if (i - start == 2 && s[start] == '.' && s[start + 1] == '.') {
            if (*n != 0)
                --*n;
        } else if (i - start != 0 && !(i - start == 1 && s[start] == '.')) {
            stack[(*n)++] = (component_t){s + start, i - start};
        }
        ++i;
    }
}

/* gw_workspace_resolve_lexical's contract worked out with a stack of components: 0 with `rel`, or an error. */
static int reference_resolve(const char *root, const char *path, size_t len, char *rel)
{
    size_t root_len = strlen(root), n = 0, n_root = 0, used = 0;
    component_t *stack, *root_stack;
    int ret = 0;

    if (len == 0)
        return GW_EWORKSPACE_EMPTY;
    if (memchr(path, '\0', len) != NULL)
        return GW_EWORKSPACE_NUL;
    if (len > GW_WORKSPACE_PATH_MAX || root_len > GW_WORKSPACE_PATH_MAX)
        return GW_EWORKSPACE_TOOLONG;
    stack = malloc((root_len + len + 2) * sizeof(*stack));
    root_stack = malloc((root_len + 1) * sizeof(*root_stack));
    push_components(root_stack, &n_root, root, root_len);
    if (path[0] != '/')
        push_components(stack, &n, root, root_len);
    push_components(stack, &n, path, len);
    if (n < n_root) {
        ret = GW_EWORKSPACE_OUTSIDE;
    } else {
        for (size_t i = 0; i != n_root && ret == 0; ++i)
            if (stack[i].len != root_stack[i].len || memcmp(stack[i].base, root_stack[i].base, stack[i].len) != 0)
                ret = GW_EWORKSPACE_OUTSIDE;
    }
    for (size_t i = n_root; i < n && ret == 0; ++i) {
        if (used != 0)
            rel[used++] = '/';
        memcpy(rel + used, stack[i].base, stack[i].len);
        used += stack[i].len;
    }
    rel[used] = '\0';
    free(stack);
    free(root_stack);
    return ret;
}

/* A canonical root from the first line: absolute, no "", "." or ".." component, no trailing '/'; "/" when none is left. */
static char *canonical_root(const char *line, size_t len)
{
    component_t *stack = malloc((len + 1) * sizeof(*stack));
    char *root = malloc(len + 2);
    const char *nul = memchr(line, '\0', len);
    size_t n = 0, used = 0;

    if (nul != NULL)
        len = (size_t)(nul - line); /* a C string */
    push_components(stack, &n, line, len);
    for (size_t i = 0; i != n; ++i) {
        root[used++] = '/';
        memcpy(root + used, stack[i].base, stack[i].len);
        used += stack[i].len;
    }
    if (used == 0)
        root[used++] = '/';
    root[used] = '\0';
    free(stack);
    return root;
}

static void check_normalised(const char *root, const gw_workspace_path_t *p)
{
    size_t root_len = strlen(root), rel_len = strlen(p->rel);
    const char *s = p->rel;

    FUZZ_CHECK(rel_len <= GW_WORKSPACE_PATH_MAX, "rel has %zu bytes", rel_len);
    /* components separated by single '/', none of them "", "." or ".." */
    while (rel_len != 0) {
        const char *slash = strchr(s, '/');
        size_t clen = slash != NULL ? (size_t)(slash - s) : strlen(s);
        FUZZ_CHECK(clen != 0 && !(clen == 1 && s[0] == '.') && !(clen == 2 && s[0] == '.' && s[1] == '.'),
                   "rel \"%s\" is not normalised", p->rel);
        if (slash == NULL) {
            FUZZ_CHECK(p->name == s, "name is not the last component of \"%s\"", p->rel);
            break;
        }
        s = slash + 1;
    }
    if (rel_len == 0)
        FUZZ_CHECK(p->name == p->rel && strcmp(p->abs, root) == 0, "the root resolves to \"%s\"", p->abs);
    /* abs is root + "/" + rel: beneath the root, never beside it */
    else if (strcmp(root, "/") == 0)
        FUZZ_CHECK(p->abs[0] == '/' && strcmp(p->abs + 1, p->rel) == 0, "abs \"%s\", rel \"%s\"", p->abs, p->rel);
    else
        FUZZ_CHECK(strncmp(p->abs, root, root_len) == 0 && p->abs[root_len] == '/' && strcmp(p->abs + root_len + 1, p->rel) == 0,
                   "abs \"%s\" is not beneath \"%s\"", p->abs, root);
}

/* The input: a root on the first line (made canonical, as the contract requires), then the client path, NUL bytes and all. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *rest = (const char *)data, *line;
    size_t len = size, line_len;
    gw_workspace_path_t *p = malloc(sizeof(*p));
    char *root, *path, *want = malloc(len + GW_WORKSPACE_PATH_MAX + 2);
    int ret, expected;

    fuzz_take_line(&rest, &len, &line, &line_len);
    root = canonical_root(line, line_len);
    path = fuzz_copy(rest, len);
    ret = gw_workspace_resolve_lexical(root, path, len, p);
    expected = reference_resolve(root, path, len, want);
    FUZZ_CHECK(ret == expected, "root \"%s\", %zu bytes: got %d, expected %d", root, len, ret, expected);
    if (ret == 0) {
        FUZZ_CHECK(strcmp(p->rel, want) == 0, "rel \"%s\", expected \"%s\"", p->rel, want);
        check_normalised(root, p);
    }
    free(p);
    free(want);
    free(path);
    free(root);
    return 0;
}
