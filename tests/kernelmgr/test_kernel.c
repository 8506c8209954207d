/* tests/kernelmgr/test_kernel.c: a real ipykernel: readiness, execute, routing, interrupt, stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/connfile.h"
#include "ksys/errors.h"
#include "kmgr_test.h"

TestSuite(kernel, .init = kt_setup, .fini = kt_teardown, .timeout = 90);

Test(kernel, starts_and_becomes_idle)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    json_t *info;
    char path[512];
    struct stat sb;

    cr_expect_gt(kmgr_kernel_pid(k), 0);
    cr_expect_eq(st.log[0], KMGR_KERNEL_IDLE, "the first notice is the transition out of STARTING");
    cr_assert_not_null(info = kmgr_kernel_info(k));
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(info, "language_info"), "name")), "python");
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "");
    cr_expect_eq(kmgr_kernel_spec(k), kt.python);
    /* A private IPython dir per kernel, next to the connection file. */
    snprintf(path, sizeof(path), "%s", kmgr_kernel_connection_file(k));
    *strrchr(path, '/') = '\0';
    strcat(path, "/ipython");
    cr_expect_eq(stat(path, &sb), 0);
    cr_expect(S_ISDIR(sb.st_mode));
    kmgr_kernel_destroy(k);
}

Test(kernel, connection_files_are_private_and_keys_unique)
{
    kt_states_t st1 = {0}, st2 = {0};
    kmgr_kernel_options_t o1 = {.spec = kt.python, .on_state = kt_on_state, .data = &st1};
    kmgr_kernel_options_t o2 = {.spec = kt.python, .on_state = kt_on_state, .data = &st2};
    kmgr_kernel_t *k1, *k2;
    wire_connection_t c1, c2;
    struct stat sb;
    const char *rt = kmgr_manager_runtime_dir(kt.mgr);

    cr_assert_eq(stat(rt, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0700);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &o1, &k1), 0);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &o2, &k2), 0);
    cr_expect_str_neq(kmgr_kernel_connection_file(k1), kmgr_kernel_connection_file(k2));
    cr_expect_eq(strncmp(kmgr_kernel_connection_file(k1), rt, strlen(rt)), 0);
    cr_expect_not_null(strstr(kmgr_kernel_connection_file(k1), "/connection.json"));
    cr_assert_eq(stat(kmgr_kernel_connection_file(k1), &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0600);
    cr_assert_eq(wire_connection_read(kmgr_kernel_connection_file(k1), &c1), 0);
    cr_assert_eq(wire_connection_read(kmgr_kernel_connection_file(k2), &c2), 0);
    cr_expect_str_eq(c1.transport, "ipc");
    cr_expect_eq(strlen(c1.key), 64);
    cr_expect_str_neq(c1.key, c2.key);
    cr_expect_str_eq(c1.kernel_name, "python3");
    wire_connection_dispose(&c1);
    wire_connection_dispose(&c2);
    kmgr_kernel_destroy(k1);
    kmgr_kernel_destroy(k2);
}

Test(kernel, execute_yields_result_and_done_once)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "1+1", &rec), 0);
    cr_expect_eq(rec.n_iopub + rec.n_reply + rec.n_done, 0, "no callback from inside the call");
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_failed, 0);
    cr_expect_eq(rec.n_reply, 1);
    cr_assert_not_null(kt_result_text(&rec));
    cr_expect_str_eq(kt_result_text(&rec), "2");
    cr_expect_str_eq(json_string_value(json_object_get(rec.reply, "status")), "ok");
    cr_expect_not_null(kt_iopub(&rec, "execute_input"));
    /* Nothing more arrives for a finished request. */
    poll_loop_run_for(kt.loop, 300);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.after_final, 0);
    cr_expect(kt_states_saw(&st, KMGR_KERNEL_BUSY));
    cr_expect_eq(kmgr_kernel_state(k), KMGR_KERNEL_IDLE);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(kernel, print_streams_stdout)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "print('hi')", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_str_eq(rec.out, "hi\n");
    cr_expect_null(kt_result_text(&rec));
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/*
 * A spec that asks for TCP (metadata.kgate.transport, for kernels without ipc) gets loopback ports,
 * and kgate's own ZMTP connections work over them as over ipc: a result, and output bigger than
 * any socket buffer, whole.
 */
