/* tests/gateway/test_envfile.c: the EXECD_ENVS parser (procs/envfile.h) against upstream execd's rules (its env.go and Go's
 * os.ExpandEnv): comments, blanks, '=' inside values, quotes and backslashes kept, every form of $ reference, unset variables,
 * NUL bytes, and the bound on one variable. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "procs/envfile.h"

TestSuite(envfile, .init = wire_global_init);

/* The environment the file is expanded against: HOME, BASE, EMPTY (set, empty), ONE ("1"), LONG (64 KiB of 'x'). */
static const char *lookup(const char *name, void *ctx)
{
    static char *longvalue;
    (void)ctx;
    if (strcmp(name, "HOME") == 0)
        return "/home/ada";
    if (strcmp(name, "BASE") == 0)
        return "/opt/base";
    if (strcmp(name, "EMPTY") == 0)
        return "";
    if (strcmp(name, "ONE") == 0 || strcmp(name, "1") == 0)
        return "1";
    if (strcmp(name, "LONG") == 0) {
        if (longvalue == NULL) {
            longvalue = malloc(64 * 1024 + 1);
            memset(longvalue, 'x', 64 * 1024);
            longvalue[64 * 1024] = '\0';
        }
        return longvalue;
    }
    return NULL;
}

typedef struct st_skips_t {
    size_t n, lines[16];
    char why[16][128];
} skips_t;

static void on_skip(size_t lineno, const char *why, void *ctx)
{
    skips_t *s = ctx;
    if (s->n < 16) {
        s->lines[s->n] = lineno;
        snprintf(s->why[s->n], sizeof(s->why[0]), "%s", why);
    }
    ++s->n;
}

static json_t *parse(const char *text, skips_t *skips)
{
    memset(skips, 0, sizeof(*skips));
    return gw_envfile_parse(text, strlen(text), lookup, NULL, on_skip, skips);
}

static void expect(json_t *vars, const char *name, const char *value)
{
    json_t *v = json_object_get(vars, name);
    cr_assert_not_null(v, "%s missing from %s", name, json_dumps(vars, JSON_COMPACT));
    cr_assert_str_eq(json_string_value(v), value, "%s", name);
}

static char *expand(const char *value)
{
    char *out = gw_envfile_expand(value, lookup, NULL, 1 << 20);
    cr_assert_not_null(out);
    return out;
}

#define EXPECT_EXPANDS(in, want)                                                                                                   \
    do {                                                                                                                           \
        char *got_ = expand(in);                                                                                                   \
        cr_assert_str_eq(got_, want, "expanding [%s]", in);                                                                        \
        free(got_);                                                                                                                \
    } while (0)

/* upstream's own test file: a comment, a value, a reference, a line without '=', an empty value, an empty line */
Test(envfile, upstream_example)
{
    skips_t skips;
    json_t *vars = parse("# comment\nFOO=bar\nPATH=$BASE/bin\nMALFORMED\nEMPTY=\n\n", &skips);

    cr_assert_eq(json_object_size(vars), 3);
    expect(vars, "FOO", "bar");
    expect(vars, "PATH", "/opt/base/bin");
    expect(vars, "EMPTY", "");
    cr_assert_eq(skips.n, 1);
    cr_assert_eq(skips.lines[0], 4);
    json_decref(vars);
}

/* lines are trimmed (CRLF files too), indented comments are comments, a later line wins, the name is kept as written */
Test(envfile, trimming_comments_and_repeats)
{
    skips_t skips;
    json_t *vars = parse("  A=1  \r\n\t# indented comment\nB = two\nA=3\nC=x # not a comment\n#D=4\n", &skips);

    expect(vars, "A", "3");
    expect(vars, "B ", " two");
    expect(vars, "C", "x # not a comment");
    cr_assert_null(json_object_get(vars, "D"));
    cr_assert_eq(json_object_size(vars), 3);
    cr_assert_eq(skips.n, 0);
    json_decref(vars);
}

/* upstream does not unquote: quotes, backslashes and '=' after the first are part of the value */
Test(envfile, quotes_escapes_and_equals_are_kept)
{
    skips_t skips;
    json_t *vars = parse("Q=\"a b\"\nS='$HOME'\nE=a\\$HOME\nU=a=b=c\nN=\\n\n", &skips);

    expect(vars, "Q", "\"a b\"");
    expect(vars, "S", "'/home/ada'");
    expect(vars, "E", "a\\/home/ada");
    expect(vars, "U", "a=b=c");
    expect(vars, "N", "\\n");
    json_decref(vars);
}

