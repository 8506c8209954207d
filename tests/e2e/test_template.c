/* tests/e2e/test_template.c: Python kernels forked from a template (docs/API.md 6.5, docs/kernels.md): forked contexts share
 * no state, interrupt, timeout, restart and kill -9 behave as for a spawned kernel, the script magics print what they print in a
 * spawned kernel, a killed template is replaced, kernels are spawned when the template cannot start, forked kernels are
 * mergeable by KSM only under --kernel-template-merge, and a kernel forked from the template's warm kernel holds fewer pages of
 * its own than one forked from its imports alone. Each test runs a private kgate with real ipykernel kernels. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/skip.h"
#include "support/stream.h"

/* A template imports ipykernel: a python start, under ASan's kgate on a loaded 2-core machine. */
#define TEMPLATE_READY_MS 60000

static ts_gateway_t gw;

/* As in test_liveness.c: this binary checks kgate, and a failed assertion abandons the test's heap. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(template, .fini = fini, .timeout = 400);

/* kgate's log, whole (small); free it. */
static char *read_log(void)
{
    FILE *fp = fopen(gw.log_path, "r");
    char *buf = calloc(1, 1 << 20);
    size_t n;

    cr_assert_not_null(fp);
    n = fread(buf, 1, (1 << 20) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* Waits until kgate's log says the python3 template is ready for the `nth` time; returns that template's pid. */
static pid_t wait_template_ready(int nth)
{
    int64_t deadline = ts_now_ms() + TEMPLATE_READY_MS;
    static const char needle[] = "kgate: the python3 kernel template (pid ";

    for (;;) {
        char *log = read_log(), *at = log, *hit = NULL;
        int seen = 0;
        while ((at = strstr(at, needle)) != NULL) {
            at += sizeof(needle) - 1;
            if (strncmp(strchr(at, ')'), ") is ready", 10) == 0 && ++seen == nth)
                hit = at;
        }
        if (hit != NULL) {
            pid_t pid = (pid_t)atoi(hit);
            free(log);
            return pid;
        }
        free(log);
        if (ts_now_ms() >= deadline) {
            ts_gateway_dump_log(&gw, 4096);
            cr_assert_fail("the python3 template was not ready (time %d) within %d ms", nth, TEMPLATE_READY_MS);
        }
        usleep(100 * 1000);
    }
}

/* POST /code/context with `body`; asserts 200; returns the context object (a new reference). */
static json_t *create(const char *body)
{
    json_t *json = json_loads(body, 0, NULL), *out;
    ts_response_t r;
    int st = ts_post_json(gw.port, "/code/context", NULL, json, &r);

    json_decref(json);
    if (st != 200)
        ts_gateway_dump_log(&gw, 4096);
    cr_assert_eq(st, 200, "POST /code/context %s: HTTP %d %.800s", body, st, r.body);
    out = json_incref(r.json);
    ts_response_dispose(&r);
    return out;
}

/* Runs `code` and returns its stdout (free it), asserting a complete run without error. */
static char *run_stdout(const char *ctx, const char *code)
{
    return xh_run_stdout(gw.port, ctx, code);
}

/* The value of `series` (a whole series name, labels included) in GET /kgate/metrics; -1 when it is not there. */
static double metric(const char *series)
{
    return xh_metric(gw.port, series);
}

/* A context of its own cwd and env, forked: the kernel's parent is the template. Returns its id (free it). */
static char *forked_context(const char *cwd, const char *tag, pid_t tpl)
{
    char body[1024];
    json_t *c;
    char *id, *out;

    snprintf(body, sizeof(body), "{\"language\": \"python\", \"cwd\": \"%s\", \"env\": {\"KGATE_TPL_TAG\": \"%s\"}}", cwd, tag);
    c = create(body);
    cr_assert_str_eq(xh_str(c, "start"), "forked", "a context created once the template is ready is forked: %s",
                     json_dumps(c, JSON_COMPACT));
    id = strdup(xh_str(c, "id"));
    json_decref(c);
    out = run_stdout(id, "import os; print(os.getpid())");
    cr_assert_eq(ts_proc_parent((pid_t)atoi(out)), tpl, "the kernel's parent is the template");
    free(out);
    return id;
}

Test(template, two_forked_contexts_share_no_state)
{
    const char *args[] = {"--pool", "none", NULL};
    char dir_a[320], dir_b[320];
    char *a, *b, *out_a, *out_b;
    const char *probe = "import os, random, tempfile, numpy\n"
                        "print(os.getcwd(), os.environ.get('KGATE_TPL_TAG'), 'probe' in globals(), random.random(), "
                        "numpy.random.random(), tempfile.mkstemp()[1], os.getpid())\n"
                        "probe = 1\n";

    xh_gateway_start(&gw, args);
    pid_t tpl = wait_template_ready(1);
    snprintf(dir_a, sizeof(dir_a), "%s/a", gw.tmpdir);
    snprintf(dir_b, sizeof(dir_b), "%s/b", gw.tmpdir);
    cr_assert_eq(mkdir(dir_a, 0700), 0);
    cr_assert_eq(mkdir(dir_b, 0700), 0);
    a = forked_context(dir_a, "a", tpl);
    b = forked_context(dir_b, "b", tpl);

    out_a = run_stdout(a, probe);
    out_b = run_stdout(b, probe);
    cr_log_info("a: %s", out_a);
    cr_log_info("b: %s", out_b);
    char cwd_a[320], cwd_b[320], tag_a[8], tag_b[8], glob_a[8], glob_b[8], tmp_a[256], tmp_b[256];
    double r_a, r_b, n_a, n_b;
    int pid_a, pid_b;
    cr_assert_eq(sscanf(out_a, "%319s %7s %7s %lf %lf %255s %d", cwd_a, tag_a, glob_a, &r_a, &n_a, tmp_a, &pid_a), 7, "%s", out_a);
    cr_assert_eq(sscanf(out_b, "%319s %7s %7s %lf %lf %255s %d", cwd_b, tag_b, glob_b, &r_b, &n_b, tmp_b, &pid_b), 7, "%s", out_b);
    cr_expect_str_eq(cwd_a, dir_a, "each kernel in its own cwd");
    cr_expect_str_eq(cwd_b, dir_b, "each kernel in its own cwd");
    cr_expect_str_eq(tag_a, "a", "each kernel with its own env");
    cr_expect_str_eq(tag_b, "b", "each kernel with its own env");
    cr_expect_str_eq(glob_a, "False");
    cr_expect_str_eq(glob_b, "False", "a global of one kernel is not in another");
    cr_expect_neq(pid_a, pid_b);
    cr_expect(r_a != r_b, "random's state is reseeded in each fork: both drew %f", r_a);
    cr_expect(n_a != n_b, "numpy.random's state differs: both drew %f", n_a);
    cr_expect_str_neq(tmp_a, tmp_b, "tempfile names differ");
    /* and the second cell sees its own global, which the other kernel never set */
    free(out_a);
    out_a = run_stdout(a, "print(probe, 'KGATE_TPL_TAG' in os.environ and os.environ['KGATE_TPL_TAG'])");
    cr_expect_str_eq(out_a, "1 a\n");
    free(out_a);
    free(out_b);
    /* a kernel's history is its own cells alone (none of the template's warm-up: no Out, session 1), its _dh its own cwd */
    out_a = run_stdout(a, "print(len(In), sorted(Out), get_ipython().history_manager.session_number, [str(d) for d in _dh] == "
                          "[os.getcwd()])");
    cr_expect_str_eq(out_a, "5 [] 1 True\n", "the kernel's history is its own: %s", out_a);
    free(out_a);
    /* the kernel's IPython dir, its app's and its shell's, is the IPYTHONDIR kgate gave it (its app is made before its request: the
     * environment is read in initialize) */
    const char *ipdir =
        "import os; from ipykernel.kernelapp import IPKernelApp; app = IPKernelApp.instance()\n"
        "d = os.environ['IPYTHONDIR']\n"
        "print(app.ipython_dir == d and get_ipython().ipython_dir == d and app.profile_dir.location.startswith(d), d)";
    out_a = run_stdout(a, ipdir);
    out_b = run_stdout(b, ipdir);
    cr_expect(strncmp(out_a, "True ", 5) == 0 && strncmp(out_b, "True ", 5) == 0, "a: %s b: %s", out_a, out_b);
    cr_expect_str_neq(out_a, out_b, "each kernel has an IPython dir of its own");
    free(out_a);
    free(out_b);
    free(a);
    free(b);
    xh_gateway_stop(&gw);
}

/* The script magics' cells and help, and how many parsers the eight named ones hold, in a new context's kernel (free each). */
#define MAGIC_CELLS 5
static void run_script_magics(char *out[MAGIC_CELLS])
{
    static const char *const cells[MAGIC_CELLS] = {
        "%%bash\necho bash $((6*7))",
        "%%python3\nprint('python3', 6*7)",
        "%%script --no-raise-error sh\necho script; exit 3",
        "ip = get_ipython()\n"
        "for n in ('bash', 'python3', 'script'):\n"
        "    print(ip.object_inspect_text('%%' + n))\n"
        "    print(ip.magics_manager.magics['cell'][n].parser.format_help())\n",
        "cells = get_ipython().magics_manager.magics['cell']\n"
        "print(len({id(cells[n].parser) for n in ('sh', 'bash', 'perl', 'ruby', 'python', 'python2', 'python3', 'pypy')}))\n",
    };
    json_t *c = create("{\"language\": \"python\"}");
    char *id = strdup(xh_str(c, "id"));

    json_decref(c);
    for (int i = 0; i < MAGIC_CELLS; i++)
        out[i] = run_stdout(id, cells[i]);
    free(id);
}

/* The named script magics' parser is built once in the template (kernels/python-template/kgate_script_magics.py): a forked
 * kernel's %%bash, %%python3, %%script and their help print what a spawned kernel's do, its eight named magics sharing one parser.
 */
Test(template, script_magics_print_in_a_forked_kernel_what_they_print_in_a_spawned_one)
{
    const char *spawned_args[] = {"--pool", "none", "--kernel-template", "none", NULL};
    const char *args[] = {"--pool", "none", NULL};
    char *spawned[MAGIC_CELLS], *forked[MAGIC_CELLS];

    xh_gateway_start(&gw, spawned_args);
    run_script_magics(spawned);
    xh_gateway_stop(&gw);
    xh_gateway_start(&gw, args);
    wait_template_ready(1);
    run_script_magics(forked);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"forked\"}"), 1, "the second kernel was forked");
    xh_gateway_stop(&gw);

    cr_expect_str_eq(spawned[0], "bash 42\n");
    cr_expect_str_eq(spawned[1], "python3 42\n");
    cr_expect_str_eq(spawned[2], "script\n");
    cr_expect(strstr(spawned[3], "%%bash script magic") != NULL && strstr(spawned[3], "--no-raise-error") != NULL, "%s",
              spawned[3]);
    for (int i = 0; i < MAGIC_CELLS - 1; i++)
        cr_expect_str_eq(forked[i], spawned[i], "cell %d: a forked kernel prints what a spawned one prints", i);
    cr_expect_str_eq(spawned[MAGIC_CELLS - 1], "8\n", "a spawned kernel builds a parser per named magic");
    cr_expect_str_eq(forked[MAGIC_CELLS - 1], "1\n", "a forked kernel's named magics share the template's parser");
    for (int i = 0; i < MAGIC_CELLS; i++) {
        free(spawned[i]);
        free(forked[i]);
    }
}

