/* Prometheus text exposition 0.0.4 of the stats registry. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "metrics/prometheus.h"

typedef struct st_prom_out_t {
    char *buf;
    size_t len, cap;
} prom_out_t;

static void reserve(prom_out_t *out, size_t more)
{
    if (out->len + more + 1 <= out->cap)
        return;
    while (out->len + more + 1 > out->cap)
        out->cap = out->cap != 0 ? out->cap * 2 : 4096;
    out->buf = wire_realloc(out->buf, out->cap);
}

static void put(prom_out_t *out, const char *s, size_t n)
{
    reserve(out, n);
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    out->buf[out->len] = '\0';
}

static void puts_(prom_out_t *out, const char *s)
{
    put(out, s, strlen(s));
}

/* `in_label`: a label value (escapes `"` too); otherwise help text */
static void put_escaped(prom_out_t *out, const char *s, int in_label)
{
    for (; *s != '\0'; ++s) {
        if (*s == '\\')
            puts_(out, "\\\\");
        else if (*s == '\n')
            puts_(out, "\\n");
        else if (*s == '"' && in_label)
            puts_(out, "\\\"");
        else
            put(out, s, 1);
    }
}

/* The shortest of %.15g..%.17g that reads back as `v` (0.1 stays "0.1", as Prometheus's own clients write it). */
static void format_double(char *num, size_t size, double v)
{
    for (int precision = 15; precision <= 17; ++precision) {
        snprintf(num, size, "%.*g", precision, v);
        if (strtod(num, NULL) == v)
            return;
    }
}

/* Integers as integers (counts read as counts), the rest with enough digits to round-trip; the format's own spellings of
 * the infinities and NaN. */
static void put_number(prom_out_t *out, double v)
{
    char num[40];

    if (isnan(v))
        snprintf(num, sizeof(num), "NaN");
    else if (isinf(v))
        snprintf(num, sizeof(num), v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 9007199254740992.0)
        snprintf(num, sizeof(num), "%.0f", v);
    else
        format_double(num, sizeof(num), v);
    puts_(out, num);
}

/* `name[suffix]{label="value",le="bound"} number` */
static void put_line(prom_out_t *out, const gw_stats_family_t *family, const char *suffix, const char *label_value, const char *le,
                     double v)
{
    puts_(out, family->name);
    puts_(out, suffix);
    if (label_value != NULL || le != NULL) {
        puts_(out, "{");
        if (label_value != NULL) {
            puts_(out, family->label);
            puts_(out, "=\"");
            put_escaped(out, label_value, 1);
            puts_(out, "\"");
        }
        if (le != NULL) {
            puts_(out, label_value != NULL ? ",le=\"" : "le=\"");
            puts_(out, le);
            puts_(out, "\"");
        }
        puts_(out, "}");
    }
    puts_(out, " ");
    put_number(out, v);
    puts_(out, "\n");
}

static void put_histogram(prom_out_t *out, const gw_stats_family_t *family, const gw_stats_series_t *series)
{
    uint64_t cumulative = 0;
    char le[40];

    for (size_t i = 0; i != family->num_bounds; ++i) {
        cumulative += series->buckets[i];
        format_double(le, sizeof(le), family->bounds[i]);
        put_line(out, family, "_bucket", series->label_value, le, (double)cumulative);
    }
    put_line(out, family, "_bucket", series->label_value, "+Inf", (double)series->count);
    put_line(out, family, "_sum", series->label_value, NULL, series->sum);
    put_line(out, family, "_count", series->label_value, NULL, (double)series->count);
}

typedef struct st_prom_emit_t {
    gw_stats_emit_t super;
    prom_out_t *out;
    const gw_stats_family_t *family;
} prom_emit_t;

static void on_emit(gw_stats_emit_t *emit, const char *label_value, double value)
{
    prom_emit_t *self = (prom_emit_t *)emit;
    put_line(self->out, self->family, "", label_value != NULL ? label_value : "", NULL, value);
}

char *gw_prom_render(gw_stats_t *stats, size_t *len)
{
    static const char *const types[] = {
        [GW_STATS_COUNTER] = "counter", [GW_STATS_GAUGE] = "gauge", [GW_STATS_HISTOGRAM] = "histogram"};
    prom_out_t out = {NULL, 0, 0};

    reserve(&out, 0);
    out.buf[0] = '\0';
    for (size_t i = 0; i != stats->families.size; ++i) {
        const gw_stats_family_t *family = stats->families.entries[i];
        puts_(&out, "# HELP ");
        puts_(&out, family->name);
        puts_(&out, " ");
        put_escaped(&out, family->help, 0);
        puts_(&out, "\n# TYPE ");
        puts_(&out, family->name);
        puts_(&out, " ");
        puts_(&out, types[family->type]);
        puts_(&out, "\n");
        if (family->sample != NULL) {
            prom_emit_t emit = {{on_emit}, &out, family};
            family->sample(family->sample_arg, &emit.super);
            continue;
        }
        for (size_t j = 0; j != family->series.size; ++j) {
            const gw_stats_series_t *series = family->series.entries[j];
            if (family->type == GW_STATS_HISTOGRAM)
                put_histogram(&out, family, series);
            else
                put_line(&out, family, "", series->label_value, NULL,
                         series->read != NULL ? series->read(series->read_arg) : series->value);
        }
    }
    *len = out.len;
    return out.buf;
}
