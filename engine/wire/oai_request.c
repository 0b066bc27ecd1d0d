/* oai_request: OpenAI chat/completions JSON <-> struct engine_request.
 * The parser is the trust boundary for request bodies: UTF-8 is checked on
 * the raw bytes before cJSON sees them, every field's type and range after. */
#include "oai_request.h"
#include "template.h"

#include "jsg.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool oai_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) { p++; continue; }
        size_t k;
        unsigned cp, min;
        if ((c & 0xE0) == 0xC0) { k = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { k = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return false;
        if ((size_t)(end - p) <= k) return false;
        for (size_t i = 1; i <= k; i++) {
            if ((p[i] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        p += k + 1;
    }
    return true;
}

/* ---- parse ------------------------------------------------------------------- */

struct parse_ctx {
    struct oai_request *r;
    struct oai_limits lim;
    struct oai_error *err;
};

static int fail(struct parse_ctx *c, const char *param, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err->message, sizeof c->err->message, fmt, ap);
    va_end(ap);
    snprintf(c->err->param, sizeof c->err->param, "%s", param ? param : "");
    return -1;
}

/* Keeps a copy of s[0..n) in the request's string list; NULL on OOM. */
static char *keep(struct oai_request *r, const char *s, size_t n)
{
    if (r->n_strs == r->cap_strs) {
        int32_t cap = r->cap_strs ? r->cap_strs * 2 : 16;
        char **v = realloc(r->strs, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        r->strs = v;
        r->cap_strs = cap;
    }
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    r->strs[r->n_strs++] = d;
    return d;
}

static const cJSON *field(const cJSON *root, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return (v && cJSON_IsNull(v)) ? NULL : v; /* null means absent, as OpenAI treats it */
}

static int get_num(struct parse_ctx *c, const cJSON *root, const char *name, double lo,
                   double hi, bool integer, double *out, bool *given)
{
    const cJSON *v = field(root, name);
    if (given) *given = false;
    if (!v) return 0;
    if (!cJSON_IsNumber(v))
        return fail(c, name, "'%s' must be a%s", name, integer ? "n integer" : " number");
    double d = v->valuedouble;
    if (!isfinite(d)) return fail(c, name, "'%s' is not a finite number", name);
    if (integer && d != floor(d)) return fail(c, name, "'%s' must be an integer", name);
    if (d < lo || d > hi)
        return fail(c, name, "'%s' is %g; it must be between %g and %g", name, d, lo, hi);
    *out = d;
    if (given) *given = true;
    return 0;
}

static int get_float(struct parse_ctx *c, const cJSON *root, const char *name, double lo,
                     double hi, float *out)
{
    double d;
    bool given;
    if (get_num(c, root, name, lo, hi, false, &d, &given) != 0) return -1;
    if (given) *out = (float)d;
    return 0;
}

static int get_bool(struct parse_ctx *c, const cJSON *root, const char *name, bool *out)
{
    const cJSON *v = field(root, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return fail(c, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_str(struct parse_ctx *c, const cJSON *root, const char *name, char **out)
{
    const cJSON *v = field(root, name);
    if (!v) return 0;
    if (!cJSON_IsString(v)) return fail(c, name, "'%s' must be a string", name);
    *out = keep(c->r, v->valuestring, strlen(v->valuestring));
    return *out ? 0 : fail(c, name, "out of memory");
}

/* content: a string, or an array of {"type":"text","text":...} parts (joined). */
static int parse_content(struct parse_ctx *c, const cJSON *v, const char *param,
                         const char **out)
{
    if (!v) {
        *out = keep(c->r, "", 0);
        return *out ? 0 : fail(c, param, "out of memory");
    }
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        c->r->n_chars += (int32_t)(n > INT32_MAX / 2 ? INT32_MAX / 2 : n);
        *out = keep(c->r, v->valuestring, n);
        return *out ? 0 : fail(c, param, "out of memory");
    }
    if (!cJSON_IsArray(v))
        return fail(c, param, "'%s' must be a string or an array of text parts", param);
    size_t total = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, v) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(type))
            return fail(c, param, "each part of '%s' must be an object with a 'type'", param);
        if (strcmp(type->valuestring, "text") != 0)
            return fail(c, param, "'%s': part type '%.32s' is not supported (text only)", param,
                        type->valuestring);
        if (!cJSON_IsString(text))
            return fail(c, param, "'%s': a text part's 'text' must be a string", param);
        total += strlen(text->valuestring);
    }
    char *buf = keep(c->r, "", 0);
    if (!buf) return fail(c, param, "out of memory");
    char *joined = realloc(buf, total + 1);
    if (!joined) return fail(c, param, "out of memory");
    c->r->strs[c->r->n_strs - 1] = joined;
    size_t off = 0;
    cJSON_ArrayForEach(p, v) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(joined + off, t, n);
        off += n;
    }
    joined[off] = 0;
    c->r->n_chars += (int32_t)(total > INT32_MAX / 2 ? INT32_MAX / 2 : total);
    *out = joined;
    return 0;
}

/* A tool result or an assistant turn's calls as the template's structured
 * role (template.h): its content becomes the JSON the template reads. */
static int tool_text(struct parse_ctx *c, const cJSON *m, bool has_content, const char *role,
                     const char *param, const char **text)
{
    char msg[160];
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    if (strcmp(role, "tool") == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (id && !cJSON_IsNull(id) && !cJSON_IsString(id)) {
            cJSON_Delete(o);
            return fail(c, param, "'%s.tool_call_id' must be a string", param);
        }
        if (ok && cJSON_IsString(id))
            ok = cJSON_AddStringToObject(o, "tool_call_id", id->valuestring) != NULL;
    } else {
        if (strcmp(role, "assistant") != 0) {
            cJSON_Delete(o);
            return fail(c, param, "'%s.tool_calls' is only for assistant messages", param);
        }
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (oai_tools_check_calls(tc, msg, sizeof msg) != 0) {
            cJSON_Delete(o);
            return fail(c, param, "'%s': %s", param, msg);
        }
        if (ok) ok = cJSON_AddItemToObject(o, "tool_calls", cJSON_Duplicate(tc, true));
    }
    if (ok) ok = (has_content ? cJSON_AddStringToObject(o, "content", *text)
                              : cJSON_AddNullToObject(o, "content")) != NULL;
    char *t = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!t) return fail(c, param, "out of memory");
    *text = keep(c->r, t, strlen(t));
    free(t);
    return *text ? 0 : fail(c, param, "out of memory");
}

