/* http_routes: the GET routes (/health, /ready, /metrics, /version,
 * /v1/models, /v1/tern/status, /v1/tern/cache). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_impl.h"
#include "tern_config.h"

static enum MHD_Result send_cjson(struct http_req *r, unsigned status, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    enum MHD_Result rc = http_send_json(r, status, s ? s : "{}", NULL);
    free(s);
    http_log_simple(r, status, NULL);
    return rc;
}

static enum MHD_Result health(struct http_req *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", "ok");
    return send_cjson(r, 200, j);
}

static enum MHD_Result ready(struct http_req *r)
{
    struct http_server *s = r->srv;
    const char *why = atomic_load(&s->draining) ? "shutting down"
                      : !atomic_load(&s->engine) ? "loading the model" : NULL;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", why ? why : "ready");
    if (!why) cJSON_AddStringToObject(j, "model", s->model_id);
    return send_cjson(r, why ? 503 : 200, j);
}

static enum MHD_Result metrics(struct http_req *r)
{
    struct http_server *s = r->srv;
    struct sse_buf b = {0};
    if (http_metrics_expose(s->metrics, atomic_load(&s->engine), s->model_id, s->auth, &b) != 0) {
        sse_buf_free(&b);
        return http_send_error(r, 500, "out of memory", NULL, NULL, NULL);
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
    sse_buf_free(&b);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    MHD_add_response_header(resp, "X-Request-Id", r->request_id);
    enum MHD_Result rc = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    http_metrics_status(s->metrics, 200);
    return rc;
}

static cJSON *model_json(struct http_server *s, struct engine *e)
{
    struct engine_info in;
    engine_info(e, &in);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "tern");
    cJSON_AddNumberToObject(m, "context_length", in.n_ctx);
    cJSON *t = cJSON_AddObjectToObject(m, "tern");
    cJSON_AddStringToObject(t, "name", in.model_name);
    cJSON_AddStringToObject(t, "arch", in.arch);
    cJSON_AddNumberToObject(t, "n_params", (double)in.n_params);
    cJSON_AddNumberToObject(t, "weight_bytes", (double)in.weight_bytes);
    cJSON_AddNumberToObject(t, "n_ctx_train", in.n_ctx_train);
    cJSON_AddNumberToObject(t, "kv_blocks", in.kv_blocks);
    cJSON_AddNumberToObject(t, "kv_block_tokens", in.kv_block_tokens);
    cJSON_AddNumberToObject(t, "kv_tokens", (double)in.kv_blocks * in.kv_block_tokens);
    cJSON_AddNumberToObject(t, "kv_bytes_per_token", (double)in.kv_bytes_per_token);
    cJSON_AddNumberToObject(t, "kv_bytes",
                            (double)in.kv_bytes_per_token * in.kv_blocks * in.kv_block_tokens);
    cJSON_AddStringToObject(t, "backend", in.backend.name);
    if (in.chat_template) cJSON_AddStringToObject(t, "chat_template", in.chat_template);
    return m;
}

static enum MHD_Result models(struct http_req *r)
{
    struct engine *e = atomic_load(&r->srv->engine);
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(j, "data");
    cJSON *m = model_json(r->srv, e);
    /* The caller's cap per request, so that a client (tern run --url) keeps
     * its default reply limit within it rather than be refused. */
    cJSON *t = cJSON_GetObjectItemCaseSensitive(m, "tern");
    if (t && r->tenant && r->tenant->max_tokens)
        cJSON_AddNumberToObject(t, "max_tokens_cap", r->tenant->max_tokens);
    cJSON_AddItemToArray(d, m);
    return send_cjson(r, 200, j);
}

/* The engine snapshot and the last requests' phases: what `tern chat --attach` shows. */
static enum MHD_Result status(struct http_req *r)
{
    struct http_server *s = r->srv;
    struct engine *e = atomic_load(&s->engine);
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", s->model_id);
    cJSON_AddBoolToObject(j, "draining", atomic_load(&s->draining));
    cJSON_AddNumberToObject(j, "active_http", atomic_load(&s->active));
    cJSON *snap = engine_snapshot_json(e);
    if (snap) cJSON_AddItemToObject(j, "engine", snap);
    cJSON *rec = http_metrics_recent_json(s->metrics);
    if (rec) cJSON_AddItemToObject(j, "recent", rec);
    cJSON_AddItemToObject(j, "model_info", model_json(s, e));
    return send_cjson(r, 200, j);
}

