/* tests/gateway/test_editor.c: the text-editor tool's commands on contents in memory, and the undo history's bounds. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "files/editor.h"
#include "gw_test.h"

TestSuite(editor, .init = gw_test_init);

#define NO_LIMIT ((size_t)1 << 30)

/* ---- view ------------------------------------------------------------------------------------- */

typedef struct st_view_case_t {
    const char *content;
    long start, end;
    size_t max_chars;
    int expected;
    const char *output;
    int truncated;
} view_case_t;

static const view_case_t view_cases[] = {
    /* the tool's own example format: "<n>: <line>", no newline after the last */
    {"def f():\n    return 1\n", 1, -1, 0, 0, "1: def f():\n2:     return 1", 0},
    {"a\nb\nc", 1, -1, 0, 0, "1: a\n2: b\n3: c", 0},
    {"a\n\nc\n", 1, -1, 0, 0, "1: a\n2: \n3: c", 0},
    {"a\nb\nc\nd\n", 2, 3, 0, 0, "2: b\n3: c", 0},
    {"a\nb\nc\nd\n", 3, -1, 0, 0, "3: c\n4: d", 0},
    {"a\nb\nc\nd\n", 4, 4, 0, 0, "4: d", 0},
    {"a\nb\nc\nd\n", 2, 99, 0, 0, "2: b\n3: c\n4: d", 0}, /* an end past the last line is clamped */
    {"", 1, -1, 0, 0, "", 0},
    {"a\nb\n", 0, -1, 0, GW_EEDITOR_INVALIDRANGE, NULL, 0},
    {"a\nb\n", 3, -1, 0, GW_EEDITOR_INVALIDRANGE, NULL, 0},
    {"a\nb\n", 2, 1, 0, GW_EEDITOR_INVALIDRANGE, NULL, 0},
    {"a\nb\n", 1, -2, 0, GW_EEDITOR_INVALIDRANGE, NULL, 0},
    {"", 2, -1, 0, GW_EEDITOR_INVALIDRANGE, NULL, 0},
    /* max_characters counts characters of the rendered text, cut at a character boundary */
    {"abcdef\n", 1, -1, 5, 0, "1: ab", 1},
    {"abc\n", 1, -1, 6, 0, "1: abc", 0},
    {"\xc3\xa9\xc3\xa9\xc3\xa9\n", 1, -1, 4, 0, "1: \xc3\xa9", 1},
};

Test(editor, view_table)
{
    size_t i;

    for (i = 0; i != sizeof(view_cases) / sizeof(view_cases[0]); ++i) {
        const view_case_t *c = &view_cases[i];
        size_t len = strlen(c->content), out_len = 0;
        char *in = gw_test_exact_copy(c->content, len), *out = NULL;
        int truncated = -1;
        int ret = gw_editor_view(in, len, c->start, c->end, c->max_chars, &out, &out_len, &truncated);
        cr_assert_eq(ret, c->expected, "case %zu: got %d, expected %d", i, ret, c->expected);
        if (ret == 0) {
            cr_assert_str_eq(out, c->output, "case %zu", i);
            cr_assert_eq(out_len, strlen(c->output), "case %zu", i);
            cr_assert_eq(truncated, c->truncated, "case %zu", i);
            free(out);
        }
        free(in);
    }
}

Test(editor, count_lines)
{
    cr_assert_eq(gw_editor_count_lines("", 0), 0);
    cr_assert_eq(gw_editor_count_lines("a", 1), 1);
    cr_assert_eq(gw_editor_count_lines("a\n", 2), 1);
    cr_assert_eq(gw_editor_count_lines("a\nb", 3), 2);
    cr_assert_eq(gw_editor_count_lines("\n\n", 2), 2);
}

/* ---- str_replace ------------------------------------------------------------------------------ */

typedef struct st_replace_case_t {
    const char *content, *old, *new_;
    int expected;
    size_t matches;
    const char *output;
} replace_case_t;

