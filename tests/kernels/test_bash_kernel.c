/* tests/kernels/test_bash_kernel.c: kgate-bash-kernel over the real Jupyter protocol (ipc and tcp). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "bk_client.h"

static bk_client_t client;

static void start(void)
{
    bk_client_start(&client, 0);
}

static void stop(void)
{
    bk_client_stop(&client);
}

TestSuite(bash_kernel, .init = start, .fini = stop, .timeout = 60);

static json_int_t reply_int(const bk_run_t *r, const char *key)
{
    return json_integer_value(json_object_get(r->reply, key));
}

/* A FIFO a run's command waits on (`read -r _ < path`) until the test releases it: how the tests order what they check
 * against what a command does, rather than timing it. */
typedef struct st_gate_t {
    char dir[64], path[96];
    int fd; /* the test's own end (read and write: opening it never blocks) */
} gate_t;

static void gate_open(gate_t *g)
{
    snprintf(g->dir, sizeof(g->dir), "/tmp/kgate-bk-gate-XXXXXX");
    cr_assert_not_null(mkdtemp(g->dir));
    snprintf(g->path, sizeof(g->path), "%s/go", g->dir);
    cr_assert_eq(mkfifo(g->path, 0600), 0);
    cr_assert((g->fd = open(g->path, O_RDWR | O_CLOEXEC)) != -1);
}

/* Lets the waiting command go on (whatever the verdict, so that its run ends). */
static void gate_release(gate_t *g)
{
    cr_assert_eq(write(g->fd, "\n", 1), 1);
}

static void gate_close(gate_t *g)
{
    close(g->fd);
    unlink(g->path);
    rmdir(g->dir);
}