/* The prompt cache (issue 39): the recent prefixes held in the KV pool and
 * the disk entries, by hash and counts; their opening text only when the
 * server was started with --cache-text (prompts are private by default). */
static enum MHD_Result cache(struct http_req *r)
{
    struct http_server *s = r->srv;
    struct engine *e = atomic_load(&s->engine);
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    enum { MAX = 256 };
    struct engine_cache_entry *ce = malloc(MAX * sizeof *ce);
    if (!ce) return http_send_error(r, 500, "out of memory", NULL, NULL, NULL);
    const bool text = s->cfg.cache_text;
    int n = engine_cache_list(e, ce, MAX, text);
    struct engine_stats st;
    engine_snapshot(e, &st);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON_AddBoolToObject(j, "text_shown", text);
    cJSON *mem = cJSON_AddObjectToObject(j, "memory");
    cJSON_AddNumberToObject(mem, "block_tokens", st.kv_block_tokens);
    cJSON_AddNumberToObject(mem, "cached_blocks", st.kv_cached);
    cJSON_AddNumberToObject(mem, "used_blocks", st.kv_used);
    cJSON_AddNumberToObject(mem, "hit_tokens", (double)st.prefix_hit_tokens);
    cJSON_AddNumberToObject(mem, "query_tokens", (double)st.prefix_query_tokens);
    cJSON *arr = cJSON_AddArrayToObject(j, "data");
    uint64_t disk_bytes = 0;
    int n_disk = 0;
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        char h[24];
        snprintf(h, sizeof h, "%016llx", (unsigned long long)ce[i].hash);
        cJSON_AddStringToObject(o, "hash", h);
        cJSON_AddStringToObject(o, "where", ce[i].on_disk ? "disk" : "memory");
        cJSON_AddNumberToObject(o, "tokens", ce[i].tokens);
        cJSON_AddNumberToObject(o, "bytes", (double)ce[i].bytes);
        cJSON_AddNumberToObject(o, "hits", ce[i].hits);
        cJSON_AddNumberToObject(o, "age_s", ce[i].age_s);
        cJSON_AddNumberToObject(o, "idle_s", ce[i].idle_s);
        cJSON_AddStringToObject(o, "made_by", ce[i].made_by);
        cJSON_AddBoolToObject(o, "usable", ce[i].usable);
        if (text) cJSON_AddStringToObject(o, "text", ce[i].text);
        cJSON_AddItemToArray(arr, o);
        if (ce[i].on_disk) {
            disk_bytes += ce[i].bytes;
            n_disk++;
        }
    }
    cJSON_AddNumberToObject(j, "disk_entries", n_disk);
    cJSON_AddNumberToObject(j, "disk_bytes", (double)disk_bytes);
    free(ce);
    return send_cjson(r, 200, j);
}

enum MHD_Result http_route_cache_save(struct http_req *r)
{
    struct engine *e = atomic_load(&r->srv->engine);
    if (!e) return http_send_error(r, 503, "the model is loading", NULL, "not_ready", "1");
    char err[256];
    int n = engine_cache_save(e, err, sizeof err);
    if (n < 0) return http_send_error(r, 409, err, NULL, "no_disk_cache", NULL);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "saved", n);
    return send_cjson(r, 200, j);
}

/* The server's own version, in vLLM's shape (no key needed, as /health):
 * what a bench's environment record asks a server for. */
static enum MHD_Result version(struct http_req *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", TERN_VERSION);
    cJSON_AddStringToObject(j, "engine", "tern");
    return send_cjson(r, 200, j);
}

enum MHD_Result http_route_get(struct http_req *r)
{
    const char *u = r->url;
    if (strcmp(u, "/health") == 0) return health(r);
    if (strcmp(u, "/ready") == 0) return ready(r);
    if (strcmp(u, "/metrics") == 0) return metrics(r);
    if (strcmp(u, "/version") == 0) return version(r);
    if (strcmp(u, "/v1/models") == 0) return models(r);
    if (strcmp(u, "/v1/tern/status") == 0) return status(r);
    if (strcmp(u, "/v1/tern/cache") == 0) return cache(r);
    if (strncmp(u, "/v1/models/", 11) == 0) {
        if (strcmp(u + 11, r->srv->model_id) == 0) return models(r);
        return http_send_error(r, 404, "unknown model", "model", "model_not_found", NULL);
    }
    return http_send_error(r, 404, "unknown route", NULL, "not_found", NULL);
}
