/* Runs executed by a context's kernel: a per-context FIFO, timeouts, stdin, and kernel death. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/json_scan.h"
#include "ksys/errors.h"
#include "code/kernel_run_private.h"
#include "core/errors.h"
#include "code/translate.h"
#include "code/tool_calls.h"

static const gw_run_producer_t kernel_producer;
static void start_next(gw_context_t *ctx);

void gw_kernel_run_interrupt(gw_kernel_run_t *krun)
{
    krun->executing = 1;
    krun->interrupted_ms = gw_now_ms();
    if (krun->first_interrupt_ms == 0)
        krun->first_interrupt_ms = krun->interrupted_ms;
    kmgr_kernel_interrupt(krun->ctx->kernel);
}

static void kernel_run_free(gw_kernel_run_t *krun)
{
    h2o_linklist_unlink(&krun->link);
    json_decref(krun->reply_error);
    free(krun->code);
    free(krun->setup_code);
    gw_tool_calls_dispose(&krun->tool_calls, krun->run);
    free(krun);
}

/* Finishes the run and forgets it; the next queued run of the context starts. */
static void kernel_run_end(gw_kernel_run_t *krun, const char *outcome)
{
    gw_context_t *ctx = krun->ctx;

    if (krun->execution_count > 0)
        ctx->execution_count = krun->execution_count;
    gw_run_finish(krun->run, krun->execution_count, outcome);
    gw_code_figures_run_end(&ctx->contexts->figures, outcome, krun->submitted_ms);
    kernel_run_free(krun);
    gw_context_touch(ctx);
    if (ctx->contexts->after_run(ctx))
        return;
    start_next(ctx);
}

static void append_timeout_error(gw_kernel_run_t *krun)
{
    const char *state =
        krun->restarting ? "did not stop when interrupted; the kernel was restarted and its state lost" : "was interrupted";
    char evalue[200];

    if (krun->stdin_timed_out) {
        snprintf(evalue, sizeof(evalue), "no input arrived within %u ms of the input request; the run %s", krun->stdin_timeout_ms,
                 state);
        gw_run_append(krun->run, gw_error_event("StdinTimeout", evalue));
        return;
    }
    snprintf(evalue, sizeof(evalue), "the run exceeded its timeout of %u ms and %s", krun->timeout_ms, state);
    gw_run_append(krun->run, gw_error_event("TimeoutError", evalue));
}

static void append_reply_lost_error(gw_kernel_run_t *krun)
{
    gw_run_append(krun->run,
                  gw_error_event("MessageDropped", "the kernel's reply to this run was dropped with a message over the "
                                                   "message cap (--max-message-bytes); whether the run succeeded is unknown"));
}

/* The run's kernel died under it: DEAD, or (kmgr_kernel_options_t.restart_limit) already restarting without its state. */
static void append_died_error(gw_kernel_run_t *krun)
{
    kmgr_kernel_t *kernel = krun->ctx->kernel;
    unsigned in_a_row, limit;
    char evalue[KMGR_REASON_MAX + 200];

    if (kmgr_kernel_state(kernel) != KMGR_KERNEL_RESTARTING) {
        gw_run_append(krun->run, gw_error_event("KernelDied", kmgr_kernel_exit_reason(kernel)));
        return;
    }
    kmgr_kernel_auto_restarts(kernel, &in_a_row, &limit);
    snprintf(evalue, sizeof(evalue), "%s; kgate restarted the kernel (automatic restart %u of %u in a row): its state was lost",
             kmgr_kernel_last_death(kernel), in_a_row, limit);
    gw_run_append(krun->run, gw_error_event("KernelDied", evalue));
}

/*
 * A stream message whose content kernelmgr kept raw (the run opted in: kmgr_execute_options_t.raw_stream): its text
 * token goes into the event as the kernel encoded it, cut to the run's output room if need be (a result's MIME values
 * likewise: wire_json_scan_bundle), unless the content is not simple (then it is parsed, and a malformed one becomes
 * today's message_undecodable notice).
 */
