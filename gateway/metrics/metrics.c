/* Machine metrics from /proc/stat and /proc/meminfo, in execd's JSON shape. */
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/host.h"
#include "metrics/metrics.h"
#include "core/event.h"

/* /proc/stat grows with the CPU count; its first line is all we need */
#define PROC_READ_MAX 8192

int gw_metrics_parse_stat(const char *text, size_t len, gw_cpu_sample_t *out)
{
    char line[512];
    unsigned long long v[8] = {0};
    const char *nl = memchr(text, '\n', len);
    size_t line_len = nl != NULL ? (size_t)(nl - text) : len;
    int n;

    if (line_len < 5 || memcmp(text, "cpu ", 4) != 0 || line_len >= sizeof(line))
        return -1;
    memcpy(line, text, line_len);
    line[line_len] = '\0';
    /* user nice system idle iowait irq softirq steal (guest time is already inside user) */
    n = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    if (n < 4)
        return -1;
    out->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    out->total = out->busy + v[3] + v[4];
    return 0;
}

/* The value in kB of `key` ("MemTotal:") in meminfo's text, or -1. */
static long long meminfo_value(const char *text, size_t len, const char *key)
{
    size_t key_len = strlen(key);
    const char *p = text, *end = text + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        if ((size_t)(line_end - p) > key_len && memcmp(p, key, key_len) == 0) {
            long long value = 0;
            const char *q = p + key_len;
            while (q < line_end && *q == ' ')
                ++q;
            if (q == line_end || *q < '0' || *q > '9')
                return -1;
            while (q < line_end && *q >= '0' && *q <= '9')
                value = value * 10 + (*q++ - '0');
            return value;
        }
        p = line_end + 1;
    }
    return -1;
}

int gw_metrics_parse_meminfo(const char *text, size_t len, uint64_t *total_kib, uint64_t *available_kib)
{
    long long total = meminfo_value(text, len, "MemTotal:"), avail = meminfo_value(text, len, "MemAvailable:");

    if (total < 0)
        return -1;
    if (avail < 0) {
        long long free_kib = meminfo_value(text, len, "MemFree:"), buffers = meminfo_value(text, len, "Buffers:"),
                  cached = meminfo_value(text, len, "Cached:");
        avail = (free_kib > 0 ? free_kib : 0) + (buffers > 0 ? buffers : 0) + (cached > 0 ? cached : 0);
    }
    *total_kib = (uint64_t)total;
    *available_kib = (uint64_t)(avail < total ? avail : total);
    return 0;
}

double gw_metrics_cpu_pct(const gw_cpu_sample_t *older, const gw_cpu_sample_t *newer)
{
    uint64_t total, busy;

    if (newer->total <= older->total || newer->busy < older->busy)
        return 0;
    total = newer->total - older->total;
    busy = newer->busy - older->busy;
    return busy >= total ? 100.0 : 100.0 * (double)busy / (double)total;
}

static ssize_t read_proc(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd == -1)
        return -1;
    n = read(fd, buf, size);
    close(fd);
    return n;
}

static unsigned cpu_count(void)
{
    cpu_set_t set;
    long n;

    /* the CPUs kgate may use, as Go's GOMAXPROCS (execd's figure) counts them */
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

int gw_metrics_sample_cpu(gw_cpu_sample_t *now)
{
    char buf[PROC_READ_MAX];
    ssize_t n;

    memset(now, 0, sizeof(*now));
    if ((n = read_proc("/proc/stat", buf, sizeof(buf))) <= 0 || gw_metrics_parse_stat(buf, (size_t)n, now) != 0)
        return -1;
    now->at_ms = gw_now_ms();
    return 0;
}

json_t *gw_metrics_read(const gw_cpu_sample_t *baseline, gw_cpu_sample_t *now)
{
    char buf[PROC_READ_MAX];
    gw_cpu_sample_t since_boot = {0};
    uint64_t total_kib, avail_kib;
    ssize_t n;

    if (gw_metrics_sample_cpu(now) != 0)
        return NULL;
    if ((n = read_proc("/proc/meminfo", buf, sizeof(buf))) <= 0 ||
        gw_metrics_parse_meminfo(buf, (size_t)n, &total_kib, &avail_kib) != 0)
        return NULL;
    return json_pack("{s:i, s:f, s:f, s:f, s:I}", "cpu_count", (int)cpu_count(), "cpu_used_pct",
                     gw_metrics_cpu_pct(baseline != NULL && baseline->at_ms != 0 ? baseline : &since_boot, now), "mem_total_mib",
                     (double)total_kib / 1024.0, "mem_used_mib", (double)(total_kib - avail_kib) / 1024.0, "timestamp",
                     (json_int_t)gw_unix_ms());
}

void gw_metrics_init(gw_metrics_t *metrics)
{
    memset(metrics, 0, sizeof(*metrics));
    gw_metrics_sample_cpu(&metrics->samples[1]);
}

void gw_metrics_tick(gw_metrics_t *metrics)
{
    gw_cpu_sample_t sample;

    if (gw_now_ms() - metrics->samples[1].at_ms >= GW_METRICS_INTERVAL_MS && gw_metrics_sample_cpu(&sample) == 0) {
        metrics->samples[0] = metrics->samples[1];
        metrics->samples[1] = sample;
    }
}

const gw_cpu_sample_t *gw_metrics_baseline(const gw_metrics_t *metrics)
{
    int64_t now = gw_now_ms();

    if (metrics->samples[1].at_ms != 0 && now - metrics->samples[1].at_ms >= 100)
        return &metrics->samples[1];
    return metrics->samples[0].at_ms != 0 ? &metrics->samples[0] : &metrics->samples[1];
}
