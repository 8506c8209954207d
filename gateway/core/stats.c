/* The figures' registry: families and series found by name, registered on first use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ksys/log.h"
#include "wire/alloc.h"
#include "core/stats.h"

void gw_stats_init(gw_stats_t *stats)
{
    memset(stats, 0, sizeof(*stats));
}

void gw_stats_dispose(gw_stats_t *stats)
{
    for (size_t i = 0; i != stats->families.size; ++i) {
        gw_stats_family_t *family = stats->families.entries[i];
        for (size_t j = 0; j != family->series.size; ++j) {
            free(family->series.entries[j]->label_value);
            free(family->series.entries[j]->buckets);
            free(family->series.entries[j]);
        }
        free(family->series.entries);
        free(family->name);
        free(family->help);
        free(family->label);
        free(family->bounds);
        free(family);
    }
    free(stats->families.entries);
    memset(stats, 0, sizeof(*stats));
}

static int same(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static int valid_name(const char *name)
{
    if (name == NULL || !(*name == '_' || *name == ':' || (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z')))
        return 0;
    for (; *name != '\0'; ++name)
        if (!(*name == '_' || *name == ':' || (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z') ||
              (*name >= '0' && *name <= '9')))
            return 0;
    return 1;
}

/* A registration that contradicts an earlier one is a bug in kgate's code, never input: say which and stop. */
static void misuse(const char *name, const char *why)
{
    ksys_log_error("stats: %s: %s", name != NULL ? name : "(null)", why);
    abort();
}

static gw_stats_family_t *family_of(gw_stats_t *stats, const char *name, const char *help, const char *label, gw_stats_type_t type)
{
    gw_stats_family_t *family;

    for (size_t i = 0; i != stats->families.size; ++i) {
        family = stats->families.entries[i];
        if (strcmp(family->name, name) != 0)
            continue;
        if (family->type != type || !same(family->label, label))
            misuse(name, "registered again with another type or label");
        return family;
    }
    if (!valid_name(name) || (label != NULL && (!valid_name(label) || strcmp(label, "le") == 0)))
        misuse(name, "not a valid metric or label name");
    family = wire_calloc(1, sizeof(*family));
    family->name = wire_strdup(name);
    family->help = wire_strdup(help != NULL ? help : "");
    family->label = label != NULL ? wire_strdup(label) : NULL;
    family->type = type;
    h2o_vector_reserve(NULL, &stats->families, stats->families.size + 1);
    stats->families.entries[stats->families.size++] = family;
    return family;
}

static gw_stats_series_t *series_of(gw_stats_t *stats, gw_stats_family_t *family, const char *value)
{
    gw_stats_series_t *series;

    if ((family->label == NULL) != (value == NULL))
        misuse(family->name, "a label value without a label, or a label without a value");
    if (family->sample != NULL)
        misuse(family->name, "a sampled family has no series of its own");
    for (size_t i = 0; i != family->series.size; ++i)
        if (same(family->series.entries[i]->label_value, value))
            return family->series.entries[i];
    if (stats->num_series == GW_STATS_MAX_SERIES)
        misuse(family->name, "more series than GW_STATS_MAX_SERIES");
    series = wire_calloc(1, sizeof(*series));
    series->label_value = value != NULL ? wire_strdup(value) : NULL;
    series->family = family;
    if (family->type == GW_STATS_HISTOGRAM)
        series->buckets = wire_calloc(family->num_bounds != 0 ? family->num_bounds : 1, sizeof(*series->buckets));
    h2o_vector_reserve(NULL, &family->series, family->series.size + 1);
    family->series.entries[family->series.size++] = series;
    ++stats->num_series;
    return series;
}

gw_stats_series_t *gw_stats_counter(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value)
{
    return series_of(stats, family_of(stats, name, help, label, GW_STATS_COUNTER), value);
}

gw_stats_series_t *gw_stats_gauge(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value)
{
    return series_of(stats, family_of(stats, name, help, label, GW_STATS_GAUGE), value);
}

void gw_stats_gauge_fn(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                       gw_stats_read_cb read, void *arg)
{
    gw_stats_series_t *series = gw_stats_gauge(stats, name, help, label, value);
    series->read = read;
    series->read_arg = arg;
}

void gw_stats_counter_fn(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                         gw_stats_read_cb read, void *arg)
{
    gw_stats_series_t *series = gw_stats_counter(stats, name, help, label, value);
    series->read = read;
    series->read_arg = arg;
}

void gw_stats_gauge_sampled(gw_stats_t *stats, const char *name, const char *help, const char *label, gw_stats_sample_cb sample,
                            void *arg)
{
    gw_stats_family_t *family = family_of(stats, name, help, label, GW_STATS_GAUGE);
    if (family->series.size != 0 || label == NULL)
        misuse(name, "a sampled family needs a label and no series of its own");
    family->sample = sample;
    family->sample_arg = arg;
}

gw_stats_series_t *gw_stats_histogram(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                                      const double *bounds, size_t num_bounds)
{
    gw_stats_family_t *family = family_of(stats, name, help, label, GW_STATS_HISTOGRAM);

    if (family->bounds == NULL && num_bounds != 0) {
        for (size_t i = 1; i < num_bounds; ++i)
            if (!(bounds[i - 1] < bounds[i]))
                misuse(name, "histogram bounds must ascend");
        family->bounds = wire_malloc(num_bounds * sizeof(*bounds));
        memcpy(family->bounds, bounds, num_bounds * sizeof(*bounds));
        family->num_bounds = num_bounds;
    }
    return series_of(stats, family, value);
}

void gw_stats_observe(gw_stats_series_t *series, double value)
{
    const gw_stats_family_t *family;

    if (series == NULL)
        return;
    family = series->family;
    for (size_t i = 0; i != family->num_bounds; ++i) {
        if (value <= family->bounds[i]) {
            ++series->buckets[i];
            break;
        }
    }
    ++series->count;
    series->sum += value;
}