/* tools / tool_choice / parallel_tool_calls (chat): the tools go first as
 * the template's "tools" message; a forced call's grammar into json_schema. */
static int parse_tools(struct parse_ctx *c, const cJSON *root)
{
    struct oai_request *r = c->r;
    char *system = NULL /* the tools' JSON */, *schema = NULL, msg[400], param[64];
    if (r->kind != OAI_CHAT) {
        const cJSON *tl = field(root, "tools");
        if (tl) return fail(c, "tools", "'tools' is for /v1/chat/completions");
        return 0;
    }
    if (oai_tools_parse(root, &r->tools, &system, &schema, msg, sizeof msg, param,
                        sizeof param) != 0) {
        free(system);
        free(schema);
        return fail(c, param, "%s", msg);
    }
    int rc = 0;
    if (schema && (r->req.json_schema || r->req.json_object))
        rc = fail(c, "tool_choice", "a forced tool call cannot be combined with "
                  "'response_format'");
    if (rc == 0 && schema && !(r->req.json_schema = keep(r, schema, strlen(schema))))
        rc = fail(c, "tools", "out of memory");
    if (rc == 0 && system) {
        struct engine_message *m = realloc(r->msgs, (size_t)(r->req.n_messages + 1) * sizeof *m);
        if (!m) rc = fail(c, "tools", "out of memory");
        else {
            memmove(m + 1, m, (size_t)r->req.n_messages * sizeof *m);
            m[0].role = keep(r, TMPL_ROLE_TOOLS, strlen(TMPL_ROLE_TOOLS));
            m[0].content = keep(r, system, strlen(system));
            r->msgs = m;
            r->req.messages = m;
            r->req.n_messages++;
            if (!m[0].role || !m[0].content) rc = fail(c, "tools", "out of memory");
        }
    }
    free(system);
    free(schema);
    return rc;
}

