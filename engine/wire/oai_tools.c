/* oai_tools: tool calling as text and back (oai_tools.h). */
#include "oai_tools.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsg.h"

static int fail(char *msg, size_t msglen, char *param, size_t paramlen, const char *p,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    snprintf(param, paramlen, "%s", p);
    return -1;
}

void oai_tools_free(struct oai_tools *t)
{
    if (!t) return;
    for (int32_t i = 0; i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->named);
    memset(t, 0, sizeof *t);
}

struct oai_tools *oai_tools_dup(const struct oai_tools *t)
{
    struct oai_tools *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    *d = (struct oai_tools){.choice = t->choice, .parallel = t->parallel};
    d->names = calloc((size_t)(t->n ? t->n : 1), sizeof *d->names);
    bool ok = d->names != NULL;
    for (int32_t i = 0; ok && i < t->n; i++) ok = (d->names[d->n++] = strdup(t->names[i])) != NULL;
    if (ok && t->named) ok = (d->named = strdup(t->named)) != NULL;
    if (!ok) {
        oai_tools_free(d);
        free(d);
        return NULL;
    }
    return d;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') return false;
    return true;
}

static bool has_name(const struct oai_tools *t, const char *name)
{
    for (int32_t i = 0; i < t->n; i++)
        if (strcmp(t->names[i], name) == 0) return true;
    return false;
}

/* The parameters schema of one tool (a fresh tree): as given, or "no
 * arguments" ({} only) when absent. */
static cJSON *params_of(const cJSON *fn)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (p) return cJSON_Duplicate(p, true);
    return cJSON_Parse("{\"type\":\"object\",\"additionalProperties\":false}");
}

/* One tool entry: checked, its name kept. */
static int parse_tool(const cJSON *tool, int i, struct oai_tools *out, char *msg, size_t ml,
                      char *param, size_t pl)
{
    char p[64];
    snprintf(p, sizeof p, "tools[%d]", i);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tool, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
    if (!cJSON_IsObject(tool) || !cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return fail(msg, ml, param, pl, p, "'%s' must be {\"type\": \"function\", "
                    "\"function\": {...}}", p);
    if (!cJSON_IsObject(fn)) return fail(msg, ml, param, pl, p, "'%s.function' must be an object", p);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    if (!cJSON_IsString(name) || !name_ok(name->valuestring))
        return fail(msg, ml, param, pl, p, "'%s.function.name' must be 1-64 letters, digits, "
                    "'_' or '-'", p);
    if (has_name(out, name->valuestring))
        return fail(msg, ml, param, pl, p, "'%s': the function name '%s' is given twice", p,
                    name->valuestring);
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    if (desc && !cJSON_IsString(desc) && !cJSON_IsNull(desc))
        return fail(msg, ml, param, pl, p, "'%s.function.description' must be a string", p);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    if (params) {
        char pp[96], err[320];
        snprintf(pp, sizeof pp, "%s.function.parameters", p);
        if (!cJSON_IsObject(params)) return fail(msg, ml, param, pl, pp, "'%s' must be an object", pp);
        char *text = cJSON_PrintUnformatted(params);
        struct jsg *g = text ? jsg_compile(text, strlen(text), false, err, sizeof err) : NULL;
        free(text);
        if (!g) return fail(msg, ml, param, pl, pp, "'%s': %s", pp, err);
        jsg_free(g);
    }
    out->names[out->n] = strdup(name->valuestring);
    if (!out->names[out->n]) return fail(msg, ml, param, pl, p, "out of memory");
    out->n++;
    return 0;
}

static int parse_choice(const cJSON *root, struct oai_tools *out, char *msg, size_t ml,
                        char *param, size_t pl)
{
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    out->choice = out->n ? OAI_TOOLS_AUTO : OAI_TOOLS_NONE;
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (strcmp(s, "none") == 0) out->choice = OAI_TOOLS_NONE;
        else if (strcmp(s, "auto") == 0) out->choice = out->n ? OAI_TOOLS_AUTO : OAI_TOOLS_NONE;
        else if (strcmp(s, "required") == 0) out->choice = OAI_TOOLS_REQUIRED;
        else return fail(msg, ml, param, pl, "tool_choice", "'tool_choice' is '%.32s'; none, "
                         "auto, required or {\"type\": \"function\", ...} are accepted", s);
    } else {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsObject(tc) || !cJSON_IsString(name))
            return fail(msg, ml, param, pl, "tool_choice", "'tool_choice' must be a string or "
                        "{\"type\": \"function\", \"function\": {\"name\": ...}}");
        if (!has_name(out, name->valuestring))
            return fail(msg, ml, param, pl, "tool_choice", "'tool_choice' names '%.64s', which "
                        "is not among 'tools'", name->valuestring);
        out->choice = OAI_TOOLS_NAMED;
        out->named = strdup(name->valuestring);
        if (!out->named) return fail(msg, ml, param, pl, "tool_choice", "out of memory");
    }
    if (out->choice >= OAI_TOOLS_REQUIRED && out->n == 0)
        return fail(msg, ml, param, pl, "tool_choice", "'tool_choice' asks for a call but "
                    "'tools' is empty");
    return 0;
}

