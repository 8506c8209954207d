/* The server: h2o set-up, the listener, the one scheduler tick, and orderly shutdown. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/sandbox.h"
#include "app/kmgr_loop.h"
#include "app/listener.h"
#include "app/routes.h"
#include "app/server.h"
#include "ksys/log.h"

typedef struct st_gw_handler_t {
    h2o_handler_t super;
    gw_server_t *server;
} gw_handler_t;

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    gw_server_t *server = ((gw_handler_t *)self)->server;

    gw_observe_request_begins(&server->observe, req);
    gw_app_dispatch(server, req);
    return 0;
}

/* The one scheduler tick: every feature's periodic work, in one place. */
static void on_tick(h2o_timeout_entry_t *entry)
{
    gw_server_t *server = H2O_STRUCT_FROM_MEMBER(gw_server_t, tick_entry, entry);

    kmgr_manager_tick(server->kmgr);
    gw_shells_tick(&server->shells);
    gw_ptys_tick(&server->ptys);
    gw_isolated_tick(&server->isolated);
    gw_commands_tick(&server->commands);
    gw_metrics_tick(&server->metrics);
    gw_execd_tick(&server->execd);
    gw_mcp_tick(&server->mcp);
    gw_jupyter_tick(&server->jupyter);
    gw_contexts_tick(&server->contexts);
    gw_runs_collect(&server->runs);
    /* last: what the features above let go this tick is free already */
    gw_memory_tick(&server->memory, gw_now_ms());
    h2o_timeout_link(server->ctx.loop, &server->tick_timeout, &server->tick_entry);
}

static void warn_kernelspec(const char *path, const char *why)
{
    ksys_log_warn("skipping kernelspec %s: %s", path, why);
}

/*
 * Kernelspec directories: --kernel-path ones first, then kgate's own kernels next to the executable
 * (`<exe dir>/../kernels/share/jupyter/kernels` in a build tree, `<exe dir>/../share/jupyter/kernels`
 * once installed), so that kgate finds its bash kernel without flags.
 */
static void discover_kernelspecs(gw_server_t *server, const gw_config_t *config)
{
    static const char *const own[] = {"/../kernels/share/jupyter/kernels", "/../share/jupyter/kernels"};
    const char *dirs[config->num_kernel_paths + 2];
    char exe[PATH_MAX], paths[2][PATH_MAX + 64];
    size_t n = 0, i;
    ssize_t len;

    for (i = 0; i != config->num_kernel_paths; ++i)
        dirs[n++] = config->kernel_paths[i];
    if ((len = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) > 0) {
        exe[len] = '\0';
        *strrchr(exe, '/') = '\0';
        for (i = 0; i != 2; ++i) {
            snprintf(paths[i], sizeof(paths[i]), "%s%s", exe, own[i]);
            dirs[n++] = paths[i];
        }
    }
    kmgr_kernelspecs_discover(dirs, n, &server->languages.specs, warn_kernelspec);
}

/*
 * The kernel template's program, found as kgate's own kernels are: `<exe dir>/../kernels/python-template/` in a build tree,
 * `<exe dir>/../share/kgate/python-template/` once installed. "" when neither holds it.
 */
