/* kernels/bash/src/job.c: starting an execution or a completion in bash, and answering it when bash is done. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "input.h"
#include "kernel_state.h"
#include "proc.h"
#include "utf8.h"

void bk_job_release(bk_job_t *job)
{
    wire_msg_destroy(job->req);
    job->req = NULL;
    job->kind = BK_JOB_NONE;
    job->seq = 0;
    free(job->input_req_id);
    job->input_req_id = NULL;
}

const char *bk_job_code(const wire_msg_t *req, size_t *len)
{
    json_t *code = json_object_get(req->content, "code");

    if (len != NULL)
        *len = json_string_length(code);
    return json_is_string(code) ? json_string_value(code) : "";
}

static void end_job(bk_kernel_t *k)
{
    bk_job_release(&k->job);
    bk_shell_drop_stdin(&k->shell);
}

/* Where bash's compgen writes a completion's candidates (the kernel's private directory). */
static char *complete_out_path(bk_kernel_t *k)
{
    char *path = NULL;
    if (asprintf(&path, "%s/complete.out", k->shell.dir) < 0)
        abort();
    return path;
}

/* `exited`: bash itself ended (status from its wait status) rather than the cell. */
static void finish_execute(bk_kernel_t *k, int status, int exited, const char *why)
{
    bk_job_t *job = &k->job;
    json_t *content, *metadata;
    char evalue[16], line[256];

    bk_output_drain(&k->output, &k->shell);
    bk_streams_flush_all(&k->output.streams, 1);
    content = json_pack("{sisis[]s{}sb}", "execution_count", job->count, "exit_status", status, "payload", "user_expressions",
                        "bash_exited", exited);
    metadata = json_pack("{si}", "exit_status", status);
    if (status == 0) {
        json_object_set_new(content, "status", json_string("ok"));
    } else {
        if (why != NULL)
            snprintf(line, sizeof(line), "%s", why);
        else if (exited)
            snprintf(line, sizeof(line), "bash exited with status %d; the next execution starts a new bash", status);
        else if (job->interrupted)
            snprintf(line, sizeof(line), "interrupted (exit status %d)", status);
        else
            snprintf(line, sizeof(line), "exit status %d", status);
        snprintf(evalue, sizeof(evalue), "%d", status);
        json_t *err = json_pack("{sssss[s]}", "ename", "ExitStatus", "evalue", evalue, "traceback", line);
        if (!job->silent)
            bk_channels_publish(&k->channels, job->req->header, "error", json_deep_copy(err));
        json_object_update(content, err);
        json_decref(err);
        json_object_set_new(content, "status", json_string("error"));
    }
    bk_channels_reply(&k->channels, WIRE_CHANNEL_SHELL, job->req, "execute_reply", content, metadata);
    bk_channels_publish_status(&k->channels, job->req, "idle");
    end_job(k);
}

/* `ok`: bash ran the completion command, so its file holds the candidates. */
static void finish_complete(bk_kernel_t *k, int ok)
{
    bk_job_t *job = &k->job;
    const char *code = bk_job_code(job->req, NULL);
    char *path = complete_out_path(k), *data = wire_malloc(BK_MAX_COMPLETE_OUTPUT);
    size_t len = 0;
    json_t *matches;

    if (ok) {
        FILE *fp = fopen(path, "r");
        if (fp != NULL) {
            len = fread(data, 1, BK_MAX_COMPLETE_OUTPUT, fp);
            fclose(fp);
        }
    }
    unlink(path);
    free(path);
    matches = bk_complete_matches(data, len, job->complete.sigil, BK_MAX_MATCHES);
    free(data);
    bk_channels_reply(&k->channels, WIRE_CHANNEL_SHELL, job->req, "complete_reply",
                      json_pack("{sssosIsIs{}}", "status", "ok", "matches", matches, "cursor_start",
                                (json_int_t)bk_utf8_count(code, job->complete.start), "cursor_end",
                                (json_int_t)bk_utf8_count(code, job->complete.end), "metadata"),
                      NULL);
    bk_channels_publish_status(&k->channels, job->req, "idle");
    end_job(k);
}