Test(kernel, a_kernel_on_tcp_runs_code)
{
    kmgr_kernelspec_t *spec = kt_fake_spec((const char *const *)kt.python->argv, kt.python->argc);
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    wire_connection_t conn;
    kt_rec_t rec;

    spec->metadata = json_pack("{s{ss}}", "kgate", "transport", "tcp");
    k = kt_start_ready(spec, &st);
    cr_assert_eq(wire_connection_read(kmgr_kernel_connection_file(k), &conn), 0);
    cr_expect_str_eq(conn.transport, "tcp");
    cr_expect_str_eq(conn.ip, "127.0.0.1");
    wire_connection_dispose(&conn);
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "import sys; sys.stdout.write('x' * 3000000); sys.stdout.flush(); 6*7", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 20000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_failed, 0);
    cr_expect_eq(rec.out_bytes, 3000000, "stdout arrived short: %zu bytes", rec.out_bytes);
    cr_assert_not_null(kt_result_text(&rec));
    cr_expect_str_eq(kt_result_text(&rec), "42");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
    kmgr_kernelspec_destroy(spec);
}

/* A request that opts in gets its stream and result messages' content as the kernel's bytes (kmgr_execute_options_t.raw_stream);
 * one that does not, beside it, parsed. */
Test(kernel, raw_stream_is_per_request)
{
    static const kmgr_execute_options_t raw_opts = {.store_history = 1, .stop_on_error = 1, .raw_stream = 1};
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t raw, parsed;
    json_t *first;

    kt_rec_init(&raw);
    kt_rec_init(&parsed);
    cr_assert_eq(kmgr_kernel_execute(k, "print('caf\u00e9 \"q\" \\\\ \\x1b[1m'); 6 * 7", &raw_opts, kt_on_req, &raw, &raw.req), 0);
    cr_assert_eq(kt_execute(k, "print('plain')", &parsed), 0);
    cr_assert(kt_wait_rec(&raw, 10000));
    cr_assert(kt_wait_rec(&parsed, 10000));

    cr_assert_geq(json_array_size(raw.raw), 1);
    for (size_t i = 0; i != json_array_size(raw.raw); ++i) {
        const char *type = json_string_value(json_object_get(json_array_get(raw.raw, i), "msg_type"));
        cr_expect(strcmp(type, "stream") == 0 || strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0,
                  "only output and results stay raw, not %s", type);
    }
    first = json_object_get(json_array_get(raw.raw, 0), "content");
    cr_expect_str_eq(json_string_value(json_object_get(first, "text")), "caf\xc3\xa9 \"q\" \\ \x1b[1m\n");
    cr_expect_str_eq(raw.out, "", "a raw stream message has an empty parsed content");
    cr_expect_str_eq(kt_result_text(&raw), "42", "the raw result's bytes are the kernel's");

    cr_expect_eq(json_array_size(parsed.raw), 0);
    cr_expect_str_eq(parsed.out, "plain\n");
    kt_rec_dispose(&raw);
    kt_rec_dispose(&parsed);
    kmgr_kernel_destroy(k);
}

Test(kernel, requests_queued_while_starting_run_once_ready)
{
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.spec = kt.python, .on_state = kt_on_state, .data = &st};
    kmgr_kernel_t *k;
    kt_rec_t a, b;

    kt_rec_init(&a);
    kt_rec_init(&b);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert_eq(kt_execute(k, "x = 20", &a), 0);
    cr_assert_eq(kt_execute(k, "x + 22", &b), 0);
    cr_assert(kt_wait_rec(&b, 30000));
    cr_expect_eq(a.n_done, 1);
    cr_expect_eq(b.n_done, 1);
    cr_expect_str_eq(kt_result_text(&b), "42");
    kt_rec_dispose(&a);
    kt_rec_dispose(&b);
    kmgr_kernel_destroy(k);
}

Test(kernel, pipelined_requests_route_by_parent)
{
    enum { N = 40 };
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t recs[N];
    char code[64];

    for (int i = 0; i != N; ++i) {
        kt_rec_init(&recs[i]);
        snprintf(code, sizeof(code), "print(%d); %d * 2", i, i);
        cr_assert_eq(kt_execute(k, code, &recs[i]), 0);
    }
    cr_assert(kt_wait_rec(&recs[N - 1], 30000));
    poll_loop_run_for(kt.loop, 100);
    for (int i = 0; i != N; ++i) {
        char want[32];
        cr_expect_eq(recs[i].n_done, 1, "request %d done once", i);
        cr_expect_eq(recs[i].after_final, 0);
        snprintf(want, sizeof(want), "%d\n", i);
        cr_expect_str_eq(recs[i].out, want);
        snprintf(want, sizeof(want), "%d", i * 2);
        cr_expect_str_eq(kt_result_text(&recs[i]), want);
        kt_rec_dispose(&recs[i]);
    }
    kmgr_kernel_destroy(k);
}

