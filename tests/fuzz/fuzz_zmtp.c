/* tests/fuzz/fuzz_zmtp.c: the ZMTP codec driven the way a connection's stream reader drives it: a greeting, then frame
 * headers, bodies and commands (READY's properties, PING answered with PONG). */
#include "fuzz.h"
#include "wire/errors.h"
#include "wire/zmtp.h"

/* A PONG's longest frame: a short header, "\4PONG" and a 16-byte context. */
#define PONG_MAX (2 + 5 + 16)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static void check_property(const wire_zmtp_command_t *cmd, const char *name)
{
    const uint8_t *value = NULL;
    size_t value_len = 0;
    int ret = wire_zmtp_property(cmd, name, &value, &value_len);

    FUZZ_CHECK(ret == 1 || ret == 0 || ret == WIRE_EZMTP, "property %s: %d", name, ret);
    if (ret == 1)
        FUZZ_CHECK(value >= cmd->data && value <= cmd->data + cmd->data_len &&
                       value_len <= (size_t)(cmd->data + cmd->data_len - value),
                   "%s lies outside the command's data", name);
}

/* An uninitialised heap buffer of exactly `n` bytes (never NULL): ASan sees a write past it. */
static uint8_t *exact_buffer(size_t n)
{
    uint8_t *p = malloc(n != 0 ? n : 1);

    if (p == NULL)
        abort();
    return p;
}

/* PONG into exact buffers: answered iff the PING has a TTL and at most 16 bytes of context, which it echoes. */
static void check_pong(const wire_zmtp_command_t *cmd)
{
    uint8_t *out = exact_buffer(PONG_MAX);
    int n = wire_zmtp_pong(out, PONG_MAX, cmd);
    int well_formed = cmd->data_len >= 2 && cmd->data_len - 2 <= 16;

    FUZZ_CHECK(well_formed ? n > 0 : n == WIRE_EZMTP, "PING data of %zu bytes: %d", cmd->data_len, n);
    if (n > 0) {
        size_t context = cmd->data_len - 2;
        wire_zmtp_head_t head;
        FUZZ_CHECK((size_t)n == 2 + 5 + context, "PONG of %d bytes for %zu of context", n, context);
        FUZZ_CHECK(wire_zmtp_read_head(out, (size_t)n, &head) == 1 && head.flags == WIRE_ZMTP_COMMAND && head.head_len == 2 &&
                       head.size == 5 + context,
                   "PONG's header");
        FUZZ_CHECK(memcmp(out + 2, "\4PONG", 5) == 0 && memcmp(out + 7, cmd->data + 2, context) == 0, "PONG's body");
        free(out);
        out = exact_buffer((size_t)n - 1);
        FUZZ_CHECK(wire_zmtp_pong(out, (size_t)n - 1, cmd) == WIRE_ENOSPACE, "PONG in %d bytes", n - 1);
    }
    free(out);
}

/* A command frame's body, in its own exact buffer so that ASan sees a read past it (and not into the next frame). */
static void check_command(const uint8_t *body, size_t len)
{
    uint8_t *copy = (uint8_t *)fuzz_copy(body, len);
    wire_zmtp_command_t cmd;
    int ret = wire_zmtp_parse_command(copy, len, &cmd);

    FUZZ_CHECK(ret == 0 || ret == WIRE_EZMTP, "parse_command: %d", ret);
    FUZZ_CHECK(ret == 0 || len == 0 || copy[0] == 0 || (size_t)copy[0] + 1 > len, "a well-formed command is refused");
    if (ret == 0) {
        FUZZ_CHECK(cmd.name == copy + 1 && cmd.name_len == copy[0] && cmd.name_len != 0, "command name");
        FUZZ_CHECK(cmd.data == cmd.name + cmd.name_len && cmd.data + cmd.data_len == copy + len, "command data");
        check_property(&cmd, "Socket-Type");
        check_property(&cmd, "Identity");
        check_pong(&cmd);
    }
    free(copy);
}

/*
 * The input is what a peer sends: the greeting's 64 bytes (when they pass check_greeting, the frames follow them;
 * otherwise the whole input is read as frames, so that inputs without a greeting still reach the frame code), then
 * frames until one is refused or runs past the input.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = (uint8_t *)fuzz_copy(data, size);
    const uint8_t *p = copy, *end = copy + size;

    if (size >= WIRE_ZMTP_GREETING_LEN) {
        uint8_t *greeting = (uint8_t *)fuzz_copy(data, WIRE_ZMTP_GREETING_LEN);
        int ret = wire_zmtp_check_greeting(greeting);
        FUZZ_CHECK(ret == 0 || ret == WIRE_EZMTP, "check_greeting: %d", ret);
        FUZZ_CHECK(ret != 0 || (greeting[0] == 0xff && greeting[10] >= 3 && memcmp(greeting + 12, "NULL", 4) == 0),
                   "a greeting that is no ZMTP 3 with NULL passes");
        free(greeting);
        if (ret == 0)
            p += WIRE_ZMTP_GREETING_LEN;
    }

    while (p != end) {
        size_t avail = (size_t)(end - p);
        wire_zmtp_head_t head;
        int ret = wire_zmtp_read_head(p, avail, &head);

        FUZZ_CHECK(ret == 1 || ret == 0 || ret == WIRE_EZMTP, "read_head: %d", ret);
        if (ret != 1)
            break;
        FUZZ_CHECK(head.head_len == 2 || head.head_len == 9, "head_len %zu", head.head_len);
        FUZZ_CHECK(head.head_len <= avail, "a header of %zu bytes in %zu", head.head_len, avail);
        FUZZ_CHECK((head.flags & ~(unsigned)(WIRE_ZMTP_MORE | WIRE_ZMTP_LONG | WIRE_ZMTP_COMMAND)) == 0, "flags 0x%x", head.flags);
        FUZZ_CHECK(((head.flags & WIRE_ZMTP_LONG) != 0) == (head.head_len == 9), "LONG and a %zu-byte header", head.head_len);
        FUZZ_CHECK((head.flags & (WIRE_ZMTP_MORE | WIRE_ZMTP_COMMAND)) != (WIRE_ZMTP_MORE | WIRE_ZMTP_COMMAND),
                   "MORE on a command");
        FUZZ_CHECK(head.head_len == 9 || head.size <= 255, "a short size of %llu", (unsigned long long)head.size);
        /* write_head gives the same bytes back, except for a small size sent long (legal, but not how we write it) */
        if (head.head_len == 2 || head.size > 255) {
            uint8_t again[WIRE_ZMTP_HEAD_MAX];
            size_t n = wire_zmtp_write_head(again, head.size, head.flags);
            FUZZ_CHECK(n == head.head_len && memcmp(again, p, n) == 0, "write_head disagrees with read_head");
        }
        /* a stream reader waits for a body it does not have yet; the size is the peer's word, never trusted */
        if (head.size > avail - head.head_len)
            break;
        if (head.flags & WIRE_ZMTP_COMMAND)
            check_command(p + head.head_len, (size_t)head.size);
        p += head.head_len + (size_t)head.size;
    }
    free(copy);
    return 0;
}