static void append_raw_stream(gw_kernel_run_t *krun, const wire_msg_t *msg, const gw_translate_opts_t *opts)
{
    wire_stream_fields_t f;
    wire_msg_t parsed;
    json_t *event;

    if (strcmp(wire_msg_type(msg), "stream") != 0) {
        /* an execute_result or display_data (WIRE_DECODE_RAW_RESULT): its bundle as the kernel encoded it */
        wire_bundle_fields_t *bundle = wire_malloc(sizeof(*bundle));
        int simple = wire_json_scan_bundle(msg->raw_content.base, msg->raw_content.len, bundle);
        if (simple) {
            size_t len;
            char *results = gw_translate_raw_bundle(bundle, opts, &len);
            gw_run_append_result_json(krun->run, results, len, strcmp(wire_msg_type(msg), "display_data") == 0);
            free(results);
        }
        free(bundle);
        if (simple)
            return;
    } else if (wire_json_scan_stream(msg->raw_content.base, msg->raw_content.len, &f) && f.name != NULL) {
        gw_run_append_stream(krun->run, f.name_len == 6 && memcmp(f.name, "stderr", 6) == 0, f.text, f.text_len, f.text_decoded_len,
                             msg->raw_storage);
        return;
    }
    /* a view of the borrowed message with its content parsed: the translation of every other message */
    parsed = *msg;
    parsed.content_raw = 0;
    parsed.raw_content = (wire_frame_t){NULL, 0};
    if ((parsed.content = wire_msg_raw_content_parse(msg)) == NULL) {
        parsed.content = json_object();
        parsed.content_undecodable = 1;
    }
    if ((event = gw_translate_iopub(&parsed, opts)) != NULL)
        gw_run_append(krun->run, event);
    json_decref(parsed.content);
}

static int is_output(const char *type)
{
    return strcmp(type, "stream") == 0 || strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0 ||
           strcmp(type, "error") == 0;
}

static void on_request_event(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data)
{
    gw_kernel_run_t *krun = data;
    gw_run_t *run = krun->run;
    const gw_translate_opts_t *opts = &krun->ctx->contexts->translate;
    json_t *event;

    gw_context_touch(krun->ctx);
    switch (ev) {
    case KMGR_REQ_IOPUB:
        if (!krun->saw_output && is_output(wire_msg_type(msg))) {
            krun->saw_output = 1;
            gw_code_figures_first_output(&krun->ctx->contexts->figures, krun->submitted_ms);
        }
        if (msg->content_raw) {
            append_raw_stream(krun, msg, opts);
            if (msg->content_cut)
                gw_run_report_cut_message(run, msg->text_dropped);
            kmgr_request_set_text_room(req, gw_run_text_room(run)); /* a message over the cap: a head no longer than it keeps */
            break;
        }
        if (!krun->executing && strcmp(wire_msg_type(msg), "execute_input") == 0) {
            krun->executing = 1;
            if (krun->stop_wanted)
                gw_kernel_run_interrupt(krun);
        }
        if ((event = gw_translate_iopub(msg, opts)) == NULL)
            break;
        if (json_object_get(event, "error") != NULL) {
            if (krun->timed_out) { /* the KeyboardInterrupt our own interrupt caused: TimeoutError says it */
                json_decref(event);
                break;
            }
            krun->saw_error = 1;
        }
        gw_run_append(run, event);
        break;
    case KMGR_REQ_DROPPED:
        krun->saw_oversized = 1;
        gw_run_report_oversized_message(run);
        break;
    case KMGR_REQ_REPLY:
        krun->got_reply = 1;
        /* the iopub error may still be on its way (shell and iopub are separate sockets): decide at DONE */
        if ((event = gw_translate_execute_reply(msg, krun->saw_error, opts, &krun->execution_count)) != NULL) {
            json_decref(krun->reply_error);
            krun->reply_error = event;
        }
        break;
    case KMGR_REQ_INPUT: {
        const char *prompt = json_string_value(json_object_get(msg->content, "prompt"));
        json_t *calls;
        if (gw_tool_batch_parse(prompt, &calls)) {
            /* code mode: a batch of tool calls, not a question for a person (no stdin timeout) */
            char *reply = gw_tool_calls_open_batch(&krun->tool_calls, run, calls);
            json_decref(calls);
            if (reply != NULL)
                kmgr_request_input_reply(req, reply);
            free(reply);
            break;
        }
        if (!krun->allow_stdin) {
            /* the kernel asked although the run did not opt in: an empty line, never a hang; a run with tools
             * has stdin open for them only, and input() there ends at once as at end of file ("\x04" is
             * ipykernel's EOF: EOFError), as it fails at once in a run without stdin */
            kmgr_request_input_reply(req, krun->tool_calls.tools != NULL ? "\x04" : "");
            break;
        }
        krun->input_pending = 1;
        krun->input_deadline_ms = gw_now_ms() + krun->stdin_timeout_ms;
        event = gw_event_new("input_request");
        json_object_set_new(event, "text", json_string(prompt ?: ""));
        json_object_set_new(event, "password", json_boolean(json_is_true(json_object_get(msg->content, "password"))));
        gw_run_append(run, event);
        break;
    }
    case KMGR_REQ_DONE:
        krun->request = NULL;
        gw_tool_calls_close(&krun->tool_calls);
        if (krun->timed_out) {
            append_timeout_error(krun);
            kernel_run_end(krun, "timeout");
        } else if (!krun->got_reply && krun->stop_wanted && !krun->saw_error) {
            /* ipykernel caught the interrupt around the code ("KeyboardInterrupt caught in kernel") and sent no reply */
            gw_run_append(run, gw_error_event("KeyboardInterrupt", "the run was interrupted; the kernel caught the interrupt "
                                                                   "outside the code and sent no reply"));
            kernel_run_end(krun, "error");
        } else if (!krun->got_reply && krun->saw_oversized) {
            /* the kernel has dealt with the run, but its answer is lost: unless an error was relayed, say so */
            if (!krun->saw_error)
                append_reply_lost_error(krun);
            kernel_run_end(krun, "error");
        } else {
            if (krun->reply_error != NULL && !krun->saw_error) {
                krun->saw_error = 1;
                gw_run_append(run, krun->reply_error);
                krun->reply_error = NULL;
            }
            kernel_run_end(krun, krun->saw_error ? "error" : "ok");
        }
        break;
    case KMGR_REQ_FAILED:
        krun->request = NULL;
        gw_tool_calls_close(&krun->tool_calls);
        if (krun->timed_out) {
            append_timeout_error(krun);
            kernel_run_end(krun, "timeout");
        } else if (err == KSYS_EDIED) {
            append_died_error(krun);
            kernel_run_end(krun, "kernel_died");
        } else {
            gw_run_append(run, gw_error_event("KernelRestarted", krun->stop_restarted
                                                                     ? "the run did not end when interrupted (its kernel never "
                                                                       "ends a cell interrupted while it awaits); the kernel was "
                                                                       "restarted and its state lost"
                                                                     : "the kernel was restarted; its state was lost"));
            kernel_run_end(krun, "error");
        }
        break;
    }
}

