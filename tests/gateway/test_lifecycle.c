/* tests/gateway/test_lifecycle.c: the lifecycle config (app/lifecycle.h) validated as upstream's config.go validates it, and
 * the startup status file's lines. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "app/lifecycle.h"

TestSuite(lifecycle, .init = wire_global_init);

/* Parses `text`; returns 0 or -1, with the message in `why`. */
static int parse(const char *text, gw_lifecycle_t *lc, char *why, size_t size)
{
    json_error_t err;
    json_t *config = json_loads(text, JSON_ALLOW_NUL, &err);
    int ret;

    cr_assert_not_null(config, "%s: %s", text, err.text);
    why[0] = '\0';
    ret = gw_lifecycle_parse(config, lc, why, size);
    json_decref(config);
    return ret;
}

Test(lifecycle, a_prestart_and_its_timeout)
{
    gw_lifecycle_t lc;
    char why[256];

    cr_assert_eq(parse("{\"version\": 1, \"preStart\": {\"command\": [\"sh\", \"-c\", \"a b\"], \"timeoutSeconds\": 9}}", &lc, why,
                       sizeof(why)),
                 0, "%s", why);
    cr_assert_str_eq(lc.prestart[0], "sh");
    cr_assert_str_eq(lc.prestart[2], "a b");
    cr_assert_null(lc.prestart[3]);
    cr_assert_eq(lc.prestart_timeout_s, 9);
    gw_lifecycle_dispose(&lc);
    /* no version is version 1; no timeout, or 0, is 60 s; unknown fields are ignored, as Go's decoder does */
    cr_assert_eq(parse("{\"preStart\": {\"command\": [\"true\"], \"timeoutSeconds\": 0}, \"extra\": 1}", &lc, why, sizeof(why)), 0,
                 "%s", why);
    cr_assert_eq(lc.prestart_timeout_s, GW_LIFECYCLE_DEFAULT_TIMEOUT_S);
    gw_lifecycle_dispose(&lc);
    /* empty: no hook at all (an init's empty lifecycle replaces the template's with nothing) */
    cr_assert_eq(parse("{}", &lc, why, sizeof(why)), 0);
    cr_assert_null(lc.prestart);
    gw_lifecycle_dispose(&lc);
}

Test(lifecycle, periodic_hooks_are_checked_and_counted)
{
    gw_lifecycle_t lc;
    char why[256];

    cr_assert_eq(parse("{\"periodic\": [{\"name\": \"a\", \"schedule\": \"@every 60s\", \"command\": [\"true\"]},"
                       "{\"name\": \"b\", \"schedule\": \"*/5 * * * *\", \"command\": [\"true\"], \"timeoutSeconds\": 3}]}",
                       &lc, why, sizeof(why)),
                 0, "%s", why);
    cr_assert_eq(lc.num_periodic, 2);
    cr_assert_null(lc.prestart);
    gw_lifecycle_dispose(&lc);
}

Test(lifecycle, what_upstream_refuses)
{
    static const struct {
        const char *config, *why;
    } bad[] = {
        {"{\"version\": 2}", "version"},
        {"{\"preStart\": {\"command\": []}}", "preStart command must not be empty"},
        {"{\"preStart\": {\"command\": [\"  \"]}}", "preStart command must not be empty"},
        {"{\"preStart\": {}}", "preStart command must not be empty"},
        {"{\"preStart\": {\"command\": [\"a\", 1]}}", "strings"},
        {"{\"preStart\": {\"command\": [\"a\\u0000b\"]}}", "without NUL"},
        {"{\"preStart\": {\"command\": [\"a\"], \"timeoutSeconds\": -1}}", "must not be negative"},
        {"{\"preStart\": {\"command\": [\"a\"], \"timeoutSeconds\": 4294968}}", "must not exceed 4294967"},
        {"{\"preStart\": {\"command\": [\"a\"], \"timeoutSeconds\": \"5\"}}", "must be an integer"},
        {"{\"preStart\": [\"a\"]}", "must be an object"},
        {"{\"periodic\": {}}", "array"},
        {"{\"periodic\": [{\"name\": \" \", \"schedule\": \"@hourly\", \"command\": [\"a\"]}]}", "name must not be blank"},
        {"{\"periodic\": [{\"name\": \"x\", \"schedule\": \"@hourly\", \"command\": [\"a\"]},"
         "{\"name\": \"x\", \"schedule\": \"@hourly\", \"command\": [\"a\"]}]}",
         "duplicate periodic hook name \"x\""},
        {"{\"periodic\": [{\"name\": \"x\", \"schedule\": \"\", \"command\": [\"a\"]}]}", "schedule must not be blank"},
        {"{\"periodic\": [{\"name\": \"x\", \"schedule\": \"@hourly\", \"command\": []}]}", "periodic x command must not be empty"},
    };
    gw_lifecycle_t lc;
    char why[256];

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        cr_assert_eq(parse(bad[i].config, &lc, why, sizeof(why)), -1, "accepted: %s", bad[i].config);
        cr_assert(strstr(why, bad[i].why) != NULL, "%s: [%s] should name [%s]", bad[i].config, why, bad[i].why);
        cr_assert_null(lc.prestart, "nothing kept from a refused config");
        gw_lifecycle_dispose(&lc);
    }
}

/* The status file is appended to, never created: bootstrap.sh owns it, and its disappearance fails the start. */
Test(lifecycle, the_status_file_is_appended_to_never_created)
{
    char dir[] = "/tmp/kgate-lc-XXXXXX", path[64], buf[64] = "";
    FILE *f;
    size_t n;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/status", dir);
    cr_assert_lt(gw_lifecycle_append_status(path, "running 5"), 0, "a missing file is an error");
    cr_assert_neq(access(path, F_OK), 0, "and is not created");
    close(open(path, O_WRONLY | O_CREAT, 0600));
    cr_assert_eq(gw_lifecycle_append_status(path, "running 5"), 0);
    cr_assert_eq(gw_lifecycle_append_status(path, "done 0"), 0);
    cr_assert_eq(gw_lifecycle_append_status(NULL, "done 0"), 0, "no file: nothing to do");
    f = fopen(path, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_assert_str_eq(buf, "running 5\ndone 0\n");
    unlink(path);
    rmdir(dir);
}
