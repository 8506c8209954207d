/*
 * MCP revision 2026-07-28 at /mcp, beside the session revisions: no session and no initialize; every request
 * carries its version and capabilities in `_meta` and mirrors them in headers (checked: mcp/revision.h); state
 * lives in contexts the caller names in run_code's and bash's `context` argument, each created on first use with
 * its own kernels (as a session has), ended when idle (--mcp-context-idle-ms) or, beyond --mcp-max-named-contexts,
 * when it is the least recently used idle one and a new name needs its place.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/http.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"

/* The context of run_code and bash calls that name none. */
#define DEFAULT_CONTEXT "default"
/* How long a client may keep tools/list and server/discover (the binary's tools do not change while it runs). */
#define LIST_TTL_MS 300000

static const char context_description[] =
    "The named context to run in: calls naming the same context share its kernels (one per language) and its bash shell, "
    "so state persists between them; a new name starts fresh ones. 1 to 64 of A-Z a-z 0-9 . _ -; \"" DEFAULT_CONTEXT
    "\" when absent.";

/* ---- named contexts ------------------------------------------------------------------------------- */

/* Ends `named`; `evicted`: its kernels are killed, as an evicted session's (the new context's start now). */
static void named_end(gw_mcp_session_t *named, int evicted)
{
    gw_mcp_session_release(named, evicted);
    h2o_linklist_unlink(&named->link);
    --named->mcp->nnamed;
    free(named);
}

/*
 * The named context `name`, made the most recently used. When there is none: NULL with `why` "" unless `create`, else a new
 * one (evicting the least recently used idle one at the bound), or NULL with `why` when every one is busy or kgate is
 * stopping.
 */
static gw_mcp_session_t *named_get(gw_mcp_t *mcp, const char *name, int create, char *why, size_t size)
{
    const gw_config_t *config = mcp->host->config;
    gw_mcp_session_t *named;
    h2o_linklist_t *node;

    for (node = mcp->named.next; node != &mcp->named; node = node->next) {
        named = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        if (strcmp(named->name, name) == 0) {
            h2o_linklist_unlink(&named->link);
            h2o_linklist_insert(&mcp->named, &named->link);
            named->last_activity_mono_ms = gw_now_ms();
            return named;
        }
    }
    why[0] = '\0';
    if (!create)
        return NULL;
    if (mcp->host->shutting_down) {
        snprintf(why, size, "kgate is shutting down");
        return NULL;
    }
    /* least recently used first: the first idle one makes room */
    for (node = mcp->named.next; mcp->nnamed >= config->mcp_max_named_contexts && node != &mcp->named;) {
        named = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        node = node->next;
        if (h2o_linklist_is_empty(&named->calls))
            named_end(named, 1);
    }
    if (mcp->nnamed >= config->mcp_max_named_contexts) {
        snprintf(why, size,
                 "cannot create the context \"%s\": %zu named contexts exist and all are running calls, the maximum "
                 "(--mcp-max-named-contexts); use one of them, or retry when a call ends",
                 name, mcp->nnamed);
        return NULL;
    }
    named = wire_malloc(sizeof(*named));
    memset(named, 0, sizeof(*named));
    snprintf(named->name, sizeof(named->name), "%s", name);
    snprintf(named->version, sizeof(named->version), "%s", GW_MCP_VERSION_STATELESS);
    named->mcp = mcp;
    named->last_activity_mono_ms = gw_now_ms();
    named->contexts = json_object();
    h2o_linklist_init_anchor(&named->calls);
    h2o_linklist_insert(&mcp->named, &named->link);
    ++mcp->nnamed;
    return named;
}

void gw_mcp_named_tick(gw_mcp_t *mcp)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = mcp->named.next; node != &mcp->named; node = next) {
        gw_mcp_session_t *named = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        next = node->next;
        /* a call in flight is activity, however long its run takes */
        if (!h2o_linklist_is_empty(&named->calls))
            named->last_activity_mono_ms = now;
        else if (now - named->last_activity_mono_ms >= (int64_t)mcp->host->config->mcp_context_idle_ms)
            named_end(named, 0);
    }
}

void gw_mcp_named_shutdown(gw_mcp_t *mcp)
{
    while (!h2o_linklist_is_empty(&mcp->named))
        named_end(H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, mcp->named.next), 0);
}

/* ---- answers -------------------------------------------------------------------------------------- */