Test(bash_kernel, state_persists_between_executes)
{
    bk_run_t r;

    bk_client_run(&client, "cd /tmp && export KG_X=42 && kg_f() { echo \"fn $1\"; }\nkg_local=7", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_eq(reply_int(&r, "exit_status"), 0);
    bk_run_dispose(&r);

    bk_client_run(&client, "pwd; echo $KG_X $kg_local; kg_f a; bash -c 'echo child:$KG_X'", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "/tmp\n42 7\nfn a\nchild:42\n");
    cr_expect_str_eq(r.err, "");
    cr_expect_eq(r.execute_input, 1);
    cr_expect_eq(reply_int(&r, "execution_count"), 2);
    bk_run_dispose(&r);
}

Test(bash_kernel, nonzero_status_is_an_error)
{
    bk_run_t r;

    bk_client_run(&client, "false", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "error");
    cr_expect_str_eq(json_string_value(json_object_get(r.reply, "evalue")), "1");
    cr_expect_str_eq(json_string_value(json_object_get(r.reply, "ename")), "ExitStatus");
    cr_expect(json_is_array(json_object_get(r.reply, "traceback")));
    cr_expect_eq(reply_int(&r, "exit_status"), 1);
    cr_assert_not_null(r.error);
    cr_expect_str_eq(json_string_value(json_object_get(r.error, "evalue")), "1");
    cr_expect_eq(r.streams, 0);
    bk_run_dispose(&r);

    bk_client_run(&client, "(exit 42)", NULL, 5000, &r);
    cr_expect_str_eq(json_string_value(json_object_get(r.reply, "evalue")), "42");
    bk_run_dispose(&r);

    /* $? carries over to the next cell, as at a terminal, and survives a completion request. */
    free(bk_client_send(&client, WIRE_CHANNEL_SHELL, "complete_request", json_pack("{sssi}", "code", "ec", "cursor_pos", 2)));
    bk_client_run(&client, "echo \"last=$?\"", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "last=42\n");
    bk_run_dispose(&r);

    /* A syntax error is reported by bash and is an error too; the shell survives it. */
    bk_client_run(&client, "kg_y=1\nif true; then\n  echo \"unclosed\n", NULL, 5000, &r);
    cr_expect_str_eq(bk_run_status(&r), "error");
    cr_expect_neq(strstr(r.err, "unexpected EOF"), NULL, "stderr: %s", r.err);
    bk_run_dispose(&r);

    bk_client_run(&client, "true", NULL, 5000, &r);
    cr_expect_str_eq(bk_run_status(&r), "ok");
    cr_expect_null(r.error);
    bk_run_dispose(&r);
}

Test(bash_kernel, stdout_and_stderr_are_separate)
{
    bk_run_t r;

    bk_client_run(&client, "echo out; echo err >&2; echo out2; ls /nonexistent-kgate 2>&1 >/dev/null | wc -l >&2", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "out\nout2\n");
    cr_expect_str_eq(r.err, "err\n1\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, heredocs_and_multiline_code)
{
    bk_run_t r;

    bk_client_run(&client, "v=world\ncat <<EOF\nhello $v\nEOF\nfor i in 1 2; do\n  echo \"i=$i\"\ndone", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "hello world\ni=1\ni=2\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, large_output_arrives_complete_and_in_order)
{
    bk_run_t r;
    size_t cap = 700000, len = 0;
    char *expected = wire_malloc(cap);

    for (int i = 1; i <= 100000; ++i)
        len += (size_t)snprintf(expected + len, cap - len, "%d\n", i);
    bk_client_run(&client, "seq 1 100000", NULL, 30000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_assert_eq(r.out_len, len, "got %zu bytes in %zu messages", r.out_len, r.streams);
    cr_expect(memcmp(r.out, expected, len) == 0);
    bk_run_dispose(&r);

    /* Builtin echo: one write per line, still coalesced into few messages. */
    bk_client_run(&client, "for ((i = 1; i <= 100000; i++)); do echo $i; done", NULL, 60000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_assert_eq(r.out_len, len);
    cr_expect(memcmp(r.out, expected, len) == 0);
    cr_expect_lt(r.streams, 2000, "%zu stream messages", r.streams);
    bk_run_dispose(&r);
    free(expected);
}

/* A run's first line reaches the client while the run still waits to print its second: the run reads a line of a FIFO between
 * the two, and the test writes it only once "first" has arrived. A kernel that held output until the run's end (or until more
 * came) would send nothing before that line, and the wait for "first" runs to its hang guard (30 s, not a measure). */
Test(bash_kernel, output_is_streamed_while_running)
{
    char code[160];
    wire_msg_t *m;
    bk_run_t r;
    gate_t gate;

    gate_open(&gate);
    snprintf(code, sizeof(code), "echo first; read -r _ < %s; echo second", gate.path);
    char *id = bk_client_start_run(&client, code, 0);
    while ((m = bk_client_recv(&client, WIRE_CHANNEL_IOPUB, 30000)) != NULL && strcmp(wire_msg_type(m), "stream") != 0)
        wire_msg_destroy(m);
    gate_release(&gate); /* it prints "second" now */
    bk_client_collect(&client, id, NULL, 30000, &r);
    gate_close(&gate);
    free(id);
    cr_assert_not_null(m, "no output while the run waited before its second line");
    cr_expect_str_eq(json_string_value(json_object_get(m->content, "text")), "first\n");
    wire_msg_destroy(m);
    cr_expect_str_eq(r.out, "second\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, utf8_split_across_writes_and_invalid_bytes)
{
    bk_run_t r;

    bk_client_run(&client, "printf '\\xe2\\x82'; sleep 0.2; printf '\\xac\\n'; printf 'a\\xffb\\n'", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "\xe2\x82\xac\na\xef\xbf\xbd"
                            "b\n");
    bk_run_dispose(&r);
}

static void interrupt_sleep(int by_signal)
{
    char *id = bk_client_start_run(&client, "echo start; sleep 30; echo not-reached", 0);
    struct timespec t0;
    wire_msg_t *m;
    bk_run_t r;

    /* Wait until the command runs (its first output), then interrupt. */
    while ((m = bk_client_recv(&client, WIRE_CHANNEL_IOPUB, 5000)) != NULL && strcmp(wire_msg_type(m), "stream") != 0)
        wire_msg_destroy(m);
    cr_assert_not_null(m);
    wire_msg_destroy(m);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (by_signal) {
        cr_assert_eq(kill(client.pid, SIGINT), 0);
    } else {
        char *iid = bk_client_send(&client, WIRE_CHANNEL_CONTROL, "interrupt_request", NULL);
        wire_msg_t *ir = bk_client_recv(&client, WIRE_CHANNEL_CONTROL, 1000);
        cr_assert_not_null(ir);
        cr_expect_str_eq(wire_msg_type(ir), "interrupt_reply");
        cr_expect_str_eq(wire_msg_parent_id(ir), iid);
        wire_msg_destroy(ir);
        free(iid);
    }
    bk_client_collect(&client, id, NULL, 5000, &r);
    cr_assert_not_null(r.reply);
    cr_expect_lt(bk_ms_since(&t0), 1000, "interrupt took %.0f ms", bk_ms_since(&t0));
    cr_expect_str_eq(bk_run_status(&r), "error");
    cr_expect_str_eq(json_string_value(json_object_get(r.reply, "evalue")), "130");
    cr_expect_eq(strstr(r.out, "not-reached"), NULL);
    bk_run_dispose(&r);
    free(id);

    bk_client_run(&client, "echo after", NULL, 5000, &r);
    cr_expect_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "after\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, control_interrupt_ends_a_running_command)
{
    interrupt_sleep(0);
}

Test(bash_kernel, sigint_to_the_kernel_interrupts_the_command_not_the_kernel)
{
    interrupt_sleep(1);
    cr_expect_eq(waitpid(client.pid, NULL, WNOHANG), 0, "the kernel died");
}

Test(bash_kernel, interrupt_ends_a_builtin_loop)
{
    char *id = bk_client_start_run(&client, "kg_n=0; while :; do kg_n=$((kg_n + 1)); done", 0);
    bk_run_t r;

    usleep(300000);
    free(bk_client_send(&client, WIRE_CHANNEL_CONTROL, "interrupt_request", NULL));
    bk_client_collect(&client, id, NULL, 3000, &r);
    cr_expect_str_eq(bk_run_status(&r), "error");
    bk_run_dispose(&r);
    free(id);
    bk_client_run(&client, "[ $kg_n -gt 0 ] && echo counted", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "counted\n");
    bk_run_dispose(&r);
}

/* Heartbeats are answered while a command runs: the command waits on a FIFO until every ping has had its pong (an order, not a
 * time: a kernel that answered heartbeats only between commands would answer none of them). */
Test(bash_kernel, heartbeat_answers_while_a_command_runs)
{
    char code[160];
    bk_run_t r;
    gate_t gate;

    gate_open(&gate);
    snprintf(code, sizeof(code), "read -r _ < %s; echo released", gate.path);
    char *id = bk_client_start_run(&client, code, 0);
    int answered = 0;
    for (int i = 0; i != 5; ++i) {
        char buf[16];
        zmq_pollitem_t item = {.socket = client.sock[WIRE_CHANNEL_HB], .events = ZMQ_POLLIN};
        if (zmq_send(client.sock[WIRE_CHANNEL_HB], "ping", 4, 0) != 4 || zmq_poll(&item, 1, 10000) != 1 ||
            zmq_recv(client.sock[WIRE_CHANNEL_HB], buf, sizeof(buf), 0) != 4 || memcmp(buf, "ping", 4) != 0)
            break;
        ++answered;
    }
    gate_release(&gate);
    bk_client_collect(&client, id, NULL, 30000, &r);
    gate_close(&gate);
    free(id);
    cr_expect_eq(answered, 5, "%d of 5 heartbeats answered while the command waited", answered);
    cr_expect_str_eq(bk_run_status(&r), "ok");
    cr_expect_str_eq(r.out, "released\n", "the command ended before its release: %s", r.out);
    bk_run_dispose(&r);
}

Test(bash_kernel, input_request_round_trip)
{
    static const char *const inputs[] = {"hello world", "second line", NULL};
    bk_run_t r;

    bk_client_run(&client, "echo -n 'name? '; read -r x; echo \"got:$x\"; head -n 1", inputs, 10000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_eq(r.input_requests, 2);
    cr_expect_str_eq(r.out, "name? got:hello world\nsecond line\n");
    bk_run_dispose(&r);

    /* Input a cell did not read never leaks into the next one. */
    bk_client_run(&client, "read -r -t 0.2 y; echo \"y=$y\"", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "y=\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, read_without_allow_stdin_fails_fast)
{
    bk_run_t r;

    bk_client_run(&client, "read -r x; echo \"rc=$?\"", NULL, 5000, &r);
    cr_assert_not_null(r.reply);
    cr_expect_lt(r.ms, 1000);
    cr_expect_str_eq(r.out, "rc=1\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, exit_in_code_is_reported_and_bash_restarts)
{
    bk_run_t r;
    char before[32];

    bk_client_run(&client, "echo $$; kg_gone=1", NULL, 5000, &r);
    snprintf(before, sizeof(before), "%s", r.out);
    bk_run_dispose(&r);

    bk_client_run(&client, "echo bye; exit 3", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "error");
    cr_expect_str_eq(json_string_value(json_object_get(r.reply, "evalue")), "3");
    cr_expect(json_is_true(json_object_get(r.reply, "bash_exited")));
    cr_expect_str_eq(r.out, "bye\n");
    bk_run_dispose(&r);

    bk_client_run(&client, "echo $$; echo \"gone=${kg_gone-unset}\"", NULL, 5000, &r);
    cr_assert_str_eq(bk_run_status(&r), "ok");
    cr_expect_neq(strncmp(r.out, before, strlen(before)), 0, "same bash: %s", r.out);
    cr_expect_neq(strstr(r.out, "gone=unset\n"), NULL, "%s", r.out);
    cr_expect_str_eq(r.err, "");
    bk_run_dispose(&r);
}

Test(bash_kernel, shutdown_request_ends_the_kernel)
{
    char *id = bk_client_send(&client, WIRE_CHANNEL_CONTROL, "shutdown_request", json_pack("{sb}", "restart", 1));
    wire_msg_t *m = bk_client_recv(&client, WIRE_CHANNEL_CONTROL, 5000);
    int st = 0;
    pid_t r = 0;

    cr_assert_not_null(m);
    cr_expect_str_eq(wire_msg_type(m), "shutdown_reply");
    cr_expect_str_eq(wire_msg_parent_id(m), id);
    cr_expect(json_is_true(json_object_get(m->content, "restart")));
    wire_msg_destroy(m);
    free(id);
    for (int i = 0; i != 500 && (r = waitpid(client.pid, &st, WNOHANG)) == 0; ++i)
        usleep(10000);
    cr_assert_eq(r, client.pid, "the kernel is still running");
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    client.pid = 0;
}

static wire_msg_t *request(const char *type, json_t *content)
{
    char *id = bk_client_send(&client, WIRE_CHANNEL_SHELL, type, content);
    wire_msg_t *m = bk_client_reply(&client, id, 5000);
    free(id);
    cr_assert_not_null(m, "no reply to %s", type);
    return m;
}

static json_t *string_set(const json_t *array)
{
    json_t *set = json_object();
    size_t i;
    json_t *v;
    json_array_foreach(array, i, v) json_object_set_new(set, json_string_value(v), json_true());
    return set;
}

Test(bash_kernel, completion_uses_the_persistent_shell)
{
    bk_run_t r;
    wire_msg_t *m;
    json_t *set;

    bk_client_run(&client, "kgate_fn_x() { :; }; kgvar_one=1", NULL, 5000, &r);
    bk_run_dispose(&r);
    bk_client_run(&client, "cd \"$(mktemp -d)\" && mkdir kgdir_a && touch kgfile_b && cd kgdir_a && cd ..", NULL, 5000, &r);
    bk_run_dispose(&r);

    m = request("complete_request", json_pack("{sssi}", "code", "kgate_fn_", "cursor_pos", 9));
    set = string_set(json_object_get(m->content, "matches"));
    cr_expect(json_object_get(set, "kgate_fn_x") != NULL);
    cr_expect_eq(json_integer_value(json_object_get(m->content, "cursor_start")), 0);
    cr_expect_eq(json_integer_value(json_object_get(m->content, "cursor_end")), 9);
    json_decref(set);
    wire_msg_destroy(m);

    /* Relative paths resolve in bash's working directory; directories end in "/"; the cursor counts
     * code points ("é" is one). */
    m = request("complete_request", json_pack("{sssi}", "code", "é; ls kg", "cursor_pos", 8));
    set = string_set(json_object_get(m->content, "matches"));
    cr_expect_eq(json_object_size(set), 2);
    cr_expect(json_object_get(set, "kgdir_a/") != NULL);
    cr_expect(json_object_get(set, "kgfile_b") != NULL);
    cr_expect_eq(json_integer_value(json_object_get(m->content, "cursor_start")), 6);
    cr_expect_eq(json_integer_value(json_object_get(m->content, "cursor_end")), 8);
    json_decref(set);
    wire_msg_destroy(m);

    m = request("complete_request", json_pack("{sssi}", "code", "echo $kgvar_o", "cursor_pos", 13));
    set = string_set(json_object_get(m->content, "matches"));
    cr_expect(json_object_get(set, "$kgvar_one") != NULL);
    json_decref(set);
    wire_msg_destroy(m);

    /* $? survives; the next execute still works. */
    bk_client_run(&client, "echo ok", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "ok\n");
    bk_run_dispose(&r);
}

Test(bash_kernel, is_complete_and_other_requests)
{
    static const struct {
        const char *code, *status;
    } cases[] = {{"echo hi", "complete"},
                 {"if true; then", "incomplete"},
                 {"echo \"abc", "incomplete"},
                 {"cat <<EOF\nx", "incomplete"},
                 {"echo a |", "incomplete"},
                 {"echo a \\", "incomplete"},
                 {"fi", "invalid"},
                 {"echo )", "invalid"},
                 {"", "complete"}};
    wire_msg_t *m;

    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        m = request("is_complete_request", json_pack("{ss}", "code", cases[i].code));
        cr_expect_str_eq(json_string_value(json_object_get(m->content, "status")), cases[i].status, "%s", cases[i].code);
        wire_msg_destroy(m);
    }
    m = request("kernel_info_request", NULL);
    cr_expect_str_eq(json_string_value(json_object_get(m->content, "protocol_version")), "5.3");
    cr_expect_str_eq(json_string_value(json_object_get(m->content, "implementation")), "kgate-bash");
    json_t *li = json_object_get(m->content, "language_info");
    cr_expect_str_eq(json_string_value(json_object_get(li, "name")), "bash");
    cr_expect_str_eq(json_string_value(json_object_get(li, "mimetype")), "text/x-sh");
    cr_expect_str_eq(json_string_value(json_object_get(li, "file_extension")), ".sh");
    cr_expect_eq(strspn(json_string_value(json_object_get(li, "version")), "0123456789."),
                 strlen(json_string_value(json_object_get(li, "version"))));
    wire_msg_destroy(m);
    m = request("history_request", json_pack("{sbsbss}", "output", 0, "raw", 1, "hist_access_type", "tail"));
    cr_expect_eq(json_array_size(json_object_get(m->content, "history")), 0);
    wire_msg_destroy(m);
    m = request("comm_info_request", NULL);
    cr_expect(json_is_object(json_object_get(m->content, "comms")));
    wire_msg_destroy(m);
}

Test(bash_kernel, iopub_status_brackets_every_request)
{
    char *id = bk_client_send(&client, WIRE_CHANNEL_SHELL, "kernel_info_request", NULL);
    const char *states[2] = {"busy", "idle"};
    int seen = 0;
    wire_msg_t *m;

    while (seen < 2 && (m = bk_client_recv(&client, WIRE_CHANNEL_IOPUB, 2000)) != NULL) {
        cr_expect_str_eq(wire_msg_parent_id(m), id);
        cr_expect_str_eq(wire_msg_type(m), "status");
        cr_expect_str_eq(json_string_value(json_object_get(m->content, "execution_state")), states[seen]);
        ++seen;
        wire_msg_destroy(m);
    }
    cr_expect_eq(seen, 2);
    free(id);
}

Test(bash_kernel_tcp, binds_tcp_endpoints)
{
    bk_run_t r;
    bk_client_t c;

    bk_client_start(&c, 1);
    bk_client_run(&c, "echo over tcp", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "over tcp\n");
    bk_run_dispose(&r);
    bk_client_stop(&c);
}

Test(bash_kernel, interrupt_while_waiting_for_input)
{
    char *id = bk_client_start_run(&client, "read -r x; echo \"x=$x\"", 1);
    wire_msg_t *m = bk_client_recv(&client, WIRE_CHANNEL_STDIN, 5000);
    struct timespec t0;
    bk_run_t r;

    cr_assert_not_null(m, "no input_request");
    cr_expect_str_eq(wire_msg_type(m), "input_request");
    cr_expect_str_eq(wire_msg_parent_id(m), id);
    wire_msg_destroy(m);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    free(bk_client_send(&client, WIRE_CHANNEL_CONTROL, "interrupt_request", NULL));
    bk_client_collect(&client, id, NULL, 3000, &r);
    cr_expect_lt(bk_ms_since(&t0), 1000);
    cr_expect_str_eq(bk_run_status(&r), "error");
    cr_expect_str_eq(r.out, "");
    bk_run_dispose(&r);
    free(id);

    bk_client_run(&client, "echo next", NULL, 5000, &r);
    cr_expect_str_eq(r.out, "next\n");
    bk_run_dispose(&r);
}