static void find_template_script(char *out, size_t size)
{
    static const char *const own[] = {"/../kernels/python-template/kgate_template.py",
                                      "/../share/kgate/python-template/kgate_template.py"};
    char exe[PATH_MAX];
    ssize_t len;

    out[0] = '\0';
    if ((len = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return;
    exe[len] = '\0';
    *strrchr(exe, '/') = '\0';
    for (size_t i = 0; i != 2; ++i) {
        if ((size_t)snprintf(out, size, "%.*s%s", (int)(size - 64), exe, own[i]) < size && access(out, R_OK) == 0)
            return;
    }
    out[0] = '\0';
}

/* --kernel-template: a template per named ipykernel kernelspec, started now (ready in about as long as one kernel's start) */
static void start_templates(gw_server_t *server, const gw_config_t *config)
{
    char *names, *save = NULL;

    if (config->kernel_template == NULL)
        return;
    if (config->sandbox) {
        ksys_log_info("kernel templates: not used under --sandbox bwrap: sandboxed kernels are spawned, each in its "
                      "namespaces (docs/sandbox.md)");
        return;
    }
    names = wire_strdup(config->kernel_template);
    for (char *name = strtok_r(names, ",", &save); name != NULL; name = strtok_r(NULL, ",", &save)) {
        const kmgr_kernelspec_t *spec = gw_languages_find(&server->languages, name);
        int ret;
        if (spec == NULL) {
            ksys_log_warn("kernel template: no kernelspec named \"%s\"; its kernels (if any) are spawned", name);
            continue;
        }
        if (server->template_script[0] == '\0') {
            ksys_log_warn("kernel template: kgate_template.py is not installed next to kgate; %s kernels are spawned", name);
            continue;
        }
        if ((ret = kmgr_manager_use_template(server->kmgr, spec)) != 0)
            ksys_log_warn("kernel template: %s kernels are spawned: %s", name,
                          ret == KSYS_EINVAL ? "its kernelspec does not run ipykernel (`<python> -m ipykernel_launcher`)"
                                             : "its interpreter was not found");
        else
            ksys_log_info("kernel template: %s kernels are forked from a template (%s %s), once it is ready", name, spec->argv[0],
                          server->template_script);
    }
    free(names);
}

/* --pool: each named kernelspec's pool, filled from the tick; says what it keeps, or why not. */
static void start_pools(gw_server_t *server, const gw_config_t *config)
{
    char said[512] = "";
    size_t len = 0;

    for (size_t i = 0; i != config->num_pool; ++i) {
        const kmgr_kernelspec_t *spec = gw_languages_find(&server->languages, config->pool[i].kernel);
        if (spec == NULL) {
            ksys_log_warn("pool: no kernelspec named \"%s\"; none is started ahead", config->pool[i].kernel);
            continue;
        }
        gw_contexts_set_pool(&server->contexts, spec, config->pool[i].size);
        if (config->pool[i].size != 0 && len < sizeof(said))
            len +=
                (size_t)snprintf(said + len, sizeof(said) - len, "%s%s=%u", len != 0 ? "," : "", spec->name, config->pool[i].size);
    }
    if (len != 0)
        ksys_log_info("pool: %s kernels started ahead (--pool)", said);
}

/* A failed preStart ends kgate with status 1 (upstream's execd exits; bootstrap.sh then exits with the failure). */
static void on_startup_prestart(void *data, int ok, const char *why)
{
    gw_server_t *server = data;

    server->runtime_init.starting = 0;
    if (!ok) {
        ksys_log_error("lifecycle: startup failed: %s; kgate exits", why);
        server->exit_status = 1;
    }
}

int gw_server_init(gw_server_t *server, const gw_config_t *config, h2o_evloop_t *loop)
{
    h2o_hostconf_t *hostconf;
    h2o_pathconf_t *pathconf;
    gw_handler_t *handler;
    kmgr_config_t kconfig = {0};
    int ret;

    memset(server, 0, sizeof(*server));
    h2o_config_init(&server->globalconf);
    server->globalconf.server_name = h2o_iovec_init(H2O_STRLIT("kgate/" GW_VERSION));
    /* global in h2o: the larger of the two; each route holds its own (gw_app_dispatch) */
    server->globalconf.max_request_entity_size =
        config->max_upload_bytes > config->max_body_bytes ? config->max_upload_bytes : config->max_body_bytes;
    if (config->max_proxy_body_bytes > server->globalconf.max_request_entity_size)
        server->globalconf.max_request_entity_size = config->max_proxy_body_bytes;
    /* h2o times the whole HTTP/1 request, body included, from its first byte: a large upload needs long enough */
    server->globalconf.http1.req_timeout = config->request_timeout_ms;
    hostconf = h2o_config_register_host(&server->globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    pathconf = h2o_config_register_path(hostconf, "/", 0);
    handler = (gw_handler_t *)h2o_create_handler(pathconf, sizeof(*handler));
    handler->super.on_req = on_req;
    handler->server = server;
    h2o_context_init(&server->ctx, loop, &server->globalconf);
    server->accept_ctx.ctx = &server->ctx;
    server->accept_ctx.hosts = server->globalconf.hosts;
    gw_host_init(&server->host, loop, config);
    server->loopback_listener = gw_config_listens_on_loopback(config);
    h2o_timeout_init(loop, &server->tick_timeout, KMGR_TICK_MS);
    gw_proxy_init(&server->proxy, &server->host);
    gw_runtime_init_init(&server->runtime_init, config->runtime_init, &server->shells, &server->lifecycle,
                         config->lifecycle_status_file);
    /* the launcher's pipe is kgate's alone: no kernel or command inherits it */
    if (config->init_control_fd >= 0 && fcntl(config->init_control_fd, F_SETFD, FD_CLOEXEC) == 0)
        server->runtime_init.control_fd = config->init_control_fd;
    else if (config->init_control_fd >= 0)
        ksys_log_warn("--init-control-fd %d is not open: entrypointPolicy=restart cannot be honoured", config->init_control_fd);
    server->initialised = 1;
    {
        char why[512];
        if (gw_lifecycle_load(&server->lifecycle, why, sizeof(why)) != 0) {
            ksys_log_error("lifecycle: %s", why);
            return -1;
        }
    }

    gw_languages_init(&server->languages);
    discover_kernelspecs(server, config);
    kconfig.runtime_dir = config->runtime_dir;
    kconfig.shutdown_grace_ms = config->shutdown_grace_ms;
    kconfig.startup_timeout_ms = config->kernel_start_timeout_ms;
    kconfig.heartbeat_kill_ms = config->heartbeat_kill_ms;
    kconfig.max_message_bytes = config->max_message_bytes;
    kconfig.bwrap_path = config->bwrap_path;
    /* a python kernel's start is a second of CPU: more at once than cores only slows every one of them, and kgate's loop */
    kconfig.max_starting =
        config->max_starting_kernels != 0 ? config->max_starting_kernels : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    /* a forked start waits on its threads' hand-offs and kgate's answers as well as for CPU: two per core keep the cores busy
     * (docs/kernels.md, "Kernels forked from a template") */
    kconfig.max_forking =
        config->max_forking_kernels != 0 ? config->max_forking_kernels : 2 * (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    kconfig.max_start_queue = config->max_start_queue;
    kconfig.template_max_pending = config->kernel_template_max_pending;
    kconfig.template_merge = config->kernel_template_merge;
    kconfig.template_imports_only = config->kernel_template_imports_only;
    find_template_script(server->template_script, sizeof(server->template_script));
    kconfig.template_script = server->template_script[0] != '\0' ? server->template_script : NULL;
    if ((ret = kmgr_manager_create(&kconfig, &gw_kmgr_loop_ops, server, &server->kmgr)) != 0) {
        ksys_log_error("cannot create the kernel manager: %s", ksys_strerror(ret));
        return -1;
    }
    server->host.instance_env = kmgr_manager_instance_env(server->kmgr);
    gw_observe_init(&server->observe, &server->host, &server->routes, server->kmgr, pathconf, &hostconf->fallback_path);
    if (config->access_log != NULL) {
        char why[512];
        server->access_log_open = 1;
        if (gw_access_log_open(&server->access_log, config->access_log, config->access_log_buffer_bytes, why, sizeof(why)) != 0) {
            ksys_log_error("%s", why);
            return -1;
        }
        gw_observe_set_access_log(&server->observe, &server->access_log);
    }
    gw_runs_init(&server->runs, &server->host);
    gw_runs_set_log_dir(&server->runs, kmgr_manager_runtime_dir(server->kmgr));
    gw_contexts_init(&server->contexts, &server->host, &server->runs, &server->languages, server->kmgr);
    gw_shells_init(&server->shells, &server->host, &server->runs);
    gw_commands_init(&server->commands, &server->host, &server->runs, &server->shells, kmgr_manager_runtime_dir(server->kmgr));
    gw_ptys_init(&server->ptys, &server->host);
    gw_metrics_init(&server->metrics);
    gw_execd_init(&server->execd, &server->host, &server->runs, &server->languages, &server->contexts, &server->shells,
                  &server->commands, &server->files, &server->metrics, &server->ptys, &server->isolated);
    gw_jupyter_init(&server->jupyter, &server->host, &server->languages, &server->contexts);
    gw_e2b_init(&server->e2b, &server->host, &server->languages, &server->contexts);
    server->e2b_ready = 1;
    if (gw_files_init(&server->files, &server->host) != 0)
        return -1;
    server->contexts.workspace = server->files.ws.root;
    gw_isolated_init(&server->isolated, &server->host, &server->runs, config->bwrap_path, kmgr_manager_runtime_dir(server->kmgr),
                     server->files.ws.root);
    ksys_log_info("isolated sessions: %s%s", server->isolated.available ? "available, bwrap " : "not available: ",
                  server->isolated.available ? server->isolated.version : server->isolated.message);
    if (config->sandbox) {
        char why[512];
        if (kmgr_manager_bwrap_path(server->kmgr) == NULL) {
            ksys_log_error("--sandbox bwrap: %s not found (install bubblewrap: deploy/deps.sh --with-sandbox)",
                           config->bwrap_path != NULL ? config->bwrap_path : "bwrap");
            return -1;
        }
        if (ksys_bwrap_probe(kmgr_manager_bwrap_path(server->kmgr), why, sizeof(why)) != 0) {
            ksys_log_error("--sandbox bwrap: %s (in an unprivileged container, run kgate with --sandbox none: the container is the "
                           "boundary)",
                           why);
            return -1;
        }
        server->host.sandbox_bwrap = kmgr_manager_bwrap_path(server->kmgr);
    }
    server->host.runtime_dir = kmgr_manager_runtime_dir(server->kmgr);
    server->host.workspace = server->files.ws.root;
    ksys_log_info("sandbox: %s%s; %s", config->sandbox ? "bwrap " : "none",
                  config->sandbox ? kmgr_manager_bwrap_path(server->kmgr) : "", kmgr_manager_limits_mechanism(server->kmgr));
    if (config->sandbox) {
        char mem[32] = "none", tmp[32] = "tmpfs's default";
        uint64_t tmp_bytes = gw_config_tmp_bytes(config, (uint64_t)config->max_memory_mb << 20);
        if (config->max_memory_mb != 0)
            ksys_format_bytes((uint64_t)config->max_memory_mb << 20, mem, sizeof(mem));
        if (tmp_bytes != 0)
            ksys_format_bytes(tmp_bytes, tmp, sizeof(tmp));
        ksys_log_info("sandbox caps per context: memory %s%s, processes %u%s%s, /tmp and /dev/shm %s each", mem,
                      config->max_memory_mb_given ? "" : " (derived: a quarter of the RAM)", config->max_pids,
                      config->max_pids == 0 ? " (none)" : "", config->max_pids_given ? "" : " (derived: 128 per CPU)", tmp);
        if (ksys_path_holds_system(server->files.ws.root))
            ksys_log_warn("sandbox: the workspace %s holds system directories: sandboxes see it read-only (give "
                          "--workspace-root DIR for a writable one)",
                          server->files.ws.root);
    }
    start_templates(server, config);
    start_pools(server, config);
    gw_mcp_init(&server->mcp, &server->host, &server->languages, &server->contexts, &server->files);
    server->mcp_ready = 1;
    gw_app_build_routes(server);

    server->tick_entry.cb = on_tick;
    gw_memory_init(&server->memory);
    h2o_timeout_link(loop, &server->tick_timeout, &server->tick_entry);
    server->listener_open = 1;
    if (gw_listener_open(&server->listener, config, loop, &server->accept_ctx) != 0)
        return -1;
    if (config->e2b_listen_host != NULL) {
        server->e2b_listener_open = 1;
        if (gw_listener_open_at(&server->e2b_listener, config, config->e2b_listen_host, config->e2b_listen_port, loop,
                                &server->accept_ctx) != 0)
            return -1;
    }
    gw_proxy_set_own_port(&server->proxy, gw_server_port(server));
    /* upstream's startup: with --runtime-init the lifecycle waits for POST /internal/init; otherwise preStart runs now, while
     * the routes serve, and GET /ready says 503 until it has succeeded */
    if (!config->runtime_init) {
        server->runtime_init.starting = 1;
        gw_prestart_start(&server->shells, &server->lifecycle, config->lifecycle_status_file, 1, on_startup_prestart, server);
    }
    return 0;
}

uint16_t gw_server_e2b_port(const gw_server_t *server)
{
    return server->e2b_listener_open ? gw_listener_port(&server->e2b_listener) : 0;
}

uint16_t gw_server_port(const gw_server_t *server)
{
    return gw_listener_port(&server->listener);
}

void gw_server_begin_drain(gw_server_t *server)
{
    if (server->draining || server->host.shutting_down)
        return;
    server->draining = 1;
    gw_listener_close(&server->listener);
    if (server->e2b_listener_open)
        gw_listener_close(&server->e2b_listener);
}

size_t gw_server_requests_in_flight(const gw_server_t *server)
{
    return server->requests_in_flight;
}

void gw_server_begin_shutdown(gw_server_t *server)
{
    if (server->host.shutting_down)
        return;
    server->host.shutting_down = 1;
    if (server->kmgr != NULL)
        kmgr_manager_yield_cpu(server->kmgr); /* first: every kernel is told to end below, all at once */
    gw_listener_close(&server->listener);
    if (server->e2b_listener_open)
        gw_listener_close(&server->e2b_listener);
    if (server->mcp_ready)
        gw_mcp_shutdown(&server->mcp);
    gw_contexts_destroy_all(&server->contexts);
    gw_shells_kill_all(&server->shells);
    gw_isolated_destroy_all(&server->isolated);
    gw_runs_shutdown(&server->runs);
    gw_execd_shutdown(&server->execd);
    gw_jupyter_shutdown(&server->jupyter);
    gw_ptys_kill_all(&server->ptys);
    gw_proxy_shutdown(&server->proxy);
    if (server->kmgr != NULL)
        kmgr_manager_shutdown_all(server->kmgr);
}

int gw_server_is_drained(gw_server_t *server)
{
    return kmgr_manager_num_processes(server->kmgr) == 0 && gw_shells_is_empty(&server->shells) &&
           gw_ptys_is_empty(&server->ptys) && gw_execd_is_drained(&server->execd) && gw_proxy_is_drained(&server->proxy) &&
           gw_isolated_is_drained(&server->isolated) && gw_jupyter_is_drained(&server->jupyter) &&
           (!server->e2b_ready || gw_e2b_is_drained(&server->e2b));
}

size_t gw_server_close_connections(gw_server_t *server)
{
    return (server->listener_open ? gw_listener_shutdown_conns(&server->listener) : 0) +
           (server->e2b_listener_open ? gw_listener_shutdown_conns(&server->e2b_listener) : 0);
}

void gw_server_dispose(gw_server_t *server)
{
    if (!server->initialised)
        return;
    gw_observe_close(&server->observe);
    if (server->kmgr != NULL) {
        gw_server_begin_shutdown(server);
        kmgr_manager_destroy(server->kmgr);
        server->kmgr = NULL;
        gw_runs_dispose(&server->runs);
        gw_commands_dispose(&server->commands);
        gw_jupyter_dispose(&server->jupyter);
    }
    if (server->mcp_ready)
        gw_mcp_dispose(&server->mcp);
    if (server->e2b_ready)
        gw_e2b_dispose(&server->e2b);
    gw_files_dispose(&server->files);
    gw_isolated_dispose(&server->isolated);
    gw_languages_dispose(&server->languages);
    gw_route_table_dispose(&server->routes);
    gw_runtime_init_dispose(&server->runtime_init);
    gw_lifecycle_dispose(&server->lifecycle);
    /* h2o's own state last: nothing of ours references its loop, timeouts or pools any more */
    if (h2o_timeout_is_linked(&server->tick_entry))
        h2o_timeout_unlink(&server->tick_entry);
    if (h2o_timeout_is_linked(&server->kmgr_pending_entry))
        h2o_timeout_unlink(&server->kmgr_pending_entry);
    if (server->listener_open)
        gw_listener_dispose(&server->listener, server->ctx.loop);
    if (server->e2b_listener_open)
        gw_listener_dispose(&server->e2b_listener, server->ctx.loop);
    gw_proxy_dispose(&server->proxy);
    gw_host_dispose(&server->host);
    h2o_timeout_dispose(server->ctx.loop, &server->tick_timeout);
    h2o_context_dispose(&server->ctx);
    /* h2o 2.2.5's h2o_multithread_destroy_queue (called by h2o_context_dispose) frees the queue
     * only under libuv: with evloop the struct itself is left to us */
    free(server->ctx.queue);
    h2o_config_dispose(&server->globalconf);
    if (server->access_log_open)
        gw_access_log_dispose(&server->access_log);
    server->initialised = 0;
}
