/* tests/kernelmgr/test_kernelspec.c: kernelspec loading and discovery with fake spec directories. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "kmgr/kernelspec.h"
#include "kmgr_test.h"

static char root[256];
static int n_warnings;

static void on_warn(const char *path, const char *why)
{
    (void)path;
    (void)why;
    ++n_warnings;
}

static void write_spec(const char *base, const char *name, const char *json)
{
    char path[512];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", base, name);
    mkdir(base, 0700);
    cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s", path);
    snprintf(path, sizeof(path), "%s/%s/kernel.json", base, name);
    cr_assert_not_null(fp = fopen(path, "w"));
    fputs(json, fp);
    fclose(fp);
}

static void setup(void)
{
    char a[300], b[300], extra[300], data[300], path[700];

    wire_global_init();
    snprintf(root, sizeof(root), "%s/kgate-spec-XXXXXX", getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(root));
    snprintf(a, sizeof(a), "%s/a", root);
    snprintf(b, sizeof(b), "%s/b", root);
    snprintf(extra, sizeof(extra), "%s/extra", root);
    snprintf(data, sizeof(data), "%s/data", root);
    mkdir(a, 0700);
    mkdir(b, 0700);
    mkdir(data, 0700);
    snprintf(path, sizeof(path), "%s/kernels", a);
    write_spec(path, "alpha", "{\"argv\":[\"alpha\",\"{connection_file}\"],\"language\":\"Alpha\",\"display_name\":\"Alpha\"}");
    write_spec(path, "dup", "{\"argv\":[\"dup-a\"],\"language\":\"dup\",\"display_name\":\"from A\"}");
    write_spec(path, "bad", "{not json");
    snprintf(path, sizeof(path), "%s/kernels", b);
    write_spec(path, "dup", "{\"argv\":[\"dup-b\"],\"language\":\"dup\",\"display_name\":\"from B\"}");
    write_spec(path, "noargv", "{\"argv\":[],\"language\":\"x\"}");
    write_spec(path, "nolang", "{\"argv\":[\"x\"]}");
    write_spec(path, "beta",
               "{\"argv\":[\"beta\"],\"language\":\"python\",\"interrupt_mode\":\"message\",\"env\":{\"A\":\"1\"},"
               "\"metadata\":{\"k\":true}}");
    /* Not a kernelspec at all (no kernel.json): ignored without a warning. */
    snprintf(path, sizeof(path), "%s/kernels/empty", b);
    mkdir(path, 0700);
    write_spec(extra, "dup", "{\"argv\":[\"dup-extra\"],\"language\":\"dup\",\"display_name\":\"from extra\"}");

    snprintf(path, sizeof(path), "%s:%s", a, b);
    setenv("JUPYTER_PATH", path, 1);
    setenv("JUPYTER_DATA_DIR", data, 1);
    n_warnings = 0;
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
}

TestSuite(kernelspec, .init = setup, .fini = teardown, .timeout = 30);

Test(kernelspec, discovery_first_dir_wins_and_skips_invalid)
{
    kmgr_kernelspecs_t specs;
    const kmgr_kernelspec_t *s;

    cr_assert_eq(kmgr_kernelspecs_discover(NULL, 0, &specs, on_warn), 0);
    /* bad (not JSON), noargv, nolang */
    cr_expect_eq(n_warnings, 3);
    for (size_t i = 1; i < specs.size; ++i)
        cr_expect_lt(strcmp(specs.entries[i - 1]->name, specs.entries[i]->name), 0, "sorted and unique");
    cr_assert_not_null(s = kmgr_kernelspecs_find(&specs, "dup"));
    cr_expect_str_eq(s->display_name, "from A");
    cr_expect_null(kmgr_kernelspecs_find(&specs, "bad"));
    cr_expect_null(kmgr_kernelspecs_find(&specs, "noargv"));
    cr_expect_null(kmgr_kernelspecs_find(&specs, "nolang"));
    cr_expect_null(kmgr_kernelspecs_find(&specs, "empty"));

    cr_assert_not_null(s = kmgr_kernelspecs_find(&specs, "alpha"));
    cr_expect_eq(s->argc, 2);
    cr_expect_str_eq(s->argv[1], "{connection_file}");
    cr_expect_null(s->argv[2]);
    cr_expect_eq(s->interrupt_mode, KMGR_INTERRUPT_SIGNAL);
    cr_expect_not(s->late_output, "a spec publishes late only when it says so (or runs Deno's kernel)");
    cr_expect_not(s->interrupt_may_hang, "only Deno's kernel's interrupts may hang");
    cr_expect_null(s->env);
    cr_expect_not_null(strstr(s->resource_dir, "/a/kernels/alpha"));

    cr_assert_not_null(s = kmgr_kernelspecs_find(&specs, "beta"));
    cr_expect_eq(s->interrupt_mode, KMGR_INTERRUPT_MESSAGE);
    cr_expect_str_eq(json_string_value(json_object_get(s->env, "A")), "1");
    cr_expect(json_is_true(json_object_get(s->metadata, "k")));
    cr_expect_str_eq(s->display_name, "beta");
    kmgr_kernelspecs_dispose(&specs);
}

