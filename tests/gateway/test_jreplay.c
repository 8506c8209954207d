/* tests/gateway/test_jreplay.c: the buffer of an absent Jupyter client (jupyter/replay.h): what it keeps, in which order,
 * within which bounds, for whom, and the requests a client awaits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "jupyter/replay.h"
#include "gw_test.h"

TestSuite(jreplay, .init = gw_test_init);

/* A kernel message as the tap hands it: four JSON parts (exact-size copies) and buffers. */
typedef struct st_kmsg_t {
    wire_channel_t channel;
    char msg_type[32], parent[64];
    wire_frame_t parts[6];
    size_t nparts;
} kmsg_t;

static void kmsg_init(kmsg_t *m, wire_channel_t channel, const char *msg_type, const char *id, const char *parent,
                      const char *content, const char *buffer)
{
    char header[256], parent_header[256];
    const char *texts[5];

    snprintf(header, sizeof(header), "{\"msg_id\":\"%s\",\"msg_type\":\"%s\",\"session\":\"k\"}", id, msg_type);
    snprintf(parent_header, sizeof(parent_header), "{\"msg_id\":\"%s\",\"msg_type\":\"execute_request\"}", parent);
    texts[0] = header;
    texts[1] = parent_header;
    texts[2] = "{}";
    texts[3] = content;
    texts[4] = buffer;
    memset(m, 0, sizeof(*m));
    m->channel = channel;
    snprintf(m->msg_type, sizeof(m->msg_type), "%s", msg_type);
    snprintf(m->parent, sizeof(m->parent), "%s", parent);
    m->nparts = buffer != NULL ? 5 : 4;
    for (size_t i = 0; i != m->nparts; ++i) {
        m->parts[i].len = strlen(texts[i]);
        m->parts[i].base = gw_test_exact_copy(texts[i], m->parts[i].len);
    }
}

static void kmsg_dispose(kmsg_t *m)
{
    for (size_t i = 0; i != m->nparts; ++i)
        free(m->parts[i].base);
}

static int offer(gw_jreplay_t *r, kmsg_t *m)
{
    return gw_jreplay_offer(r, m->channel, m->msg_type, m->parent, m->parts, m->nparts);
}

/* What a drain handed out, one entry per message. */
typedef struct st_seen_t {
    size_t n;
    wire_channel_t channel[64];
    char msg_type[64][GW_JMSG_TYPE_MAX + 1];
    char parent[64][256];
    char content[64][512];
    char buffer[64][32];
} seen_t;

static void on_msg(void *data, const gw_jmsg_t *msg)
{
    seen_t *seen = data;
    const wire_frame_t *c = &msg->parts[GW_JMSG_PART_CONTENT], *p = &msg->parts[GW_JMSG_PART_PARENT_HEADER];

    cr_assert_lt(seen->n, 64);
    seen->channel[seen->n] = msg->channel;
    snprintf(seen->msg_type[seen->n], sizeof(seen->msg_type[0]), "%s", msg->msg_type);
    snprintf(seen->parent[seen->n], 256, "%.*s", (int)p->len, (const char *)p->base);
    snprintf(seen->content[seen->n], 512, "%.*s", (int)c->len, (const char *)c->base);
    if (msg->nbuffers == 1)
        snprintf(seen->buffer[seen->n], 32, "%.*s", (int)msg->buffers[0].len, (const char *)msg->buffers[0].base);
    ++seen->n;
}

static gw_jreplay_t *create(const char *session, size_t max_bytes, int64_t expires, const char *const *awaited)
{
    gw_jasked_t asked;
    gw_jreplay_t *r;

    gw_jasked_init(&asked);
    for (; awaited != NULL && *awaited != NULL; ++awaited)
        gw_jasked_add(&asked, *awaited);
    r = gw_jreplay_create(session, max_bytes, expires, &asked);
    cr_assert_eq(asked.count, 0, "the awaited requests moved into the buffer");
    gw_jasked_dispose(&asked);
    return r;
}