Test(template, interrupt_timeout_restart_and_kill_9_as_for_a_spawned_kernel)
{
    const char *args[] = {"--pool", "none", NULL};
    ts_response_t r;
    ts_events_t evs;
    char path[256], *id, *out;

    xh_gateway_start(&gw, args);
    pid_t tpl = wait_template_ready(1);
    id = forked_context(gw.tmpdir, "x", tpl);

    /* interrupt: DELETE /code?id= ends a sleeping cell with KeyboardInterrupt, and the context lives on */
    json_t *body = xh_body(id, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_stream_t *s = xh_open(gw.port, body, deadline);
    json_decref(body);
    memset(&evs, 0, sizeof(evs));
    xh_wait_event(s, &evs, "stdout", 0, deadline);
    snprintf(path, sizeof(path), "/code?id=%s", id);
    cr_assert_eq(ts_http_request(gw.port, "DELETE", path, NULL, NULL, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    xh_error_event(&evs, "KeyboardInterrupt");
    ts_events_dispose(&evs);
    out = run_stdout(id, "print('after the interrupt')");
    cr_expect_str_eq(out, "after the interrupt\n");
    free(out);

    /* timeout: a run past its timeout is interrupted the same way */
    body = xh_body(id, "import time\ntime.sleep(60)");
    json_object_set_new(body, "timeout", json_integer(1500));
    xh_run(gw.port, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    json_t *ex = xh_execution(gw.port, xh_execution_id(&evs));
    cr_expect_str_eq(xh_str(ex, "outcome"), "timeout", "%s", json_dumps(ex, JSON_COMPACT));
    json_decref(ex);
    ts_events_dispose(&evs);

    /* restart: a new process, forked again, with fresh state */
    out = run_stdout(id, "import os; kept = 1; print(os.getpid())");
    pid_t before = (pid_t)atoi(out);
    free(out);
    snprintf(path, sizeof(path), "/code/contexts/%s/restart", id);
    cr_assert_eq(ts_http_request(gw.port, "POST", path, NULL, NULL, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    json_t *c = xh_context_wait_status(gw.port, id, "idle", 30000);
    cr_expect_str_eq(xh_str(c, "start"), "forked", "a restart forks again");
    json_decref(c);
    out = run_stdout(id, "import os; print(os.getpid(), 'kept' in dir())");
    pid_t after = (pid_t)atoi(out);
    cr_expect_neq(after, before);
    cr_expect_not_null(strstr(out, "False"), "fresh state after a restart: %s", out);
    cr_expect_eq(ts_proc_parent(after), tpl);
    free(out);

    /* kill -9: reported as for a spawned kernel (the template tells kgate the wait status), restarted automatically */
    cr_assert_eq(kill(after, SIGKILL), 0);
    c = xh_context_wait_status(gw.port, id, "idle", 30000);
    for (int64_t until = ts_now_ms() + 30000; json_integer_value(json_object_get(c, "restarts")) != 1 && ts_now_ms() < until;) {
        json_decref(c);
        usleep(100 * 1000);
        c = xh_context_wait_status(gw.port, id, "idle", 30000);
    }
    cr_expect_eq(json_integer_value(json_object_get(c, "restarts")), 1);
    cr_expect_not_null(strstr(xh_str(c, "last_death"), "killed by signal 9 (SIGKILL)"), "last_death: %s", xh_str(c, "last_death"));
    json_decref(c);
    out = run_stdout(id, "print(6 * 7)");
    cr_expect_str_eq(out, "42\n");
    free(out);
    free(id);
    xh_gateway_stop(&gw);
}

Test(template, a_template_killed_with_kill_9_is_replaced)
{
    const char *args[] = {"--pool", "none", NULL};
    char *id, *out;

    xh_gateway_start(&gw, args);
    pid_t tpl = wait_template_ready(1);
    id = forked_context(gw.tmpdir, "old", tpl);
    cr_assert_eq(kill(tpl, SIGKILL), 0);
    pid_t tpl2 = wait_template_ready(2);
    cr_expect_neq(tpl2, tpl);
    /* the kernel forked from the dead template lives on */
    out = run_stdout(id, "print('still here')");
    cr_expect_str_eq(out, "still here\n");
    free(out);
    free(id);
    /* and creation forks from the new one */
    id = forked_context(gw.tmpdir, "new", tpl2);
    free(id);
    /* the figures: two forked starts, none spawned, one template running, started again once */
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"forked\"}"), 2);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"spawned\"}"), 0);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"fallback\"}"), 0);
    cr_expect_eq(metric("kgate_kernel_templates_running"), 1);
    cr_expect_eq(metric("kgate_kernel_template_restarts_total"), 1);
    xh_gateway_stop(&gw);
}