/*
 * Output the kernel published for the run's code after the run had ended (kmgr_late_sink_cb; `tag` is the run's id, `data`
 * the registry): counted on the run while it is retained, so that GET of it says what came too late (docs/kernels.md,
 * "Late output"); a run collected since is gone, and kernelmgr's count and log are all there is.
 */
static int on_late_output(const char *tag, const char *msg_type, uint64_t text_bytes, void *data)
{
    gw_run_t *run = gw_run_find(data, tag);
    (void)msg_type;

    return run != NULL && gw_run_report_late(run, text_bytes);
}

/* Sends the run's own code (after its setup, if any). Returns 0, or -1 after aborting the context's runs. */
static int send_code(gw_kernel_run_t *krun)
{
    gw_context_t *ctx = krun->ctx;
    /* runs are serialised here already; ipykernel's stop_on_error would abort the next run if it
     * arrived within its abort window after an error */
    kmgr_execute_options_t opts = {.silent = krun->silent, .store_history = !krun->silent, .stop_on_error = 0, .raw_stream = 1};

    /* tool calls travel as stdin requests: the kernel must be allowed to make them */
    opts.allow_stdin = krun->allow_stdin || krun->tool_calls.tools != NULL;
    if (kmgr_kernel_execute(ctx->kernel, krun->code, &opts, on_request_event, krun, &krun->request) != 0) {
        gw_kernel_runs_abort(ctx, "KernelDied", kmgr_kernel_exit_reason(ctx->kernel), "kernel_died");
        return -1;
    }
    kmgr_request_set_text_room(krun->request, gw_run_text_room(krun->run)); /* its output budget and one log event */
    kmgr_request_set_late_sink(krun->request, on_late_output, ctx->contexts->runs, gw_run_id(krun->run));
    free(krun->code);
    krun->code = NULL;
    krun->in_setup = 0;
    return 0;
}

