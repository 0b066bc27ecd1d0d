/* remote_parse: readers of /v1/models, /props, llama-server timings and
 * tern serve's /v1/tern/status (see remote_parse.h). Every number from the
 * server is range-checked before it becomes an integer (a cast of an
 * out-of-range double is undefined behaviour in C). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "remote_parse.h"

/* A count from the server: [0, 1e9) or 0. */
static int32_t count_of(double v)
{
    return v >= 0 && v < 1e9 ? (int32_t)v : 0;
}

static uint64_t count64_of(double v)
{
    return v >= 0 && v < 1.8e19 ? (uint64_t)v : 0;
}

static int32_t int_field(const cJSON *o, const char *k)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? count_of(v->valuedouble) : 0;
}

/* Untrusted text for the terminal: printable ASCII only, bounded. */
static void copy_jstr(char *dst, size_t n, const cJSON *o, const char *k)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    size_t i = 0;
    for (const char *c = cJSON_IsString(v) ? v->valuestring : ""; *c && i + 1 < n; c++)
        dst[i++] = (*c >= 32 && *c < 127) ? *c : '?';
    dst[i] = 0;
}

int remote_parse_models(const char *body, size_t len, struct remote_models *out)
{
    memset(out, 0, sizeof *out);
    cJSON *j = cJSON_ParseWithLength(body ? body : "", body ? len : 0);
    if (!j) return -1;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *m0 = cJSON_IsArray(data) ? cJSON_GetArrayItem(data, 0) : NULL;
    const cJSON *id = m0 ? cJSON_GetObjectItemCaseSensitive(m0, "id") : NULL;
    if (cJSON_IsString(id)) out->id = strdup(id->valuestring);
    copy_jstr(out->owned_by, sizeof out->owned_by, m0, "owned_by");
    /* tern serve's context_length, vLLM's max_model_len, llama-server's
     * meta.n_ctx_train (the training context; /props has the one in force) */
    int32_t n = int_field(m0, "context_length");
    if (!n) n = int_field(m0, "max_model_len");
    if (!n) n = int_field(m0 ? cJSON_GetObjectItemCaseSensitive(m0, "meta") : NULL, "n_ctx_train");
    out->n_ctx = n;
    out->max_tokens_cap = int_field(m0 ? cJSON_GetObjectItemCaseSensitive(m0, "tern") : NULL,
                                    "max_tokens_cap");
    cJSON_Delete(j);
    return 0;
}

int32_t remote_parse_props_ctx(const char *body, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(body ? body : "", body ? len : 0);
    int32_t n = int_field(j ? cJSON_GetObjectItemCaseSensitive(j, "default_generation_settings")
                            : NULL, "n_ctx");
    if (!n) n = int_field(j, "n_ctx");
    cJSON_Delete(j);
    return n;
}

/* A duration in ms from the server: finite and >= 0, else 0. */
static double ms_of(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0
               ? v->valuedouble / 1000.0
               : 0;
}

/* "timings": {cache_n, prompt_n, prompt_ms, predicted_n, predicted_ms}. */
bool remote_parse_timings(const char *data, size_t len, struct engine_metrics *m)
{
    cJSON *j = cJSON_ParseWithLength(data ? data : "", data ? len : 0);
    const cJSON *t = j ? cJSON_GetObjectItemCaseSensitive(j, "timings") : NULL;
    bool has = cJSON_IsObject(t);
    if (has) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(t, "cache_n");
        const cJSON *pn = cJSON_GetObjectItemCaseSensitive(t, "prompt_n");
        const cJSON *pm = cJSON_GetObjectItemCaseSensitive(t, "prompt_ms");
        const cJSON *dn = cJSON_GetObjectItemCaseSensitive(t, "predicted_n");
        const cJSON *dm = cJSON_GetObjectItemCaseSensitive(t, "predicted_ms");
        if (cJSON_IsNumber(c)) m->n_cached = count_of(c->valuedouble);
        if (cJSON_IsNumber(pn)) m->n_computed = count_of(pn->valuedouble);
        m->server.known = true;
        if (cJSON_IsNumber(pm)) m->server.prefill_s = ms_of(pm);
        if (cJSON_IsNumber(dm)) m->server.decode_s = ms_of(dm);
        if (cJSON_IsNumber(dn) && dn->valuedouble > 1 && cJSON_IsNumber(dm))
            m->server.tpot_s = ms_of(dm) / dn->valuedouble;
    }
    cJSON_Delete(j);
    return has;
}

static double jnum(const cJSON *o, const char *k, bool *ok)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    if (!cJSON_IsNumber(v)) {
        *ok = false;
        return 0;
    }
    return v->valuedouble;
}

