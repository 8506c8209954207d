/* Runs executed by a context's kernel: a kmgr request is the producer, translated events go to the run. */
#include <stdlib.h>
#include "wire/alloc.h"
#include "kmgr/errors.h"
#include "gateway/kernel_run.h"
#include "gateway/server.h"
#include "gateway/translate.h"

typedef struct st_gw_kernel_run_t {
    gw_run_t *run;
    gw_context_t *ctx;
    kmgr_request_t *request;
    int execution_count;
    h2o_linklist_t link; /* in ctx->runs */
} gw_kernel_run_t;

static void kernel_run_free(gw_kernel_run_t *krun)
{
    h2o_linklist_unlink(&krun->link);
    free(krun);
}

/* The run is going away first (server shutdown): stop listening to the kernel. */
static void on_run_cancel(gw_run_t *run)
{
    gw_kernel_run_t *krun = run->producer_data;

    kmgr_request_cancel(krun->request);
    kernel_run_free(krun);
}

static const gw_run_producer_t kernel_producer = {on_run_cancel};

static void on_request_event(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data)
{
    gw_kernel_run_t *krun = data;
    gw_run_t *run = krun->run;
    const gw_translate_opts_t *opts = &run->server->translate;
    json_t *event;
    (void)req;

    krun->ctx->last_activity_ms = gw_unix_ms();
    switch (ev) {
    case KMGR_REQ_IOPUB:
        if ((event = gw_translate_iopub(msg, opts)) != NULL) {
            if (json_object_get(event, "error") != NULL)
                run->saw_error = 1;
            gw_run_append(run, event);
        }
        break;
    case KMGR_REQ_REPLY:
        if ((event = gw_translate_execute_reply(msg, run->saw_error, opts, &krun->execution_count)) != NULL) {
            run->saw_error = 1;
            gw_run_append(run, event);
        }
        break;
    case KMGR_REQ_INPUT:
        /* runs do not opt in to stdin (allow_stdin is false), so a kernel asking anyway gets "" */
        kmgr_request_input_reply(req, "");
        break;
    case KMGR_REQ_DONE:
        if (krun->execution_count > 0)
            krun->ctx->execution_count = krun->execution_count;
        gw_run_finish(run, krun->execution_count);
        kernel_run_free(krun);
        break;
    case KMGR_REQ_FAILED:
        if (err == KMGR_EDIED)
            gw_run_append(run, gw_error_event("KernelDied", kmgr_kernel_exit_reason(krun->ctx->kernel)));
        else
            gw_run_append(run, gw_error_event("KernelRestarted", "the kernel was restarted; its state was lost"));
        gw_run_finish(run, -1);
        kernel_run_free(krun);
        break;
    }
}

gw_run_t *gw_kernel_run_start(gw_context_t *ctx, const char *code)
{
    gw_run_t *run = gw_run_create(ctx->server, ctx->id);
    gw_kernel_run_t *krun = wire_calloc(1, sizeof(*krun));
    kmgr_execute_options_t opts = {.silent = 0, .store_history = 1, .allow_stdin = 0, .stop_on_error = 1};
    int ret;

    krun->run = run;
    krun->ctx = ctx;
    krun->execution_count = -1;
    ctx->last_activity_ms = gw_unix_ms();
    if ((ret = kmgr_kernel_execute(ctx->kernel, code, &opts, on_request_event, krun, &krun->request)) != 0) {
        free(krun);
        gw_run_append(run, gw_error_event("KernelDied", kmgr_kernel_exit_reason(ctx->kernel)));
        gw_run_finish(run, -1);
        return run;
    }
    h2o_linklist_insert(&ctx->runs, &krun->link);
    gw_run_set_producer(run, &kernel_producer, krun);
    return run;
}

void gw_kernel_runs_abort(gw_context_t *ctx, const char *ename, const char *evalue)
{
    while (!h2o_linklist_is_empty(&ctx->runs)) {
        gw_kernel_run_t *krun = H2O_STRUCT_FROM_MEMBER(gw_kernel_run_t, link, ctx->runs.next);
        gw_run_t *run = krun->run;
        if (krun->request != NULL && ctx->kernel != NULL)
            kmgr_request_cancel(krun->request);
        kernel_run_free(krun);
        gw_run_append(run, gw_error_event(ename, evalue));
        gw_run_finish(run, -1);
    }
}
