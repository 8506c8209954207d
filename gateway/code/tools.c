/* Code mode's codec: declared tools checked and named for Python, their setup code, and the batches of calls they send. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "code/tools.h"
#include "code/tools_shim.inc"

#define TOOL_NAME_MAX 128

/* Python 3's hard keywords (keyword.kwlist): an identifier equal to one would not parse */
static const char *const python_keywords[] = {
    "False",  "None",     "True", "and",    "as",      "assert", "async",  "await",  "break", "class",  "continue", "def",
    "del",    "elif",     "else", "except", "finally", "for",    "from",   "global", "if",    "import", "in",       "is",
    "lambda", "nonlocal", "not",  "or",     "pass",    "raise",  "return", "try",    "while", "with",   "yield"};

char *gw_tool_python_ident(const char *name)
{
    size_t len = strlen(name), n = 0;
    char *out = wire_malloc(len + 3);

    if (name[0] >= '0' && name[0] <= '9')
        out[n++] = '_';
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0';) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') {
            out[n++] = (char)*p++;
            continue;
        }
        out[n++] = '_';
        /* one `_` per code point: skip the continuation bytes of a multi-byte character */
        for (++p; (*p & 0xc0) == 0x80; ++p)
            ;
    }
    if (n == 0)
        out[n++] = '_';
    out[n] = '\0';
    for (size_t i = 0; i != sizeof(python_keywords) / sizeof(python_keywords[0]); ++i) {
        if (strcmp(out, python_keywords[i]) == 0) {
            out[n++] = '_';
            out[n] = '\0';
            break;
        }
    }
    return out;
}

void gw_toolset_destroy(gw_toolset_t *set)
{
    if (set == NULL)
        return;
    for (size_t i = 0; i != set->num_tools; ++i) {
        free(set->tools[i].name);
        free(set->tools[i].ident);
        free(set->tools[i].description);
        json_decref(set->tools[i].input_schema);
    }
    free(set);
}

const gw_tool_t *gw_toolset_find(const gw_toolset_t *set, const char *name)
{
    if (set == NULL)
        return NULL;
    for (size_t i = 0; i != set->num_tools; ++i)
        if (strcmp(set->tools[i].name, name) == 0)
            return &set->tools[i];
    return NULL;
}

static size_t json_size(const json_t *json)
{
    return json != NULL ? json_dumpb(json, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY) : 0;
}

/* Checks tools[i]; fills `tool` or writes the reason into err. */
static int parse_tool(const json_t *jtool, size_t i, const gw_config_t *config, gw_tool_t *tool, char *err, size_t errsize)
{
    const json_t *jname = json_object_get(jtool, "name"), *jdesc = json_object_get(jtool, "description"),
                 *jschema = json_object_get(jtool, "input_schema");
    const char *name;

    if (!json_is_object(jtool)) {
        snprintf(err, errsize, "tools[%zu] must be an object {\"name\", \"description\"?, \"input_schema\"?}", i);
        return GW_ETOOLSINVALID;
    }
    if (!json_is_string(jname) || json_string_length(jname) == 0 || json_string_length(jname) > TOOL_NAME_MAX) {
        snprintf(err, errsize, "tools[%zu].name must be a string of 1 to %d bytes", i, TOOL_NAME_MAX);
        return GW_ETOOLSINVALID;
    }
    name = json_string_value(jname);
    for (const unsigned char *p = (const unsigned char *)name;; ++p) {
        if (*p == '\0' && (size_t)((const char *)p - name) == json_string_length(jname))
            break;
        if (*p < 0x20 || *p == 0x7f) {
            snprintf(err, errsize, "tools[%zu].name must not contain control characters", i);
            return GW_ETOOLSINVALID;
        }
    }
    if (jdesc != NULL && !json_is_null(jdesc) &&
        (!json_is_string(jdesc) || strlen(json_string_value(jdesc)) != json_string_length(jdesc))) {
        snprintf(err, errsize, "tools[%zu].description (tool \"%s\") must be a string without NUL characters", i, name);
        return GW_ETOOLSINVALID;
    }
    if (jschema != NULL && !json_is_null(jschema) && !json_is_object(jschema)) {
        snprintf(err, errsize, "tools[%zu].input_schema (tool \"%s\") must be a JSON Schema object", i, name);
        return GW_ETOOLSINVALID;
    }
    if (json_size(jtool) > config->max_tool_spec_bytes) {
        snprintf(err, errsize, "tool \"%s\" takes %zu bytes as JSON, more than the %zu allowed (--max-tool-spec-bytes)", name,
                 json_size(jtool), config->max_tool_spec_bytes);
        return GW_ETOOLSINVALID;
    }
    tool->name = wire_strdup(name);
    tool->ident = gw_tool_python_ident(name);
    tool->description = json_is_string(jdesc) ? wire_strdup(json_string_value(jdesc)) : NULL;
    tool->input_schema = json_is_object(jschema) ? json_deep_copy(jschema) : NULL;
    return 0;
}