static void jhist(const cJSON *o, const char *k, struct engine_hist *h, bool *ok)
{
    const cJSON *j = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
    h->count = count64_of(jnum(j, "count", ok));
    h->mean = jnum(j, "mean", ok);
    h->p50 = jnum(j, "p50", ok);
    h->p90 = jnum(j, "p90", ok);
    h->p99 = jnum(j, "p99", ok);
    h->max = jnum(j, "max", ok);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The tenants among the recent requests: counts, tokens, median TTFT. */
static void tenants_of(const cJSON *rec, struct engine_server_stats *sv)
{
    double ttft[ENGINE_SERVER_TENANTS][64];
    int nt[ENGINE_SERVER_TENANTS] = {0};
    const cJSON *r;
    cJSON_ArrayForEach(r, rec) {
        if (!cJSON_IsObject(r)) continue;
        char name[32];
        copy_jstr(name, sizeof name, r, "tenant");
        int k = 0;
        while (k < sv->n_tenants && strcmp(sv->tenants[k].name, name)) k++;
        if (k == sv->n_tenants) {
            if (k == ENGINE_SERVER_TENANTS) continue;
            snprintf(sv->tenants[k].name, sizeof sv->tenants[k].name, "%s", name);
            sv->n_tenants++;
        }
        bool ok = true;
        sv->tenants[k].requests++;
        sv->tenants[k].tokens += count_of(jnum(r, "prompt_tokens", &ok)) +
                                 count_of(jnum(r, "generated_tokens", &ok));
        double t = jnum(r, "ttft_s", &ok);
        if (ok && t > 0 && nt[k] < 64) ttft[k][nt[k]++] = t;
    }
    for (int k = 0; k < sv->n_tenants; k++) {
        qsort(ttft[k], (size_t)nt[k], sizeof ttft[k][0], cmp_double);
        sv->tenants[k].ttft_p50_s = nt[k] ? ttft[k][nt[k] / 2] : 0;
    }
}

/* "recent": newest first, as the server lists them. */
static void recent_of(const cJSON *j, struct engine_server_stats *sv)
{
    const cJSON *rec = cJSON_GetObjectItemCaseSensitive(j, "recent"), *r;
    if (!cJSON_IsArray(rec)) return;
    cJSON_ArrayForEach(r, rec) {
        if (sv->n_recent == ENGINE_SERVER_RECENT) break;
        if (!cJSON_IsObject(r)) continue;
        struct engine_server_req *q = &sv->recent[sv->n_recent++];
        bool ok = true;
        char route[48];
        copy_jstr(q->tenant, sizeof q->tenant, r, "tenant");
        copy_jstr(q->request_id, sizeof q->request_id, r, "request_id");
        copy_jstr(q->status, sizeof q->status, r, "status");
        copy_jstr(route, sizeof route, r, "route");
        snprintf(q->route, sizeof q->route, "%s", strstr(route, "chat") ? "chat" : "cmpl");
        q->queue_s = jnum(r, "queue_s", &ok);
        q->ttft_s = jnum(r, "ttft_s", &ok);
        q->e2e_s = jnum(r, "e2e_s", &ok);
        q->n_prompt = count_of(jnum(r, "prompt_tokens", &ok));
        q->n_cached = count_of(jnum(r, "cached_tokens", &ok));
        q->n_generated = count_of(jnum(r, "generated_tokens", &ok));
    }
    tenants_of(rec, sv);
}

/* "engine" is the server's engine_snapshot_json, so the KV blocks and step
 * figures shown are exactly the server's own. */
int remote_parse_status(const char *body, size_t len, struct engine_stats *t)
{
    memset(t, 0, sizeof *t);
    cJSON *j = cJSON_ParseWithLength(body ? body : "", body ? len : 0);
    const cJSON *e = j ? cJSON_GetObjectItemCaseSensitive(j, "engine") : NULL;
    const cJSON *kv = e ? cJSON_GetObjectItemCaseSensitive(e, "kv") : NULL;
    bool ok = e && kv;
    t->kv_block_tokens = count_of(jnum(kv, "block_tokens", &ok));
    t->kv_total = count_of(jnum(kv, "total", &ok));
    t->kv_used = count_of(jnum(kv, "used", &ok));
    t->kv_cached = count_of(jnum(kv, "cached", &ok));
    t->kv_free = count_of(jnum(kv, "free", &ok));
    t->steps = count64_of(jnum(e, "steps", &ok));
    t->busy_s = jnum(e, "busy_s", &ok);
    t->backend_s = jnum(e, "backend_s", &ok);
    t->sched_overhead = jnum(e, "sched_overhead", &ok);
    t->goodput_rps = jnum(e, "goodput_rps", &ok);
    jhist(e, "step_s", &t->step_s, &ok);
    jhist(e, "step_tokens", &t->step_tokens, &ok);
    if (ok) recent_of(j, &t->server);
    cJSON_Delete(j);
    return ok ? 0 : -1;
}