/* A python3 kernelspec whose interpreter is a wrapper that refuses to run the template: kernels are spawned. */
Test(template, kernels_are_spawned_when_the_template_cannot_start)
{
    char specdir[64], wrapper[160], spec[128];
    FILE *fp;

    ts_sleep_ms(0);
    snprintf(specdir, sizeof(specdir), "/tmp/kgate-tpl-spec-%d", (int)getpid());
    snprintf(spec, sizeof(spec), "%s/python3", specdir);
    mkdir(specdir, 0700);
    mkdir(spec, 0700);
    snprintf(wrapper, sizeof(wrapper), "%s/python", specdir);
    cr_assert_not_null(fp = fopen(wrapper, "w"));
    fprintf(
        fp,
        "#!/bin/sh\ncase \"$1\" in *kgate_template.py) echo 'no template here' >&2; exit 3;; esac\nexec /usr/bin/python3 \"$@\"\n");
    fclose(fp);
    chmod(wrapper, 0700);
    snprintf(spec + strlen(spec), sizeof(spec) - strlen(spec), "/kernel.json");
    cr_assert_not_null(fp = fopen(spec, "w"));
    fprintf(fp,
            "{\"argv\": [\"%s\", \"-m\", \"ipykernel_launcher\", \"-f\", \"{connection_file}\"], \"display_name\": \"P\", "
            "\"language\": \"python\"}\n",
            wrapper);
    fclose(fp);
    const char *args[] = {"--pool", "none", "--kernel-path", specdir, NULL};
    xh_gateway_start(&gw, args);
    /* the template died at once: said in the log */
    int64_t deadline = ts_now_ms() + TEMPLATE_READY_MS;
    for (;;) {
        char *log = read_log();
        int died = strstr(log, "kernel template died (exited with code 3)") != NULL;
        free(log);
        if (died)
            break;
        cr_assert(ts_now_ms() < deadline, "the template's death was not logged");
        usleep(100 * 1000);
    }
    json_t *c = create("{\"language\": \"python\"}");
    cr_expect_str_eq(xh_str(c, "start"), "spawned");
    /* spawned although the kernelspec has a template: a fallback, for want of a template ready */
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"fallback\"}"), 1);
    cr_expect_eq(metric("kgate_kernel_start_fallbacks_total{reason=\"unavailable\"}"), 1);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"spawned\"}"), 0);
    cr_expect_eq(metric("kgate_kernel_templates_running"), 0);
    char *id = strdup(xh_str(c, "id"));
    json_decref(c);
    char *out = run_stdout(id, "print(6 * 7)");
    cr_expect_str_eq(out, "42\n");
    free(out);
    free(id);
    xh_gateway_stop(&gw);
    unlink(wrapper);
    spec[strlen(spec) - strlen("/kernel.json")] = '\0';
    snprintf(wrapper, sizeof(wrapper), "%s/kernel.json", spec);
    unlink(wrapper);
    rmdir(spec);
    rmdir(specdir);
}