/* Moves each tool's $defs / definitions to the top of the call schema so
 * that its "#/$defs/.." references resolve there. */
static void hoist_defs(cJSON *params, cJSON *defs)
{
    static const char *const keys[] = {"$defs", "definitions"};
    for (int k = 0; k < 2; k++) {
        cJSON *d = cJSON_DetachItemFromObjectCaseSensitive(params, keys[k]);
        cJSON *e;
        cJSON_ArrayForEach(e, d)
            if (!cJSON_GetObjectItemCaseSensitive(defs, e->string))
                cJSON_AddItemToObject(defs, e->string, cJSON_Duplicate(e, true));
        cJSON_Delete(d);
    }
}

static void rewrite_refs(cJSON *j)
{
    /* "#/definitions/x" -> "#/$defs/x": both end up under $defs */
    if (cJSON_IsString(j) && j->string && strcmp(j->string, "$ref") == 0 &&
        strncmp(j->valuestring, "#/definitions/", 14) == 0) {
        char buf[512];
        snprintf(buf, sizeof buf, "#/$defs/%s", j->valuestring + 14);
        cJSON_SetValuestring(j, buf);
    }
    cJSON *c;
    cJSON_ArrayForEach(c, j) rewrite_refs(c);
}

/* {"name": const, "arguments": params} for one tool. */
static cJSON *call_schema(const char *name, cJSON *params)
{
    cJSON *o = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(o, "properties");
    cJSON *n = cJSON_AddObjectToObject(props, "name");
    cJSON_AddStringToObject(o, "type", "object");
    cJSON_AddStringToObject(n, "const", name);
    cJSON_AddItemToObject(props, "arguments", params);
    cJSON *req = cJSON_AddArrayToObject(o, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
    cJSON_AddFalseToObject(o, "additionalProperties");
    return o;
}

/* The grammar of a forced call: the named tool's, or anyOf all of them
 * (name and arguments tied while the matcher can follow every tool at once;
 * beyond JSG_ALTS tools, the name from an enum and the arguments from any
 * tool's parameters). */
static char *forced_schema(const cJSON *tools, const struct oai_tools *t)
{
    cJSON *defs = cJSON_CreateObject(), *alts = cJSON_CreateArray(), *argalts = cJSON_CreateArray();
    cJSON *names = cJSON_CreateArray();
    const cJSON *tool;
    cJSON_ArrayForEach(tool, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        const char *name = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (t->choice == OAI_TOOLS_NAMED && strcmp(name, t->named) != 0) continue;
        cJSON *p = params_of(fn);
        if (!p) continue;
        rewrite_refs(p);
        hoist_defs(p, defs);
        cJSON_AddItemToArray(argalts, cJSON_Duplicate(p, true));
        cJSON_AddItemToArray(names, cJSON_CreateString(name));
        cJSON_AddItemToArray(alts, call_schema(name, p));
    }
    cJSON *root;
    int n = cJSON_GetArraySize(alts);
    if (n == 1) {
        root = cJSON_DetachItemFromArray(alts, 0);
    } else if (n <= JSG_ALTS) {
        root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "anyOf", alts);
        alts = NULL;
    } else {
        cJSON *args = cJSON_CreateObject();
        cJSON_AddItemToObject(args, "anyOf", argalts);
        argalts = NULL;
        root = call_schema("", args);
        cJSON *props = cJSON_GetObjectItemCaseSensitive(root, "properties");
        cJSON *nm = cJSON_CreateObject();
        cJSON_AddItemToObject(nm, "enum", names);
        names = NULL;
        cJSON_ReplaceItemInObjectCaseSensitive(props, "name", nm);
    }
    if (cJSON_GetArraySize(defs) > 0) {
        cJSON_AddItemToObject(root, "$defs", defs);
        defs = NULL;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    cJSON_Delete(defs);
    cJSON_Delete(alts);
    cJSON_Delete(argalts);
    cJSON_Delete(names);
    return s;
}

int oai_tools_parse(const cJSON *root, struct oai_tools *out, char **system, char **schema,
                    char *msg, size_t ml, char *param, size_t pl)
{
    memset(out, 0, sizeof *out);
    out->parallel = true;
    *system = *schema = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (tools && cJSON_IsNull(tools)) tools = NULL;
    if (tools && !cJSON_IsArray(tools))
        return fail(msg, ml, param, pl, "tools", "'tools' must be an array");
    int n = tools ? cJSON_GetArraySize(tools) : 0;
    if (n > OAI_MAX_TOOLS)
        return fail(msg, ml, param, pl, "tools", "'tools' has %d entries; at most %d", n,
                    OAI_MAX_TOOLS);
    out->names = calloc((size_t)(n ? n : 1), sizeof *out->names);
    if (!out->names) return fail(msg, ml, param, pl, "tools", "out of memory");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
        if (parse_tool(t, i++, out, msg, ml, param, pl) != 0) return -1;
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (par && !cJSON_IsNull(par)) {
        if (!cJSON_IsBool(par))
            return fail(msg, ml, param, pl, "parallel_tool_calls",
                        "'parallel_tool_calls' must be a boolean");
        out->parallel = cJSON_IsTrue(par);
    }
    if (parse_choice(root, out, msg, ml, param, pl) != 0) return -1;
    if (out->choice == OAI_TOOLS_NONE) return 0;
    *system = cJSON_PrintUnformatted(tools);
    if (out->choice >= OAI_TOOLS_REQUIRED) {
        *schema = forced_schema(tools, out);
        char err[320];
        struct jsg *g = *schema ? jsg_compile(*schema, strlen(*schema), false, err, sizeof err)
                                : NULL;
        if (!g)
            return fail(msg, ml, param, pl, "tools", "the tools' call grammar: %s",
                        *schema ? err : "out of memory");
        jsg_free(g);
    }
    if (!*system) return fail(msg, ml, param, pl, "tools", "out of memory");
    return 0;
}

/* ---- history (the templates render it: template_tools.c) ------------------------ */

int oai_tools_check_calls(const cJSON *calls, char *msg, size_t ml)
{
    if (!cJSON_IsArray(calls)) {
        snprintf(msg, ml, "'tool_calls' must be an array");
        return -1;
    }
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (!cJSON_IsString(name) || (args && !cJSON_IsString(args) && !cJSON_IsObject(args))) {
            snprintf(msg, ml, "'tool_calls[%d]' must have function.name and function.arguments "
                     "(a JSON string)", i);
            return -1;
        }
        if (id && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
            snprintf(msg, ml, "'tool_calls[%d].id' must be a string", i);
            return -1;
        }
        i++;
    }
    return 0;
}

