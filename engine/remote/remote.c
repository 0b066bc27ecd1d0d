/* remote: the remote engine behind the engine API (engine_ops.h). Requests go
 * to an OpenAI-compatible server (vLLM, SGLang, llama-server, tern serve)
 * as streaming HTTP; remote_loop.c drives them on one worker thread. This
 * file holds what runs on the caller's thread: open (endpoints probed with
 * GET /v1/models, the model name taken from the first answer), submit (the
 * body built by engine/wire's oai_request_build), cancel, events, the
 * snapshot (the client's own figures beside the server's scraped view),
 * info and token counting (local tokenizer, else the server's /tokenize,
 * else an estimate that says so). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "model.h"
#include "oai_request.h"
#include "remote_impl.h"
#include "tok.h"

static const struct engine_ops remote_ops;

double remote_now(const struct remote *R)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 - R->t0;
}

int rbuf_add(struct rbuf *b, const char *s, size_t n)
{
    if (b->max && b->len + n > b->max) return -1;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

void rbuf_free(struct rbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- requests and events (lock held) ---------------------------------------------- */

void remote_req_unref(struct rreq *q)
{
    if (--q->refs > 0) return;
    free(q->body);
    free(q->fin_message);
    free(q->m.token_t);
    rbuf_free(&q->errbody);
    free(q);
}

void remote_emit(struct remote *R, struct rreq *q, struct engine_event *ev)
{
    ev->id = q->id;
    ev->tag = q->tag;
    if (evq_push(&R->evq, ev, q) != 0) return;
    q->refs++;
    q->n_events++;
    pthread_cond_broadcast(&R->ev_cond);
}

static void release_event(void *owner)
{
    struct rreq *q = owner;
    q->n_events--;
    remote_req_unref(q);
}

/* ---- HTTP helpers ---------------------------------------------------------------------- */

void remote_easy_common(const struct remote *R, CURL *h, struct curl_slist **hdrs, bool json)
{
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(R->connect_timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_USERAGENT, "tern/" "remote");
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    if (R->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (json) *hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
    if (R->api_key) {
        char auth[1100];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", R->api_key);
        *hdrs = curl_slist_append(*hdrs, auth);
    }
}

static size_t sync_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return rbuf_add(ud, ptr, n) == 0 ? n : 0;
}

long remote_http_sync(const struct remote *R, const char *url, const char *post, struct rbuf *out,
                      double timeout_s, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(err, errlen, "remote: curl_easy_init failed");
        return 0;
    }
    struct curl_slist *hdrs = NULL;
    char cerr[CURL_ERROR_SIZE] = "";
    remote_easy_common(R, h, &hdrs, post != NULL);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (post) curl_easy_setopt(h, CURLOPT_POSTFIELDS, post);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sync_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
    out->max = 16u << 20;
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    else snprintf(err, errlen, "%s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return code;
}

/* ---- open ---------------------------------------------------------------------------- */

/* base: the URL without a trailing '/', ending in /v1; root: without /v1. */
static int set_endpoint(struct rendpoint *ep, const char *url, char *err, size_t errlen)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        snprintf(err, errlen, "remote: URL '%s' must start with http:// or https://", url);
        return -1;
    }
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') n--;
    bool v1 = n >= 3 && strncmp(url + n - 3, "/v1", 3) == 0;
    ep->root = strndup(url, v1 ? n - 3 : n);
    ep->base = malloc(n + 4);
    if (!ep->root || !ep->base) {
        snprintf(err, errlen, "remote: out of memory");
        return -1;
    }
    snprintf(ep->base, n + 4, "%.*s%s", (int)n, url, v1 ? "" : "/v1");
    snprintf(ep->pub.url, sizeof ep->pub.url, "%s", ep->base);
    return 0;
}

/* GET /v1/models: the endpoint answers (else open fails, naming it), and the
 * first model's id is the "model" sent when none was given. */
