/* tests/wire/test_connfile.c: connection files (write, read, validation, endpoints). */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include "wire/connfile.h"
#include "wire/errors.h"
#include "wire_test.h"

static char tmpdir[64];

static void setup(void)
{
    wire_global_init();
    strcpy(tmpdir, "/tmp/kgate-wire-connfile-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(connfile, .init = setup, .fini = teardown);

static void path_in_tmp(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", tmpdir, name);
}

static void write_text(const char *name, const char *text)
{
    char path[128];
    path_in_tmp(path, sizeof(path), name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static wire_connection_t sample(void)
{
    wire_connection_t c = {
        .transport = "tcp",
        .ip = "127.0.0.1",
        .ports = {50001, 50002, 50003, 50004, 50005},
        .key = "a0b1c2d3e4f5-\xc3\xa9-key",
        .signature_scheme = "hmac-sha256",
        .kernel_name = "python3",
    };
    return c;
}

Test(connfile, write_then_read_round_trips_with_mode_0600)
{
    wire_connection_t c = sample(), r;
    char path[128];
    struct stat st;

    path_in_tmp(path, sizeof(path), "kernel-1.json");
    umask(0); /* the mode must not depend on the caller's umask */
    cr_assert_eq(wire_connection_write(&c, path), 0);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);

    cr_assert_eq(wire_connection_read(path, &r), 0);
    cr_assert_str_eq(r.transport, "tcp");
    cr_assert_str_eq(r.ip, "127.0.0.1");
    cr_assert_str_eq(r.key, c.key);
    cr_assert_str_eq(r.signature_scheme, "hmac-sha256");
    cr_assert_str_eq(r.kernel_name, "python3");
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch)
        cr_assert_eq(r.ports[ch], c.ports[ch]);
    wire_connection_dispose(&r);
    cr_assert_null(r.key);
    wire_connection_dispose(&r); /* a disposed (zeroed) struct may be disposed again */
}

Test(connfile, written_file_is_what_jupyter_expects)
{
    wire_connection_t c = sample();
    char path[128], buf[2048];

    path_in_tmp(path, sizeof(path), "kernel-2.json");
    cr_assert_eq(wire_connection_write(&c, path), 0);
    FILE *f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    json_error_t err;
    json_t *obj = json_loads(buf, 0, &err);
    cr_assert(json_is_object(obj), "%s", err.text);
    cr_assert_eq(json_integer_value(json_object_get(obj, "shell_port")), 50001);
    cr_assert_eq(json_integer_value(json_object_get(obj, "iopub_port")), 50002);
    cr_assert_eq(json_integer_value(json_object_get(obj, "stdin_port")), 50003);
    cr_assert_eq(json_integer_value(json_object_get(obj, "control_port")), 50004);
    cr_assert_eq(json_integer_value(json_object_get(obj, "hb_port")), 50005);
    cr_assert_str_eq(json_string_value(json_object_get(obj, "transport")), "tcp");
    cr_assert_str_eq(json_string_value(json_object_get(obj, "signature_scheme")), "hmac-sha256");
    cr_assert_eq(json_object_size(obj), 10);
    json_decref(obj);
}

Test(connfile, write_never_replaces_an_existing_file)
{
    wire_connection_t c = sample(), r;
    char path[128], link[128];

    write_text("taken.json", "precious");
    path_in_tmp(path, sizeof(path), "taken.json");
    cr_assert_eq(wire_connection_write(&c, path), WIRE_EEXISTS);
    FILE *f = fopen(path, "r");
    char buf[16] = {0};
    cr_assert_eq(fread(buf, 1, sizeof(buf) - 1, f), 8);
    fclose(f);
    cr_assert_str_eq(buf, "precious");

    /* Nor does it follow a symlink someone planted, even a dangling one. */
    path_in_tmp(link, sizeof(link), "link.json");
    path_in_tmp(path, sizeof(path), "target.json");
    cr_assert_eq(symlink(path, link), 0);
    cr_assert_eq(wire_connection_write(&c, link), WIRE_EEXISTS);
    cr_assert_neq(access(path, F_OK), 0);

    path_in_tmp(path, sizeof(path), "fresh.json");
    cr_assert_eq(wire_connection_write(&c, path), 0);
    cr_assert_eq(wire_connection_write(&c, path), WIRE_EEXISTS);
    cr_assert_eq(wire_connection_read(path, &r), 0);
    wire_connection_dispose(&r);
}

Test(connfile, write_errors)
{
    wire_connection_t c = sample();
    char path[128];

    cr_assert_eq(wire_connection_write(&c, "/nonexistent-dir-kgate/x.json"), WIRE_EIO);
    path_in_tmp(path, sizeof(path), "null-ip.json");
    c.ip = NULL;
    cr_assert_eq(wire_connection_write(&c, path), WIRE_EBADCONN);
    cr_assert_neq(access(path, F_OK), 0, "nothing is created on error");
}

#define PORTS "\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5"
#define REST "\"ip\": \"/tmp/k\", \"key\": \"k\", \"transport\": \"ipc\", \"signature_scheme\": \"hmac-sha256\""

static int read_text(const char *text)
{
    wire_connection_t r;
    char path[128];
    static int counter;
    char name[32];

    snprintf(name, sizeof(name), "c%d.json", counter++);
    write_text(name, text);
    path_in_tmp(path, sizeof(path), name);
    int ret = wire_connection_read(path, &r);
    if (ret == 0)
        wire_connection_dispose(&r);
    else
        cr_assert(r.transport == NULL && r.ip == NULL && r.key == NULL && r.kernel_name == NULL, "nothing to dispose");
    return ret;
}

Test(connfile, read_accepts_minimal_ipc_file_without_kernel_name)
{
    wire_connection_t r;
    char path[128];

    write_text("ok.json", "{" PORTS ", " REST "}");
    path_in_tmp(path, sizeof(path), "ok.json");
    cr_assert_eq(wire_connection_read(path, &r), 0);
    cr_assert_str_eq(r.transport, "ipc");
    cr_assert_str_eq(r.kernel_name, "");
    cr_assert_eq(r.ports[WIRE_CHANNEL_HB], 5);
    wire_connection_dispose(&r);
    cr_assert_eq(read_text("{" PORTS ", " REST ", \"kernel_name\": null}"), 0);
    cr_assert_eq(read_text("{" PORTS ", " REST ", \"kernel_name\": \"ir\"}"), 0);
    /* An empty key is valid: Jupyter's unsigned mode. */
    cr_assert_eq(read_text("{" PORTS ", \"ip\": \"127.0.0.1\", \"key\": \"\", \"transport\": \"tcp\", "
                           "\"signature_scheme\": \"hmac-sha256\"}"),
                 0);
}

Test(connfile, read_rejects_invalid_files)
{
    static const char *const bad[] = {
        "",
        "not json",
        "[1, 2]",
        "{" PORTS ", " REST,
        /* missing port */
        "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, " REST "}",
        /* ports out of range or of the wrong type */
        "{\"shell_port\": 0, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5, " REST "}",
        "{\"shell_port\": 1, \"iopub_port\": 65536, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": 5, " REST "}",
        "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": \"3\", \"control_port\": 4, \"hb_port\": 5, " REST "}",
        "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4.5, \"hb_port\": 5, " REST "}",
        "{\"shell_port\": 1, \"iopub_port\": 2, \"stdin_port\": 3, \"control_port\": 4, \"hb_port\": -5, " REST "}",
        /* bad transport, scheme, missing or mistyped strings */
        "{" PORTS ", \"ip\": \"x\", \"key\": \"k\", \"transport\": \"udp\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", \"ip\": \"x\", \"key\": \"k\", \"transport\": \"TCP\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", \"ip\": \"x\", \"key\": \"k\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-md5\"}",
        "{" PORTS ", \"ip\": \"x\", \"key\": \"k\", \"transport\": \"tcp\"}",
        "{" PORTS ", \"ip\": \"x\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", \"ip\": \"\", \"key\": \"k\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", \"key\": \"k\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", \"ip\": 127, \"key\": \"k\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\"}",
        "{" PORTS ", " REST ", \"kernel_name\": 3}",
        /* a NUL inside a string would silently shorten it */
        "{" PORTS ", \"ip\": \"x\", \"key\": \"k\\u0000tail\", \"transport\": \"tcp\", \"signature_scheme\": \"hmac-sha256\"}",
    };

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        cr_assert_eq(read_text(bad[i]), WIRE_EBADCONN, "case %zu: %s", i, bad[i]);
}

Test(connfile, read_errors_for_missing_oversized_and_non_regular_files)
{
    wire_connection_t r;
    char path[128];

    path_in_tmp(path, sizeof(path), "absent.json");
    cr_assert_eq(wire_connection_read(path, &r), WIRE_EIO);
    cr_assert_eq(wire_connection_read(tmpdir, &r), WIRE_EBADCONN);

    /* Bounded memory: a huge file is refused, not read. */
    path_in_tmp(path, sizeof(path), "huge.json");
    FILE *f = fopen(path, "w");
    fputs("{" PORTS ", " REST ", \"pad\": \"", f);
    for (int i = 0; i != 100000; ++i)
        fputc('x', f);
    fputs("\"}", f);
    fclose(f);
    cr_assert_eq(wire_connection_read(path, &r), WIRE_EBADCONN);
}

Test(connfile, endpoints)
{
    wire_connection_t c = sample();
    char buf[64];
    static const char *const tcp[] = {"tcp://127.0.0.1:50001", "tcp://127.0.0.1:50002", "tcp://127.0.0.1:50003",
                                      "tcp://127.0.0.1:50004", "tcp://127.0.0.1:50005"};

    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch) {
        cr_assert_eq(wire_connection_endpoint(&c, ch, buf, sizeof(buf)), (int)strlen(tcp[ch]));
        cr_assert_str_eq(buf, tcp[ch]);
    }
    c.transport = "ipc";
    c.ip = "/run/kgate/k1";
    c.ports[WIRE_CHANNEL_IOPUB] = 2;
    cr_assert_eq(wire_connection_endpoint(&c, WIRE_CHANNEL_IOPUB, buf, sizeof(buf)), 21);
    cr_assert_str_eq(buf, "ipc:///run/kgate/k1-2");

    /* Exactly enough room (length + NUL) works; one byte less does not. */
    cr_assert_eq(wire_connection_endpoint(&c, WIRE_CHANNEL_IOPUB, buf, 22), 21);
    cr_assert_eq(wire_connection_endpoint(&c, WIRE_CHANNEL_IOPUB, buf, 21), WIRE_ENOSPACE);
    cr_assert_eq(wire_connection_endpoint(&c, WIRE_CHANNEL_IOPUB, buf, 0), WIRE_ENOSPACE);
    c.transport = "udp";
    cr_assert_eq(wire_connection_endpoint(&c, WIRE_CHANNEL_SHELL, buf, sizeof(buf)), WIRE_EBADCONN);
}

Test(connfile, channel_names)
{
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_SHELL), "shell");
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_IOPUB), "iopub");
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_STDIN), "stdin");
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_CONTROL), "control");
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_HB), "hb");
    cr_assert_str_eq(wire_channel_name(WIRE_CHANNEL_COUNT), "unknown");
}
