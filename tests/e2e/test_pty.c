/* tests/e2e/test_pty.c: PTY sessions of the real kgate over its WebSocket: terminal, pipes, replay, one client, exit, bounds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pty_asserts.h"
#include "shared.h"

TestSuite(pty, .timeout = 120);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

static char *create(const char *token, const char *body)
{
    return pt_create(port(), token, body);
}

static void attach(ptc_t *c, const char *id, const char *query, const char *token)
{
    pt_attach(c, port(), id, query, token);
}

/* GET /pty/{id} (asserting 200), a new reference. */
static json_t *status_of(const char *id)
{
    json_t *json;
    cr_assert_eq(pt_request(port(), "GET", id, &json), 200);
    return json;
}

/* The output offset once the shell has been quiet for a while. */
static uint64_t settled_offset(const char *id)
{
    uint64_t last = pt_offset(port(), id), now;
    for (int i = 0; i != 100; ++i) {
        usleep(300 * 1000);
        if ((now = pt_offset(port(), id)) == last)
            return now;
        last = now;
    }
    cr_assert_fail("the output of %s never settled", id);
    return 0;
}

static void delete_session(char *id)
{
    cr_assert_eq(pt_request(port(), "DELETE", id, NULL), 200);
    free(id);
}

/* ---- the terminal --------------------------------------------------------------------------- */

Test(pty, echo_round_trip_on_a_terminal)
{
    char *id = create(NULL, NULL);
    ptc_t c;

    attach(&c, id, "", NULL);
    cr_assert_str_eq(json_string_value(json_object_get(c.connected, "session_id")), id);
    cr_assert_str_eq(json_string_value(json_object_get(c.connected, "mode")), "pty");
    ptc_stdin(&c, "echo hello-$((6*7))\n");
    pt_expect_output(&c, "hello-42", 0);
    /* the JSON form of stdin, and tty naming a pseudo-terminal */
    ptc_text(&c, "{\"type\":\"stdin\",\"data\":\"tty\\n\"}");
    pt_expect_output(&c, "/dev/pts/", 0);
    ptc_text(&c, "{\"type\":\"ping\"}");
    pt_expect_text(&c, "pong");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, resize_is_seen_by_stty)
{
    char *id = create(NULL, "{\"cwd\": \"/tmp\"}");
    ptc_t c;

    attach(&c, id, "", NULL);
    ptc_stdin(&c, "stty size; pwd\n");
    pt_expect_output(&c, "24 80", 0);
    pt_expect_output(&c, "/tmp", 0);
    ptc_text(&c, "{\"type\":\"resize\",\"cols\":123,\"rows\":45}");
    ptc_stdin(&c, "stty size\n");
    pt_expect_output(&c, "45 123", 0);
    ptc_text(&c, "{\"type\":\"resize\",\"cols\":0}");
    cr_assert_str_eq(json_string_value(json_object_get(pt_expect_text(&c, "error"), "code")), "INVALID_FRAME");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, a_signal_reaches_the_foreground_job)
{
    char *id = create(NULL, NULL);
    ptc_t c;

    attach(&c, id, "", NULL);
    ptc_stdin(&c, "echo ready-$((1+1)); sleep 100\n");
    pt_expect_output(&c, "ready-2", 0);
    usleep(300 * 1000);
    ptc_text(&c, "{\"type\":\"signal\",\"signal\":\"SIGINT\"}");
    ptc_stdin(&c, "echo alive-$((2+3))\n");
    pt_expect_output(&c, "alive-5", 0);
    ptc_disconnect(&c);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, pipe_mode_keeps_stderr_apart)
{
    char *id = create(NULL, NULL);
    ptc_t c;

    attach(&c, id, "?pty=0", NULL);
    cr_assert_str_eq(json_string_value(json_object_get(c.connected, "mode")), "pipe");
    ptc_stdin(&c, "echo to-out; echo to-err >&2; tty || true\n");
    pt_expect_output(&c, "to-err\n", 1);
    pt_expect_output(&c, "not a tty", 0);
    cr_assert_str_eq(c.out.base, "to-out\nnot a tty\n");
    cr_assert_str_eq(c.err.base, "to-err\n");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    delete_session(id);
}

