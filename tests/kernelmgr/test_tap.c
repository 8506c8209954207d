/* tests/kernelmgr/test_tap.c: a relay on a real ipykernel: messages sent verbatim, everything the kernel says seen by the tap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "ksys/errors.h"
#include "kmgr_test.h"

TestSuite(tap, .init = kt_setup, .fini = kt_teardown, .timeout = 90);

/* What the tap saw of the messages whose parent is `parent`. */
typedef struct st_tap_rec_t {
    char parent[64];
    int n_reply, n_idle, n_input, n_skipped;
    int n_raw;                /* stream messages whose content came unparsed (msg->content_raw) */
    size_t stream_bytes;      /* "text" bytes of stream messages (parsed content) */
    size_t raw_content_bytes; /* content part bytes of stream messages as relayed */
    int raw_matches_decoded;  /* every parsed content equals its raw part, parsed again */
    char reply_status[32];
    char input_header_id[64];
    char reply_parent_type[64];
} tap_rec_t;

static void on_tap(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts, size_t nparts,
                   void *data)
{
    tap_rec_t *r = data;
    const char *type = wire_msg_type(msg);

    (void)kernel;
    cr_assert_geq(nparts, 4);
    if (strcmp(wire_msg_parent_id(msg), r->parent) != 0)
        return;
    /* The header part is the kernel's own bytes: it names the same msg_id as the decoded header. */
    json_t *header = json_loadb(parts[0].base, parts[0].len, 0, NULL);
    cr_assert_not_null(header);
    cr_assert_str_eq(json_string_value(json_object_get(header, "msg_id")), wire_msg_id(msg));
    json_decref(header);
    if (channel == WIRE_CHANNEL_SHELL) {
        ++r->n_reply;
        snprintf(r->reply_status, sizeof(r->reply_status), "%s", json_string_value(json_object_get(msg->content, "status")));
        snprintf(r->reply_parent_type, sizeof(r->reply_parent_type), "%s",
                 json_string_value(json_object_get(msg->parent_header, "msg_type")));
    } else if (channel == WIRE_CHANNEL_STDIN && strcmp(type, "input_request") == 0) {
        ++r->n_input;
        snprintf(r->input_header_id, sizeof(r->input_header_id), "%s", wire_msg_id(msg));
    } else if (channel == WIRE_CHANNEL_IOPUB && strcmp(type, "status") == 0) {
        if (strcmp(json_string_value(json_object_get(msg->content, "execution_state")), "idle") == 0)
            ++r->n_idle;
    } else if (channel == WIRE_CHANNEL_IOPUB && strcmp(type, "stream") == 0) {
        json_t *raw = json_loadb(parts[3].base, parts[3].len, 0, NULL);
        cr_assert_not_null(raw, "the content part is the kernel's JSON");
        r->raw_content_bytes += json_string_length(json_object_get(raw, "text"));
        if (msg->content_skipped) {
            ++r->n_skipped;
        } else if (msg->content_raw) {
            /* no request read it parsed: the content is the kernel's bytes, the very part relayed */
            json_t *content = wire_msg_raw_content_parse(msg);
            ++r->n_raw;
            r->stream_bytes += json_string_length(json_object_get(content, "text"));
            if (msg->raw_content.len != parts[3].len || memcmp(msg->raw_content.base, parts[3].base, parts[3].len) != 0 ||
                !json_equal(raw, content))
                r->raw_matches_decoded = 0;
            json_decref(content);
        } else {
            r->stream_bytes += json_string_length(json_object_get(msg->content, "text"));
            if (!json_equal(raw, msg->content))
                r->raw_matches_decoded = 0;
        }
        json_decref(raw);
    }
}

static int tap_done(void *arg)
{
    tap_rec_t *r = arg;
    return r->n_reply != 0 && r->n_idle != 0;
}

/* Sends a client's message given as JSON texts; records its msg_id as the parent to watch. */
static int send_json(kmgr_kernel_t *k, wire_channel_t channel, const char *msg_type, json_t *content, const char *parent_json,
                     tap_rec_t *r)
{
    char header[512], msg_id[64];
    char *content_json = json_dumps(content, JSON_COMPACT);
    static unsigned serial;
    int ret;

    snprintf(msg_id, sizeof(msg_id), "client-msg-%u", ++serial);
    snprintf(header, sizeof(header),
             "{\"msg_id\":\"%s\",\"msg_type\":\"%s\",\"session\":\"client-session\",\"username\":\"u\","
             "\"date\":\"2026-01-01T00:00:00.000000Z\",\"version\":\"5.3\"}",
             msg_id, msg_type);
    wire_frame_t parts[4] = {
        {header, strlen(header)}, {(void *)parent_json, strlen(parent_json)}, {"{}", 2}, {content_json, strlen(content_json)}};
    ret = kmgr_kernel_send_parts(k, channel, parts, 4);
    if (r != NULL && channel != WIRE_CHANNEL_STDIN)
        snprintf(r->parent, sizeof(r->parent), "%s", msg_id);
    free(content_json);
    json_decref(content);
    return ret;
}

