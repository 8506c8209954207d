/* Gathering a run's events into an MCP tool result: text in order, images apart, everything within the call's budget. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/json_out.h"
#include "mcp/output.h"

static void buf_append(gw_mcp_buf_t *b, const char *s, size_t n)
{
    /* a size no allocation could hold is out of memory, which aborts (STYLE.md 6); it also keeps len + n + 1 from wrapping */
    if (n > SIZE_MAX / 4 - b->len)
        abort();
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->base = wire_realloc(b->base, b->cap);
    }
    memcpy(b->base + b->len, s, n);
    b->len += n;
    b->base[b->len] = '\0';
}

void gw_mcp_output_init(gw_mcp_output_t *out, size_t max_bytes)
{
    memset(out, 0, sizeof(*out));
    out->max_bytes = max_bytes;
    out->results = json_array();
    out->images = json_array();
    out->execution_count = -1;
}

void gw_mcp_output_dispose(gw_mcp_output_t *out)
{
    free(out->text.base);
    free(out->out.base);
    free(out->err.base);
    json_decref(out->results);
    json_decref(out->images);
    json_decref(out->error);
    memset(out, 0, sizeof(*out));
}

/* How much of `n` bytes of UTF-8 at `s` fits in the budget, cut before a continuation byte; the rest is counted as dropped. */
static size_t budget_text(gw_mcp_output_t *out, const char *s, size_t n)
{
    size_t room = out->max_bytes > out->used_bytes ? out->max_bytes - out->used_bytes : 0, keep = n;

    if (keep > room) {
        keep = room;
        while (keep != 0 && ((unsigned char)s[keep] & 0xC0) == 0x80)
            --keep;
        out->dropped_bytes += n - keep;
    }
    out->used_bytes += keep;
    return keep;
}

static void note_last_line(gw_mcp_output_t *out, const char *s, size_t n)
{
    size_t end = n, start;

    while (end != 0 && (s[end - 1] == '\n' || s[end - 1] == '\r'))
        --end;
    for (start = end; start != 0 && s[start - 1] != '\n'; --start)
        ;
    if (end == start)
        return;
    if (end - start >= sizeof(out->last_line))
        end = start + sizeof(out->last_line) - 1;
    /* a cut inside a character would not be UTF-8: back off to its first byte */
    while (end > start && end - start == sizeof(out->last_line) - 1 && ((unsigned char)s[end] & 0xC0) == 0x80)
        --end;
    memcpy(out->last_line, s + start, end - start);
    out->last_line[end - start] = '\0';
}

static void add_stream(gw_mcp_output_t *out, gw_mcp_buf_t *which, const json_t *text)
{
    const char *s = json_string_value(text);
    size_t n = json_string_length(text), keep;

    if (s == NULL)
        return;
    note_last_line(out, s, n);
    keep = budget_text(out, s, n);
    buf_append(&out->text, s, keep);
    buf_append(which, s, keep);
}

static void add_result(gw_mcp_output_t *out, const json_t *bundle)
{
    json_t *copy, *plain;
    const char *mime;
    size_t size;

    if (!json_is_object(bundle))
        return;
    copy = json_deep_copy(bundle);
    /* execd's SDKs read the plain text under `text` too; here one copy is enough */
    json_object_del(copy, "text");
    size = json_dumpb(copy, NULL, 0, JSON_COMPACT);
    if (out->used_bytes + size > out->max_bytes) {
        ++out->dropped_results;
        json_decref(copy);
        return;
    }
    out->used_bytes += size;
    if (json_is_string(plain = json_object_get(copy, "text/plain"))) {
        const char *s = json_string_value(plain);
        size_t n = json_string_length(plain);
        note_last_line(out, s, n);
        buf_append(&out->text, s, n);
        if (n != 0 && s[n - 1] != '\n')
            buf_append(&out->text, "\n", 1);
    }
    for (int i = 0; i != 2; ++i) {
        json_t *data = json_object_get(copy, mime = i == 0 ? "image/png" : "image/jpeg");
        if (json_is_string(data))
            json_array_append_new(out->images, json_pack("{s:s, s:O, s:s}", "type", "image", "data", data, "mimeType", mime));
    }
    json_array_append_new(out->results, copy);
}

