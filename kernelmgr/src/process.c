/* kernelmgr/src/process.c: spawning, signalling and reaping kernel processes; their directories. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "ksys/errors.h"
#include "ksys/log.h"
#include "ksys/sandbox.h"
#include "ksys/spawn.h"
#include "ksys/cgroup.h"
#include "ksys/rmtree.h"
#include "manager_private.h"
#include "process.h"
#include "template.h"

extern char **environ;

/* A growable NULL-terminated vector of "KEY=VALUE" strings. */
typedef struct st_envv_t {
    char **entries;
    size_t size, capacity;
} envv_t;

static void envv_set(envv_t *v, const char *key, const char *value)
{
    size_t keylen = strlen(key), vallen = strlen(value);
    char *entry = wire_malloc(keylen + vallen + 2);

    memcpy(entry, key, keylen);
    entry[keylen] = '=';
    memcpy(entry + keylen + 1, value, vallen + 1);
    for (size_t i = 0; i != v->size; ++i) {
        if (strncmp(v->entries[i], key, keylen) == 0 && v->entries[i][keylen] == '=') {
            free(v->entries[i]);
            v->entries[i] = entry;
            return;
        }
    }
    if (v->size + 2 > v->capacity) {
        v->capacity = v->capacity != 0 ? v->capacity * 2 : 64;
        v->entries = wire_realloc(v->entries, v->capacity * sizeof(char *));
    }
    v->entries[v->size++] = entry;
    v->entries[v->size] = NULL;
}

static void envv_set_json(envv_t *v, json_t *obj)
{
    const char *key;
    json_t *value;

    if (!json_is_object(obj))
        return;
    json_object_foreach(obj, key, value)
    {
        if (json_is_string(value) && key[0] != '\0' && strchr(key, '=') == NULL)
            envv_set(v, key, json_string_value(value));
    }
}

static const char *envv_get(const envv_t *v, const char *key)
{
    size_t keylen = strlen(key);
    for (size_t i = 0; i != v->size; ++i)
        if (strncmp(v->entries[i], key, keylen) == 0 && v->entries[i][keylen] == '=')
            return v->entries[i] + keylen + 1;
    return NULL;
}

/* Replaces every occurrence of `pattern` in `s` (owned, freed) with `value`. */
static char *replace_all(char *s, const char *pattern, const char *value)
{
    size_t plen = strlen(pattern), vlen = strlen(value), n = 0;
    char *out, *dst;
    const char *src, *hit;

    for (src = s; (hit = strstr(src, pattern)) != NULL; src = hit + plen)
        ++n;
    if (n == 0)
        return s;
    out = dst = wire_malloc(strlen(s) + n * vlen + 1);
    for (src = s; (hit = strstr(src, pattern)) != NULL; src = hit + plen) {
        memcpy(dst, src, hit - src);
        dst += hit - src;
        memcpy(dst, value, vlen);
        dst += vlen;
    }
    strcpy(dst, src);
    free(s);
    return out;
}

/* Finds `prog` as execvp would, but on the PATH the kernel will see (like Python's subprocess). */
static char *find_program(const char *prog, const char *path)
{
    char *copy, *save = NULL, *found = NULL;

    if (strchr(prog, '/') != NULL)
        return wire_strdup(prog);
    copy = wire_strdup(path != NULL ? path : "/usr/local/bin:/usr/bin:/bin");
    for (char *dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
        char *candidate = ksys_path_join(dir, prog);
        struct stat st;
        if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode) && access(candidate, X_OK) == 0) {
            found = candidate;
            break;
        }
        free(candidate);
    }
    free(copy);
    return found;
}

/*
 * Five free loopback ports. Holding all five sockets open at once makes them distinct; the kernel
 * binds them a moment later, which is racy the way every Jupyter client's port choice is
 * (PLATFORM.md): a kernel that finds one taken exits, and is started again on new ones (liveness.c).
 */
static int pick_tcp_ports(int ports[WIRE_CHANNEL_COUNT])
{
    int fds[WIRE_CHANNEL_COUNT], i, ret = 0;

    for (i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sin);
        if ((fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 || bind(fds[i], (struct sockaddr *)&sin, len) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&sin, &len) != 0) {
            ret = KSYS_EIO;
            ++i;
            break;
        }
        ports[i] = ntohs(sin.sin_port);
    }
    while (i-- > 0)
        if (fds[i] != -1)
            close(fds[i]);
    return ret;
}

