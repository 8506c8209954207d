/* kernels/bash/src/requests.c: the request dispatch, and the replies that need no job (kernel_info, is_complete, ...). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "wire/alloc.h"
#include "kernel_state.h"
#include "proc.h"
#include "requests.h"

#ifndef KGATE_VERSION
#define KGATE_VERSION "0.0.0"
#endif

static const char *bash_version(bk_kernel_t *k)
{
    char *argv[] = {(char *)bk_bash_path(), "--norc", "--noprofile", "-c", "printf %s \"$BASH_VERSION\"", NULL};
    char *out = NULL;
    int wstatus;

    if (k->bash_version != NULL)
        return k->bash_version;
    if (bk_run_capture(argv, 2000, 256, &out, &wstatus) == 0 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        out[strcspn(out, "(\n")] = '\0'; /* 5.2.15(1)-release -> 5.2.15 */
        k->bash_version = out;
    } else {
        free(out);
        k->bash_version = wire_strdup("unknown");
    }
    return k->bash_version;
}

static void on_kernel_info(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    const char *version = bash_version(k);
    char banner[256];

    snprintf(banner, sizeof(banner), "kgate bash kernel %s (GNU bash %s)", KGATE_VERSION, version);
    bk_channels_reply(&k->channels, ch, req, "kernel_info_reply",
                      json_pack("{sssssssss{ssssssssssss}sssbs[]}", "status", "ok", "protocol_version", WIRE_PROTOCOL_VERSION,
                                "implementation", "kgate-bash", "implementation_version", KGATE_VERSION, "language_info", "name",
                                "bash", "version", version, "mimetype", "text/x-sh", "file_extension", ".sh", "pygments_lexer",
                                "bash", "codemirror_mode", "shell", "banner", banner, "debugger", 0, "help_links"),
                      NULL);
}

static void on_is_complete(bk_kernel_t *k, wire_msg_t *req)
{
    size_t len;
    const char *code = bk_job_code(req, &len), *verdict;
    char *path = NULL;

    if (asprintf(&path, "%s/check.sh", k->shell.dir) < 0)
        abort();
    verdict = bk_is_complete(path, code, len);
    free(path);
    json_t *content = json_pack("{ss}", "status", verdict);
    if (strcmp(verdict, "incomplete") == 0)
        json_object_set_new(content, "indent", json_string(""));
    bk_channels_reply(&k->channels, WIRE_CHANNEL_SHELL, req, "is_complete_reply", content, NULL);
}

static void on_shutdown(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    int restart = json_is_true(json_object_get(req->content, "restart"));
    bk_channels_reply(&k->channels, ch, req, "shutdown_reply", json_pack("{sssb}", "status", "ok", "restart", restart), NULL);
    k->stopping = 1;
}

void bk_requests_handle(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    bk_channels_t *chan = &k->channels;
    const char *type = wire_msg_type(req);

    bk_channels_publish_status(chan, req, "busy");
    if (ch == WIRE_CHANNEL_SHELL && strcmp(type, "execute_request") == 0) {
        bk_job_execute(k, req);
        return; /* idle once bash is done */
    }
    if (ch == WIRE_CHANNEL_SHELL && strcmp(type, "complete_request") == 0) {
        bk_job_complete(k, req);
        return;
    }
    if (strcmp(type, "kernel_info_request") == 0)
        on_kernel_info(k, ch, req);
    else if (strcmp(type, "is_complete_request") == 0)
        on_is_complete(k, req);
    else if (strcmp(type, "history_request") == 0)
        bk_channels_reply(chan, ch, req, "history_reply", json_pack("{sss[]}", "status", "ok", "history"), NULL);
    else if (strcmp(type, "comm_info_request") == 0)
        bk_channels_reply(chan, ch, req, "comm_info_reply", json_pack("{sss{}}", "status", "ok", "comms"), NULL);
    else if (strcmp(type, "inspect_request") == 0)
        bk_channels_reply(chan, ch, req, "inspect_reply", json_pack("{sssbs{}s{}}", "status", "ok", "found", 0, "data", "metadata"),
                          NULL);
    else if (strcmp(type, "interrupt_request") == 0) {
        bk_job_interrupt(k);
        bk_channels_reply(chan, ch, req, "interrupt_reply", json_pack("{ss}", "status", "ok"), NULL);
    } else if (strcmp(type, "shutdown_request") == 0)
        on_shutdown(k, ch, req);
    else
        fprintf(stderr, "kgate-bash: ignoring %s on %s\n", type, wire_channel_name(ch));
    bk_channels_publish_status(chan, req, "idle");
    wire_msg_destroy(req);
}
