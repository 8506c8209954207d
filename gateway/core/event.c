/* Events rendered once as SSE frames and shared, by reference, by every reader of a run. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "wire/alloc.h"
#include "core/json_out.h"
#include "core/event.h"

gw_event_t *gw_event_render(const json_t *event, uint64_t id, int compat_execd)
{
    char prefix[48];
    int prefix_len = compat_execd ? 0 : snprintf(prefix, sizeof(prefix), "id: %" PRIu64 "\ndata: ", id);
    /* measure first, then render in place: a 12 MB stream event is never copied a second time */
    size_t json_len = gw_json_render(event, NULL);
    gw_event_t *ev = wire_malloc(offsetof(gw_event_t, frame) + (size_t)prefix_len + json_len + 2);

    memset(ev, 0, offsetof(gw_event_t, frame));
    ev->id = id;
    ev->refcnt = 1;
    memcpy(ev->frame, prefix, (size_t)prefix_len);
    gw_json_render(event, ev->frame + prefix_len);
    memcpy(ev->frame + prefix_len + json_len, "\n\n", 2);
    ev->len = (size_t)prefix_len + json_len + 2;
    return ev;
}

static gw_event_t *render_member(const char *type, int64_t timestamp, const char *key, const char *value_json, size_t value_len,
                                 int quoted, wire_buf_t *storage, uint64_t id, int compat_execd);

gw_event_t *gw_event_render_stream(int is_stderr, int64_t timestamp, const char *text_token, size_t token_len, wire_buf_t *storage,
                                   uint64_t id, int compat_execd)
{
    return gw_event_render_text(is_stderr, timestamp, text_token + 1, token_len - 2, storage, id, compat_execd);
}

gw_event_t *gw_event_render_text(int is_stderr, int64_t timestamp, const char *inner, size_t inner_len, wire_buf_t *storage,
                                 uint64_t id, int compat_execd)
{
    return render_member(is_stderr ? "stderr" : "stdout", timestamp, "text", inner, inner_len, 1,
                         inner_len + 2 >= GW_EVENT_VIEW_MIN_BYTES ? storage : NULL, id, compat_execd);
}

gw_event_t *gw_event_render_member(const char *type, int64_t timestamp, const char *key, const char *value_json, size_t value_len,
                                   uint64_t id, int compat_execd)
{
    return render_member(type, timestamp, key, value_json, value_len, 0, NULL, id, compat_execd);
}

/* `quoted`: the value is a string's inside, its quotes written around it here (so that a view of a string cut short needs
 * no closing quote of its own). */
static gw_event_t *render_member(const char *type, int64_t timestamp, const char *key, const char *value_json, size_t value_len,
                                 int quoted, wire_buf_t *storage, uint64_t id, int compat_execd)
{
    char head[160];
    int prefix_len = compat_execd ? 0 : snprintf(head, sizeof(head), "id: %" PRIu64 "\ndata: ", id);
    /* the key order of gw_event_new + `key`, as gw_json_render writes it (tests/gateway compares the two) */
    int head_len = prefix_len + snprintf(head + prefix_len, sizeof(head) - (size_t)prefix_len,
                                         "{\"type\":\"%.32s\",\"timestamp\":%" PRId64 ",\"%.32s\":%s", type, timestamp, key,
                                         quoted ? "\"" : "");
    const char *tail = quoted ? "\"}\n\n" : "}\n\n";
    size_t tail_len = quoted ? 4 : 3;
    /* with storage the value is the event's body, written from the kernel connection's buffer as it is */
    size_t copied = storage != NULL ? 0 : value_len;
    gw_event_t *ev = wire_malloc(offsetof(gw_event_t, frame) + (size_t)head_len + copied + tail_len);

    memset(ev, 0, offsetof(gw_event_t, frame));
    ev->id = id;
    ev->refcnt = 1;
    memcpy(ev->frame, head, (size_t)head_len);
    if (storage != NULL) {
        ev->body_storage = wire_buf_ref(storage);
        ev->body = value_json;
        ev->body_len = value_len;
        ev->head_len = (size_t)head_len;
    } else {
        memcpy(ev->frame + head_len, value_json, value_len);
    }
    memcpy(ev->frame + head_len + copied, tail, tail_len);
    ev->len = (size_t)head_len + value_len + tail_len;
    return ev;
}

size_t gw_event_pieces(const gw_event_t *ev, h2o_iovec_t *pieces)
{
    if (ev->body_storage == NULL) {
        pieces[0] = h2o_iovec_init(ev->frame, ev->len);
        return 1;
    }
    pieces[0] = h2o_iovec_init(ev->frame, ev->head_len);
    pieces[1] = h2o_iovec_init(ev->body, ev->body_len);
    pieces[2] = h2o_iovec_init(ev->frame + ev->head_len, ev->len - ev->head_len - ev->body_len);
    return 3;
}

void gw_event_copy(const gw_event_t *ev, char *dst)
{
    h2o_iovec_t pieces[GW_EVENT_MAX_PIECES];
    size_t n = gw_event_pieces(ev, pieces);

    for (size_t i = 0; i != n; dst += pieces[i].len, ++i)
        memcpy(dst, pieces[i].base, pieces[i].len);
}

gw_event_t *gw_event_from_bytes(const void *data, size_t len)
{
    gw_event_t *ev = wire_malloc(offsetof(gw_event_t, frame) + len);

    memset(ev, 0, offsetof(gw_event_t, frame));
    ev->refcnt = 1;
    memcpy(ev->frame, data, len);
    ev->len = len;
    return ev;
}

void gw_event_addref(gw_event_t *ev)
{
    ++ev->refcnt;
}

void gw_event_release(gw_event_t *ev)
{
    if (ev != NULL && --ev->refcnt == 0) {
        wire_buf_unref(ev->body_storage);
        free(ev);
    }
}

int64_t gw_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *gw_event_new(const char *type)
{
    return json_pack("{s:s, s:I}", "type", type, "timestamp", (json_int_t)gw_unix_ms());
}

json_t *gw_error_event(const char *ename, const char *evalue)
{
    json_t *ev = gw_event_new("error");
    /* the value may quote a client's or a kernel's text cut inside a character (gw_json_text) */
    json_object_set_new(ev, "error",
                        json_pack("{s:s, s:o, s:[]}", "ename", ename, "evalue", gw_json_text(evalue, strlen(evalue)), "traceback"));
    return ev;
}
