/* http_metrics: Prometheus exposition of the engine snapshot and the HTTP
 * layer's per-request histograms (vLLM names and buckets, so vLLM's Grafana
 * dashboards work unchanged), and the recent-requests ring. */
#include "http_metrics.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_auth.h"
#include "route.h"
#include "sse.h"

/* vLLM's bucket boundaries (vllm/v1/metrics/loggers.py). */
static const double ttft_b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                                640.0, 2560.0};
static const double itl_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                               0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double lat_b[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
                               7680.0};
#define NB(a) (sizeof a / sizeof a[0])
#define MAX_B 24

struct hist {
    const char *name, *help;
    const double *b;
    size_t nb;
    uint64_t counts[MAX_B + 1]; /* per bucket, last = +Inf */
    uint64_t count;
    double sum;
};

enum { H_TTFT, H_ITL, H_TPOT, H_E2E, H_QUEUE, H_PREFILL, H_DECODE, N_HIST };

struct recent {
    char request_id[129], tenant[64], route[32];
    struct engine_metrics m;
    bool disconnected;
    bool used;
};

#define N_CODES 16
#define N_REASONS 16

struct http_metrics {
    pthread_mutex_t mu;
    struct hist h[N_HIST];
    uint64_t finished[ENGINE_N_STATUS];
    uint64_t prompt_tokens, generation_tokens, disconnects;
    struct { int code; uint64_t n; } codes[N_CODES];
    struct { char reason[32]; uint64_t n; } reasons[N_REASONS];
    struct recent ring[HTTP_RECENT];
    size_t ring_next;
};

int http_metrics_open(struct http_metrics **out)
{
    struct http_metrics *m = calloc(1, sizeof *m);
    *out = m;
    if (!m) return -1;
    pthread_mutex_init(&m->mu, NULL);
    struct { const char *n, *h; const double *b; size_t nb; } d[N_HIST] = {
        {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
         ttft_b, NB(ttft_b)},
        {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
         itl_b, NB(itl_b)},
        {"vllm:request_time_per_output_token_seconds",
         "Histogram of time_per_output_token_seconds per request.", itl_b, NB(itl_b)},
        {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
         lat_b, NB(lat_b)},
        {"vllm:request_queue_time_seconds",
         "Histogram of time spent in WAITING phase for request.", lat_b, NB(lat_b)},
        {"vllm:request_prefill_time_seconds",
         "Histogram of time spent in PREFILL phase for request.", lat_b, NB(lat_b)},
        {"vllm:request_decode_time_seconds",
         "Histogram of time spent in DECODE phase for request.", lat_b, NB(lat_b)},
    };
    for (int i = 0; i < N_HIST; i++) {
        m->h[i].name = d[i].n;
        m->h[i].help = d[i].h;
        m->h[i].b = d[i].b;
        m->h[i].nb = d[i].nb;
    }
    return 0;
}