static int parse_messages(struct parse_ctx *c, const cJSON *root)
{
    const cJSON *msgs = field(root, "messages");
    if (!msgs) return fail(c, "messages", "'messages' is required");
    if (!cJSON_IsArray(msgs)) return fail(c, "messages", "'messages' must be an array");
    int n = cJSON_GetArraySize(msgs);
    if (n == 0) return fail(c, "messages", "'messages' must not be empty");
    if (n > c->lim.max_messages)
        return fail(c, "messages", "'messages' has %d entries; at most %d are accepted", n,
                    (int)c->lim.max_messages);
    c->r->msgs = calloc((size_t)n, sizeof *c->r->msgs);
    if (!c->r->msgs) return fail(c, "messages", "out of memory");
    int i = 0, k = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        char param[64];
        snprintf(param, sizeof param, "messages[%d]", k++);
        if (!cJSON_IsObject(m)) return fail(c, param, "'%s' must be an object", param);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return fail(c, param, "'%s.role' must be a string", param);
        const char *rs = role->valuestring;
        /* "developer" is the newer name of "system" in the OpenAI API. */
        if (strcmp(rs, "developer") == 0) rs = "system";
        if (strcmp(rs, "system") != 0 && strcmp(rs, "user") != 0 &&
            strcmp(rs, "assistant") != 0 && strcmp(rs, "tool") != 0)
            return fail(c, param, "'%s.role' is '%.32s'; system, user, assistant and tool are "
                        "supported", param, rs);
        char cparam[80];
        snprintf(cparam, sizeof cparam, "%s.content", param);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (content && cJSON_IsNull(content)) content = NULL;
        if (!content && strcmp(rs, "assistant") != 0)
            return fail(c, cparam, "'%s' is required", cparam);
        const char *text;
        if (parse_content(c, content, cparam, &text) != 0) return -1;
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (tc && (cJSON_IsNull(tc) || (cJSON_IsArray(tc) && cJSON_GetArraySize(tc) == 0)))
            tc = NULL; /* clients send null or [] on turns without calls */
        if (strcmp(rs, "tool") == 0 || tc) {
            if (tool_text(c, m, content != NULL, rs, param, &text) != 0) return -1;
            if (strcmp(rs, "tool") != 0) rs = TMPL_ROLE_TOOL_CALLS;
        }
        c->r->msgs[i].role = keep(c->r, rs, strlen(rs));
        if (!c->r->msgs[i].role) return fail(c, param, "out of memory");
        c->r->msgs[i].content = text;
        i++;
    }
    c->r->req.messages = c->r->msgs;
    c->r->req.n_messages = i;
    return 0;
}

static int parse_prompt(struct parse_ctx *c, const cJSON *root)
{
    const cJSON *p = field(root, "prompt");
    if (!p) return fail(c, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child))
        p = p->child; /* ["text"]: one prompt, as clients often send it */
    if (cJSON_IsString(p)) {
        if (!p->valuestring[0]) return fail(c, "prompt", "'prompt' must not be empty");
        size_t n = strlen(p->valuestring);
        c->r->n_chars = (int32_t)(n > INT32_MAX ? INT32_MAX : n);
        c->r->req.prompt = keep(c->r, p->valuestring, n);
        return c->r->req.prompt ? 0 : fail(c, "prompt", "out of memory");
    }
    if (!cJSON_IsArray(p))
        return fail(c, "prompt", "'prompt' must be a string or an array of token ids");
    int n = cJSON_GetArraySize(p);
    if (n == 0) return fail(c, "prompt", "'prompt' must not be empty");
    if (n > c->lim.max_prompt_ids)
        return fail(c, "prompt", "'prompt' has %d token ids; at most %d are accepted", n,
                    (int)c->lim.max_prompt_ids);
    c->r->ids = malloc((size_t)n * sizeof *c->r->ids);
    if (!c->r->ids) return fail(c, "prompt", "out of memory");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, p) {
        if (cJSON_IsString(t))
            return fail(c, "prompt", "'prompt': only one prompt per request (n = 1)");
        if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble > INT32_MAX || t->valuedouble != floor(t->valuedouble))
            return fail(c, "prompt", "'prompt[%d]' must be a token id (an integer >= 0)", i);
        c->r->ids[i++] = (int32_t)t->valuedouble;
    }
    c->r->req.prompt_tokens = c->r->ids;
    c->r->req.n_prompt_tokens = n;
    return 0;
}