Test(jreplay, keeps_the_clients_messages_in_order_byte_for_byte_and_hands_on_what_it_still_awaits)
{
    static const char *const awaited[] = {"req-1", "req-2", NULL};
    gw_jreplay_t *r = create("client-a", 1 << 20, 1000, awaited);
    kmsg_t m[8];
    seen_t seen = {0};
    gw_jasked_t back;

    kmsg_init(&m[0], WIRE_CHANNEL_IOPUB, "status", "k1", "req-1", "{\"execution_state\":\"busy\"}", NULL);
    kmsg_init(&m[1], WIRE_CHANNEL_IOPUB, "stream", "k2", "req-1", "{\"name\":\"stdout\",\"text\":\"1\\n\"}", NULL);
    /* another client's reply and a reply to nobody's request are not this client's */
    kmsg_init(&m[2], WIRE_CHANNEL_SHELL, "execute_reply", "k3", "someone-else", "{\"status\":\"ok\"}", NULL);
    kmsg_init(&m[3], WIRE_CHANNEL_STDIN, "input_request", "k4", "req-1", "{\"prompt\":\"? \"}", NULL);
    kmsg_init(&m[4], WIRE_CHANNEL_IOPUB, "display_data", "k5", "req-1", "{\"data\":{}}", "BUF\x01\x02");
    kmsg_init(&m[5], WIRE_CHANNEL_SHELL, "execute_reply", "k6", "req-1", "{\"status\":\"ok\",\"execution_count\":3}", NULL);
    /* a second reply to the same request: the first ended the wait */
    kmsg_init(&m[6], WIRE_CHANNEL_SHELL, "execute_reply", "k7", "req-1", "{\"status\":\"late\"}", NULL);
    kmsg_init(&m[7], WIRE_CHANNEL_IOPUB, "status", "k8", "req-1", "{\"execution_state\":\"idle\"}", NULL);
    int expect[8] = {1, 1, 0, 1, 1, 1, 0, 1};
    for (int i = 0; i != 8; ++i)
        cr_expect_eq(offer(r, &m[i]), expect[i], "message %d", i);
    cr_expect_eq(gw_jreplay_count(r), 6);
    cr_expect_eq(gw_jreplay_lost(r, NULL), 0);

    gw_jasked_init(&back);
    gw_jreplay_drain(r, on_msg, &seen, &back);
    cr_assert_eq(seen.n, 6);
    int order[6] = {0, 1, 3, 4, 5, 7};
    for (int i = 0; i != 6; ++i) {
        cr_expect_eq(seen.channel[i], m[order[i]].channel, "message %d", i);
        cr_expect_str_eq(seen.msg_type[i], m[order[i]].msg_type);
        cr_expect_eq(strlen(seen.content[i]), m[order[i]].parts[3].len);
        cr_expect_eq(memcmp(seen.content[i], m[order[i]].parts[3].base, m[order[i]].parts[3].len), 0, "content kept verbatim");
    }
    cr_expect_str_eq(seen.buffer[3], "BUF\x01\x02", "buffers kept");
    cr_expect_eq(gw_jreplay_count(r), 0, "a drained buffer holds nothing");
    /* req-2 is still awaited: its reply, still to come, goes to the returning connection; req-1's ended */
    cr_expect_eq(back.count, 1);
    cr_expect(gw_jasked_claim(&back, WIRE_CHANNEL_SHELL, "req-2"));
    cr_expect_not(gw_jasked_claim(&back, WIRE_CHANNEL_SHELL, "req-1"));
    gw_jasked_dispose(&back);
    gw_jreplay_destroy(r);
    for (int i = 0; i != 8; ++i)
        kmsg_dispose(&m[i]);
}

Test(jreplay, over_the_bound_output_is_lost_and_said_so_where_it_happened_and_the_request_still_ends)
{
    static const char *const awaited[] = {"req-1", NULL};
    char big[600], xs[501];
    kmsg_t stream, reply, idle, huge, later;
    seen_t seen = {0};
    gw_jasked_t back;
    size_t lost_bytes, kept = 0;
    int ret;

    memset(xs, 'x', 500);
    xs[500] = '\0';
    snprintf(big, sizeof(big), "{\"name\":\"stdout\",\"text\":\"%s\"}", xs);
    gw_jreplay_t *r = create("client-a", 4096, 1000, awaited);
    kmsg_init(&stream, WIRE_CHANNEL_IOPUB, "stream", "s", "req-1", big, NULL);
    while ((ret = offer(r, &stream)) == 1)
        ++kept;
    cr_assert_eq(ret, -1, "past the bound a message is dropped");
    cr_expect_gt(kept, 3);
    cr_expect_leq(gw_jreplay_bytes(r), 4096, "the bound holds");
    /* once output was lost, no more output is kept, even if it would fit */
    kmsg_init(&later, WIRE_CHANNEL_IOPUB, "stream", "s2", "req-1", "{\"name\":\"stdout\",\"text\":\"z\"}", NULL);
    cr_expect_eq(offer(r, &later), -1);
    /* but the reply and the idle status that end the request are, within the reserve */
    kmsg_init(&reply, WIRE_CHANNEL_SHELL, "execute_reply", "r", "req-1", "{\"status\":\"ok\"}", NULL);
    kmsg_init(&idle, WIRE_CHANNEL_IOPUB, "status", "i", "req-1", "{\"execution_state\":\"idle\"}", NULL);
    cr_expect_eq(offer(r, &reply), 1);
    cr_expect_eq(offer(r, &idle), 1);
    /* and past the reserve nothing is kept */
    char *hugetext = malloc(GW_JREPLAY_RESERVE_BYTES + 64);
    memset(hugetext, 'h', GW_JREPLAY_RESERVE_BYTES + 63);
    memcpy(hugetext, "{\"s\":\"", 6);
    memcpy(hugetext + GW_JREPLAY_RESERVE_BYTES + 61, "\"}", 3);
    kmsg_init(&huge, WIRE_CHANNEL_IOPUB, "status", "h", "req-1", hugetext, NULL);
    cr_expect_eq(offer(r, &huge), -1);
    cr_expect_leq(gw_jreplay_bytes(r), 4096 + GW_JREPLAY_RESERVE_BYTES);
    cr_expect_eq(gw_jreplay_lost(r, &lost_bytes), 3);
    cr_expect_gt(lost_bytes, GW_JREPLAY_RESERVE_BYTES);

    gw_jasked_init(&back);
    gw_jreplay_drain(r, on_msg, &seen, &back);
    cr_assert_eq(seen.n, kept + 3, "the kept output, the notice, the reply and idle");
    /* the notice sits where output was first lost, before the reply that ends the cell in JupyterLab */
    size_t at = kept;
    cr_expect_eq(seen.channel[at], WIRE_CHANNEL_IOPUB);
    cr_expect_str_eq(seen.msg_type[at], "stream");
    cr_expect(strstr(seen.content[at], "\"name\":\"stderr\"") != NULL, "%s", seen.content[at]);
    cr_expect(strstr(seen.content[at], "output lost: 3 kernel messages") != NULL, "%s", seen.content[at]);
    cr_expect(strstr(seen.parent[at], "\"msg_id\":\"req-1\"") != NULL, "the notice's parent is the lost output's: %s",
              seen.parent[at]);
    cr_expect_str_eq(seen.msg_type[at + 1], "execute_reply");
    cr_expect_str_eq(seen.msg_type[at + 2], "status");
    gw_jasked_dispose(&back);
    gw_jreplay_destroy(r);
    free(hugetext);
    kmsg_dispose(&stream);
    kmsg_dispose(&later);
    kmsg_dispose(&reply);
    kmsg_dispose(&idle);
    kmsg_dispose(&huge);
}

