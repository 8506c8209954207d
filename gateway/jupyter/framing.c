/* The Jupyter kernel WebSocket framings (v1 and legacy) to message parts and back; framing.h has the layouts. */
#include <string.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "core/errors.h"
#include "core/json_out.h"
#include "jupyter/framing.h"

static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (size_t i = 8; i-- != 0;)
        v = v << 8 | p[i];
    return v;
}

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static size_t store_le64(uint8_t *p, uint64_t v)
{
    for (size_t i = 0; i != 8; ++i, v >>= 8)
        p[i] = (uint8_t)v;
    return 8;
}

static size_t store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

static wire_frame_t view(const uint8_t *data, size_t start, size_t end)
{
    return (wire_frame_t){(void *)(data + start), end - start};
}

/* Kernels answer on iopub too; hb is no message channel (Jupyter Server relays no hb over the WebSocket). */
static int is_message_channel(wire_channel_t ch)
{
    return (unsigned)ch < (unsigned)WIRE_CHANNEL_COUNT && ch != WIRE_CHANNEL_HB;
}

/* A client sends requests (shell, control) and input replies (stdin); iopub only flows from kernels. */
static int client_channel(const char *name, size_t len, wire_channel_t *out)
{
    static const wire_channel_t allowed[] = {WIRE_CHANNEL_SHELL, WIRE_CHANNEL_CONTROL, WIRE_CHANNEL_STDIN};

    for (size_t i = 0; i != sizeof(allowed) / sizeof(allowed[0]); ++i) {
        const char *s = wire_channel_name(allowed[i]);
        if (strlen(s) == len && memcmp(s, name, len) == 0) {
            *out = allowed[i];
            return 0;
        }
    }
    return GW_EJMSG_CHANNEL;
}

static int copy_id(const json_t *header, const char *key, char *out, size_t max)
{
    json_t *v = json_object_get(header, key);
    size_t len;

    /* the relay keys requests on these as C strings */
    if (!json_is_string(v) || (len = json_string_length(v)) == 0 || len > max || memchr(json_string_value(v), '\0', len) != NULL)
        return GW_EJMSG_HEADER;
    memcpy(out, json_string_value(v), len);
    out[len] = '\0';
    return 0;
}

static int take_ids(const json_t *header, gw_jmsg_t *out)
{
    int ret = copy_id(header, "msg_id", out->msg_id, GW_JMSG_ID_MAX);
    return ret != 0 ? ret : copy_id(header, "msg_type", out->msg_type, GW_JMSG_TYPE_MAX);
}

/* Renders the four members compactly into one owned block (NULL members as {}), and points the parts at it. */
static void render_parts(json_t *const members[GW_JMSG_NUM_PARTS], gw_jmsg_t *out)
{
    size_t lens[GW_JMSG_NUM_PARTS], total = 0, at = 0;

    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        total += lens[i] = members[i] != NULL ? gw_json_render(members[i], NULL) : 2;
    out->_storage = wire_malloc(total != 0 ? total : 1);
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        if (members[i] != NULL)
            gw_json_render(members[i], out->_storage + at);
        else
            memcpy(out->_storage + at, "{}", 2);
        out->parts[i] = (wire_frame_t){out->_storage + at, lens[i]};
        at += lens[i];
    }
}

void gw_jmsg_dispose(gw_jmsg_t *msg)
{
    free(msg->_storage);
    free(msg->_buffer_views);
    memset(msg, 0, sizeof(*msg));
}

/* ---- v1.kernel.websocket.jupyter.org ---- */

static uint64_t v1_offset(const uint8_t *data, size_t i)
{
    return load_le64(data + 8 * (i + 1));
}

