/* Answering a request at once: a JSON-RPC message in JSON, or as a one-message SSE stream for a client that reads only SSE. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/http.h"
#include "core/json_out.h"
#include "core/stream.h"
#include "mcp/mcp.h"

/* A one-message SSE stream: a source whose only event is the answer. Lives in the request's pool. */
typedef struct st_one_message_t {
    gw_event_source_t super;
    gw_event_t *ev;
} one_message_t;

static gw_event_t *one_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    *lost = 0;
    return prev == NULL ? ((one_message_t *)source)->ev : NULL;
}

static int one_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    (void)source;
    return prev != NULL;
}

static void one_close(gw_event_source_t *source)
{
    one_message_t *one = (one_message_t *)source;
    gw_event_release(one->ev);
    one->ev = NULL;
}

static const gw_event_source_ops_t one_ops = {one_next, one_is_end, one_close};

void gw_mcp_send(h2o_req_t *req, int status, json_t *message)
{
    gw_send_json(req, status, message);
}

void gw_mcp_respond(h2o_req_t *req, unsigned accepts, json_t *message)
{
    static const char head[] = "event: message\ndata: ";
    one_message_t *one;
    size_t len;
    char *buf;

    if (accepts & GW_MCP_ANSWER_STATELESS)
        gw_mcp_stateless_stamp(message);
    if (accepts & GW_MCP_ACCEPT_JSON) {
        gw_mcp_send(req, 200, message);
        return;
    }
    len = gw_json_render(message, NULL);
    buf = wire_malloc(sizeof(head) - 1 + len + 2);
    memcpy(buf, head, sizeof(head) - 1);
    gw_json_render(message, buf + sizeof(head) - 1);
    memcpy(buf + sizeof(head) - 1 + len, "\n\n", 2);
    one = h2o_mem_alloc_pool(&req->pool, sizeof(*one));
    one->super.ops = &one_ops;
    one->ev = gw_event_from_bytes(buf, sizeof(head) - 1 + len + 2);
    free(buf);
    json_decref(message);
    one->ev->id = 1;
    gw_sse_stream_start(req, &one->super, SIZE_MAX, NULL, NULL);
}
