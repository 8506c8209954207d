/* wire/src/zmtp_reader.c: a ZMTP 3.0 byte stream into greeting, commands and messages; pure (wire/zmtp_reader.h). */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/zmtp.h"
#include "wire/zmtp_reader.h"

#define DELIM_LEN (sizeof(WIRE_DELIMITER) - 1)

void wire_zmtp_reader_init(wire_zmtp_reader_t *r, uint64_t max_message_bytes, size_t max_frames)
{
    memset(r, 0, sizeof(*r));
    r->max_message_bytes = max_message_bytes;
    r->max_frames = max_frames;
}

void wire_zmtp_reader_reset(wire_zmtp_reader_t *r)
{
    r->greeted = 0;
    r->skipping = WIRE_ZMTP_NEED;
    r->skip_left = 0;
    r->skip_more = 0;
    r->giving = 0;
}

void wire_zmtp_reader_dispose(wire_zmtp_reader_t *r)
{
    free(r->frames);
    r->frames = NULL;
    r->frames_cap = 0;
}

static void item_init(wire_zmtp_item_t *item, wire_zmtp_kind_t kind, size_t consumed)
{
    memset(item, 0, sizeof(*item));
    item->kind = kind;
    item->consumed = consumed;
}

static void broken(wire_zmtp_item_t *item, const char *why)
{
    item_init(item, WIRE_ZMTP_BROKEN, 0);
    item->why = why;
}

/* The frames before the one over the cap are whole: the parent_header among them (the fourth after the delimiter's, as
 * wire_decode reads a message) is kept for whoever is told of the loss. */
static void keep_parent(wire_zmtp_reader_t *r, size_t nframes)
{
    r->parent_len = 0;
    for (size_t i = 0; i + 3 < nframes; ++i) {
        const wire_frame_t *f = &r->frames[i];
        if (f->len != DELIM_LEN || memcmp(f->base, WIRE_DELIMITER, DELIM_LEN) != 0)
            continue;
        if (r->frames[i + 3].len <= sizeof(r->parent)) {
            memcpy(r->parent, r->frames[i + 3].base, r->frames[i + 3].len);
            r->parent_len = r->frames[i + 3].len;
        }
        return;
    }
}

/* Passes over the rest of a message being skipped, from `off`. */
static void skip(wire_zmtp_reader_t *r, const uint8_t *p, size_t len, size_t off, wire_zmtp_item_t *item)
{
    for (;;) {
        size_t avail = len - off, drop = r->skip_left < avail ? (size_t)r->skip_left : avail;
        wire_zmtp_head_t h;
        int ret;
        if (r->giving && drop != 0) {
            item_init(item, WIRE_ZMTP_OVER_PIECE, off + drop);
            item->body = p + off;
            item->len = drop;
            r->skip_left -= drop;
            r->giving = r->skip_left != 0;
            return;
        }
        off += drop;
        r->skip_left -= drop;
        if (r->skip_left != 0) {
            item_init(item, WIRE_ZMTP_NEED, off);
            item->need = 1;
            return;
        }
        if (!r->skip_more) {
            item_init(item, r->skipping, off);
            if (r->skipping == WIRE_ZMTP_OVERSIZED && r->parent_len != 0) {
                item->parent = r->parent;
                item->parent_len = r->parent_len;
            }
            r->skipping = WIRE_ZMTP_NEED;
            return;
        }
        if ((ret = wire_zmtp_read_head(p + off, len - off, &h)) <= 0) {
            if (ret < 0) {
                broken(item, "malformed ZMTP frame");
                return;
            }
            item_init(item, WIRE_ZMTP_NEED, off);
            item->need = WIRE_ZMTP_HEAD_MAX;
            return;
        }
        if (h.flags & WIRE_ZMTP_COMMAND) {
            broken(item, "a ZMTP command inside a message");
            return;
        }
        off += h.head_len;
        r->skip_left = h.size;
        r->skip_more = (h.flags & WIRE_ZMTP_MORE) != 0;
    }
}

