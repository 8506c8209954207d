/* tests/lint/test_circles.c: inside each folder of the gateway, the files call each other in one direction: a file that
 * calls a function another file of the folder defines is above it, and no chain of such calls comes back (a circle means
 * a helper sits in the wrong file). Functions are found by their definitions at the start of a line in the .c files;
 * a call is any use of such a name, comments left out. Handlers a macro defines (GW_*_HANDLER) are not seen: only a
 * folder's route table names them. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>

#define MAX_FILES 64
#define MAX_DEFS 4096

typedef struct st_folder_t {
    size_t nfiles;
    char *names[MAX_FILES]; /* file names, without the folder */
    char *texts[MAX_FILES]; /* their text, comments blanked */
    size_t ndefs;
    char *defs[MAX_DEFS]; /* functions defined, with the file that defines each */
    size_t def_file[MAX_DEFS];
    unsigned char calls[MAX_FILES][MAX_FILES]; /* calls[a][b]: file a uses a function of file b */
} folder_t;

static int is_ident(int c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Reads `path` with its comments replaced by spaces (so names in them are not calls); a new string. */
static char *read_code(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *text = NULL;
    size_t len = 0;

    cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
    FILE *out = open_memstream(&text, &len);
    int c, prev = 0, in_block = 0, in_line = 0;
    while ((c = fgetc(fp)) != EOF) {
        if (in_block) {
            if (prev == '*' && c == '/')
                in_block = 0;
            fputc(c == '\n' ? '\n' : ' ', out);
        } else if (in_line) {
            if (c == '\n')
                in_line = 0;
            fputc(c == '\n' ? '\n' : ' ', out);
        } else if (prev == '/' && (c == '*' || c == '/')) {
            fseek(out, -1, SEEK_CUR);
            fputs("  ", out);
            in_block = c == '*', in_line = c == '/';
            c = 0; /* the comment's own star does not also end it */
        } else {
            fputc(c, out);
        }
        prev = c;
    }
    fclose(fp);
    fclose(out);
    return text;
}

/* Records the functions a file defines: a line that starts with a type (not static, not a directive or a brace) and
 * names `name(` before any ';' or '=' ends it. */
static void find_defs(folder_t *f, size_t file)
{
    for (const char *line = f->texts[file]; line != NULL && *line != '\0';
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *end = strchr(line, '\n'), *paren;
        size_t n = end != NULL ? (size_t)(end - line) : strlen(line);
        if (!is_ident((unsigned char)line[0]) || strncmp(line, "static", 6) == 0 || strncmp(line, "typedef", 7) == 0)
            continue;
        if ((paren = memchr(line, '(', n)) == NULL || memchr(line, ';', n) != NULL || memchr(line, '=', (size_t)(paren - line)))
            continue;
        const char *name_end = paren, *name = paren;
        while (name > line && is_ident((unsigned char)name[-1]))
            --name;
        if (name == name_end || name == line || (name[-1] != ' ' && name[-1] != '*'))
            continue; /* a macro's use (FOO(x)) or no return type */
        cr_assert_lt(f->ndefs, MAX_DEFS);
        f->defs[f->ndefs] = strndup(name, (size_t)(name_end - name));
        f->def_file[f->ndefs++] = file;
    }
}

/* Whether `text` uses the identifier `name` (a whole token). */
static int uses(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = strstr(p, name)) != NULL; p += n)
        if ((p == text || !is_ident((unsigned char)p[-1])) && !is_ident((unsigned char)p[n]))
            return 1;
    return 0;
}

/* Loads the .c files directly in `dir` and who calls whom among them. */
static void load(folder_t *f, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *ent;

    memset(f, 0, sizeof(*f));
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        char path[4096];
        if (n < 3 || strcmp(ent->d_name + n - 2, ".c") != 0)
            continue;
        cr_assert_lt(f->nfiles, MAX_FILES);
        snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
        f->names[f->nfiles] = strdup(ent->d_name);
        f->texts[f->nfiles] = read_code(path);
        find_defs(f, f->nfiles);
        ++f->nfiles;
    }
    closedir(d);
    for (size_t i = 0; i != f->ndefs; ++i)
        for (size_t a = 0; a != f->nfiles; ++a)
            if (a != f->def_file[i] && uses(f->texts[a], f->defs[i]))
                f->calls[a][f->def_file[i]] = 1;
}

static void unload(folder_t *f)
{
    for (size_t i = 0; i != f->nfiles; ++i)
        free(f->names[i]), free(f->texts[i]);
    for (size_t i = 0; i != f->ndefs; ++i)
        free(f->defs[i]);
}

