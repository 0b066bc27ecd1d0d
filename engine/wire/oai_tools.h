/* oai_tools: OpenAI tool calling on the wire, for every chat template.
 *
 * The tools, an assistant message's tool_calls and role "tool" results go
 * to the chat template as its structured roles (template.h: "tools",
 * "tool_calls", "tool" with JSON content), which renders them in the
 * family's native format (Llama 3.1-3.3, Mistral v3 tekken) or else in the
 * generic format of docs/SERVING.md, the one Qwen2.5/Qwen3 (Hermes) are
 * trained on: the tools in <tools></tools> in the system message, calls as
 * <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>, results as a
 * user turn of <tool_response> blocks.
 * The reply is parsed back: <tool_call> blocks, or a bare JSON call
 * ({"name", "arguments" | "parameters"}, as Llama 3.1 answers, an optional
 * <|python_tag|> first), or an array of them; only names of the request's
 * tools count. With tool_choice "required" or a named function the call is
 * decoded under a grammar (engine_request.json_schema) built here from the
 * tools' parameters, so it always parses and validates.
 *
 * No sockets: parse helpers for oai_request and builders for the server. */
#ifndef TERN_OAI_TOOLS_H
#define TERN_OAI_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cJSON;

enum oai_tool_choice {
    OAI_TOOLS_NONE,      /* no tools, or tool_choice "none": plain text */
    OAI_TOOLS_AUTO,      /* the model decides; the reply is parsed */
    OAI_TOOLS_REQUIRED,  /* one call, decoded under the grammar of all tools */
    OAI_TOOLS_NAMED      /* one call of the named tool, under its grammar */
};

#define OAI_MAX_TOOLS 128

/* The request's tools as the server needs them after parsing (owned). */
struct oai_tools {
    enum oai_tool_choice choice;
    bool parallel;               /* parallel_tool_calls (default true) */
    int32_t n;
    char **names;                /* [n] */
    char *named;                 /* OAI_TOOLS_NAMED: the function's name */
};
void oai_tools_free(struct oai_tools *t);
/* A deep copy (NULL on out-of-memory). */
struct oai_tools *oai_tools_dup(const struct oai_tools *t);

/* Validates the "tools" array (each {"type":"function","function":{name,
 * description?, parameters?, strict?}}; names [A-Za-z0-9_-]{1,64}, unique;
 * parameters a schema the grammar enforces) and tool_choice /
 * parallel_tool_calls of root. Fills out (zeroed first) and *system, the
 * tools array as compact JSON for the template's "tools" message (NULL
 * when the tools are not offered: none given, or tool_choice "none"), and
 * *schema, the malloc'd JSON Schema of a forced call (NULL unless
 * required/named). Returns 0, or -1 with msg and param (the field). */
int oai_tools_parse(const struct cJSON *root, struct oai_tools *out, char **system,
                    char **schema, char *msg, size_t msglen, char *param, size_t paramlen);

/* An assistant message's tool_calls checked: an array, each with
 * function.name and function.arguments (a JSON string or object), id a
 * string if given. Returns 0, or -1 with msg. */
int oai_tools_check_calls(const struct cJSON *tool_calls, char *msg, size_t msglen);

/* Parses a reply: the calls it makes as an OpenAI "tool_calls" array (each
 * {id: id_prefix + index, type: "function", function: {name, arguments: JSON
 * text}}), or NULL when it makes none; *content gets the text outside the
 * calls (malloc'd, NULL when only whitespace). With parallel false only the
 * first call is kept. */
struct cJSON *oai_tools_parse_reply(const struct oai_tools *t, const char *text,
                                    const char *id_prefix, char **content);

/* Rewrites a built response (oai_response_build) for calls: message.content
 * = content (null when NULL), message.tool_calls = calls (taken),
 * finish_reason "tool_calls". Returns a malloc'd JSON text, NULL on error. */
char *oai_tools_response(const char *response_json, const char *content, struct cJSON *calls);
/* Rewrites a built chunk (oai_chunk_build) so its delta carries calls
 * (taken, each given its "index") and no content; finish_reason stays. */
char *oai_tools_chunk(const char *chunk_json, struct cJSON *calls);

/* A forced call (required / named) as it is decoded: the grammar writes
 * {"name": "..", "arguments": {..}} in that order, so its name is known
 * once its string closes and its arguments can stream as they arrive.
 * From text[0..len): *name gets the name (malloc'd) once complete, else
 * NULL; [*args_from, *args_to) the arguments' bytes so far (0, 0 before
 * they begin); *args_done whether their value has ended. */
void oai_tools_forced_progress(const char *text, size_t len, char **name, size_t *args_from,
                               size_t *args_to, bool *args_done);

/* While streaming in auto mode: true when the text so far (left-trimmed)
 * could still begin a call, so it is held back until decided. */
bool oai_tools_maybe_call(const char *text, size_t len);

/* An auto reply's calls as far as they have come, so they can stream as
 * they are written: <tool_call>{"name": .., "arguments": ..}</tool_call>
 * blocks one after the other (Hermes, Qwen), or one bare {"name", "arguments"}
 * object (after <|python_tag|> in Llama 3.1's form). */
struct oai_call_progress {
    char *name;             /* complete and among the request's tools (malloc'd) */
    size_t args_from, args_to; /* the arguments' bytes so far */
    bool done;              /* the arguments' value has ended */
    size_t end;             /* after the call (its closing tag) when closed, else 0 */
};
/* From text[0..len): fills out[0..n) for the calls begun (at most max; one
 * unless t->parallel) and returns n. A name not among the tools, or keys in
 * another order, begin no call: the text is then read back at the end
 * (oai_tools_parse_reply). Free the names with oai_tools_progress_free. */
int oai_tools_stream_progress(const struct oai_tools *t, const char *text, size_t len,
                              struct oai_call_progress *out, int max);
void oai_tools_progress_free(struct oai_call_progress *p, int n);
/* As oai_tools_chunk, the calls' indexes counted from first. */
char *oai_tools_chunk_from(const char *chunk_json, struct cJSON *calls, int first);

#endif
