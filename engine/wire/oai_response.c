/* oai_response: OpenAI response / chunk / error JSON, built and parsed.
 * Model output leaves through here: text that is not valid UTF-8 is
 * replaced (U+FFFD per bad byte) so every body is valid JSON text. */
#include "oai_response.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void oai_usage_from_metrics(struct oai_usage *u, const struct engine_metrics *m)
{
    u->prompt_tokens = m ? m->n_prompt : 0;
    u->completion_tokens = m ? m->n_generated : 0;
    u->cached_tokens = m ? m->n_cached : 0;
}

const char *oai_finish_reason(enum engine_status s)
{
    switch (s) {
    case ENGINE_OK:
    case ENGINE_STOP: return "stop";
    case ENGINE_LENGTH: return "length";
    default: return engine_status_name(s);
    }
}

int oai_finish_status(const char *reason)
{
    if (!reason) return -1;
    if (strcmp(reason, "stop") == 0) return ENGINE_STOP;
    if (strcmp(reason, "length") == 0) return ENGINE_LENGTH;
    for (int s = 0; s < ENGINE_N_STATUS; s++)
        if (strcmp(reason, engine_status_name((enum engine_status)s)) == 0) return s;
    return -1;
}

/* A copy of s with each byte of an invalid UTF-8 sequence as U+FFFD; NULL on OOM. */
static char *utf8_clean(const char *s)
{
    size_t n = strlen(s);
    if (oai_utf8_valid(s, n)) return strdup(s);
    char *out = malloc(n * 3 + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = 1;
        unsigned c = (unsigned char)s[i];
        if (c >= 0xC0 && c < 0xF8) k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (c < 0x80 || (i + k <= n && oai_utf8_valid(s + i, k))) {
            if (c < 0x80) k = 1;
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return out;
}

static bool add_clean_string(cJSON *o, const char *name, const char *s)
{
    char *c = utf8_clean(s ? s : "");
    bool ok = c && cJSON_AddStringToObject(o, name, c) != NULL;
    free(c);
    return ok;
}

static cJSON *usage_json(const struct engine_metrics *m)
{
    struct oai_usage u;
    oai_usage_from_metrics(&u, m);
    cJSON *j = cJSON_CreateObject(), *d;
    if (!j || !cJSON_AddNumberToObject(j, "prompt_tokens", u.prompt_tokens) ||
        !cJSON_AddNumberToObject(j, "completion_tokens", u.completion_tokens) ||
        !cJSON_AddNumberToObject(j, "total_tokens", u.prompt_tokens + u.completion_tokens) ||
        !(d = cJSON_AddObjectToObject(j, "prompt_tokens_details")) ||
        !cJSON_AddNumberToObject(d, "cached_tokens", u.cached_tokens)) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

cJSON *oai_tern_json(const struct engine_metrics *m, const char *request_id)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    bool ok = cJSON_AddStringToObject(j, "status", engine_status_name(m->status)) &&
              cJSON_AddStringToObject(j, "priority",
                                      m->priority == ENGINE_PRIO_BATCH ? "batch" : "interactive");
    struct { const char *k; double v; } f[] = {
        {"queue_s", m->queue_s}, {"prefill_s", m->prefill_s}, {"ttft_s", m->ttft_s},
        {"tpot_s", m->tpot_s}, {"decode_s", m->decode_s}, {"e2e_s", m->e2e_s},
        {"prompt_tokens", m->n_prompt}, {"cached_tokens", m->n_cached},
        {"computed_tokens", m->n_computed}, {"generated_tokens", m->n_generated},
        {"preemptions", m->n_preempted},
    };
    for (size_t i = 0; ok && i < sizeof f / sizeof f[0]; i++)
        ok = cJSON_AddNumberToObject(j, f[i].k, f[i].v) != NULL;
    if (ok && request_id) ok = add_clean_string(j, "request_id", request_id);
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* A token count from the peer: [0, 2^31) else 0 (casting an out-of-range
 * double is undefined behaviour). */
static int32_t count(const cJSON *o, const char *k)
{
    double v = num(o, k);
    return v > 0 && v < 2147483647.0 ? (int32_t)v : 0;
}

int oai_tern_parse(const cJSON *j, struct engine_metrics *m, char *request_id, size_t idlen)
{
    memset(m, 0, sizeof *m);
    if (request_id && idlen) request_id[0] = 0;
    if (!cJSON_IsObject(j)) return -1;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
    int s = cJSON_IsString(st) ? oai_finish_status(st->valuestring) : -1;
    m->status = s < 0 ? ENGINE_ERROR : (enum engine_status)s;
    if (cJSON_IsString(st) && strcmp(st->valuestring, "ok") == 0) m->status = ENGINE_OK;
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "priority");
    m->priority = cJSON_IsString(pr) && strcmp(pr->valuestring, "batch") == 0
                      ? ENGINE_PRIO_BATCH : ENGINE_PRIO_INTERACTIVE;
    m->queue_s = num(j, "queue_s");
    m->prefill_s = num(j, "prefill_s");
    m->ttft_s = num(j, "ttft_s");
    m->tpot_s = num(j, "tpot_s");
    m->decode_s = num(j, "decode_s");
    m->e2e_s = num(j, "e2e_s");
    m->n_prompt = count(j, "prompt_tokens");
    m->n_cached = count(j, "cached_tokens");
    m->n_computed = count(j, "computed_tokens");
    m->n_generated = count(j, "generated_tokens");
    m->n_preempted = count(j, "preemptions");
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(j, "request_id");
    if (request_id && idlen && cJSON_IsString(rid))
        snprintf(request_id, idlen, "%s", rid->valuestring);
    return 0;
}

/* The envelope shared by responses and chunks. */
static cJSON *envelope(const struct oai_resp_ctx *c, const char *object)
{
    cJSON *o = cJSON_CreateObject();
    if (!o || !add_clean_string(o, "id", c->id) ||
        !cJSON_AddStringToObject(o, "object", object) ||
        !cJSON_AddNumberToObject(o, "created", (double)c->created) ||
        !add_clean_string(o, "model", c->model)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static bool add_usage_tern(cJSON *o, const struct oai_resp_ctx *c, const struct engine_metrics *m)
{
    cJSON *u = usage_json(m);
    if (!u || !cJSON_AddItemToObject(o, "usage", u)) {
        cJSON_Delete(u);
        return false;
    }
    cJSON *t = oai_tern_json(m, c->request_id);
    if (!t || !cJSON_AddItemToObject(o, "tern", t)) {
        cJSON_Delete(t);
        return false;
    }
    return true;
}

static char *print_free(cJSON *o, bool ok)
{
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* choices[0] with its index, logprobs null and finish_reason (or null). */
static cJSON *add_choice(cJSON *o, const char *finish)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "choices"), *ch = cJSON_CreateObject();
    if (!arr || !ch || !cJSON_AddItemToArray(arr, ch)) {
        cJSON_Delete(ch);
        return NULL;
    }
    bool ok = cJSON_AddNumberToObject(ch, "index", 0) && cJSON_AddNullToObject(ch, "logprobs") &&
              (finish ? cJSON_AddStringToObject(ch, "finish_reason", finish) != NULL
                      : cJSON_AddNullToObject(ch, "finish_reason") != NULL);
    return ok ? ch : NULL;
}

/* Puts item (taken, may be NULL) under name in o, replacing a null. */
static bool put(cJSON *o, const char *name, cJSON *item)
{
    if (!item) return true;
    if (cJSON_GetObjectItemCaseSensitive(o, name)) return cJSON_ReplaceItemInObject(o, name, item);
    return cJSON_AddItemToObject(o, name, item);
}

char *oai_response_build(const struct oai_resp_ctx *c, const char *text,
                         const struct engine_metrics *m)
{
    return oai_response_build_lp(c, text, m, NULL, NULL);
}

char *oai_chunk_build(const struct oai_resp_ctx *c, bool role, const char *delta,
                      const char *finish, const struct engine_metrics *usage_m)
{
    return oai_chunk_build_lp(c, role, delta, finish, usage_m, NULL);
}

char *oai_response_build_lp(const struct oai_resp_ctx *c, const char *text,
                            const struct engine_metrics *m, struct cJSON *logprobs,
                            struct cJSON *prompt_logprobs)
{
    bool chat = c->kind == OAI_CHAT;
    cJSON *o = envelope(c, chat ? "chat.completion" : "text_completion");
    if (!o) return NULL;
    cJSON *ch = add_choice(o, oai_finish_reason(m->status));
    bool ok = ch != NULL;
    if (ok) {
        ok = put(ch, "logprobs", logprobs) && put(ch, "prompt_logprobs", prompt_logprobs);
        logprobs = prompt_logprobs = NULL;
    }
    if (ok && chat) {
        cJSON *msg = cJSON_AddObjectToObject(ch, "message");
        ok = msg && cJSON_AddStringToObject(msg, "role", "assistant") &&
             add_clean_string(msg, "content", text);
    } else if (ok) {
        ok = add_clean_string(ch, "text", text);
    }
    ok = ok && add_usage_tern(o, c, m);
    cJSON_Delete(logprobs);
    cJSON_Delete(prompt_logprobs);
    return print_free(o, ok);
}

char *oai_chunk_build_lp(const struct oai_resp_ctx *c, bool role, const char *delta,
                         const char *finish, const struct engine_metrics *usage_m,
                         struct cJSON *logprobs)
{
    bool chat = c->kind == OAI_CHAT;
    cJSON *o = envelope(c, chat ? "chat.completion.chunk" : "text_completion");
    if (!o) {
        cJSON_Delete(logprobs);
        return NULL;
    }
    bool ok = true;
    bool usage_only = usage_m && !finish && !delta && !role;
    if (usage_only) {
        cJSON_Delete(logprobs);
        ok = cJSON_AddArrayToObject(o, "choices") && add_usage_tern(o, c, usage_m);
        return print_free(o, ok);
    }
    cJSON *ch = add_choice(o, finish);
    ok = ch != NULL && put(ch, "logprobs", logprobs);
    if (!ch) cJSON_Delete(logprobs);
    if (ok && chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        ok = d && (!role || cJSON_AddStringToObject(d, "role", "assistant")) &&
             (!(delta || role) || add_clean_string(d, "content", delta ? delta : ""));
    } else if (ok) {
        ok = add_clean_string(ch, "text", delta ? delta : "");
    }
    if (ok && finish && usage_m) {
        cJSON *t = oai_tern_json(usage_m, c->request_id);
        ok = t && cJSON_AddItemToObject(o, "tern", t);
        if (!ok) cJSON_Delete(t);
    }
    return print_free(o, ok);
}

char *oai_error_build(const char *message, const char *type, const char *param,
                      const char *code)
{
    cJSON *o = cJSON_CreateObject(), *e = NULL;
    bool ok = o && (e = cJSON_AddObjectToObject(o, "error")) &&
              add_clean_string(e, "message", message) &&
              cJSON_AddStringToObject(e, "type", type ? type : "invalid_request_error") &&
              (param && param[0] ? add_clean_string(e, "param", param)
                                 : cJSON_AddNullToObject(e, "param") != NULL) &&
              (code ? cJSON_AddStringToObject(e, "code", code) != NULL
                    : cJSON_AddNullToObject(e, "code") != NULL);
    return print_free(o, ok);
}

/* ---- parse ------------------------------------------------------------------- */

static int take_str(const cJSON *o, const char *k, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) return -1;
    *out = strdup(v->valuestring);
    return *out ? 0 : -1;
}

static int parse_error(const cJSON *e, struct oai_parsed *p)
{
    p->is_error = true;
    if (cJSON_IsString(e)) { /* some servers send "error": "text" */
        p->error_message = strdup(e->valuestring);
        return p->error_message ? 0 : -1;
    }
    if (!cJSON_IsObject(e)) return -1;
    if (take_str(e, "message", &p->error_message) || take_str(e, "type", &p->error_type) ||
        take_str(e, "param", &p->error_param))
        return -1;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    if (cJSON_IsNumber(code)) { /* llama-server sends the HTTP status as a number */
        char b[32];
        double v = code->valuedouble;
        if (v > -1e9 && v < 1e9) snprintf(b, sizeof b, "%d", (int)v);
        else snprintf(b, sizeof b, "%g", v);
        p->error_code = strdup(b);
        return p->error_code ? 0 : -1;
    }
    return take_str(e, "code", &p->error_code);
}

static int parse_choice(const cJSON *ch, struct oai_parsed *p)
{
    if (!cJSON_IsObject(ch)) return -1;
    p->has_choice = true;
    if (take_str(ch, "finish_reason", &p->finish_reason)) return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(ch, "delta");
    if (!m) m = cJSON_GetObjectItemCaseSensitive(ch, "message");
    if (m) {
        if (!cJSON_IsObject(m)) return -1;
        return take_str(m, "role", &p->role) || take_str(m, "content", &p->text) ? -1 : 0;
    }
    return take_str(ch, "text", &p->text);
}

static int parse_usage(const cJSON *u, struct oai_parsed *p)
{
    if (!u || cJSON_IsNull(u)) return 0;
    if (!cJSON_IsObject(u)) return -1;
    p->has_usage = true;
    p->usage.prompt_tokens = count(u, "prompt_tokens");
    p->usage.completion_tokens = count(u, "completion_tokens");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens_details");
    if (cJSON_IsObject(d)) p->usage.cached_tokens = count(d, "cached_tokens");
    return 0;
}

int oai_response_parse(const char *json, size_t len, struct oai_parsed *out, char *err,
                       size_t errlen)
{
    memset(out, 0, sizeof *out);
    cJSON *o = cJSON_ParseWithLength(json, len);
    const char *why = NULL;
    if (!o) why = "not valid JSON";
    else if (!cJSON_IsObject(o)) why = "not a JSON object";
    if (why) goto fail;
    why = "a field has the wrong type";
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (e && !cJSON_IsNull(e) && parse_error(e, out) != 0) goto fail;
    if (take_str(o, "id", &out->id) || take_str(o, "object", &out->object) ||
        take_str(o, "model", &out->model))
        goto fail;
    const cJSON *chs = cJSON_GetObjectItemCaseSensitive(o, "choices");
    if (chs && !cJSON_IsNull(chs)) {
        if (!cJSON_IsArray(chs)) goto fail;
        if (chs->child && parse_choice(chs->child, out) != 0) goto fail;
    }
    if (parse_usage(cJSON_GetObjectItemCaseSensitive(o, "usage"), out) != 0) goto fail;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tern");
    if (t && !cJSON_IsNull(t)) {
        if (oai_tern_parse(t, &out->tern, out->request_id, sizeof out->request_id) != 0)
            goto fail;
        out->has_tern = true;
    }
    cJSON_Delete(o);
    return 0;
fail:
    snprintf(err, errlen, "response: %s", why);
    cJSON_Delete(o);
    oai_parsed_free(out);
    return -1;
}

void oai_parsed_free(struct oai_parsed *p)
{
    if (!p) return;
    free(p->id);
    free(p->object);
    free(p->model);
    free(p->role);
    free(p->text);
    free(p->finish_reason);
    free(p->error_message);
    free(p->error_type);
    free(p->error_param);
    free(p->error_code);
    memset(p, 0, sizeof *p);
}