static json_t *discover_result(void)
{
    return json_pack("{s:[s,s,s], s:{s:{s:b}}, s:s, s:i, s:s}", "supportedVersions", GW_MCP_VERSION_STATELESS,
                     GW_MCP_VERSION_LATEST, GW_MCP_VERSION_PREVIOUS, "capabilities", "tools", "listChanged", 0, "instructions",
                     "kgate runs code in persistent Jupyter kernels. run_code and bash take a `context` name: calls naming "
                     "the same context share its kernels (one per language) and its bash shell, so state persists between "
                     "them; an unused context ends after a while.",
                     "ttlMs", LIST_TTL_MS, "cacheScope", "public");
}

/* Does `tool` run in a named context (its `context` argument)? */
static int takes_context(gw_mcp_tool_t tool)
{
    return tool == GW_MCP_TOOL_RUN_CODE || tool == GW_MCP_TOOL_BASH || tool == GW_MCP_TOOL_INTERRUPT ||
           tool == GW_MCP_TOOL_RESTART || tool == GW_MCP_TOOL_LIST_CONTEXTS;
}

/*
 * A session revision's tool description for this one: what it says of "this (MCP) session" holds of the named context.
 * A new string.
 */
static json_t *reworded(const char *text)
{
    static const char *const pairs[][2] = {{"this MCP session's", "the named context's"},
                                           {"of this MCP session", "of the named context"},
                                           {"this session's", "the named context's"}};
    size_t len = strlen(text), cap = len * 2 + 1, at = 0;
    char *out = wire_malloc(cap);
    json_t *ret;

    /* each replacement is at most twice its pattern's length: the buffer always holds the result */
    while (*text != '\0') {
        size_t i;
        for (i = 0; i != sizeof(pairs) / sizeof(pairs[0]); ++i) {
            size_t plen = strlen(pairs[i][0]);
            if (strncmp(text, pairs[i][0], plen) == 0) {
                memcpy(out + at, pairs[i][1], strlen(pairs[i][1]));
                at += strlen(pairs[i][1]);
                text += plen;
                break;
            }
        }
        if (i == sizeof(pairs) / sizeof(pairs[0]))
            out[at++] = *text++;
    }
    out[at] = '\0';
    ret = json_string(out);
    free(out);
    return ret;
}

/* tools/list of this revision: the session revisions' tools, those of a context with their `context` argument. */
static json_t *tools_result(unsigned max_timeout_ms)
{
    json_t *result = gw_mcp_tools_list(max_timeout_ms), *tool;
    size_t i;

    json_array_foreach(json_object_get(result, "tools"), i, tool)
    {
        json_t *props = json_object_get(json_object_get(tool, "inputSchema"), "properties");
        if (!takes_context(gw_mcp_tool_find(json_string_value(json_object_get(tool, "name")))) || !json_is_object(props))
            continue;
        json_object_set_new(props, "context",
                            json_pack("{s:s, s:i, s:i, s:s, s:s, s:s}", "type", "string", "minLength", 1, "maxLength",
                                      GW_MCP_CONTEXT_NAME_MAX, "pattern", "^[A-Za-z0-9._-]+$", "default", DEFAULT_CONTEXT,
                                      "description", context_description));
        json_object_set_new(tool, "description", reworded(json_string_value(json_object_get(tool, "description"))));
    }
    json_object_set_new(result, "ttlMs", json_integer(LIST_TTL_MS));
    json_object_set_new(result, "cacheScope", json_string("public"));
    return result;
}

