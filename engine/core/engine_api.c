/* engine_api: the public engine API over the engine_ops seam. engine_open
 * chooses the implementation once (remote when the config names URLs, else
 * local); every other call dispatches through e->ops. The snapshot JSON is
 * built here from engine_snapshot, so both implementations share its shape. */
#include "engine.h"

#include <stdio.h>

#include <cjson/cJSON.h>

#include "engine_ops.h"

struct engine *engine_open(const struct engine_config *c, char *err, size_t errlen)
{
    if (c->remote.n_urls > 0) return engine_remote_new(c, err, errlen);
    return engine_local_new(c, err, errlen);
}

void engine_close(struct engine *e)
{
    if (e) e->ops->close(e);
}

uint64_t engine_submit(struct engine *e, const struct engine_request *r, enum engine_status *why,
                       char *err, size_t errlen)
{
    return e->ops->submit(e, r, why, err, errlen);
}

int engine_cancel(struct engine *e, uint64_t id) { return e->ops->cancel(e, id); }
void engine_pause(struct engine *e, bool paused) { e->ops->pause(e, paused); }

int engine_poll_events(struct engine *e, struct engine_event *out, int max)
{
    return e->ops->poll_events(e, out, max);
}

int engine_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max)
{
    return e->ops->poll_request(e, id, out, max);
}

int engine_event_fd(const struct engine *e) { return e->ops->event_fd(e); }

bool engine_wait_events(struct engine *e, uint64_t id, double timeout_s)
{
    return e->ops->wait_events(e, id, timeout_s);
}

void engine_snapshot(struct engine *e, struct engine_stats *out) { e->ops->snapshot(e, out); }

int engine_requests(struct engine *e, struct engine_req_info *out, int max)
{
    return e->ops->requests(e, out, max);
}

void engine_info(const struct engine *e, struct engine_info *out) { e->ops->info(e, out); }

int engine_cache_list(struct engine *e, struct engine_cache_entry *out, int max, bool with_text)
{
    return e->ops->cache_list ? e->ops->cache_list(e, out, max, with_text) : 0;
}

int engine_cache_save(struct engine *e, char *err, size_t errlen)
{
    if (!e->ops->cache_save) {
        snprintf(err, errlen, "this engine has no disk prompt cache");
        return -1;
    }
    return e->ops->cache_save(e, err, errlen);
}

int64_t engine_count_tokens(const struct engine *e, const char *text, size_t len, char *err,
                            size_t errlen)
{
    return e->ops->count_tokens(e, text, len, err, errlen);
}

int64_t engine_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
                                 int32_t n, char *err, size_t errlen)
{
    return e->ops->count_chat_tokens(e, msgs, n, err, errlen);
}

int engine_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap)
{
    return e->ops->token_bytes(e, id, out, cap);
}

/* ---- snapshot as JSON ------------------------------------------------------------- */

static void hist_json(cJSON *o, const char *name, const struct engine_hist *h)
{
    cJSON *j = cJSON_AddObjectToObject(o, name);
    if (!j) return;
    cJSON_AddNumberToObject(j, "count", (double)h->count);
    cJSON_AddNumberToObject(j, "mean", h->mean);
    cJSON_AddNumberToObject(j, "p50", h->p50);
    cJSON_AddNumberToObject(j, "p90", h->p90);
    cJSON_AddNumberToObject(j, "p99", h->p99);
    cJSON_AddNumberToObject(j, "max", h->max);
}

/* What the engine does not know is null in the JSON, never 0. */
static void null_field(cJSON *o, const char *name)
{
    if (cJSON_GetObjectItemCaseSensitive(o, name))
        cJSON_ReplaceItemInObjectCaseSensitive(o, name, cJSON_CreateNull());
}

static void mark_unknown(cJSON *o, const struct engine_stats *s)
{
    static const struct { unsigned bit; const char *names[8]; } map[] = {
        {ENGINE_STAT_RUNNING, {"running"}},
        {ENGINE_STAT_WAITING, {"waiting"}},
        {ENGINE_STAT_KV_USAGE, {"kv_usage"}},
        {ENGINE_STAT_PREEMPT, {"preemptions"}},
        {ENGINE_STAT_STEPS, {"steps", "step_s", "step_tokens", "busy_s", "backend_s",
                             "busy_cpu_s", "backend_cpu_s", "sched_overhead"}},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!engine_stat_known(s, map[i].bit))
            for (int k = 0; k < 8 && map[i].names[k]; k++) null_field(o, map[i].names[k]);
    if (!engine_stat_known(s, ENGINE_STAT_KV_BLOCKS) || !engine_stat_known(s, ENGINE_STAT_PREFIX))
        cJSON_ReplaceItemInObjectCaseSensitive(o, "kv", cJSON_CreateNull());
}