static int write_connection(kmgr_proc_t *proc, const kmgr_kernelspec_t *spec, const ksys_sandbox_t *sandbox)
{
    char key[2 * 32 + 1];

    /* a sandbox of its own network has a loopback of its own, which kgate cannot reach */
    if (kmgr_kernelspec_transport(spec, sandbox->kind != KSYS_SANDBOX_NONE && !sandbox->share_net) == KMGR_TRANSPORT_TCP) {
        proc->conn.transport = wire_strdup("tcp");
        proc->conn.ip = wire_strdup("127.0.0.1");
        if (pick_tcp_ports(proc->conn.ports) != 0)
            return KSYS_EIO;
    } else {
        proc->conn.transport = wire_strdup("ipc");
        proc->conn.ip = ksys_path_join(proc->dir, "ch");
        for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i)
            proc->conn.ports[i] = i + 1;
    }
    wire_random_hex(key, 32);
    proc->conn.key = wire_strdup(key);
    sodium_memzero(key, sizeof(key));
    proc->conn.signature_scheme = wire_strdup("hmac-sha256");
    proc->conn.kernel_name = wire_strdup(spec->name);
    wire_signer_init(&proc->signer, proc->conn.key, strlen(proc->conn.key));
    return wire_connection_write(&proc->conn, proc->conn_path) == 0 ? 0 : KSYS_EIO;
}