static int decode_v1(const uint8_t *data, size_t len, gw_jmsg_t *out)
{
    json_t *header = NULL;
    uint64_t n, prev;
    size_t table, i;
    int ret = 0;

    if (len < 8)
        return GW_EJMSG_TRUNCATED;
    n = load_le64(data);
    if (n < 6)
        return GW_EJMSG_PARTCOUNT;
    if (n - 6 > GW_JMSG_MAX_BUFFERS)
        return GW_EJMSG_TOOMANYBUFFERS;
    table = 8 * ((size_t)n + 1);
    if (len < table)
        return GW_EJMSG_TRUNCATED;
    /* both Jupyter Server and JupyterLab write the parts back to back right after the table and end the message
     * with the last one: anything else is a broken encoder, and refusing it makes re-encoding give the same bytes */
    for (i = 0, prev = table; i != n; prev = v1_offset(data, i++)) {
        uint64_t off = v1_offset(data, i);
        if (off < prev || off > len || (i == 0 && off != table))
            return GW_EJMSG_OFFSETS;
    }
    if (prev != len)
        return GW_EJMSG_OFFSETS;

    for (i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        out->parts[i] = view(data, (size_t)v1_offset(data, i + 1), (size_t)v1_offset(data, i + 2));
    out->nbuffers = (size_t)n - 6;
    if (out->nbuffers != 0) {
        out->_buffer_views = wire_malloc(out->nbuffers * sizeof(wire_frame_t));
        for (i = 0; i != out->nbuffers; ++i)
            out->_buffer_views[i] = view(data, (size_t)v1_offset(data, i + 5), (size_t)v1_offset(data, i + 6));
        out->buffers = out->_buffer_views;
    }
    /* the kernel gets these bytes as they are: each must be a JSON object, as a kernel's own session checks */
    for (i = 0; i != GW_JMSG_NUM_PARTS && ret == 0; ++i) {
        json_t *json = wire_json_parse(out->parts[i].base, out->parts[i].len);
        if (!json_is_object(json))
            ret = GW_EJMSG_NOTJSON;
        if (i == GW_JMSG_PART_HEADER)
            header = json;
        else
            json_decref(json);
    }
    if (ret == 0)
        ret = take_ids(header, out);
    json_decref(header);
    if (ret == 0)
        ret = client_channel((const char *)data + table, (size_t)(v1_offset(data, 1) - table), &out->channel);
    return ret;
}

/* ---- legacy ---- */

/* A member of the legacy object that may be absent or null (then {}), or else must be an object. */
static int optional_object(json_t *root, const char *key, json_t **out)
{
    json_t *v = json_object_get(root, key);

    *out = json_is_null(v) ? NULL : v;
    return v == NULL || json_is_null(v) || json_is_object(v) ? 0 : GW_EJMSG_NOTJSON;
}

static int decode_legacy_json(const uint8_t *text, size_t len, int in_text_frame, gw_jmsg_t *out)
{
    json_t *root = wire_json_parse((const char *)text, len), *members[GW_JMSG_NUM_PARTS] = {NULL}, *v;
    int ret = 0;

    members[GW_JMSG_PART_HEADER] = json_object_get(root, "header");
    if (!json_is_object(root) || !json_is_object(members[GW_JMSG_PART_HEADER])) {
        ret = GW_EJMSG_NOTJSON;
        goto Exit;
    }
    if ((ret = optional_object(root, "parent_header", &members[GW_JMSG_PART_PARENT_HEADER])) != 0 ||
        (ret = optional_object(root, "metadata", &members[GW_JMSG_PART_METADATA])) != 0 ||
        (ret = optional_object(root, "content", &members[GW_JMSG_PART_CONTENT])) != 0)
        goto Exit;
    /* JupyterLab sends "buffers": [] in text frames; Jupyter Server would hand any other value to the kernel's socket
     * as frames and fail, and in a binary frame it replaces the member with the frame's buffers */
    if (in_text_frame && (v = json_object_get(root, "buffers")) != NULL && !json_is_null(v) &&
        !(json_is_array(v) && json_array_size(v) == 0)) {
        ret = GW_EJMSG_TEXTBUFFERS;
        goto Exit;
    }
    if ((ret = take_ids(members[GW_JMSG_PART_HEADER], out)) != 0)
        goto Exit;
    /* Jupyter Server: "No channel specified, assuming shell" */
    if ((v = json_object_get(root, "channel")) == NULL || json_is_null(v))
        out->channel = WIRE_CHANNEL_SHELL;
    else if (!json_is_string(v) || (ret = client_channel(json_string_value(v), json_string_length(v), &out->channel)) != 0)
        ret = GW_EJMSG_CHANNEL;
    if (ret == 0)
        render_parts(members, out);
Exit:
    json_decref(root);
    return ret;
}

static uint32_t legacy_offset(const uint8_t *data, size_t i)
{
    return load_be32(data + 4 * (i + 1));
}

/* Where part `j` of `k` ends (part 0 is the JSON object): the next part's offset, or the end for the last. */
static size_t legacy_part_end(const uint8_t *data, size_t len, uint32_t k, size_t j)
{
    return j + 1 < k ? legacy_offset(data, j + 1) : len;
}

static int decode_legacy_binary(const uint8_t *data, size_t len, gw_jmsg_t *out)
{
    uint32_t k, prev;
    size_t table, i;

    if (len < 4)
        return GW_EJMSG_TRUNCATED;
    /* k parts: the JSON object, then the buffers (Python reads k signed: 2^31 and above are refused there too) */
    if ((k = load_be32(data)) == 0)
        return GW_EJMSG_PARTCOUNT;
    if (k - 1 > GW_JMSG_MAX_BUFFERS)
        return GW_EJMSG_TOOMANYBUFFERS;
    table = 4 * ((size_t)k + 1);
    if (len < table)
        return GW_EJMSG_TRUNCATED;
    for (i = 0, prev = (uint32_t)table; i != k; prev = legacy_offset(data, i++)) {
        uint32_t off = legacy_offset(data, i);
        if (off < prev || off > len || (i == 0 && off != table))
            return GW_EJMSG_OFFSETS;
    }
    out->nbuffers = k - 1;
    if (out->nbuffers != 0) {
        out->_buffer_views = wire_malloc(out->nbuffers * sizeof(wire_frame_t));
        for (i = 0; i != out->nbuffers; ++i)
            out->_buffer_views[i] = view(data, legacy_offset(data, i + 1), legacy_part_end(data, len, k, i + 1));
        out->buffers = out->_buffer_views;
    }
    return decode_legacy_json(data + table, legacy_part_end(data, len, k, 0) - table, 0, out);
}

int gw_jmsg_decode(gw_jframing_t framing, int is_binary, const uint8_t *data, size_t len, gw_jmsg_t *out)
{
    int ret;

    memset(out, 0, sizeof(*out));
    if (framing == GW_JFRAMING_V1)
        ret = is_binary ? decode_v1(data, len, out) : GW_EJMSG_NOTBINARY;
    else
        ret = is_binary ? decode_legacy_binary(data, len, out) : decode_legacy_json(data, len, 1, out);
    if (ret != 0)
        gw_jmsg_dispose(out);
    return ret;
}

/* ---- messages from kernels and from kgate ---- */

int gw_jmsg_from_parts(gw_jmsg_t *out, wire_channel_t channel, const wire_frame_t parts[GW_JMSG_NUM_PARTS],
                       const wire_frame_t *buffers, size_t nbuffers)
{
    json_t *header = wire_json_parse(parts[GW_JMSG_PART_HEADER].base, parts[GW_JMSG_PART_HEADER].len);
    int ret;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(header))
        ret = GW_EJMSG_NOTJSON;
    else if ((ret = take_ids(header, out)) == 0 && !is_message_channel(channel))
        ret = GW_EJMSG_CHANNEL;
    json_decref(header);
    if (ret != 0) {
        gw_jmsg_dispose(out);
        return ret;
    }
    out->channel = channel;
    memcpy(out->parts, parts, sizeof(out->parts));
    out->buffers = buffers;
    out->nbuffers = nbuffers;
    return 0;
}