Test(kernelspec, metadata_kgate_late_output_says_whether_the_kernel_publishes_after_idle)
{
    char extra[300];
    const char *dirs[1] = {extra};
    kmgr_kernelspecs_t specs;

    snprintf(extra, sizeof(extra), "%s/late", root);
    write_spec(extra, "late", "{\"argv\":[\"k\"],\"language\":\"x\",\"metadata\":{\"kgate\":{\"late_output\":true}}}");
    write_spec(extra, "deno-prompt",
               "{\"argv\":[\"deno\",\"jupyter\",\"--kernel\",\"--conn\",\"{connection_file}\"],\"language\":\"typescript\","
               "\"metadata\":{\"kgate\":{\"late_output\":false}}}");
    cr_assert_eq(kmgr_kernelspecs_discover(dirs, 1, &specs, NULL), 0);
    cr_expect(kmgr_kernelspecs_find(&specs, "late")->late_output);
    cr_expect_not(kmgr_kernelspecs_find(&specs, "deno-prompt")->late_output, "the spec's word wins over the Deno rule");
    kmgr_kernelspecs_dispose(&specs);
}

Test(kernelspec, extra_dirs_come_first)
{
    char extra[300];
    const char *dirs[1] = {extra};
    kmgr_kernelspecs_t specs;

    snprintf(extra, sizeof(extra), "%s/extra", root);
    cr_assert_eq(kmgr_kernelspecs_discover(dirs, 1, &specs, NULL), 0);
    cr_expect_str_eq(kmgr_kernelspecs_find(&specs, "dup")->display_name, "from extra");
    cr_expect_not_null(kmgr_kernelspecs_find(&specs, "alpha"));
    kmgr_kernelspecs_dispose(&specs);
}

Test(kernelspec, resolve_by_name_then_language)
{
    kmgr_kernelspecs_t specs;
    const kmgr_kernelspec_t *s;

    cr_assert_eq(kmgr_kernelspecs_discover(NULL, 0, &specs, NULL), 0);
    cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, "alpha"));
    cr_expect_str_eq(s->name, "alpha");
    /* By language, case-insensitively. */
    cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, "ALPHA"));
    cr_expect_str_eq(s->name, "alpha");
    /* The first spec by name whose language matches: beta sorts before the system's python3. */
    cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, "python"));
    cr_expect_str_eq(s->name, "beta");
    cr_expect_null(kmgr_kernelspecs_resolve(&specs, "cobol"));
    /* Aliases stand for a language: py is python (beta, as above); js names no installed language. */
    cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, "py"));
    cr_expect_str_eq(s->name, "beta");
    cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, "PY"));
    cr_expect_str_eq(s->name, "beta");
    cr_expect_null(kmgr_kernelspecs_resolve(&specs, "js"));
    kmgr_kernelspecs_dispose(&specs);
}

/* Deno's kernelspec exactly as `deno jupyter --install` writes it: named deno, language typescript. */
#define DENO_SPEC                                                                                                                  \
    "{\"argv\":[\"/opt/deno\",\"jupyter\",\"--kernel\",\"--conn\",\"{connection_file}\"],\"display_name\":\"Deno\","               \
    "\"language\":\"typescript\"}"

Test(kernelspec, javascript_and_typescript_resolve_to_deno)
{
    static const char *const names[] = {"deno", "typescript", "TypeScript", "ts", "javascript", "JavaScript", "js"};
    char extra[300];
    const char *dirs[1] = {extra};
    kmgr_kernelspecs_t specs;
    const kmgr_kernelspec_t *s;

    snprintf(extra, sizeof(extra), "%s/deno-only", root);
    write_spec(extra, "deno", DENO_SPEC);
    cr_assert_eq(kmgr_kernelspecs_discover(dirs, 1, &specs, NULL), 0);
    for (size_t i = 0; i != sizeof(names) / sizeof(names[0]); ++i) {
        cr_assert_not_null(s = kmgr_kernelspecs_resolve(&specs, names[i]), "%s resolves to nothing", names[i]);
        cr_expect_str_eq(s->name, "deno", "%s resolves to %s, not deno", names[i], s->name);
    }
    /* Deno's kernel exits on SIGINT: without an interrupt_mode in its spec it is interrupted by message. */
    cr_expect_eq(kmgr_kernelspecs_find(&specs, "deno")->interrupt_mode, KMGR_INTERRUPT_MESSAGE);
    /* It publishes output after idle, which its spec cannot say: known, so its first run collects it too. */
    cr_expect(kmgr_kernelspecs_find(&specs, "deno")->late_output);
    /* Its interrupt of a cell that awaits never ends the cell: a run's stop restarts it past the grace (docs/kernels.md). */
    cr_expect(kmgr_kernelspecs_find(&specs, "deno")->interrupt_may_hang);
    kmgr_kernelspecs_dispose(&specs);

    /* A kernel that says it is JavaScript's is JavaScript's; Deno stays TypeScript's. */
    snprintf(extra, sizeof(extra), "%s/deno-and-js", root);
    write_spec(extra, "deno", DENO_SPEC);
    write_spec(extra, "ijs", "{\"argv\":[\"ijs\"],\"language\":\"javascript\"}");
    cr_assert_eq(kmgr_kernelspecs_discover(dirs, 1, &specs, NULL), 0);
    cr_expect_str_eq(kmgr_kernelspecs_resolve(&specs, "javascript")->name, "ijs");
    cr_expect_str_eq(kmgr_kernelspecs_resolve(&specs, "js")->name, "ijs");
    cr_expect_str_eq(kmgr_kernelspecs_resolve(&specs, "ts")->name, "deno");
    /* Only Deno's kernel: another program with a spec without interrupt_mode is signalled, as Jupyter does. */
    cr_expect_eq(kmgr_kernelspecs_find(&specs, "ijs")->interrupt_mode, KMGR_INTERRUPT_SIGNAL);
    kmgr_kernelspecs_dispose(&specs);
}