/* ---- the reply back ------------------------------------------------------------- */

static const char *skip_ws(const char *s)
{
    while (*s && isspace((unsigned char)*s)) s++;
    return s;
}

/* One call object -> an OpenAI tool_calls entry, or NULL. */
static cJSON *to_call(const struct oai_tools *t, const cJSON *o, const char *id_prefix, int index)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name) || !has_name(t, name->valuestring))
        return NULL;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args) args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    char *text = NULL;
    if (!args) text = strdup("{}");
    else if (cJSON_IsString(args)) {
        cJSON *chk = cJSON_Parse(args->valuestring);
        if (!chk) return NULL;
        cJSON_Delete(chk);
        text = strdup(args->valuestring);
    } else if (cJSON_IsObject(args)) text = cJSON_PrintUnformatted(args);
    if (!text) return NULL;
    char id[96];
    snprintf(id, sizeof id, "%s%d", id_prefix, index);
    cJSON *c = cJSON_CreateObject(), *fn = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(fn, "name", name->valuestring);
    cJSON_AddStringToObject(fn, "arguments", text);
    cJSON_AddItemToObject(c, "function", fn);
    free(text);
    return c;
}

static void add_calls(const struct oai_tools *t, const cJSON *j, const char *id_prefix,
                      cJSON *calls)
{
    if (cJSON_IsArray(j)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, j) add_calls(t, e, id_prefix, calls);
        return;
    }
    cJSON *c = to_call(t, j, id_prefix, cJSON_GetArraySize(calls));
    if (c) cJSON_AddItemToArray(calls, c);
}

