/* tests/lint/test_layering.c: dependencies point one way (gateway -> kernelmgr -> sys -> wire, gateway's core -> sys
 * only, and inside the gateway app -> front doors -> engine -> core), and tests/support needs no Criterion and no kgate module, in
 * #includes and in the link graph. Over 600 lines on purpose: the include scanner, the link-graph reader and the rules are one
 * checker. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strcasestr, open_memstream */
#endif
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>

#ifndef KGATE_LINK_GRAPH
#error "KGATE_LINK_GRAPH must name the file tests/lint/CMakeLists.txt writes"
#endif

/* A header ending in '/' or '*' forbids every header with that prefix. */
typedef struct st_include_rule_t {
    const char *where; /* the files the rule applies to: a prefix of their path from the source root */
    const char *header;
    const char *why;
} include_rule_t;

#define WIRE_NO_SOCKET "wire touches no socket and no process"
#define NOT_UPWARD "dependencies point one way: gateway -> kernelmgr -> wire"
#define ONLY_GW_HTTP "only gateway knows HTTP and h2o"
#define SYS_BELOW_ALL "sys is process infrastructure below kernelmgr and the gateway: it includes no kgate module but wire"
#define CORE_NO_KERNELS                                                                                                            \
    "gateway/core is HTTP plumbing: it reaches the system (clock, threads, error strings) through sys, never kernelmgr"
#define NATIVE_ZMTP                                                                                                                \
    "kgate speaks ZMTP to kernels itself (kernelmgr/src/zsock.c): libzmq's I/O thread cost two thread wake-ups per message; only " \
    "kernels, fakes and the bench's direct client link libzmq"
#define CORE_KNOWS_NO_STATE "gateway/core is HTTP plumbing: it knows no engine feature, front door or the app"
#define ENGINE_NO_DOORS "the engine knows no front door and no app (only app/ composes features)"
#define NO_SIBLING "an engine feature uses another only through its public header, and only one layer down"
#define DOORS_THROUGH_ENGINE "a front door reaches kernels through the engine, never another door or the app"
#define PRIVATE_HEADER "a folder's internal.h is its own"
#define PROXY_NO_ENGINE "the proxy door relays bytes to local services: it uses the core, never the engine or kernels"
#define CHANNELS_LEAF "kernelmgr's channels are a leaf transport: they know no kernel, request, process or manager"
#define TS_NO_CRITERION "the benchmark links tests/support in builds without the tests: no Criterion there"
#define TS_OUTSIDE "tests/support drives kgate from outside: over HTTP and by PID, knowing none of its modules"