Test(kernel, error_aborts_queued_requests_which_still_complete)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t err, queued;

    kt_rec_init(&err);
    kt_rec_init(&queued);
    cr_assert_eq(kt_execute(k, "1/0", &err), 0);
    cr_assert_eq(kt_execute(k, "'not run'", &queued), 0);
    cr_assert(kt_wait_rec(&queued, 10000));
    cr_expect_eq(err.n_done, 1);
    cr_expect_str_eq(json_string_value(json_object_get(kt_iopub(&err, "error"), "ename")), "ZeroDivisionError");
    cr_expect_str_eq(json_string_value(json_object_get(err.reply, "status")), "error");
    /* ipykernel answers requests queued behind an error with status "aborted" (stop_on_error). */
    cr_expect_eq(queued.n_done, 1);
    cr_expect_str_eq(json_string_value(json_object_get(queued.reply, "status")), "aborted");
    cr_expect_null(kt_result_text(&queued));
    kt_rec_dispose(&err);
    kt_rec_dispose(&queued);
    kmgr_kernel_destroy(k);
}

Test(kernel, two_kernels_are_isolated)
{
    kt_states_t s1 = {0}, s2 = {0};
    kmgr_kernel_t *k1 = kt_start_ready(NULL, &s1), *k2 = kt_start_ready(NULL, &s2);
    kt_rec_t a, b, c, d;

    kt_rec_init(&a);
    kt_rec_init(&b);
    kt_rec_init(&c);
    kt_rec_init(&d);
    cr_assert_eq(kt_execute(k1, "x = 'one'", &a), 0);
    cr_assert_eq(kt_execute(k2, "x = 'two'", &b), 0);
    cr_assert(kt_wait_rec(&a, 10000));
    cr_assert(kt_wait_rec(&b, 10000));
    cr_assert_eq(kt_execute(k1, "x", &c), 0);
    cr_assert_eq(kt_execute(k2, "x", &d), 0);
    cr_assert(kt_wait_rec(&c, 10000));
    cr_assert(kt_wait_rec(&d, 10000));
    cr_expect_str_eq(kt_result_text(&c), "'one'");
    cr_expect_str_eq(kt_result_text(&d), "'two'");
    cr_expect_neq(kmgr_kernel_pid(k1), kmgr_kernel_pid(k2));
    kt_rec_dispose(&a);
    kt_rec_dispose(&b);
    kt_rec_dispose(&c);
    kt_rec_dispose(&d);
    kmgr_kernel_destroy(k1);
    kmgr_kernel_destroy(k2);
}

static int saw_execute_input(void *arg)
{
    return kt_iopub(arg, "execute_input") != NULL;
}

static void interrupt_test(const kmgr_kernelspec_t *spec)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(spec, &st);
    kt_rec_t rec, after;
    uint64_t t0;

    kt_rec_init(&rec);
    kt_rec_init(&after);
    cr_assert_eq(kt_execute(k, "import time; time.sleep(30)", &rec), 0);
    cr_assert(poll_loop_run_until(kt.loop, saw_execute_input, &rec, 10000));
    /* execute_input is published just before the code runs; give it a moment to enter sleep(). */
    poll_loop_run_for(kt.loop, 200);
    t0 = ksys_now_ms();
    cr_assert_eq(kmgr_kernel_interrupt(k), 0);
    cr_assert(kt_wait_rec(&rec, 5000));
    cr_expect_lt(ksys_now_ms() - t0, 1500, "interrupted within ~1 s");
    cr_expect_eq(rec.n_done, 1);
    cr_assert_not_null(kt_iopub(&rec, "error"));
    cr_expect_str_eq(json_string_value(json_object_get(kt_iopub(&rec, "error"), "ename")), "KeyboardInterrupt");
    /* The kernel survives and keeps working (requests that arrive while it still aborts after the
     * error are answered "aborted": try again). */
    for (int i = 0; i != 20; ++i) {
        cr_assert_eq(kt_execute(k, "'still here'", &after), 0);
        cr_assert(kt_wait_rec(&after, 10000));
        if (strcmp(json_string_value(json_object_get(after.reply, "status")), "aborted") != 0)
            break;
        kt_rec_dispose(&after);
        kt_rec_init(&after);
        poll_loop_run_for(kt.loop, 50);
    }
    cr_expect_str_eq(kt_result_text(&after), "'still here'");
    kt_rec_dispose(&rec);
    kt_rec_dispose(&after);
    kmgr_kernel_destroy(k);
}

