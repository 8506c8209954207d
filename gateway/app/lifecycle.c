/* The lifecycle config (validated as upstream's config.go), its preStart hook and bootstrap.sh's startup status file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "wire/alloc.h"
#include "ksys/log.h"
#include "app/lifecycle.h"

#define LIFECYCLE_MAX_FILE_BYTES (1024 * 1024)

/* A hook's `command` ([string...], a non-blank first word) and `timeoutSeconds`; -1 with why in err. */
static int parse_hook(json_t *hook, const char *what, char ***argv, unsigned *timeout_s, char *err, size_t errlen)
{
    json_t *command = json_object_get(hook, "command"), *timeout = json_object_get(hook, "timeoutSeconds"), *word;
    size_t i, bytes = 0;
    const char *first;

    if (!json_is_object(hook)) {
        snprintf(err, errlen, "%s must be an object", what);
        return -1;
    }
    if (!json_is_array(command) || json_array_size(command) == 0 || !json_is_string(json_array_get(command, 0))) {
        snprintf(err, errlen, "%s command must not be empty", what);
        return -1;
    }
    for (first = json_string_value(json_array_get(command, 0)); *first == ' ' || *first == '\t' || *first == '\n'; ++first)
        ;
    if (*first == '\0') {
        snprintf(err, errlen, "%s command must not be empty", what);
        return -1;
    }
    if (json_array_size(command) > GW_LIFECYCLE_MAX_ARGS) {
        snprintf(err, errlen, "%s command has more than %d words", what, GW_LIFECYCLE_MAX_ARGS);
        return -1;
    }
    json_array_foreach(command, i, word)
    {
        if (!json_is_string(word) || strlen(json_string_value(word)) != json_string_length(word)) {
            snprintf(err, errlen, "%s command must be strings without NUL", what);
            return -1;
        }
        bytes += json_string_length(word) + 1;
    }
    if (bytes > GW_LIFECYCLE_MAX_ARG_BYTES) {
        snprintf(err, errlen, "%s command is over %d bytes", what, GW_LIFECYCLE_MAX_ARG_BYTES);
        return -1;
    }
    if (timeout != NULL && !json_is_null(timeout) && !json_is_integer(timeout)) {
        snprintf(err, errlen, "%s timeoutSeconds must be an integer", what);
        return -1;
    }
    if (json_is_integer(timeout) && json_integer_value(timeout) < 0) {
        snprintf(err, errlen, "%s timeoutSeconds must not be negative", what);
        return -1;
    }
    if (json_is_integer(timeout) && json_integer_value(timeout) > GW_LIFECYCLE_MAX_TIMEOUT_S) {
        snprintf(err, errlen, "%s timeoutSeconds must not exceed %u", what, GW_LIFECYCLE_MAX_TIMEOUT_S);
        return -1;
    }
    if (timeout_s != NULL)
        *timeout_s = json_is_integer(timeout) && json_integer_value(timeout) != 0 ? (unsigned)json_integer_value(timeout)
                                                                                  : GW_LIFECYCLE_DEFAULT_TIMEOUT_S;
    if (argv != NULL) {
        *argv = wire_malloc(sizeof(char *) * (json_array_size(command) + 1));
        json_array_foreach(command, i, word)(*argv)[i] = wire_strdup(json_string_value(word));
        (*argv)[json_array_size(command)] = NULL;
    }
    return 0;
}

int gw_lifecycle_parse(json_t *config, gw_lifecycle_t *out, char *err, size_t errlen)
{
    json_t *version = json_object_get(config, "version"), *prestart = json_object_get(config, "preStart"),
           *periodic = json_object_get(config, "periodic"), *hook;
    size_t i, j;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(config)) {
        snprintf(err, errlen, "lifecycle must be an object");
        return -1;
    }
    if (version != NULL && !json_is_null(version) &&
        !(json_is_integer(version) && json_integer_value(version) <= 1 && json_integer_value(version) >= 0)) {
        snprintf(err, errlen, "unsupported lifecycle config version (kgate knows version 1)");
        return -1;
    }
    if (periodic != NULL && !json_is_null(periodic) && !json_is_array(periodic)) {
        snprintf(err, errlen, "periodic must be an array of hooks");
        return -1;
    }
    json_array_foreach(json_is_array(periodic) ? periodic : NULL, i, hook)
    {
        json_t *name = json_object_get(hook, "name"), *schedule = json_object_get(hook, "schedule");
        char what[96];
        if (!json_is_string(name) || strspn(json_string_value(name), " \t") == strlen(json_string_value(name))) {
            snprintf(err, errlen, "periodic hook name must not be blank");
            return -1;
        }
        for (j = 0; j != i; ++j)
            if (json_equal(json_object_get(json_array_get(periodic, j), "name"), name)) {
                snprintf(err, errlen, "duplicate periodic hook name \"%.64s\"", json_string_value(name));
                return -1;
            }
        if (!json_is_string(schedule) || strspn(json_string_value(schedule), " \t") == strlen(json_string_value(schedule))) {
            snprintf(err, errlen, "periodic hook \"%.64s\" schedule must not be blank", json_string_value(name));
            return -1;
        }
        snprintf(what, sizeof(what), "periodic %.64s", json_string_value(name));
        if (parse_hook(hook, what, NULL, NULL, err, errlen) != 0)
            return -1;
    }
    if (prestart != NULL && !json_is_null(prestart) &&
        parse_hook(prestart, "preStart", &out->prestart, &out->prestart_timeout_s, err, errlen) != 0)
        return -1;
    out->num_periodic = json_is_array(periodic) ? json_array_size(periodic) : 0;
    return 0;
}

