/* tests/e2e/test_editor_api.c: POST /editor (the text-editor tool's commands) on the real kgate, beneath a fresh --workspace-root.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"
#include "support/api.h"
#include "support/gateway.h"
#include "support/http.h"

static ts_gateway_t gw;
static char tmp[256], root[300], outside[300];

static void start(void)
{
    char cmd[4096];
    const char *args[] = {"--workspace-root", root, "--max-undo-depth", "3", NULL};

    snprintf(tmp, sizeof(tmp), "/tmp/kgate-e2e-editor.XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    snprintf(root, sizeof(root), "%s/ws", tmp);
    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    snprintf(cmd, sizeof(cmd),
             "mkdir -p '%s/src/pkg' '%s/.hidden' '%s' && printf 'def f():\\n    return 1\\n\\nprint(f())\\n' > '%s/primes.py'"
             " && printf 'x' > '%s/src/pkg/deep.py' && printf 'y' > '%s/src/top.py' && printf 's' > '%s/secret'"
             " && ln -s '%s' '%s/out'",
             root, root, outside, root, root, root, outside, outside, root);
    cr_assert_eq(system(cmd), 0);
    ts_gateway_opts_t opts = {.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args};
    cr_assert_eq(ts_gateway_start(&gw, &opts), 0, "kgate did not start: %s", gw.error);
}

static void stop(void)
{
    char cmd[400];
    size_t survivors = 0;
    int rc = ts_gateway_stop_keep(&gw, &survivors);

    if (rc != 0)
        ts_gateway_dump_log(&gw, 8192);
    ts_gateway_cleanup(&gw);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(rc, 0, "kgate did not stop cleanly: %s", gw.error);
}

TestSuite(editor_api, .init = start, .fini = stop, .timeout = 60);

/* POST /editor with `body` (a JSON object, stolen); returns the status, *output the "output" string (static copy) or error message.
 */
static int editor(json_t *body, const char **output, const char **code)
{
    static char out[65536], c[64];
    ts_response_t r;
    int status;

    ts_post_json(gw.port, "/editor", NULL, body, &r);
    json_decref(body);
    status = r.status;
    out[0] = c[0] = '\0';
    if (status == 200) {
        cr_assert(json_is_string(json_object_get(r.json, "output")), "no output: %s", r.body);
        snprintf(out, sizeof(out), "%s", json_string_value(json_object_get(r.json, "output")));
    } else {
        char msg[E2E_MSG_SIZE];
        cr_assert(e2e_check_error(&r, status, NULL, msg, sizeof(msg)), "%s", msg);
        snprintf(out, sizeof(out), "%s", json_string_value(json_object_get(r.json, "message")));
        snprintf(c, sizeof(c), "%s", json_string_value(json_object_get(r.json, "code")));
    }
    ts_response_dispose(&r);
    if (output != NULL)
        *output = out;
    if (code != NULL)
        *code = c;
    return status;
}

static char *contents(const char *rel)
{
    static char buf[65536];
    char path[600];
    FILE *fp;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if ((fp = fopen(path, "r")) == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

Test(editor_api, view_file_and_ranges)
{
    const char *out;

    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "primes.py"), &out, NULL), 200);
    cr_assert_str_eq(out, "1: def f():\n2:     return 1\n3: \n4: print(f())");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:[i,i]}", "command", "view", "path", "primes.py", "view_range", 2, 3), &out, NULL),
                 200);
    cr_assert_str_eq(out, "2:     return 1\n3: ");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:[i,i]}", "command", "view", "path", "primes.py", "view_range", 4, -1), &out, NULL),
                 200);
    cr_assert_str_eq(out, "4: print(f())");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:i}", "command", "view", "path", "primes.py", "max_characters", 6), &out, NULL),
                 200);
    cr_assert_str_eq(out, "1: def");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:[i,i]}", "command", "view", "path", "primes.py", "view_range", 5, -1), &out, NULL),
                 400);
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:[i,i]}", "command", "view", "path", "primes.py", "view_range", 3, 2), NULL, NULL),
                 400);
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "nope.py"), &out, NULL), 404);
    cr_assert(strncmp(out, "Error: File not found", 21) == 0, "%s", out);
}

