/* tests/gateway/test_sandbox_opts.c: a context's "sandbox" and "limits" body fields against the server's maxima. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "code/sandbox.h"
#include "core/config.h"
#include "gw_test.h"

TestSuite(sandbox_opts, .init = gw_test_init);

/* Parses `body_text` with `config`; returns parse's result, the result in `*out` and the message in `err`. */
static int parse(const gw_config_t *config, const char *body_text, gw_context_sandbox_t *out, char *err, size_t errlen)
{
    json_t *body = json_loads(body_text, 0, NULL);
    int ret;

    cr_assert_not_null(body, "bad test JSON: %s", body_text);
    err[0] = '\0';
    ret = gw_context_sandbox_parse(body, config, out, err, errlen);
    json_decref(body);
    return ret;
}

Test(sandbox_opts, defaults_are_the_maxima)
{
    gw_config_t config;
    gw_context_sandbox_t sb;
    char err[256];

    gw_config_init(&config);
    cr_assert_eq(parse(&config, "{}", &sb, err, sizeof(err)), 0);
    cr_assert_eq(sb.share_net, 0);
    cr_assert_eq(sb.limits.memory_bytes, 0);
    cr_assert_eq(sb.limits.pids, 0);
    config.max_memory_mb = 512;
    config.max_pids = 100;
    config.max_file_size_mb = 10;
    cr_assert_eq(parse(&config, "{\"limits\": null, \"sandbox\": null}", &sb, err, sizeof(err)), 0);
    cr_assert_eq(sb.limits.memory_bytes, 512ull << 20);
    cr_assert_eq(sb.limits.pids, 100);
    cr_assert_eq(sb.limits.file_size_bytes, 10ull << 20);
    cr_assert_eq(sb.limits.cpu_seconds, 0);
    gw_config_dispose(&config);
}

Test(sandbox_opts, every_field)
{
    gw_config_t config;
    gw_context_sandbox_t sb;
    char err[256];

    gw_config_init(&config);
    cr_assert_eq(parse(&config,
                       "{\"sandbox\": {\"share_net\": true}, \"limits\": {\"memory_mb\": 256, \"pids\": 64, \"cpu_seconds\": 30,"
                       " \"open_files\": 128, \"file_size_mb\": 5}}",
                       &sb, err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(sb.share_net, 1);
    cr_assert_eq(sb.limits.memory_bytes, 256ull << 20);
    cr_assert_eq(sb.limits.pids, 64);
    cr_assert_eq(sb.limits.cpu_seconds, 30);
    cr_assert_eq(sb.limits.open_files, 128);
    cr_assert_eq(sb.limits.file_size_bytes, 5ull << 20);
    gw_config_dispose(&config);
}

Test(sandbox_opts, refusals)
{
    static const struct {
        const char *body, *needle;
    } cases[] = {
        {"{\"sandbox\": true}", "sandbox must be an object"},
        {"{\"sandbox\": {\"share_net\": 1}}", "share_net must be true or false"},
        {"{\"sandbox\": {\"net\": true}}", "sandbox.net is not a sandbox option"},
        {"{\"limits\": []}", "limits must be an object"},
        {"{\"limits\": {\"memory\": 5}}", "limits.memory is not a limit"},
        {"{\"limits\": {\"memory_mb\": 0}}", "memory_mb must be a positive integer"},
        {"{\"limits\": {\"pids\": -3}}", "pids must be a positive integer"},
        {"{\"limits\": {\"pids\": 2.5}}", "pids must be a positive integer"},
        {"{\"limits\": {\"pids\": \"64\"}}", "pids must be a positive integer"},
        {"{\"limits\": {\"memory_mb\": 9223372036854775807}}", "memory_mb must be a positive integer"},
        {"{\"limits\": {\"memory_mb\": 2048}}", "above this server's maximum of 1024 (--max-memory-mb)"},
    };
    gw_config_t config;
    gw_context_sandbox_t sb;
    char err[256];

    gw_config_init(&config);
    config.max_memory_mb = 1024;
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        cr_assert_eq(parse(&config, cases[i].body, &sb, err, sizeof(err)), -1, "%s", cases[i].body);
        cr_assert_not_null(strstr(err, cases[i].needle), "%s: %s", cases[i].body, err);
    }
    /* at the maximum is fine */
    cr_assert_eq(parse(&config, "{\"limits\": {\"memory_mb\": 1024}}", &sb, err, sizeof(err)), 0, "%s", err);
    gw_config_dispose(&config);
}

Test(sandbox_opts, to_json)
{
    gw_context_sandbox_t sb = {.share_net = 0, .limits = {.memory_bytes = 256ull << 20, .pids = 64}};
    json_t *j = gw_context_limits_to_json(&sb.limits), *s = gw_context_sandbox_to_json(&sb, 1);
    char *text = json_dumps(j, JSON_SORT_KEYS), *stext = json_dumps(s, JSON_SORT_KEYS);

    cr_assert_str_eq(text, "{\"memory_mb\": 256, \"pids\": 64}");
    cr_assert_str_eq(stext, "{\"profile\": \"bwrap\", \"share_net\": false}");
    free(text);
    free(stext);
    json_decref(j);
    json_decref(s);
}