/* What the interpreter takes from its environment at its start, in `dir` (its cwd) with PYTHONPATH set, then with the hash seed
 * and the bytecode flag set: both contexts' start paths and their cells' outputs (sys.path; the flags and a seeded hash), free
 * each. */
static void run_start_env(const char *dir, char *start[2], char *out[2])
{
    char body[1024];
    json_t *c;

    snprintf(body, sizeof(body), "{\"language\": \"python\", \"cwd\": \"%s/cwd\", \"env\": {\"PYTHONPATH\": \"%s/pp::rel\"}}", dir,
             dir);
    c = create(body);
    start[0] = strdup(xh_str(c, "start"));
    out[0] = run_stdout(xh_str(c, "id"), "import sys, kgate_pp; print(sys.path, kgate_pp.X)");
    json_decref(c);
    c = create("{\"language\": \"python\", \"env\": {\"PYTHONHASHSEED\": \"0\", \"PYTHONDONTWRITEBYTECODE\": \"1\"}}");
    start[1] = strdup(xh_str(c, "start"));
    out[1] = run_stdout(xh_str(c, "id"),
                        "import sys; print(sys.flags.hash_randomization, sys.flags.dont_write_bytecode, hash('kgate'))");
    json_decref(c);
}

/* A context's environment as a new interpreter takes it (kernels/python-template/kgate_startenv.py): with PYTHONPATH, a forked
 * kernel's sys.path is a spawned kernel's (its cwd first, PYTHONPATH's entries made absolute, then the interpreter's; it had the
 * template's directory first and no PYTHONPATH), and imports from it; with a variable only an interpreter's start reads (a hash
 * seed), the kernel is spawned, and prints what a spawned kernel prints. */
