/* tests/e2e/test_sessions.c: bash sessions (/session) on the real kgate with kgate's own bash kernel. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_helpers.h"
#include "support/api.h"
#include "support/events.h"
#include "support/http.h"

TestSuite(sessions, .timeout = 120);

static char *new_session(void)
{
    ts_response_t r;
    char *id;

    ts_http_request(ch_port(), "POST", "/session", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert(json_is_string(json_object_get(r.json, "session_id")), "no session_id: %.400s", r.body);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "id")), json_string_value(json_object_get(r.json, "session_id")));
    id = strdup(json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    return id;
}

static void session_run(const char *id, const char *command, ts_events_t *out)
{
    char path[128];

    snprintf(path, sizeof(path), "/session/%s/run", id);
    ch_stream(path, json_pack("{s:s}", "command", command), out);
    E2E_ASSERT_RUN(out, id, E2E_FRAMING_SSE);
}

static int delete_session(const char *id)
{
    char path[128];
    ts_response_t r;
    int status;

    snprintf(path, sizeof(path), "/session/%s", id);
    status = ts_http_request(ch_port(), "DELETE", path, NULL, NULL, &r);
    ts_response_dispose(&r);
    return status;
}

Test(sessions, state_persists_across_runs)
{
    char *id = new_session(), sum[E2E_MSG_SIZE];
    ts_events_t a, b;

    session_run(id, "cd /tmp && export KG_SESSION=7 && greet() { echo \"hi $1\"; }", &a);
    cr_assert_eq(ts_events_count(&a, "error"), 0, "%s", ts_events_summary(&a, sum, sizeof(sum)));
    session_run(id, "pwd; echo $KG_SESSION; greet there", &b);
    E2E_ASSERT_TEXT(&b, "stdout", "/tmp\n7\nhi there\n");
    cr_assert_eq(delete_session(id), 200);
    ts_events_dispose(&a);
    ts_events_dispose(&b);
    free(id);
}

Test(sessions, a_failing_command_reports_its_exit_code_once)
{
    char *id = new_session(), path[128];
    ts_events_t evs;
    json_t *error;

    snprintf(path, sizeof(path), "/session/%s/run", id);
    /* execd's server model names the field "code", its SDKs "command": both are accepted */
    ch_stream(path, json_pack("{s:s}", "code", "echo before; (exit 5)"), &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    error = ch_only_error(&evs);
    cr_assert_str_eq(json_string_value(json_object_get(error, "evalue")), "5");
    E2E_ASSERT_TEXT(&evs, "stdout", "before\n");
    cr_assert_eq(delete_session(id), 200);
    ts_events_dispose(&evs);
    free(id);
}

Test(sessions, a_deleted_session_is_gone)
{
    char *id = new_session(), path[128];
    ts_response_t r;
    json_t *body = json_pack("{s:s}", "command", "true");

    cr_assert_eq(delete_session(id), 200);
    cr_assert_eq(delete_session(id), 404);
    snprintf(path, sizeof(path), "/session/%s/run", id);
    ts_post_json(ch_port(), path, NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 404, "SESSION_NOT_FOUND");
    ts_response_dispose(&r);
    json_decref(body);
    free(id);
}