static void tools_call(gw_mcp_t *mcp, h2o_req_t *req, gw_mcp_message_t *msg, unsigned answer)
{
    json_t *params = msg->params, *args = json_object_get(params, "arguments"), *name, *copy, *rest;
    gw_mcp_tool_t tool = gw_mcp_tool_find(json_string_value(json_object_get(params, "name")));
    gw_mcp_session_t *named = NULL, passing = {.mcp = mcp};
    char why[512];

    /* the tools of no context (the editor, list_languages, unknown names), and those that only look at a context that
     * does not exist, need only the door: an empty holder for the call */
    h2o_linklist_init_anchor(&passing.calls);
    passing.contexts = json_object();
    if (takes_context(tool)) {
        name = json_is_object(args) ? json_object_get(args, "context") : NULL;
        if (name != NULL && !json_is_null(name) &&
            (!json_is_string(name) || !gw_mcp_context_name_valid(json_string_value(name), json_string_length(name)))) {
            snprintf(why, sizeof(why), "context must be a name of 1 to %d characters among A-Z a-z 0-9 . _ - (\"%s\" when absent)",
                     GW_MCP_CONTEXT_NAME_MAX, DEFAULT_CONTEXT);
            gw_mcp_respond(req, answer, gw_mcp_result(msg->id, gw_mcp_text_result(why, strlen(why), 1)));
            goto Exit;
        }
        /* run_code and bash start a context; interrupt, restart and list_contexts of an unknown one find no kernel */
        named = named_get(mcp, json_is_string(name) ? json_string_value(name) : DEFAULT_CONTEXT,
                          tool == GW_MCP_TOOL_RUN_CODE || tool == GW_MCP_TOOL_BASH, why, sizeof(why));
        if (named == NULL && why[0] != '\0') {
            gw_mcp_respond(req, answer, gw_mcp_result(msg->id, gw_mcp_text_result(why, strlen(why), 1)));
            goto Exit;
        }
    }
    /* the tool's own checks see its arguments without `context`, as in the session revisions */
    copy = json_copy(params);
    if (json_is_object(args)) {
        rest = json_copy(args);
        json_object_del(rest, "context");
        json_object_set_new(copy, "arguments", rest);
    }
    gw_mcp_tools_call(named != NULL ? named : &passing, req, msg->id, copy, answer);
    json_decref(copy);
Exit:
    json_decref(passing.contexts);
}

/* ---- requests ------------------------------------------------------------------------------------- */

static const char *header(h2o_req_t *req, const char *name, size_t name_len, size_t *len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, name_len, -1);

    if (i == -1)
        return NULL;
    *len = req->headers.entries[i].value.len;
    return req->headers.entries[i].value.base;
}

static void headers_of(h2o_req_t *req, gw_mcp_headers_t *h)
{
    memset(h, 0, sizeof(*h));
    h->version = header(req, H2O_STRLIT("mcp-protocol-version"), &h->version_len);
    h->method = header(req, H2O_STRLIT("mcp-method"), &h->method_len);
    h->name = header(req, H2O_STRLIT("mcp-name"), &h->name_len);
}

int gw_mcp_stateless_claims(h2o_req_t *req, const gw_mcp_message_t *msg)
{
    gw_mcp_headers_t h;

    headers_of(req, &h);
    return gw_mcp_is_stateless(&h, msg);
}

void gw_mcp_stateless_post(gw_mcp_t *mcp, h2o_req_t *req, gw_mcp_message_t *msg, unsigned accepts)
{
    unsigned answer = accepts | GW_MCP_ANSWER_STATELESS;
    gw_mcp_headers_t h;
    json_t *error;
    char text[256];
    int status;

    switch (msg->kind) {
    case GW_MCP_NOTIFICATION:
        /* the revision defines none over HTTP (closing a response cancels it): accepted, nothing to do */
        gw_send_empty_status(req, 202);
        return;
    case GW_MCP_RESPONSE:
        gw_mcp_send(req, 400,
                    gw_mcp_error(msg->id, GW_MCP_INVALID_REQUEST,
                                 "revision " GW_MCP_VERSION_STATELESS " clients send no responses (kgate sends no requests)"));
        return;
    case GW_MCP_REQUEST:
        break;
    }
    headers_of(req, &h);
    if ((error = gw_mcp_stateless_check(&h, msg, &status)) != NULL) {
        gw_mcp_send(req, status, error);
        return;
    }
    if (strcmp(msg->method, "server/discover") == 0) {
        gw_mcp_respond(req, answer, gw_mcp_result(msg->id, discover_result()));
    } else if (strcmp(msg->method, "tools/list") == 0) {
        gw_mcp_respond(req, answer, gw_mcp_result(msg->id, tools_result(mcp->host->config->max_timeout_ms)));
    } else if (strcmp(msg->method, "tools/call") == 0) {
        if (!json_is_string(json_object_get(msg->params, "name"))) {
            gw_mcp_respond(req, answer, gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS, "tools/call takes params {name, arguments}"));
            return;
        }
        tools_call(mcp, req, msg, answer);
    } else {
        /* the revision answers a method it does not serve with 404 (ping and logging/setLevel are gone from it) */
        snprintf(text, sizeof(text), "Method not found: %.100s", msg->method);
        gw_mcp_send(req, 404, gw_mcp_error(msg->id, GW_MCP_METHOD_NOT_FOUND, text));
    }
}