int gw_jmsg_from_wire(gw_jmsg_t *out, wire_channel_t channel, const wire_msg_t *msg)
{
    json_t *const members[GW_JMSG_NUM_PARTS] = {msg->header, msg->parent_header, msg->metadata, msg->content};
    int ret;

    memset(out, 0, sizeof(*out));
    if ((ret = take_ids(msg->header, out)) == 0 && !is_message_channel(channel))
        ret = GW_EJMSG_CHANNEL;
    if (ret != 0) {
        gw_jmsg_dispose(out);
        return ret;
    }
    out->channel = channel;
    render_parts(members, out);
    out->buffers = msg->buffers.entries;
    out->nbuffers = msg->buffers.size;
    return 0;
}

/* ---- encoding ---- */

static void push(gw_jmsg_encoded_t *out, const void *base, size_t len)
{
    out->iov[out->iovcnt++] = h2o_iovec_init(base, len);
}

static void push_frame(gw_jmsg_encoded_t *out, wire_frame_t frame)
{
    push(out, frame.base, frame.len);
}

/* The body of a JSON string for `s` (valid UTF-8 without NUL: ids taken from parsed JSON), escaped as jansson does. */
static size_t escape_string(char *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s != '\0'; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            const char *short_form = strchr("\bb\ff\nn\rr\tt", c);
            out[n++] = '\\';
            if (short_form != NULL) {
                out[n++] = short_form[1];
            } else {
                memcpy(out + n, "u00", 3);
                out[n + 3] = hex[c >> 4];
                out[n + 4] = hex[c & 0xf];
                n += 5;
            }
        } else {
            out[n++] = (char)c;
        }
    }
    return n;
}

