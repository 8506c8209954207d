/* wire/src/codec.c: Jupyter messages to and from signed ZMQ frame lists. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/json_in.h"
#include "wire/errors.h"

#define DELIM_LEN (sizeof(WIRE_DELIMITER) - 1)

/* Frames after the delimiter: signature, header, parent_header, metadata, content. */
#define SIGNED_PART_FRAMES 5

static char *dump_compact(const json_t *json, size_t *len)
{
    /* With valid json_t values this fails only on exhaustion, which wire_malloc already aborts on. */
    char *s = json_dumps(json, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s == NULL) {
        fprintf(stderr, "kgate: json_dumps failed\n");
        abort();
    }
    *len = strlen(s);
    return s;
}

void wire_encode(const wire_signer_t *signer, const wire_msg_t *msg, wire_frames_t *out)
{
    const json_t *json[4] = {msg->header, msg->parent_header, msg->metadata, msg->content};
    wire_frame_t parts[4];
    char sig[WIRE_SIG_HEX_LEN + 1];

    for (size_t i = 0; i != msg->identities.size; ++i)
        wire_frames_push_copy(out, msg->identities.entries[i].base, msg->identities.entries[i].len);
    wire_frames_push_copy(out, WIRE_DELIMITER, DELIM_LEN);
    /* The signature covers exactly the bytes sent, so serialise once and sign those. */
    for (size_t i = 0; i != 4; ++i)
        parts[i].base = dump_compact(json[i], &parts[i].len);
    wire_signer_sign(signer, parts, sig);
    wire_frames_push_copy(out, sig, strlen(sig));
    for (size_t i = 0; i != 4; ++i)
        wire_frames_push_owned(out, parts[i].base, parts[i].len);
    for (size_t i = 0; i != msg->buffers.size; ++i)
        wire_frames_push_copy(out, msg->buffers.entries[i].base, msg->buffers.entries[i].len);
}

static json_t *parse_object(const wire_frame_t *frame)
{
    json_t *json;

    if (frame->len == 0)
        return NULL;
    /* "\u0000" is allowed: kernels send it inside stream text (jupyter_client accepts it). */
    if ((json = wire_json_parse(frame->base, frame->len)) == NULL)
        return NULL;
    if (!json_is_object(json)) {
        json_decref(json);
        return NULL;
    }
    return json;
}

json_t *wire_msg_raw_content_parse(const wire_msg_t *msg)
{
    return parse_object(&msg->raw_content);
}

void wire_msg_parse_raw_content(wire_msg_t *msg)
{
    json_t *content;

    if (!msg->content_raw)
        return;
    if ((content = parse_object(&msg->raw_content)) != NULL) {
        json_decref(msg->content);
        msg->content = content;
    } else {
        msg->content_undecodable = 1;
    }
    wire_buf_unref(msg->raw_storage);
    msg->raw_storage = NULL;
    msg->raw_content = (wire_frame_t){NULL, 0};
    msg->content_raw = 0;
}

int wire_decode(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, wire_msg_t **out)
{
    return wire_decode_ex(signer, frames, n, 0, out);
}

const wire_frame_t *wire_signed_parts(const wire_msg_t *msg, const wire_frame_t *frames, size_t *n)
{
    /* identities, delimiter, signature: then the signed parts and the buffers */
    size_t skip = msg->identities.size + 2;

    *n = 4 + msg->buffers.size;
    return frames + skip;
}

static int keeps_raw(int flags, const char *type)
{
    if (type == NULL)
        return 0;
    if ((flags & WIRE_DECODE_RAW_STREAM) != 0 && strcmp(type, "stream") == 0)
        return 1;
    return (flags & WIRE_DECODE_RAW_RESULT) != 0 && (strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0);
}

int wire_decode_ex(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, int flags, wire_msg_t **out)
{
    return wire_decode_in(signer, frames, n, flags, NULL, out);
}

int wire_decode_in(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, int flags, wire_buf_t *storage,
                   wire_msg_t **out)
{
    json_t *json[4] = {NULL, NULL, NULL, NULL};
    size_t delim;
    int ret;

    /* The first delimiter wins, as in jupyter_client: identities are opaque and come before it. */
    for (delim = 0; delim != n; ++delim)
        if (frames[delim].len == DELIM_LEN && memcmp(frames[delim].base, WIRE_DELIMITER, DELIM_LEN) == 0)
            break;
    if (delim == n)
        return WIRE_ENODELIM;
    if (n - delim - 1 < SIGNED_PART_FRAMES)
        return WIRE_ETRUNCATED;

    /* Authenticate before parsing: the JSON parser never sees bytes from an unauthenticated peer. */
    const wire_frame_t *sig = &frames[delim + 1], *parts = &frames[delim + 2];
    if ((ret = wire_signer_verify(signer, parts, sig->base, sig->len)) != 0)
        return ret;

    int content_undecodable = 0, content_skipped = (flags & WIRE_DECODE_SKIP_CONTENT) != 0, content_raw = 0;
    for (size_t i = 0; i != 4; ++i) {
        if (i == 3 && content_skipped) {
            json[i] = json_object();
            break;
        }
        /* the header is parsed by now (i == 0): it alone decides, so the content's bytes are never read */
        if (i == 3 && keeps_raw(flags, json_string_value(json_object_get(json[0], "msg_type")))) {
            json[i] = json_object();
            content_raw = 1;
            break;
        }
        if ((json[i] = parse_object(&parts[i])) == NULL) {
            if (i != 3) {
                ret = WIRE_EBADJSON;
                goto Exit;
            }
            json[i] = json_object();
            content_undecodable = 1;
        }
    }
    if (!json_is_string(json_object_get(json[0], "msg_id")) || !json_is_string(json_object_get(json[0], "msg_type"))) {
        ret = WIRE_EBADHEADER;
        goto Exit;
    }

    wire_msg_t *msg = wire_calloc(1, sizeof(*msg));
    for (size_t i = 0; i != delim; ++i)
        wire_frames_push_copy(&msg->identities, frames[i].base, frames[i].len);
    for (size_t i = delim + 1 + SIGNED_PART_FRAMES; i != n; ++i)
        wire_frames_push_copy(&msg->buffers, frames[i].base, frames[i].len);
    msg->header = json[0];
    msg->parent_header = json[1];
    msg->metadata = json[2];
    msg->content = json[3];
    msg->content_undecodable = content_undecodable;
    msg->content_skipped = content_skipped;
    /* a view of the caller's storage when there is one (a 50 MB line is not copied), a copy otherwise */
    if (content_raw)
        wire_msg_set_raw_content(msg, parts[3].base, parts[3].len, storage);
    *out = msg;
    return 0;

Exit:
    for (size_t i = 0; i != 4; ++i)
        json_decref(json[i]);
    return ret;
}
