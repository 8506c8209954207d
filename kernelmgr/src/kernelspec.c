/* kernelmgr/src/kernelspec.c: loading kernel.json files and discovering installed kernelspecs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "util_private.h"
#include "kmgr/kernelspec.h"

/* kernel.json files are tiny; anything bigger is not a kernelspec (and must not be slurped). */
#define KERNELSPEC_MAX_BYTES (1024 * 1024)

void kmgr_kernelspec_destroy(kmgr_kernelspec_t *spec)
{
    if (spec == NULL)
        return;
    free(spec->name);
    free(spec->resource_dir);
    free(spec->display_name);
    free(spec->language);
    if (spec->argv != NULL) {
        for (size_t i = 0; i != spec->argc; ++i)
            free(spec->argv[i]);
        free(spec->argv);
    }
    json_decref(spec->env);
    json_decref(spec->metadata);
    free(spec);
}

/*
 * Deno's kernel (`deno jupyter --kernel ...`, its spec as `deno jupyter --install` writes it) says no interrupt_mode,
 * which is "signal" by Jupyter's rule, but it exits on SIGINT (the run ends in KernelDied); it handles
 * interrupt_request on the control channel and keeps its state. So a spec that runs Deno's kernel and says no mode
 * is interrupted by message: the spec stays as Deno wrote it. It also publishes a cell's output after its status idle,
 * which its spec cannot say: it is known to (late_output), so that even its first run collects that output, and it
 * runs the JavaScript that tells when that output has all been published (late_flush, kernelmgr/src/late.c).
 */
static int runs_deno_kernel(json_t *argv)
{
    const char *exe = json_string_value(json_array_get(argv, 0)), *base = strrchr(exe, '/');
    int jupyter = 0, kernel = 0;

    if (strcmp(base != NULL ? base + 1 : exe, "deno") != 0)
        return 0;
    for (size_t i = 1; i != json_array_size(argv); ++i) {
        const char *arg = json_string_value(json_array_get(argv, i));
        jupyter |= strcmp(arg, "jupyter") == 0;
        kernel |= strcmp(arg, "--kernel") == 0;
    }
    return jupyter && kernel;
}

static int parse_spec(const char *name, const char *resource_dir, json_t *root, kmgr_kernelspec_t **out)
{
    json_t *argv = json_object_get(root, "argv"), *language = json_object_get(root, "language");
    json_t *display = json_object_get(root, "display_name"), *env = json_object_get(root, "env");
    json_t *mode = json_object_get(root, "interrupt_mode"), *metadata = json_object_get(root, "metadata"), *late;
    kmgr_kernelspec_t *spec;

    if (!json_is_object(root) || !json_is_array(argv) || json_array_size(argv) == 0 || !json_is_string(language))
        return KSYS_EBADSPEC;
    for (size_t i = 0; i != json_array_size(argv); ++i)
        if (!json_is_string(json_array_get(argv, i)))
            return KSYS_EBADSPEC;
    if (display != NULL && !json_is_string(display))
        return KSYS_EBADSPEC;
    if (env != NULL && !json_is_null(env)) {
        const char *key;
        json_t *value;
        if (!json_is_object(env))
            return KSYS_EBADSPEC;
        json_object_foreach(env, key, value)
        {
            if (!json_is_string(value) || key[0] == '\0' || strchr(key, '=') != NULL)
                return KSYS_EBADSPEC;
        }
    }
    if (mode != NULL && !json_is_null(mode) &&
        !(json_is_string(mode) &&
          (strcmp(json_string_value(mode), "signal") == 0 || strcmp(json_string_value(mode), "message") == 0)))
        return KSYS_EBADSPEC;
    if (metadata != NULL && !json_is_null(metadata) && !json_is_object(metadata))
        return KSYS_EBADSPEC;

    spec = wire_calloc(1, sizeof(*spec));
    spec->name = wire_strdup(name);
    spec->resource_dir = wire_strdup(resource_dir);
    spec->display_name = wire_strdup(display != NULL ? json_string_value(display) : name);
    spec->language = wire_strdup(json_string_value(language));
    spec->argc = json_array_size(argv);
    spec->argv = wire_calloc(spec->argc + 1, sizeof(char *));
    for (size_t i = 0; i != spec->argc; ++i)
        spec->argv[i] = wire_strdup(json_string_value(json_array_get(argv, i)));
    spec->env = json_is_object(env) ? json_incref(env) : NULL;
    if (json_is_string(mode))
        spec->interrupt_mode = strcmp(json_string_value(mode), "message") == 0 ? KMGR_INTERRUPT_MESSAGE : KMGR_INTERRUPT_SIGNAL;
    else
        spec->interrupt_mode = runs_deno_kernel(argv) ? KMGR_INTERRUPT_MESSAGE : KMGR_INTERRUPT_SIGNAL;
    spec->metadata = json_is_object(metadata) ? json_incref(metadata) : NULL;
    late = json_object_get(json_object_get(metadata, "kgate"), "late_output");
    spec->late_output = json_is_boolean(late) ? json_is_true(late) : runs_deno_kernel(argv);
    spec->late_flush = runs_deno_kernel(argv);
    spec->interrupt_may_hang = runs_deno_kernel(argv);
    *out = spec;
    return 0;
}

