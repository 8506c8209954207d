/* code/tools.h: code mode's codec: declared tools checked and named for Python, the code that binds them in a kernel, and
 * the batches of calls that come back as stdin requests (pure: JSON in, JSON or text out). */
#ifndef GW_TOOLS_H
#define GW_TOOLS_H

#include <stddef.h>
#include <jansson.h>
#include "core/config.h"

/**
 * The prompt prefix of an input_request that carries a batch of tool calls rather than a question
 * for a human: code/tools_shim.py sends MARK + `{"calls":[{"name","arguments"},...]}`. The unit
 * separators keep it from any prompt a person would write.
 */
#define GW_TOOL_CALLS_MARK "\x1fkgate-tool-calls/1\x1f"

/** One tool a run declared. */
typedef struct st_gw_tool_t {
    char *name;           /* as declared: what tool_call events carry and the caller dispatches on */
    char *ident;          /* the function's name in the kernel: a Python identifier (gw_tool_python_ident) */
    char *description;    /* NULL when none */
    json_t *input_schema; /* NULL when none (a reference) */
} gw_tool_t;

/** The tools of one run (gw_toolset_parse); owned by whoever holds it, released with gw_toolset_destroy. */
typedef struct st_gw_toolset_t {
    size_t num_tools;
    gw_tool_t tools[];
} gw_toolset_t;

/**
 * Checks a `tools` array of POST /code (`[{"name", "description"?, "input_schema"?}]`) against
 * config->max_tools and max_tool_spec_bytes, and names each tool for Python. Returns 0 with a new
 * toolset in `*out` (NULL when `tools` is NULL, JSON null or an empty array), or GW_ETOOLSINVALID
 * with a sentence for the caller in `err` (names longer than 128 bytes or holding control
 * characters, a non-string description, a non-object schema, a duplicate name, two names that
 * sanitise to one identifier).
 */
int gw_toolset_parse(const json_t *tools, const gw_config_t *config, gw_toolset_t **out, char *err, size_t errsize);

/** Frees a toolset (NULL is fine). */
void gw_toolset_destroy(gw_toolset_t *set);

/** The tool declared as `name`, or NULL. */
const gw_tool_t *gw_toolset_find(const gw_toolset_t *set, const char *name);

/**
 * The Python identifier for a tool name (a new string): every character (UTF-8 code point) that
 * is not an ASCII letter, digit or underscore becomes `_`; a leading digit gets a `_` before it;
 * a Python keyword (`class`, `None`, ...) gets a trailing `_` (PEP 8). `search-records` ->
 * `search_records`, `2fa` -> `_2fa`, `class` -> `class_`, `""` -> `_`.
 */
char *gw_tool_python_ident(const char *name);

/**
 * The code that binds `set`'s tools as functions in a Python (ipykernel) kernel: run it silently
 * before the run's own code. It defines nothing in the user's namespace but the tools (see
 * code/tools_shim.py) and replaces those of an earlier run. A new string.
 */
char *gw_toolset_python_setup(const gw_toolset_t *set, const gw_config_t *config);

/**
 * Whether an input_request's `prompt` carries tool calls: 0 if not marked; 1 if it is, with the
 * batch's `calls` array in `*calls` (a new reference) or NULL when the JSON after the mark is not
 * `{"calls": [...]}`.
 */
int gw_tool_batch_parse(const char *prompt, json_t **calls);

#endif