static const replace_case_t replace_cases[] = {
    {"for x in y\n    pass\n", "for x in y", "for x in y:", 0, 1, "for x in y:\n    pass\n"},
    {"abc", "b", "", 0, 1, "ac"},
    {"abc", "abc", "xyz", 0, 1, "xyz"},
    {"  indented\n", "indented", "moved", 0, 1, "  moved\n"},
    {"abc", "x", "y", GW_EEDITOR_NOMATCH, 0, NULL},
    {"a a a", "a", "b", GW_EEDITOR_MULTIPLEMATCHES, 3, NULL},
    {"aaaa", "aa", "b", GW_EEDITOR_MULTIPLEMATCHES, 2, NULL}, /* counted without overlap */
    {"aaa", "aa", "b", 0, 1, "ba"},
    {"x  y", " y", "Y", 0, 1, "x Y"}, /* whitespace must match exactly */
    {"x  y", "x y", "Y", GW_EEDITOR_NOMATCH, 0, NULL},
    {"abc", "", "y", GW_EEDITOR_EMPTYOLDSTR, 0, NULL},
};

Test(editor, str_replace_table)
{
    size_t i;

    for (i = 0; i != sizeof(replace_cases) / sizeof(replace_cases[0]); ++i) {
        const replace_case_t *c = &replace_cases[i];
        size_t len = strlen(c->content), out_len, matches = 99;
        char *in = gw_test_exact_copy(c->content, len), *out = NULL;
        int ret =
            gw_editor_str_replace(in, len, c->old, strlen(c->old), c->new_, strlen(c->new_), NO_LIMIT, &out, &out_len, &matches);
        cr_assert_eq(ret, c->expected, "case %zu: got %d (%s)", i, ret, gw_strerror(ret));
        cr_assert_eq(matches, c->matches, "case %zu: %zu matches", i, matches);
        if (ret == 0) {
            cr_assert_eq(out_len, strlen(c->output));
            cr_assert_str_eq(out, c->output, "case %zu", i);
            free(out);
        }
        free(in);
    }
}

Test(editor, messages_are_the_tools)
{
    char msg[256];

    cr_assert_str_eq(gw_strerror(GW_EEDITOR_NOMATCH),
                     "Error: No match found for replacement. Please check your text and try again.");
    gw_editor_multiple_matches_message(3, msg, sizeof(msg));
    cr_assert_str_eq(msg, "Error: Found 3 matches for replacement text. Please provide more context to make a unique match.");
}

Test(editor, str_replace_size_bound)
{
    char *out;
    size_t out_len, matches;

    cr_assert_eq(gw_editor_str_replace("abc", 3, "b", 1, "0123456789", 10, 11, &out, &out_len, &matches), GW_EEDITOR_TOOLARGE);
    cr_assert_eq(gw_editor_str_replace("abc", 3, "b", 1, "012345678", 9, 11, &out, &out_len, &matches), 0);
    free(out);
}

/* ---- insert ----------------------------------------------------------------------------------- */

typedef struct st_insert_case_t {
    const char *content;
    long line;
    const char *text;
    int expected;
    const char *output;
} insert_case_t;

static const insert_case_t insert_cases[] = {
    {"a\nb\n", 0, "top\n", 0, "top\na\nb\n"},
    {"a\nb\n", 1, "mid\n", 0, "a\nmid\nb\n"},
    {"a\nb\n", 2, "end\n", 0, "a\nb\nend\n"},
    {"a\nb\n", 1, "no newline", 0, "a\nno newline\nb\n"}, /* whole lines: a newline is added before what follows */
    {"a\nb", 2, "end", 0, "a\nb\nend"},                   /* the last line lacked its newline */
    {"a\nb", 1, "x\ny\n", 0, "a\nx\ny\nb"},
    {"", 0, "first\n", 0, "first\n"},
    {"", 0, "first", 0, "first"},
    {"a\n", 0, "", 0, "\na\n"},
    {"a\nb\n", 3, "x", GW_EEDITOR_INVALIDLINE, NULL},
    {"a\nb\n", -1, "x", GW_EEDITOR_INVALIDLINE, NULL},
    {"", 1, "x", GW_EEDITOR_INVALIDLINE, NULL},
};

Test(editor, insert_table)
{
    size_t i;

    for (i = 0; i != sizeof(insert_cases) / sizeof(insert_cases[0]); ++i) {
        const insert_case_t *c = &insert_cases[i];
        size_t len = strlen(c->content), out_len;
        char *in = gw_test_exact_copy(c->content, len), *out = NULL;
        int ret = gw_editor_insert(in, len, c->line, c->text, strlen(c->text), NO_LIMIT, &out, &out_len);
        cr_assert_eq(ret, c->expected, "case %zu: got %d", i, ret);
        if (ret == 0) {
            cr_assert_str_eq(out, c->output, "case %zu", i);
            cr_assert_eq(out_len, strlen(c->output));
            free(out);
        }
        free(in);
    }
}

/* ---- undo history ----------------------------------------------------------------------------- */