static int probe_models(struct remote *R, int32_t i, char *err, size_t errlen)
{
    struct rendpoint *ep = &R->ep[i];
    char url[1100];
    snprintf(url, sizeof url, "%s/models", ep->base);
    struct rbuf b = {0};
    double t0 = remote_now(R);
    long code = remote_http_sync(R, url, NULL, &b, R->connect_timeout_s + 5, err, errlen);
    ep->pub.health_latency_s = remote_now(R) - t0;
    int rc = -1;
    if (code == 0) goto out;
    if (code == 401 || code == 403) {
        snprintf(err, errlen, "remote: GET %.300s: HTTP %ld (check --api-key / TERN_API_KEY)", url,
                 code);
        goto out;
    }
    if (code != 200) {
        snprintf(err, errlen, "remote: GET %.300s: HTTP %ld (is this an OpenAI-compatible API base?)",
                 url, code);
        goto out;
    }
    ep->pub.healthy = true;
    cJSON *j = cJSON_ParseWithLength(b.p ? b.p : "", b.len);
    const cJSON *data = j ? cJSON_GetObjectItemCaseSensitive(j, "data") : NULL;
    const cJSON *m0 = cJSON_IsArray(data) ? cJSON_GetArrayItem(data, 0) : NULL;
    const cJSON *id = m0 ? cJSON_GetObjectItemCaseSensitive(m0, "id") : NULL;
    const cJSON *own = m0 ? cJSON_GetObjectItemCaseSensitive(m0, "owned_by") : NULL;
    if (!R->model && cJSON_IsString(id)) R->model = strdup(id->valuestring);
    if (cJSON_IsString(own))
        snprintf(ep->server_kind, sizeof ep->server_kind, "%s", own->valuestring);
    cJSON_Delete(j);
    rc = 0;
out:
    rbuf_free(&b);
    return rc;
}

static int open_tokenizer(struct remote *R, const char *path, char *err, size_t errlen)
{
    R->tmodel = model_open(path, err, errlen);
    if (!R->tmodel) return -1;
    R->tok = tok_open(R->tmodel->gguf, err, errlen);
    if (!R->tok) return -1;
    if (tmpl_init_model(&R->tmpl, R->tmodel->gguf, R->tok, NULL, err, errlen) != 0) return -1;
    R->has_tmpl = true;
    return 0;
}

static int copy_config(struct remote *R, const struct engine_config *c, char *err, size_t errlen)
{
    if (c->remote.n_urls > ENGINE_MAX_ENDPOINTS) {
        snprintf(err, errlen, "remote: %d URLs, at most %d", c->remote.n_urls,
                 ENGINE_MAX_ENDPOINTS);
        return -1;
    }
    R->n_ep = c->remote.n_urls;
    for (int32_t i = 0; i < R->n_ep; i++)
        if (set_endpoint(&R->ep[i], c->remote.urls[i], err, errlen) != 0) return -1;
    R->api_key = c->remote.api_key && c->remote.api_key[0] ? strdup(c->remote.api_key) : NULL;
    R->model = c->remote.model ? strdup(c->remote.model) : NULL;
    R->insecure = c->remote.insecure;
    R->balance = c->remote.balance;
    R->connect_timeout_s = c->remote.connect_timeout_s > 0 ? c->remote.connect_timeout_s : 10;
    R->read_timeout_s = c->remote.read_timeout_s > 0 ? c->remote.read_timeout_s : 60;
    R->scrape_interval_s = c->remote.scrape_interval_s == 0 ? 1.0 : c->remote.scrape_interval_s;
    R->max_retries = c->remote.max_retries > 0 ? c->remote.max_retries : 2;
    R->event_limit = c->event_limit > 0 ? c->event_limit : 4096;
    return 0;
}

static void remote_close(struct engine *e);

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int64_t server_tokenize(const struct remote *R, const char *text, size_t len);

