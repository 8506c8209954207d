/* The MCP tools: names, descriptions, JSON Schemas (draft 2020-12, MCP's default) and argument checks. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "mcp/tools.h"

static const char *const tool_names[] = {"run_code", "bash",         "str_replace_based_edit_tool", "list_languages", "interrupt",
                                         "restart",  "list_contexts"};

gw_mcp_tool_t gw_mcp_tool_find(const char *name)
{
    for (size_t i = 0; i != sizeof(tool_names) / sizeof(tool_names[0]); ++i)
        if (strcmp(name, tool_names[i]) == 0)
            return (gw_mcp_tool_t)i;
    return GW_MCP_TOOL_UNKNOWN;
}

/* The schemas are JSON text: one place to read them, parsed once per tools/list (rare: clients cache it). */
static const char run_code_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"code\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The code to run, a cell of the language's kernel: state "
    "(variables, imports, functions) persists between calls of this MCP session.\"},"
    "\"language\":{\"type\":\"string\",\"default\":\"python\",\"description\":\"A language or kernelspec name "
    "(list_languages).\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Interrupt the run after this many milliseconds "
    "(the kernel and its state are kept when it stops). Default: the server's; a value over the server's cap is capped "
    "to it, and the result says so.\"}},"
    "\"required\":[\"code\"]}";