static void start_skipping(wire_zmtp_reader_t *r, wire_zmtp_kind_t why, const wire_zmtp_head_t *h)
{
    r->skipping = why;
    r->skip_left = h->size;
    r->skip_more = (h->flags & WIRE_ZMTP_MORE) != 0;
}

void wire_zmtp_reader_next(wire_zmtp_reader_t *r, const uint8_t *p, size_t len, int ready, wire_zmtp_item_t *item)
{
    if (!r->greeted) {
        if (len < WIRE_ZMTP_GREETING_LEN) {
            item_init(item, WIRE_ZMTP_NEED, 0);
            item->need = WIRE_ZMTP_GREETING_LEN;
            return;
        }
        if (wire_zmtp_check_greeting(p) != 0) {
            broken(item, "the kernel's socket does not speak ZMTP 3 with the NULL mechanism");
            return;
        }
        r->greeted = 1;
        item_init(item, WIRE_ZMTP_GREETED, WIRE_ZMTP_GREETING_LEN);
        return;
    }
    if (r->skipping != WIRE_ZMTP_NEED) {
        skip(r, p, len, 0, item);
        return;
    }
    for (size_t off = 0, n = 0, bytes = 0;;) {
        wire_zmtp_head_t h;
        int ret = wire_zmtp_read_head(p + off, len - off, &h);
        if (ret <= 0) {
            if (ret < 0) {
                broken(item, "malformed ZMTP frame");
                return;
            }
            item_init(item, WIRE_ZMTP_NEED, 0);
            item->need = off + WIRE_ZMTP_HEAD_MAX;
            return;
        }
        if (h.flags & WIRE_ZMTP_COMMAND) {
            if (off != 0 || h.size > WIRE_ZMTP_COMMAND_MAX_BYTES) {
                broken(item, off != 0 ? "a ZMTP command inside a message" : "a ZMTP command too large");
                return;
            }
            if (len - h.head_len < h.size) {
                item_init(item, WIRE_ZMTP_NEED, 0);
                item->need = h.head_len + (size_t)h.size;
                return;
            }
            item_init(item, WIRE_ZMTP_CMD, h.head_len + (size_t)h.size);
            item->body = p + h.head_len;
            item->len = (size_t)h.size;
            return;
        }
        if (!ready) {
            broken(item, "a message before the ZMTP handshake ended");
            return;
        }
        if (h.size > r->max_message_bytes - bytes || n == r->max_frames) {
            int oversized = h.size > r->max_message_bytes - bytes;
            start_skipping(r, oversized ? WIRE_ZMTP_OVERSIZED : WIRE_ZMTP_TOO_MANY_FRAMES, &h);
            if (!oversized) {
                skip(r, p, len, off + h.head_len, item);
                return;
            }
            keep_parent(r, n);
            r->giving = 1;
            item_init(item, WIRE_ZMTP_OVER_START, off + h.head_len);
            item->frames = r->frames;
            item->nframes = n;
            item->bytes = (size_t)h.size;
            return;
        }
        if (len - off - h.head_len < h.size) {
            item_init(item, WIRE_ZMTP_NEED, 0);
            item->need = off + h.head_len + (size_t)h.size;
            return;
        }
        if (n == r->frames_cap) {
            r->frames_cap = r->frames_cap != 0 ? r->frames_cap * 2 : 16;
            r->frames = wire_realloc(r->frames, r->frames_cap * sizeof(r->frames[0]));
        }
        r->frames[n].base = (void *)(p + off + h.head_len);
        r->frames[n].len = (size_t)h.size;
        ++n;
        bytes += (size_t)h.size;
        off += h.head_len + (size_t)h.size;
        if ((h.flags & WIRE_ZMTP_MORE) == 0) {
            item_init(item, WIRE_ZMTP_MESSAGE, off);
            item->frames = r->frames;
            item->nframes = n;
            item->bytes = bytes;
            return;
        }
    }
}