/* ---- exit ----------------------------------------------------------------------------------- */

Test(pty, exit_3_gives_exit_code_3_and_closes)
{
    char *id = create(NULL, NULL);
    json_t *status;
    ptc_t c;

    attach(&c, id, "", NULL);
    ptc_stdin(&c, "exit 3\n");
    cr_assert_eq(ptc_wait_close(&c, pt_deadline()), 0, "the socket did not close: %s", c.error);
    cr_assert_eq(c.exit_code, 3, "exit frame: %d", c.exit_code);
    cr_assert_str_eq(c.close_reason, "process exited");
    cr_assert_eq(c.close_code, 1000);
    ptc_dispose(&c);
    status = status_of(id);
    cr_assert(json_is_false(json_object_get(status, "running")));
    cr_assert_eq(json_integer_value(json_object_get(status, "exit_code")), 3);
    json_decref(status);
    /* a later client learns the exit too */
    attach(&c, id, "", NULL);
    cr_assert_eq(ptc_wait_close(&c, pt_deadline()), 0);
    cr_assert_eq(c.exit_code, 3);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, a_command_runs_instead_of_a_shell)
{
    char *id = create(NULL, "{\"command\": \"echo from-$((2*5)); exit 5\"}");
    ptc_t c;

    attach(&c, id, "?pty=0", NULL);
    cr_assert_eq(ptc_wait_close(&c, pt_deadline()), 0, "the socket did not close: %s", c.error);
    cr_assert_str_eq(c.out.base, "from-10\n");
    cr_assert_eq(c.exit_code, 5);
    ptc_dispose(&c);
    delete_session(id);
}

/* ---- replay --------------------------------------------------------------------------------- */

Test(pty, reconnect_with_since_replays_exactly_the_missed_bytes)
{
    char *id = create(NULL, NULL), *all;
    uint64_t seen, total;
    size_t received;
    ptc_t a, b, c;

    attach(&a, id, "", NULL);
    ptc_stdin(&a, "echo ready-$((0+1))\n");
    pt_expect_output(&a, "ready-1", 0);
    ptc_stdin(&a, "sleep 1; echo missed-$((1+1))\n");
    ptc_disconnect(&a);
    seen = a.out.len;
    usleep(1500 * 1000); /* the sleep, then the output nobody is attached for */
    total = settled_offset(id);
    cr_assert_gt(total, seen);

    attach(&b, id, "", NULL); /* no since: everything kept, as execd does */
    cr_assert_eq(ptc_pump(&b, pt_deadline()), 0);
    cr_assert_eq(b.replays, 1);
    cr_assert_eq(b.replay_start, 0);
    cr_assert_eq(b.replay.len, total);
    ptc_disconnect(&b);
    ptc_dispose(&b);

    char query[64];
    snprintf(query, sizeof(query), "?since=%llu", (unsigned long long)seen);
    attach(&b, id, query, NULL);
    cr_assert_eq(ptc_pump(&b, pt_deadline()), 0);
    cr_assert_eq(b.replays, 1, "no replay frame after connected");
    cr_assert_eq(b.replay_start, seen, "the replay starts at %llu, not at since=%llu", (unsigned long long)b.replay_start,
                 (unsigned long long)seen);
    cr_assert_eq(b.replay.len, total - seen);
    cr_assert_not_null(strstr(b.replay.base, "missed-2"), "replay: %s", b.replay.base);
    ptc_stdin(&b, "echo back-$((1+2))\n");
    pt_expect_output(&b, "back-3", 0);
    ptc_disconnect(&b);
    total = settled_offset(id);

    /* what the two clients received, joined, is the output byte for byte (the prompt after back-3
     * may have come after the second left: it is then only in the ring) */
    attach(&c, id, "?since=0", NULL);
    cr_assert_eq(ptc_pump(&c, pt_deadline()), 0);
    cr_assert_eq(c.replay_start, 0);
    cr_assert_eq(c.replay.len, total);
    received = a.out.len + b.replay.len + b.out.len;
    all = malloc(received + 1);
    memcpy(all, a.out.base, a.out.len);
    memcpy(all + a.out.len, b.replay.base, b.replay.len);
    memcpy(all + a.out.len + b.replay.len, b.out.base, b.out.len);
    cr_assert_leq(received, total);
    cr_assert(memcmp(all, c.replay.base, received) == 0, "the replay differs from what was received live");
    free(all);
    ptc_disconnect(&c);
    ptc_dispose(&a);
    ptc_dispose(&b);
    ptc_dispose(&c);
    delete_session(id);
}

