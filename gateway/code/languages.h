/* code/languages.h: what kgate can run: the kernelspecs found at start, and what their kernels said of themselves. */
#ifndef GW_LANGUAGES_H
#define GW_LANGUAGES_H

#include <stddef.h>
#include <jansson.h>
#include "kmgr/kernelspec.h"

typedef struct st_gw_languages_t {
    kmgr_kernelspecs_t specs; /* filled by the app at start-up (kmgr_kernelspecs_discover) */
    json_t *language_info;    /* kernelspec name -> language_info of its first kernel_info_reply; NULL: none yet */
} gw_languages_t;

/** Empty: no spec, no language_info. */
void gw_languages_init(gw_languages_t *languages);
/** Releases the specs and what kernels said. */
void gw_languages_dispose(gw_languages_t *languages);

/** The kernelspec named `name` exactly, or NULL. */
const kmgr_kernelspec_t *gw_languages_find(const gw_languages_t *languages, const char *name);
/** Resolves a language or kernelspec name (case-insensitive) to a kernelspec, or NULL. */
const kmgr_kernelspec_t *gw_languages_resolve(const gw_languages_t *languages, const char *language);
/** Writes "python (kernel python3), ..." (or why there is none) into `buf` for error messages. */
void gw_languages_describe(const gw_languages_t *languages, char *buf, size_t size);

/** Remembers the language_info of a kernel of `spec` that answered kernel_info (borrowed). */
void gw_languages_note_kernel_info(gw_languages_t *languages, const kmgr_kernelspec_t *spec, json_t *kernel_info);

/**
 * One entry per kernelspec: {language, kernel, display_name, version (null until a kernel of the
 * spec has answered kernel_info), interrupt_mode}. A new array.
 */
json_t *gw_languages_to_json(const gw_languages_t *languages);

#endif
