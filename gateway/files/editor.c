/* The text-editor tool's commands on contents in memory (view, str_replace, insert) and a bounded undo history. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "files/editor.h"

/* Bytes charged per history entry and per version beside the contents, so that empty versions are bounded too. */
#define ENTRY_OVERHEAD 128
#define VERSION_OVERHEAD 32

void gw_editor_multiple_matches_message(size_t n, char *buf, size_t size)
{
    snprintf(buf, size, "Error: Found %zu matches for replacement text. Please provide more context to make a unique match.", n);
}

size_t gw_editor_count_lines(const char *s, size_t len)
{
    size_t n = 0, i;

    if (len == 0)
        return 0;
    for (i = 0; i != len; ++i)
        n += s[i] == '\n';
    return n + (s[len - 1] != '\n');
}

/* Byte offset where line `line` (1-indexed) starts; len when past the end. */
static size_t line_start(const char *s, size_t len, size_t line)
{
    size_t off = 0;

    while (line > 1 && off < len) {
        const char *nl = memchr(s + off, '\n', len - off);
        if (nl == NULL)
            return len;
        off = (size_t)(nl - s) + 1;
        --line;
    }
    return off;
}

int gw_editor_view(const char *s, size_t len, long start, long end, size_t max_chars, char **out, size_t *out_len, int *truncated)
{
    size_t n = gw_editor_count_lines(s, len), first, last, off, cap, used = 0, line, chars = 0;
    char *buf;

    *truncated = 0;
    if (start < 1 || (n == 0 ? start != 1 : (size_t)start > n) || (end != -1 && end < start))
        return GW_EEDITOR_INVALIDRANGE;
    first = (size_t)start;
    last = end == -1 || (size_t)end > n ? n : (size_t)end;
    off = line_start(s, len, first);
    /* every line gains at most 22 bytes of "<n>: " and a '\n' */
    cap = len - off + (last >= first ? (last - first + 1) * 24 : 0) + 1;
    buf = wire_malloc(cap);
    for (line = first; line <= last && off <= len; ++line) {
        const char *nl = memchr(s + off, '\n', len - off);
        size_t llen = nl != NULL ? (size_t)(nl - (s + off)) : len - off;
        used += (size_t)snprintf(buf + used, cap - used, "%s%zu: ", line == first ? "" : "\n", line);
        memcpy(buf + used, s + off, llen);
        used += llen;
        off += llen + 1;
    }
    buf[used] = '\0';
    if (max_chars != 0) {
        size_t i;
        for (i = 0; i != used; ++i) {
            /* a character starts at every byte that is not a UTF-8 continuation byte */
            if (((unsigned char)buf[i] & 0xc0) != 0x80 && ++chars > max_chars) {
                used = i;
                buf[used] = '\0';
                *truncated = 1;
                break;
            }
        }
    }
    *out = buf;
    *out_len = used;
    return 0;
}

int gw_editor_str_replace(const char *s, size_t len, const char *old, size_t old_len, const char *new_, size_t new_len,
                          size_t max_len, char **out, size_t *out_len, size_t *matches)
{
    const char *p = s, *end = s + len, *found = NULL;
    size_t count = 0, pos, total;
    char *buf;

    *matches = 0;
    if (old_len == 0)
        return GW_EEDITOR_EMPTYOLDSTR;
    while ((size_t)(end - p) >= old_len) {
        const char *hit = memmem(p, (size_t)(end - p), old, old_len);
        if (hit == NULL)
            break;
        if (count++ == 0)
            found = hit;
        p = hit + old_len;
    }
    *matches = count;
    if (count == 0)
        return GW_EEDITOR_NOMATCH;
    if (count > 1)
        return GW_EEDITOR_MULTIPLEMATCHES;
    total = len - old_len + new_len;
    if (total > max_len)
        return GW_EEDITOR_TOOLARGE;
    pos = (size_t)(found - s);
    buf = wire_malloc(total + 1);
    memcpy(buf, s, pos);
    memcpy(buf + pos, new_, new_len);
    memcpy(buf + pos + new_len, s + pos + old_len, len - pos - old_len);
    buf[total] = '\0';
    *out = buf;
    *out_len = total;
    return 0;
}

int gw_editor_insert(const char *s, size_t len, long line, const char *text, size_t text_len, size_t max_len, char **out,
                     size_t *out_len)
{
    size_t n = gw_editor_count_lines(s, len), pos, total, used = 0;
    int nl_before, nl_after;
    char *buf;

    if (line < 0 || (size_t)line > n)
        return GW_EEDITOR_INVALIDLINE;
    pos = line == 0 ? 0 : line_start(s, len, (size_t)line + 1);
    nl_before = pos == len && len != 0 && s[len - 1] != '\n';
    nl_after = pos < len && (text_len == 0 || text[text_len - 1] != '\n');
    total = len + text_len + (size_t)nl_before + (size_t)nl_after;
    if (total > max_len)
        return GW_EEDITOR_TOOLARGE;
    buf = wire_malloc(total + 1);
    memcpy(buf, s, pos);
    used = pos;
    if (nl_before)
        buf[used++] = '\n';
    memcpy(buf + used, text, text_len);
    used += text_len;
    if (nl_after)
        buf[used++] = '\n';
    memcpy(buf + used, s + pos, len - pos);
    used += len - pos;
    buf[used] = '\0';
    *out = buf;
    *out_len = used;
    return 0;
}

/* ---- undo history --------------------------------------------------------------------------- */

