/* tests/kernelmgr/kmgr_test.c: fixture and recorders shared by the kernelmgr tests. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "wire/codec.h"
#include "kmgr_test.h"

kt_env_t kt;

void kt_setup_config(const kmgr_config_t *config)
{
    wire_global_init();
    memset(&kt, 0, sizeof(kt));
    kt.loop = poll_loop_create();
    cr_assert_eq(kmgr_manager_create(config, &poll_loop_ops, kt.loop, &kt.mgr), 0);
    poll_loop_set_manager(kt.loop, kt.mgr);
    kmgr_kernelspecs_discover(NULL, 0, &kt.specs, NULL);
    cr_assert_not_null(kt.python = kmgr_kernelspecs_find(&kt.specs, "python3"), "the python3 kernelspec is installed");
}

void kt_setup(void)
{
    kt_setup_config(NULL);
}

static int no_process(void *arg)
{
    (void)arg;
    return kmgr_manager_num_processes(kt.mgr) == 0;
}

int kt_wait_no_process(unsigned ms)
{
    return poll_loop_run_until(kt.loop, no_process, NULL, ms);
}

void kt_teardown(void)
{
    if (kt.mgr != NULL) {
        kmgr_manager_shutdown_all(kt.mgr);
        kt_wait_no_process(10000);
        kmgr_manager_destroy(kt.mgr);
        cr_expect_eq(poll_loop_num_watches(kt.loop), 0, "every socket is unwatched");
    }
    poll_loop_destroy(kt.loop);
    kmgr_kernelspecs_dispose(&kt.specs);
    memset(&kt, 0, sizeof(kt));
}

void kt_on_state(kmgr_kernel_t *kernel, void *data)
{
    kt_states_t *st = data;
    kmgr_kernel_state_t state = kmgr_kernel_state(kernel);

    if (st->n < sizeof(st->log) / sizeof(st->log[0]))
        st->log[st->n++] = state;
    if (!kmgr_kernel_answering(kernel) && !st->silent) {
        st->silent = 1;
        ++st->silences;
    } else if (kmgr_kernel_answering(kernel) && st->silent) {
        st->silent = 0;
        ++st->recoveries;
    }
    if (state == KMGR_KERNEL_DEAD && st->destroy_on_dead)
        kmgr_kernel_destroy(kernel);
    if (state == KMGR_KERNEL_DEAD && st->restart_on_dead) {
        st->restart_on_dead = 0;
        kmgr_kernel_restart(kernel);
    }
}

int kt_states_saw(const kt_states_t *st, kmgr_kernel_state_t state)
{
    for (size_t i = 0; i != st->n; ++i)
        if (st->log[i] == state)
            return 1;
    return 0;
}

typedef struct st_state_wait_t {
    kmgr_kernel_t *kernel;
    kmgr_kernel_state_t state;
} state_wait_t;

static int in_state(void *arg)
{
    state_wait_t *w = arg;
    return kmgr_kernel_state(w->kernel) == w->state;
}

int kt_wait_state(kmgr_kernel_t *kernel, kmgr_kernel_state_t state, unsigned ms)
{
    state_wait_t w = {kernel, state};
    return poll_loop_run_until(kt.loop, in_state, &w, ms);
}

kmgr_kernel_t *kt_start_ready(const kmgr_kernelspec_t *spec, kt_states_t *st)
{
    kmgr_kernel_options_t opts = {.spec = spec != NULL ? spec : kt.python, .on_state = kt_on_state, .data = st};
    kmgr_kernel_t *kernel = NULL;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &kernel), 0);
    cr_assert_eq(kmgr_kernel_state(kernel), KMGR_KERNEL_STARTING);
    cr_assert(kt_wait_state(kernel, KMGR_KERNEL_IDLE, 30000), "kernel ready within 30 s (state %s, reason '%s')",
              kmgr_kernel_state_name(kmgr_kernel_state(kernel)), kmgr_kernel_exit_reason(kernel));
    return kernel;
}

void kt_rec_init(kt_rec_t *rec)
{
    memset(rec, 0, sizeof(*rec));
    rec->iopub = json_array();
    rec->raw = json_array();
    rec->input_ret = 1;
}

void kt_rec_dispose(kt_rec_t *rec)
{
    json_decref(rec->iopub);
    json_decref(rec->raw);
    json_decref(rec->buffers);
    json_decref(rec->reply);
    json_decref(rec->input_content);
}

void kt_on_req(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data)
{
    kt_rec_t *rec = data;

    if (rec->n_done + rec->n_failed != 0)
        ++rec->after_final;
    switch (ev) {
    case KMGR_REQ_IOPUB: {
        const char *type = wire_msg_type(msg);
        ++rec->n_iopub;
        if (strcmp(type, "status") == 0 &&
            strcmp(json_string_value(json_object_get(msg->content, "execution_state")) ?: "", "idle") == 0)
            rec->idle_at = ksys_now_ms();
        /* a raw message's parsed content is empty: its bytes, parsed, so that kt_iopub reads every message alike */
        json_array_append_new(rec->iopub,
                              json_pack("{s:s, s:o}", "msg_type", type, "content",
                                        msg->content_raw ? wire_msg_raw_content_parse(msg) : json_incref(msg->content)));
        if (msg->content_raw)
            json_array_append_new(rec->raw, json_pack("{s:s, s:o?}", "msg_type", type, "content", wire_msg_raw_content_parse(msg)));
        if (msg->buffers.size != 0) {
            json_decref(rec->buffers);
            rec->buffers = json_array();
            for (size_t i = 0; i != msg->buffers.size; ++i)
                json_array_append_new(rec->buffers, json_stringn(msg->buffers.entries[i].base, msg->buffers.entries[i].len));
        }
        if (strcmp(type, "stream") == 0) {
            json_t *text = json_object_get(msg->content, "text");
            int is_err = strcmp(json_string_value(json_object_get(msg->content, "name")) ?: "", "stderr") == 0;
            char *to = is_err ? rec->err_text : rec->out;
            size_t cap = is_err ? sizeof(rec->err_text) : sizeof(rec->out);
            if (text != NULL) {
                strncat(to, json_string_value(text), cap - strlen(to) - 1);
                *(is_err ? &rec->err_bytes : &rec->out_bytes) += json_string_length(text);
            }
        }
        if (msg->content_cut) {
            ++rec->n_cut;
            rec->text_dropped += msg->text_dropped;
        }
        if (rec->cancel_on_iopub) {
            rec->cancel_on_iopub = 0;
            kmgr_request_cancel(req);
        }
        if (rec->destroy_on_iopub != NULL) {
            kmgr_kernel_t *kernel = rec->destroy_on_iopub;
            rec->destroy_on_iopub = NULL;
            kmgr_kernel_destroy(kernel);
        }
        break;
    }
    case KMGR_REQ_REPLY:
        rec->reply_at = ksys_now_ms();
        ++rec->n_reply;
        json_decref(rec->reply);
        rec->reply = json_incref(msg->content);
        break;
    case KMGR_REQ_INPUT:
        ++rec->n_input;
        json_decref(rec->input_content);
        rec->input_content = json_incref(msg->content);
        if (rec->answer != NULL)
            rec->input_ret = kmgr_request_input_reply(req, rec->answer);
        break;
    case KMGR_REQ_DROPPED:
        ++rec->n_dropped;
        rec->dropped_err = err;
        break;
    case KMGR_REQ_DONE:
        rec->done_at = ksys_now_ms();
        ++rec->n_done;
        break;
    case KMGR_REQ_FAILED:
        ++rec->n_failed;
        rec->err = err;
        break;
    }
}