void http_metrics_close(struct http_metrics *m)
{
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(struct hist *h, double v)
{
    size_t i = 0;
    while (i < h->nb && v > h->b[i]) i++;
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

void http_metrics_status(struct http_metrics *hm, int code)
{
    pthread_mutex_lock(&hm->mu);
    for (int i = 0; i < N_CODES; i++) {
        if (hm->codes[i].code == code || hm->codes[i].code == 0) {
            hm->codes[i].code = code;
            hm->codes[i].n++;
            break;
        }
    }
    pthread_mutex_unlock(&hm->mu);
}

void http_metrics_reject(struct http_metrics *hm, const char *reason)
{
    pthread_mutex_lock(&hm->mu);
    for (int i = 0; i < N_REASONS; i++) {
        if (!hm->reasons[i].reason[0] || strcmp(hm->reasons[i].reason, reason) == 0) {
            snprintf(hm->reasons[i].reason, sizeof hm->reasons[i].reason, "%s", reason);
            hm->reasons[i].n++;
            break;
        }
    }
    pthread_mutex_unlock(&hm->mu);
}

void http_metrics_finish(struct http_metrics *hm, const struct engine_metrics *m,
                         const char *request_id, const char *tenant, const char *route,
                         bool disconnected)
{
    pthread_mutex_lock(&hm->mu);
    hm->finished[m->status < ENGINE_N_STATUS ? m->status : ENGINE_ERROR]++;
    hm->prompt_tokens += (uint64_t)m->n_prompt;
    hm->generation_tokens += (uint64_t)m->n_generated;
    hm->disconnects += disconnected;
    if (m->t_first_token > 0) {
        observe(&hm->h[H_TTFT], m->ttft_s);
        observe(&hm->h[H_PREFILL], m->prefill_s);
        observe(&hm->h[H_DECODE], m->decode_s);
        if (m->n_generated > 1) observe(&hm->h[H_TPOT], m->tpot_s);
    }
    observe(&hm->h[H_E2E], m->e2e_s);
    observe(&hm->h[H_QUEUE], m->queue_s);
    for (int32_t i = 1; m->token_t && i < m->n_generated; i++)
        observe(&hm->h[H_ITL], m->token_t[i] - m->token_t[i - 1]);
    struct recent *r = &hm->ring[hm->ring_next++ % HTTP_RECENT];
    snprintf(r->request_id, sizeof r->request_id, "%s", request_id ? request_id : "");
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant ? tenant : "");
    snprintf(r->route, sizeof r->route, "%s", route ? route : "");
    r->m = *m;
    r->m.token_t = NULL;
    r->disconnected = disconnected;
    r->used = true;
    pthread_mutex_unlock(&hm->mu);
}

/* ---- exposition ---------------------------------------------------------------- */

struct out {
    struct sse_buf *b;
    char lbl[300];   /* model_name="..." */
    int rc;
};

static void put(struct out *o, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    if (sse_buf_add(o->b, line, (size_t)n)) o->rc = -1;
}

/* HELP and TYPE name the family as its samples do: a counter's samples are
 * NAME_total, so are its HELP and TYPE lines (the 0.0.4 text format, as
 * prometheus_client writes vLLM's; with the bare NAME the parsers type the
 * samples "unknown"). */
static void head(struct out *o, const char *name, const char *type, const char *help)
{
    const char *sfx = strcmp(type, "counter") == 0 ? "_total" : "";
    put(o, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, sfx, help, name, sfx, type);
}

static void gauge(struct out *o, const char *name, const char *help, double v)
{
    head(o, name, "gauge", help);
    put(o, "%s{%s} %.17g\n", name, o->lbl, v);
}

static void counter(struct out *o, const char *name, const char *help, double v)
{
    head(o, name, "counter", help);
    put(o, "%s_total{%s} %.17g\n", name, o->lbl, v);
}

static void hist_out(struct out *o, const struct hist *h)
{
    head(o, h->name, "histogram", h->help);
    uint64_t cum = 0;
    for (size_t i = 0; i < h->nb; i++) {
        cum += h->counts[i];
        put(o, "%s_bucket{%s,le=\"%g\"} %llu\n", h->name, o->lbl, h->b[i],
            (unsigned long long)cum);
    }
    put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", h->name, o->lbl, (unsigned long long)h->count);
    put(o, "%s_count{%s} %llu\n", h->name, o->lbl, (unsigned long long)h->count);
    put(o, "%s_sum{%s} %.17g\n", h->name, o->lbl, h->sum);
}

/* Label values escaped per the text format (backslash, quote, newline). */
static void label_escape(char *dst, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '\\' || *s == '"') dst[k++] = '\\', dst[k++] = *s;
        else if (*s == '\n') dst[k++] = '\\', dst[k++] = 'n';
        else dst[k++] = *s;
    }
    dst[k] = 0;
}

/* A serve instance with --route: its requests' moves between targets. */
static void fallback_part(struct out *o, struct engine *e)
{
    struct route_count c[ROUTE_MAX_TARGETS * ROUTE_MAX_TARGETS * ROUTE_N_REASON];
    int n = route_counts(e, c, (int)(sizeof c / sizeof c[0]));
    head(o, "tern:fallback", "counter",
         "Requests moved to the next target of the route before their first token.");
    for (int i = 0; i < n; i++) {
        char from[300], to[300];
        label_escape(from, sizeof from, route_target_name(e, c[i].from));
        label_escape(to, sizeof to, route_target_name(e, c[i].to));
        put(o, "tern:fallback_total{%s,from=\"%s\",to=\"%s\",reason=\"%s\"} %llu\n", o->lbl,
            from, to, route_reason_name(c[i].reason), (unsigned long long)c[i].n);
    }
}