typedef struct st_version_t {
    char *content; /* NULL when the file did not exist */
    size_t len;
} version_t;

typedef struct st_entry_t {
    char *key;
    version_t *versions; /* oldest first, max_depth slots */
    size_t num_versions;
    unsigned long long last_used;
} entry_t;

struct st_gw_editor_history_t {
    unsigned max_depth;
    size_t max_bytes;
    size_t bytes;
    entry_t *entries;
    size_t num_entries, cap_entries;
    unsigned long long clock;
};

gw_editor_history_t *gw_editor_history_create(unsigned max_depth, size_t max_bytes)
{
    gw_editor_history_t *h = wire_calloc(1, sizeof(*h));

    h->max_depth = max_depth != 0 ? max_depth : 1;
    h->max_bytes = max_bytes;
    return h;
}

static size_t version_cost(const version_t *v)
{
    return v->len + VERSION_OVERHEAD;
}

static void entry_drop_oldest(gw_editor_history_t *h, entry_t *e)
{
    h->bytes -= version_cost(&e->versions[0]);
    free(e->versions[0].content);
    memmove(e->versions, e->versions + 1, sizeof(e->versions[0]) * (e->num_versions - 1));
    --e->num_versions;
}

static void remove_entry(gw_editor_history_t *h, size_t i)
{
    entry_t *e = &h->entries[i];

    while (e->num_versions != 0)
        entry_drop_oldest(h, e);
    h->bytes -= ENTRY_OVERHEAD + strlen(e->key);
    free(e->key);
    free(e->versions);
    h->entries[i] = h->entries[--h->num_entries];
}

void gw_editor_history_destroy(gw_editor_history_t *h)
{
    if (h == NULL)
        return;
    while (h->num_entries != 0)
        remove_entry(h, h->num_entries - 1);
    free(h->entries);
    free(h);
}

static entry_t *find_entry(const gw_editor_history_t *h, const char *key, size_t *index)
{
    size_t i;

    for (i = 0; i != h->num_entries; ++i) {
        if (strcmp(h->entries[i].key, key) == 0) {
            if (index != NULL)
                *index = i;
            return &h->entries[i];
        }
    }
    return NULL;
}

/* Drops the oldest version of the least recently used entry other than `keep`, until within bounds. */
static void evict(gw_editor_history_t *h, const char *keep)
{
    while (h->bytes > h->max_bytes) {
        size_t i, victim = SIZE_MAX;
        for (i = 0; i != h->num_entries; ++i) {
            if (strcmp(h->entries[i].key, keep) == 0)
                continue;
            if (victim == SIZE_MAX || h->entries[i].last_used < h->entries[victim].last_used)
                victim = i;
        }
        if (victim == SIZE_MAX) {
            /* only `keep` is left: shed its oldest versions (its newest fits, the caller checked) */
            size_t k;
            entry_t *e = find_entry(h, keep, &k);
            if (e == NULL || e->num_versions <= 1)
                return;
            entry_drop_oldest(h, e);
            continue;
        }
        if (h->entries[victim].num_versions > 1)
            entry_drop_oldest(h, &h->entries[victim]);
        else
            remove_entry(h, victim);
    }
}

void gw_editor_history_push(gw_editor_history_t *h, const char *key, const char *content, size_t len, int existed)
{
    size_t index;
    entry_t *e = find_entry(h, key, &index);
    version_t v;

    if (!existed)
        len = 0;
    if (len + VERSION_OVERHEAD + ENTRY_OVERHEAD + strlen(key) > h->max_bytes) {
        if (e != NULL)
            remove_entry(h, index);
        return;
    }
    if (e == NULL) {
        if (h->num_entries == h->cap_entries) {
            h->cap_entries = h->cap_entries != 0 ? h->cap_entries * 2 : 8;
            h->entries = wire_realloc(h->entries, sizeof(h->entries[0]) * h->cap_entries);
        }
        e = &h->entries[h->num_entries++];
        memset(e, 0, sizeof(*e));
        e->key = wire_strdup(key);
        e->versions = wire_calloc(h->max_depth, sizeof(e->versions[0]));
        h->bytes += ENTRY_OVERHEAD + strlen(key);
    }
    if (e->num_versions == h->max_depth)
        entry_drop_oldest(h, e);
    v.len = len;
    v.content = NULL;
    if (existed) {
        v.content = wire_malloc(len + 1);
        memcpy(v.content, content, len);
        v.content[len] = '\0';
    }
    e->versions[e->num_versions++] = v;
    e->last_used = ++h->clock;
    h->bytes += version_cost(&v);
    evict(h, key);
}

int gw_editor_history_pop(gw_editor_history_t *h, const char *key, char **content, size_t *len, int *existed)
{
    size_t index;
    entry_t *e = find_entry(h, key, &index);
    version_t v;

    if (e == NULL || e->num_versions == 0)
        return GW_EEDITOR_NOHISTORY;
    v = e->versions[--e->num_versions];
    h->bytes -= version_cost(&v);
    *content = v.content;
    *len = v.len;
    *existed = v.content != NULL;
    e->last_used = ++h->clock;
    if (e->num_versions == 0)
        remove_entry(h, index);
    return 0;
}

size_t gw_editor_history_depth(const gw_editor_history_t *h, const char *key)
{
    const entry_t *e = find_entry(h, key, NULL);
    return e != NULL ? e->num_versions : 0;
}

size_t gw_editor_history_bytes(const gw_editor_history_t *h)
{
    return h->bytes;
}