static void text_add(char **buf, size_t *len, const char *s, size_t n)
{
    char *nb = realloc(*buf, *len + n + 1);
    if (!nb) return;
    memcpy(nb + *len, s, n);
    *len += n;
    nb[*len] = 0;
    *buf = nb;
}

/* Calls between open and close tags (<tool_call> for Hermes and Qwen,
 * <|tool_call|> for Phi-4): each block's JSON, one call or an array; the
 * text outside the blocks (and blocks that are not calls) goes to *rest. */
static void tagged_calls(const struct oai_tools *t, const char *text, const char *open,
                         const char *close, const char *id_prefix, cJSON *calls, char **rest,
                         size_t *rl)
{
    size_t ol = strlen(open), cl = strlen(close);
    const char *p = text;
    for (;;) {
        const char *a = strstr(p, open);
        if (!a) {
            text_add(rest, rl, p, strlen(p));
            break;
        }
        text_add(rest, rl, p, (size_t)(a - p));
        const char *body = a + ol, *b = strstr(body, close);
        size_t bl = b ? (size_t)(b - body) : strlen(body);
        cJSON *j = cJSON_ParseWithLength(body, bl);
        int before = cJSON_GetArraySize(calls);
        if (j) add_calls(t, j, id_prefix, calls);
        cJSON_Delete(j);
        if (cJSON_GetArraySize(calls) == before) text_add(rest, rl, a, (size_t)(body - a) + bl);
        p = b ? b + cl : body + bl;
    }
}

/* Mistral's [TOOL_CALLS]: a JSON array of calls (v3, tekken) or, in the
 * newer tokenizers, name[ARGS]{..} one after the other. Text before the
 * marker goes to *rest. */
static void mistral_calls(const struct oai_tools *t, const char *text, const char *id_prefix,
                          cJSON *calls, char **rest, size_t *rl)
{
    static const char mark[] = "[TOOL_CALLS]";
    const char *a = strstr(text, mark);
    if (!a) return;
    text_add(rest, rl, text, (size_t)(a - text));
    for (const char *s = skip_ws(a + sizeof mark - 1); *s;) {
        const char *end = NULL, *args = strstr(s, "[ARGS]");
        cJSON *j = NULL;
        if (*s == '[' || *s == '{') {
            j = cJSON_ParseWithOpts(s, &end, false);
        } else if (args && args > s) {
            cJSON *args_j = cJSON_ParseWithOpts(args + 6, &end, false);
            if (args_j) {
                j = cJSON_CreateObject();
                char *name = strndup(s, (size_t)(args - s));
                if (j && name) {
                    cJSON_AddStringToObject(j, "name", name);
                    cJSON_AddItemToObject(j, "arguments", args_j);
                    args_j = NULL;
                }
                free(name);
                cJSON_Delete(args_j);
            }
        }
        if (!j) break;
        add_calls(t, j, id_prefix, calls);
        cJSON_Delete(j);
        s = skip_ws(end);
        if (strncmp(s, mark, sizeof mark - 1) == 0) s = skip_ws(s + sizeof mark - 1);
    }
}