Test(kernelspec, load_errors)
{
    char dir[400];
    kmgr_kernelspec_t *spec = NULL;

    snprintf(dir, sizeof(dir), "%s/a/kernels/bad", root);
    cr_expect_eq(kmgr_kernelspec_load("bad", dir, &spec), KSYS_EBADSPEC);
    snprintf(dir, sizeof(dir), "%s/nowhere", root);
    cr_expect_eq(kmgr_kernelspec_load("nowhere", dir, &spec), KSYS_EIO);
    cr_expect_null(spec);
    snprintf(dir, sizeof(dir), "%s/a/kernels/alpha", root);
    cr_assert_eq(kmgr_kernelspec_load("alpha", dir, &spec), 0);
    cr_expect_str_eq(spec->language, "Alpha");
    kmgr_kernelspec_destroy(spec);
    kmgr_kernelspec_destroy(NULL);
}

/* A spec of `argv` (NULL-terminated) and `metadata` (JSON text, or NULL), for kmgr_kernelspec_transport. */
static kmgr_kernelspec_t *spec_of(const char *const *argv, const char *metadata)
{
    kmgr_kernelspec_t *spec = wire_calloc(1, sizeof(*spec));

    while (argv[spec->argc] != NULL)
        ++spec->argc;
    spec->argv = wire_calloc(spec->argc + 1, sizeof(char *));
    for (size_t i = 0; i != spec->argc; ++i)
        spec->argv[i] = wire_strdup(argv[i]);
    spec->metadata = metadata != NULL ? json_loads(metadata, 0, NULL) : NULL;
    return spec;
}

Test(kernelspec, transport_is_tcp_unless_known_or_said)
{
    static const char *const ipykernel[] = {"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}", NULL};
    static const char *const irkernel[] = {"R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}", NULL};
    static const char *const deno[] = {"/usr/local/bin/deno", "jupyter", "--kernel", "--conn", "{connection_file}", NULL};
    kmgr_kernelspec_t *py = spec_of(ipykernel, NULL), *r = spec_of(irkernel, NULL), *d = spec_of(deno, NULL);
    kmgr_kernelspec_t *py_tcp = spec_of(ipykernel, "{\"kgate\": {\"transport\": \"tcp\"}}");
    kmgr_kernelspec_t *d_ipc = spec_of(deno, "{\"kgate\": {\"transport\": \"ipc\"}}");
    kmgr_kernelspec_t *odd = spec_of(deno, "{\"kgate\": {\"transport\": 7}}");

    cr_expect_eq(kmgr_kernelspec_transport(py, 0), KMGR_TRANSPORT_IPC, "ipykernel: ipc, known to work");
    cr_expect_eq(kmgr_kernelspec_transport(r, 0), KMGR_TRANSPORT_TCP, "IRkernel: what jupyter_client writes");
    cr_expect_eq(kmgr_kernelspec_transport(d, 0), KMGR_TRANSPORT_TCP, "Deno binds TCP only");
    cr_expect_eq(kmgr_kernelspec_transport(py_tcp, 0), KMGR_TRANSPORT_TCP, "the spec's word wins");
    cr_expect_eq(kmgr_kernelspec_transport(d_ipc, 0), KMGR_TRANSPORT_IPC, "the spec's word wins");
    cr_expect_eq(kmgr_kernelspec_transport(odd, 0), KMGR_TRANSPORT_TCP, "a metadata value that is no transport is ignored");
    /* a sandbox of its own network: its loopback is not kgate's */
    cr_expect_eq(kmgr_kernelspec_transport(d, 1), KMGR_TRANSPORT_IPC);
    cr_expect_eq(kmgr_kernelspec_transport(py_tcp, 1), KMGR_TRANSPORT_IPC);
    kmgr_kernelspec_destroy(py);
    kmgr_kernelspec_destroy(r);
    kmgr_kernelspec_destroy(d);
    kmgr_kernelspec_destroy(py_tcp);
    kmgr_kernelspec_destroy(d_ipc);
    kmgr_kernelspec_destroy(odd);
}
