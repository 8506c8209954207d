/* The languages kgate can run: kernelspec resolution, and the language_info their kernels report. */
#include <stdio.h>
#include <string.h>
#include "code/languages.h"

void gw_languages_init(gw_languages_t *languages)
{
    memset(languages, 0, sizeof(*languages));
}

void gw_languages_dispose(gw_languages_t *languages)
{
    kmgr_kernelspecs_dispose(&languages->specs);
    json_decref(languages->language_info);
    languages->language_info = NULL;
}

const kmgr_kernelspec_t *gw_languages_find(const gw_languages_t *languages, const char *name)
{
    return kmgr_kernelspecs_find(&languages->specs, name);
}

const kmgr_kernelspec_t *gw_languages_resolve(const gw_languages_t *languages, const char *language)
{
    return kmgr_kernelspecs_resolve(&languages->specs, language);
}

void gw_languages_describe(const gw_languages_t *languages, char *buf, size_t size)
{
    size_t i, used = 0;

    buf[0] = '\0';
    for (i = 0; i != languages->specs.size && used < size; ++i) {
        const kmgr_kernelspec_t *spec = languages->specs.entries[i];
        int n = snprintf(buf + used, size - used, "%s%s (kernel %s)", i == 0 ? "" : ", ", spec->language, spec->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (languages->specs.size == 0)
        snprintf(buf, size, "none: no kernelspec is installed");
}

void gw_languages_note_kernel_info(gw_languages_t *languages, const kmgr_kernelspec_t *spec, json_t *kernel_info)
{
    json_t *info = json_object_get(kernel_info, "language_info");

    if (!json_is_object(info))
        return;
    if (languages->language_info == NULL)
        languages->language_info = json_object();
    json_object_set(languages->language_info, spec->name, info);
}

json_t *gw_languages_to_json(const gw_languages_t *languages)
{
    json_t *list = json_array();

    for (size_t i = 0; i != languages->specs.size; ++i) {
        const kmgr_kernelspec_t *spec = languages->specs.entries[i];
        json_t *info = json_object_get(languages->language_info, spec->name);
        json_t *version = json_object_get(info, "version");
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:O, s:s}", "language", spec->language, "kernel", spec->name,
                                              "display_name", spec->display_name, "version",
                                              json_is_string(version) ? version : json_null(), "interrupt_mode",
                                              spec->interrupt_mode == KMGR_INTERRUPT_SIGNAL ? "signal" : "message"));
    }
    return list;
}
