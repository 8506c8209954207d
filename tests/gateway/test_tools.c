/* tests/gateway/test_tools.c: code mode's codec: tool declarations, Python names, setup code, batches. */
#include <string.h>
#include <criterion/criterion.h>
#include "core/config.h"
#include "core/errors.h"
#include "code/tools.h"

static gw_config_t config;

static void setup(void)
{
    gw_config_init(&config);
}

static void teardown(void)
{
    gw_config_dispose(&config);
}

TestSuite(tools, .init = setup, .fini = teardown);

static void expect_ident(const char *name, const char *ident)
{
    char *got = gw_tool_python_ident(name);
    cr_expect_str_eq(got, ident, "%s -> %s, expected %s", name, got, ident);
    free(got);
}

Test(tools, names_become_python_identifiers)
{
    expect_ident("search_records", "search_records");
    expect_ident("search-records", "search_records");
    expect_ident("github.list issues", "github_list_issues");
    expect_ident("2fa", "_2fa");
    expect_ident("class", "class_");
    expect_ident("None", "None_");
    expect_ident("match", "match"); /* a soft keyword is a fine name */
    expect_ident("caf\xc3\xa9", "caf_");
    expect_ident("\xf0\x9f\x94\x8d-find", "__find");
    expect_ident("", "_");
}

/* gw_toolset_parse's answer for `json`: 0 with the set, or the error message in err. */
static int parse(const char *json, gw_toolset_t **set, char *err, size_t errsize)
{
    json_t *tools = json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    int ret;
    cr_assert_not_null(tools, "bad test JSON %s", json);
    ret = gw_toolset_parse(tools, &config, set, err, errsize);
    json_decref(tools);
    return ret;
}

static void expect_refused(const char *json, const char *words)
{
    gw_toolset_t *set = NULL;
    char err[512] = "";
    cr_expect_eq(parse(json, &set, err, sizeof(err)), GW_ETOOLSINVALID, "%s was accepted", json);
    cr_expect_null(set);
    cr_expect_not_null(strstr(err, words), "%s: \"%s\" lacks \"%s\"", json, err, words);
}

Test(tools, declarations_are_parsed_and_named)
{
    gw_toolset_t *set = NULL;
    char err[512] = "";

    cr_assert_eq(parse("[{\"name\":\"search-records\",\"description\":\"Find\",\"input_schema\":{\"type\":\"object\"}},"
                       "{\"name\":\"get\"}]",
                       &set, err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(set->num_tools, 2);
    cr_expect_str_eq(set->tools[0].name, "search-records");
    cr_expect_str_eq(set->tools[0].ident, "search_records");
    cr_expect_str_eq(set->tools[0].description, "Find");
    cr_expect(json_is_object(set->tools[0].input_schema));
    cr_expect_null(set->tools[1].description);
    cr_expect_eq(gw_toolset_find(set, "get"), &set->tools[1]);
    cr_expect_null(gw_toolset_find(set, "search_records"), "found by the declared name only");
    gw_toolset_destroy(set);
    cr_expect_eq(parse("[]", &set, err, sizeof(err)), 0);
    cr_expect_null(set, "no tools: no toolset");
    cr_expect_eq(parse("null", &set, err, sizeof(err)), 0);
    cr_expect_null(set);
}

Test(tools, bad_declarations_are_refused_with_a_reason)
{
    char many[8192];
    size_t len = 0;

    expect_refused("{}", "must be an array");
    expect_refused("[\"x\"]", "tools[0] must be an object");
    expect_refused("[{}]", "tools[0].name");
    expect_refused("[{\"name\":\"\"}]", "tools[0].name");
    expect_refused("[{\"name\":\"a\\nb\"}]", "control characters");
    expect_refused("[{\"name\":\"a\\u0000b\"}]", "control characters");
    expect_refused("[{\"name\":\"a\",\"description\":3}]", "description");
    expect_refused("[{\"name\":\"a\",\"input_schema\":[]}]", "input_schema");
    expect_refused("[{\"name\":\"a\"},{\"name\":\"a\"}]", "declared twice");
    expect_refused("[{\"name\":\"search-records\"},{\"name\":\"search_records\"}]", "both be the Python function search_records()");
    config.max_tools = 3;
    len += (size_t)snprintf(many + len, sizeof(many) - len, "[");
    for (int i = 0; i < 4; i++)
        len += (size_t)snprintf(many + len, sizeof(many) - len, "%s{\"name\":\"t%d\"}", i ? "," : "", i);
    snprintf(many + len, sizeof(many) - len, "]");
    expect_refused(many, "--max-tools");
    config.max_tool_spec_bytes = 40;
    expect_refused("[{\"name\":\"a\",\"description\":\"a long description of this tool\"}]", "--max-tool-spec-bytes");
}

Test(tools, the_setup_code_carries_the_shim_and_the_tools_as_python_literals)
{
    gw_toolset_t *set = NULL;
    char err[512] = "";
    char *code;

    cr_assert_eq(parse("[{\"name\":\"say/\\\"hi\\\"\",\"description\":\"it's \\u00e9\\n\"}]", &set, err, sizeof(err)), 0);
    code = gw_toolset_python_setup(set, &config);
    cr_expect_eq(strncmp(code, "exec(\"import sys, types\\n", 25), 0, "%.80s", code);
    cr_expect_not_null(strstr(code, "def install(spec_text)"), "the shim's source");
    cr_expect_null(strstr(code, "\\/"), "'\\/' is no Python escape: slashes stay as they are");
    cr_expect_not_null(strstr(code, "say__hi_"), "the identifier");
    cr_expect_not_null(strstr(code, "\\\"max_argument_bytes\\\":1048576"));
    free(code);
    gw_toolset_destroy(set);
}

Test(tools, marked_prompts_carry_batches)
{
    json_t *calls;

    cr_expect_eq(gw_tool_batch_parse("Name: ", &calls), 0);
    cr_expect_null(calls);
    cr_expect_eq(gw_tool_batch_parse(NULL, &calls), 0);
    cr_expect_eq(gw_tool_batch_parse(GW_TOOL_CALLS_MARK "{\"calls\":[{\"name\":\"a\",\"arguments\":{}}]}", &calls), 1);
    cr_assert(json_is_array(calls));
    cr_expect_eq(json_array_size(calls), 1);
    json_decref(calls);
    cr_expect_eq(gw_tool_batch_parse(GW_TOOL_CALLS_MARK "{\"calls\":{}}", &calls), 1);
    cr_expect_null(calls, "marked but malformed");
    cr_expect_eq(gw_tool_batch_parse(GW_TOOL_CALLS_MARK "[", &calls), 1);
    cr_expect_null(calls);
}
