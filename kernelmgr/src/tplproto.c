/* kernelmgr/src/tplproto.c: the template protocol's frames (tplproto.h); pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "wire/alloc.h"
#include "tplproto.h"

#define MAX_FIELDS 4

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

typedef struct st_field_t {
    const uint8_t *p;
    size_t n;
} field_t;

static int field_is(const field_t *f, const char *s)
{
    return f->n == strlen(s) && memcmp(f->p, s, f->n) == 0;
}

/* A decimal number of at most 19 digits (a leading '-' when `sign`), into `*out`. */
static int field_number(const field_t *f, int sign, long long *out)
{
    size_t i = 0;
    long long v = 0;
    int neg = 0;

    if (sign && f->n != 0 && f->p[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (f->n == i || f->n - i > 18)
        return -1;
    for (; i != f->n; ++i) {
        if (f->p[i] < '0' || f->p[i] > '9')
            return -1;
        v = v * 10 + (f->p[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

ssize_t kmgr_tpl_parse_reply(const uint8_t *buf, size_t len, kmgr_tpl_reply_t *out)
{
    field_t fields[MAX_FIELDS];
    size_t nfields = 0, size, at = 4;
    long long a, b;

    if (len < 4)
        return 0;
    if ((size = get_u32(buf)) > KMGR_TPL_MAX_FRAME)
        return -1;
    if (len - 4 < size)
        return 0;
    while (at != 4 + size) {
        size_t n;
        if (4 + size - at < 4 || nfields == MAX_FIELDS)
            return -1;
        n = get_u32(buf + at);
        at += 4;
        if (n > 4 + size - at)
            return -1;
        fields[nfields++] = (field_t){buf + at, n};
        at += n;
    }
    memset(out, 0, sizeof(*out));
    if (nfields == 2 && field_is(&fields[0], "ready")) {
        if (field_number(&fields[1], 0, &a) != 0 || a <= 0 || a > INT32_MAX)
            return -1;
        out->kind = KMGR_TPL_READY;
        out->pid = (pid_t)a;
    } else if (nfields == 3 && field_is(&fields[0], "forked")) {
        if (field_number(&fields[1], 0, &a) != 0 || field_number(&fields[2], 0, &b) != 0 || b <= 0 || b > INT32_MAX)
            return -1;
        out->kind = KMGR_TPL_FORKED;
        out->id = (uint64_t)a;
        out->pid = (pid_t)b;
    } else if (nfields == 3 && field_is(&fields[0], "failed")) {
        size_t n = fields[2].n < sizeof(out->text) - 1 ? fields[2].n : sizeof(out->text) - 1;
        if (field_number(&fields[1], 0, &a) != 0)
            return -1;
        out->kind = KMGR_TPL_FAILED;
        out->id = (uint64_t)a;
        memcpy(out->text, fields[2].p, n);
        out->text[n] = '\0';
        /* a NUL inside would cut the message where a reader does not expect it */
        for (size_t i = 0; i != n; ++i)
            if (out->text[i] == '\0')
                out->text[i] = ' ';
    } else if (nfields == 3 && field_is(&fields[0], "exited")) {
        if (field_number(&fields[1], 0, &a) != 0 || a <= 0 || a > INT32_MAX || field_number(&fields[2], 1, &b) != 0 ||
            b < INT32_MIN || b > INT32_MAX)
            return -1;
        out->kind = KMGR_TPL_EXITED;
        out->pid = (pid_t)a;
        out->wstatus = (int)b;
    } else {
        return -1;
    }
    return (ssize_t)(4 + size);
}

static void append(kmgr_tpl_request_t *r, const void *p, size_t n)
{
    if (r->len + n > r->cap) {
        r->cap = r->cap * 2 > r->len + n ? r->cap * 2 : r->len + n + 256;
        r->data = wire_realloc(r->data, r->cap);
    }
    memcpy(r->data + r->len, p, n);
    r->len += n;
}

static void add_field(kmgr_tpl_request_t *r, char tag, const void *p, size_t n)
{
    uint8_t len[4];

    put_u32(len, (uint32_t)(n + (tag != 0)));
    append(r, len, 4);
    if (tag != 0)
        append(r, &tag, 1);
    append(r, p, n);
}

void kmgr_tpl_request_fork(kmgr_tpl_request_t *r, uint64_t id)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);

    r->len = 0;
    append(r, "\0\0\0\0", 4);
    add_field(r, 0, "fork", 4);
    add_field(r, 0, num, (size_t)n);
}

void kmgr_tpl_request_add(kmgr_tpl_request_t *r, char tag, const char *value)
{
    /* a value past the frame's bound makes the frame too big: kmgr_tpl_request_end refuses it */
    add_field(r, tag, value, strlen(value) < KMGR_TPL_MAX_FRAME ? strlen(value) : KMGR_TPL_MAX_FRAME);
}

int kmgr_tpl_request_rlimit(kmgr_tpl_request_t *r, int resource, unsigned long long value)
{
    static const struct {
        int resource;
        const char *name;
    } names[] = {{RLIMIT_AS, "AS"},       {RLIMIT_CPU, "CPU"},       {RLIMIT_NPROC, "NPROC"},
                 {RLIMIT_FSIZE, "FSIZE"}, {RLIMIT_NOFILE, "NOFILE"}, {RLIMIT_DATA, "DATA"}};
    char text[48];

    for (size_t i = 0; i != sizeof(names) / sizeof(names[0]); ++i) {
        if (names[i].resource == resource) {
            snprintf(text, sizeof(text), "%s=%llu", names[i].name, value);
            kmgr_tpl_request_add(r, 'r', text);
            return 0;
        }
    }
    return -1;
}

int kmgr_tpl_request_end(kmgr_tpl_request_t *r)
{
    if (r->len < 4 || r->len - 4 > KMGR_TPL_MAX_FRAME)
        return -1;
    put_u32(r->data, (uint32_t)(r->len - 4));
    return 0;
}

void kmgr_tpl_request_free(kmgr_tpl_request_t *r)
{
    free(r->data);
    memset(r, 0, sizeof(*r));
}