int kt_rec_finished(void *arg)
{
    kt_rec_t *rec = arg;
    return rec->n_done + rec->n_failed != 0;
}

int kt_execute(kmgr_kernel_t *kernel, const char *code, kt_rec_t *rec)
{
    return kmgr_kernel_execute(kernel, code, NULL, kt_on_req, rec, &rec->req);
}

int kt_wait_rec(kt_rec_t *rec, unsigned ms)
{
    return poll_loop_run_until(kt.loop, kt_rec_finished, rec, ms);
}

json_t *kt_iopub(const kt_rec_t *rec, const char *msg_type)
{
    size_t i;
    json_t *m;

    json_array_foreach(rec->iopub, i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "msg_type")), msg_type) == 0)
            return json_object_get(m, "content");
    }
    return NULL;
}

const char *kt_result_text(const kt_rec_t *rec)
{
    json_t *content = kt_iopub(rec, "execute_result");
    return content != NULL ? json_string_value(json_object_get(json_object_get(content, "data"), "text/plain")) : NULL;
}

int kt_pid_alive(pid_t pid)
{
    return kill(pid, 0) == 0 || errno != ESRCH;
}

kmgr_kernelspec_t *kt_fake_spec(const char *const *argv, size_t argc)
{
    kmgr_kernelspec_t *spec = wire_calloc(1, sizeof(*spec));

    spec->name = wire_strdup("fake");
    spec->resource_dir = wire_strdup("/");
    spec->display_name = wire_strdup("fake");
    spec->language = wire_strdup("fake");
    spec->argc = argc;
    spec->argv = wire_calloc(argc + 1, sizeof(char *));
    for (size_t i = 0; i != argc; ++i)
        spec->argv[i] = wire_strdup(argv[i]);
    return spec;
}
