/* wire/src/connfile.c: reading, writing and addressing Jupyter connection files. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include <sodium.h>
#include "wire/alloc.h"
#include "wire/connfile.h"
#include "wire/errors.h"
#include "wire/fdio.h"

/* A real connection file is a few hundred bytes; anything far larger is not one. */
#define CONNFILE_MAX_SIZE (64 * 1024)

static const char *const channel_names[WIRE_CHANNEL_COUNT] = {"shell", "iopub", "stdin", "control", "hb"};
static const char *const port_keys[WIRE_CHANNEL_COUNT] = {"shell_port", "iopub_port", "stdin_port", "control_port", "hb_port"};

const char *wire_channel_name(wire_channel_t ch)
{
    return (unsigned)ch < WIRE_CHANNEL_COUNT ? channel_names[ch] : "unknown";
}

void wire_connection_dispose(wire_connection_t *conn)
{
    if (conn->key != NULL)
        sodium_memzero(conn->key, strlen(conn->key));
    free(conn->transport);
    free(conn->ip);
    free(conn->key);
    free(conn->signature_scheme);
    free(conn->kernel_name);
    memset(conn, 0, sizeof(*conn));
}

int wire_connection_write(const wire_connection_t *conn, const char *path)
{
    json_t *obj = json_object();
    char *text;
    int fd, ret = 0, bad = 0;

    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch)
        json_object_set_new(obj, port_keys[ch], json_integer(conn->ports[ch]));
    /* json_object_set_new fails (and releases nothing) when json_string rejected NULL or bad UTF-8. */
    bad |= json_object_set_new(obj, "ip", json_string(conn->ip));
    bad |= json_object_set_new(obj, "key", json_string(conn->key));
    bad |= json_object_set_new(obj, "transport", json_string(conn->transport));
    bad |= json_object_set_new(obj, "signature_scheme", json_string(conn->signature_scheme));
    bad |= json_object_set_new(obj, "kernel_name", json_string(conn->kernel_name != NULL ? conn->kernel_name : ""));
    text = bad ? NULL : json_dumps(obj, JSON_INDENT(2));
    json_decref(obj);
    if (text == NULL)
        return WIRE_EBADCONN;

    /* O_EXCL: never follow or reuse a file someone else placed there; the mode is explicit again with
     * fchmod because open() applies the umask. */
    if ((fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600)) < 0) {
        ret = errno == EEXIST ? WIRE_EEXISTS : WIRE_EIO;
        goto Exit;
    }
    if (fchmod(fd, 0600) != 0 || wire_write_all(fd, text, strlen(text)) != 0 || wire_write_all(fd, "\n", 1) != 0)
        ret = WIRE_EIO;
    if (close(fd) != 0)
        ret = WIRE_EIO;
    if (ret != 0)
        unlink(path);

Exit:
    sodium_memzero(text, strlen(text));
    free(text);
    return ret;
}

static char *read_file(const char *path, size_t *len, int *err)
{
    int fd;
    struct stat st;
    char *buf = NULL;
    size_t size = 0;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        *err = WIRE_EIO;
        return NULL;
    }
    if (fstat(fd, &st) != 0) {
        *err = WIRE_EIO;
        goto Error;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > CONNFILE_MAX_SIZE) {
        *err = WIRE_EBADCONN;
        goto Error;
    }
    /* Read to EOF within the bound rather than trusting st_size, which may change under us. */
    buf = wire_malloc(CONNFILE_MAX_SIZE + 1);
    for (;;) {
        ssize_t r = read(fd, buf + size, CONNFILE_MAX_SIZE + 1 - size);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *err = WIRE_EIO;
            goto Error;
        }
        if (r == 0)
            break;
        size += (size_t)r;
        if (size > CONNFILE_MAX_SIZE) {
            *err = WIRE_EBADCONN;
            goto Error;
        }
    }
    close(fd);
    *len = size;
    return buf;

Error:
    if (buf != NULL) {
        sodium_memzero(buf, size);
        free(buf);
    }
    close(fd);
    return NULL;
}

static char *dup_string_member(const json_t *obj, const char *key)
{
    const json_t *s = json_object_get(obj, key);
    return json_is_string(s) ? wire_strdup(json_string_value(s)) : NULL;
}

int wire_connection_read(const char *path, wire_connection_t *out)
{
    json_error_t error;
    json_t *obj = NULL;
    char *text;
    size_t len = 0;
    int ret = 0;

    memset(out, 0, sizeof(*out));
    if ((text = read_file(path, &len, &ret)) == NULL)
        return ret;
    /* Without JSON_ALLOW_NUL, jansson rejects "\u0000", so every string below is a proper C string. */
    obj = json_loadb(text, len, 0, &error);
    sodium_memzero(text, len);
    free(text);
    if (!json_is_object(obj)) {
        ret = WIRE_EBADCONN;
        goto Exit;
    }

    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch) {
        const json_t *port = json_object_get(obj, port_keys[ch]);
        if (!json_is_integer(port) || json_integer_value(port) < 1 || json_integer_value(port) > 65535) {
            ret = WIRE_EBADCONN;
            goto Exit;
        }
        out->ports[ch] = (int)json_integer_value(port);
    }
    out->transport = dup_string_member(obj, "transport");
    out->ip = dup_string_member(obj, "ip");
    out->key = dup_string_member(obj, "key");
    out->signature_scheme = dup_string_member(obj, "signature_scheme");
    /* Older connection files have no kernel_name (or null); the header allows "". */
    const json_t *kernel_name = json_object_get(obj, "kernel_name");
    out->kernel_name = kernel_name == NULL || json_is_null(kernel_name) ? wire_strdup("") : dup_string_member(obj, "kernel_name");
    if (out->transport == NULL || out->ip == NULL || out->key == NULL || out->signature_scheme == NULL ||
        out->kernel_name == NULL) {
        ret = WIRE_EBADCONN;
        goto Exit;
    }
    if ((strcmp(out->transport, "tcp") != 0 && strcmp(out->transport, "ipc") != 0) || out->ip[0] == '\0' ||
        strcmp(out->signature_scheme, "hmac-sha256") != 0) {
        ret = WIRE_EBADCONN;
        goto Exit;
    }

Exit:
    json_decref(obj);
    if (ret != 0)
        wire_connection_dispose(out);
    return ret;
}

int wire_connection_endpoint(const wire_connection_t *conn, wire_channel_t ch, char *buf, size_t bufsize)
{
    int n;

    if ((unsigned)ch >= WIRE_CHANNEL_COUNT)
        return WIRE_EBADCONN;
    /* ipykernel's ipc endpoints are "<ip>-<port>": the ip field is a path prefix there. */
    if (strcmp(conn->transport, "ipc") == 0)
        n = snprintf(buf, bufsize, "ipc://%s-%d", conn->ip, conn->ports[ch]);
    else if (strcmp(conn->transport, "tcp") == 0)
        n = snprintf(buf, bufsize, "tcp://%s:%d", conn->ip, conn->ports[ch]);
    else
        return WIRE_EBADCONN;
    if (n < 0 || (size_t)n >= bufsize)
        return WIRE_ENOSPACE;
    return n;
}