Test(editor_api, view_directory_two_levels_no_hidden)
{
    const char *out;
    char expected[2048];

    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "src"), &out, NULL), 200);
    snprintf(expected, sizeof(expected), "%s/src/pkg/\n%s/src/pkg/deep.py\n%s/src/top.py", root, root, root);
    cr_assert_str_eq(out, expected);
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "."), &out, NULL), 200);
    cr_assert_null(strstr(out, ".hidden"), "hidden entries are left out: %s", out);
    cr_assert_null(strstr(out, "deep.py"), "two levels only: %s", out);
    cr_assert_not_null(strstr(out, "/src/pkg/"), "%s", out);
}

Test(editor_api, str_replace_unique_none_several)
{
    const char *out, *code;

    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "primes.py", "old_str", "return 1",
                                  "new_str", "return 2"),
                        &out, NULL),
                 200);
    cr_assert_str_eq(out, "Successfully replaced text at exactly one location.");
    cr_assert_str_eq(contents("primes.py"), "def f():\n    return 2\n\nprint(f())\n");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "primes.py", "old_str", "nothing here",
                                  "new_str", "x"),
                        &out, &code),
                 400);
    cr_assert_str_eq(code, "NO_MATCH");
    cr_assert_str_eq(out, "Error: No match found for replacement. Please check your text and try again.");
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "primes.py", "old_str", "f()", "new_str", "g()"),
               &out, &code),
        400);
    cr_assert_str_eq(code, "MULTIPLE_MATCHES");
    cr_assert_str_eq(out, "Error: Found 2 matches for replacement text. Please provide more context to make a unique match.");
    cr_assert_str_eq(contents("primes.py"), "def f():\n    return 2\n\nprint(f())\n", "a refused edit changes nothing");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s}", "command", "str_replace", "path", "primes.py", "new_str", "x"), NULL, NULL),
                 400);
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "gone.py", "old_str", "a", "new_str", "b"), NULL,
               &code),
        404);
}

Test(editor_api, insert_top_and_end)
{
    const char *out;

    cr_assert_eq(editor(json_pack("{s:s, s:s, s:i, s:s}", "command", "insert", "path", "primes.py", "insert_line", 0, "new_str",
                                  "\"\"\"doc\"\"\"\n"),
                        &out, NULL),
                 200);
    cr_assert_str_eq(contents("primes.py"), "\"\"\"doc\"\"\"\ndef f():\n    return 1\n\nprint(f())\n");
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:i, s:s}", "command", "insert", "path", "primes.py", "insert_line", 5, "new_str", "# end"),
               &out, NULL),
        200);
    cr_assert_str_eq(contents("primes.py"), "\"\"\"doc\"\"\"\ndef f():\n    return 1\n\nprint(f())\n# end");
    /* insert_text is accepted as another name for new_str */
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:i, s:s}", "command", "insert", "path", "primes.py", "insert_line", 1, "insert_text",
                                  "import os\n"),
                        NULL, NULL),
                 200);
    cr_assert_str_eq(contents("primes.py"), "\"\"\"doc\"\"\"\nimport os\ndef f():\n    return 1\n\nprint(f())\n# end");
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:i, s:s}", "command", "insert", "path", "primes.py", "insert_line", 99, "new_str", "x"), &out,
               NULL),
        400);
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s}", "command", "insert", "path", "primes.py", "new_str", "x"), NULL, NULL), 400);
}