struct engine *engine_remote_new(const struct engine_config *c, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    /* curl_global_init is not thread-safe; do it once per process. */
    pthread_once(&once, global_init);
    struct remote *R = calloc(1, sizeof *R);
    if (!R) {
        snprintf(err, errlen, "remote: out of memory");
        return NULL;
    }
    R->base.ops = &remote_ops;
    R->evq.fd = -1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    R->t0 = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    pthread_mutex_init(&R->mu, NULL);
    pthread_cond_init(&R->ev_cond, NULL);
    metrics_init(&R->mx, c->slo_ttft_s > 0 ? c->slo_ttft_s : 1.0,
                 c->slo_tpot_s > 0 ? c->slo_tpot_s : 0.2);
    if (copy_config(R, c, err, errlen) != 0) goto fail;
    if (evq_init(&R->evq, err, errlen) != 0) goto fail;
    bool has_file = c->model_path && c->model_path[0];
    if (has_file && open_tokenizer(R, c->model_path, err, errlen) != 0) goto fail;
    R->model_path = has_file ? strdup(c->model_path) : NULL;
    int up = 0;
    char first_err[512] = "";
    for (int32_t i = 0; i < R->n_ep; i++) {
        char e1[512];
        if (probe_models(R, i, e1, sizeof e1) == 0) up++;
        else {
            snprintf(R->ep[i].pub.last_error, sizeof R->ep[i].pub.last_error, "%.159s", e1);
            if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", e1);
        }
    }
    if (up == 0) {
        snprintf(err, errlen, "%s", first_err);
        goto fail;
    }
    if (!R->model) R->model = strdup("default");
    R->server_tokenize = server_tokenize(R, "hello", 5) > 0; /* has POST /tokenize? */
    snprintf(R->device, sizeof R->device, "remote: %s%s%s%s", R->ep[0].base,
             R->ep[0].server_kind[0] ? " (" : "", R->ep[0].server_kind,
             R->ep[0].server_kind[0] ? ")" : "");
    R->multi = curl_multi_init();
    if (!R->multi) {
        snprintf(err, errlen, "remote: curl_multi_init failed");
        goto fail;
    }
    if (pthread_create(&R->thread, NULL, remote_main, R) != 0) {
        snprintf(err, errlen, "remote: cannot start the worker thread");
        goto fail;
    }
    R->thread_started = true;
    return &R->base;
fail:
    remote_close(&R->base);
    return NULL;
}

static void remote_close(struct engine *e)
{
    struct remote *R = (struct remote *)e;
    if (R->thread_started) {
        pthread_mutex_lock(&R->mu);
        R->stop = true;
        pthread_mutex_unlock(&R->mu);
        curl_multi_wakeup(R->multi);
        pthread_join(R->thread, NULL);
    }
    pthread_mutex_lock(&R->mu);
    evq_free(&R->evq, release_event);
    pthread_mutex_unlock(&R->mu);
    if (R->multi) curl_multi_cleanup(R->multi);
    for (int32_t i = 0; i < ENGINE_MAX_ENDPOINTS; i++) {
        free(R->ep[i].base);
        free(R->ep[i].root);
        rbuf_free(&R->ep[i].scrape.body);
        rbuf_free(&R->ep[i].health.body);
        rbuf_free(&R->ep[i].status.body);
    }
    if (R->has_tmpl) tmpl_free(&R->tmpl);
    if (R->tok) tok_close(R->tok);
    if (R->tmodel) model_close(R->tmodel);
    free(R->model);
    free(R->api_key);
    free(R->model_path);
    pthread_cond_destroy(&R->ev_cond);
    pthread_mutex_destroy(&R->mu);
    free(R);
}

/* ---- submit / cancel ------------------------------------------------------------------ */

static int32_t pick_endpoint(struct remote *R)
{
    if (R->n_ep == 1) return 0;
    if (R->balance == ENGINE_BALANCE_LEAST_OUTSTANDING) {
        int32_t best = 0;
        for (int32_t i = 1; i < R->n_ep; i++)
            if (R->ep[i].pub.outstanding < R->ep[best].pub.outstanding) best = i;
        return best;
    }
    return (int32_t)(R->rr++ % (uint64_t)R->n_ep);
}

/* The JSON body; ignore_eos is a vLLM / SGLang / llama-server extension. */
static char *build_body(const struct remote *R, const struct engine_request *r, bool chat)
{
    char *body = oai_request_build(chat ? OAI_CHAT : OAI_COMPLETION, R->model, r, true, true);
    if (!body || !r->ignore_eos) return body;
    cJSON *j = cJSON_Parse(body);
    free(body);
    if (!j) return NULL;
    cJSON_AddBoolToObject(j, "ignore_eos", true);
    body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return body;
}