static void finish_job(bk_kernel_t *k, int status, int exited, const char *why)
{
    if (k->job.kind == BK_JOB_EXECUTE)
        finish_execute(k, status, exited, why);
    else if (k->job.kind == BK_JOB_COMPLETE)
        finish_complete(k, !exited); /* the status is the user's $?, restored after compgen */
}

void bk_job_execute(bk_kernel_t *k, wire_msg_t *req)
{
    bk_job_t *job = &k->job;
    json_t *c = req->content;
    size_t len;
    const char *code = bk_job_code(req, &len);
    int silent = json_is_true(json_object_get(c, "silent"));
    json_t *store = json_object_get(c, "store_history");
    int store_history = !silent && (store == NULL || json_is_true(store));
    int err;

    if (store_history)
        ++k->execution_count;
    job->kind = BK_JOB_EXECUTE;
    job->req = req;
    job->silent = silent;
    job->allow_stdin = json_is_true(json_object_get(c, "allow_stdin"));
    job->interrupted = 0;
    job->count = k->execution_count;
    job->next_stdin_scan = bk_now_ms() + BK_STDIN_FIRST_SCAN_MS;
    bk_output_direct(&k->output, req->header, silent);
    if (!silent)
        bk_channels_publish(&k->channels, req->header, "execute_input",
                            json_pack("{s:s%,s:i}", "code", code, len, "execution_count", job->count));
    if ((err = bk_shell_run_cell(&k->shell, code, len, job->allow_stdin, &job->seq)) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "cannot run bash: %s", strerror(-err));
        finish_execute(k, 126, 0, why);
    }
}

void bk_job_complete(bk_kernel_t *k, wire_msg_t *req)
{
    bk_job_t *job = &k->job;
    size_t len;
    const char *code = bk_job_code(req, &len);
    json_t *pos = json_object_get(req->content, "cursor_pos");
    char *out, *line;

    /* cursor_pos counts code points (protocol 5.2); absent or null means the end. */
    size_t cursor =
        json_is_integer(pos) && json_integer_value(pos) >= 0 ? bk_utf8_offset(code, len, (size_t)json_integer_value(pos)) : len;
    bk_complete_find(code, len, cursor, &job->complete);
    job->kind = BK_JOB_COMPLETE;
    job->req = req;
    job->interrupted = 0;
    out = complete_out_path(k);
    unlink(out);
    line = bk_complete_command(&job->complete, code, out);
    if (bk_shell_submit(&k->shell, line, &job->seq) != 0)
        finish_complete(k, 0);
    free(line);
    free(out);
}

void bk_job_interrupt(bk_kernel_t *k)
{
    if (k->job.kind == BK_JOB_NONE)
        return;
    k->job.interrupted = 1;
    if (bk_shell_cancel_pending(&k->shell))
        finish_job(k, 130, 0, NULL); /* bash had not even received it */
    else
        bk_shell_interrupt(&k->shell);
}

static void on_bash_exit(bk_kernel_t *k, int wstatus)
{
    int status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    int was_ready = k->shell.ready;

    bk_output_drain(&k->output, &k->shell);
    fprintf(stderr, "kgate-bash: bash exited with status %d\n", status);
    if (k->job.kind != BK_JOB_NONE)
        finish_job(k, status, 1, was_ready ? NULL : "bash could not be started");
    bk_shell_forget(&k->shell);
}

void bk_job_check_bash(bk_kernel_t *k)
{
    int wstatus;
    if (bk_shell_reap(&k->shell, &wstatus))
        on_bash_exit(k, wstatus);
}

void bk_job_on_markers(bk_kernel_t *k)
{
    unsigned long seq;
    int status, r;

    while ((r = bk_shell_read_marker(&k->shell, &seq, &status)) == 1)
        if (k->job.kind != BK_JOB_NONE && seq == k->job.seq)
            finish_job(k, status, 0, NULL);
    if (r == -EPIPE)
        bk_job_check_bash(k);
}
