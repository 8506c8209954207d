/* tests/gateway/test_raw_stream.c: stream text relayed as the kernel encoded it reads exactly as the decoded and re-encoded text
 * did. */
#include <string.h>
#include <criterion/criterion.h>
#include "wire/json_scan.h"
#include "core/errors.h"
#include "engine_test.h"

TestSuite(raw_stream, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

/* A literal with a NUL inside, and its length */
#define BYTES(s) s, sizeof(s) - 1

/* One kernel message's content as sent, and whether kgate relays its text token as it is. */
typedef struct st_stream_msg_t {
    const char *content;
    size_t len;
    int verbatim; /* the event's frame holds the content's text token byte for byte */
} stream_msg_t;

#define MSG(s, verbatim)                                                                                                           \
    {                                                                                                                              \
        BYTES(s), verbatim                                                                                                         \
    }
#define JSON_OF(name, text) "{\"name\":\"" name "\",\"text\":\"" text "\"}"

/* A run on a ready context whose output limit is `output_limit`; each message of `msgs` is its output. */
static gw_run_t *run_with(gw_context_t *ctx, kmgr_kernel_t *kernel, size_t index, const stream_msg_t *msgs, size_t n,
                          size_t output_limit)
{
    gw_kernel_run_options_t opts = {.code = "print()", .timeout_ms = 60000, .limits = {output_limit, 1u << 20}};
    gw_run_t *run = NULL;
    kmgr_request_t *req;
    int ret = gw_kernel_run_submit(ctx, &opts, &run);

    cr_assert_eq(ret, 0, "gw_kernel_run_submit: %s", gw_strerror(ret));
    cr_assert_not_null(req = fake_kernel_request(kernel, index));
    cr_expect(fake_request_seen(req)->raw_stream, "a run asks for its stream messages raw");
    for (size_t i = 0; i != n; ++i)
        fake_request_iopub_bytes(req, "stream", msgs[i].content, msgs[i].len);
    fake_request_complete(req, 1);
    cr_assert_str_eq(run_outcome(run), "ok");
    return run;
}

/* What a client can tell apart: the output events and status notices in order with their keys in order, and what was dropped. */
static json_t *observable(gw_run_t *run)
{
    json_t *events = run_events(run), *out = json_array(), *ev;
    size_t i;

    json_array_foreach(events, i, ev)
    {
        const char *type = json_string_value(json_object_get(ev, "type")), *key;
        json_t *value, *seen;
        if (strcmp(type, "stdout") != 0 && strcmp(type, "stderr") != 0 && strcmp(type, "status") != 0 &&
            strcmp(type, "execution_complete") != 0)
            continue;
        seen = json_array();
        json_object_foreach(ev, key, value)
        {
            /* the clock's and the run's own values differ between any two runs */
            if (strcmp(key, "timestamp") == 0 || strcmp(key, "_id") == 0 || strcmp(key, "execution_time") == 0)
                json_array_append_new(seen, json_string(key));
            else
                json_array_append_new(seen, json_pack("[s, O]", key, value));
        }
        json_array_append_new(out, seen);
    }
    json_decref(events);
    return out;
}

/* The frames of `run`'s stream events (in order) must end in exactly the `msgs` marked verbatim's text tokens. */
static void expect_verbatim(gw_run_t *run, const stream_msg_t *msgs, size_t n)
{
    json_t *frames = run_frames(run), *frame;
    size_t i, m = 0;

    json_array_foreach(frames, i, frame)
    {
        const char *f = json_string_value(frame);
        wire_stream_fields_t fields;
        if (strstr(f, "{\"type\":\"stdout\",\"timestamp\":") == NULL && strstr(f, "{\"type\":\"stderr\",\"timestamp\":") == NULL)
            continue;
        while (m != n && !msgs[m].verbatim)
            ++m;
        if (m == n)
            break;
        /* the frame must end with ,"text":TOKEN}\n\n, TOKEN as the kernel wrote it (the scan is tested in tests/wire) */
        cr_assert(wire_json_scan_stream(msgs[m].content, msgs[m].len, &fields), "message %zu is simple", m);
        size_t flen = json_string_length(frame), tl = fields.text_len;
        cr_expect(flen > tl + 11 && memcmp(f + flen - tl - 11, ",\"text\":", 8) == 0 &&
                      memcmp(f + flen - tl - 3, fields.text, tl) == 0 && memcmp(f + flen - 3, "}\n\n", 3) == 0,
                  "message %zu is relayed as sent: %s", m, f);
        ++m;
    }
    while (m != n && !msgs[m].verbatim)
        ++m;
    cr_expect_eq(m, n, "every verbatim message has its event");
    json_decref(frames);
}

/* The same messages through the raw path and through the parsed one (as before raw streams) read the same. */
static void expect_same_as_parsed(const stream_msg_t *msgs, size_t n, size_t output_limit)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *fast = run_with(ctx, kernel, 0, msgs, n, output_limit), *slow;
    json_t *a, *b;

    fake_kmgr_parse_all(eng.kmgr, 1);
    slow = run_with(ctx, kernel, 1, msgs, n, output_limit);
    fake_kmgr_parse_all(eng.kmgr, 0);
    a = observable(fast);
    b = observable(slow);
    char *as = json_dumps(a, JSON_COMPACT), *bs = json_dumps(b, JSON_COMPACT);
    cr_expect(json_equal(a, b), "raw:\n%s\nparsed:\n%s", as, bs);
    free(as);
    free(bs);
    expect_verbatim(fast, msgs, n);
    json_decref(a);
    json_decref(b);
}

