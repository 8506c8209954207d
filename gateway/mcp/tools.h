/* mcp/tools.h: the MCP tools kgate offers (docs/API.md 5.3): their descriptions, JSON Schemas and argument checks (pure). */
#ifndef GW_MCP_TOOLS_H
#define GW_MCP_TOOLS_H

#include <stddef.h>
#include <jansson.h>

typedef enum {
    GW_MCP_TOOL_UNKNOWN = -1,
    GW_MCP_TOOL_RUN_CODE,
    GW_MCP_TOOL_BASH,
    GW_MCP_TOOL_EDITOR,
    GW_MCP_TOOL_LIST_LANGUAGES,
    GW_MCP_TOOL_INTERRUPT,
    GW_MCP_TOOL_RESTART,
    GW_MCP_TOOL_LIST_CONTEXTS
} gw_mcp_tool_t;

/** The tool named `name`, or GW_MCP_TOOL_UNKNOWN. */
gw_mcp_tool_t gw_mcp_tool_find(const char *name);

/**
 * The result of tools/list: `{"tools": [{name, title, description, inputSchema, outputSchema?}, ...]}`, the descriptions
 * naming the server's cap on timeout_ms (`max_timeout_ms`). A new object.
 */
json_t *gw_mcp_tools_list(unsigned max_timeout_ms);

/** A run_code or bash call's checked arguments (strings borrowed from the arguments object). */
typedef struct st_gw_mcp_run_args_t {
    const char *code;          /* run_code's code, bash's command; NULL for a bash restart alone */
    const char *language;      /* run_code: "python" unless given */
    unsigned timeout_ms;       /* 0: the server's default; at most the cap */
    unsigned asked_timeout_ms; /* the timeout_ms asked for when it was over the cap (and capped); else 0 */
    int restart;               /* bash: restart the session's shell first */
} gw_mcp_run_args_t;

/**
 * Checks run_code's arguments (`args` may be NULL: absent): `code` a non-empty string without NUL,
 * `language` a non-empty string, `timeout_ms` a positive integer; one over `max_timeout_ms` is capped to it (and
 * recorded in asked_timeout_ms: the result says so) rather than refused, as a model asking for a long run wants one as
 * long as the server allows. Returns 0, or -1 with the reason in `why` (for an isError result the model can act on).
 */
int gw_mcp_run_code_args(json_t *args, unsigned max_timeout_ms, gw_mcp_run_args_t *out, char *why, size_t size);
/**
 * Checks bash's arguments: `command` a string without NUL (required and non-empty unless `restart`
 * is true), `restart` a boolean, `timeout_ms` as for run_code. Returns 0, or -1 with `why`.
 */
int gw_mcp_bash_args(json_t *args, unsigned max_timeout_ms, gw_mcp_run_args_t *out, char *why, size_t size);
/**
 * Checks the editor's arguments as far as their shape goes: `command` one of view, create,
 * str_replace, insert, undo_edit and `path` a string (the rest is the editor's: files/editor_tool.h).
 * Returns 0, or -1 with `why`.
 */
int gw_mcp_editor_args(json_t *args, char *why, size_t size);
/**
 * Checks the arguments of interrupt and restart (`args` may be NULL): `language` absent (then "python") or a non-empty
 * string without NUL, stored in `*language` (borrowed). Returns 0, or -1 with `why`.
 */
int gw_mcp_language_args(json_t *args, const char **language, char *why, size_t size);

#endif