static int parse_stop(struct parse_ctx *c, const cJSON *root)
{
    const cJSON *s = field(root, "stop");
    if (!s) return 0;
    int n = cJSON_IsString(s) ? 1 : cJSON_IsArray(s) ? cJSON_GetArraySize(s) : -1;
    if (n < 0) return fail(c, "stop", "'stop' must be a string or an array of strings");
    if (n > c->lim.max_stop)
        return fail(c, "stop", "'stop' has %d strings; at most %d are accepted", n,
                    (int)c->lim.max_stop);
    if (n == 0) return 0;
    c->r->stops = calloc((size_t)n, sizeof *c->r->stops);
    if (!c->r->stops) return fail(c, "stop", "out of memory");
    const cJSON *one = cJSON_IsString(s) ? s : s->child;
    for (int i = 0; i < n; i++, one = one->next) {
        if (!cJSON_IsString(one)) return fail(c, "stop", "'stop[%d]' must be a string", i);
        size_t len = strlen(one->valuestring);
        if (len == 0) return fail(c, "stop", "'stop[%d]' must not be empty", i);
        if (len > c->lim.max_stop_len)
            return fail(c, "stop", "'stop[%d]' is %zu bytes; at most %zu", i, len,
                        c->lim.max_stop_len);
        c->r->stops[i] = keep(c->r, one->valuestring, len);
        if (!c->r->stops[i]) return fail(c, "stop", "out of memory");
    }
    c->r->req.stop = c->r->stops;
    c->r->req.n_stop = n;
    return 0;
}

/* Log-probabilities: chat's logprobs (bool) + top_logprobs (0..20);
 * completions' logprobs (int 0..20, OpenAI allows 5) + echo; vLLM's
 * prompt_logprobs (int 0..20) on both. echo with max_tokens 0 scores the
 * prompt without generating (the engine's score request). */
