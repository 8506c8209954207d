/* tests/lint/test_layering.c: dependencies point one way (gateway -> kernelmgr -> wire, and inside the gateway
 * app -> front doors -> engine -> core), in #includes and in the link graph. */
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
    const char *module; /* top-level directory the rule applies to */
    const char *header;
    const char *why;
} include_rule_t;

#define WIRE_NO_SOCKET "wire touches no socket and no process"
#define NOT_UPWARD "dependencies point one way: gateway -> kernelmgr -> wire"
#define ONLY_GW_HTTP "only gateway knows HTTP and h2o"
#define CORE_KNOWS_NO_STATE "gateway/core is HTTP plumbing: it knows no engine feature, front door or the app"
#define ENGINE_NO_DOORS "the engine knows no front door and no app (only app/ composes features)"
#define NO_SIBLING "an engine feature uses another only through its public header, and only one layer down"
#define DOORS_THROUGH_ENGINE "a front door reaches kernels through the engine, never another door or the app"
#define PRIVATE_HEADER "a folder's internal.h is its own"

static const include_rule_t include_rules[] = {
    {"wire", "zmq*", WIRE_NO_SOCKET},
    {"wire", "sys/socket.h", WIRE_NO_SOCKET},
    {"wire", "sys/un.h", WIRE_NO_SOCKET},
    {"wire", "netinet/", WIRE_NO_SOCKET},
    {"wire", "arpa/", WIRE_NO_SOCKET},
    {"wire", "netdb.h", WIRE_NO_SOCKET},
    {"wire", "spawn.h", WIRE_NO_SOCKET},
    {"wire", "sys/wait.h", WIRE_NO_SOCKET},
    {"wire", "h2o.h", ONLY_GW_HTTP},
    {"wire", "h2o/", ONLY_GW_HTTP},
    {"wire", "kmgr/", NOT_UPWARD},
    {"wire", "gateway/", NOT_UPWARD},
    {"kernelmgr", "h2o.h", ONLY_GW_HTTP},
    {"kernelmgr", "h2o/", ONLY_GW_HTTP},
    {"kernelmgr", "picohttpparser.h", ONLY_GW_HTTP},
    {"kernelmgr", "gateway/", NOT_UPWARD},
    /* inside the gateway: core <- engine (runs <- code, procs; files; metrics) <- front doors <- app */
    {"gateway/core", "runs/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "code/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "procs/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "files/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "metrics/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "execd/", CORE_KNOWS_NO_STATE},
    {"gateway/core", "app/", CORE_KNOWS_NO_STATE},
    {"gateway/runs", "code/", NO_SIBLING},
    {"gateway/runs", "procs/", NO_SIBLING},
    {"gateway/runs", "files/", NO_SIBLING},
    {"gateway/runs", "metrics/", NO_SIBLING},
    {"gateway/runs", "execd/", ENGINE_NO_DOORS},
    {"gateway/runs", "app/", ENGINE_NO_DOORS},
    {"gateway/code", "procs/", NO_SIBLING},
    {"gateway/code", "files/", NO_SIBLING},
    {"gateway/code", "metrics/", NO_SIBLING},
    {"gateway/code", "execd/", ENGINE_NO_DOORS},
    {"gateway/code", "app/", ENGINE_NO_DOORS},
    {"gateway/procs", "code/", NO_SIBLING},
    {"gateway/procs", "files/", NO_SIBLING},
    {"gateway/procs", "metrics/", NO_SIBLING},
    {"gateway/procs", "execd/", ENGINE_NO_DOORS},
    {"gateway/procs", "app/", ENGINE_NO_DOORS},
    {"gateway/files", "runs/", NO_SIBLING},
    {"gateway/files", "code/", NO_SIBLING},
    {"gateway/files", "procs/", NO_SIBLING},
    {"gateway/files", "metrics/", NO_SIBLING},
    {"gateway/files", "execd/", ENGINE_NO_DOORS},
    {"gateway/files", "app/", ENGINE_NO_DOORS},
    {"gateway/metrics", "runs/", NO_SIBLING},
    {"gateway/metrics", "code/", NO_SIBLING},
    {"gateway/metrics", "procs/", NO_SIBLING},
    {"gateway/metrics", "files/", NO_SIBLING},
    {"gateway/metrics", "execd/", ENGINE_NO_DOORS},
    {"gateway/metrics", "app/", ENGINE_NO_DOORS},
    {"gateway/execd", "app/", DOORS_THROUGH_ENGINE},
    {"gateway/execd", "kmgr/kernel.h", DOORS_THROUGH_ENGINE},
    {"gateway/execd", "kmgr/manager.h", DOORS_THROUGH_ENGINE},
    {"gateway/execd", "zmq*", DOORS_THROUGH_ENGINE},
};

/* The engine's headers are its contract to every front door: they name no HTTP request or response. */
static const char *const engine_modules[] = {"gateway/runs", "gateway/code", "gateway/procs", "gateway/files", "gateway/metrics"};
static const char *const engine_header_tokens[] = {"h2o_req_t", "h2o_generator_t"};
#define ENGINE_NO_HTTP "an engine header names no HTTP request type"

static int is_engine_module(const char *module)
{
    for (size_t i = 0; i != sizeof(engine_modules) / sizeof(engine_modules[0]); ++i)
        if (strcmp(engine_modules[i], module) == 0)
            return 1;
    return 0;
}

/* True when `header` is another folder's private header ("runs/internal.h" included from gateway/code). */
static int is_foreign_internal(const char *module, const char *header)
{
    const char *slash = strchr(header, '/'), *folder = strrchr(module, '/');
    size_t n;

    if (slash == NULL || strcmp(slash, "/internal.h") != 0)
        return 0;
    folder = folder != NULL ? folder + 1 : module;
    n = (size_t)(slash - header);
    return !(strlen(folder) == n && strncmp(folder, header, n) == 0);
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
    const char *root; /* source root; reports name files relative to it */
    const char *module;
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
    char *line = NULL, header[256];
    size_t cap = 0;
    unsigned lineno = 0;
    size_t path_len = strlen(path);
    int engine_header = is_engine_module(scan->module) && path_len > 2 && strcmp(path + path_len - 2, ".h") == 0;
    while (getline(&line, &cap, fp) != -1) {
        ++lineno;
        for (size_t i = 0; engine_header && i != sizeof(engine_header_tokens) / sizeof(engine_header_tokens[0]); ++i) {
            if (strstr(line, engine_header_tokens[i]) != NULL) {
                fprintf(scan->report, "  %s:%u: names %s: %s\n", path + strlen(scan->root) + 1, lineno, engine_header_tokens[i],
                        ENGINE_NO_HTTP);
                ++scan->violations;
            }
        }
        if (!parse_include(line, header, sizeof(header)))
            continue;
        if (is_foreign_internal(scan->module, header)) {
            fprintf(scan->report, "  %s:%u: includes <%s>: %s\n", path + strlen(scan->root) + 1, lineno, header, PRIVATE_HEADER);
            ++scan->violations;
        }
        for (size_t i = 0; i != sizeof(include_rules) / sizeof(include_rules[0]); ++i) {
            const include_rule_t *rule = include_rules + i;
            if (strcmp(rule->module, scan->module) == 0 && header_matches(rule->header, header)) {
                fprintf(scan->report, "  %s:%u: includes <%s>: %s\n", path + strlen(scan->root) + 1, lineno, header, rule->why);
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
    scan_t scan = {root, module, open_memstream(report, &report_len), 0, 0};
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

Test(layering, kernelmgr_includes_no_http_and_no_gateway)
{
    check_module("kernelmgr");
}

Test(layering, gateway_layers_point_down)
{
    static const char *const folders[] = {"gateway/core",  "gateway/runs",    "gateway/code",  "gateway/procs",
                                          "gateway/files", "gateway/metrics", "gateway/execd", "gateway/app"};
    for (size_t i = 0; i != sizeof(folders) / sizeof(folders[0]); ++i)
        check_module(folders[i]);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp, "%s: %s", path, strerror(errno));
    fputs(text, fp);
    fclose(fp);
}

/* The check above passing proves nothing unless the scanner can fail: feed it a planted tree. */
Test(layering, scanner_reports_file_and_line)
{
    char root[] = "/tmp/kgate-lint-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(root));
    snprintf(path, sizeof(path), "%s/wire", root);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/wire/src", root);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/wire/src/bad.c", root);
    write_file(path, "/* bad */\n#include <stdio.h>\n#include <zmq.h>\n// #include <h2o.h>\n  #  include \"kmgr/manager.h\"\n"
                     "#include <sys/socket.h>\n");
    snprintf(path, sizeof(path), "%s/wire/src/good.h", root);
    write_file(path, "#include \"wire/alloc.h\"\n#include <sodium.h>\n#include <sys/stat.h>\n");

    char *report = NULL;
    scan_t scan = scan_module(root, "wire", &report);
    cr_expect_eq(scan.files, 2);
    cr_expect_eq(scan.violations, 3, "report:\n%s", report);
    cr_expect_not_null(strstr(report, "wire/src/bad.c:3: includes <zmq.h>"), "report:\n%s", report);
    cr_expect_not_null(strstr(report, "wire/src/bad.c:5: includes <kmgr/manager.h>"), "report:\n%s", report);
    cr_expect_not_null(strstr(report, "wire/src/bad.c:6: includes <sys/socket.h>"), "report:\n%s", report);
    cr_expect_null(strstr(report, "good.h"), "report:\n%s", report);
    free(report);

    /* the same tree is clean for kernelmgr's rules, which do not forbid zmq */
    report = NULL;
    scan = scan_module(root, "kernelmgr", &report);
    cr_expect_eq(scan.violations, 0);
    free(report);

    snprintf(path, sizeof(path), "%s/wire/src/bad.c", root);
    unlink(path);
    snprintf(path, sizeof(path), "%s/wire/src/good.h", root);
    unlink(path);
    snprintf(path, sizeof(path), "%s/wire/src", root);
    rmdir(path);
    snprintf(path, sizeof(path), "%s/wire", root);
    rmdir(path);
    rmdir(root);
}

static void make_dirs(const char *root, const char *const *dirs, size_t n)
{
    char path[256];
    for (size_t i = 0; i != n; ++i) {
        snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
        cr_assert_eq(mkdir(path, 0700), 0, "%s: %s", path, strerror(errno));
    }
}

/* The gateway's rules fail on a planted tree too: upward, sideways, private and HTTP-typed includes. */
Test(layering, gateway_rules_report_planted_violations)
{
    static const char *const dirs[] = {"gateway", "gateway/runs", "gateway/code", "gateway/execd"};
    char root[] = "/tmp/kgate-lint-XXXXXX", path[256];
    cr_assert_not_null(mkdtemp(root));
    make_dirs(root, dirs, 4);
    snprintf(path, sizeof(path), "%s/gateway/runs/bad.c", root);
    write_file(path, "#include \"runs/internal.h\"\n#include \"execd/execd.h\"\n#include \"code/context.h\"\n");
    snprintf(path, sizeof(path), "%s/gateway/code/bad.h", root);
    write_file(path, "#include \"runs/run.h\"\n#include \"runs/internal.h\"\nvoid f(h2o_req_t *req);\n");
    snprintf(path, sizeof(path), "%s/gateway/code/fine.c", root);
    write_file(path, "#include \"code/internal.h\"\nstatic void g(h2o_req_t *req);\n"); /* .c files may use h2o */
    snprintf(path, sizeof(path), "%s/gateway/execd/bad.c", root);
    write_file(path, "#include \"runs/run.h\"\n#include \"app/server.h\"\n#include \"kmgr/kernel.h\"\n");

    char *report = NULL;
    scan_t scan = scan_module(root, "gateway/runs", &report);
    cr_expect_eq(scan.violations, 2, "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/runs/bad.c:2: includes <execd/execd.h>"), "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/runs/bad.c:3: includes <code/context.h>"), "report:\n%s", report);
    free(report);
    scan = scan_module(root, "gateway/code", &report);
    cr_expect_eq(scan.violations, 2, "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/code/bad.h:2: includes <runs/internal.h>"), "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/code/bad.h:3: names h2o_req_t"), "report:\n%s", report);
    free(report);
    scan = scan_module(root, "gateway/execd", &report);
    cr_expect_eq(scan.violations, 2, "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/execd/bad.c:2: includes <app/server.h>"), "report:\n%s", report);
    cr_expect_not_null(strstr(report, "gateway/execd/bad.c:3: includes <kmgr/kernel.h>"), "report:\n%s", report);
    free(report);

    static const char *const files[] = {"gateway/runs/bad.c", "gateway/code/bad.h", "gateway/code/fine.c", "gateway/execd/bad.c",
                                        "gateway/execd",      "gateway/code",       "gateway/runs",        "gateway"};
    for (size_t i = 0; i != sizeof(files) / sizeof(files[0]); ++i) {
        snprintf(path, sizeof(path), "%s/%s", root, files[i]);
        cr_expect_eq(i < 4 ? unlink(path) : rmdir(path), 0, "%s: %s", path, strerror(errno));
    }
    rmdir(root);
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
    {"kgate_wire", "kgate_gw", NOT_UPWARD},
    {"kgate_kmgr", "h2o", ONLY_GW_HTTP},
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
    char *wire = graph_deps("kgate_wire"), *kmgr = graph_deps("kgate_kmgr");
    cr_expect_not_null(strcasestr(wire, "sodium"), "kgate_wire's links lack libsodium: %s", wire);
    cr_expect_not_null(strcasestr(wire, "jansson"), "kgate_wire's links lack jansson: %s", wire);
    cr_expect_not_null(strstr(kmgr, "kgate_wire"), "kgate_kmgr does not link kgate_wire: %s", kmgr);
    cr_expect_not_null(strcasestr(kmgr, "zmq"), "kgate_kmgr does not link libzmq: %s", kmgr);
    free(wire);
    free(kmgr);
}