static size_t append(char *out, const char *s)
{
    size_t len = strlen(s);

    memcpy(out, s, len);
    return len;
}

static void encode_v1(const gw_jmsg_t *msg, gw_jmsg_encoded_t *out)
{
    const char *channel = wire_channel_name(msg->channel);
    size_t n = 6 + msg->nbuffers, at = 0, i;
    uint64_t off = 8 * (n + 1);

    at += store_le64(out->_head + at, n);
    at += store_le64(out->_head + at, off);
    at += store_le64(out->_head + at, off += strlen(channel));
    for (i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        at += store_le64(out->_head + at, off += msg->parts[i].len);
    for (i = 0; i != msg->nbuffers; ++i)
        at += store_le64(out->_head + at, off += msg->buffers[i].len);
    at += append((char *)out->_head + at, channel);
    out->is_binary = 1;
    push(out, out->_head, at);
    for (i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        push_frame(out, msg->parts[i]);
    for (i = 0; i != msg->nbuffers; ++i)
        push_frame(out, msg->buffers[i]);
}

static int encode_legacy(const gw_jmsg_t *msg, gw_jmsg_encoded_t *out)
{
    static const char open[] = "{\"header\":";
    size_t ids_len = 0, tail_len = 0, table = 0, i;
    char *glue = out->_glue;

    ids_len += append(glue + ids_len, ",\"msg_id\":\"");
    ids_len += escape_string(glue + ids_len, msg->msg_id);
    ids_len += append(glue + ids_len, "\",\"msg_type\":\"");
    ids_len += escape_string(glue + ids_len, msg->msg_type);
    ids_len += append(glue + ids_len, "\",\"parent_header\":");
    /* Jupyter Server's member order; "buffers" goes with the binary frame's parts */
    tail_len += append(glue + ids_len + tail_len, msg->nbuffers == 0 ? ",\"buffers\":[],\"channel\":\"" : ",\"channel\":\"");
    tail_len += append(glue + ids_len + tail_len, wire_channel_name(msg->channel));
    tail_len += append(glue + ids_len + tail_len, "\"}");

    out->is_binary = msg->nbuffers != 0;
    if (out->is_binary)
        table = 4 * (1 + 1 + msg->nbuffers);
    memcpy(out->_head + table, open, sizeof(open) - 1);
    push(out, out->_head, table + sizeof(open) - 1);
    push_frame(out, msg->parts[GW_JMSG_PART_HEADER]);
    push(out, glue, ids_len);
    push_frame(out, msg->parts[GW_JMSG_PART_PARENT_HEADER]);
    push(out, ",\"metadata\":", sizeof(",\"metadata\":") - 1);
    push_frame(out, msg->parts[GW_JMSG_PART_METADATA]);
    push(out, ",\"content\":", sizeof(",\"content\":") - 1);
    push_frame(out, msg->parts[GW_JMSG_PART_CONTENT]);
    push(out, glue + ids_len, tail_len);
    if (!out->is_binary)
        return 0;

    /* the offsets of the JSON object and of each buffer's start (the last part runs to the end: its end is not written) */
    uint64_t off = 0;
    size_t at = 0;
    for (i = 0; i != out->iovcnt; ++i)
        off += out->iov[i].len;
    at += store_be32(out->_head + at, (uint32_t)(1 + msg->nbuffers));
    at += store_be32(out->_head + at, (uint32_t)table);
    for (i = 0; i != msg->nbuffers; ++i) {
        if (off > UINT32_MAX) {
            out->iovcnt = 0;
            return GW_EJMSG_TOOBIG;
        }
        at += store_be32(out->_head + at, (uint32_t)off);
        off += msg->buffers[i].len;
        push_frame(out, msg->buffers[i]);
    }
    return 0;
}

int gw_jmsg_encode(gw_jframing_t framing, const gw_jmsg_t *msg, gw_jmsg_encoded_t *out)
{
    out->iovcnt = 0;
    out->is_binary = 0;
    if (!is_message_channel(msg->channel))
        return GW_EJMSG_CHANNEL;
    if (msg->nbuffers > GW_JMSG_MAX_BUFFERS)
        return GW_EJMSG_TOOMANYBUFFERS;
    if (framing == GW_JFRAMING_V1) {
        encode_v1(msg, out);
        return 0;
    }
    return encode_legacy(msg, out);
}