static void add_error(gw_mcp_output_t *out, const json_t *error)
{
    json_t *tb = json_object_get(error, "traceback"), *line;
    const char *ename = json_string_value(json_object_get(error, "ename")),
               *evalue = json_string_value(json_object_get(error, "evalue"));
    size_t i, n = 0;

    json_decref(out->error);
    out->error = json_pack("{s:s, s:s, s:o}", "ename", ename != NULL ? ename : "Error", "evalue", evalue != NULL ? evalue : "",
                           "traceback", json_is_array(tb) ? json_incref(tb) : json_array());
    if (out->text.len != 0 && out->text.base[out->text.len - 1] != '\n')
        buf_append(&out->text, "\n", 1);
    json_array_foreach(tb, i, line)
    {
        const char *s = json_string_value(line);
        if (s == NULL)
            continue;
        /* a traceback is what the model needs most: it is kept whatever the budget says of output */
        buf_append(&out->text, s, json_string_length(line));
        buf_append(&out->text, "\n", 1);
        ++n;
    }
    if (n == 0) {
        char head[512];
        int len = snprintf(head, sizeof(head), "%s: %s\n", ename != NULL ? ename : "Error", evalue != NULL ? evalue : "");
        buf_append(&out->text, head, len < 0 ? 0 : (size_t)len >= sizeof(head) ? sizeof(head) - 1 : (size_t)len);
    }
}

static size_t count_of(const json_t *dropped, const char *key)
{
    json_int_t n = json_integer_value(json_object_get(dropped, key));
    return n > 0 ? (size_t)n : 0;
}

/* The run's own counts: the text and results its limits dropped never reached this budget. */
static void add_run_dropped(gw_mcp_output_t *out, const json_t *dropped)
{
    out->engine_dropped = 1;
    out->run_dropped_bytes = count_of(dropped, "output_bytes");
    out->run_dropped_results = count_of(dropped, "results");
    out->run_dropped_messages = count_of(dropped, "messages");
}

int gw_mcp_output_add(gw_mcp_output_t *out, const json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    json_t *v;

    if (type == NULL)
        return 0;
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        add_stream(out, type[3] == 'o' ? &out->out : &out->err, json_object_get(event, "text"));
    } else if (strcmp(type, "result") == 0) {
        add_result(out, json_object_get(event, "results"));
    } else if (strcmp(type, "error") == 0) {
        add_error(out, json_object_get(event, "error"));
    } else {
        if (strcmp(type, "execution_count") == 0 && json_is_integer(v = json_object_get(event, "execution_count")))
            out->execution_count = (int)json_integer_value(v);
        else if (strcmp(type, "execution_complete") == 0 && json_is_object(v = json_object_get(event, "dropped")))
            add_run_dropped(out, v);
        else if (strcmp(type, "status") == 0 && (v = json_object_get(event, "text")) != NULL && json_is_string(v) &&
                 strcmp(json_string_value(v), "output_truncated") == 0)
            out->engine_dropped = 1;
        return 0;
    }
    ++out->outputs;
    return 1;
}

/* Why the run dropped output that its counts do not say in bytes or results. */
static const char *run_note(const gw_mcp_output_t *out, char *buf, size_t size)
{
    if (out->run_dropped_messages != 0)
        snprintf(buf, size, ", and %zu kernel message%s over the message cap (--max-message-bytes), whole",
                 out->run_dropped_messages, out->run_dropped_messages == 1 ? "" : "s");
    else if (out->engine_dropped && out->run_dropped_bytes == 0 && out->run_dropped_results == 0)
        snprintf(buf, size, ", and some by the run's own limits");
    else
        buf[0] = '\0';
    return buf;
}