Test(template, a_forked_kernel_takes_its_environment_as_a_new_interpreter_does)
{
    const char *spawned_args[] = {"--pool", "none", "--kernel-template", "none", NULL};
    const char *args[] = {"--pool", "none", NULL};
    char dir[] = "/tmp/kgate-startenv-XXXXXX", path[320];
    char *spawned_start[2], *spawned[2], *forked_start[2], *forked[2];
    FILE *fp;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/cwd", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/pp", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/pp/kgate_pp.py", dir);
    cr_assert_not_null(fp = fopen(path, "w"));
    fputs("X = 42\n", fp);
    fclose(fp);

    xh_gateway_start(&gw, spawned_args);
    run_start_env(dir, spawned_start, spawned);
    xh_gateway_stop(&gw);
    xh_gateway_start(&gw, args);
    wait_template_ready(1);
    run_start_env(dir, forked_start, forked);
    cr_expect_eq(metric("kgate_kernel_start_fallbacks_total{reason=\"failed\"}"), 1, "the seeded kernel is a fallback");
    char *log = read_log();
    cr_expect_not_null(strstr(log, "(failed: the template could not fork it: its environment sets PYTHON"), "%s", log);
    cr_expect_not_null(strstr(log, ", which a Python interpreter reads only at its start)"), "%s", log);
    free(log);
    xh_gateway_stop(&gw);
    ts_remove_tree(dir);

    cr_log_info("spawned: %s", spawned[0]);
    cr_expect(strncmp(spawned[0], "['/tmp/kgate-startenv-", 22) == 0 && strstr(spawned[0], "/pp', '") != NULL &&
                  strstr(spawned[0], "/rel', '") != NULL && strstr(spawned[0], "] 42\n") != NULL,
              "a spawned kernel's path starts with its cwd, then PYTHONPATH's entries: %s", spawned[0]);
    cr_expect_str_eq(forked_start[0], "forked");
    cr_expect_str_eq(forked[0], spawned[0], "a forked kernel's sys.path is a spawned kernel's");
    cr_expect(strncmp(spawned[1], "0 1 ", 4) == 0, "a spawned kernel takes the seed and the flag: %s", spawned[1]);
    cr_expect_str_eq(forked_start[1], "spawned", "a hash seed of its own needs a new interpreter");
    cr_expect_str_eq(forked[1], spawned[1], "with the seed the template refused, a kernel prints what a spawned kernel prints");
    for (int i = 0; i < 2; i++) {
        free(spawned_start[i]);
        free(spawned[i]);
        free(forked_start[i]);
        free(forked[i]);
    }
}

