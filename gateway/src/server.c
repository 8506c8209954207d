/* The server: h2o set-up, the listener, timers that drive the kernel manager, and orderly shutdown. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "kmgr/errors.h"
#include "gateway/api.h"
#include "gateway/command.h"
#include "gateway/context.h"
#include "gateway/files_api.h"
#include "gateway/kernel_run.h"
#include "gateway/kmgr_loop.h"
#include "gateway/metrics.h"
#include "gateway/run.h"
#include "gateway/server.h"
#include "gateway/shell.h"

typedef struct st_gw_handler_t {
    h2o_handler_t super;
    gw_server_t *server;
} gw_handler_t;

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    gw_handler_t *handler = (gw_handler_t *)self;
    gw_api_handle(handler->server, req);
    return 0;
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    gw_server_t *server = listener->data;
    h2o_socket_t *sock;
    int on = 1;

    if (err != NULL)
        return;
    /* accept a burst at once; h2o calls back again while the backlog is non-empty */
    for (int i = 0; i < 16 && (sock = h2o_evloop_socket_accept(listener)) != NULL; ++i) {
        /* small events must leave at once, not wait for Nagle and delayed ACKs (PLATFORM.md: +40 ms) */
        setsockopt(h2o_socket_get_fd(sock), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        h2o_accept(&server->accept_ctx, sock);
    }
}