Test(editor_api, create_and_undo_after_each_kind_of_edit)
{
    const char *out, *code;
    char expected[700];

    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:s}", "command", "create", "path", "new/mod.py", "file_text", "a = 1\n"), &out, NULL), 200);
    snprintf(expected, sizeof(expected), "File created successfully at: %s/new/mod.py", root);
    cr_assert_str_eq(out, expected);
    cr_assert_str_eq(contents("new/mod.py"), "a = 1\n");
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "new/mod.py", "old_str", "1", "new_str", "2"),
               NULL, NULL),
        200);
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:i, s:s}", "command", "insert", "path", "new/mod.py", "insert_line", 1, "new_str", "b = 3\n"),
               NULL, NULL),
        200);
    cr_assert_str_eq(contents("new/mod.py"), "a = 2\nb = 3\n");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "new/mod.py"), &out, NULL), 200);
    cr_assert_str_eq(contents("new/mod.py"), "a = 2\n", "undo of insert");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "new/mod.py"), NULL, NULL), 200);
    cr_assert_str_eq(contents("new/mod.py"), "a = 1\n", "undo of str_replace");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "new/mod.py"), NULL, NULL), 200);
    cr_assert_null(contents("new/mod.py"), "undo of create removes the file");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "new/mod.py"), &out, &code), 400);
    cr_assert_str_eq(code, "NO_EDIT_HISTORY");
    /* create over an existing file replaces it; undo brings it back */
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s}", "command", "create", "path", "primes.py", "file_text", "new\n"), NULL, NULL),
                 200);
    cr_assert_str_eq(contents("primes.py"), "new\n");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "primes.py"), NULL, NULL), 200);
    cr_assert_str_eq(contents("primes.py"), "def f():\n    return 1\n\nprint(f())\n");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "create", "path", "x.py"), NULL, NULL), 400, "file_text is required");
}

Test(editor_api, undo_history_is_bounded)
{
    int i;
    char text[16];

    /* --max-undo-depth 3: four edits, three undos, then nothing */
    for (i = 0; i != 4; ++i) {
        snprintf(text, sizeof(text), "v%d\n", i);
        cr_assert_eq(editor(json_pack("{s:s, s:s, s:s}", "command", "create", "path", "h.txt", "file_text", text), NULL, NULL),
                     200);
    }
    for (i = 0; i != 3; ++i)
        cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "h.txt"), NULL, NULL), 200);
    cr_assert_str_eq(contents("h.txt"), "v0\n");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "undo_edit", "path", "h.txt"), NULL, NULL), 400);
}

Test(editor_api, confined_to_the_workspace)
{
    const char *code;
    char path[600];

    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "../../etc/passwd"), NULL, &code), 403);
    cr_assert_str_eq(code, "PATH_OUTSIDE_WORKSPACE");
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "/etc/passwd"), NULL, &code), 403);
    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "view", "path", "out/secret"), NULL, &code), 403);
    cr_assert_str_eq(code, "PATH_OUTSIDE_WORKSPACE");
    cr_assert_eq(editor(json_pack("{s:s, s:s, s:s}", "command", "create", "path", "out/planted", "file_text", "x"), NULL, &code),
                 403);
    cr_assert_eq(
        editor(json_pack("{s:s, s:s, s:s, s:s}", "command", "str_replace", "path", "out/secret", "old_str", "s", "new_str", "t"),
               NULL, &code),
        403);
    snprintf(path, sizeof(path), "%s/planted", outside);
    cr_assert_neq(access(path, F_OK), 0, "a file was created outside the root");
    snprintf(path, sizeof(path), "%s/secret", outside);
    {
        FILE *fp = fopen(path, "r");
        char c = 0;
        cr_assert_not_null(fp);
        cr_assert_eq(fread(&c, 1, 1, fp), 1);
        fclose(fp);
        cr_assert_eq(c, 's', "the secret was edited");
    }
}

Test(editor_api, bad_requests)
{
    const char *code;

    cr_assert_eq(editor(json_pack("{s:s, s:s}", "command", "delete", "path", "primes.py"), NULL, &code), 400);
    cr_assert_str_eq(code, "INVALID_PARAMETER");
    cr_assert_eq(editor(json_pack("{s:s}", "command", "view"), NULL, &code), 400);
    cr_assert_str_eq(code, "INVALID_REQUEST_BODY");
    cr_assert_eq(editor(json_pack("{s:s, s:i}", "command", "view", "path", 3), NULL, NULL), 400);
}