/* ---- one client at a time ------------------------------------------------------------------- */

Test(pty, a_second_client_gets_409_and_takeover_closes_the_first_with_4001)
{
    char *id = create(NULL, NULL);
    json_t *body;
    ptc_t a, b, c;

    attach(&a, id, "", NULL);
    ptc_stdin(&a, "echo first-$((1+1))\n");
    pt_expect_output(&a, "first-2", 0);
    cr_assert_eq(ptc_connect(&b, port(), id, "", NULL, pt_deadline()), -1);
    cr_assert_eq(b.ws.status, 409, "%s", b.error);
    body = json_loads(b.body, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(body, "code")) ?: "(none)", "ALREADY_CONNECTED", "body: %s", b.body);
    json_decref(body);
    ptc_dispose(&b);

    attach(&c, id, "?takeover=1", NULL);
    cr_assert_eq(ptc_wait_close(&a, pt_deadline()), 0, "the first client was not closed: %s", a.error);
    cr_assert_eq(a.close_code, 4001);
    cr_assert_str_eq(a.close_reason, "TAKEN_OVER");
    ptc_stdin(&c, "echo second-$((1+2))\n");
    pt_expect_output(&c, "second-3", 0);
    ptc_disconnect(&c);
    ptc_dispose(&a);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, unknown_sessions_and_bad_frames)
{
    static const char *const none = "00000000-0000-4000-8000-000000000000";
    char *id;
    ptc_t c;

    cr_assert_eq(pt_request(port(), "GET", none, NULL), 404);
    cr_assert_eq(pt_request(port(), "DELETE", none, NULL), 404);
    cr_assert_eq(ptc_connect(&c, port(), none, "", NULL, pt_deadline()), -1);
    cr_assert_eq(c.ws.status, 404);
    cr_assert_not_null(strstr(c.body, "SESSION_NOT_FOUND"), "%s", c.body);
    ptc_dispose(&c);

    id = create(NULL, NULL);
    attach(&c, id, "", NULL);
    ptc_text(&c, "not json");
    wsc_send(&c.ws, WSC_BINARY, "\x07x", 2);
    ptc_text(&c, "{\"type\":\"signal\",\"signal\":\"SIGNOPE\"}");
    while (json_array_size(c.texts) < 3)
        cr_assert_eq(ptc_pump(&c, pt_deadline()), 0, "%zu error frames: %s", json_array_size(c.texts), c.error);
    for (size_t i = 0; i != 3; ++i)
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(c.texts, i), "code")), "INVALID_FRAME");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    delete_session(id);
}

Test(pty, a_shell_that_cannot_start_says_so)
{
    char dir[] = "/tmp/kgate-pty-XXXXXX", body[128];
    int status;
    char *id;
    ptc_t c;

    cr_assert_null(ptc_create(port(), NULL, "{\"cwd\": \"/nonexistent/kgate\"}", &status));
    cr_assert_eq(status, 400);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(body, sizeof(body), "{\"cwd\": \"%s\"}", dir);
    id = create(NULL, body);
    rmdir(dir);
    cr_assert_eq(ptc_connect(&c, port(), id, "", NULL, pt_deadline()), -1, "the first frame was `connected`");
    cr_assert_not_null(strstr(c.error, "START_FAILED"), "%s", c.error);
    cr_assert_eq(ptc_wait_close(&c, pt_deadline()), 0);
    cr_assert_eq(c.close_code, 1011);
    ptc_dispose(&c);
    delete_session(id);
}