/* A tern server's tenants and recent requests (absent elsewhere). */
static void add_server_recent(cJSON *j, const struct engine_server_stats *v)
{
    if (v->n_tenants > 0) {
        cJSON *a = cJSON_AddArrayToObject(j, "tenants");
        for (int32_t i = 0; a && i < v->n_tenants; i++) {
            cJSON *t = cJSON_CreateObject();
            if (!t || !cJSON_AddItemToArray(a, t)) break;
            cJSON_AddStringToObject(t, "name", v->tenants[i].name);
            cJSON_AddNumberToObject(t, "requests", v->tenants[i].requests);
            cJSON_AddNumberToObject(t, "tokens", (double)v->tenants[i].tokens);
            cJSON_AddNumberToObject(t, "ttft_p50_s", v->tenants[i].ttft_p50_s);
        }
    }
    if (v->n_recent > 0) {
        cJSON *a = cJSON_AddArrayToObject(j, "recent");
        for (int32_t i = 0; a && i < v->n_recent; i++) {
            const struct engine_server_req *q = &v->recent[i];
            cJSON *r = cJSON_CreateObject();
            if (!r || !cJSON_AddItemToArray(a, r)) break;
            cJSON_AddStringToObject(r, "tenant", q->tenant);
            cJSON_AddStringToObject(r, "request_id", q->request_id);
            cJSON_AddStringToObject(r, "kind", q->route);
            cJSON_AddStringToObject(r, "status", q->status);
            cJSON_AddNumberToObject(r, "queue_s", q->queue_s);
            cJSON_AddNumberToObject(r, "ttft_s", q->ttft_s);
            cJSON_AddNumberToObject(r, "e2e_s", q->e2e_s);
            cJSON_AddNumberToObject(r, "prompt_tokens", q->n_prompt);
            cJSON_AddNumberToObject(r, "cached_tokens", q->n_cached);
            cJSON_AddNumberToObject(r, "generated_tokens", q->n_generated);
        }
    }
}

static void add_server(cJSON *o, const struct engine_stats *st)
{
    const struct engine_server_stats *v = &st->server;
    cJSON *j = cJSON_AddObjectToObject(o, "server");
    if (!j) return;
    cJSON_AddStringToObject(j, "source", v->source);
    cJSON_AddNumberToObject(j, "scrapes", (double)v->scrapes);
    cJSON_AddNumberToObject(j, "scrape_errors", (double)v->scrape_errors);
    cJSON_AddNumberToObject(j, "scrape_age_s", v->scrape_age_s);
    cJSON_AddStringToObject(j, "scrape_error", v->scrape_error);
    hist_json(j, "ttft_s", &v->ttft);
    hist_json(j, "itl_s", &v->itl);
    hist_json(j, "e2e_s", &v->e2e);
    hist_json(j, "queue_s", &v->queue);
    cJSON_AddNumberToObject(j, "gen_tok_s", v->gen_tok_s);
    static const struct { unsigned bit; const char *name; } srv[] = {
        {ENGINE_STAT_SRV_TTFT, "ttft_s"}, {ENGINE_STAT_SRV_ITL, "itl_s"},
        {ENGINE_STAT_SRV_E2E, "e2e_s"},   {ENGINE_STAT_SRV_QUEUE, "queue_s"},
        {ENGINE_STAT_SRV_GEN, "gen_tok_s"}};
    for (size_t i = 0; i < sizeof srv / sizeof srv[0]; i++)
        if (!engine_stat_known(st, srv[i].bit)) null_field(j, srv[i].name);
    cJSON_AddNumberToObject(j, "held", v->held);
    add_server_recent(j, v);
    cJSON *eps = cJSON_AddArrayToObject(j, "endpoints");
    for (int32_t i = 0; eps && i < v->n_endpoints; i++) {
        const struct engine_endpoint *p = &v->endpoint[i];
        cJSON *q = cJSON_CreateObject();
        if (!q) break;
        cJSON_AddStringToObject(q, "url", p->url);
        cJSON_AddBoolToObject(q, "healthy", p->healthy);
        cJSON_AddNumberToObject(q, "health_latency_s", p->health_latency_s);
        cJSON_AddNumberToObject(q, "outstanding", p->outstanding);
        cJSON_AddNumberToObject(q, "requests", (double)p->requests);
        cJSON_AddNumberToObject(q, "errors", (double)p->errors);
        cJSON_AddStringToObject(q, "last_error", p->last_error);
        cJSON_AddItemToArray(eps, q);
    }
}