static uint64_t remote_submit(struct engine *e, const struct engine_request *r,
                              enum engine_status *why, char *err, size_t errlen)
{
    struct remote *R = (struct remote *)e;
    enum engine_status dummy;
    if (!why) why = &dummy;
    *why = ENGINE_ERROR;
    if (r->score) {
        snprintf(err, errlen, "remote engine: scoring (perplexity) needs the prompt's "
                              "log-probabilities, which this client does not request over HTTP yet");
        return 0;
    }
    bool chat = r->messages && r->n_messages > 0;
    if (!chat && !r->prompt && !(r->prompt_tokens && r->n_prompt_tokens > 0)) {
        snprintf(err, errlen, "remote engine: empty request (no messages, prompt or tokens)");
        return 0;
    }
    struct rreq *q = calloc(1, sizeof *q);
    if (!q) {
        snprintf(err, errlen, "remote engine: out of memory");
        return 0;
    }
    q->kind = REMOTE_XFER_REQ;
    q->R = R;
    q->chat = chat;
    q->tag = r->tag;
    q->prio = r->priority;
    q->body = build_body(R, r, chat);
    if (!q->body) {
        snprintf(err, errlen, "remote engine: cannot encode the request as JSON");
        free(q);
        return 0;
    }
    int32_t n_prompt = 0;
    if (R->tok) {
        char e1[128];
        int64_t k = chat ? e->ops->count_chat_tokens(e, r->messages, r->n_messages, e1, sizeof e1)
                    : r->prompt ? e->ops->count_tokens(e, r->prompt, strlen(r->prompt), e1, sizeof e1)
                                : r->n_prompt_tokens;
        n_prompt = k > 0 ? (int32_t)k : 0;
    } else if (!chat && !r->prompt) {
        n_prompt = r->n_prompt_tokens;
    }
    pthread_mutex_lock(&R->mu);
    q->id = ++R->next_id;
    q->ep = pick_endpoint(R);
    q->m.remote = true;
    q->m.id = q->id;
    q->m.tag = q->tag;
    q->m.priority = q->prio;
    q->m.endpoint = q->ep;
    q->m.t_arrival = remote_now(R);
    q->m.n_prompt = n_prompt;
    q->refs = 2;                    /* the engine (until finished) and the worker */
    R->ep[q->ep].pub.outstanding++;
    R->ep[q->ep].pub.requests++;
    R->n_live++;
    q->live_next = R->live;
    if (R->live) R->live->live_prev = q;
    R->live = q;
    if (R->inbox_tail) R->inbox_tail->inbox_next = q;
    else R->inbox_head = q;
    R->inbox_tail = q;
    struct engine_event ev = {.type = ENGINE_EV_QUEUED, .t = q->m.t_arrival, .token = -1,
                              .total = n_prompt};
    remote_emit(R, q, &ev);
    uint64_t id = q->id;
    pthread_mutex_unlock(&R->mu);
    curl_multi_wakeup(R->multi);
    *why = ENGINE_OK;
    return id;
}

static int remote_cancel(struct engine *e, uint64_t id)
{
    struct remote *R = (struct remote *)e;
    int rc = -1;
    pthread_mutex_lock(&R->mu);
    for (struct rreq *q = R->live; q; q = q->live_next)
        if (q->id == id) {
            if (!q->finished) {
                q->cancel = true;
                rc = 0;
            }
            break;
        }
    pthread_mutex_unlock(&R->mu);
    if (rc == 0) curl_multi_wakeup(R->multi);
    return rc;
}

/* A server's queue cannot be held from here; pausing only matters to the
 * local scheduler (a wave submitted together), and a remote server admits
 * requests as they come anyway. */
static void remote_pause(struct engine *e, bool paused)
{
    (void)e;
    (void)paused;
}

/* ---- events --------------------------------------------------------------------------- */

static int remote_poll_events(struct engine *e, struct engine_event *out, int max)
{
    struct remote *R = (struct remote *)e;
    pthread_mutex_lock(&R->mu);
    int n = evq_pop(&R->evq, 0, out, max, release_event);
    pthread_mutex_unlock(&R->mu);
    return n;
}