int gw_toolset_parse(const json_t *tools, const gw_config_t *config, gw_toolset_t **out, char *err, size_t errsize)
{
    gw_toolset_t *set;
    size_t n;
    int ret;

    *out = NULL;
    if (tools == NULL || json_is_null(tools))
        return 0;
    if (!json_is_array(tools)) {
        snprintf(err, errsize, "tools must be an array of {\"name\", \"description\"?, \"input_schema\"?}");
        return GW_ETOOLSINVALID;
    }
    if ((n = json_array_size(tools)) == 0)
        return 0;
    if (n > config->max_tools) {
        snprintf(err, errsize, "%zu tools declared, more than the %u allowed (--max-tools)", n, config->max_tools);
        return GW_ETOOLSINVALID;
    }
    set = wire_calloc(1, sizeof(*set) + n * sizeof(set->tools[0]));
    for (size_t i = 0; i != n; ++i) {
        if ((ret = parse_tool(json_array_get(tools, i), i, config, &set->tools[i], err, errsize)) != 0)
            goto Error;
        set->num_tools = i + 1;
        for (size_t j = 0; j != i; ++j) {
            if (strcmp(set->tools[j].name, set->tools[i].name) == 0) {
                snprintf(err, errsize, "tool \"%s\" is declared twice", set->tools[i].name);
                ret = GW_ETOOLSINVALID;
                goto Error;
            }
            if (strcmp(set->tools[j].ident, set->tools[i].ident) == 0) {
                snprintf(err, errsize, "tools \"%s\" and \"%s\" would both be the Python function %s(); rename one",
                         set->tools[j].name, set->tools[i].name, set->tools[i].ident);
                ret = GW_ETOOLSINVALID;
                goto Error;
            }
        }
    }
    *out = set;
    return 0;
Error:
    gw_toolset_destroy(set);
    return ret;
}

/* A Python string literal for `s`: a JSON string is one, as long as '/' is not escaped (jansson's default). */
static char *python_literal(const char *s)
{
    json_t *str = json_string(s);
    char *lit = json_dumps(str, JSON_ENCODE_ANY);
    json_decref(str);
    return lit;
}

char *gw_toolset_python_setup(const gw_toolset_t *set, const gw_config_t *config)
{
    /* runs in its own globals: nothing but the tools reaches the user's namespace */
    static const char boot[] = "import sys, types\n"
                               "m = sys.modules.get('_kgate_codemode')\n"
                               "if m is None or getattr(m, '__kgate_source__', None) != source:\n"
                               "    m = types.ModuleType('_kgate_codemode')\n"
                               "    m.__kgate_source__ = source\n"
                               "    exec(compile(source, '<kgate code mode>', 'exec'), m.__dict__)\n"
                               "    import linecache\n" /* tracebacks show the line that raised */
                               "    linecache.cache['<kgate code mode>'] = (len(source), None, source.splitlines(True), "
                               "'<kgate code mode>')\n"
                               "    sys.modules['_kgate_codemode'] = m\n"
                               "m.install(spec)\n";
    json_t *spec = json_object(), *jtools = json_array();
    char *spec_text, *lit_boot, *lit_shim, *lit_spec, *code;
    size_t len;

    for (size_t i = 0; set != NULL && i != set->num_tools; ++i) {
        const gw_tool_t *t = &set->tools[i];
        json_t *jt = json_pack("{s:s, s:s}", "name", t->name, "ident", t->ident);
        if (t->description != NULL)
            json_object_set_new(jt, "description", json_string(t->description));
        if (t->input_schema != NULL)
            json_object_set(jt, "input_schema", t->input_schema);
        json_array_append_new(jtools, jt);
    }
    json_object_set_new(spec, "tools", jtools);
    json_object_set_new(spec, "limits", json_pack("{s:I}", "max_argument_bytes", (json_int_t)config->max_tool_argument_bytes));
    spec_text = json_dumps(spec, JSON_COMPACT);
    lit_boot = python_literal(boot);
    lit_shim = python_literal(tools_python_shim);
    lit_spec = python_literal(spec_text);
    len = strlen(lit_boot) + strlen(lit_shim) + strlen(lit_spec) + 64;
    code = wire_malloc(len);
    snprintf(code, len, "exec(%s, {'source': %s, 'spec': %s})\n", lit_boot, lit_shim, lit_spec);
    free(lit_boot);
    free(lit_shim);
    free(lit_spec);
    free(spec_text);
    json_decref(spec);
    return code;
}

int gw_tool_batch_parse(const char *prompt, json_t **calls)
{
    static const size_t mark_len = sizeof(GW_TOOL_CALLS_MARK) - 1;
    json_t *batch;

    *calls = NULL;
    if (prompt == NULL || strncmp(prompt, GW_TOOL_CALLS_MARK, mark_len) != 0)
        return 0;
    if ((batch = json_loads(prompt + mark_len, 0, NULL)) != NULL && json_is_array(json_object_get(batch, "calls")))
        *calls = json_incref(json_object_get(batch, "calls"));
    json_decref(batch);
    return 1;
}