static const stream_msg_t texts[] = {
    MSG(JSON_OF("stdout", "hello, world\\n"), 1),
    MSG(JSON_OF("stdout", "caf\xc3\xa9 \xe2\x82\xac \xe4\xb8\xad\xe6\x96\x87"), 1),
    MSG(JSON_OF("stdout", "\xf0\x9f\x98\x80 and \\ud83d\\ude00"), 1),
    MSG(JSON_OF("stderr", "\\n\\t\\\"q\\\" \\\\ \\/ \\u001b[31mred\\u001B[0m \\u2028 \\u0000 end"), 1),
    MSG(" { \"text\" : \"spaced\" , \"name\" : \"stderr\" , \"extra\" : \"x\" } ", 1),
    MSG(JSON_OF("other", ""), 1),
};

ENGINE_TEST(raw_stream, text_reads_the_same_as_decoded_and_reencoded)
{
    expect_same_as_parsed(texts, sizeof(texts) / sizeof(texts[0]), 1u << 20);
}

ENGINE_TEST(raw_stream, execd_framing_reads_the_same)
{
    eng.config.compat_execd = 1;
    expect_same_as_parsed(texts, sizeof(texts) / sizeof(texts[0]), 1u << 20);
}

/* A text the raw path may not cut (it is not decoded) takes the decoded path: cut at a character, reported once. */
ENGINE_TEST(raw_stream, output_limit_applies_as_to_decoded_text)
{
    /* 8 bytes decoded: exactly the limit, then nothing fits */
    static const stream_msg_t at_limit[] = {
        MSG(JSON_OF("stdout", "abc\\u00e9def"), 1),
        MSG(JSON_OF("stdout", "x"), 0),
        MSG(JSON_OF("stdout", ""), 1),
    };
    /* 9 bytes decoded, the last character across the limit: 7 are kept */
    static const stream_msg_t over_limit[] = {
        MSG(JSON_OF("stdout", "abcdefg\xc3\xa9"), 0),
        MSG(JSON_OF("stderr", "more"), 0),
    };
    static const stream_msg_t escaped_over_limit[] = {
        MSG(JSON_OF("stdout", "abc"), 1),
        MSG(JSON_OF("stdout", "\\t\\\"\\u00e9\\ud83d\\ude00"), 0),
    };
    expect_same_as_parsed(at_limit, 3, 8);
    expect_same_as_parsed(over_limit, 2, 8);
    expect_same_as_parsed(escaped_over_limit, 2, 8);
}

/* What the scan declines goes through the parser: malformed content is still reported, odd but valid content relayed. */
ENGINE_TEST(raw_stream, content_the_scan_declines_reads_as_before)
{
    static const stream_msg_t declined[] = {
        MSG(JSON_OF("stdout", "lone \\ud800"), 0),
        MSG(JSON_OF("stdout", "bad \xc3"), 0),
        MSG("{\"name\":\"stdout\",\"text\":\"raw\0nul\"}", 0),
        MSG("{\"name\":\"stdout\",\"text\":", 0),
        MSG("", 0),
        MSG("{\"name\":\"stdout\",\"text\":\"counted\",\"n\":1}", 0),
        MSG("{\"name\":\"std\\u006fut\",\"text\":\"escaped name\"}", 0),
        MSG("{\"te\\u0078t\":\"escaped key\",\"name\":\"stdout\"}", 0),
        MSG("{\"name\":\"stdout\",\"text\":7}", 0),
        MSG("{\"text\":\"no name\"}", 0),
    };
    kmgr_kernel_t *kernel;
    gw_context_t *ctx;
    json_t *events;

    expect_same_as_parsed(declined, sizeof(declined) / sizeof(declined[0]), 1u << 20);
    ctx = engine_ready_context(0, &kernel);
    events = run_events(run_with(ctx, kernel, 0, declined, 4, 1u << 20));
    cr_expect_eq(count_type(events, "stdout"), 0);
    size_t undecodable = 0;
    for (size_t i = 0; i != json_array_size(events); ++i) {
        const char *text = json_string_value(json_object_get(json_array_get(events, i), "text"));
        undecodable += text != NULL && strcmp(text, "message_undecodable") == 0;
    }
    cr_expect_eq(undecodable, 4, "each malformed content is reported");
    json_decref(events);
}