Test(kernel, interrupt_by_signal)
{
    cr_assert_eq(kt.python->interrupt_mode, KMGR_INTERRUPT_SIGNAL);
    interrupt_test(NULL);
}

Test(kernel, interrupt_by_message)
{
    kmgr_kernelspec_t *spec;

    cr_assert_eq(kmgr_kernelspec_load("python3", kt.python->resource_dir, &spec), 0);
    spec->interrupt_mode = KMGR_INTERRUPT_MESSAGE;
    interrupt_test(spec);
    kt_teardown(); /* the kernel borrows the spec: stop it before the spec goes */
    kmgr_kernelspec_destroy(spec);
}

static int printed_ready(void *arg)
{
    return strstr(((kt_rec_t *)arg)->out, "ready\n") != NULL;
}

/* A storm of interrupts is one: ipykernel ends when a second SIGINT lands while it handles the first one's KeyboardInterrupt. */
Test(kernel, interrupts_in_a_burst_are_one_until_the_kernel_is_idle)
{
    static const char code[] = "import signal, time\n"
                               "n = 0\n"
                               "def count(*args):\n"
                               "    global n\n"
                               "    n += 1\n"
                               "signal.signal(signal.SIGINT, count)\n"
                               "print('ready', flush=True)\n"
                               "time.sleep(1.2)\n"
                               "print(n)\n";
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec, after;

    kt_rec_init(&rec);
    kt_rec_init(&after);
    cr_assert_eq(kt_execute(k, code, &rec), 0);
    cr_assert(poll_loop_run_until(kt.loop, printed_ready, &rec, 10000));
    for (int i = 0; i != 20; ++i) {
        cr_assert_eq(kmgr_kernel_interrupt(k), 0);
        poll_loop_run_for(kt.loop, 5);
    }
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_str_eq(rec.out, "ready\n1\n", "the code counted its SIGINTs: %s", rec.out);
    /* the kernel has been idle since: the next interrupt goes */
    cr_assert_eq(kt_execute(k, code, &after), 0);
    cr_assert(poll_loop_run_until(kt.loop, printed_ready, &after, 10000));
    cr_assert_eq(kmgr_kernel_interrupt(k), 0);
    cr_assert(kt_wait_rec(&after, 10000));
    cr_expect_str_eq(after.out, "ready\n1\n", "an interrupt after the kernel went idle: %s", after.out);
    kt_rec_dispose(&rec);
    kt_rec_dispose(&after);
    kmgr_kernel_destroy(k);
}

Test(kernel, input_request_round_trip)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kmgr_execute_options_t opts = {.store_history = 1, .allow_stdin = 1, .stop_on_error = 1};
    kt_rec_t rec;

    kt_rec_init(&rec);
    rec.answer = "bob";
    cr_assert_eq(kmgr_kernel_execute(k, "print('hello ' + input('name? '))", &opts, kt_on_req, &rec, &rec.req), 0);
    cr_expect_eq(kmgr_request_input_reply(rec.req, "early"), KSYS_ENOINPUT, "no input_request yet");
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_input, 1);
    cr_expect_eq(rec.input_ret, 0);
    cr_expect_str_eq(json_string_value(json_object_get(rec.input_content, "prompt")), "name? ");
    cr_expect_str_eq(rec.out, "hello bob\n");
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(kernel, cancel_and_destroy_from_inside_callbacks)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t a, b, c;
    pid_t pid = kmgr_kernel_pid(k);

    kt_rec_init(&a);
    kt_rec_init(&b);
    kt_rec_init(&c);
    /* Cancelled on its first event: no more callbacks, and later messages are dropped cleanly. */
    a.cancel_on_iopub = 1;
    cr_assert_eq(kt_execute(k, "print('a'); 1", &a), 0);
    cr_assert_eq(kt_execute(k, "2", &b), 0);
    cr_assert(kt_wait_rec(&b, 10000));
    cr_expect_eq(a.n_iopub, 1, "nothing after the cancel: not its stream, not its result");
    cr_expect_eq(a.n_done + a.n_failed, 0);
    /* Its reply may have come before its first iopub message (two sockets, no order between them),
     * never after the cancel. */
    cr_expect_leq(a.n_reply, 1);
    cr_expect_str_eq(kt_result_text(&b), "2");

    /* The kernel destroyed from inside a request's callback; the other request hears nothing more. */
    c.destroy_on_iopub = k;
    kt_rec_t d;
    kt_rec_init(&d);
    cr_assert_eq(kt_execute(k, "3", &c), 0);
    cr_assert_eq(kt_execute(k, "4", &d), 0);
    poll_loop_run_for(kt.loop, 500);
    cr_expect_eq(c.n_iopub, 1);
    cr_expect_eq(c.n_done + c.n_failed, 0);
    cr_expect_eq(d.n_iopub + d.n_done + d.n_failed, 0);
    cr_expect(kt_wait_no_process(10000));
    cr_expect(!kt_pid_alive(pid));
    kt_rec_dispose(&a);
    kt_rec_dispose(&b);
    kt_rec_dispose(&c);
    kt_rec_dispose(&d);
}