json_t *gw_mcp_output_result(const gw_mcp_output_t *out, const char *language, int structured)
{
    json_t *content = json_array(), *result, *sc, *image;
    gw_mcp_buf_t text = {NULL, 0, 0};
    size_t i, dropped_bytes = out->dropped_bytes + out->run_dropped_bytes,
              dropped_results = out->dropped_results + out->run_dropped_results;
    int truncated = dropped_bytes != 0 || dropped_results != 0 || out->engine_dropped;
    char why[160];

    buf_append(&text, out->text.base != NULL ? out->text.base : "", out->text.len);
    if (truncated) {
        char note[384];
        int n = snprintf(note, sizeof(note),
                         "%s[kgate: output truncated: %zu bytes of text and %zu results dropped beyond %zu bytes per call%s]\n",
                         text.len != 0 && text.base[text.len - 1] != '\n' ? "\n" : "", dropped_bytes, dropped_results,
                         out->max_bytes, run_note(out, why, sizeof(why)));
        buf_append(&text, note, (size_t)n < sizeof(note) ? (size_t)n : sizeof(note) - 1);
    }
    if (out->timeout_asked_ms != 0) {
        char note[256];
        int n = snprintf(
            note, sizeof(note), "%s[kgate: timeout_ms %u is over the server's cap (--max-timeout-ms): the run had %u ms]\n",
            text.len != 0 && text.base[text.len - 1] != '\n' ? "\n" : "", out->timeout_asked_ms, out->timeout_applied_ms);
        buf_append(&text, note, (size_t)n < sizeof(note) ? (size_t)n : sizeof(note) - 1);
    }
    if (text.len == 0 && json_array_size(out->images) == 0)
        buf_append(&text, "(no output)", sizeof("(no output)") - 1);
    if (text.len != 0)
        json_array_append_new(content, json_pack("{s:s, s:s%}", "type", "text", "text", text.base, text.len));
    json_array_foreach(out->images, i, image) json_array_append(content, image);
    result = json_pack("{s:o}", "content", content);
    if (out->error != NULL)
        json_object_set_new(result, "isError", json_true());
    if (structured) {
        sc = json_pack("{s:s, s:o, s:s%, s:s%, s:O}", "language", language, "execution_count",
                       out->execution_count >= 0 ? json_integer(out->execution_count) : json_null(), "stdout",
                       out->out.base != NULL ? out->out.base : "", out->out.len, "stderr",
                       out->err.base != NULL ? out->err.base : "", out->err.len, "results", out->results);
        if (out->error != NULL)
            json_object_set(sc, "error", out->error);
        if (truncated)
            json_object_set_new(sc, "truncated",
                                json_pack("{s:I, s:I, s:I, s:I, s:b}", "limit_bytes", (json_int_t)out->max_bytes, "dropped_bytes",
                                          (json_int_t)dropped_bytes, "dropped_results", (json_int_t)dropped_results,
                                          "dropped_messages", (json_int_t)out->run_dropped_messages, "dropped_by_run",
                                          out->engine_dropped));
        if (out->timeout_asked_ms != 0)
            json_object_set_new(sc, "timeout_capped",
                                json_pack("{s:I, s:I}", "asked_ms", (json_int_t)out->timeout_asked_ms, "applied_ms",
                                          (json_int_t)out->timeout_applied_ms));
        json_object_set_new(result, "structuredContent", sc);
    }
    free(text.base);
    return result;
}

json_t *gw_mcp_text_result(const char *text, size_t len, int is_error)
{
    /* the text may quote a client's value cut at "%.100s" (core/json_out.h: gw_json_text) */
    json_t *result = json_pack("{s:[{s:s, s:o}]}", "content", "type", "text", "text", gw_json_text(text, len));

    if (is_error)
        json_object_set_new(result, "isError", json_true());
    return result;
}
