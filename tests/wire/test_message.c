/* tests/wire/test_message.c: creating messages, replies and the header accessors. */
#include <criterion/criterion.h>
#include "wire/ids.h"
#include "wire/message.h"
#include "wire_test.h"

TestSuite(message, .init = wire_test_init);

static const char *hs(const wire_msg_t *msg, const char *key)
{
    return json_string_value(json_object_get(msg->header, key));
}

Test(message, create_fills_the_header)
{
    json_t *content = json_pack("{s:s}", "code", "x = 1");
    wire_msg_t *msg = wire_msg_create("execute_request", "session-42", content);

    cr_assert_eq(json_object_size(msg->header), 6);
    cr_assert_eq(strlen(hs(msg, "msg_id")), WIRE_UUID_STRLEN);
    cr_assert_eq(hs(msg, "msg_id")[14], '4');
    cr_assert_str_eq(hs(msg, "session"), "session-42");
    cr_assert_str_eq(hs(msg, "username"), "kgate");
    cr_assert_str_eq(hs(msg, "msg_type"), "execute_request");
    cr_assert_str_eq(hs(msg, "version"), "5.3");
    cr_assert_eq(strlen(hs(msg, "date")), WIRE_DATE_STRLEN);
    cr_assert_eq(hs(msg, "date")[WIRE_DATE_STRLEN - 1], 'Z');
    cr_assert(json_is_object(msg->parent_header) && json_object_size(msg->parent_header) == 0);
    cr_assert(json_is_object(msg->metadata) && json_object_size(msg->metadata) == 0);
    /* The reference was stolen, not copied. */
    cr_assert_eq(msg->content, content);
    cr_assert_eq(content->refcount, 1);
    cr_assert_eq(msg->identities.size, 0);
    cr_assert_eq(msg->buffers.size, 0);
    cr_assert_str_eq(wire_msg_type(msg), "execute_request");
    cr_assert_str_eq(wire_msg_id(msg), hs(msg, "msg_id"));
    cr_assert_str_eq(wire_msg_parent_id(msg), "");
    wire_msg_destroy(msg);
}

Test(message, create_without_content_gives_empty_object_and_fresh_ids)
{
    wire_msg_t *a = wire_msg_create("kernel_info_request", "s", NULL);
    wire_msg_t *b = wire_msg_create("kernel_info_request", "s", NULL);

    cr_assert(json_is_object(a->content));
    cr_assert_eq(json_object_size(a->content), 0);
    cr_assert_str_neq(wire_msg_id(a), wire_msg_id(b));
    wire_msg_destroy(a);
    wire_msg_destroy(b);
    wire_msg_destroy(NULL);
}

Test(message, set_parent_copies_header_and_identities)
{
    wire_msg_t *req = wire_msg_create("execute_request", "client", NULL);
    wire_msg_t *rep = wire_msg_create("execute_reply", "kernel", NULL);

    wire_frames_push_copy(&req->identities, "peer-1", 6);
    wire_frames_push_copy(&req->identities, "\0\1", 2);
    wire_frames_push_copy(&rep->identities, "stale", 5);
    wire_msg_set_parent(rep, req);
    cr_assert(json_equal(rep->parent_header, req->header));
    cr_assert_neq(rep->parent_header, req->header);
    cr_assert_str_eq(wire_msg_parent_id(rep), wire_msg_id(req));
    cr_assert_eq(rep->identities.size, 2);
    cr_assert(wire_test_frame_eq(&rep->identities.entries[0], "peer-1", 6));
    cr_assert(wire_test_frame_eq(&rep->identities.entries[1], "\0\1", 2));
    /* Independent copies: the request may go first. */
    wire_msg_destroy(req);
    cr_assert_eq(strlen(wire_msg_parent_id(rep)), WIRE_UUID_STRLEN);
    cr_assert_str_eq(json_string_value(json_object_get(rep->parent_header, "msg_type")), "execute_request");
    wire_msg_destroy(rep);
}

Test(message, accessors_return_empty_string_when_absent_or_not_strings)
{
    wire_msg_t *msg = wire_msg_create("x", "s", NULL);

    json_object_del(msg->header, "msg_type");
    json_object_set_new(msg->header, "msg_id", json_integer(3));
    json_object_set_new(msg->parent_header, "msg_id", json_null());
    cr_assert_str_eq(wire_msg_type(msg), "");
    cr_assert_str_eq(wire_msg_id(msg), "");
    cr_assert_str_eq(wire_msg_parent_id(msg), "");
    wire_msg_destroy(msg);
}