static int remote_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max)
{
    struct remote *R = (struct remote *)e;
    pthread_mutex_lock(&R->mu);
    int n = evq_pop(&R->evq, id ? id : UINT64_MAX, out, max, release_event);
    pthread_mutex_unlock(&R->mu);
    return n;
}

static int remote_event_fd(const struct engine *e)
{
    return ((const struct remote *)e)->evq.fd;
}

static bool remote_wait_events(struct engine *e, uint64_t id, double timeout_s)
{
    struct remote *R = (struct remote *)e;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (timeout_s >= 0) {
        double s = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + timeout_s;
        until.tv_sec = (time_t)s;
        until.tv_nsec = (long)((s - (double)until.tv_sec) * 1e9);
    }
    pthread_mutex_lock(&R->mu);
    while (!evq_has(&R->evq, id)) {
        int rc = timeout_s < 0 ? pthread_cond_wait(&R->ev_cond, &R->mu)
                               : pthread_cond_timedwait(&R->ev_cond, &R->mu, &until);
        if (rc == ETIMEDOUT) break;
    }
    bool has = evq_has(&R->evq, id);
    pthread_mutex_unlock(&R->mu);
    return has;
}

/* ---- snapshot --------------------------------------------------------------------------- */

/* The server view over all endpoints: counts add up; KV usage is the mean;
 * percentiles are the first endpoint's that has them. */
static void merge_server(struct remote *R, double now, struct engine_stats *out)
{
    uint32_t known_any = 0;
    int n_kv = 0;
    double kv = 0;
    for (int32_t i = 0; i < R->n_ep; i++) {
        const struct rendpoint *ep = &R->ep[i];
        out->server.scrapes += ep->scrapes;
        out->server.scrape_errors += ep->scrape_errors;
        if (ep->scrape_error[0])
            snprintf(out->server.scrape_error, sizeof out->server.scrape_error, "%s",
                     ep->scrape_error);
        if (!ep->srv_ok) continue;
        const struct engine_stats *s = &ep->srv;
        uint32_t k = ~s->unknown;
        if (!out->server.source[0]) snprintf(out->server.source, sizeof out->server.source, "%s",
                                             s->server.source);
        double age = now - ep->srv_t;
        if (out->server.scrape_age_s < 0 || age < out->server.scrape_age_s)
            out->server.scrape_age_s = age;
        if (k & ENGINE_STAT_RUNNING) out->running += s->running;
        if (k & ENGINE_STAT_WAITING) out->waiting += s->waiting;
        if (k & ENGINE_STAT_PREEMPT) out->preemptions += s->preemptions;
        if (k & ENGINE_STAT_KV_USAGE) { kv += s->kv_usage; n_kv++; }
        if (k & ENGINE_STAT_KV_BLOCKS) {
            out->kv_total += s->kv_total;
            out->kv_block_tokens = s->kv_block_tokens;
            out->kv_used += s->kv_used;
            out->kv_cached += s->kv_cached;
            out->kv_free += s->kv_free;
        }
        if ((k & ENGINE_STAT_PREFIX) && !(known_any & ENGINE_STAT_PREFIX)) {
            out->prefix_hit_rate = s->prefix_hit_rate;
            out->prefix_query_tokens = s->prefix_query_tokens;
            out->prefix_hit_tokens = s->prefix_hit_tokens;
        }
        if ((k & ENGINE_STAT_SRV_TTFT) && !(known_any & ENGINE_STAT_SRV_TTFT)) out->server.ttft = s->server.ttft;
        if ((k & ENGINE_STAT_SRV_ITL) && !(known_any & ENGINE_STAT_SRV_ITL)) out->server.itl = s->server.itl;
        if ((k & ENGINE_STAT_SRV_E2E) && !(known_any & ENGINE_STAT_SRV_E2E)) out->server.e2e = s->server.e2e;
        if ((k & ENGINE_STAT_SRV_QUEUE) && !(known_any & ENGINE_STAT_SRV_QUEUE)) out->server.queue = s->server.queue;
        if (k & ENGINE_STAT_SRV_GEN) out->server.gen_tok_s += s->server.gen_tok_s;
        known_any |= k;
    }
    if (n_kv) out->kv_usage = kv / n_kv;
    /* tern serve: its own engine snapshot (first endpoint that has one). */
    for (int32_t i = 0; i < R->n_ep; i++) {
        const struct engine_stats *t = &R->ep[i].tstat;
        if (!R->ep[i].tstat_ok) continue;
        out->kv_block_tokens = t->kv_block_tokens;
        out->kv_total = t->kv_total;
        out->kv_used = t->kv_used;
        out->kv_cached = t->kv_cached;
        out->kv_free = t->kv_free;
        out->steps = t->steps;
        out->busy_s = t->busy_s;
        out->backend_s = t->backend_s;
        out->sched_overhead = t->sched_overhead;
        out->step_s = t->step_s;
        out->step_tokens = t->step_tokens;
        known_any |= ENGINE_STAT_KV_BLOCKS | ENGINE_STAT_STEPS;
        break;
    }
    out->unknown = ~known_any & (ENGINE_STAT_RUNNING | ENGINE_STAT_WAITING | ENGINE_STAT_KV_BLOCKS |
                                 ENGINE_STAT_KV_USAGE | ENGINE_STAT_PREFIX | ENGINE_STAT_PREEMPT |
                                 ENGINE_STAT_SRV_TTFT | ENGINE_STAT_SRV_ITL | ENGINE_STAT_SRV_E2E |
                                 ENGINE_STAT_SRV_QUEUE | ENGINE_STAT_SRV_GEN | ENGINE_STAT_STEPS);
    out->unknown |= ENGINE_STAT_STEPS & ~known_any; /* only tern serve shows its steps */
}