/* The setup execute of a run (its tools, or a door's setup_code): silent, no history; the run's code follows once it is done. */
static void on_setup_event(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data)
{
    gw_kernel_run_t *krun = data;
    const char *status;

    gw_context_touch(krun->ctx);
    switch (ev) {
    case KMGR_REQ_IOPUB:
    case KMGR_REQ_DROPPED:
        break;
    case KMGR_REQ_INPUT:
        kmgr_request_input_reply(req, "");
        break;
    case KMGR_REQ_REPLY:
        status = json_string_value(json_object_get(msg->content, "status"));
        if (status == NULL || strcmp(status, "ok") != 0) {
            krun->setup_failed = 1;
            snprintf(krun->setup_error, sizeof(krun->setup_error), "%s: %s",
                     json_string_value(json_object_get(msg->content, "ename")) ?: (status ?: "no status"),
                     json_string_value(json_object_get(msg->content, "evalue")) ?: "");
        }
        break;
    case KMGR_REQ_DONE:
        gw_kernel_run_arm_deadline(krun); /* the tick may not have seen the setup sent: the code's time counts from it */
        krun->request = NULL;
        if (krun->timed_out) {
            append_timeout_error(krun);
            kernel_run_end(krun, "timeout");
        } else if (krun->setup_failed) {
            char evalue[400];
            int tools = krun->tool_calls.tools != NULL;
            snprintf(evalue, sizeof(evalue), "%s (%s); the run's code did not run",
                     tools ? "the tools could not be bound in the kernel" : "the run's setup failed in the kernel",
                     krun->setup_error);
            gw_run_append(krun->run, gw_error_event(tools ? "ToolSetupFailed" : "SetupFailed", evalue));
            kernel_run_end(krun, "error");
        } else if (krun->stop_wanted) {
            gw_run_append(krun->run, gw_error_event("Cancelled", "the run was cancelled before its code started"));
            kernel_run_end(krun, "cancelled");
        } else {
            send_code(krun);
        }
        break;
    case KMGR_REQ_FAILED:
        on_request_event(req, ev, msg, err, data);
        break;
    }
}

/* A `status` event of the run itself: `queued`, `busy`. */
static json_t *status_event(const char *text)
{
    json_t *ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string(text));
    return ev;
}

static void start_next(gw_context_t *ctx)
{
    gw_kernel_run_t *krun;

    if (h2o_linklist_is_empty(&ctx->runs))
        return;
    krun = H2O_STRUCT_FROM_MEMBER(gw_kernel_run_t, link, ctx->runs.next);
    if (krun->request != NULL)
        return;
    if (krun->setup_code != NULL) {
        kmgr_execute_options_t opts = {.silent = 1, .store_history = 0, .allow_stdin = 0, .stop_on_error = 0};
        if (kmgr_kernel_execute(ctx->kernel, krun->setup_code, &opts, on_setup_event, krun, &krun->request) != 0) {
            gw_kernel_runs_abort(ctx, "KernelDied", kmgr_kernel_exit_reason(ctx->kernel), "kernel_died");
            return;
        }
        free(krun->setup_code);
        krun->setup_code = NULL;
        krun->in_setup = 1;
    } else if (send_code(krun) != 0) {
        return;
    }
    gw_run_mark_started(krun->run);
    /* kgate's own word that the run reached the kernel, after `queued` if it waited. The kernel's busy
     * status comes a moment later and is not relayed (translate.h): a run that did not wait has init
     * and busy go out in one write, not two, and its client wakes once for both. */
    gw_run_append(krun->run, status_event("busy"));
    gw_kernel_run_arm_deadline(krun);
}

int gw_kernel_run_submit(gw_context_t *ctx, const gw_kernel_run_options_t *opts, gw_run_t **out)
{
    gw_kernel_run_t *krun;
    gw_run_t *run;

    if (gw_context_is_dead(ctx))
        return GW_EKERNELDEAD;
    if (opts->tools != NULL && strcasecmp(ctx->spec->language, "python") != 0)
        return GW_ETOOLSUNSUPPORTED;
    if (gw_kernel_runs_count(ctx) > ctx->contexts->host->config->max_queue)
        return GW_EQUEUEFULL;
    run = gw_run_create(ctx->contexts->runs, ctx->id, ctx->id, &opts->limits);
    krun = wire_calloc(1, sizeof(*krun));
    krun->run = run;
    krun->ctx = ctx;
    krun->code = wire_strdup(opts->code);
    gw_tool_calls_init(&krun->tool_calls, opts->tools, ctx->contexts->host->config);
    if (opts->tools != NULL)
        krun->setup_code = gw_toolset_python_setup(opts->tools, ctx->contexts->host->config);
    else if (opts->setup_code != NULL)
        krun->setup_code = wire_strdup(opts->setup_code);
    krun->execution_count = -1;
    krun->submitted_ms = gw_now_ms();
    krun->allow_stdin = opts->allow_stdin;
    krun->silent = opts->silent;
    krun->timeout_ms = opts->timeout_ms;
    krun->stdin_timeout_ms = opts->stdin_timeout_ms != 0 ? opts->stdin_timeout_ms : ctx->contexts->host->config->stdin_timeout_ms;
    gw_context_touch(ctx);
    gw_run_set_producer(run, &kernel_producer, krun);
    h2o_linklist_insert(&ctx->runs, &krun->link);
    if (krun->link.prev != &ctx->runs) {
        json_t *ev = status_event("queued");
        json_object_set_new(ev, "position", json_integer((json_int_t)gw_kernel_runs_count(ctx) - 1));
        gw_run_append(run, ev);
    }
    start_next(ctx);
    *out = run;
    return 0;
}