cJSON *oai_tools_parse_reply(const struct oai_tools *t, const char *text, const char *id_prefix,
                             char **content)
{
    static const char *const tags[][2] = {{"<tool_call>", "</tool_call>"},
                                          {"<|tool_call|>", "<|/tool_call|>"}};
    cJSON *calls = cJSON_CreateArray();
    char *rest = NULL;
    size_t rl = 0;
    *content = NULL;
    if (!calls) return NULL;
    for (size_t k = 0; k < 2 && cJSON_GetArraySize(calls) == 0; k++) {
        free(rest);
        rest = NULL;
        rl = 0;
        tagged_calls(t, text, tags[k][0], tags[k][1], id_prefix, calls, &rest, &rl);
    }
    if (cJSON_GetArraySize(calls) == 0) {
        free(rest);
        rest = NULL;
        rl = 0;
        mistral_calls(t, text, id_prefix, calls, &rest, &rl);
        if (cJSON_GetArraySize(calls) == 0) {
            free(rest);
            rest = NULL;
            rl = 0;
            text_add(&rest, &rl, text, strlen(text));
        }
    }
    if (cJSON_GetArraySize(calls) == 0) {
        /* a bare JSON call (Llama 3.1 style), or an array of them (Mistral
         * when its [TOOL_CALLS] token is not in the text) */
        const char *s = skip_ws(text);
        if (strncmp(s, "<|python_tag|>", 14) == 0) s = skip_ws(s + 14);
        const char *end = NULL;
        cJSON *j = (*s == '{' || *s == '[') ? cJSON_ParseWithOpts(s, &end, false) : NULL;
        if (j && !*skip_ws(end)) {
            add_calls(t, j, id_prefix, calls);
            if (cJSON_GetArraySize(calls) > 0) {
                free(rest);
                rest = NULL;
                rl = 0;
            }
        }
        cJSON_Delete(j);
    }
    if (cJSON_GetArraySize(calls) == 0) {
        cJSON_Delete(calls);
        free(rest);
        return NULL;
    }
    while (!t->parallel && cJSON_GetArraySize(calls) > 1) cJSON_DeleteItemFromArray(calls, 1);
    if (rest && *skip_ws(rest)) {
        /* trimmed: the text around the calls is mostly the newlines between them */
        const char *s = skip_ws(rest);
        size_t n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1])) n--;
        *content = strndup(s, n);
    }
    free(rest);
    return calls;
}

/* ---- responses ------------------------------------------------------------------ */

char *oai_tools_response(const char *json, const char *content, cJSON *calls)
{
    cJSON *r = cJSON_Parse(json);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "choices"), 0);
    cJSON *m = cJSON_GetObjectItemCaseSensitive(ch, "message");
    char *out = NULL;
    if (m) {
        cJSON_ReplaceItemInObjectCaseSensitive(m, "content", content ? cJSON_CreateString(content)
                                                                     : cJSON_CreateNull());
        cJSON_AddItemToObject(m, "tool_calls", calls);
        calls = NULL;
        cJSON_ReplaceItemInObjectCaseSensitive(ch, "finish_reason",
                                               cJSON_CreateString("tool_calls"));
        out = cJSON_PrintUnformatted(r);
    }
    cJSON_Delete(calls);
    cJSON_Delete(r);
    return out;
}

char *oai_tools_chunk(const char *json, cJSON *calls)
{
    return oai_tools_chunk_from(json, calls, 0);
}

char *oai_tools_chunk_from(const char *json, cJSON *calls, int first)
{
    cJSON *r = cJSON_Parse(json);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "choices"), 0);
    cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
    char *out = NULL;
    if (d) {
        cJSON_DeleteItemFromObjectCaseSensitive(d, "content");
        int i = first;
        cJSON *c;
        cJSON_ArrayForEach(c, calls) {
            cJSON_DeleteItemFromObjectCaseSensitive(c, "index");
            cJSON_AddNumberToObject(c, "index", i++);
        }
        cJSON_AddItemToObject(d, "tool_calls", calls);
        calls = NULL;
        out = cJSON_PrintUnformatted(r);
    }
    cJSON_Delete(calls);
    cJSON_Delete(r);
    return out;
}

bool oai_tools_maybe_call(const char *text, size_t len)
{
    static const char *const marks[] = {"<tool_call>", "<|tool_call|>", "[TOOL_CALLS]",
                                        "<|python_tag|>", "{", "["};
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i])) i++;
    if (i == len) return true; /* nothing yet */
    for (size_t k = 0; k < sizeof marks / sizeof marks[0]; k++) {
        size_t ml = strlen(marks[k]), n = len - i < ml ? len - i : ml;
        if (memcmp(text + i, marks[k], n) == 0) return true;
    }
    return false;
}