Test(kernel, cancelled_input_request_gets_an_empty_line)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kmgr_execute_options_t opts = {.store_history = 1, .allow_stdin = 1, .stop_on_error = 1};
    kmgr_request_t *req;
    kt_rec_t a, b;

    kt_rec_init(&a);
    kt_rec_init(&b);
    cr_assert_eq(kmgr_kernel_execute(k, "x = input('?')", &opts, kt_on_req, &a, &req), 0);
    kmgr_request_cancel(req);
    cr_assert_eq(kt_execute(k, "len(x)", &b), 0);
    cr_assert(kt_wait_rec(&b, 10000), "the kernel is not left waiting for input");
    cr_expect_str_eq(kt_result_text(&b), "0");
    cr_expect_eq(a.n_iopub + a.n_input + a.n_reply + a.n_done + a.n_failed, 0);
    kt_rec_dispose(&a);
    kt_rec_dispose(&b);
    kmgr_kernel_destroy(k);
}

Test(kernel, environment_cwd_and_argv_substitution)
{
    kmgr_kernelspec_t *spec;
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.on_state = kt_on_state, .data = &st, .cwd = "/tmp"};
    kmgr_kernel_t *k;
    kt_rec_t rec;
    char want[1024], *dir;

    cr_assert_eq(kmgr_kernelspec_load("python3", kt.python->resource_dir, &spec), 0);
    spec->env = json_pack("{s:s, s:s}", "KGATE_SPEC_VAR", "spec", "KGATE_BOTH", "spec");
    /* {resource_dir} is substituted too: pass it through as an argument ipykernel ignores. */
    spec->argv = realloc(spec->argv, (spec->argc + 2) * sizeof(char *));
    spec->argv[spec->argc++] = strdup("--KernelApp.name={resource_dir}");
    spec->argv[spec->argc] = NULL;
    opts.spec = spec;
    opts.env = json_pack("{s:s}", "KGATE_BOTH", "opts");
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    json_decref(opts.env); /* borrowed by start only */
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k,
                            "import os, sys; print(os.environ['KGATE_SPEC_VAR'], os.environ['KGATE_BOTH'], os.getcwd(), "
                            "os.environ['JPY_PARENT_PID'], os.environ['IPYTHONDIR'], sys.stdin.read(), sep='|')",
                            &rec),
                 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    dir = strdup(kmgr_kernel_connection_file(k));
    *strrchr(dir, '/') = '\0';
    snprintf(want, sizeof(want), "spec|opts|/tmp|%d|%s/ipython|\n", (int)getpid(), dir);
    cr_expect_str_eq(rec.out, want);
    free(dir);
    kt_rec_dispose(&rec);
    kt_teardown(); /* the kernel borrows the spec */
    kmgr_kernelspec_destroy(spec);
}

Test(kernel, generic_shell_request)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kmgr_kernel_request(k, "complete_request", json_pack("{s:s, s:i}", "code", "impo", "cursor_pos", 4), kt_on_req,
                                     &rec, &rec.req),
                 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_reply, 1);
    cr_expect_str_eq(json_string_value(json_object_get(rec.reply, "status")), "ok");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(rec.reply, "matches"), 0)), "import");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}