size_t gw_kernel_runs_count(const gw_context_t *ctx)
{
    size_t n = 0;
    const h2o_linklist_t *node;
    for (node = ctx->runs.next; node != &ctx->runs; node = node->next)
        ++n;
    return n;
}

void gw_kernel_runs_abort(gw_context_t *ctx, const char *ename, const char *evalue, const char *outcome)
{
    while (!h2o_linklist_is_empty(&ctx->runs)) {
        gw_kernel_run_t *krun = H2O_STRUCT_FROM_MEMBER(gw_kernel_run_t, link, ctx->runs.next);
        gw_run_t *run = krun->run;
        /* a destroyed kernel drops its requests itself; a live one is told to stop calling back */
        if (krun->request != NULL && ctx->kernel != NULL)
            kmgr_request_cancel(krun->request);
        gw_run_append(run, gw_error_event(ename, evalue));
        gw_run_finish(run, -1, outcome);
        gw_code_figures_run_end(&ctx->contexts->figures, outcome, krun->submitted_ms);
        kernel_run_free(krun);
    }
}

void gw_kernel_runs_status(gw_context_t *ctx, const char *text)
{
    for (h2o_linklist_t *node = ctx->runs.next; node != &ctx->runs; node = node->next)
        gw_run_append(H2O_STRUCT_FROM_MEMBER(gw_kernel_run_t, link, node)->run, status_event(text));
}

/* --- the producer interface, as the run and the executions API see it --- */

static void on_cancel(gw_run_t *run, void *data)
{
    gw_kernel_run_t *krun = data;
    (void)run;

    if (krun->request != NULL)
        kmgr_request_cancel(krun->request);
    kernel_run_free(krun);
}

static void on_stop(gw_run_t *run, void *data)
{
    gw_kernel_run_t *krun = data;
    gw_context_t *ctx = krun->ctx;

    if (krun->request != NULL) {
        /* the interrupt withdraws a batch of tool calls the kernel waits on */
        gw_tool_calls_close(&krun->tool_calls);
        /*
         * Only the code is interrupted: ipykernel ignores SIGINT until its handler runs, and one that lands in
         * the handler around the code (before it, or after the code ended and before the reply left) loses
         * the reply. So the interrupt waits for execute_input, none goes once the reply is in (the code has
         * ended), and a run gets one every STOP_RETRY_MS at most (kmgr_kernel_interrupt also sends no second one
         * while one is in flight): a storm of stops is one interrupt.
         */
        if (krun->got_reply)
            return;
        if (!krun->stop_wanted) {
            krun->stop_wanted = 1;
            krun->stop_wanted_ms = gw_now_ms();
        }
        if (krun->executing && gw_now_ms() - krun->interrupted_ms >= STOP_RETRY_MS)
            gw_kernel_run_interrupt(krun);
        return;
    }
    gw_run_append(run, gw_error_event("Cancelled", "the run was cancelled before it started"));
    gw_run_finish(run, -1, "cancelled");
    gw_code_figures_run_end(&ctx->contexts->figures, "cancelled", krun->submitted_ms);
    kernel_run_free(krun);
    ctx->contexts->after_run(ctx);
}

static int on_input(gw_run_t *run, void *data, const char *value)
{
    gw_kernel_run_t *krun = data;
    (void)run;

    if (!krun->input_pending || krun->request == NULL || kmgr_request_input_reply(krun->request, value) != 0)
        return GW_ENOINPUT;
    krun->input_pending = 0;
    return 0;
}

static int on_tool_result(gw_run_t *run, void *data, const char *call_id, const json_t *result, const char *error)
{
    gw_kernel_run_t *krun = data;
    char *reply;
    int ret;
    (void)run;

    if ((ret = gw_tool_calls_answer(&krun->tool_calls, call_id, result, error, &reply)) != 0)
        return ret;
    /* an open batch implies the request in flight is the run's code, waiting on stdin */
    if (reply != NULL && krun->request != NULL)
        kmgr_request_input_reply(krun->request, reply);
    free(reply);
    return 0;
}

static const gw_run_producer_t kernel_producer = {on_cancel, on_stop, on_input, on_tool_result};
