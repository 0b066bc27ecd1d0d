/* store_json: stored rows as JSON objects (history export, --json output).
 * Times are unix seconds and durations seconds, as in the database, so an
 * export holds exactly what is stored; unknown values are null. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "store.h"

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* cJSON prints 15 significant digits when they compare equal within an
 * epsilon, which moves a timestamp by microseconds; an export must hold the
 * stored value exactly, so numbers are printed with the fewest digits that
 * read back to the same double. */
static void add_num(cJSON *o, const char *k, double v)
{
    if (!(v >= 0) || !isfinite(v)) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(o, k, buf);
}

/* A stored JSON text parsed back into the tree (kept as a string if it is
 * not valid JSON, so nothing is lost). */
static void add_json(cJSON *o, const char *k, const char *text)
{
    cJSON *v = text ? cJSON_Parse(text) : NULL;
    if (v)
        cJSON_AddItemToObject(o, k, v);
    else
        add_str(o, k, text);
}

cJSON *store_request_json(const struct store_request_info *q)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)q->id);
    add_num(o, "created", q->created);
    add_str(o, "model", q->model);
    add_str(o, "model_file", q->model_file);
    add_str(o, "model_hash", q->model_hash);
    add_str(o, "backend", q->backend);
    add_json(o, "params", q->params_json);
    add_str(o, "status", q->status);
    add_num(o, "queue_s", q->queue_s);
    add_num(o, "prefill_s", q->prefill_s);
    add_num(o, "ttft_s", q->ttft_s);
    add_num(o, "tpot_s", q->tpot_s);
    add_num(o, "decode_s", q->decode_s);
    add_num(o, "e2e_s", q->e2e_s);
    add_num(o, "prompt_tokens", (double)q->prompt_tokens);
    add_num(o, "cached_tokens", (double)q->cached_tokens);
    add_num(o, "generated_tokens", (double)q->generated_tokens);
    return o;
}

static cJSON *message_json(const struct store_message_info *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "id", (double)m->id);
    add_str(o, "role", m->role);
    add_str(o, "text", m->text);
    add_str(o, "status", m->status);
    add_str(o, "error", m->error);
    add_num(o, "n_tokens", (double)m->n_tokens);
    add_num(o, "created", m->created);
    add_num(o, "updated", m->updated);
    if (m->req)
        cJSON_AddItemToObject(o, "request", store_request_json(m->req));
    else
        cJSON_AddNullToObject(o, "request");
    return o;
}

cJSON *store_transcript_json(const struct store_transcript *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *msgs = cJSON_CreateArray();
    if (!o || !msgs) {
        cJSON_Delete(o);
        cJSON_Delete(msgs);
        return NULL;
    }
    const struct store_session_info *s = &t->session;
    cJSON_AddNumberToObject(o, "id", (double)s->id);
    add_str(o, "kind", s->kind);
    add_str(o, "title", s->title);
    add_str(o, "model", s->model);
    add_json(o, "params", s->params_json);
    add_num(o, "created", s->created);
    add_num(o, "updated", s->updated);
    for (size_t i = 0; i < t->n; i++) cJSON_AddItemToArray(msgs, message_json(&t->msgs[i]));
    cJSON_AddItemToObject(o, "messages", msgs);
    return o;
}

cJSON *store_pcts_json(const struct store_pcts *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    double v[4] = {p->p50, p->p90, p->p99, p->max};
    const char *k[4] = {"p50", "p90", "p99", "max"};
    for (int i = 0; i < 4; i++) {
        if (isfinite(v[i]))
            cJSON_AddNumberToObject(o, k[i], v[i]);
        else
            cJSON_AddNullToObject(o, k[i]);
    }
    return o;
}
