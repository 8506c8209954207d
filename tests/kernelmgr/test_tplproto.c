/* tests/kernelmgr/test_tplproto.c: the frames kgate and a kernel template exchange (kernelmgr/src/tplproto.h). */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/resource.h>
#include "tplproto.h"

/* A frame of `n` fields, as the template writes it (kernels/python-template/kgate_template.py's frame()). */
static size_t frame(uint8_t *out, const char *const *fields, size_t n)
{
    size_t at = 4;
    for (size_t i = 0; i != n; ++i) {
        uint32_t len = (uint32_t)strlen(fields[i]);
        out[at] = (uint8_t)(len >> 24);
        out[at + 1] = (uint8_t)(len >> 16);
        out[at + 2] = (uint8_t)(len >> 8);
        out[at + 3] = (uint8_t)len;
        memcpy(out + at + 4, fields[i], len);
        at += 4 + len;
    }
    out[0] = (uint8_t)((at - 4) >> 24);
    out[1] = (uint8_t)((at - 4) >> 16);
    out[2] = (uint8_t)((at - 4) >> 8);
    out[3] = (uint8_t)(at - 4);
    return at;
}

Test(tplproto, parses_each_reply_kind)
{
    uint8_t buf[256];
    kmgr_tpl_reply_t r;
    size_t n;

    n = frame(buf, (const char *[]){"ready", "4242"}, 2);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), (ssize_t)n);
    cr_assert(r.kind == KMGR_TPL_READY && r.pid == 4242);
    n = frame(buf, (const char *[]){"forked", "7", "31337"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), (ssize_t)n);
    cr_assert(r.kind == KMGR_TPL_FORKED && r.id == 7 && r.pid == 31337);
    n = frame(buf, (const char *[]){"failed", "8", "FileNotFoundError: [Errno 2] /nope"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), (ssize_t)n);
    cr_assert(r.kind == KMGR_TPL_FAILED && r.id == 8);
    cr_assert_str_eq(r.text, "FileNotFoundError: [Errno 2] /nope");
    n = frame(buf, (const char *[]){"exited", "31337", "9"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), (ssize_t)n);
    cr_assert(r.kind == KMGR_TPL_EXITED && r.pid == 31337 && r.wstatus == 9);
}

Test(tplproto, waits_for_a_whole_frame)
{
    uint8_t buf[256];
    kmgr_tpl_reply_t r;
    size_t n = frame(buf, (const char *[]){"forked", "1", "100"}, 3);

    for (size_t cut = 0; cut != n; ++cut)
        cr_assert_eq(kmgr_tpl_parse_reply(buf, cut, &r), 0, "a frame cut at %zu bytes was taken", cut);
    /* two frames back to back: the first is taken alone */
    size_t m = frame(buf + n, (const char *[]){"exited", "100", "0"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n + m, &r), (ssize_t)n);
    cr_assert_eq(r.kind, KMGR_TPL_FORKED);
    cr_assert_eq(kmgr_tpl_parse_reply(buf + n, m, &r), (ssize_t)m);
    cr_assert_eq(r.kind, KMGR_TPL_EXITED);
}

Test(tplproto, refuses_what_no_template_sends)
{
    uint8_t buf[256];
    kmgr_tpl_reply_t r;
    size_t n;

    n = frame(buf, (const char *[]){"spawned", "1", "2"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "an unknown kind");
    n = frame(buf, (const char *[]){"forked", "1", "12x"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "a pid that is no number");
    n = frame(buf, (const char *[]){"forked", "1", "0"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "pid 0");
    n = frame(buf, (const char *[]){"forked", "1", "99999999999"}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "a pid past any pid");
    n = frame(buf, (const char *[]){"ready"}, 1);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "a missing field");
    n = frame(buf, (const char *[]){"exited", "5", "1", "extra"}, 4);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "an extra field");
    /* a field whose length runs past its frame */
    n = frame(buf, (const char *[]){"ready", "12"}, 2);
    buf[4 + 4 + 5 + 3] = 200;
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), -1, "a field past the frame");
    /* a frame over the bound is refused from its length alone, before its bytes arrive */
    memset(buf, 0, 4);
    buf[0] = 0x7f;
    cr_assert_eq(kmgr_tpl_parse_reply(buf, 4, &r), -1, "a frame over KMGR_TPL_MAX_FRAME");
}

Test(tplproto, cuts_a_long_failure_message)
{
    static uint8_t buf[4096];
    char text[2000];
    kmgr_tpl_reply_t r;

    memset(text, 'x', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    size_t n = frame(buf, (const char *[]){"failed", "3", text}, 3);
    cr_assert_eq(kmgr_tpl_parse_reply(buf, n, &r), (ssize_t)n);
    cr_assert_eq(strlen(r.text), KMGR_TPL_MAX_TEXT - 1);
}

/* The request as the template parses it: fields after its length, each a length and bytes. */
Test(tplproto, encodes_a_fork_request)
{
    kmgr_tpl_request_t req = {0};
    const char *want[] = {"fork", "12", "c/work", "l/k/kernel.log", "a-f", "a/k/connection.json", "eA=1", "rAS=1048576"};
    size_t at = 4, i = 0;

    kmgr_tpl_request_fork(&req, 12);
    kmgr_tpl_request_add(&req, 'c', "/work");
    kmgr_tpl_request_add(&req, 'l', "/k/kernel.log");
    kmgr_tpl_request_add(&req, 'a', "-f");
    kmgr_tpl_request_add(&req, 'a', "/k/connection.json");
    kmgr_tpl_request_add(&req, 'e', "A=1");
    cr_assert_eq(kmgr_tpl_request_rlimit(&req, RLIMIT_AS, 1048576), 0);
    cr_assert_eq(kmgr_tpl_request_rlimit(&req, RLIMIT_MEMLOCK, 1), -1, "a resource the template does not know");
    cr_assert_eq(kmgr_tpl_request_end(&req), 0);
    cr_assert_eq(((size_t)req.data[0] << 24 | (size_t)req.data[1] << 16 | (size_t)req.data[2] << 8 | req.data[3]), req.len - 4);
    while (at != req.len) {
        size_t n = (size_t)req.data[at] << 24 | (size_t)req.data[at + 1] << 16 | (size_t)req.data[at + 2] << 8 | req.data[at + 3];
        cr_assert(i < sizeof(want) / sizeof(want[0]));
        cr_assert_eq(n, strlen(want[i]));
        cr_assert(memcmp(req.data + at + 4, want[i], n) == 0, "field %zu", i);
        at += 4 + n;
        ++i;
    }
    cr_assert_eq(i, sizeof(want) / sizeof(want[0]));
    kmgr_tpl_request_free(&req);
}

Test(tplproto, refuses_a_request_over_the_bound)
{
    kmgr_tpl_request_t req = {0};
    static char big[KMGR_TPL_MAX_FRAME];

    memset(big, 'v', sizeof(big) - 1);
    kmgr_tpl_request_fork(&req, 1);
    kmgr_tpl_request_add(&req, 'e', big);
    cr_assert_eq(kmgr_tpl_request_end(&req), -1);
    kmgr_tpl_request_free(&req);
}