static void engine_part(struct out *o, struct engine *e)
{
    struct engine_stats s;
    engine_snapshot(e, &s);
    gauge(o, "vllm:num_requests_running", "Number of requests in model execution batches.",
          s.running);
    gauge(o, "vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          s.waiting);
    gauge(o, "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
          s.kv_total ? (double)s.kv_used / s.kv_total : 0);
    counter(o, "vllm:prefix_cache_queries", "Prefix cache queries, in terms of tokens.",
            (double)s.prefix_query_tokens);
    counter(o, "vllm:prefix_cache_hits", "Prefix cache hits, in terms of tokens.",
            (double)s.prefix_hit_tokens);
    counter(o, "vllm:num_preemptions", "Cumulative number of preemptions.", (double)s.preemptions);
    counter(o, "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
            (double)s.spec_drafts);
    counter(o, "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
            (double)s.spec_draft_tokens);
    counter(o, "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
            (double)s.spec_accepted_tokens);
    head(o, "tern:kv_blocks", "gauge", "KV cache blocks by state (used + cached + free = total).");
    put(o, "tern:kv_blocks{%s,state=\"used\"} %d\n", o->lbl, s.kv_used);
    put(o, "tern:kv_blocks{%s,state=\"cached\"} %d\n", o->lbl, s.kv_cached);
    put(o, "tern:kv_blocks{%s,state=\"free\"} %d\n", o->lbl, s.kv_free);
    gauge(o, "tern:kv_block_tokens", "Tokens per KV cache block.", s.kv_block_tokens);
    gauge(o, "tern:kv_tokens_capacity", "KV cache capacity in tokens.",
          (double)s.kv_total * s.kv_block_tokens);
    gauge(o, "tern:goodput_requests_per_second",
          "Finished requests that met the TTFT and TPOT SLOs, per second of uptime.",
          s.goodput_rps);
    counter(o, "tern:slo_met_requests", "Finished requests that met both SLOs.",
            (double)s.slo_met);
    gauge(o, "tern:step_time_p50_seconds", "Median engine step time.", s.step_s.p50);
    gauge(o, "tern:step_time_p99_seconds", "99th percentile engine step time.", s.step_s.p99);
    counter(o, "tern:engine_steps", "Engine steps run.", (double)s.steps);
    gauge(o, "tern:scheduler_overhead_ratio", "Share of step time outside the backend.",
          s.sched_overhead);
    gauge(o, "tern:uptime_seconds", "Engine uptime.", s.uptime_s);
    counter(o, "tern:engine_submitted_requests", "Requests submitted to the engine (warm-up too).",
            (double)s.submitted);
    if (route_is(e)) fallback_part(o, e);
}

struct tenant_ud {
    struct out *o;
    int pass;
};

static void tenant_line(void *ud, const struct http_tenant *t)
{
    struct tenant_ud *u = ud;
    char name[140];
    label_escape(name, sizeof name, t->name);
    if (u->pass == 0)
        put(u->o, "tern:tenant_requests_total{%s,tenant=\"%s\"} %llu\n", u->o->lbl, name,
            (unsigned long long)t->n_requests);
    else if (u->pass == 1)
        put(u->o, "tern:tenant_rejected_total{%s,tenant=\"%s\"} %llu\n", u->o->lbl, name,
            (unsigned long long)t->n_rejected);
    else
        put(u->o,
            "tern:tenant_tokens_total{%s,tenant=\"%s\",kind=\"prompt\"} %llu\n"
            "tern:tenant_tokens_total{%s,tenant=\"%s\",kind=\"generated\"} %llu\n",
            u->o->lbl, name, (unsigned long long)t->n_prompt, u->o->lbl, name,
            (unsigned long long)t->n_generated);
}

static void http_part(struct out *o, struct http_metrics *hm, struct http_auth *auth)
{
    counter(o, "vllm:prompt_tokens", "Number of prefill tokens processed.",
            (double)hm->prompt_tokens);
    counter(o, "vllm:generation_tokens", "Number of generation tokens processed.",
            (double)hm->generation_tokens);
    head(o, "vllm:request_success", "counter", "Count of successfully processed requests.");
    put(o, "vllm:request_success_total{%s,finished_reason=\"stop\"} %llu\n", o->lbl,
        (unsigned long long)(hm->finished[ENGINE_STOP] + hm->finished[ENGINE_OK]));
    put(o, "vllm:request_success_total{%s,finished_reason=\"length\"} %llu\n", o->lbl,
        (unsigned long long)hm->finished[ENGINE_LENGTH]);
    uint64_t abort = 0;
    for (int s = ENGINE_CANCELLED; s < ENGINE_N_STATUS; s++) abort += hm->finished[s];
    put(o, "vllm:request_success_total{%s,finished_reason=\"abort\"} %llu\n", o->lbl,
        (unsigned long long)abort);
    for (int i = 0; i < N_HIST; i++) hist_out(o, &hm->h[i]);
    head(o, "tern:requests_finished", "counter", "Engine requests finished, by engine status.");
    for (int s = 0; s < ENGINE_N_STATUS; s++)
        put(o, "tern:requests_finished_total{%s,status=\"%s\"} %llu\n", o->lbl,
            engine_status_name((enum engine_status)s), (unsigned long long)hm->finished[s]);
    counter(o, "tern:client_disconnects", "Requests whose client went away before the end.",
            (double)hm->disconnects);
    head(o, "tern:http_responses", "counter", "HTTP responses sent, by status code.");
    for (int i = 0; i < N_CODES && hm->codes[i].code; i++)
        put(o, "tern:http_responses_total{%s,code=\"%d\"} %llu\n", o->lbl, hm->codes[i].code,
            (unsigned long long)hm->codes[i].n);
    head(o, "tern:rejected_requests", "counter", "Requests refused, by reason.");
    for (int i = 0; i < N_REASONS && hm->reasons[i].reason[0]; i++)
        put(o, "tern:rejected_requests_total{%s,reason=\"%s\"} %llu\n", o->lbl,
            hm->reasons[i].reason, (unsigned long long)hm->reasons[i].n);
    const char *names[3][2] = {{"tern:tenant_requests", "Requests admitted, by tenant."},
                               {"tern:tenant_rejected", "Requests refused, by tenant."},
                               {"tern:tenant_tokens", "Tokens by tenant and kind."}};
    for (int pass = 0; pass < 3; pass++) {
        head(o, names[pass][0], "counter", names[pass][1]);
        struct tenant_ud u = {o, pass};
        http_auth_each(auth, tenant_line, &u);
    }
}

int http_metrics_expose(struct http_metrics *hm, struct engine *e, const char *model_name,
                        struct http_auth *auth, struct sse_buf *out)
{
    struct out o = {.b = out};
    char esc[260];
    label_escape(esc, sizeof esc, model_name ? model_name : "");
    snprintf(o.lbl, sizeof o.lbl, "model_name=\"%s\"", esc);
    if (e) engine_part(&o, e);
    pthread_mutex_lock(&hm->mu);
    http_part(&o, hm, auth);
    pthread_mutex_unlock(&hm->mu);
    return o.rc;
}

cJSON *http_metrics_recent_json(struct http_metrics *hm)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return NULL;
    pthread_mutex_lock(&hm->mu);
    for (size_t k = 0; k < HTTP_RECENT; k++) {
        const struct recent *r = &hm->ring[(hm->ring_next + HTTP_RECENT - 1 - k) % HTTP_RECENT];
        if (!r->used) break;
        cJSON *j = engine_metrics_json(&r->m);
        if (!j) continue;
        cJSON_AddStringToObject(j, "request_id", r->request_id);
        cJSON_AddStringToObject(j, "tenant", r->tenant);
        cJSON_AddStringToObject(j, "route", r->route);
        cJSON_AddBoolToObject(j, "client_disconnected", r->disconnected);
        cJSON_AddItemToArray(arr, j);
    }
    pthread_mutex_unlock(&hm->mu);
    return arr;
}