void gw_lifecycle_dispose(gw_lifecycle_t *lc)
{
    for (char **p = lc->prestart; p != NULL && *p != NULL; ++p)
        free(*p);
    free(lc->prestart);
    memset(lc, 0, sizeof(*lc));
}

static int parse_text(const char *text, const char *source, gw_lifecycle_t *out, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *config;
    char why[256];
    int ret;

    while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
        ++text;
    if (*text != '{') {
        snprintf(err, errlen, "lifecycle config %s is not JSON (upstream's TOML form is not read by kgate: give it as JSON)",
                 source);
        return -1;
    }
    if ((config = json_loads(text, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
        snprintf(err, errlen, "lifecycle config %s: %s (line %d)", source, jerr.text, jerr.line);
        return -1;
    }
    if ((ret = gw_lifecycle_parse(config, out, why, sizeof(why))) != 0)
        snprintf(err, errlen, "lifecycle config %s: %s", source, why);
    json_decref(config);
    return ret;
}

int gw_lifecycle_load(gw_lifecycle_t *out, char *err, size_t errlen)
{
    const char *env = getenv("OPENSANDBOX_LIFECYCLE"), *path = getenv("EXECD_LIFECYCLE_CONFIG"), *home = getenv("HOME");
    char deflt[4096], *text = NULL;
    int ret = 0, explicit_path = path != NULL && path[0] != '\0';
    FILE *fp;
    size_t len;

    memset(out, 0, sizeof(*out));
    if (env != NULL && strspn(env, " \t\r\n") != strlen(env)) {
        ret = parse_text(env, "OPENSANDBOX_LIFECYCLE", out, err, errlen);
        goto Exit;
    }
    if (!explicit_path) {
        if (home == NULL || home[0] == '\0')
            goto Exit; /* no transport and no home: hooks are optional, as upstream */
        snprintf(deflt, sizeof(deflt), "%s/.execd/lifecycle.toml", home);
        path = deflt;
    }
    if ((fp = fopen(path, "re")) == NULL) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "read lifecycle config %s: %s", path, strerror(errno));
            ret = -1;
        }
        goto Exit;
    }
    text = wire_malloc(LIFECYCLE_MAX_FILE_BYTES + 1);
    len = fread(text, 1, LIFECYCLE_MAX_FILE_BYTES + 1, fp);
    fclose(fp);
    if (len > LIFECYCLE_MAX_FILE_BYTES) {
        snprintf(err, errlen, "lifecycle config %s is over %d bytes", path, LIFECYCLE_MAX_FILE_BYTES);
        ret = -1;
        goto Exit;
    }
    text[len] = '\0';
    ret = parse_text(text, path, out, err, errlen);
Exit:
    free(text);
    /* the transport never reaches a command (upstream removes it too) */
    unsetenv("OPENSANDBOX_LIFECYCLE");
    unsetenv("EXECD_LIFECYCLE_CONFIG");
    if (ret == 0 && out->num_periodic != 0)
        ksys_log_warn("lifecycle: %zu periodic hook(s) accepted but not run: kgate has no cron scheduler", out->num_periodic);
    return ret;
}

int gw_lifecycle_append_status(const char *path, const char *line)
{
    size_t len = strlen(line);
    char buf[128];
    int fd, ret = 0;

    if (path == NULL)
        return 0;
    if (len + 1 > sizeof(buf))
        return -EINVAL;
    memcpy(buf, line, len);
    buf[len++] = '\n';
    if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
        return -errno;
    if (write(fd, buf, len) != (ssize_t)len)
        ret = errno != 0 ? -errno : -EIO;
    if (close(fd) != 0 && ret == 0)
        ret = -errno;
    return ret;
}

typedef struct st_prestart_t {
    gw_host_t *host;
    h2o_timeout_entry_t later;
    gw_prestart_cb cb;
    void *data;
    char *status_file;
    int strict, ok;
    unsigned timeout_s;
    char why[256];
} prestart_t;

