/* remote: the remote engine behind the engine API (engine_ops.h). Requests go
 * to an OpenAI-compatible server (vLLM, SGLang, llama-server, tern serve)
 * as streaming HTTP; remote_loop.c drives them on one worker thread. This
 * file holds what runs on the caller's thread: open (endpoints probed with
 * GET /v1/models, the model name taken from the first answer), submit (the
 * body built by engine/wire's oai_request_build), cancel, events, close and
 * the ops table. remote_view.c describes the engine (snapshot, info, token
 * counts); remote_http.c holds the libcurl helpers. */
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
#include "remote_parse.h"
#include "tok.h"

static const struct engine_ops remote_ops;

/* ---- requests and events (lock held) ---------------------------------------------- */

void remote_req_unref(struct rreq *q)
{
    if (--q->refs > 0) return;
    free(q->body);
    free(q->fin_message);
    free(q->m.token_t);
    free(q->ids);
    free(q->embedding);
    rbuf_free(&q->errbody);
    rbuf_free(&q->whole);
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

/* A read by the consumer (lock held): a paused stream drained to half the
 * limit is due to resume (the poller wakes the worker). */
static void release_event(void *owner)
{
    struct rreq *q = owner;
    struct remote *R = q->R;
    q->n_events--;
    if (q->recv_paused) {
        q->last_read_t = remote_now(R);
        if (q->n_events <= R->event_limit / 2) R->resume_due = true;
    }
    remote_req_unref(q);
}

/* After a pop (lock held): whether the worker must be woken to resume. */
static bool take_resume(struct remote *R)
{
    bool due = R->resume_due;
    R->resume_due = false;
    return due;
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

/* llama-server: GET /props default_generation_settings.n_ctx (per slot), or
 * an older top-level n_ctx. Kept as it was when /props does not answer. */
static void props_ctx(const struct remote *R, struct rendpoint *ep)
{
    char url[1100], err[256];
    snprintf(url, sizeof url, "%s/props", ep->root);
    struct rbuf b = {0};
    if (remote_http_sync(R, url, NULL, &b, R->connect_timeout_s + 5, err, sizeof err) == 200) {
        int32_t n = remote_parse_props_ctx(b.p, b.len);
        if (n) ep->n_ctx = n;
    }
    rbuf_free(&b);
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
    if (code == 0) { /* no answer at all: say so, with the server and curl's reason */
        char why[400];
        size_t ul = strlen(url);
        const char *r = strncmp(err, url, ul) == 0 && err[ul] == ':' ? err + ul + 2 : err;
        snprintf(why, sizeof why, "%.399s", r);
        snprintf(err, errlen, "server unreachable at %.160s (%.300s)", ep->base, why);
        goto out;
    }
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
    struct remote_models mo;
    if (remote_parse_models(b.p, b.len, &mo) == 0) {
        if (!R->model && mo.id) R->model = mo.id;
        else free(mo.id);
        if (mo.owned_by[0]) snprintf(ep->server_kind, sizeof ep->server_kind, "%s", mo.owned_by);
        ep->n_ctx = mo.n_ctx;
        ep->max_tokens_cap = mo.max_tokens_cap;
    }
    if (strcmp(ep->server_kind, "llamacpp") == 0) props_ctx(R, ep);
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

struct engine *engine_remote_new(const struct engine_config *c, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    /* curl_global_init is not thread-safe; do it once per process. */
    pthread_once(&once, global_init);
    if (c->draft_model) {
        snprintf(err, errlen, "remote engine: --draft-model runs beside a local model; a server "
                              "speculates with its own settings (tern serve --draft-model)");
        return NULL;
    }
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
    if (evq_init(&R->evq, engine_event_free, err, errlen) != 0) goto fail;
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
    R->server_tokenize = remote_server_tokenize(R, "hello", 5) > 0; /* has POST /tokenize? */
    /* the backend is named "remote" beside it: the URL and the server's kind only */
    snprintf(R->device, sizeof R->device, "%s%s%s%s", R->ep[0].base,
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
    char *body = oai_request_build(chat ? OAI_CHAT : OAI_COMPLETION, R->model, r, !r->score,
                                   !r->score);
    if (!body || !(r->ignore_eos || r->score)) return body;
    cJSON *j = cJSON_Parse(body);
    free(body);
    if (!j) return NULL;
    if (r->ignore_eos) cJSON_AddBoolToObject(j, "ignore_eos", true);
    /* Scoring asks for one generated token, not 0: vLLM's sampling
     * parameters refuse max_tokens < 1 (vllm-project/vllm#9336), while
     * echo + logprobs + max_tokens 1 works there and on tern serve; the
     * token's entry after the prompt's is ignored. */
    if (r->score) cJSON_ReplaceItemInObject(j, "max_tokens", cJSON_CreateNumber(1));
    body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return body;
}

/* An embeddings body (OpenAI's shape): the prompt as a string, or its
 * token ids (OpenAI, vLLM, llama-server and tern serve take both); floats,
 * not base64, since every server here sends them; dimensions only when
 * asked, as a server without Matryoshka support may refuse the field. */
static char *build_embed_body(const struct remote *R, const struct engine_request *r)
{
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddStringToObject(j, "model", R->model);
    if (r->prompt) {
        cJSON_AddStringToObject(j, "input", r->prompt);
    } else {
        cJSON *a = cJSON_AddArrayToObject(j, "input");
        for (int32_t i = 0; a && i < r->n_prompt_tokens; i++)
            cJSON_AddItemToArray(a, cJSON_CreateNumber(r->prompt_tokens[i]));
    }
    cJSON_AddStringToObject(j, "encoding_format", "float");
    if (r->dimensions > 0) cJSON_AddNumberToObject(j, "dimensions", r->dimensions);
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return body;
}

/* Scoring goes over HTTP as echo + logprobs (tern serve, vLLM, OpenAI's
 * legacy completions). llama-server cannot: its n_probs / logprobs cover
 * the generated tokens only, never the prompt's (llama.cpp as vendored by
 * llama-cpp-python 0.3.36: populate_token_probs runs on sampled tokens). */
static bool score_refused(struct remote *R, const struct engine_request *r, char *err,
                          size_t errlen)
{
    if (!r->prompt_tokens || r->n_prompt_tokens < 2) {
        snprintf(err, errlen, "remote engine: scoring needs the prompt as token ids (at least 2; "
                              "give -m MODEL for the tokenizer)");
        return true;
    }
    /* the worker thread rewrites server_kind from each /metrics scrape */
    char kind[sizeof R->ep[0].server_kind];
    pthread_mutex_lock(&R->mu);
    memcpy(kind, R->ep[0].server_kind, sizeof kind);
    pthread_mutex_unlock(&R->mu);
    if (strcmp(kind, "llamacpp") == 0) {
        snprintf(err, errlen, "remote engine: %s is llama-server (llama.cpp), which cannot give "
                              "a prompt's log-probabilities (its n_probs covers generated tokens "
                              "only), so perplexity cannot be computed there; use tern serve or "
                              "vLLM, or run eval in-process", R->ep[0].base);
        return true;
    }
    return false;
}

/* Score requests: completions, not streamed (echo's prompt entries come
 * in one body), with the prompt's ids kept to read its entries. */
static int score_setup(struct rreq *q, const struct engine_request *r)
{
    q->score = true;
    q->score_from = r->score_from > 0 ? r->score_from : 0;
    q->n_ids = r->n_prompt_tokens;
    q->ids = malloc((size_t)q->n_ids * sizeof *q->ids);
    if (!q->ids) return -1;
    memcpy(q->ids, r->prompt_tokens, (size_t)q->n_ids * sizeof *q->ids);
    q->whole.max = (size_t)64 << 20; /* 20 alternatives per token still fit */
    return 0;
}

static uint64_t remote_submit(struct engine *e, const struct engine_request *r,
                              enum engine_status *why, char *err, size_t errlen)
{
    struct remote *R = (struct remote *)e;
    enum engine_status dummy;
    if (!why) why = &dummy;
    *why = ENGINE_ERROR;
    if (r->embed && r->pooling != ENGINE_POOL_MODEL) {
        snprintf(err, errlen, "remote engine: the server pools embeddings its own way (%s "
                              "cannot be asked per request); leave the pooling to the model",
                 engine_pooling_name(r->pooling));
        return 0;
    }
    if (r->score && score_refused(R, r, err, errlen)) return 0;
    if (!r->score && (r->logprobs || r->prompt_logprobs)) {
        snprintf(err, errlen, "remote engine: token log-probabilities are not relayed into "
                              "events (scoring is: score requests use echo + logprobs)");
        return 0;
    }
    bool chat = !r->score && !r->embed && r->messages && r->n_messages > 0;
    if (r->embed && r->messages && r->n_messages > 0) {
        snprintf(err, errlen, "remote engine: embeddings take a prompt, not chat messages");
        return 0;
    }
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
    q->embed = r->embed;
    if (q->embed) q->whole.max = (size_t)16 << 20; /* a 16k-wide vector as JSON is ~400 KB */
    q->body = r->embed ? build_embed_body(R, r) : build_body(R, r, chat);
    if (r->score && q->body && score_setup(q, r) != 0) {
        free(q->body);
        q->body = NULL;
    }
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

/* A server's queue cannot be held from here: pausing holds new requests on
 * the client (the worker sends none of the inbox), so that a wave goes out
 * together when released; running streams are not touched. */
static void remote_pause(struct engine *e, bool paused)
{
    struct remote *R = (struct remote *)e;
    pthread_mutex_lock(&R->mu);
    R->paused = paused;
    pthread_mutex_unlock(&R->mu);
    curl_multi_wakeup(R->multi);
}

/* ---- events --------------------------------------------------------------------------- */

static int remote_poll_events(struct engine *e, struct engine_event *out, int max)
{
    struct remote *R = (struct remote *)e;
    pthread_mutex_lock(&R->mu);
    int n = evq_pop(&R->evq, 0, out, max, release_event);
    bool wake = take_resume(R);
    pthread_mutex_unlock(&R->mu);
    if (wake) curl_multi_wakeup(R->multi);
    return n;
}

static int remote_poll_request(struct engine *e, uint64_t id, struct engine_event *out, int max)
{
    struct remote *R = (struct remote *)e;
    pthread_mutex_lock(&R->mu);
    int n = evq_pop(&R->evq, id ? id : UINT64_MAX, out, max, release_event);
    bool wake = take_resume(R);
    pthread_mutex_unlock(&R->mu);
    if (wake) curl_multi_wakeup(R->multi);
    return n;
}

static int remote_event_fd(const struct engine *e)
{
    return ((const struct remote *)e)->evq.fd;
}

static bool remote_wait_events(struct engine *e, uint64_t id, double timeout_s)
{
    struct remote *R = (struct remote *)e;
    return evq_wait(&R->evq, &R->mu, &R->ev_cond, id, timeout_s);
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
    .token_bytes = remote_token_bytes,
    .close = remote_close,
};