static json_t *execute_content(const char *code, int allow_stdin)
{
    return json_pack("{s:s,s:b,s:b,s:{},s:b,s:b}", "code", code, "silent", 0, "store_history", 1, "user_expressions", "allow_stdin",
                     allow_stdin, "stop_on_error", 1);
}

Test(tap, a_relayed_execute_is_answered_to_the_tap_and_output_is_verbatim)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    tap_rec_t r = {.raw_matches_decoded = 1};

    kmgr_kernel_set_tap(k, on_tap, &r);
    cr_assert_eq(send_json(k, WIRE_CHANNEL_SHELL, "execute_request", execute_content("print('x' * 1000)", 0), "{}", &r), 0);
    cr_assert(poll_loop_run_until(kt.loop, tap_done, &r, 10000));
    cr_expect_str_eq(r.reply_status, "ok");
    cr_expect_str_eq(r.reply_parent_type, "execute_request", "the client's header came back as the parent, verbatim");
    cr_expect_eq(r.stream_bytes, 1001);
    cr_expect_geq(r.n_raw, 1, "a stream message nobody in kernelmgr awaited reaches the tap unparsed");
    cr_expect_eq(r.raw_content_bytes, 1001);
    cr_expect(r.raw_matches_decoded);
    cr_expect_eq(r.n_skipped, 0, "small output is decoded");
    kmgr_kernel_set_tap(k, NULL, NULL);
    kmgr_kernel_destroy(k);
}

Test(tap, big_output_of_a_relayed_request_is_verified_but_not_parsed)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    tap_rec_t r = {.raw_matches_decoded = 1};

    kmgr_kernel_set_tap(k, on_tap, &r);
    /* one 1 MB message: over KMGR_UNAWAITED_MAX_BYTES, and no kernelmgr request awaits it */
    cr_assert_eq(send_json(k, WIRE_CHANNEL_SHELL, "execute_request",
                           execute_content("import sys; sys.stdout.write('y' * 1000000); sys.stdout.flush()", 0), "{}", &r),
                 0);
    cr_assert(poll_loop_run_until(kt.loop, tap_done, &r, 20000));
    cr_expect_geq(r.n_skipped, 1, "the big message reached the tap unparsed");
    cr_expect_eq(r.raw_content_bytes, 1000000, "every byte reached the tap in the raw parts");
    cr_expect_eq(kmgr_kernel_unawaited_messages(k), 0, "nothing was passed over while a tap listens");
    kmgr_kernel_destroy(k);
}

Test(tap, stdin_of_a_relayed_request_goes_to_the_tap_and_its_answer_goes_back)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    tap_rec_t r = {.raw_matches_decoded = 1};
    char parent[512];

    kmgr_kernel_set_tap(k, on_tap, &r);
    cr_assert_eq(send_json(k, WIRE_CHANNEL_SHELL, "execute_request", execute_content("print('hi ' + input('who? '))", 1), "{}", &r),
                 0);
    for (int i = 0; i != 100 && r.n_input == 0; ++i)
        poll_loop_run_for(kt.loop, 100);
    cr_assert_eq(r.n_input, 1, "the input_request reached the tap");
    snprintf(parent, sizeof(parent), "{\"msg_id\":\"%s\",\"msg_type\":\"input_request\"}", r.input_header_id);
    cr_assert_eq(send_json(k, WIRE_CHANNEL_STDIN, "input_reply", json_pack("{s:s}", "value", "ann"), parent, NULL), 0);
    cr_assert(poll_loop_run_until(kt.loop, tap_done, &r, 10000));
    cr_expect_str_eq(r.reply_status, "ok");
    cr_expect_eq(r.stream_bytes, strlen("hi ann\n"));
    kmgr_kernel_destroy(k);
}

Test(tap, requests_of_kernelmgr_still_work_and_the_tap_sees_their_messages)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    tap_rec_t r = {.raw_matches_decoded = 1};
    kt_rec_t rec;

    kmgr_kernel_set_tap(k, on_tap, &r);
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "print('both')", &rec), 0);
    snprintf(r.parent, sizeof(r.parent), "%s", kmgr_request_msg_id(rec.req));
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_str_eq(rec.out, "both\n", "the request got its output");
    cr_expect_eq(r.stream_bytes, 5, "and the tap saw it too");
    cr_expect_eq(r.n_raw, 0, "parsed, as the request that did not opt in to raw streams read it");
    cr_expect_eq(r.n_reply, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(tap, sending_is_refused_on_the_wrong_channel_and_while_not_ready)
{
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.spec = kt.python, .on_state = kt_on_state, .data = &st};
    kmgr_kernel_t *k = NULL;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_expect_eq(send_json(k, WIRE_CHANNEL_SHELL, "kernel_info_request", json_object(), "{}", NULL), KSYS_ENOTREADY);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    cr_expect_eq(send_json(k, WIRE_CHANNEL_IOPUB, "kernel_info_request", json_object(), "{}", NULL), KSYS_EINVAL);
    cr_expect_eq(send_json(k, WIRE_CHANNEL_HB, "kernel_info_request", json_object(), "{}", NULL), KSYS_EINVAL);
    cr_expect_eq(kmgr_kernel_send_parts(k, WIRE_CHANNEL_SHELL, NULL, 3), KSYS_EINVAL);
    kmgr_kernel_destroy(k);
}
