/* wire/src/message.c: creating, replying to and inspecting Jupyter messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "wire/message.h"

/* Header strings come from kgate itself, so invalid UTF-8 here is a programming error. */
static void set_string(json_t *obj, const char *key, const char *value)
{
    json_t *s = json_string(value);
    if (s == NULL) {
        fprintf(stderr, "kgate: header field %s is not valid UTF-8\n", key);
        abort();
    }
    json_object_set_new(obj, key, s);
}

wire_msg_t *wire_msg_create(const char *msg_type, const char *session, json_t *content)
{
    wire_msg_t *msg = wire_calloc(1, sizeof(*msg));
    char msg_id[WIRE_UUID_STRLEN + 1], date[WIRE_DATE_STRLEN + 1];

    wire_uuid4(msg_id);
    wire_iso8601_now(date);
    msg->header = json_object();
    set_string(msg->header, "msg_id", msg_id);
    set_string(msg->header, "session", session);
    set_string(msg->header, "username", "kgate");
    set_string(msg->header, "date", date);
    set_string(msg->header, "msg_type", msg_type);
    set_string(msg->header, "version", WIRE_PROTOCOL_VERSION);
    msg->parent_header = json_object();
    msg->metadata = json_object();
    msg->content = content != NULL ? content : json_object();
    return msg;
}

void wire_msg_destroy(wire_msg_t *msg)
{
    if (msg == NULL)
        return;
    wire_frames_dispose(&msg->identities);
    wire_frames_dispose(&msg->buffers);
    json_decref(msg->header);
    json_decref(msg->parent_header);
    json_decref(msg->metadata);
    json_decref(msg->content);
    wire_buf_unref(msg->raw_storage);
    free(msg);
}

void wire_msg_set_raw_content(wire_msg_t *msg, const void *bytes, size_t len, wire_buf_t *storage)
{
    wire_buf_unref(msg->raw_storage);
    if (storage != NULL) {
        msg->raw_storage = wire_buf_ref(storage);
        msg->raw_content = (wire_frame_t){(void *)bytes, len};
    } else {
        msg->raw_storage = wire_buf_new(len);
        if (len != 0)
            memcpy(msg->raw_storage->data, bytes, len);
        msg->raw_content = (wire_frame_t){msg->raw_storage->data, len};
    }
    msg->content_raw = 1;
}

void wire_msg_set_parent(wire_msg_t *msg, const wire_msg_t *parent)
{
    /* A deep copy, so that later changes to either message never show through the other. */
    json_decref(msg->parent_header);
    msg->parent_header = json_deep_copy(parent->header);
    wire_frames_dispose(&msg->identities);
    for (size_t i = 0; i != parent->identities.size; ++i)
        wire_frames_push_copy(&msg->identities, parent->identities.entries[i].base, parent->identities.entries[i].len);
}

static const char *string_member(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : "";
}

const char *wire_msg_type(const wire_msg_t *msg)
{
    return string_member(msg->header, "msg_type");
}

const char *wire_msg_id(const wire_msg_t *msg)
{
    return string_member(msg->header, "msg_id");
}

const char *wire_msg_parent_id(const wire_msg_t *msg)
{
    return string_member(msg->parent_header, "msg_id");
}
