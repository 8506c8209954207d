/* kernels/bash/src/kernel.c: the bash kernel's set-up and its single-threaded poll loop, which hands each event to its part. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "input.h"
#include "kernel_state.h"
#include "proc.h"
#include "requests.h"

/* How soon to look again for bash's exit once its fd 3 closed but no SIGCHLD was seen. */
#define REAP_RETRY_MS 10

static void on_signals(bk_kernel_t *k)
{
    struct signalfd_siginfo si;

    while (read(k->sigfd, &si, sizeof(si)) == sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGINT:
            bk_job_interrupt(k);
            break;
        case SIGCHLD:
            bk_job_check_bash(k);
            break;
        default:
            k->stopping = 1;
            break;
        }
    }
}

/* Shell requests are served one at a time: while bash works on a job, they wait in ZeroMQ's queue. */
static void serve_requests(bk_kernel_t *k, wire_channel_t ch)
{
    wire_msg_t *msg;
    int r;

    while (!k->stopping && (ch != WIRE_CHANNEL_SHELL || k->job.kind == BK_JOB_NONE) &&
           (r = bk_channels_recv(&k->channels, ch, &msg)) != 0)
        if (r > 0)
            bk_requests_handle(k, ch, msg);
}

static void serve_input_replies(bk_kernel_t *k)
{
    wire_msg_t *msg;
    int r;

    while ((r = bk_channels_recv(&k->channels, WIRE_CHANNEL_STDIN, &msg)) != 0)
        if (r > 0)
            bk_input_on_reply(k, msg);
}

static int bash_exit_unseen(const bk_kernel_t *k)
{
    return k->shell.pid > 0 && k->shell.status_fd < 0;
}

static void on_timers(bk_kernel_t *k)
{
    long long now = bk_now_ms();

    bk_streams_flush_due(&k->output.streams, now);
    bk_input_scan(k, now);
    if (bash_exit_unseen(k))
        bk_job_check_bash(k);
}

/* The earlier of two deadlines, -1 standing for none. */
static long long earlier(long long a, long long b)
{
    return a < 0 || (b >= 0 && b < a) ? b : a;
}

static long poll_timeout(bk_kernel_t *k)
{
    long long now = bk_now_ms(), next;

    next = earlier(bk_streams_next_flush(&k->output.streams), bk_input_next_scan(k));
    if (bash_exit_unseen(k))
        next = earlier(next, now + REAP_RETRY_MS);
    if (next < 0)
        return -1;
    return next <= now ? 0 : (long)(next - now);
}

int bk_kernel_run(bk_kernel_t *k)
{
    while (!k->stopping) {
        zmq_pollitem_t items[8];
        int n = 0, i_sig, i_ctl, i_stdin, i_hb, i_shell = -1, i_out[BK_STREAM_COUNT] = {-1, -1}, i_st = -1;

        i_sig = n;
        items[n++] = (zmq_pollitem_t){.fd = k->sigfd, .events = ZMQ_POLLIN};
        i_ctl = n;
        items[n++] = (zmq_pollitem_t){.socket = k->channels.sock[WIRE_CHANNEL_CONTROL], .events = ZMQ_POLLIN};
        i_stdin = n;
        items[n++] = (zmq_pollitem_t){.socket = k->channels.sock[WIRE_CHANNEL_STDIN], .events = ZMQ_POLLIN};
        i_hb = n;
        items[n++] = (zmq_pollitem_t){.socket = k->channels.sock[WIRE_CHANNEL_HB], .events = ZMQ_POLLIN};
        if (k->job.kind == BK_JOB_NONE) {
            i_shell = n;
            items[n++] = (zmq_pollitem_t){.socket = k->channels.sock[WIRE_CHANNEL_SHELL], .events = ZMQ_POLLIN};
        }
        for (int i = 0; i != BK_STREAM_COUNT; ++i) {
            if (k->shell.out_fd[i] >= 0) {
                i_out[i] = n;
                items[n++] = (zmq_pollitem_t){.fd = k->shell.out_fd[i], .events = ZMQ_POLLIN};
            }
        }
        if (k->shell.status_fd >= 0) {
            i_st = n;
            items[n++] = (zmq_pollitem_t){.fd = k->shell.status_fd, .events = ZMQ_POLLIN};
        }
        if (zmq_poll(items, n, poll_timeout(k)) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            fprintf(stderr, "kgate-bash: zmq_poll: %s\n", zmq_strerror(zmq_errno()));
            return 1;
        }
        if (items[i_hb].revents & ZMQ_POLLIN)
            bk_channels_echo_heartbeats(&k->channels);
        if (items[i_sig].revents & ZMQ_POLLIN)
            on_signals(k);
        /* Output before markers: a marker means the output before it is complete. */
        for (int i = 0; i != BK_STREAM_COUNT; ++i)
            if (i_out[i] >= 0 && (items[i_out[i]].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                bk_output_read(&k->output, &k->shell, i);
        if (i_st >= 0 && (items[i_st].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
            bk_job_on_markers(k);
        if (items[i_ctl].revents & ZMQ_POLLIN)
            serve_requests(k, WIRE_CHANNEL_CONTROL);
        if (items[i_stdin].revents & ZMQ_POLLIN)
            serve_input_replies(k);
        if (i_shell >= 0 && (items[i_shell].revents & ZMQ_POLLIN))
            serve_requests(k, WIRE_CHANNEL_SHELL);
        on_timers(k);
    }
    return k->exit_code;
}

bk_kernel_t *bk_kernel_create(const wire_connection_t *conn, int sigfd)
{
    bk_kernel_t *k = wire_calloc(1, sizeof(*k));
    int err;

    k->sigfd = sigfd;
    /* bk_kernel_destroy may run before bk_shell_init: no descriptor of the shell's may read as 0. */
    k->shell.fifo_fd = k->shell.in_fd = k->shell.out_fd[0] = k->shell.out_fd[1] = k->shell.status_fd = -1;
    bk_output_init(&k->output, &k->channels);
    if (bk_channels_open(&k->channels, conn) != 0)
        goto Fail;
    if ((err = bk_shell_init(&k->shell)) != 0) {
        fprintf(stderr, "kgate-bash: cannot create a private directory: %s\n", strerror(-err));
        goto Fail;
    }
    /* Started now, so that the first execution does not wait for it; a failure shows then. */
    if ((err = bk_shell_ensure(&k->shell)) != 0)
        fprintf(stderr, "kgate-bash: cannot start bash: %s\n", strerror(-err));
    return k;

Fail:
    bk_kernel_destroy(k);
    return NULL;
}

void bk_kernel_destroy(bk_kernel_t *k)
{
    if (k == NULL)
        return;
    bk_shell_dispose(&k->shell);
    bk_job_release(&k->job);
    bk_output_dispose(&k->output);
    bk_channels_close(&k->channels);
    free(k->bash_version);
    if (k->sigfd >= 0)
        close(k->sigfd);
    free(k);
}