static const char run_code_output[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\"},"
    "\"execution_count\":{\"type\":[\"integer\",\"null\"]},"
    "\"stdout\":{\"type\":\"string\"},"
    "\"stderr\":{\"type\":\"string\"},"
    "\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\"},\"description\":\"MIME bundles of execute_result and "
    "display_data, in order\"},"
    "\"error\":{\"type\":\"object\",\"properties\":{\"ename\":{\"type\":\"string\"},\"evalue\":{\"type\":\"string\"},"
    "\"traceback\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}}},"
    "\"truncated\":{\"type\":\"object\",\"description\":\"present when output was dropped: the per-call limit and what it "
    "dropped\"},"
    "\"timeout_capped\":{\"type\":\"object\",\"properties\":{\"asked_ms\":{\"type\":\"integer\"},\"applied_ms\":{"
    "\"type\":\"integer\"}},\"description\":\"present when timeout_ms was over the server's cap: what was asked and what the "
    "run had\"}},"
    "\"required\":[\"language\",\"stdout\",\"stderr\",\"results\"]}";

static const char bash_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"description\":\"Bash commands to run in this MCP session's shell: the working "
    "directory, variables and functions persist between calls.\"},"
    "\"restart\":{\"type\":\"boolean\",\"default\":false,\"description\":\"Restart the shell first (a fresh one in the "
    "workspace root).\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"Interrupt the command after this many "
    "milliseconds (the shell is kept). A value over the server's cap is capped to it, and the result says so.\"}}}";

static const char editor_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"command\":{\"type\":\"string\",\"enum\":[\"view\",\"create\",\"str_replace\",\"insert\",\"undo_edit\"]},"
    "\"path\":{\"type\":\"string\",\"description\":\"A file or directory; relative paths resolve against the workspace "
    "root.\"},"
    "\"view_range\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":2,"
    "\"description\":\"view: [start, end] lines, 1-based; end -1 reads to the end.\"},"
    "\"max_characters\":{\"type\":\"integer\",\"minimum\":1},"
    "\"file_text\":{\"type\":\"string\",\"description\":\"create: the file's contents.\"},"
    "\"old_str\":{\"type\":\"string\",\"description\":\"str_replace: text occurring exactly once.\"},"
    "\"new_str\":{\"type\":\"string\",\"description\":\"str_replace: its replacement; insert: the text to insert.\"},"
    "\"insert_line\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"insert: after this line (0: at the top).\"}},"
    "\"required\":[\"command\",\"path\"]}";

static const char empty_input[] = "{\"type\":\"object\",\"properties\":{}}";

static const char language_input[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\",\"default\":\"python\",\"description\":\"Which of this session's kernels: a "
    "language or kernelspec name as run_code takes it; \\\"bash\\\" is the bash tool's shell.\"}}}";

static const char list_contexts_output[] =
    "{\"type\":\"object\",\"properties\":{\"contexts\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"language\":{\"type\":\"string\"},"
    "\"kernel\":{\"type\":\"string\",\"description\":\"the kernelspec\"},"
    "\"state\":{\"type\":\"string\",\"enum\":[\"starting\",\"idle\",\"busy\",\"restarting\",\"dead\"]},"
    "\"execution_count\":{\"type\":\"integer\",\"description\":\"cells run since the kernel (re)started\"},"
    "\"idle_ms\":{\"type\":\"integer\",\"description\":\"milliseconds since its last activity; 0 while a cell runs\"},"
    "\"context_id\":{\"type\":\"string\",\"description\":\"its id in kgate's /code/contexts\"}},"
    "\"required\":[\"language\",\"kernel\",\"state\",\"execution_count\",\"idle_ms\",\"context_id\"]}}},"
    "\"required\":[\"contexts\"]}";

static json_t *schema(const char *text)
{
    return json_loads(text, 0, NULL);
}

/* A schema with a timeout_ms whose description names the server's cap: a model then asks for no more than it gets. */
static json_t *schema_capped(const char *text, unsigned max_timeout_ms)
{
    json_t *s = schema(text), *timeout = json_object_get(json_object_get(s, "properties"), "timeout_ms");
    char description[512];

    snprintf(description, sizeof(description), "%s The cap is %u ms.", json_string_value(json_object_get(timeout, "description")),
             max_timeout_ms);
    json_object_set_new(timeout, "description", json_string(description));
    return s;
}

json_t *gw_mcp_tools_list(unsigned max_timeout_ms)
{
    json_t *tools = json_array();

    json_array_append_new(
        tools, json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", "run_code", "title", "Run code", "description",
                         "Runs code in a persistent Jupyter kernel of this MCP session (one per language, created on first "
                         "use; Python by default). Returns stdout, stderr, results (images as image content) and errors with "
                         "their traceback.",
                         "inputSchema", schema_capped(run_code_input, max_timeout_ms), "outputSchema", schema(run_code_output)));
    json_array_append_new(tools, json_pack("{s:s, s:s, s:s, s:o}", "name", "bash", "title", "Bash", "description",
                                           "Runs commands in this MCP session's persistent bash shell (cwd and environment "
                                           "are kept between calls; it starts in the workspace root).",
                                           "inputSchema", schema_capped(bash_input, max_timeout_ms)));
    json_array_append_new(tools, json_pack("{s:s, s:s, s:s, s:o}", "name", "str_replace_based_edit_tool", "title", "Text editor",
                                           "description",
                                           "Views, creates and edits files beneath the workspace root: view (a file with line "
                                           "numbers, or a directory two levels deep), create, str_replace (old_str must occur "
                                           "exactly once), insert (after insert_line), undo_edit (the last edit of the file).",
                                           "inputSchema", schema(editor_input)));
    json_array_append_new(tools, json_pack("{s:s, s:s, s:s, s:o}", "name", "list_languages", "title", "List languages",
                                           "description", "Lists the languages run_code accepts (the installed kernels).",
                                           "inputSchema", schema(empty_input)));
    json_array_append_new(tools, json_pack("{s:s, s:s, s:s, s:o}", "name", "interrupt", "title", "Interrupt", "description",
                                           "Interrupts the cell running in one of this session's kernels (KeyboardInterrupt in "
                                           "Python, SIGINT in bash): its run_code or bash call ends with the interruption, and "
                                           "the kernel's state (variables, imports, cwd) is kept. Calls waiting behind it still "
                                           "run. Says so when nothing was running.",
                                           "inputSchema", schema(language_input)));
    json_array_append_new(tools, json_pack("{s:s, s:s, s:s, s:o}", "name", "restart", "title", "Restart kernel", "description",
                                           "Restarts one of this session's kernels: ALL its state (variables, imports, "
                                           "definitions, the shell's cwd and variables) is lost, execution_count starts again, "
                                           "and calls running or waiting in it end. Use it when the kernel is stuck, or to start "
                                           "clean. Answers once the new kernel is ready.",
                                           "inputSchema", schema(language_input)));
    json_array_append_new(tools,
                          json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", "list_contexts", "title", "List kernels", "description",
                                    "Lists this session's kernels (run_code's, one per language, and the bash tool's shell): "
                                    "language, state (starting, idle, busy, restarting, dead), execution_count and how long "
                                    "each has been idle.",
                                    "inputSchema", schema(empty_input), "outputSchema", schema(list_contexts_output)));
    return json_pack("{s:o}", "tools", tools);
}

