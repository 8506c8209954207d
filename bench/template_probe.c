/* bench/template_probe.c: what the bench reads of a kgate's Python kernel template (template_probe.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "common.h"
#include "template_probe.h"

/* Whether kgate's log says its template is ready. */
int bench_template_ready(const ts_gateway_t *gw)
{
    FILE *fp = fopen(gw->log_path, "r");
    char line[1024];
    int ready = 0;

    while (fp != NULL && !ready && fgets(line, sizeof(line), fp) != NULL)
        ready = strstr(line, "kernel template (pid ") != NULL && strstr(line, ") is ready after") != NULL;
    if (fp != NULL)
        fclose(fp);
    return ready;
}

int bench_template_wait(const ts_gateway_t *gw, volatile sig_atomic_t *interrupted)
{
    for (int64_t deadline = ts_now_ms() + BENCH_TEMPLATE_WAIT_MS; !bench_template_ready(gw);) {
        if (ts_now_ms() > deadline || *interrupted) {
            bench_set_detail("the template was not ready within %d ms", BENCH_TEMPLATE_WAIT_MS);
            return BENCH_ETIMEDOUT;
        }
        ts_sleep_ms(100);
    }
    return 0;
}

/* Pss of /proc/<pid>/smaps_rollup in KiB, or -1. */
long long bench_pss_kib(int pid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
    return bench_proc_kib(path, "Pss");
}

/* The pid of the python3 template of kgate `gw` (its log), or 0. */
int bench_template_pid(const ts_gateway_t *gw)
{
    FILE *fp = fopen(gw->log_path, "r");
    char line[1024], *at;
    int pid = 0;

    while (fp != NULL && fgets(line, sizeof(line), fp) != NULL)
        if ((at = strstr(line, "kernel template (pid ")) != NULL && strstr(line, ") is ready after") != NULL)
            pid = atoi(at + strlen("kernel template (pid "));
    if (fp != NULL)
        fclose(fp);
    return pid;
}

/* The PSS in KiB of the template's children that are none of `kernels` (its spare, forked ahead: memory kgate keeps). */
long long bench_spare_pss_kib(int template, const int *kernels, size_t n)
{
    char path[64];
    long long kib = 0;
    int pid;
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", template, template);
    if ((fp = fopen(path, "r")) == NULL)
        return 0;
    while (fscanf(fp, "%d", &pid) == 1) {
        size_t i = 0;
        while (i != n && kernels[i] != pid)
            ++i;
        if (i == n && bench_pss_kib(pid) > 0)
            kib += bench_pss_kib(pid);
    }
    fclose(fp);
    return kib;
}