/* `done 0|1` (upstream writes 1 for every failure, its status is not the hook's), then the owner's callback. */
static void finish(prestart_t *ps)
{
    int ret = gw_lifecycle_append_status(ps->status_file, ps->ok ? "done 0" : "done 1");

    if (ret != 0) {
        ksys_log_warn("lifecycle: cannot append to the startup status file %s: %s", ps->status_file, strerror(-ret));
        if (ps->strict && ps->ok) {
            ps->ok = 0;
            snprintf(ps->why, sizeof(ps->why), "the startup status file %s cannot be appended to: %s", ps->status_file,
                     strerror(-ret));
        }
    }
    ps->cb(ps->data, ps->ok, ps->why);
    free(ps->status_file);
    free(ps);
}

static void on_later(h2o_timeout_entry_t *entry)
{
    finish(H2O_STRUCT_FROM_MEMBER(prestart_t, later, entry));
}

/* The hook's output is kgate's log's, as upstream logs it. */
static void on_output(gw_shell_t *shell, int is_stderr, const char *bytes, size_t len)
{
    (void)shell, (void)is_stderr;
    if (write(STDERR_FILENO, bytes, len) < 0) {
        /* nowhere else to say it */
    }
}

static void on_prestart_exit(gw_shell_t *shell)
{
    prestart_t *ps = shell->data;
    int st = shell->wait_status;

    ps->ok = !shell->timed_out && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (shell->timed_out)
        snprintf(ps->why, sizeof(ps->why), "preStart timed out after %u s", ps->timeout_s);
    else if (!ps->ok)
        snprintf(ps->why, sizeof(ps->why), "preStart %s %d", WIFEXITED(st) ? "exited with status" : "was killed by signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    ksys_log(ps->ok ? KSYS_LOG_INFO : KSYS_LOG_ERROR, "lifecycle: %s", ps->ok ? "preStart succeeded" : ps->why);
    finish(ps);
}

/* argv as one command line for the shell: `exec` and each word in single quotes (a quote inside as '\''). */
static char *quote_argv(char *const *argv)
{
    size_t len = 5;
    char *out, *p;

    for (char *const *w = argv; *w != NULL; ++w) {
        len += 3;
        for (const char *c = *w; *c != '\0'; ++c)
            len += *c == '\'' ? 4 : 1;
    }
    p = out = wire_malloc(len + 1);
    p += sprintf(p, "exec");
    for (char *const *w = argv; *w != NULL; ++w) {
        *p++ = ' ', *p++ = '\'';
        for (const char *c = *w; *c != '\0'; ++c)
            p = *c == '\'' ? p + sprintf(p, "'\\''") : (*p = *c, p + 1);
        *p++ = '\'';
    }
    *p = '\0';
    return out;
}

void gw_prestart_start(gw_shells_t *shells, const gw_lifecycle_t *lc, const char *status_file, int strict_status, gw_prestart_cb cb,
                       void *data)
{
    static const gw_shell_hooks_t hooks = {.on_output = on_output, .on_exit = on_prestart_exit};
    prestart_t *ps = wire_malloc(sizeof(*ps));
    gw_shell_t *shell;
    char line[64], *code;
    int ret;

    memset(ps, 0, sizeof(*ps));
    ps->host = shells->host, ps->later.cb = on_later, ps->cb = cb, ps->data = data, ps->strict = strict_status;
    ps->status_file = wire_strdup(status_file), ps->timeout_s = lc->prestart_timeout_s, ps->ok = 1;
    if (lc->prestart == NULL) {
        gw_host_defer(ps->host, &ps->later);
        return;
    }
    snprintf(line, sizeof(line), "running %u", lc->prestart_timeout_s);
    if ((ret = gw_lifecycle_append_status(status_file, line)) != 0) {
        ksys_log_warn("lifecycle: cannot append to the startup status file %s: %s", status_file, strerror(-ret));
        if (strict_status) {
            ps->ok = 0;
            snprintf(ps->why, sizeof(ps->why), "the startup status file %s cannot be appended to: %s", status_file, strerror(-ret));
            gw_host_defer(ps->host, &ps->later);
            return;
        }
    }
    code = quote_argv(lc->prestart);
    ksys_log_info("lifecycle: running preStart %s (timeout %u s)", lc->prestart[0], lc->prestart_timeout_s);
    gw_shell_options_t opts = {.code = code, .uid = -1, .gid = -1, .timeout_ms = lc->prestart_timeout_s * 1000u};
    ret = gw_shell_spawn(shells, &opts, &hooks, ps, &shell, ps->why, sizeof(ps->why));
    free(code);
    if (ret != 0) {
        ps->ok = 0;
        ksys_log_error("lifecycle: preStart %s cannot start: %s", lc->prestart[0], ps->why);
        gw_host_defer(ps->host, &ps->later);
    }
}