static void remote_snapshot(struct engine *e, struct engine_stats *out)
{
    struct remote *R = (struct remote *)e;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&R->mu);
    double now = remote_now(R);
    metrics_fill_stats(&R->mx, now, out);
    out->running = out->waiting = 0;
    out->server.remote = true;
    out->server.scrape_age_s = -1;
    out->server.n_endpoints = R->n_ep;
    for (int32_t i = 0; i < R->n_ep; i++) out->server.endpoint[i] = R->ep[i].pub;
    merge_server(R, now, out);
    pthread_mutex_unlock(&R->mu);
    out->backend.name = "remote";
    snprintf(out->backend.device, sizeof out->backend.device, "%s", R->device);
    out->slo_ttft_s = R->mx.slo_ttft_s;
    out->slo_tpot_s = R->mx.slo_tpot_s;
}

static int remote_requests(struct engine *e, struct engine_req_info *out, int max)
{
    struct remote *R = (struct remote *)e;
    int n = 0;
    pthread_mutex_lock(&R->mu);
    for (struct rreq *q = R->live; q; q = q->live_next, n++) {
        if (n >= max) continue;
        out[n] = (struct engine_req_info){.id = q->id, .tag = q->tag, .priority = q->prio,
                                          .running = q->admitted, .n_prompt = q->m.n_prompt,
                                          .n_generated = q->m.n_generated,
                                          .t_arrival = q->m.t_arrival};
    }
    pthread_mutex_unlock(&R->mu);
    return n;
}

/* ---- info and tokens ----------------------------------------------------------------- */

static void remote_info(const struct engine *e, struct engine_info *out)
{
    const struct remote *R = (const struct remote *)e;
    memset(out, 0, sizeof *out);
    out->model_path = R->model_path ? R->model_path : R->ep[0].base;
    out->model_name = R->model;
    out->arch = R->tmodel ? R->tmodel->hp.arch_name : "remote";
    if (R->tmodel) {
        out->n_vocab = R->tmodel->hp.n_vocab;
        out->n_ctx_train = R->tmodel->hp.n_ctx_train;
    }
    out->has_chat_template = true;  /* the server applies its own */
    out->chat_template = R->has_tmpl ? tmpl_family_name(R->tmpl.family) : NULL;
    out->backend.name = "remote";
    snprintf(out->backend.device, sizeof out->backend.device, "%s", R->device);
    if (R->insecure)
        snprintf(out->backend.note, sizeof out->backend.note,
                 "TLS certificate verification is OFF (--insecure)");
    out->remote_url = R->ep[0].base;
    out->token_counts = R->tok ? "model tokenizer"
                        : R->server_tokenize ? "server /tokenize"
                                             : "estimate (~4 bytes/token)";
}