/* Skips JSON whitespace from i; returns the new index. */
static size_t ws_at(const char *t, size_t i, size_t len)
{
    while (i < len && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r')) i++;
    return i;
}

/* Expects the literal s at i (after whitespace); returns the index after
 * it, or 0 when the text is shorter or differs. */
static size_t lit_at(const char *t, size_t i, size_t len, const char *s)
{
    i = ws_at(t, i, len);
    size_t n = strlen(s);
    if (i + n > len || memcmp(t + i, s, n) != 0) return 0;
    return i + n;
}

/* The end of a JSON string starting at i (its opening quote), or 0. */
static size_t string_end(const char *t, size_t i, size_t len)
{
    for (size_t k = i + 1; k < len; k++) {
        if (t[k] == '\\') k++;
        else if (t[k] == '"') return k + 1;
    }
    return 0;
}

/* One call object {"name": .., "arguments" | "parameters": ..} from
 * t[at..len), as far as it goes (see oai_tools_forced_progress). */
static void call_at(const char *t, size_t at, size_t len, char **name, size_t *from, size_t *to,
                    bool *done)
{
    *name = NULL;
    *from = *to = 0;
    *done = false;
    size_t i = lit_at(t, at, len, "{");
    if (i) i = lit_at(t, i, len, "\"name\"");
    if (i) i = lit_at(t, i, len, ":");
    if (!i) return;
    i = ws_at(t, i, len);
    size_t e = i < len && t[i] == '"' ? string_end(t, i, len) : 0;
    if (!e) return;
    cJSON *s = cJSON_ParseWithLength(t + i, e - i);
    if (cJSON_IsString(s)) *name = strdup(s->valuestring);
    cJSON_Delete(s);
    i = lit_at(t, e, len, ",");
    if (i) { /* "parameters" as Llama 3.1-3.3's template writes calls */
        size_t a = lit_at(t, i, len, "\"arguments\"");
        i = a ? a : lit_at(t, i, len, "\"parameters\"");
    }
    if (i) i = lit_at(t, i, len, ":");
    if (!i) return;
    i = ws_at(t, i, len);
    if (i >= len) return;
    /* the value: an object (the grammar's arguments are one), depth counted
     * outside strings; bounded by the text's length */
    int depth = 0;
    bool in_str = false;
    size_t k = i;
    for (; k < len; k++) {
        char c = t[k];
        if (in_str) {
            if (c == '\\') k++;
            else if (c == '"') in_str = false;
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                k++;
                *done = true;
                break;
            }
        }
    }
    *from = i;
    *to = k > len ? len : k;
}

void oai_tools_forced_progress(const char *t, size_t len, char **name, size_t *from, size_t *to,
                               bool *done)
{
    call_at(t, 0, len, name, from, to, done);
}

int oai_tools_stream_progress(const struct oai_tools *t, const char *text, size_t len,
                              struct oai_call_progress *out, int max)
{
    static const char *const tags[][2] = {{"<tool_call>", "</tool_call>"},
                                          {"<|tool_call|>", "<|/tool_call|>"}};
    size_t i = 0, j;
    int n = 0;
    const char *open = NULL, *close = NULL; /* the blocks' tags, when tagged */
    bool array = false;                     /* calls in a JSON array ([TOOL_CALLS]) */
    while (n < max) {
        if (n == 0) {
            for (size_t k = 0; k < 2 && !open; k++)
                if ((j = lit_at(text, i, len, tags[k][0]))) {
                    open = tags[k][0];
                    close = tags[k][1];
                    i = j;
                }
            if (!open) {
                if ((j = lit_at(text, i, len, "[TOOL_CALLS]"))) i = j;
                else if ((j = lit_at(text, i, len, "<|python_tag|>"))) i = j;
                if ((j = lit_at(text, i, len, "["))) {
                    array = true;
                    i = j;
                }
            }
        } else if (open) {
            if (!(j = lit_at(text, i, len, open))) break; /* only another block is a call */
            i = j;
        } else if (array) {
            if (!(j = lit_at(text, i, len, ","))) break;
            i = j;
        } else {
            break;
        }
        struct oai_call_progress p = {0};
        call_at(text, i, len, &p.name, &p.args_from, &p.args_to, &p.done);
        if (!p.name) break;
        if (!has_name(t, p.name)) {
            free(p.name);
            break;
        }
        out[n++] = p;
        /* its end: the object's brace, then the closing tag of a block */
        if (!p.done || !(j = lit_at(text, p.args_to, len, "}"))) break;
        if (open && !(j = lit_at(text, j, len, close))) break;
        out[n - 1].end = j;
        if ((!open && !array) || !t->parallel) break;
        i = j;
    }
    return n;
}

void oai_tools_progress_free(struct oai_call_progress *p, int n)
{
    for (int i = 0; i < n; i++) free(p[i].name);
}