static const include_rule_t include_rules[] = {
    {"wire/", "zmq*", WIRE_NO_SOCKET},
    {"wire/", "sys/socket.h", WIRE_NO_SOCKET},
    {"wire/", "sys/un.h", WIRE_NO_SOCKET},
    {"wire/", "netinet/", WIRE_NO_SOCKET},
    {"wire/", "arpa/", WIRE_NO_SOCKET},
    {"wire/", "netdb.h", WIRE_NO_SOCKET},
    {"wire/", "spawn.h", WIRE_NO_SOCKET},
    {"wire/", "sys/wait.h", WIRE_NO_SOCKET},
    {"wire/", "h2o.h", ONLY_GW_HTTP},
    {"wire/", "h2o/", ONLY_GW_HTTP},
    {"wire/", "kmgr/", NOT_UPWARD},
    {"wire/", "ksys/", NOT_UPWARD},
    {"sys/", "kmgr/", SYS_BELOW_ALL},
    {"sys/", "gateway/", SYS_BELOW_ALL},
    {"sys/", "core/", SYS_BELOW_ALL},
    {"sys/", "runs/", SYS_BELOW_ALL},
    {"sys/", "code/", SYS_BELOW_ALL},
    {"sys/", "procs/", SYS_BELOW_ALL},
    {"sys/", "files/", SYS_BELOW_ALL},
    {"sys/", "metrics/", SYS_BELOW_ALL},
    {"sys/", "execd/", SYS_BELOW_ALL},
    {"sys/", "proxy/", SYS_BELOW_ALL},
    {"sys/", "jupyter/", SYS_BELOW_ALL},
    {"sys/", "mcp/", SYS_BELOW_ALL},
    {"sys/", "app/", SYS_BELOW_ALL},
    {"sys/", "h2o.h", ONLY_GW_HTTP},
    {"sys/", "h2o/", ONLY_GW_HTTP},
    {"sys/", "zmq*", SYS_BELOW_ALL},
    {"wire/", "gateway/", NOT_UPWARD},
    {"kernelmgr/", "h2o.h", ONLY_GW_HTTP},
    {"kernelmgr/", "h2o/", ONLY_GW_HTTP},
    {"kernelmgr/", "picohttpparser.h", ONLY_GW_HTTP},
    {"kernelmgr/", "gateway/", NOT_UPWARD},
    /* channels.c and channels.h: the state machine consumes what they report, never the reverse */
    {"kernelmgr/src/channels.", "kernel_private.h", CHANNELS_LEAF},
    {"kernelmgr/src/channels.", "manager_private.h", CHANNELS_LEAF},
    {"kernelmgr/src/channels.", "process.h", CHANNELS_LEAF},
    {"kernelmgr/src/channels.", "kmgr/kernel.h", CHANNELS_LEAF},
    {"kernelmgr/src/channels.", "kmgr/manager.h", CHANNELS_LEAF},
    /* inside the gateway: core <- engine (runs <- code, procs; files; metrics) <- front doors <- app */
    {"gateway/core/", "kmgr/", CORE_NO_KERNELS},
    {"gateway/core/", "runs/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "code/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "procs/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "files/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "metrics/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "execd/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "app/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "proxy/", CORE_KNOWS_NO_STATE},
    {"gateway/core/", "jupyter/", CORE_KNOWS_NO_STATE},
    {"gateway/runs/", "code/", NO_SIBLING},
    {"gateway/runs/", "procs/", NO_SIBLING},
    {"gateway/runs/", "files/", NO_SIBLING},
    {"gateway/runs/", "metrics/", NO_SIBLING},
    {"gateway/runs/", "execd/", ENGINE_NO_DOORS},
    {"gateway/runs/", "app/", ENGINE_NO_DOORS},
    {"gateway/runs/", "proxy/", ENGINE_NO_DOORS},
    {"gateway/runs/", "jupyter/", ENGINE_NO_DOORS},
    {"gateway/code/", "procs/", NO_SIBLING},
    {"gateway/code/", "files/", NO_SIBLING},
    {"gateway/code/", "metrics/", NO_SIBLING},
    {"gateway/code/", "execd/", ENGINE_NO_DOORS},
    {"gateway/code/", "app/", ENGINE_NO_DOORS},
    {"gateway/code/", "proxy/", ENGINE_NO_DOORS},
    {"gateway/code/", "jupyter/", ENGINE_NO_DOORS},
    {"gateway/procs/", "code/", NO_SIBLING},
    {"gateway/procs/", "files/", NO_SIBLING},
    {"gateway/procs/", "metrics/", NO_SIBLING},
    {"gateway/procs/", "execd/", ENGINE_NO_DOORS},
    {"gateway/procs/", "app/", ENGINE_NO_DOORS},
    {"gateway/procs/", "proxy/", ENGINE_NO_DOORS},
    {"gateway/procs/", "jupyter/", ENGINE_NO_DOORS},
    {"gateway/files/", "runs/", NO_SIBLING},
    {"gateway/files/", "code/", NO_SIBLING},
    {"gateway/files/", "procs/", NO_SIBLING},
    {"gateway/files/", "metrics/", NO_SIBLING},
    {"gateway/files/", "execd/", ENGINE_NO_DOORS},
    {"gateway/files/", "app/", ENGINE_NO_DOORS},
    {"gateway/files/", "proxy/", ENGINE_NO_DOORS},
    {"gateway/files/", "jupyter/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "runs/", NO_SIBLING},
    {"gateway/metrics/", "code/", NO_SIBLING},
    {"gateway/metrics/", "procs/", NO_SIBLING},
    {"gateway/metrics/", "files/", NO_SIBLING},
    {"gateway/metrics/", "execd/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "app/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "proxy/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "jupyter/", ENGINE_NO_DOORS},
    {"gateway/execd/", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/execd/", "kmgr/kernel.h", DOORS_THROUGH_ENGINE},
    {"gateway/execd/", "kmgr/manager.h", DOORS_THROUGH_ENGINE},
    {"gateway/execd/", "zmq*", DOORS_THROUGH_ENGINE},
    /* tests/support: its own tests (test/) are Criterion tests like any other */
    {"tests/support/src/", "criterion/", TS_NO_CRITERION},
    {"tests/support/include/", "criterion/", TS_NO_CRITERION},
    {"tests/support/", "wire/", TS_OUTSIDE},
    {"tests/support/", "kmgr/", TS_OUTSIDE},
    {"tests/support/", "ksys/", TS_OUTSIDE},
    {"tests/support/", "gateway/", TS_OUTSIDE},
    {"tests/support/", "h2o.h", TS_OUTSIDE},
    {"tests/support/", "h2o/", TS_OUTSIDE},
    {"tests/support/", "zmq*", TS_OUTSIDE},
    {"gateway/execd/", "proxy/", DOORS_THROUGH_ENGINE},
    /* the proxy door relays bytes: it needs no engine feature, so it includes none */
    {"gateway/proxy/", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/proxy/", "execd/", DOORS_THROUGH_ENGINE},
    {"gateway/proxy/", "kmgr/", PROXY_NO_ENGINE},
    {"gateway/proxy/", "zmq*", PROXY_NO_ENGINE},
    {"gateway/proxy/", "runs/", PROXY_NO_ENGINE},
    {"gateway/proxy/", "code/", PROXY_NO_ENGINE},
    {"gateway/proxy/", "procs/", PROXY_NO_ENGINE},
    {"gateway/proxy/", "files/", PROXY_NO_ENGINE},
    {"gateway/proxy/", "metrics/", PROXY_NO_ENGINE},
    /* the Jupyter door (Jupyter Server's kernels API) is a front door like execd: the core and the engine, no other door */
    {"gateway/execd/", "jupyter/", DOORS_THROUGH_ENGINE},
    {"gateway/proxy/", "jupyter/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "execd/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "proxy/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "kmgr/kernel.h", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "kmgr/manager.h", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "zmq*", DOORS_THROUGH_ENGINE},
    /* the MCP door likewise */
    {"gateway/core/", "mcp/", CORE_KNOWS_NO_STATE},
    {"gateway/runs/", "mcp/", ENGINE_NO_DOORS},
    {"gateway/code/", "mcp/", ENGINE_NO_DOORS},
    {"gateway/procs/", "mcp/", ENGINE_NO_DOORS},
    {"gateway/files/", "mcp/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "mcp/", ENGINE_NO_DOORS},
    {"gateway/execd/", "mcp/", DOORS_THROUGH_ENGINE},
    {"gateway/proxy/", "mcp/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "mcp/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "execd/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "proxy/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "jupyter/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "kmgr/kernel.h", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "kmgr/manager.h", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "zmq*", DOORS_THROUGH_ENGINE},
    /* the E2B door likewise */
    {"gateway/core/", "e2b/", CORE_KNOWS_NO_STATE},
    {"gateway/runs/", "e2b/", ENGINE_NO_DOORS},
    {"gateway/code/", "e2b/", ENGINE_NO_DOORS},
    {"gateway/procs/", "e2b/", ENGINE_NO_DOORS},
    {"gateway/files/", "e2b/", ENGINE_NO_DOORS},
    {"gateway/metrics/", "e2b/", ENGINE_NO_DOORS},
    {"gateway/execd/", "e2b/", DOORS_THROUGH_ENGINE},
    {"gateway/proxy/", "e2b/", DOORS_THROUGH_ENGINE},
    {"gateway/jupyter/", "e2b/", DOORS_THROUGH_ENGINE},
    {"gateway/mcp/", "e2b/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "execd/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "proxy/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "jupyter/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "mcp/", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "kmgr/kernel.h", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "kmgr/manager.h", DOORS_THROUGH_ENGINE},
    {"gateway/e2b/", "zmq*", DOORS_THROUGH_ENGINE},
    {"sys/", "e2b/", SYS_BELOW_ALL},
};

/* The engine's headers are its contract to every front door: they name no HTTP request or response. */
static const char *const engine_folders[] = {"gateway/runs/", "gateway/code/", "gateway/procs/", "gateway/files/",
                                             "gateway/metrics/"};
static const char *const engine_header_tokens[] = {"h2o_req_t", "h2o_generator_t"};
#define ENGINE_NO_HTTP "an engine header names no HTTP request type"

/* True for a header of an engine folder (`rel`: its path from the source root). */
static int is_engine_header(const char *rel)
{
    size_t n = strlen(rel);
    if (n < 2 || strcmp(rel + n - 2, ".h") != 0)
        return 0;
    for (size_t i = 0; i != sizeof(engine_folders) / sizeof(engine_folders[0]); ++i)
        if (strncmp(rel, engine_folders[i], strlen(engine_folders[i])) == 0)
            return 1;
    return 0;
}

/* True when `header` is another folder's private header ("runs/internal.h" included from gateway/code/x.c). */
static int is_foreign_internal(const char *rel, const char *header)
{
    const char *slash = strchr(header, '/'), *file_slash = strrchr(rel, '/'), *folder;
    size_t n = slash != NULL ? (size_t)(slash - header) : 0;

    if (slash == NULL || strcmp(slash, "/internal.h") != 0 || file_slash == NULL)
        return 0;
    for (folder = file_slash; folder > rel && folder[-1] != '/'; --folder)
        ;
    return !((size_t)(file_slash - folder) == n && strncmp(folder, header, n) == 0);
}

static int header_matches(const char *rule, const char *header)
{
    size_t n = strlen(rule);
    if (n > 0 && rule[n - 1] == '*')
        return strncmp(header, rule, n - 1) == 0;
    if (n > 0 && rule[n - 1] == '/')
        return strncmp(header, rule, n) == 0;
    return strcmp(header, rule) == 0;
}

/* Extracts the header of an `#include <x>` / `# include "x"` line into `out`; 0 if not one. */
static int parse_include(const char *line, char *out, size_t outsz)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        ++p;
    if (*p++ != '#')
        return 0;
    while (*p == ' ' || *p == '\t')
        ++p;
    if (strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (*p == ' ' || *p == '\t')
        ++p;
    char close;
    if (*p == '<')
        close = '>';
    else if (*p == '"')
        close = '"';
    else
        return 0;
    const char *start = ++p, *end = strchr(start, close);
    if (end == NULL || (size_t)(end - start) >= outsz)
        return 0;
    memcpy(out, start, end - start);
    out[end - start] = '\0';
    return 1;
}

typedef struct st_scan_t {
    const char *root; /* source root; rules and reports name files relative to it */
    FILE *report;
    size_t files;
    size_t violations;
} scan_t;

static int is_c_source(const char *name)
{
    size_t n = strlen(name);
    return n > 2 && name[n - 2] == '.' && (name[n - 1] == 'c' || name[n - 1] == 'h');
}

static void scan_file(scan_t *scan, const char *path)
{
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "cannot open %s: %s", path, strerror(errno));
    ++scan->files;
    const char *rel = path + strlen(scan->root) + 1;
    char *line = NULL, header[256];
    size_t cap = 0;
    unsigned lineno = 0;
    int engine_header = is_engine_header(rel);
    while (getline(&line, &cap, fp) != -1) {
        ++lineno;
        for (size_t i = 0; engine_header && i != sizeof(engine_header_tokens) / sizeof(engine_header_tokens[0]); ++i) {
            if (strstr(line, engine_header_tokens[i]) != NULL) {
                fprintf(scan->report, "  %s:%u: names %s: %s\n", rel, lineno, engine_header_tokens[i], ENGINE_NO_HTTP);
                ++scan->violations;
            }
        }
        if (!parse_include(line, header, sizeof(header)))
            continue;
        if (is_foreign_internal(rel, header)) {
            fprintf(scan->report, "  %s:%u: includes <%s>: %s\n", rel, lineno, header, PRIVATE_HEADER);
            ++scan->violations;
        }
        for (size_t i = 0; i != sizeof(include_rules) / sizeof(include_rules[0]); ++i) {
            const include_rule_t *rule = include_rules + i;
            if (strncmp(rel, rule->where, strlen(rule->where)) == 0 && header_matches(rule->header, header)) {
                fprintf(scan->report, "  %s:%u: includes <%s>: %s\n", rel, lineno, header, rule->why);
                ++scan->violations;
            }
        }
    }
    free(line);
    fclose(fp);
}

static void scan_dir(scan_t *scan, const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return; /* a module without this directory has nothing to check; the file count tells */
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        char path[4096];
        cr_assert_lt((size_t)snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name), sizeof(path));
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            scan_dir(scan, path);
        else if (S_ISREG(st.st_mode) && is_c_source(ent->d_name))
            scan_file(scan, path);
    }
    closedir(d);
}

/* Scans `root`/`module` against the include rules; the report is malloc'ed (caller frees). */
static scan_t scan_module(const char *root, const char *module, char **report)
{
    size_t report_len;
    scan_t scan = {root, open_memstream(report, &report_len), 0, 0};
    cr_assert_not_null(scan.report);
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/%s", root, module);
    scan_dir(&scan, dir);
    fclose(scan.report);
    scan.report = NULL;
    return scan;
}

static void check_module(const char *module)
{
    char *report = NULL;
    scan_t scan = scan_module(KGATE_SOURCE_DIR, module, &report);
    cr_assert_gt(scan.files, 0, "no C files found under %s/%s: is KGATE_SOURCE_DIR right?", KGATE_SOURCE_DIR, module);
    cr_expect_eq(scan.violations, 0, "%zu forbidden include(s) in %s/:\n%s", scan.violations, module, report);
    free(report);
}

Test(layering, wire_includes_nothing_above_it)
{
    check_module("wire");
}

Test(layering, sys_includes_no_kgate_module_but_wire)
{
    check_module("sys");
}

Test(layering, kernelmgr_includes_no_http_and_no_gateway)
{
    check_module("kernelmgr");
}

Test(layering, gateway_layers_point_down)
{
    check_module("gateway");
}

Test(layering, test_support_includes_no_criterion_and_no_kgate_module)
{
    check_module("tests/support");
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
    fputs(text, fp);
    fclose(fp);
}

typedef struct st_planted_file_t {
    const char *path, *text; /* path from the planted root */
} planted_file_t;

/* Creates a root from the mkdtemp template `root` holding `files`, with every directory on their paths. */
static void plant(char *root, const planted_file_t *files, size_t n)
{
    char path[256];
    cr_assert_not_null(mkdtemp(root));
    for (size_t i = 0; i != n; ++i) {
        snprintf(path, sizeof(path), "%s/%s", root, files[i].path);
        for (char *slash = path + strlen(root) + 1; (slash = strchr(slash, '/')) != NULL; ++slash) {
            *slash = '\0';
            cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "%s: %s", path, strerror(errno));
            *slash = '/';
        }
        write_file(path, files[i].text);
    }
}

/* Removes what plant made. */
static void unplant(const char *root, const planted_file_t *files, size_t n)
{
    char path[256], *slash;
    for (size_t i = 0; i != n; ++i) {
        snprintf(path, sizeof(path), "%s/%s", root, files[i].path);
        unlink(path);
        /* a directory still holding another planted file stays until that file goes */
        while ((slash = strrchr(path, '/')) != NULL && slash > path + strlen(root)) {
            *slash = '\0';
            rmdir(path);
        }
    }
    rmdir(root);
}

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Scans `root`/`module` expecting `nfiles` files, exactly the violations `expected` (a substring of each report line),
 * and none in a file whose name contains `clean` (unless NULL). */
static void scan_expect(const char *root, const char *module, size_t nfiles, const char *const *expected, size_t nexpected,
                        const char *clean)
{
    char *report = NULL;
    scan_t scan = scan_module(root, module, &report);
    cr_expect_eq(scan.files, nfiles);
    cr_expect_eq(scan.violations, nexpected, "report:\n%s", report);
    for (size_t i = 0; i != nexpected; ++i)
        cr_expect_not_null(strstr(report, expected[i]), "no \"%s\" in the report:\n%s", expected[i], report);
    if (clean != NULL)
        cr_expect_null(strstr(report, clean), "report:\n%s", report);
    free(report);
}

/* The check above passing proves nothing unless the scanner can fail: feed it a planted tree. */
Test(layering, scanner_reports_file_and_line)
{
    static const planted_file_t files[] = {
        {"wire/src/bad.c", "/* bad */\n#include <stdio.h>\n#include <zmq.h>\n// #include <h2o.h>\n  #  include \"kmgr/manager.h\"\n"
                           "#include <sys/socket.h>\n"},
        {"wire/src/good.h", "#include \"wire/alloc.h\"\n#include <sodium.h>\n#include <sys/stat.h>\n"},
    };
    static const char *const expected[] = {
        "wire/src/bad.c:3: includes <zmq.h>",
        "wire/src/bad.c:5: includes <kmgr/manager.h>",
        "wire/src/bad.c:6: includes <sys/socket.h>",
    };
    char root[] = "/tmp/kgate-lint-XXXXXX";
    plant(root, files, NELEMS(files));
    scan_expect(root, "wire", 2, expected, NELEMS(expected), "good.h");
    /* the same tree is clean for kernelmgr's rules, which do not forbid zmq */
    scan_expect(root, "kernelmgr", 0, NULL, 0, NULL);
    unplant(root, files, NELEMS(files));
}

/* The rules on kernelmgr's channels must be able to fail too: a planted tree where they reach up. */
Test(layering, channels_include_nothing_above_them)
{
    static const planted_file_t files[] = {
        {"kernelmgr/src/channels.c",
         "#include <zmq.h>\n#include \"ksys/errors.h\"\n#include \"channels.h\"\n#include \"kernel_private.h\"\n"},
        {"kernelmgr/src/channels.h", "#include \"kmgr/loop.h\"\n#include \"process.h\"\n"},
        /* the same includes are fine anywhere else */
        {"kernelmgr/src/kernel.c", "#include \"kernel_private.h\"\n#include \"process.h\"\n#include \"channels.h\"\n"},
    };
    static const char *const expected[] = {
        "kernelmgr/src/channels.c:4: includes <kernel_private.h>",
        "kernelmgr/src/channels.h:2: includes <process.h>",
    };
    char root[] = "/tmp/kgate-lint-XXXXXX";
    plant(root, files, NELEMS(files));
    scan_expect(root, "kernelmgr", 3, expected, NELEMS(expected), "kernel.c");
    unplant(root, files, NELEMS(files));
}

/* The gateway's rules fail on a planted tree too: upward, sideways, private and HTTP-typed includes. */
Test(layering, gateway_rules_report_planted_violations)
{
    static const planted_file_t files[] = {
        {"gateway/runs/bad.c", "#include \"runs/internal.h\"\n#include \"execd/execd.h\"\n#include \"code/context.h\"\n"},
        {"gateway/code/bad.h", "#include \"runs/run.h\"\n#include \"runs/internal.h\"\nvoid f(h2o_req_t *req);\n"},
        /* an engine .c file may use h2o; its own internal.h is its own */
        {"gateway/code/fine.c", "#include \"code/internal.h\"\nstatic void g(h2o_req_t *req);\n"},
        {"gateway/execd/bad.c", "#include \"runs/run.h\"\n#include \"app/server.h\"\n#include \"kmgr/kernel.h\"\n"},
        {"gateway/core/bad.c", "#include \"core/http.h\"\n#include \"runs/run.h\"\n#include \"ksys/util.h\"\n"
                               "#include \"kmgr/errors.h\"\n"},
        {"gateway/proxy/bad.c", "#include \"core/ws.h\"\n#include \"runs/run.h\"\n#include \"execd/execd.h\"\n"},
        {"gateway/jupyter/bad.c", "#include \"code/context.h\"\n#include \"execd/execd.h\"\n#include \"kmgr/kernel.h\"\n"
                                  "#include \"app/server.h\"\n"},
        {"gateway/metrics/bad.c", "#include \"jupyter/framing.h\"\n"},
    };
    static const char *const expected[] = {
        "gateway/runs/bad.c:2: includes <execd/execd.h>",    "gateway/runs/bad.c:3: includes <code/context.h>",
        "gateway/code/bad.h:2: includes <runs/internal.h>",  "gateway/code/bad.h:3: names h2o_req_t",
        "gateway/execd/bad.c:2: includes <app/server.h>",    "gateway/execd/bad.c:3: includes <kmgr/kernel.h>",
        "gateway/core/bad.c:2: includes <runs/run.h>",       "gateway/core/bad.c:4: includes <kmgr/errors.h>",
        "gateway/proxy/bad.c:2: includes <runs/run.h>",      "gateway/proxy/bad.c:3: includes <execd/execd.h>",
        "gateway/jupyter/bad.c:2: includes <execd/execd.h>", "gateway/jupyter/bad.c:3: includes <kmgr/kernel.h>",
        "gateway/jupyter/bad.c:4: includes <app/server.h>",  "gateway/metrics/bad.c:1: includes <jupyter/framing.h>",
    };
    char root[] = "/tmp/kgate-lint-XXXXXX";
    plant(root, files, NELEMS(files));
    scan_expect(root, "gateway", 8, expected, NELEMS(expected), "fine.c");
    unplant(root, files, NELEMS(files));
}

/* sys is below everything of kgate's but wire: a planted tree where it reaches up into kernelmgr or the gateway. */
Test(layering, sys_rules_report_planted_violations)
{
    static const planted_file_t files[] = {
        {"sys/src/bad.c", "#include \"wire/alloc.h\"\n#include \"ksys/spawn.h\"\n#include \"kmgr/kernel.h\"\n"
                          "#include \"core/host.h\"\n#include <h2o.h>\n"},
        {"sys/include/ksys/fine.h", "#include <sys/types.h>\n#include \"wire/ids.h\"\n"},
    };
    static const char *const expected[] = {
        "sys/src/bad.c:3: includes <kmgr/kernel.h>",
        "sys/src/bad.c:4: includes <core/host.h>",
        "sys/src/bad.c:5: includes <h2o.h>",
    };
    char root[] = "/tmp/kgate-lint-XXXXXX";
    plant(root, files, NELEMS(files));
    scan_expect(root, "sys", 2, expected, NELEMS(expected), "fine.h");
    unplant(root, files, NELEMS(files));
}

/* The library under tests/support may not include Criterion, its tests may; neither may include a kgate module. */
Test(layering, test_support_rules_report_planted_violations)
{
    static const planted_file_t files[] = {
        {"tests/support/src/bad.c", "#include <jansson.h>\n#include <criterion/criterion.h>\n#include \"wire/codec.h\"\n"},
        {"tests/support/include/support/bad.h", "#include <criterion/hooks.h>\n"},
        {"tests/support/test/test_fine.c", "#include <criterion/criterion.h>\n#include \"support/sse.h\"\n"},
        {"tests/support/test/test_bad.c", "#include \"kmgr/kernel.h\"\n"},
    };
    static const char *const expected[] = {
        "tests/support/src/bad.c:2: includes <criterion/criterion.h>",
        "tests/support/src/bad.c:3: includes <wire/codec.h>",
        "tests/support/include/support/bad.h:1: includes <criterion/hooks.h>",
        "tests/support/test/test_bad.c:1: includes <kmgr/kernel.h>",
    };
    char root[] = "/tmp/kgate-lint-XXXXXX";
    plant(root, files, NELEMS(files));
    scan_expect(root, "tests/support", 4, expected, NELEMS(expected), "test_fine.c");
    unplant(root, files, NELEMS(files));
}

/* The link graph: tests/lint/CMakeLists.txt writes one line per module library, "<target>\t<a;b;...>",
 * listing everything it links directly or transitively (targets and the libraries behind them). */
typedef struct st_link_rule_t {
    const char *target;
    const char *forbidden; /* case-insensitive substring of a linked item */
    const char *why;
} link_rule_t;

static const link_rule_t link_rules[] = {
    {"kgate_wire", "zmq", WIRE_NO_SOCKET},
    {"kgate_wire", "h2o", ONLY_GW_HTTP},
    {"kgate_wire", "kgate_kmgr", NOT_UPWARD},
    {"kgate_wire", "kgate_sys", NOT_UPWARD},
    {"kgate_sys", "kgate_kmgr", SYS_BELOW_ALL},
    {"kgate_sys", "kgate_gw", SYS_BELOW_ALL},
    {"kgate_sys", "h2o", ONLY_GW_HTTP},
    {"kgate_sys", "zmq", SYS_BELOW_ALL},
    {"kgate_gw_core", "kgate_kmgr", CORE_NO_KERNELS},
    {"kgate_gw_proxy", "kgate_kmgr", PROXY_NO_ENGINE},
    {"kgate_wire", "kgate_gw", NOT_UPWARD},
    {"kgate_kmgr", "h2o", ONLY_GW_HTTP},
    {"kgate_kmgr", "zmq", NATIVE_ZMTP},
    {"kgate_gw_core", "zmq", NATIVE_ZMTP},
    {"kgate_gw_app", "zmq", NATIVE_ZMTP},
    {"kgate_kmgr", "kgate_gw", NOT_UPWARD},
    {"kgate_gw_core", "kgate_gw_", CORE_KNOWS_NO_STATE},
    {"kgate_gw_runs", "kgate_gw_code", NO_SIBLING},
    {"kgate_gw_runs", "kgate_gw_procs", NO_SIBLING},
    {"kgate_gw_runs", "kgate_gw_execd", ENGINE_NO_DOORS},
    {"kgate_gw_runs", "kgate_gw_app", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_procs", NO_SIBLING},
    {"kgate_gw_code", "kgate_gw_files", NO_SIBLING},
    {"kgate_gw_code", "kgate_gw_execd", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_app", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_code", NO_SIBLING},
    {"kgate_gw_procs", "kgate_gw_files", NO_SIBLING},
    {"kgate_gw_procs", "kgate_gw_execd", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_app", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_runs", NO_SIBLING},
    {"kgate_gw_files", "kgate_gw_execd", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_app", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_execd", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_app", ENGINE_NO_DOORS},
    {"kgate_gw_execd", "kgate_gw_app", DOORS_THROUGH_ENGINE},
    {"kgate_test_support", "criterion", TS_NO_CRITERION},
    {"kgate_test_support", "kgate_wire", TS_OUTSIDE},
    {"kgate_test_support", "kgate_kmgr", TS_OUTSIDE},
    {"kgate_test_support", "kgate_sys", TS_OUTSIDE},
    {"kgate_test_support", "kgate_gw", TS_OUTSIDE},
    {"kgate_test_support", "zmq", TS_OUTSIDE},
    {"kgate_test_support", "h2o", TS_OUTSIDE},
    {"kgate_gw_execd", "kgate_gw_proxy", DOORS_THROUGH_ENGINE},
    {"kgate_gw_runs", "kgate_gw_proxy", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_proxy", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_proxy", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_proxy", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_proxy", ENGINE_NO_DOORS},
    {"kgate_gw_proxy", "kgate_gw_app", DOORS_THROUGH_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_execd", DOORS_THROUGH_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_runs", PROXY_NO_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_code", PROXY_NO_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_procs", PROXY_NO_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_files", PROXY_NO_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_metrics", PROXY_NO_ENGINE},
    {"kgate_gw_runs", "kgate_gw_jupyter", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_jupyter", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_jupyter", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_jupyter", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_jupyter", ENGINE_NO_DOORS},
    {"kgate_gw_execd", "kgate_gw_jupyter", DOORS_THROUGH_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_jupyter", DOORS_THROUGH_ENGINE},
    {"kgate_gw_jupyter", "kgate_gw_app", DOORS_THROUGH_ENGINE},
    {"kgate_gw_jupyter", "kgate_gw_execd", DOORS_THROUGH_ENGINE},
    {"kgate_gw_jupyter", "kgate_gw_proxy", DOORS_THROUGH_ENGINE},
    {"kgate_gw_runs", "kgate_gw_mcp", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_mcp", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_mcp", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_mcp", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_mcp", ENGINE_NO_DOORS},
    {"kgate_gw_execd", "kgate_gw_mcp", DOORS_THROUGH_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_mcp", DOORS_THROUGH_ENGINE},
    {"kgate_gw_jupyter", "kgate_gw_mcp", DOORS_THROUGH_ENGINE},
    {"kgate_gw_mcp", "kgate_gw_app", DOORS_THROUGH_ENGINE},
    {"kgate_gw_mcp", "kgate_gw_execd", DOORS_THROUGH_ENGINE},
    {"kgate_gw_mcp", "kgate_gw_proxy", DOORS_THROUGH_ENGINE},
    {"kgate_gw_mcp", "kgate_gw_jupyter", DOORS_THROUGH_ENGINE},
    {"kgate_gw_runs", "kgate_gw_e2b", ENGINE_NO_DOORS},
    {"kgate_gw_code", "kgate_gw_e2b", ENGINE_NO_DOORS},
    {"kgate_gw_procs", "kgate_gw_e2b", ENGINE_NO_DOORS},
    {"kgate_gw_files", "kgate_gw_e2b", ENGINE_NO_DOORS},
    {"kgate_gw_metrics", "kgate_gw_e2b", ENGINE_NO_DOORS},
    {"kgate_gw_execd", "kgate_gw_e2b", DOORS_THROUGH_ENGINE},
    {"kgate_gw_proxy", "kgate_gw_e2b", DOORS_THROUGH_ENGINE},
    {"kgate_gw_jupyter", "kgate_gw_e2b", DOORS_THROUGH_ENGINE},
    {"kgate_gw_mcp", "kgate_gw_e2b", DOORS_THROUGH_ENGINE},
    {"kgate_gw_e2b", "kgate_gw_app", DOORS_THROUGH_ENGINE},
    {"kgate_gw_e2b", "kgate_gw_execd", DOORS_THROUGH_ENGINE},
    {"kgate_gw_e2b", "kgate_gw_proxy", DOORS_THROUGH_ENGINE},
    {"kgate_gw_e2b", "kgate_gw_jupyter", DOORS_THROUGH_ENGINE},
    {"kgate_gw_e2b", "kgate_gw_mcp", DOORS_THROUGH_ENGINE},
};

/* Returns a copy of `target`'s dependency list (caller frees), failing the test when it is absent. */
static char *graph_deps(const char *target)
{
    FILE *fp = fopen(KGATE_LINK_GRAPH, "r");
    cr_assert_not_null(fp, "cannot open %s (written at configure time): %s", KGATE_LINK_GRAPH, strerror(errno));
    char *line = NULL, *deps = NULL;
    size_t cap = 0, n = strlen(target);
    ssize_t len;
    while (deps == NULL && (len = getline(&line, &cap, fp)) != -1) {
        if (len > 0 && line[len - 1] == '\n')
            line[len - 1] = '\0';
        if (strncmp(line, target, n) == 0 && line[n] == '\t')
            deps = strdup(line + n + 1);
    }
    free(line);
    fclose(fp);
    cr_assert_not_null(deps, "target %s missing from %s", target, KGATE_LINK_GRAPH);
    return deps;
}

Test(layering, link_graph_points_one_way)
{
    char *report = NULL;
    size_t report_len, violations = 0;
    FILE *out = open_memstream(&report, &report_len);
    cr_assert_not_null(out);
    for (size_t i = 0; i != sizeof(link_rules) / sizeof(link_rules[0]); ++i) {
        const link_rule_t *rule = link_rules + i;
        char *deps = graph_deps(rule->target), *save = NULL;
        for (char *item = strtok_r(deps, ";", &save); item != NULL; item = strtok_r(NULL, ";", &save)) {
            if (strcasestr(item, rule->forbidden) != NULL) {
                fprintf(out, "  %s links %s: %s\n", rule->target, item, rule->why);
                ++violations;
            }
        }
        free(deps);
    }
    fclose(out);
    cr_expect_eq(violations, 0, "%zu forbidden link(s):\n%s", violations, report);
    free(report);
}

/* Proves the graph file is the real one: each module's own dependencies must be in it. */
Test(layering, link_graph_is_populated)
{
    char *wire = graph_deps("kgate_wire"), *kmgr = graph_deps("kgate_kmgr"), *support = graph_deps("kgate_test_support");
    char *sys = graph_deps("kgate_sys"), *core = graph_deps("kgate_gw_core");
    cr_expect_not_null(strcasestr(wire, "sodium"), "kgate_wire's links lack libsodium: %s", wire);
    cr_expect_not_null(strcasestr(wire, "jansson"), "kgate_wire's links lack jansson: %s", wire);
    cr_expect_not_null(strstr(kmgr, "kgate_wire"), "kgate_kmgr does not link kgate_wire: %s", kmgr);
    cr_expect_not_null(strstr(kmgr, "kgate_sys"), "kgate_kmgr does not link kgate_sys: %s", kmgr);
    cr_expect_not_null(strstr(sys, "kgate_wire"), "kgate_sys does not link kgate_wire: %s", sys);
    cr_expect_not_null(strstr(core, "kgate_sys"), "kgate_gw_core does not link kgate_sys: %s", core);
    cr_expect_not_null(strcasestr(support, "jansson"), "kgate_test_support's links lack jansson: %s", support);
    free(wire);
    free(kmgr);
    free(sys);
    free(core);
    free(support);
}