int kmgr_proc_spawn(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env, const ksys_sandbox_t *sandbox,
                    kmgr_proc_t **out, char *why, size_t whylen)
{
    static const ksys_sandbox_t no_sandbox = {.kind = KSYS_SANDBOX_NONE};
    kmgr_proc_t *proc = wire_calloc(1, sizeof(*proc));
    kmgr_proc_start_t *start = wire_calloc(1, sizeof(*start));
    char **argv = NULL, *ipython_dir = NULL, pidbuf[32];
    envv_t envv = {NULL, 0, 0};
    kmgr_template_t *tpl = NULL;
    int ret, use_template;

    if (sandbox == NULL)
        sandbox = &no_sandbox;
    if (why != NULL && whylen != 0)
        why[0] = '\0';
    /* sandboxed kernels are spawned, each in its own namespaces (docs/kernels.md) */
    use_template = sandbox->kind == KSYS_SANDBOX_NONE && kmgr_template_configured(mgr, spec);
    if (use_template)
        tpl = kmgr_template_find(mgr, spec);
    start->mgr = mgr;
    start->log_fd = -1;
    for (int i = 0; i != KSYS_CG_COUNT; ++i)
        start->cgroup_fds[i] = -1;

    kmgr_list_init(&proc->link);
    kmgr_list_init(&proc->tpl_link);
    proc->pidfd = -1;
    wire_uuid4(proc->uuid);
    kmgr_channels_init(&proc->channels, mgr->ops, mgr->loop, &proc->conn, &proc->signer, proc->uuid,
                       (uint64_t)mgr->config.max_message_bytes);
    proc->dir = ksys_path_join(mgr->runtime_dir, proc->uuid);
    proc->conn_path = ksys_path_join(proc->dir, "connection.json");
    /* ipc endpoints are unix socket paths: "<dir>/ch-5" must fit sun_path. */
    if (strlen(proc->dir) + sizeof("/ch-5") > sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(why, whylen, "runtime directory path too long for ipc sockets: %s", mgr->runtime_dir);
        free(proc->dir);
        proc->dir = NULL;
        ret = KSYS_EIO;
        goto Error;
    }
    if (mkdir(proc->dir, 0700) != 0) {
        snprintf(why, whylen, "cannot create %s: %s", proc->dir, strerror(errno));
        free(proc->dir);
        proc->dir = NULL;
        ret = KSYS_EIO;
        goto Error;
    }
    if ((ret = write_connection(proc, spec, sandbox)) != 0) {
        snprintf(why, whylen, "cannot write %s", proc->conn_path);
        goto Error;
    }
    /* A private IPython profile per kernel: a shared history.sqlite makes busy kernels stall on its lock. */
    ipython_dir = ksys_path_join(proc->dir, "ipython");
    if (mkdir(ipython_dir, 0700) != 0) {
        snprintf(why, whylen, "cannot create %s: %s", ipython_dir, strerror(errno));
        ret = KSYS_EIO;
        goto Error;
    }
    start->log_path = ksys_path_join(proc->dir, "kernel.log");

    argv = wire_calloc(spec->argc + 1, sizeof(char *));
    for (size_t i = 0; i != spec->argc; ++i) {
        argv[i] = replace_all(wire_strdup(spec->argv[i]), "{connection_file}", proc->conn_path);
        argv[i] = replace_all(argv[i], "{resource_dir}", spec->resource_dir);
    }

    for (char **e = environ; e != NULL && *e != NULL; ++e) {
        const char *eq = strchr(*e, '=');
        /* kgate's own access token stays out of a sandbox */
        if (sandbox->kind != KSYS_SANDBOX_NONE &&
            (strncmp(*e, "KGATE_ACCESS_TOKEN=", 19) == 0 || strncmp(*e, "JPY_PARENT_PID=", 15) == 0))
            continue;
        if (eq != NULL && eq != *e) {
            char *key = wire_strndup(*e, eq - *e);
            envv_set(&envv, key, eq + 1);
            free(key);
        }
    }
    if (sandbox->kind == KSYS_SANDBOX_BWRAP)
        envv_set(&envv, "HOME", KMGR_SANDBOX_HOME);
    /* no-color.org: results and tracebacks in plain text for API callers; a spec's or a context's NO_COLOR wins */
    envv_set(&envv, "NO_COLOR", "1");
    envv_set_json(&envv, spec->env);
    envv_set_json(&envv, env);
    /* in a pid namespace kgate's pid means nothing, and ipykernel would exit when "its parent" is gone (a forked kernel's parent
     * is its template: it outlives a template that dies; kmgr_proc_start_spawn sets it when such a kernel is spawned) */
    if (sandbox->kind == KSYS_SANDBOX_NONE && !use_template) {
        snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
        envv_set(&envv, "JPY_PARENT_PID", pidbuf);
    }
    envv_set(&envv, "PYDEVD_DISABLE_FILE_VALIDATION", "1");
    envv_set(&envv, "IPYTHONDIR", ipython_dir);
    envv_set(&envv, KSYS_INSTANCE_VAR, mgr->instance.token);

    if ((start->program = find_program(argv[0], envv_get(&envv, "PATH"))) == NULL) {
        snprintf(why, whylen, "cannot execute %s: not found on PATH", argv[0]);
        ret = KSYS_ESPAWN;
        goto Error;
    }

    /* stdout and stderr both to the log; stdin, the session and every other descriptor are ksys_spawn's */
    if ((start->log_fd = open(start->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) == -1) {
        snprintf(why, whylen, "cannot open %s: %s", start->log_path, strerror(errno));
        ret = KSYS_ESPAWN;
        goto Error;
    }
    proc->limits = sandbox->limits;
    proc->sandboxed = sandbox->kind != KSYS_SANDBOX_NONE;
    if ((sandbox->limits.memory_bytes != 0 && ksys_cgroups_has(&mgr->cgroups, KSYS_CG_MEMORY)) ||
        (sandbox->limits.pids != 0 && ksys_cgroups_has(&mgr->cgroups, KSYS_CG_PIDS))) {
        if ((ret = ksys_cgroup_create(&mgr->cgroups, proc->uuid, &sandbox->limits, &proc->cgroup, start->cgroup_fds, why,
                                      whylen)) != 0)
            goto Error;
    }
    /* the limits a cgroup does not enforce (a sandbox's bwrap passes them on to the kernel) */
    start->nrlimits = ksys_limits_rlimits(&sandbox->limits, ksys_cgroups_has(&mgr->cgroups, KSYS_CG_MEMORY),
                                          ksys_cgroups_has(&mgr->cgroups, KSYS_CG_PIDS), start->rlimits);
    start->cwd = cwd != NULL ? wire_strdup(cwd) : NULL;
    start->envp = envv.entries;
    envv.entries = NULL;
    if (sandbox->kind == KSYS_SANDBOX_BWRAP) {
        ksys_bwrap_args_t bargs = {.bwrap = mgr->bwrap_path,
                                   .runtime_dir = mgr->runtime_dir,
                                   .kernel_dir = proc->dir,
                                   .workspace = sandbox->workspace,
                                   .cwd = cwd,
                                   .resource_dir = spec->resource_dir,
                                   .home = KMGR_SANDBOX_HOME,
                                   .tmp_bytes = sandbox->tmp_bytes,
                                   .share_net = sandbox->share_net};
        if (mgr->bwrap_path == NULL) {
            snprintf(why, whylen, "cannot sandbox the kernel: bwrap was not found");
            ret = KSYS_ESPAWN;
            goto Error;
        }
        char *name = argv[0];
        /* bwrap would search its own PATH: the program found on the kernel's */
        argv[0] = start->program;
        start->argv = ksys_bwrap_argv(&bargs, argv);
        argv[0] = name;
        start->path = wire_strdup(mgr->bwrap_path);
    } else {
        start->argv = argv;
        argv = NULL;
        start->path = wire_strdup(start->program);
    }
    proc->phase = KMGR_PROC_RUNNING;
    if (use_template) {
        char twhy[KMGR_TPL_MAX_TEXT + 128];
        kmgr_fallback_t reason = KMGR_FALLBACK_UNAVAILABLE;
        snprintf(twhy, sizeof(twhy), "no template is ready");
        /* set first: the answer (kmgr_proc_fork_answer, which frees `start`) may come before kmgr_template_fork returns, when
         * the request's write finds the template dead */
        proc->start = start;
        if (tpl != NULL && (reason = kmgr_template_fork(tpl, proc, start, twhy, sizeof(twhy))) == 0) {
            /* its process comes with the template's answer */
            *out = proc;
            ret = 0;
            goto Exit;
        }
        proc->start = NULL;
        if (kmgr_proc_refused_fork_waits(proc, start, spec, reason, twhy)) {
            /* its process comes from the start queue, in its turn */
            *out = proc;
            ret = 0;
            goto Exit;
        }
        /* a template still starting is no news; a full queue or a request it cannot take is */
        ksys_log(reason == KMGR_FALLBACK_UNAVAILABLE ? KSYS_LOG_INFO : KSYS_LOG_WARN,
                 "the %s kernel is spawned, not forked (%s: %s)", spec->name, kmgr_fallback_name(reason), twhy);
        if ((ret = kmgr_proc_start_spawn(proc, start, why, whylen)) != 0)
            goto Error;
        ++mgr->start_stats.fallback[reason];
    } else {
        if ((ret = kmgr_proc_start_spawn(proc, start, why, whylen)) != 0)
            goto Error;
        ++mgr->start_stats.spawned;
    }
    kmgr_proc_start_free(start);
    *out = proc;
    ret = 0;
    goto Exit;

Error:
    kmgr_proc_start_free(start);
    kmgr_proc_free(proc);
Exit:
    ksys_strv_free(argv);
    ksys_strv_free(envv.entries);
    free(ipython_dir);
    return ret;
}

/* A forked kernel that is gone (or given up): its wait status its template's if known, else unknown (-1); strays left in its
 * group killed; no more link to its template, pid or pidfd. */
static void forget_forked(kmgr_proc_t *proc)
{
    if (!proc->tpl_status_known)
        proc->wstatus = -1;
    if (kmgr_link_linked(&proc->tpl_link))
        kmgr_link_unlink(&proc->tpl_link);
    proc->tpl = NULL;
    kill(-proc->pid, SIGKILL);
    close(proc->pidfd);
    proc->pidfd = -1;
    proc->pid = 0;
}

/* A forked kernel is not kgate's child: its pidfd says it is gone, its template tells its wait status (or, the template dead
 * or silent for KMGR_TPL_STATUS_GRACE_MS, nobody: "exited"). */
static int reap_forked(kmgr_proc_t *proc)
{
    struct pollfd pfd = {.fd = proc->pidfd, .events = POLLIN};

    if (poll(&pfd, 1, 0) <= 0)
        return 0;
    if (proc->tpl != NULL)
        kmgr_template_drain(proc->tpl);
    if (!proc->tpl_status_known && proc->tpl != NULL) {
        uint64_t now = ksys_now_ms();
        if (proc->gone_at == 0)
            proc->gone_at = now;
        if (now - proc->gone_at < KMGR_TPL_STATUS_GRACE_MS)
            return 0;
    }
    forget_forked(proc);
    return 1;
}

void kmgr_proc_reap_blocking(kmgr_proc_t *proc)
{
    int status;

    if (proc->pid == 0)
        return;
    if (proc->forked) {
        /* Its pidfd says when it is gone. Its template's word on how it ended is no use to anyone now, and waiting for it
         * (up to KMGR_TPL_STATUS_GRACE_MS for each, in turn, from a template as starved of CPU as everything else while
         * hundreds of kernels end) made kgate's exit take a second per kernel still in its shutdown: 15 s with 500. */
        struct pollfd pfd = {.fd = proc->pidfd, .events = POLLIN};
        uint64_t deadline = ksys_now_ms() + KMGR_TPL_STATUS_GRACE_MS;
        int r;
        while (((r = poll(&pfd, 1, 10)) == 0 || (r < 0 && errno == EINTR)) && ksys_now_ms() < deadline)
            ;
        /* one alive after SIGKILL this long is stuck in the kernel: the instance sweep has its mark */
        forget_forked(proc);
        return;
    }
    while (waitpid(proc->pid, &status, 0) < 0 && errno == EINTR)
        ;
    kill(-proc->pid, SIGKILL);
    proc->pid = 0;
}

const char *kmgr_proc_start_path(const kmgr_proc_t *proc)
{
    if (proc->start != NULL)
        return "";
    return proc->forked ? "forked" : "spawned";
}

int kmgr_proc_reap(kmgr_proc_t *proc)
{
    int status;
    pid_t r;

    if (proc->start != NULL) {
        if (!proc->spawn_due || proc->phase == KMGR_PROC_RUNNING)
            return 0;
        /* given up while its fallback spawn waited in the start queue: gone without a process */
        kmgr_proc_start_free(proc->start);
        proc->start = NULL;
        proc->spawn_due = 0;
        proc->wstatus = -1;
        return 1;
    }
    if (proc->pid == 0)
        return 1;
    if (proc->forked)
        return reap_forked(proc);
    do {
        r = waitpid(proc->pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0)
        return 0;
    /* ECHILD: somebody else reaped it (or SIGCHLD is ignored by the host); it is gone either way. */
    proc->wstatus = r > 0 ? status : -1;
    /* Strays the kernel left in its process group go with it; the group id cannot have been reused
     * yet as long as one of them lives. */
    kill(-proc->pid, SIGKILL);
    proc->pid = 0;
    return 1;
}

void kmgr_proc_signal(kmgr_proc_t *proc, int sig)
{
    if (proc->pid == 0)
        return;
    if (kill(-proc->pid, sig) != 0)
        kill(proc->pid, sig);
}

void kmgr_proc_describe_exit(const kmgr_proc_t *proc, char *buf, size_t bufsize)
{
    int sig = 0;
    char limit[32];

    if (proc->pid == 0 && proc->wstatus != -1) {
        if (WIFSIGNALED(proc->wstatus))
            sig = WTERMSIG(proc->wstatus);
        /* bwrap exits with 128 + the signal that killed the kernel */
        else if (proc->sandboxed && WIFEXITED(proc->wstatus) && WEXITSTATUS(proc->wstatus) > 128)
            sig = WEXITSTATUS(proc->wstatus) - 128;
    }
    if (proc->start_error != NULL) {
        snprintf(buf, bufsize, "%s", proc->start_error);
    } else if (proc->limits.memory_bytes != 0 && ksys_cgroup_oom_kills(&proc->cgroup) != 0) {
        ksys_format_bytes(proc->limits.memory_bytes, limit, sizeof(limit));
        snprintf(buf, bufsize, "out of memory (memory limit %s)", limit);
    } else if (sig == SIGXCPU && proc->limits.cpu_seconds != 0) {
        snprintf(buf, bufsize, "CPU time limit exceeded (%llu s): killed by SIGXCPU", (unsigned long long)proc->limits.cpu_seconds);
    } else if (sig != 0) {
        const char *abbrev = sigabbrev_np(sig);
        if (abbrev != NULL)
            snprintf(buf, bufsize, "killed by signal %d (SIG%s)", sig, abbrev);
        else
            snprintf(buf, bufsize, "killed by signal %d", sig);
    } else if (proc->pid != 0 || proc->wstatus == -1) {
        snprintf(buf, bufsize, "exited");
    } else if (WIFEXITED(proc->wstatus)) {
        snprintf(buf, bufsize, "exited with code %d", WEXITSTATUS(proc->wstatus));
    } else {
        snprintf(buf, bufsize, "exited (status 0x%x)", (unsigned)proc->wstatus);
    }
}

void kmgr_proc_free(kmgr_proc_t *proc)
{
    if (proc == NULL)
        return;
    if (proc->start != NULL) {
        kmgr_template_forget(proc->start);
        kmgr_proc_start_free(proc->start);
    }
    free(proc->start_error);
    kmgr_channels_close(&proc->channels, 0);
    if (kmgr_link_linked(&proc->tpl_link))
        kmgr_link_unlink(&proc->tpl_link);
    if (proc->pidfd != -1)
        close(proc->pidfd);
    wire_signer_dispose(&proc->signer);
    wire_connection_dispose(&proc->conn);
    ksys_cgroup_release(&proc->cgroup);
    /* off the loop: a sandboxed kernel writes its directory, and may have filled it with millions of files (the thread frees
     * the path) */
    if (proc->dir != NULL)
        ksys_rmtree_detached(proc->dir);
    free(proc->conn_path);
    free(proc);
}

void kmgr_proc_output_tail(const kmgr_proc_t *proc, char *buf, size_t bufsize)
{
    char raw[KMGR_OUTPUT_TAIL_BYTES], *clean = NULL, *path;
    size_t start, end, lines = 0, clean_len, o = 0;
    struct stat st;
    ssize_t got;
    int fd;

    buf[0] = '\0';
    if (proc->dir == NULL || bufsize == 0)
        return;
    path = ksys_path_join(proc->dir, "kernel.log");
    /* a sandboxed kernel writes its directory: what it put there instead of its log is not read (a FIFO would block the open
     * and kgate's loop with it) */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    free(path);
    if (fd == -1)
        return;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (got = pread(fd, raw, sizeof(raw) < (size_t)st.st_size ? sizeof(raw) : (size_t)st.st_size,
                     (size_t)st.st_size > sizeof(raw) ? st.st_size - (off_t)sizeof(raw) : 0)) <= 0) {
        close(fd);
        return;
    }
    close(fd);
    end = (size_t)got;
    while (end != 0 && (raw[end - 1] == '\n' || raw[end - 1] == '\r' || raw[end - 1] == ' ' || raw[end - 1] == '\t'))
        --end;
    for (start = end; start != 0; --start)
        if (raw[start - 1] == '\n' && ++lines == KMGR_OUTPUT_TAIL_LINES)
            break;
    /* a character cut by the window's start is not the kernel's fault: skip its continuation bytes */
    while (start != end && ((unsigned char)raw[start] & 0xc0) == 0x80)
        ++start;
    wire_utf8_sanitize(raw + start, end - start, 1, &clean, &clean_len);
    /* terminal colours and other control characters would reach an API caller's message as escapes */
    for (size_t i = 0; i != clean_len && o + 1 < bufsize; ++i) {
        unsigned char c = (unsigned char)clean[i];
        if (c == 0x1b && i + 1 != clean_len && clean[i + 1] == '[') {
            for (i += 2; i != clean_len && !((unsigned char)clean[i] >= 0x40 && (unsigned char)clean[i] <= 0x7e); ++i)
                ;
            continue;
        }
        if (c < 0x20 && c != '\n' && c != '\t')
            continue;
        buf[o++] = (char)c;
    }
    /* a character cut by the buffer's end would make the reason invalid UTF-8 */
    if (o != 0 && ((unsigned char)buf[o - 1] & 0x80) != 0) {
        size_t lead = o - 1;
        while (lead != 0 && ((unsigned char)buf[lead] & 0xc0) == 0x80)
            --lead;
        if (wire_utf8_sequence((const unsigned char *)buf + lead, o - lead) != (int)(o - lead))
            o = lead;
    }
    buf[o] = '\0';
    free(clean);
}
