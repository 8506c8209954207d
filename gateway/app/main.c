/* kgate's entry point: parse options, run the server's event loop, shut down cleanly on SIGINT/SIGTERM. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/log.h"
#include "kmgr/manager.h"
#include "core/config.h"
#include "app/server.h"
#include "ksys/log.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int signo)
{
    (void)signo;
    stop_requested = 1;
}

/*
 * --graceful-shutdown-timeout: no new connection or request, those in flight (a command's stream included) finish on their
 * own until the deadline; a second SIGTERM or SIGINT ends the wait. What is still running then is ended by the shutdown.
 */
static void drain(gw_server_t *server, h2o_evloop_t *loop, unsigned grace_ms)
{
    uint64_t start = ksys_now_ms(), deadline = start + grace_ms;
    size_t left;

    if (grace_ms == 0)
        return;
    stop_requested = 0;
    gw_server_begin_drain(server);
    ksys_log_info("stopping: %zu request(s) in flight get up to %u ms to finish (--graceful-shutdown-timeout)",
                  gw_server_requests_in_flight(server), grace_ms);
    while ((left = gw_server_requests_in_flight(server)) != 0 && !stop_requested && ksys_now_ms() < deadline)
        h2o_evloop_run(loop, (int32_t)(deadline - ksys_now_ms() < 50 ? deadline - ksys_now_ms() : 50));
    if (left == 0)
        ksys_log_info("stopping: every request finished (%llu ms)", (unsigned long long)(ksys_now_ms() - start));
    else
        ksys_log_warn("stopping: %zu request(s) still in flight %s: they are ended", left,
                      stop_requested ? "at a second signal" : "at the timeout");
}

int main(int argc, char **argv)
{
    gw_config_t config;
    gw_server_t server;
    h2o_evloop_t *loop;
    struct sigaction sa;
    uint64_t deadline;
    int ret;

    /*
     * A stream's bytes pass through in blocks of up to a few MiB (a kernel message, its JSON, its
     * frame), each freed within milliseconds now that run logs live on disk. glibc's adaptive
     * thresholds then kept giving the heap's top back and faulting it in again: page faults were
     * the largest cost of a 50 MB stream (161 ms of CPU against 80 ms when the old in-RAM logs
     * never freed anything). Fixed thresholds stop the churn: blocks under 4 MiB come from the
     * heap, and up to 8 MiB of free heap is kept for the next ones (86-92 ms per 50 MB, RSS 18 MiB
     * during and after).
     */
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
    wire_global_init();
    gw_config_init(&config);
    if ((ret = gw_config_parse_args(&config, argc, argv, stdout, stderr)) != 0) {
        gw_config_dispose(&config);
        return ret > 0 ? 0 : 2;
    }
    ksys_log_set_level((ksys_log_level_t)config.log_level);
    gw_config_derive_sandbox_caps(&config, (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE),
                                  (unsigned)sysconf(_SC_NPROCESSORS_ONLN));
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    /* a file size limit (RLIMIT_FSIZE) fails the write with EFBIG, which the run logs report, instead of killing kgate */
    sigaction(SIGXFSZ, &sa, NULL);

    loop = h2o_evloop_create();
    if (gw_server_init(&server, &config, loop) != 0) {
        gw_server_dispose(&server);
        h2o_evloop_destroy(loop);
        gw_config_dispose(&config);
        return 1;
    }
    ksys_log_info("%s listening on %s%s%s:%u, %zu kernelspec(s), runtime dir %s%s", GW_VERSION,
                  strchr(config.listen_host, ':') != NULL ? "[" : "", config.listen_host,
                  strchr(config.listen_host, ':') != NULL ? "]" : "", gw_server_port(&server), server.languages.specs.size,
                  kmgr_manager_runtime_dir(server.kmgr), config.access_token != NULL ? ", access token required" : "");
    if (config.e2b_listen_host != NULL)
        ksys_log_info("E2B listener on %s%s%s:%u", strchr(config.e2b_listen_host, ':') != NULL ? "[" : "", config.e2b_listen_host,
                      strchr(config.e2b_listen_host, ':') != NULL ? "]" : "", gw_server_e2b_port(&server));
    if (kmgr_manager_swept(server.kmgr) != 0)
        ksys_log_warn("killed %zu process(es) left running by an earlier kgate that died with this runtime dir",
                      kmgr_manager_swept(server.kmgr));

    while (!stop_requested && server.exit_status == 0)
        h2o_evloop_run(loop, INT32_MAX);
    if (server.exit_status == 0)
        drain(&server, loop, config.graceful_shutdown_ms);
    ret = server.exit_status;

    /* kernels get their shutdown sequence (shutdown_request, SIGTERM, SIGKILL); the loop keeps
     * serving their sockets and timers until every process is reaped */
    gw_server_begin_shutdown(&server);
    deadline = ksys_now_ms() + 2 * (uint64_t)config.shutdown_grace_ms + 2000;
    while (!gw_server_is_drained(&server) && ksys_now_ms() < deadline)
        h2o_evloop_run(loop, 50);
    /* connections still open (idle keep-alives, readers that stopped reading) are ended, so that
     * h2o releases their requests and what they hold before the server goes */
    deadline = ksys_now_ms() + 1000;
    while (gw_server_close_connections(&server) != 0 && ksys_now_ms() < deadline)
        h2o_evloop_run(loop, 10);
    gw_server_dispose(&server);
    h2o_evloop_destroy(loop);
    ksys_log_info("stopped");
    gw_config_dispose(&config);
    return ret;
}