/* Go's os.Expand, case by case */
Test(envfile, references)
{
    EXPECT_EXPANDS("$HOME", "/home/ada");
    EXPECT_EXPANDS("${HOME}", "/home/ada");
    EXPECT_EXPANDS("${HOME}x", "/home/adax");
    EXPECT_EXPANDS("$HOMEx", ""); /* the name runs to the last alphanumeric */
    EXPECT_EXPANDS("$HOME-x", "/home/ada-x");
    EXPECT_EXPANDS("$UNSET", ""); /* unset: nothing */
    EXPECT_EXPANDS("a${UNSET}b", "ab");
    EXPECT_EXPANDS("$EMPTY.", ".");
    EXPECT_EXPANDS("$1", "1");   /* one-character special names */
    EXPECT_EXPANDS("$12", "12"); /* ... only one character */
    EXPECT_EXPANDS("${1}", "1");
    EXPECT_EXPANDS("$", "$"); /* at the end: kept */
    EXPECT_EXPANDS("a$", "a$");
    EXPECT_EXPANDS("$ x", "$ x"); /* not a name: kept */
    EXPECT_EXPANDS("$/x", "$/x");
    EXPECT_EXPANDS("${}x", "x");      /* bad syntax: dropped */
    EXPECT_EXPANDS("${HOME", "HOME"); /* unclosed: "${" dropped */
    EXPECT_EXPANDS("${A B}", "");     /* any text up to '}' is the name */
    EXPECT_EXPANDS("$$", "");         /* "$$" is the special name "$", unset here */
    EXPECT_EXPANDS("$ONE$ONE${ONE}", "111");
    EXPECT_EXPANDS("no refs", "no refs");
    EXPECT_EXPANDS("", "");
}

/* variables earlier in the file are not seen by later lines: only the environment is, as upstream */
Test(envfile, earlier_lines_are_not_the_environment)
{
    skips_t skips;
    json_t *vars = parse("X=1\nY=$X\n", &skips);

    expect(vars, "Y", "");
    json_decref(vars);
}

/* where kgate differs: what no command could receive is skipped and said, with its line number */
Test(envfile, empty_name_and_nul_are_skipped)
{
    static const char text[] = "=value\nGOOD=1\nBAD=a\0b\nAFTER=2\n";
    skips_t skips = {0};
    json_t *vars = gw_envfile_parse(text, sizeof(text) - 1, lookup, NULL, on_skip, &skips);

    cr_assert_eq(json_object_size(vars), 2);
    expect(vars, "GOOD", "1");
    expect(vars, "AFTER", "2");
    cr_assert_eq(skips.n, 2);
    cr_assert_eq(skips.lines[0], 1);
    cr_assert(strstr(skips.why[0], "empty name") != NULL);
    cr_assert_eq(skips.lines[1], 3);
    cr_assert(strstr(skips.why[1], "NUL") != NULL);
    json_decref(vars);
}

/* one variable over 128 KiB (execve's E2BIG), written or expanded, is skipped; the lines around it are not; one at the bound
 * is kept */
Test(envfile, lines_over_the_bound)
{
    size_t big = GW_ENVFILE_MAX_VAR_BYTES;
    char *text = malloc(2 * big + 64), *p = text;
    skips_t skips = {0};
    json_t *vars;

    p += sprintf(p, "A=1\nBIG=");
    memset(p, 'y', big - 4 + 1); /* "BIG=" + value: one byte over */
    p += big - 4 + 1;
    p += sprintf(p, "\nFIT=");
    memset(p, 'z', big - 4); /* "FIT=" + value: exactly the bound */
    p += big - 4;
    p += sprintf(p, "\nX=$LONG$LONG\nZ=2\n");
    vars = gw_envfile_parse(text, (size_t)(p - text), lookup, NULL, on_skip, &skips);
    expect(vars, "A", "1");
    expect(vars, "Z", "2");
    cr_assert_null(json_object_get(vars, "BIG"));
    cr_assert_null(json_object_get(vars, "X"), "64 KiB twice is over the bound once expanded");
    cr_assert_eq(strlen(json_string_value(json_object_get(vars, "FIT"))), big - 4);
    cr_assert_eq(skips.n, 2);
    cr_assert_eq(skips.lines[0], 2);
    cr_assert_eq(skips.lines[1], 4);
    json_decref(vars);
    free(text);
}

/* an empty file, one of blanks only, and one without a final newline */
Test(envfile, edges_of_the_file)
{
    skips_t skips;
    json_t *vars = parse("", &skips);
    cr_assert_eq(json_object_size(vars), 0);
    json_decref(vars);
    vars = parse("\n\n  \n", &skips);
    cr_assert_eq(json_object_size(vars), 0);
    json_decref(vars);
    vars = parse("LAST=1", &skips);
    expect(vars, "LAST", "1");
    json_decref(vars);
}