int kmgr_kernelspec_load(const char *name, const char *resource_dir, kmgr_kernelspec_t **out)
{
    char *path = ksys_path_join(resource_dir, "kernel.json");
    struct stat st;
    json_t *root;
    int ret;

    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        ret = KSYS_EIO;
        goto Exit;
    }
    if (st.st_size > KERNELSPEC_MAX_BYTES) {
        ret = KSYS_EBADSPEC;
        goto Exit;
    }
    if ((root = json_load_file(path, JSON_REJECT_DUPLICATES, NULL)) == NULL) {
        ret = access(path, R_OK) == 0 ? KSYS_EBADSPEC : KSYS_EIO;
        goto Exit;
    }
    ret = parse_spec(name, resource_dir, root, out);
    json_decref(root);
Exit:
    free(path);
    return ret;
}

const kmgr_kernelspec_t *kmgr_kernelspecs_find(const kmgr_kernelspecs_t *specs, const char *name)
{
    for (size_t i = 0; i != specs->size; ++i)
        if (strcmp(specs->entries[i]->name, name) == 0)
            return specs->entries[i];
    return NULL;
}

/* Adds every valid spec of `<kernels_dir>/<name>/kernel.json` whose name is not taken yet. */
static void scan_dir(const char *kernels_dir, kmgr_kernelspecs_t *out, size_t *capacity,
                     void (*warn)(const char *path, const char *why))
{
    DIR *dir = opendir(kernels_dir);
    struct dirent *ent;

    if (dir == NULL)
        return;
    while ((ent = readdir(dir)) != NULL) {
        char *resource_dir, *json_path;
        kmgr_kernelspec_t *spec;
        struct stat st;
        int ret;

        if (ent->d_name[0] == '.' || kmgr_kernelspecs_find(out, ent->d_name) != NULL)
            continue;
        resource_dir = ksys_path_join(kernels_dir, ent->d_name);
        json_path = ksys_path_join(resource_dir, "kernel.json");
        /* A directory without kernel.json is simply not a kernelspec: no warning. */
        if (stat(resource_dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(json_path, F_OK) != 0)
            goto Next;
        if ((ret = kmgr_kernelspec_load(ent->d_name, resource_dir, &spec)) != 0) {
            if (warn != NULL)
                warn(json_path, ksys_strerror(ret));
            goto Next;
        }
        if (out->size == *capacity) {
            *capacity = *capacity != 0 ? *capacity * 2 : 8;
            out->entries = wire_realloc(out->entries, *capacity * sizeof(out->entries[0]));
        }
        out->entries[out->size++] = spec;
    Next:
        free(json_path);
        free(resource_dir);
    }
    closedir(dir);
}

static int compare_specs(const void *a, const void *b)
{
    return strcmp((*(kmgr_kernelspec_t *const *)a)->name, (*(kmgr_kernelspec_t *const *)b)->name);
}

int kmgr_kernelspecs_discover(const char *const *extra_dirs, size_t n_extra, kmgr_kernelspecs_t *out,
                              void (*warn)(const char *path, const char *why))
{
    static const char *const system_dirs[] = {"/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels"};
    size_t capacity = 0;
    const char *env;

    out->entries = NULL;
    out->size = 0;

    for (size_t i = 0; i != n_extra; ++i)
        scan_dir(extra_dirs[i], out, &capacity, warn);

    if ((env = getenv("JUPYTER_PATH")) != NULL) {
        char *copy = wire_strdup(env), *save = NULL;
        for (char *tok = strtok_r(copy, ":", &save); tok != NULL; tok = strtok_r(NULL, ":", &save)) {
            char *d = ksys_path_join(tok, "kernels");
            scan_dir(d, out, &capacity, warn);
            free(d);
        }
        free(copy);
    }

    {
        char *data_dir = NULL, *d;
        if ((env = getenv("JUPYTER_DATA_DIR")) != NULL && env[0] != '\0')
            data_dir = wire_strdup(env);
        else if ((env = getenv("XDG_DATA_HOME")) != NULL && env[0] != '\0')
            data_dir = ksys_path_join(env, "jupyter");
        else if ((env = getenv("HOME")) != NULL && env[0] != '\0')
            data_dir = ksys_path_join(env, ".local/share/jupyter");
        if (data_dir != NULL) {
            d = ksys_path_join(data_dir, "kernels");
            scan_dir(d, out, &capacity, warn);
            free(d);
            free(data_dir);
        }
    }

    for (size_t i = 0; i != sizeof(system_dirs) / sizeof(system_dirs[0]); ++i)
        scan_dir(system_dirs[i], out, &capacity, warn);

    if (out->size > 1)
        qsort(out->entries, out->size, sizeof(out->entries[0]), compare_specs);
    return 0;
}

void kmgr_kernelspecs_dispose(kmgr_kernelspecs_t *specs)
{
    for (size_t i = 0; i != specs->size; ++i)
        kmgr_kernelspec_destroy(specs->entries[i]);
    free(specs->entries);
    specs->entries = NULL;
    specs->size = 0;
}

/*
 * The names callers use for a language (docs/kernels.md, "Languages"), tried in order when no spec has the name or language
 * asked for: an alias stands for a spec name or language. JavaScript runs on Deno's kernel, whose spec (as
 * `deno jupyter --install` writes it) is named `deno` and says language "typescript": `javascript` and `js` reach it
 * when no installed kernel says it is JavaScript's (docs/API.md 6.1).
 */
static const struct {
    const char *alias;
    const char *target;
} language_aliases[] = {
    {"py", "python"},     {"js", "javascript"}, {"js", "deno"},    {"javascript", "deno"},
    {"ts", "typescript"}, {"sh", "bash"},       {"shell", "bash"},
};

static const kmgr_kernelspec_t *resolve_exact(const kmgr_kernelspecs_t *specs, const char *language)
{
    const kmgr_kernelspec_t *spec;

    if ((spec = kmgr_kernelspecs_find(specs, language)) != NULL)
        return spec;
    for (size_t i = 0; i != specs->size; ++i)
        if (strcasecmp(specs->entries[i]->language, language) == 0)
            return specs->entries[i];
    return NULL;
}

const kmgr_kernelspec_t *kmgr_kernelspecs_resolve(const kmgr_kernelspecs_t *specs, const char *language)
{
    const kmgr_kernelspec_t *spec;

    if ((spec = resolve_exact(specs, language)) != NULL)
        return spec;
    for (size_t i = 0; i != sizeof(language_aliases) / sizeof(language_aliases[0]); ++i)
        if (strcasecmp(language_aliases[i].alias, language) == 0 &&
            (spec = resolve_exact(specs, language_aliases[i].target)) != NULL)
            return spec;
    return NULL;
}

kmgr_transport_t kmgr_kernelspec_transport(const kmgr_kernelspec_t *spec, int isolated_net)
{
    const char *said = json_string_value(json_object_get(json_object_get(spec->metadata, "kgate"), "transport"));

    if (isolated_net)
        return KMGR_TRANSPORT_IPC;
    if (said != NULL && strcmp(said, "ipc") == 0)
        return KMGR_TRANSPORT_IPC;
    if (said != NULL && strcmp(said, "tcp") == 0)
        return KMGR_TRANSPORT_TCP;
    /* `python -m ipykernel_launcher -f {connection_file}`, as ipykernel installs its spec */
    for (size_t i = 0; i + 1 < spec->argc; ++i)
        if (strcmp(spec->argv[i], "-m") == 0 &&
            (strcmp(spec->argv[i + 1], "ipykernel_launcher") == 0 || strcmp(spec->argv[i + 1], "ipykernel") == 0))
            return KMGR_TRANSPORT_IPC;
    return KMGR_TRANSPORT_TCP;
}