static void pop_expect(gw_editor_history_t *h, const char *key, const char *content)
{
    char *got;
    size_t len;
    int existed;

    cr_assert_eq(gw_editor_history_pop(h, key, &got, &len, &existed), 0, "%s: nothing to undo", key);
    if (content == NULL) {
        cr_assert_eq(existed, 0);
        cr_assert_null(got);
    } else {
        cr_assert_eq(existed, 1);
        cr_assert_eq(len, strlen(content));
        cr_assert_str_eq(got, content);
    }
    free(got);
}

Test(editor, undo_after_each_kind_of_edit)
{
    gw_editor_history_t *h = gw_editor_history_create(10, 1 << 20);
    char *v1 = NULL, *v2 = NULL, *v3 = NULL;
    size_t l1, l2, l3, matches;
    char *got;
    size_t len;
    int existed;

    /* create (the file did not exist), then str_replace, then insert: undo walks back in order */
    gw_editor_history_push(h, "f", NULL, 0, 0);
    v1 = strdup("a\nb\n");
    l1 = strlen(v1);
    cr_assert_eq(gw_editor_str_replace(v1, l1, "b", 1, "B", 1, NO_LIMIT, &v2, &l2, &matches), 0);
    gw_editor_history_push(h, "f", v1, l1, 1);
    cr_assert_eq(gw_editor_insert(v2, l2, 0, "top\n", 4, NO_LIMIT, &v3, &l3), 0);
    gw_editor_history_push(h, "f", v2, l2, 1);
    cr_assert_eq(gw_editor_history_depth(h, "f"), 3);
    pop_expect(h, "f", "a\nB\n");
    pop_expect(h, "f", "a\nb\n");
    pop_expect(h, "f", NULL);
    cr_assert_eq(gw_editor_history_pop(h, "f", &got, &len, &existed), GW_EEDITOR_NOHISTORY);
    cr_assert_eq(gw_editor_history_bytes(h), 0, "everything accounted for is released");
    free(v1);
    free(v2);
    free(v3);
    gw_editor_history_destroy(h);
}

Test(editor, undo_depth_bound)
{
    gw_editor_history_t *h = gw_editor_history_create(3, 1 << 20);
    char v[8];
    int i;

    for (i = 0; i != 5; ++i) {
        snprintf(v, sizeof(v), "v%d", i);
        gw_editor_history_push(h, "f", v, strlen(v), 1);
    }
    cr_assert_eq(gw_editor_history_depth(h, "f"), 3);
    pop_expect(h, "f", "v4");
    pop_expect(h, "f", "v3");
    pop_expect(h, "f", "v2");
    cr_assert_eq(gw_editor_history_depth(h, "f"), 0);
    gw_editor_history_destroy(h);
}

Test(editor, undo_byte_bound_drops_least_recent_files)
{
    gw_editor_history_t *h = gw_editor_history_create(10, 4096);
    char big[1500];

    memset(big, 'x', sizeof(big));
    gw_editor_history_push(h, "old", big, sizeof(big), 1);
    gw_editor_history_push(h, "mid", big, sizeof(big), 1);
    gw_editor_history_push(h, "new", big, sizeof(big), 1);
    cr_assert_leq(gw_editor_history_bytes(h), 4096);
    cr_assert_eq(gw_editor_history_depth(h, "old"), 0, "the least recently edited file goes first");
    cr_assert_eq(gw_editor_history_depth(h, "new"), 1);
    /* a version that alone exceeds the bound forgets that file's history rather than keeping a gap */
    {
        char *huge = calloc(1, 8192);
        gw_editor_history_push(h, "new", huge, 8192, 1);
        cr_assert_eq(gw_editor_history_depth(h, "new"), 0);
        free(huge);
    }
    cr_assert_leq(gw_editor_history_bytes(h), 4096);
    gw_editor_history_destroy(h);
}

Test(editor, history_keys_are_independent)
{
    gw_editor_history_t *h = gw_editor_history_create(10, 1 << 20);
    char *got;
    size_t len;
    int existed;

    gw_editor_history_push(h, "a", "A", 1, 1);
    gw_editor_history_push(h, "b", "B", 1, 1);
    pop_expect(h, "a", "A");
    cr_assert_eq(gw_editor_history_pop(h, "a", &got, &len, &existed), GW_EEDITOR_NOHISTORY);
    pop_expect(h, "b", "B");
    gw_editor_history_destroy(h);
    gw_editor_history_destroy(NULL);
}