static int parse_logprobs(struct parse_ctx *c, const cJSON *root)
{
    struct oai_request *r = c->r;
    double d;
    bool given, b = false;
    r->logprobs = r->prompt_logprobs = -1;
    if (r->kind == OAI_CHAT) {
        if (get_bool(c, root, "logprobs", &b) != 0) return -1;
        if (get_num(c, root, "top_logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, true, &d, &given) != 0)
            return -1;
        if (given && !b)
            return fail(c, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        if (b) r->logprobs = given ? (int32_t)d : 0;
    } else {
        if (get_num(c, root, "logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, true, &d, &given) != 0)
            return -1;
        if (given) r->logprobs = (int32_t)d;
        if (get_bool(c, root, "echo", &r->echo) != 0) return -1;
    }
    if (get_num(c, root, "prompt_logprobs", 0, ENGINE_MAX_TOP_LOGPROBS, true, &d, &given) != 0)
        return -1;
    if (given) r->prompt_logprobs = (int32_t)d;
    struct engine_request *q = &r->req;
    q->logprobs = r->logprobs >= 0;
    q->top_logprobs = r->logprobs > 0 ? r->logprobs : 0;
    int32_t pt = r->echo && r->logprobs >= 0 ? r->logprobs : -1;
    if (r->prompt_logprobs > pt) pt = r->prompt_logprobs;
    q->prompt_logprobs = pt >= 0;
    q->prompt_top_logprobs = pt > 0 ? pt : 0;
    return 0;
}

/* Fields tern does not implement: a clear 400 instead of silently ignoring them. */
static int parse_unsupported(struct parse_ctx *c, const cJSON *root)
{
    double d;
    bool given;
    if (get_num(c, root, "n", -1e18, 1e18, true, &d, &given) != 0) return -1;
    if (given && d != 1) return fail(c, "n", "'n' must be 1 (one choice per request)");
    if (get_num(c, root, "best_of", -1e18, 1e18, true, &d, &given) != 0) return -1;
    if (given && d != 1) return fail(c, "best_of", "'best_of' must be 1");
    if (c->r->kind == OAI_COMPLETION) {
        const cJSON *sfx = field(root, "suffix");
        if (sfx && !(cJSON_IsString(sfx) && !sfx->valuestring[0]))
            return fail(c, "suffix", "'suffix' is not supported by tern");
    }
    return 0;
}

/* response_format: text, json_object, or json_schema {name, schema, strict,
 * description}. The schema is compiled here once to refuse what the grammar
 * cannot enforce with a 400 naming the keyword and its path; the engine
 * compiles its own copy at submit. */
static int parse_response_format(struct parse_ctx *c, const cJSON *root)
{
    const cJSON *rf = field(root, "response_format");
    if (!rf) return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(t))
        return fail(c, "response_format", "'response_format' must be an object with a 'type'");
    if (strcmp(t->valuestring, "text") == 0) return 0;
    if (strcmp(t->valuestring, "json_object") == 0) {
        c->r->req.json_object = true;
        return 0;
    }
    if (strcmp(t->valuestring, "json_schema") != 0)
        return fail(c, "response_format.type", "'response_format.type' is '%.32s'; text, "
                    "json_object and json_schema are supported", t->valuestring);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return fail(c, "response_format.json_schema",
                    "'response_format.json_schema' must be an object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
    if (name && !cJSON_IsString(name))
        return fail(c, "response_format.json_schema.name",
                    "'response_format.json_schema.name' must be a string");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return fail(c, "response_format.json_schema.strict",
                    "'response_format.json_schema.strict' must be a boolean");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    const char *sp = "response_format.json_schema.schema";
    if (!schema) return fail(c, sp, "'%s' is required", sp);
    if (!cJSON_IsObject(schema)) return fail(c, sp, "'%s' must be an object", sp);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return fail(c, sp, "out of memory");
    char err[320];
    struct jsg *g = jsg_compile(text, strlen(text), false, err, sizeof err);
    if (!g) {
        free(text);
        return fail(c, sp, "'%s': %s", sp, err);
    }
    jsg_free(g);
    c->r->req.json_schema = keep(c->r, text, strlen(text));
    free(text);
    return c->r->req.json_schema ? 0 : fail(c, sp, "out of memory");
}

static int parse_sampling(struct parse_ctx *c, const cJSON *root)
{
    struct engine_sampling *s = &c->r->req.sampling;
    double d;
    bool given;
    if (get_float(c, root, "temperature", 0, 2, &s->temp) != 0) return -1;
    if (get_float(c, root, "top_p", 0, 1, &s->top_p) != 0) return -1;
    if (get_float(c, root, "min_p", 0, 1, &s->min_p) != 0) return -1;
    if (get_float(c, root, "presence_penalty", -2, 2, &s->presence_penalty) != 0) return -1;
    if (get_float(c, root, "frequency_penalty", -2, 2, &s->frequency_penalty) != 0) return -1;
    if (get_float(c, root, "repetition_penalty", 0.01, 10, &s->repeat_penalty) != 0) return -1;
    if (get_num(c, root, "top_k", 0, 1 << 24, true, &d, &given) != 0) return -1;
    if (given) s->top_k = (int32_t)d;
    if (get_num(c, root, "repeat_last_n", 0, 1 << 20, true, &d, &given) != 0) return -1;
    if (given) s->penalty_last_n = (int32_t)d;
    /* JSON numbers are doubles: seeds beyond 2^53 cannot be told apart. */
    if (get_num(c, root, "seed", -9007199254740992.0, 9007199254740992.0, true, &d,
                &c->r->has_seed) != 0)
        return -1;
    if (c->r->has_seed) s->seed = (uint64_t)(int64_t)d;
    return 0;
}

static int parse_limits(struct parse_ctx *c, const cJSON *root)
{
    double d;
    bool given;
    const char *name = field(root, "max_completion_tokens") ? "max_completion_tokens"
                                                            : "max_tokens";
    if (get_num(c, root, name, -INFINITY, INFINITY, true, &d, &given) != 0) return -1;
    if (given) {
        if (d == 0 && c->r->echo) {
            c->r->req.score = true; /* echo only: the prompt's log-probabilities */
            c->r->req.logprobs = false;
        } else if (d < 1) {
            return fail(c, name, "'%s' is %g; it must be at least 1 (0 only with 'echo')", name,
                        d);
        }
        if (d > c->lim.max_tokens_cap)
            return fail(c, name, "'%s' is %g; at most %d is accepted", name, d,
                        (int)c->lim.max_tokens_cap);
        c->r->req.max_tokens = (int32_t)d;
        c->r->has_max_tokens = true;
    }
    if (get_bool(c, root, "stream", &c->r->stream) != 0) return -1;
    const cJSON *so = field(root, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return fail(c, "stream_options", "'stream_options' must be an object");
        if (get_bool(c, so, "include_usage", &c->r->include_usage) != 0) return -1;
    }
    /* tern's extension: speculative decoding by n-gram lookup for this
     * request (guesses per step; 0 = off), whatever the server's --lookup. */
    const cJSON *lk = field(root, "lookup_k");
    if (lk) {
        double dk = cJSON_IsNumber(lk) ? lk->valuedouble : -1;
        if (dk < 0 || dk > 32 || dk != (double)(int)dk)
            return fail(c, "lookup_k", "'lookup_k' must be an integer from 0 (off) to 32");
        c->r->req.lookup_k = dk > 0 ? (int32_t)dk : -1;
    }
    return get_bool(c, root, "ignore_eos", &c->r->req.ignore_eos);
}

static void limits_default(struct oai_limits *l, const struct oai_limits *in)
{
    memset(l, 0, sizeof *l);
    if (in) *l = *in;
    if (!l->max_body) l->max_body = OAI_DEFAULT_MAX_BODY;
    if (!l->max_messages) l->max_messages = 4096;
    if (!l->max_stop) l->max_stop = 16;
    if (!l->max_stop_len) l->max_stop_len = 256;
    if (!l->max_tokens_cap) l->max_tokens_cap = 1 << 20;
    if (!l->max_prompt_ids) l->max_prompt_ids = 1 << 20;
}

/* chat_template_kwargs (vLLM, SGLang, llama-server): enable_thinking is the
 * one tern applies (false: no_think); other keys belong to templates tern
 * does not run and are ignored, as llama-server ignores unknown ones. */
static int parse_template_kwargs(struct parse_ctx *c, const cJSON *root)
{
    const cJSON *kw = field(root, "chat_template_kwargs");
    if (!kw) return 0;
    if (c->r->kind != OAI_CHAT)
        return fail(c, "chat_template_kwargs", "'chat_template_kwargs' is for /v1/chat/completions");
    if (!cJSON_IsObject(kw)) return fail(c, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
    const cJSON *et = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
    if (!et) return 0;
    if (!cJSON_IsBool(et))
        return fail(c, "chat_template_kwargs", "'chat_template_kwargs.enable_thinking' must be true or false");
    c->r->req.no_think = cJSON_IsFalse(et);
    return 0;
}

int oai_request_parse(const char *body, size_t len, enum oai_kind kind,
                      const struct oai_limits *lim, struct oai_request *out,
                      struct oai_error *err)
{
    struct parse_ctx c = {.r = out, .err = err};
    cJSON *root = NULL;
    memset(out, 0, sizeof *out);
    out->kind = kind;
    engine_sampling_default(&out->req.sampling);
    out->req.priority = ENGINE_PRIO_INTERACTIVE;
    limits_default(&c.lim, lim);
    if (len > c.lim.max_body) {
        fail(&c, "", "request body is %zu bytes; at most %zu are accepted", len, c.lim.max_body);
        goto fail;
    }
    if (!oai_utf8_valid(body, len)) {
        fail(&c, "", "request body is not valid UTF-8");
        goto fail;
    }
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        fail(&c, "", "request body is not valid JSON (near byte %ld)",
             end ? (long)(end - body) : 0L);
        goto fail;
    }
    while (end && end < body + len && (*end == ' ' || *end == '\t' || *end == '\n' ||
                                       *end == '\r'))
        end++;
    if (end && end < body + len) {
        fail(&c, "", "request body has bytes after the JSON value (at byte %ld)",
             (long)(end - body));
        goto fail;
    }
    if (!cJSON_IsObject(root)) {
        fail(&c, "", "request body must be a JSON object");
        goto fail;
    }
    if (get_str(&c, root, "model", &out->model) != 0 || get_str(&c, root, "user", &out->user) != 0)
        goto fail;
    if ((kind == OAI_CHAT ? parse_messages(&c, root) : parse_prompt(&c, root)) != 0) goto fail;
    if (parse_unsupported(&c, root) != 0 || parse_response_format(&c, root) != 0 ||
        parse_tools(&c, root) != 0 || parse_template_kwargs(&c, root) != 0 ||
        parse_logprobs(&c, root) != 0 ||
        parse_sampling(&c, root) != 0 ||
        parse_limits(&c, root) != 0 || parse_stop(&c, root) != 0)
        goto fail;
    cJSON_Delete(root);
    return 0;
fail:
    cJSON_Delete(root);
    oai_request_free(out);
    return -1;
}

void oai_request_free(struct oai_request *r)
{
    if (!r) return;
    for (int32_t i = 0; i < r->n_strs; i++) free(r->strs[i]);
    free(r->strs);
    free(r->msgs);
    free(r->stops);
    free(r->ids);
    oai_tools_free(&r->tools);
    enum oai_kind k = r->kind;
    memset(r, 0, sizeof *r);
    r->kind = k;
}

/* ---- build ------------------------------------------------------------------- */

static bool add_num(cJSON *o, const char *name, double v)
{
    return cJSON_AddNumberToObject(o, name, v) != NULL;
}

static bool build_prompt(cJSON *o, enum oai_kind kind, const struct engine_request *r)
{
    if (kind == OAI_CHAT) {
        if (!r->messages || r->n_messages <= 0) return false;
        /* Tools, calls and results go out in the generic format as plain
         * messages: the server applies its own template, and its reply's
         * calls come back as text, which the caller reads (oai_tools). */
        struct tmpl_msg *tm = malloc((size_t)r->n_messages * sizeof *tm);
        if (!tm) return false;
        bool tools = false;
        for (int32_t i = 0; i < r->n_messages; i++) {
            tm[i].role = r->messages[i].role;
            tm[i].content = r->messages[i].content ? r->messages[i].content : "";
            tools |= tmpl_role_is_tool(tm[i].role);
        }
        struct tmpl_plain plain = {.msgs = tm, .n = (size_t)r->n_messages};
        char err[160];
        if (tools) {
            /* the plain messages' roles and texts do not point into tm */
            int rc = tmpl_tools_plain(tm, (size_t)r->n_messages, &plain, err, sizeof err);
            free(tm);
            tm = NULL;
            if (rc) return false;
        }
        bool ok = true;
        cJSON *arr = cJSON_AddArrayToObject(o, "messages");
        for (size_t i = 0; ok && arr && i < plain.n; i++) {
            cJSON *m = cJSON_CreateObject();
            if (m && !cJSON_AddItemToArray(arr, m)) {
                cJSON_Delete(m);
                m = NULL;
            }
            ok = m &&
                 cJSON_AddStringToObject(m, "role", plain.msgs[i].role) &&
                 cJSON_AddStringToObject(m, "content", plain.msgs[i].content);
        }
        if (tools) tmpl_plain_free(&plain);
        else free(tm);
        return ok && arr;
    }
    if (r->prompt) return cJSON_AddStringToObject(o, "prompt", r->prompt) != NULL;
    if (!r->prompt_tokens || r->n_prompt_tokens <= 0) return false;
    cJSON *ids = cJSON_AddArrayToObject(o, "prompt");
    if (!ids) return false;
    for (int32_t i = 0; i < r->n_prompt_tokens; i++) {
        cJSON *n = cJSON_CreateNumber(r->prompt_tokens[i]);
        if (!n || !cJSON_AddItemToArray(ids, n)) {
            cJSON_Delete(n);
            return false;
        }
    }
    return true;
}

static bool build_sampling(cJSON *o, const struct engine_sampling *s)
{
    /* Seeds travel as JSON numbers: keep the low 53 bits, which parse back exactly. */
    double seed = (double)(s->seed & ((1ull << 53) - 1));
    return add_num(o, "temperature", s->temp) && add_num(o, "top_p", s->top_p) &&
           add_num(o, "top_k", s->top_k) && add_num(o, "min_p", s->min_p) &&
           add_num(o, "presence_penalty", s->presence_penalty) &&
           add_num(o, "frequency_penalty", s->frequency_penalty) &&
           add_num(o, "repetition_penalty", s->repeat_penalty) &&
           add_num(o, "repeat_last_n", s->penalty_last_n) && add_num(o, "seed", seed);
}

/* A score request is echo + logprobs + max_tokens 0 (the prompt's
 * log-probabilities, nothing generated), which tern serve, vLLM and OpenAI's
 * legacy completions answer; score_from does not travel (the receiver
 * returns every position). */
static bool build_logprobs(cJSON *o, enum oai_kind kind, const struct engine_request *r)
{
    if (kind == OAI_CHAT)
        return !r->logprobs || (cJSON_AddBoolToObject(o, "logprobs", true) &&
                                add_num(o, "top_logprobs", r->top_logprobs));
    if (r->score)
        return cJSON_AddBoolToObject(o, "echo", true) && add_num(o, "max_tokens", 0) &&
               add_num(o, "logprobs", r->prompt_top_logprobs);
    if (r->logprobs && !add_num(o, "logprobs", r->top_logprobs)) return false;
    if (r->prompt_logprobs && !add_num(o, "prompt_logprobs", r->prompt_top_logprobs)) return false;
    return true;
}

/* Structured output travels as OpenAI's response_format. */
static bool build_response_format(cJSON *o, const struct engine_request *r)
{
    if (!r->json_schema && !r->json_object) return true;
    cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
    if (!rf) return false;
    if (!r->json_schema) return cJSON_AddStringToObject(rf, "type", "json_object") != NULL;
    cJSON *schema = cJSON_Parse(r->json_schema);
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    if (!schema || !js || !cJSON_AddStringToObject(rf, "type", "json_schema") ||
        !cJSON_AddStringToObject(js, "name", "reply") || !cJSON_AddBoolToObject(js, "strict", true) ||
        !cJSON_AddItemToObject(js, "schema", schema)) {
        cJSON_Delete(schema);
        return false;
    }
    return true;
}

char *oai_request_build(enum oai_kind kind, const char *model, const struct engine_request *r,
                        bool stream, bool include_usage)
{
    char *out = NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddStringToObject(o, "model", model ? model : "default")) goto done;
    if (!build_prompt(o, kind, r) || !build_sampling(o, &r->sampling)) goto done;
    if (r->max_tokens > 0 && !r->score && !add_num(o, "max_tokens", r->max_tokens)) goto done;
    if (!build_logprobs(o, kind, r)) goto done;
    if (r->n_stop > 0) {
        cJSON *st = cJSON_AddArrayToObject(o, "stop");
        if (!st) goto done;
        for (int32_t i = 0; i < r->n_stop; i++) {
            cJSON *s = cJSON_CreateString(r->stop[i]);
            if (!s || !cJSON_AddItemToArray(st, s)) {
                cJSON_Delete(s);
                goto done;
            }
        }
    }
    if (r->ignore_eos && !cJSON_AddBoolToObject(o, "ignore_eos", true)) goto done;
    if (r->lookup_k != 0 && !add_num(o, "lookup_k", r->lookup_k > 0 ? r->lookup_k : 0)) goto done;
    if (kind == OAI_CHAT && r->no_think) { /* the server's template opens the empty block itself */
        cJSON *kw = cJSON_AddObjectToObject(o, "chat_template_kwargs");
        if (!kw || !cJSON_AddBoolToObject(kw, "enable_thinking", false)) goto done;
    }
    if (!build_response_format(o, r)) goto done;
    if (!cJSON_AddBoolToObject(o, "stream", stream)) goto done;
    if (stream && include_usage) {
        cJSON *so = cJSON_AddObjectToObject(o, "stream_options");
        if (!so || !cJSON_AddBoolToObject(so, "include_usage", true)) goto done;
    }
    out = cJSON_PrintUnformatted(o);
done:
    cJSON_Delete(o);
    return out;
}