/* What a kernel's start would run and the warm kernel's did not (docs/kernels.md, "A warm kernel forked"): a PYTHONSTARTUP. Such
 * a kernel is spawned (a "failed" fallback, its reason logged) and has what its start gives it; a kernel beside it is forked. */
Test(template, a_kernel_with_a_pythonstartup_is_spawned_and_runs_it)
{
    const char *args[] = {"--pool", "none", NULL};
    char dir[] = "/tmp/kgate-warmfiles-XXXXXX", body[1024];
    json_t *c;
    char *out, *log;
    FILE *fp;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(body, sizeof(body), "%s/startup.py", dir);
    cr_assert_not_null(fp = fopen(body, "w"));
    fputs("STARTED = 7\n", fp);
    fclose(fp);
    xh_gateway_start(&gw, args);
    wait_template_ready(1);

    snprintf(body, sizeof(body), "{\"language\": \"python\", \"env\": {\"PYTHONSTARTUP\": \"%s/startup.py\"}}", dir);
    c = create(body);
    cr_expect_str_eq(xh_str(c, "start"), "spawned", "a PYTHONSTARTUP needs a kernel's own start");
    out = run_stdout(xh_str(c, "id"), "print(STARTED)");
    cr_expect_str_eq(out, "7\n", "the startup file ran");
    free(out);
    json_decref(c);

    c = create("{\"language\": \"python\"}");
    cr_expect_str_eq(xh_str(c, "start"), "forked", "without it: forked");
    json_decref(c);

    cr_expect_eq(metric("kgate_kernel_start_fallbacks_total{reason=\"failed\"}"), 1);
    log = read_log();
    cr_expect_not_null(strstr(log, "its environment sets PYTHONSTARTUP, which IPython runs only at a kernel's start"), "%s", log);
    free(log);
    xh_gateway_stop(&gw);
    ts_remove_tree(dir);
}

