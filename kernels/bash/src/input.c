/* kernels/bash/src/input.c: input_request when a cell waits on its stdin, and input_reply into the cell's FIFO. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "input.h"
#include "kernel_state.h"
#include "proc.h"

void bk_input_on_reply(bk_kernel_t *k, wire_msg_t *msg)
{
    bk_job_t *job = &k->job;
    const char *value = json_string_value(json_object_get(msg->content, "value"));
    size_t len = json_string_length(json_object_get(msg->content, "value"));

    /* jupyter_client sends input_reply without a parent_header (ipykernel takes whatever comes next on
     * stdin), so an empty parent is accepted; a reply to an older input_request is not. */
    const char *parent = wire_msg_parent_id(msg);
    if (strcmp(wire_msg_type(msg), "input_reply") == 0 && job->input_req_id != NULL &&
        (parent[0] == '\0' || strcmp(parent, job->input_req_id) == 0) && value != NULL && len < BK_MAX_INPUT_BYTES) {
        char *line = wire_malloc(len + 1);
        memcpy(line, value, len);
        line[len] = '\n';
        bk_shell_feed_stdin(&k->shell, line, len + 1);
        free(line);
        free(job->input_req_id);
        job->input_req_id = NULL;
        job->next_stdin_scan = bk_now_ms() + BK_STDIN_SCAN_MS;
    }
    wire_msg_destroy(msg);
}

static void ask_for_input(bk_kernel_t *k)
{
    wire_msg_t *msg;

    /* What the cell printed before it started reading (its prompt) goes out first. */
    bk_output_drain(&k->output, &k->shell);
    bk_streams_flush_all(&k->output.streams, 0);
    msg = wire_msg_create("input_request", k->channels.session, json_pack("{sssb}", "prompt", "", "password", 0));
    wire_msg_set_parent(msg, k->job.req); /* the shell identity, which the client's stdin socket shares */
    k->job.input_req_id = wire_strdup(wire_msg_id(msg));
    bk_channels_send(&k->channels, WIRE_CHANNEL_STDIN, msg);
}

long long bk_input_next_scan(const bk_kernel_t *k)
{
    const bk_job_t *job = &k->job;

    if (job->kind != BK_JOB_EXECUTE || !job->allow_stdin || job->input_req_id != NULL)
        return -1;
    return job->next_stdin_scan;
}

void bk_input_scan(bk_kernel_t *k, long long now_ms)
{
    long long due = bk_input_next_scan(k);

    if (due < 0 || due > now_ms)
        return;
    k->job.next_stdin_scan = now_ms + BK_STDIN_SCAN_MS;
    if (bk_shell_stdin_wanted(&k->shell))
        ask_for_input(k);
}
