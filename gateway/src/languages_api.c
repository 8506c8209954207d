/* GET /code/languages: what this kgate can run, one entry per kernelspec. */
#include "gateway/api.h"
#include "gateway/http.h"
#include "gateway/server.h"

void gw_languages_note_kernel_info(gw_server_t *server, const kmgr_kernelspec_t *spec, json_t *kernel_info)
{
    json_t *info = json_object_get(kernel_info, "language_info");

    if (!json_is_object(info))
        return;
    if (server->language_info == NULL)
        server->language_info = json_object();
    json_object_set(server->language_info, spec->name, info);
}

void gw_api_languages(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    json_t *list = json_array();
    size_t i;
    (void)params;

    for (i = 0; i != server->specs.size; ++i) {
        const kmgr_kernelspec_t *spec = server->specs.entries[i];
        /* the language's version is known once a kernel of the spec has answered kernel_info */
        json_t *info = json_object_get(server->language_info, spec->name);
        json_t *version = json_object_get(info, "version");
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:O, s:s}", "language", spec->language, "kernel", spec->name,
                                              "display_name", spec->display_name, "version",
                                              json_is_string(version) ? version : json_null(), "interrupt_mode",
                                              spec->interrupt_mode == KMGR_INTERRUPT_SIGNAL ? "signal" : "message"));
    }
    gw_send_json(req, 200, list);
}