static int open_listener(const gw_config_t *config)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int fd, on = 1;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, config->listen_host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_port = htons(config->listen_port);
        sslen = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, config->listen_host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(config->listen_port);
        sslen = sizeof(struct sockaddr_in6);
    } else if (strcmp(config->listen_host, "localhost") == 0) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ((struct sockaddr_in *)&ss)->sin_port = htons(config->listen_port);
        sslen = sizeof(struct sockaddr_in);
    } else {
        fprintf(stderr, "kgate: --listen host must be a numeric IPv4/IPv6 address or localhost, got \"%s\"\n", config->listen_host);
        return -1;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 || bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        fprintf(stderr, "kgate: cannot listen on %s:%u: %s\n", config->listen_host, config->listen_port, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    return fd;
}

static void on_tick(h2o_timeout_entry_t *entry)
{
    gw_server_t *server = H2O_STRUCT_FROM_MEMBER(gw_server_t, tick_entry, entry);

    kmgr_manager_tick(server->kmgr);
    gw_shell_tick(server);
    gw_commands_tick(server);
    gw_metrics_tick(server);
    gw_kernel_runs_tick(server);
    gw_contexts_cull_idle(server);
    gw_runs_collect(server);
    h2o_timeout_link(server->ctx.loop, &server->tick_timeout, &server->tick_entry);
}

static void warn_kernelspec(const char *path, const char *why)
{
    fprintf(stderr, "kgate: skipping kernelspec %s: %s\n", path, why);
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
    kmgr_kernelspecs_discover(dirs, n, &server->specs, warn_kernelspec);
}

int gw_server_init(gw_server_t *server, const gw_config_t *config, h2o_evloop_t *loop)
{
    h2o_hostconf_t *hostconf;
    h2o_pathconf_t *pathconf;
    gw_handler_t *handler;
    kmgr_config_t kconfig = {0};
    int fd, ret;

    memset(server, 0, sizeof(*server));
    server->config = config;
    server->translate.compat_execd = config->compat_execd;
    server->translate.keep_ansi = config->keep_ansi;
    h2o_linklist_init_anchor(&server->contexts);
    h2o_linklist_init_anchor(&server->shell_runs);
    gw_runs_init(server);
    gw_commands_init(server);
    gw_metrics_init(server);

    h2o_config_init(&server->globalconf);
    server->globalconf.server_name = h2o_iovec_init(H2O_STRLIT("kgate/" GW_VERSION));
    /* global in h2o: the larger of the two; gw_api_handle holds other routes to max_body_bytes */
    server->globalconf.max_request_entity_size =
        config->max_upload_bytes > config->max_body_bytes ? config->max_upload_bytes : config->max_body_bytes;
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

    h2o_timeout_init(loop, &server->zero_timeout, 0);
    h2o_timeout_init(loop, &server->yield_timeout, 1);
    h2o_timeout_init(loop, &server->tick_timeout, KMGR_TICK_MS);
    h2o_timeout_init(loop, &server->ping_timeout, config->ping_interval_ms);
    if (gw_files_init(server) != 0)
        return -1;

    discover_kernelspecs(server, config);
    kconfig.runtime_dir = config->runtime_dir;
    kconfig.shutdown_grace_ms = config->shutdown_grace_ms;
    kconfig.startup_timeout_ms = config->kernel_start_timeout_ms;
    if ((ret = kmgr_manager_create(&kconfig, &gw_kmgr_loop_ops, server, &server->kmgr)) != 0) {
        fprintf(stderr, "kgate: cannot create the kernel manager: %s\n", kmgr_strerror(ret));
        return -1;
    }
    server->tick_entry.cb = on_tick;
    h2o_timeout_link(loop, &server->tick_timeout, &server->tick_entry);

    if ((fd = open_listener(config)) == -1)
        return -1;
    server->listener = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    server->listener->data = server;
    h2o_socket_read_start(server->listener, on_accept);
    return 0;
}

uint16_t gw_server_port(const gw_server_t *server)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (server->listener == NULL || getsockname(h2o_socket_get_fd(server->listener), (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
}

void gw_server_defer(gw_server_t *server, h2o_timeout_entry_t *entry)
{
    if (!h2o_timeout_is_linked(entry))
        h2o_timeout_link(server->ctx.loop, &server->zero_timeout, entry);
}

void gw_server_begin_shutdown(gw_server_t *server)
{
    if (server->shutting_down)
        return;
    server->shutting_down = 1;
    if (server->listener != NULL) {
        h2o_socket_read_stop(server->listener);
        h2o_socket_close(server->listener);
        server->listener = NULL;
    }
    while (!h2o_linklist_is_empty(&server->contexts))
        gw_context_destroy(H2O_STRUCT_FROM_MEMBER(gw_context_t, link, server->contexts.next));
    gw_shell_kill_all(server);
    gw_runs_shutdown(server);
    gw_metrics_shutdown(server);
    kmgr_manager_shutdown_all(server->kmgr);
}

int gw_server_is_drained(gw_server_t *server)
{
    return kmgr_manager_num_processes(server->kmgr) == 0 && h2o_linklist_is_empty(&server->shell_runs) &&
           gw_metrics_is_drained(server);
}

void gw_server_dispose(gw_server_t *server)
{
    gw_server_begin_shutdown(server);
    kmgr_manager_destroy(server->kmgr);
    server->kmgr = NULL;
    gw_runs_dispose(server);
    gw_commands_dispose(server);
    gw_files_dispose(server);
    kmgr_kernelspecs_dispose(&server->specs);
    json_decref(server->language_info);
    server->language_info = NULL;
    /* h2o's own state last: nothing of ours references its loop, timeouts or pools any more */
    if (h2o_timeout_is_linked(&server->tick_entry))
        h2o_timeout_unlink(&server->tick_entry);
    if (h2o_timeout_is_linked(&server->kmgr_pending_entry))
        h2o_timeout_unlink(&server->kmgr_pending_entry);
    h2o_timeout_dispose(server->ctx.loop, &server->zero_timeout);
    h2o_timeout_dispose(server->ctx.loop, &server->yield_timeout);
    h2o_timeout_dispose(server->ctx.loop, &server->tick_timeout);
    h2o_timeout_dispose(server->ctx.loop, &server->ping_timeout);
    h2o_context_dispose(&server->ctx);
    /* h2o 2.2.5's h2o_multithread_destroy_queue (called by h2o_context_dispose) frees the queue
     * only under libuv: with evloop the struct itself is left to us */
    free(server->ctx.queue);
    h2o_config_dispose(&server->globalconf);
}