/* --kernel-template none: every kernel is spawned, as before templates. */
Test(template, kernel_template_none_spawns)
{
    const char *args[] = {"--pool", "none", "--kernel-template", "none", NULL};
    xh_gateway_start(&gw, args);
    json_t *c = create("{\"language\": \"python\"}");
    cr_expect_str_eq(xh_str(c, "start"), "spawned");
    json_decref(c);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"spawned\"}"), 1);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"forked\"}"), 0);
    cr_expect_eq(metric("kgate_kernel_starts_total{path=\"fallback\"}"), 0);
    cr_expect_eq(metric("kgate_kernel_templates_running"), 0);
    char *log = read_log();
    cr_expect_null(strstr(log, "kernel template"), "no template is started: %s", log);
    free(log);
    xh_gateway_stop(&gw);
}

/* /proc/<pid>/ksm_stat's "ksm_merge_any:" value ("yes" or "no") in `out`; 0 when this Linux does not say (before 6.4). */
static int ksm_merge_any(pid_t pid, char out[8])
{
    char path[64], line[128];
    FILE *fp;
    int found = 0;

    snprintf(path, sizeof(path), "/proc/%d/ksm_stat", (int)pid);
    if ((fp = fopen(path, "r")) == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), fp) != NULL)
        found = sscanf(line, "ksm_merge_any: %7s", out) == 1;
    fclose(fp);
    return found;
}

/* The pid of the kernel of context `id` (its own answer). */
static pid_t kernel_pid(const char *id)
{
    char *out = run_stdout(id, "import os; print(os.getpid())");
    pid_t pid = (pid_t)atoi(out);
    free(out);
    return pid;
}

/* --kernel-template-merge: the template and its kernels are marked for KSM (docs/kernels.md, docs/security.md), kgate's log
 * says when ksmd does not run, and a kernel computes as before; without the flag (the default) no kernel is marked. */
Test(template, kernels_are_mergeable_only_under_kernel_template_merge)
{
    const char *merge_args[] = {"--pool", "none", "--kernel-template-merge", NULL};
    const char *args[] = {"--pool", "none", NULL};
    char value[8] = "", run[8] = "";
    char *a, *b, *out, *log;
    FILE *fp;

    if (!ksm_merge_any(getpid(), value))
        cr_skip_test("%s", ts_skip_note(__func__, "this Linux has no ksm_merge_any in /proc/<pid>/ksm_stat (KSM, Linux 6.4)"));
    xh_gateway_start(&gw, merge_args);
    pid_t tpl = wait_template_ready(1);
    cr_assert(ksm_merge_any(tpl, value) && strcmp(value, "yes") == 0, "the template is mergeable: %s", value);
    a = forked_context(gw.tmpdir, "a", tpl);
    b = forked_context(gw.tmpdir, "b", tpl);
    cr_expect(ksm_merge_any(kernel_pid(a), value) && strcmp(value, "yes") == 0, "a forked kernel is mergeable: %s", value);
    free(run_stdout(a, "x = 6"));
    out = run_stdout(b, "print('x' in dir())");
    cr_expect_str_eq(out, "False\n", "merged pages share no state");
    free(out);
    out = run_stdout(a, "print(x * 7)");
    cr_expect_str_eq(out, "42\n");
    free(out);
    /* the operator is told when ksmd does not run: nothing is merged then */
    if ((fp = fopen("/sys/kernel/mm/ksm/run", "r")) != NULL) {
        cr_assert_eq(fscanf(fp, "%7s", run), 1);
        fclose(fp);
        log = read_log();
        cr_expect_eq(strstr(log, "kernels' pages are not merged: /sys/kernel/mm/ksm/run is") != NULL, strcmp(run, "1") != 0,
                     "the log says whether ksmd runs (run=%s): %s", run, log);
        free(log);
    }
    free(a);
    free(b);
    xh_gateway_stop(&gw);

    xh_gateway_start(&gw, args);
    tpl = wait_template_ready(1);
    a = forked_context(gw.tmpdir, "a", tpl);
    cr_expect(ksm_merge_any(tpl, value) && strcmp(value, "no") == 0, "by default the template is not mergeable: %s", value);
    cr_expect(ksm_merge_any(kernel_pid(a), value) && strcmp(value, "no") == 0, "nor its kernels: %s", value);
    free(a);
    xh_gateway_stop(&gw);
}