/* POST ROOT/tokenize: llama-server {"content"} -> {"tokens": [...]}; vLLM
 * {"model","prompt"} -> {"count", "tokens"}. -1 when the server has none. */
static int64_t server_tokenize(const struct remote *R, const char *text, size_t len)
{
    cJSON *j = cJSON_CreateObject();
    char *s = strndup(text, len);
    if (!j || !s) { cJSON_Delete(j); free(s); return -1; }
    cJSON_AddStringToObject(j, "content", s);
    cJSON_AddStringToObject(j, "prompt", s);
    cJSON_AddStringToObject(j, "model", R->model);
    free(s);
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!body) return -1;
    char url[1100], err[256];
    snprintf(url, sizeof url, "%s/tokenize", R->ep[0].root);
    struct rbuf b = {0};
    /* Short: a caller (the TUI's token count as one types) may be waiting. */
    long code = remote_http_sync(R, url, body, &b, 0.25, err, sizeof err);
    free(body);
    int64_t n = -1;
    cJSON *r = code == 200 ? cJSON_ParseWithLength(b.p ? b.p : "", b.len) : NULL;
    const cJSON *c = r ? cJSON_GetObjectItemCaseSensitive(r, "count") : NULL;
    const cJSON *t = r ? cJSON_GetObjectItemCaseSensitive(r, "tokens") : NULL;
    if (cJSON_IsNumber(c)) n = (int64_t)c->valuedouble;
    else if (cJSON_IsArray(t)) n = cJSON_GetArraySize(t);
    cJSON_Delete(r);
    rbuf_free(&b);
    return n;
}

static int64_t remote_count_tokens(const struct engine *e, const char *text, size_t len,
                                   char *err, size_t errlen)
{
    const struct remote *R = (const struct remote *)e;
    if (R->tok) return tok_encode(R->tok, text, len, TOK_ADD_BOS | TOK_PARSE_SPECIAL, NULL, 0, err,
                                  errlen);
    /* The server's count only where it answered at open (bounded wait). */
    int64_t n = R->server_tokenize ? server_tokenize(R, text, len) : -1;
    if (n >= 0) return n;
    return (int64_t)((len + 3) / 4); /* estimate: engine_info.token_counts says so */
}

static int64_t remote_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
                                        int32_t n, char *err, size_t errlen)
{
    const struct remote *R = (const struct remote *)e;
    if (R->has_tmpl) {
        struct tmpl_msg *tm = malloc((size_t)(n > 0 ? n : 1) * sizeof *tm);
        if (!tm) {
            snprintf(err, errlen, "remote: out of memory");
            return -1;
        }
        for (int32_t i = 0; i < n; i++) {
            tm[i].role = msgs[i].role ? msgs[i].role : "user";
            tm[i].content = msgs[i].content ? msgs[i].content : "";
        }
        char *text = NULL;
        int rc = tmpl_apply(&R->tmpl, tm, (size_t)n, true, &text, err, errlen);
        free(tm);
        if (rc != 0) return -1;
        int64_t c = tok_encode(R->tok, text, strlen(text), TOK_PARSE_SPECIAL, NULL, 0, err, errlen);
        free(text);
        return c;
    }
    /* No template here: the contents plus a few tokens of framing per message. */
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *c = msgs[i].content ? msgs[i].content : "";
        int64_t k = remote_count_tokens(e, c, strlen(c), err, errlen);
        if (k < 0) return -1;
        total += k + 4;
    }
    return total;
}

static const struct engine_ops remote_ops = {
    .name = "remote",
    .submit = remote_submit,
    .cancel = remote_cancel,
    .pause = remote_pause,
    .poll_events = remote_poll_events,
    .poll_request = remote_poll_request,
    .event_fd = remote_event_fd,
    .wait_events = remote_wait_events,
    .snapshot = remote_snapshot,
    .requests = remote_requests,
    .info = remote_info,
    .count_tokens = remote_count_tokens,
    .count_chat_tokens = remote_count_chat_tokens,
    .close = remote_close,
};