/* Depth-first search for a circle through `a`; on finding one, writes it to `out` ("x.c -> y.c -> x.c"). */
static int find_circle(const folder_t *f, size_t a, int *state, size_t *stack, size_t depth, char *out, size_t outsz)
{
    state[a] = 1; /* on the stack */
    stack[depth] = a;
    for (size_t b = 0; b != f->nfiles; ++b) {
        if (!f->calls[a][b])
            continue;
        if (state[b] == 1) {
            size_t from = 0, len = 0;
            while (stack[from] != b)
                ++from;
            for (size_t i = from; i <= depth; ++i)
                len += (size_t)snprintf(out + len, outsz - len, "%s -> ", f->names[stack[i]]);
            snprintf(out + len, outsz - len, "%s", f->names[b]);
            return 1;
        }
        if (state[b] == 0 && find_circle(f, b, state, stack, depth + 1, out, outsz))
            return 1;
    }
    state[a] = 2; /* done: no circle through it */
    return 0;
}

/* A circle among the files of `dir` into `out`, or 0 when there is none. */
static int circle_in(const char *dir, char *out, size_t outsz)
{
    static folder_t f;
    int state[MAX_FILES] = {0}, found = 0;
    size_t stack[MAX_FILES];

    load(&f, dir);
    for (size_t a = 0; a != f.nfiles && !found; ++a)
        if (state[a] == 0)
            found = find_circle(&f, a, state, stack, 0, out, outsz);
    unload(&f);
    return found;
}

Test(circles, no_folder_of_the_gateway_calls_itself_in_a_circle)
{
    char dir[4096], circle[1024];
    size_t folders = 0;
    DIR *d;
    struct dirent *ent;

    snprintf(dir, sizeof(dir), "%s/gateway", KGATE_SOURCE_DIR);
    cr_assert_not_null(d = opendir(dir), "%s: %s", dir, strerror(errno));
    while ((ent = readdir(d)) != NULL) {
        struct stat st;
        if (ent->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof(dir), "%s/gateway/%s", KGATE_SOURCE_DIR, ent->d_name);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        ++folders;
        if (circle_in(dir, circle, sizeof(circle)))
            cr_expect_fail("gateway/%s: %s: move the helper that closes it to a file below both", ent->d_name, circle);
    }
    closedir(d);
    cr_expect_geq(folders, 10, "only %zu folders under gateway/: is KGATE_SOURCE_DIR right?", folders);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert_not_null(fp = fopen(path, "w"), "%s: %s", path, strerror(errno));
    fputs(text, fp);
    fclose(fp);
}

/* The check passing proves nothing unless it can fail: a planted folder with a circle, then without it. */
Test(circles, a_planted_circle_is_reported_and_a_chain_is_not)
{
    char dir[] = "/tmp/kgate-circles-XXXXXX", circle[1024] = "", path[4096];

    cr_assert_not_null(mkdtemp(dir));
    write_file(dir, "routes.c",
               "#include \"x.h\"\nvoid gw_x_send(int a)\n{\n    (void)a;\n}\n"
               "static void on_post(void) { gw_x_call(1); }\n");
    /* the names in the comment and in another file's static function are not calls */
    write_file(dir, "call.c",
               "/* gw_x_lonely( is not defined here */\nint\ngw_x_call(int n)\n{\n    return n;\n}\n"
               "static int helper(void) { return 2; }\n");
    write_file(dir, "tools.c", "static int helper(void) { return 3; }\n/* gw_x_send */\nint gw_x_tool(void) { return 0; }\n");
    cr_expect_eq(circle_in(dir, circle, sizeof(circle)), 0, "%s", circle);
    /* call.c now sends through routes.c, which calls it: a circle */
    write_file(dir, "call.c", "int gw_x_call(int n)\n{\n    gw_x_send(n);\n    return n;\n}\n");
    cr_expect_eq(circle_in(dir, circle, sizeof(circle)), 1);
    cr_expect(strstr(circle, "call.c -> routes.c -> call.c") != NULL || strstr(circle, "routes.c -> call.c -> routes.c") != NULL,
              "%s", circle);
    for (const char *const *name = (const char *const[]){"routes.c", "call.c", "tools.c", NULL}; *name != NULL; ++name) {
        snprintf(path, sizeof(path), "%s/%s", dir, *name);
        unlink(path);
    }
    rmdir(dir);
}