/* The kB of /proc/<pid>/smaps_rollup's `field` ("Private_Dirty:"). */
static long rollup_kb(pid_t pid, const char *field)
{
    char path[64], line[128];
    long kb = -1;
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
    cr_assert_not_null(fp = fopen(path, "r"), "%s", path);
    while (kb < 0 && fgets(line, sizeof(line), fp) != NULL)
        if (strncmp(line, field, strlen(field)) == 0)
            kb = atol(line + strlen(field));
    fclose(fp);
    cr_assert_geq(kb, 0, "no %s in %s", field, path);
    return kb;
}

/* The pages of its own (Private_Dirty, kB) an idle kernel holds after kgate's kernel_info and a caller's first cells, in a
 * context forked by a kgate started with `args`; the log's word on how the template forks is checked by the caller. */
static long forked_kernel_private_kb(const char *const *args)
{
    char *id, *out;
    long kb;

    xh_gateway_start(&gw, args);
    pid_t tpl = wait_template_ready(1);
    id = forked_context(gw.tmpdir, "m", tpl);
    free(run_stdout(id, "1+1"));
    out = run_stdout(id, "print('x')");
    free(out);
    pid_t pid = kernel_pid(id);
    usleep(500 * 1000); /* idle: its replies and status sent */
    kb = rollup_kb(pid, "Private_Dirty:");
    free(id);
    return kb;
}

/* A forked kernel is made from a kernel the template started and warmed once (docs/kernels.md, "A warm kernel forked"): it
 * copies ~10 MiB of the template's pages where one forked from the imports alone, running ipykernel's start and its first cells
 * itself, copies ~17.6 MiB (what makes ten idle contexts 17.4 against 25.5 MiB of PSS each). */
Test(template, a_kernel_forked_warm_holds_fewer_pages_of_its_own_than_one_forked_from_imports)
{
    const char *warm_args[] = {"--pool", "none", NULL};
    const char *imports_args[] = {"--pool", "none", "--kernel-template-imports-only", NULL};
    long warm_kb, imports_kb;
    char *log;

    warm_kb = forked_kernel_private_kb(warm_args);
    log = read_log();
    cr_expect_null(strstr(log, "kernels are forked from the imports alone"), "the template made its warm kernel: %s", log);
    free(log);
    xh_gateway_stop(&gw);

    imports_kb = forked_kernel_private_kb(imports_args);
    log = read_log();
    cr_expect_not_null(strstr(log, "kernels are forked from the imports alone, not from a warm kernel: kgate was asked so"),
                       "the template says how it forks: %s", log);
    free(log);
    xh_gateway_stop(&gw);

    cr_log_info("pages of its own (Private_Dirty) of an idle forked kernel: warm %ld kB, imports alone %ld kB", warm_kb,
                imports_kb);
    cr_expect_lt(warm_kb, 14 << 10, "a kernel forked warm holds %ld kB of its own", warm_kb);
    cr_expect_lt(warm_kb * 4, imports_kb * 3, "warm %ld kB against imports alone %ld kB", warm_kb, imports_kb);
}
