/* kernelmgr/src/overcap.c: the head of a signed stream message over the message cap, kept as its bytes pass (overcap.h). */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/json_in.h"
#include "overcap.h"

/* The content delivered: this, the head as the kernel encoded it, then "}; both names are six letters, written at the end. */
static const char CONTENT_OPEN[] = "{\"name\":\"stdout\",\"text\":\"";
#define CONTENT_OPEN_LEN (sizeof(CONTENT_OPEN) - 1)
#define NAME_AT 9

void kmgr_overcap_dispose(kmgr_overcap_t *oc)
{
    if (oc->active)
        wire_signer_stream_dispose(&oc->hmac);
    free(oc->headers);
    wire_buf_unref(oc->content);
    memset(oc, 0, sizeof(*oc));
}

/* The head's room in encoded bytes: the cap's head, or less when its reader keeps `room` decoded bytes (an escape such as
 * \u0001, KMGR_OVERCAP_ESCAPE_MAX bytes, may decode to one). */
static size_t head_room(uint64_t cap, uint64_t room)
{
    size_t head_max = kmgr_overcap_head_max(cap);

    return room < head_max / KMGR_OVERCAP_ESCAPE_MAX ? (size_t)room * KMGR_OVERCAP_ESCAPE_MAX : head_max;
}

/* Where the delimiter is when the frame over the cap may be a content (the delimiter, the signature and the three small JSON frames
 * before it); nframes otherwise. */
static size_t find_delimiter(const wire_frame_t *frames, size_t nframes)
{
    const size_t delim_len = sizeof(WIRE_DELIMITER) - 1;
    size_t d = 0;

    while (d != nframes && (frames[d].len != delim_len || memcmp(frames[d].base, WIRE_DELIMITER, delim_len) != 0))
        ++d;
    return d != nframes && nframes == d + 5 ? d : nframes;
}

const wire_frame_t *kmgr_overcap_parent(const wire_frame_t *frames, size_t nframes)
{
    size_t d = find_delimiter(frames, nframes);

    return d != nframes ? &frames[d + 3] : NULL;
}

int kmgr_overcap_start(kmgr_overcap_t *oc, const wire_signer_t *signer, const wire_frame_t *frames, size_t nframes, uint64_t size,
                       uint64_t cap, uint64_t room)
{
    size_t head_max = head_room(cap, room);
    size_t d = find_delimiter(frames, nframes);

    kmgr_overcap_dispose(oc);
    if (d == nframes)
        return 0;
    const wire_frame_t *sig = &frames[d + 1], *hdr = &frames[d + 2];
    size_t headers = hdr[0].len + hdr[1].len + hdr[2].len;
    if (headers > KMGR_OVERCAP_HEADERS_MAX || sig->len > sizeof(oc->sig))
        return 0;
    oc->active = 1;
    oc->sig_len = sig->len;
    memcpy(oc->sig, sig->base, sig->len);
    /* kept as they came: parsed only once the signature over them and the content has been checked */
    oc->headers = wire_malloc(headers != 0 ? headers : 1);
    oc->header_len = hdr[0].len;
    oc->parent_len = hdr[1].len;
    oc->metadata_len = hdr[2].len;
    wire_signer_stream_begin(&oc->hmac, signer);
    for (size_t i = 0, at = 0; i != 3; at += hdr[i].len, ++i) {
        memcpy(oc->headers + at, hdr[i].base, hdr[i].len);
        wire_signer_stream_update(&oc->hmac, hdr[i].base, hdr[i].len);
    }
    /* the head's room is allocated whole: its pages are touched only as far as the head goes */
    oc->content = wire_buf_new(CONTENT_OPEN_LEN + head_max + 2);
    memcpy(oc->content->data, CONTENT_OPEN, CONTENT_OPEN_LEN);
    wire_text_scan_init(&oc->scan, (char *)oc->content->data + CONTENT_OPEN_LEN, head_max);
    if (room < head_max)
        oc->scan.head_decoded_max = (size_t)room;
    oc->left = size;
    return 1;
}

void kmgr_overcap_piece(kmgr_overcap_t *oc, const void *p, size_t len)
{
    if (!oc->active)
        return;
    len = len < oc->left ? len : (size_t)oc->left;
    oc->left -= len;
    wire_signer_stream_update(&oc->hmac, p, len);
    wire_text_scan_feed(&oc->scan, p, len);
}

static json_t *parse_object(const char *p, size_t len)
{
    json_t *json = len != 0 ? wire_json_parse(p, len) : NULL;

    if (json != NULL && !json_is_object(json)) {
        json_decref(json);
        json = NULL;
    }
    return json;
}

wire_msg_t *kmgr_overcap_end(kmgr_overcap_t *oc, int *forged)
{
    wire_msg_t *msg = NULL;
    json_t *header = NULL, *parent = NULL, *metadata = NULL;
    int stdout_or_err;

    *forged = 0;
    if (!oc->active || oc->left != 0)
        goto Exit;
    oc->active = 0; /* the stream's state is released by its verify, whatever it says */
    stdout_or_err = wire_text_scan_end(&oc->scan) == WIRE_TEXT_SCAN_DONE && !oc->scan.name_long && oc->scan.name_len == 6 &&
                    (memcmp(oc->scan.name, "stdout", 6) == 0 || memcmp(oc->scan.name, "stderr", 6) == 0);
    if (wire_signer_stream_verify(&oc->hmac, oc->sig, oc->sig_len) != 0) {
        *forged = 1;
        goto Exit;
    }
    if (!stdout_or_err)
        goto Exit;
    if ((header = parse_object(oc->headers, oc->header_len)) == NULL ||
        (parent = parse_object(oc->headers + oc->header_len, oc->parent_len)) == NULL ||
        (metadata = parse_object(oc->headers + oc->header_len + oc->parent_len, oc->metadata_len)) == NULL ||
        !json_is_string(json_object_get(header, "msg_id")) ||
        strcmp(json_string_value(json_object_get(header, "msg_type")) ?: "", "stream") != 0)
        goto Exit;
    uint8_t *c = oc->content->data;
    size_t len = CONTENT_OPEN_LEN + oc->scan.head_len;
    memcpy(c + NAME_AT, oc->scan.name, 6);
    memcpy(c + len, "\"}", 2);
    msg = wire_calloc(1, sizeof(*msg));
    msg->header = header;
    msg->parent_header = parent;
    msg->metadata = metadata;
    msg->content = json_object();
    header = parent = metadata = NULL;
    wire_msg_set_raw_content(msg, c, len + 2, oc->content);
    msg->content_cut = 1;
    msg->text_dropped = oc->scan.rest_decoded;
Exit:
    json_decref(header);
    json_decref(parent);
    json_decref(metadata);
    kmgr_overcap_dispose(oc);
    return msg;
}