struct cJSON *engine_snapshot_json(struct engine *e)
{
    struct engine_stats s;
    engine_snapshot(e, &s);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "uptime_s", s.uptime_s);
    cJSON *kv = cJSON_AddObjectToObject(o, "kv");
    cJSON_AddNumberToObject(kv, "block_tokens", s.kv_block_tokens);
    cJSON_AddNumberToObject(kv, "total", s.kv_total);
    cJSON_AddNumberToObject(kv, "used", s.kv_used);
    cJSON_AddNumberToObject(kv, "cached", s.kv_cached);
    cJSON_AddNumberToObject(kv, "free", s.kv_free);
    cJSON_AddNumberToObject(kv, "prefix_query_tokens", (double)s.prefix_query_tokens);
    cJSON_AddNumberToObject(kv, "prefix_hit_tokens", (double)s.prefix_hit_tokens);
    cJSON_AddNumberToObject(kv, "prefix_hit_rate", s.prefix_hit_rate);
    cJSON_AddNumberToObject(kv, "evictions", (double)s.evictions);
    cJSON_AddNumberToObject(o, "preemptions", (double)s.preemptions);
    cJSON_AddNumberToObject(o, "running", s.running);
    cJSON_AddBoolToObject(o, "paused", s.paused);
    cJSON_AddNumberToObject(o, "waiting", s.waiting);
    cJSON_AddNumberToObject(o, "submitted", (double)s.submitted);
    cJSON *fin = cJSON_AddObjectToObject(o, "finished");
    for (int i = 0; i < ENGINE_N_STATUS; i++)
        cJSON_AddNumberToObject(fin, engine_status_name((enum engine_status)i),
                                (double)s.finished[i]);
    hist_json(o, "queue_s", &s.queue);
    hist_json(o, "ttft_s", &s.ttft);
    hist_json(o, "tpot_s", &s.tpot);
    hist_json(o, "itl_s", &s.itl);
    hist_json(o, "prefill_s", &s.prefill);
    hist_json(o, "e2e_s", &s.e2e);
    hist_json(o, "step_s", &s.step_s);
    hist_json(o, "step_tokens", &s.step_tokens);
    cJSON_AddNumberToObject(o, "steps", (double)s.steps);
    cJSON_AddNumberToObject(o, "busy_s", s.busy_s);
    cJSON_AddNumberToObject(o, "backend_s", s.backend_s);
    cJSON_AddNumberToObject(o, "busy_cpu_s", s.busy_cpu_s);
    cJSON_AddNumberToObject(o, "backend_cpu_s", s.backend_cpu_s);
    cJSON_AddNumberToObject(o, "sched_overhead", s.sched_overhead);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)s.prompt_tokens);
    cJSON_AddNumberToObject(o, "cached_tokens", (double)s.cached_tokens);
    cJSON_AddNumberToObject(o, "generated_tokens", (double)s.generated_tokens);
    cJSON_AddNumberToObject(o, "prompt_tok_s", s.prompt_tok_s);
    cJSON_AddNumberToObject(o, "gen_tok_s", s.gen_tok_s);
    cJSON_AddNumberToObject(o, "slo_ttft_s", s.slo_ttft_s);
    cJSON_AddNumberToObject(o, "slo_tpot_s", s.slo_tpot_s);
    cJSON_AddNumberToObject(o, "slo_met", (double)s.slo_met);
    cJSON_AddNumberToObject(o, "goodput_rps", s.goodput_rps);
    cJSON_AddNumberToObject(o, "step_tokens_budget", s.step_tokens_budget);
    cJSON_AddNumberToObject(o, "max_running", s.max_running);
    cJSON_AddNumberToObject(o, "max_queue", s.max_queue);
    cJSON_AddNumberToObject(o, "n_ctx", s.n_ctx);
    cJSON *be = cJSON_AddObjectToObject(o, "backend");
    cJSON_AddStringToObject(be, "name", s.backend.name ? s.backend.name : "");
    cJSON_AddStringToObject(be, "device", s.backend.device);
    cJSON_AddNumberToObject(be, "weight_bytes", (double)s.backend.weight_bytes);
    cJSON_AddNumberToObject(be, "kv_bytes", (double)s.backend.kv_bytes);
    cJSON_AddStringToObject(be, "note", s.backend.note);
    cJSON_AddNumberToObject(o, "kv_usage", s.kv_usage);
    mark_unknown(o, &s);
    if (s.server.remote) add_server(o, &s);
    return o;
}