Test(jreplay, only_the_same_session_id_gets_it_and_only_until_it_expires)
{
    gw_jreplay_t *r = create("client-a", 1024, 5000, NULL);

    cr_expect_str_eq(gw_jreplay_session(r), "client-a");
    cr_expect(gw_jreplay_is_for(r, "client-a"));
    cr_expect_not(gw_jreplay_is_for(r, "client-b"), "another client discards it");
    cr_expect_not(gw_jreplay_is_for(r, "client-"), "a prefix is another client");
    cr_expect_not(gw_jreplay_is_for(r, ""), "a socket without session_id discards it");
    cr_expect_not(gw_jreplay_is_for(r, NULL));
    cr_expect_not(gw_jreplay_is_expired(r, 4999));
    cr_expect(gw_jreplay_is_expired(r, 5000));
    gw_jreplay_destroy(r);
    gw_jreplay_destroy(NULL);
}

Test(jreplay, a_full_buffer_destroyed_unread_frees_everything)
{
    kmsg_t m;
    gw_jreplay_t *r = create("client-a", 1 << 16, 1000, NULL);

    kmsg_init(&m, WIRE_CHANNEL_IOPUB, "stream", "s", "req-1", "{\"name\":\"stdout\",\"text\":\"0123456789\"}", "b");
    while (offer(r, &m) == 1)
        ;
    cr_expect_gt(gw_jreplay_count(r), 100);
    /* LeakSanitizer checks the rest at the worker's exit */
    gw_jreplay_destroy(r);
    kmsg_dispose(&m);
}

Test(jreplay, awaited_requests_are_bounded_and_a_reply_ends_the_wait_but_an_input_request_does_not)
{
    gw_jasked_t a, b;
    char id[32];

    gw_jasked_init(&a);
    for (int i = 0; i <= GW_JASKED_MAX; ++i) {
        snprintf(id, sizeof(id), "req-%d", i);
        gw_jasked_add(&a, id);
    }
    cr_expect_eq(a.count, GW_JASKED_MAX);
    cr_expect_not(gw_jasked_claim(&a, WIRE_CHANNEL_SHELL, "req-0"), "the oldest was forgotten");
    cr_expect(gw_jasked_claim(&a, WIRE_CHANNEL_IOPUB, "anything"), "iopub is everyone's");
    cr_expect(gw_jasked_claim(&a, WIRE_CHANNEL_STDIN, "req-1"));
    cr_expect(gw_jasked_claim(&a, WIRE_CHANNEL_CONTROL, "req-1"));
    cr_expect_not(gw_jasked_claim(&a, WIRE_CHANNEL_SHELL, "req-1"), "one reply per request");
    gw_jasked_init(&b);
    gw_jasked_move(&b, &a);
    cr_expect_eq(a.count, 0);
    cr_expect_eq(b.count, GW_JASKED_MAX - 1);
    cr_expect(gw_jasked_claim(&b, WIRE_CHANNEL_SHELL, "req-2"));
    gw_jasked_clear(&b);
    cr_expect_not(gw_jasked_claim(&b, WIRE_CHANNEL_SHELL, "req-3"));
    gw_jasked_dispose(&a);
    gw_jasked_dispose(&b);
}