static int failf(char *why, size_t size, const char *msg)
{
    snprintf(why, size, "%s", msg);
    return -1;
}

static int is_clean_string(json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

static int timeout_arg(json_t *args, unsigned max_timeout_ms, unsigned *out, unsigned *asked, char *why, size_t size)
{
    json_t *v = json_object_get(args, "timeout_ms");

    *out = *asked = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        snprintf(why, size, "timeout_ms must be a positive integer (milliseconds)");
        return -1;
    }
    if (json_integer_value(v) > (json_int_t)max_timeout_ms) {
        *asked = json_integer_value(v) > (json_int_t)UINT_MAX ? UINT_MAX : (unsigned)json_integer_value(v);
        *out = max_timeout_ms;
        return 0;
    }
    *out = (unsigned)json_integer_value(v);
    return 0;
}

int gw_mcp_run_code_args(json_t *args, unsigned max_timeout_ms, gw_mcp_run_args_t *out, char *why, size_t size)
{
    json_t *code = json_object_get(args, "code"), *language = json_object_get(args, "language");

    memset(out, 0, sizeof(*out));
    if (args != NULL && !json_is_object(args))
        return failf(why, size, "arguments must be an object");
    if (!is_clean_string(code) || json_string_length(code) == 0)
        return failf(why, size, "code must be a non-empty string without NUL characters");
    if (language != NULL && !json_is_null(language) && (!is_clean_string(language) || json_string_length(language) == 0))
        return failf(why, size, "language must be a non-empty string, such as \"python\" (see list_languages)");
    out->code = json_string_value(code);
    out->language = json_is_string(language) ? json_string_value(language) : "python";
    return timeout_arg(args, max_timeout_ms, &out->timeout_ms, &out->asked_timeout_ms, why, size);
}

int gw_mcp_bash_args(json_t *args, unsigned max_timeout_ms, gw_mcp_run_args_t *out, char *why, size_t size)
{
    json_t *command = json_object_get(args, "command"), *restart = json_object_get(args, "restart");

    memset(out, 0, sizeof(*out));
    if (args != NULL && !json_is_object(args))
        return failf(why, size, "arguments must be an object");
    if (restart != NULL && !json_is_null(restart) && !json_is_boolean(restart))
        return failf(why, size, "restart must be true or false");
    out->restart = json_is_true(restart);
    if (command != NULL && !json_is_null(command) && !is_clean_string(command))
        return failf(why, size, "command must be a string without NUL characters");
    if (json_is_string(command) && json_string_length(command) != 0)
        out->code = json_string_value(command);
    if (out->code == NULL && !out->restart)
        return failf(why, size, "command must be a non-empty string (or restart: true)");
    out->language = "bash";
    return timeout_arg(args, max_timeout_ms, &out->timeout_ms, &out->asked_timeout_ms, why, size);
}

int gw_mcp_editor_args(json_t *args, char *why, size_t size)
{
    static const char *const commands[] = {"view", "create", "str_replace", "insert", "undo_edit"};
    const char *command = json_string_value(json_object_get(args, "command"));

    if (!json_is_object(args))
        return failf(why, size, "arguments must be an object with command and path");
    if (!json_is_string(json_object_get(args, "path")))
        return failf(why, size, "Error: Parameter `path` (a string) is required.");
    if (command != NULL)
        for (size_t i = 0; i != sizeof(commands) / sizeof(commands[0]); ++i)
            if (strcmp(command, commands[i]) == 0)
                return 0;
    return failf(why, size, "Error: `command` must be one of view, create, str_replace, insert, undo_edit.");
}

int gw_mcp_language_args(json_t *args, const char **language, char *why, size_t size)
{
    json_t *v = json_object_get(args, "language");

    *language = "python";
    if (args != NULL && !json_is_object(args))
        return failf(why, size, "arguments must be an object");
    if (v == NULL || json_is_null(v))
        return 0;
    if (!is_clean_string(v) || json_string_length(v) == 0)
        return failf(why, size, "language must be a non-empty string, such as \"python\" or \"bash\" (see list_contexts)");
    *language = json_string_value(v);
    return 0;
}
