/* remote_stream: one request's HTTP exchange on the worker thread. The body
 * is POSTed to /v1/chat/completions (messages) or /v1/completions (prompt),
 * streamed; the SSE reader (engine/wire) splits the bytes into events, each
 * an OpenAI chunk parsed by oai_response_parse; content deltas become TOKEN
 * events (counted in tokens with the local tokenizer when there is one: a
 * server may put several tokens in one event), the final chunks give finish
 * reason, usage (cached tokens) and, from a tern server, its phase block;
 * llama-server's `timings` object gives its cache and phase figures. Every
 * way the exchange can fail ends in one FINISHED event with a message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "oai_logprobs.h"
#include "remote_impl.h"
#include "remote_parse.h"
#include "tok.h"

static int push_token_time(struct rreq *q, double t)
{
    if (q->m.n_generated == q->token_cap) {
        int32_t cap = q->token_cap ? q->token_cap * 2 : 64;
        double *p = realloc(q->m.token_t, (size_t)cap * sizeof *p);
        if (!p) return -1;
        q->m.token_t = p;
        q->token_cap = cap;
    }
    q->m.token_t[q->m.n_generated++] = t;
    return 0;
}

static void emit_simple(struct remote *R, struct rreq *q, enum engine_event_type type, double t)
{
    struct engine_event ev = {.type = type, .t = t, .token = -1};
    pthread_mutex_lock(&R->mu);
    remote_emit(R, q, &ev);
    pthread_mutex_unlock(&R->mu);
}

static void admit(struct remote *R, struct rreq *q, double t)
{
    if (q->admitted) return;
    pthread_mutex_lock(&R->mu);            /* remote_requests reads admitted */
    q->admitted = true;
    q->m.t_admitted = t;
    R->n_running++;
    pthread_mutex_unlock(&R->mu);
    emit_simple(R, q, ENGINE_EV_ADMITTED, t);
}

/* Tokens in one delta: the local tokenizer's count when there is one (a
 * fragment alone may tokenize a little differently than in context; the
 * usage count corrects the total at the end), else one per event. */
static int32_t delta_tokens(const struct remote *R, const char *text, size_t n)
{
    if (!R->tok || n == 0) return 1;
    char err[64];
    int64_t k = tok_encode(R->tok, text, n, 0, NULL, 0, err, sizeof err);
    return k < 1 ? 1 : (int32_t)(k > 4096 ? 4096 : k);
}

static void on_text(struct remote *R, struct rreq *q, const char *text, double t)
{
    size_t n = strlen(text);
    if (n == 0) return;
    if (!q->any_text) {
        q->any_text = true;
        q->m.t_first_token = t;
        emit_simple(R, q, ENGINE_EV_FIRST_TOKEN, t);
    }
    int32_t k = delta_tokens(R, text, n);
    for (int32_t i = 0; i < k; i++) {
        struct engine_event ev = {.type = ENGINE_EV_TOKEN, .t = t, .token = ENGINE_TOKEN_UNKNOWN};
        ev.text = strdup(i == 0 ? text : "");
        if (!ev.text) return;
        pthread_mutex_lock(&R->mu);        /* remote_requests reads n_generated */
        int rc = push_token_time(q, t);
        if (rc == 0) remote_emit(R, q, &ev);
        pthread_mutex_unlock(&R->mu);
        if (rc != 0) {
            free(ev.text);
            return;
        }
    }
}

static void set_fin(struct rreq *q, enum engine_status st, const char *msg)
{
    if (q->has_fin) return;
    q->has_fin = true;
    q->fin_status = st;
    free(q->fin_message);
    q->fin_message = msg ? strdup(msg) : NULL;
}

static int on_sse(void *ud, const char *name, const char *data, size_t len)
{
    struct rreq *q = ud;
    struct remote *R = q->R;
    double t = remote_now(R);
    if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
        q->done_seen = true;
        return 0;
    }
    struct oai_parsed p;
    char err[256];
    if (oai_response_parse(data, len, &p, err, sizeof err) != 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "malformed stream from %s: %s", R->ep[q->ep].base, err);
        set_fin(q, ENGINE_ERROR, msg);
        q->failed = true;
        return 1;
    }
    admit(R, q, t);
    if (p.is_error) {
        char msg[600];
        snprintf(msg, sizeof msg, "server error in stream from %s: %s", R->ep[q->ep].base,
                 p.error_message ? p.error_message : "(no message)");
        set_fin(q, ENGINE_ERROR, msg);
    }
    if (p.text) on_text(R, q, p.text, t);
    if (p.finish_reason) {
        int st = oai_finish_status(p.finish_reason);
        set_fin(q, st < 0 ? ENGINE_STOP : (enum engine_status)st, NULL);
    }
    if (p.has_usage) {
        q->has_usage = true;
        q->usage = p.usage;
    }
    if (p.has_tern) {
        q->m.server.known = true;
        q->m.server.queue_s = p.tern.queue_s;
        q->m.server.prefill_s = p.tern.prefill_s;
        q->m.server.ttft_s = p.tern.ttft_s;
        q->m.server.tpot_s = p.tern.tpot_s;
        q->m.server.decode_s = p.tern.decode_s;
        q->m.server.e2e_s = p.tern.e2e_s;
        q->m.n_preempted = p.tern.n_preempted;
    }
    oai_parsed_free(&p);
    if (len > 10 && memmem(data, len, "\"timings\"", 9)) q->has_timings |= remote_parse_timings(data, len, &q->m);
    (void)name;
    return 0;
}

/* Response bytes: an error body is kept (bounded) for its message; a 2xx
 * body goes through the SSE reader. Returning less than given aborts the
 * transfer (a malformed stream, out of memory). */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct rreq *q = ud;
    struct remote *R = q->R;
    size_t n = size * nmemb;
    double now = remote_now(R);
    if (q->http_status < 300 && !q->score && !q->embed) {
        /* Backpressure: the consumer has event_limit events of this stream
         * unread, so take no more; curl keeps these bytes, stops reading the
         * socket, and hands them back when the sweep resumes it. */
        pthread_mutex_lock(&R->mu);
        bool full = q->n_events >= R->event_limit;
        if (full && !q->recv_paused) {
            q->recv_paused = true;
            q->paused_t = now;
        }
        pthread_mutex_unlock(&R->mu);
        if (full) return CURL_WRITEFUNC_PAUSE;
    }
    q->got_bytes = true;
    q->last_byte_t = now;
    if (q->http_status >= 300) {
        if (q->errbody.len < REMOTE_ERRBODY_MAX)
            rbuf_add(&q->errbody, ptr, n < REMOTE_ERRBODY_MAX - q->errbody.len
                                           ? n : REMOTE_ERRBODY_MAX - q->errbody.len);
        return n;
    }
    if (q->score || q->embed) {
        if (rbuf_add(&q->whole, ptr, n) == 0) return n;
        char msg[256];
        snprintf(msg, sizeof msg, "the %s response from %s is over %zu MiB",
                 q->embed ? "embeddings" : "scoring", q->R->ep[q->ep].base, q->whole.max >> 20);
        set_fin(q, ENGINE_ERROR, msg);
        q->failed = true;
        return 0;
    }
    int rc = sse_reader_feed(&q->sse, ptr, n, on_sse, q);
    if (rc < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "malformed stream from %s: an event over the size limit",
                 q->R->ep[q->ep].base);
        set_fin(q, ENGINE_ERROR, msg);
        q->failed = true;
    }
    return rc == 0 ? n : 0;
}

/* Headers: the status line (each response of a redirect chain starts anew),
 * Retry-After. */
static size_t on_header(char *buf, size_t size, size_t nitems, void *ud)
{
    struct rreq *q = ud;
    size_t n = size * nitems;
    q->last_byte_t = remote_now(q->R);
    if (n > 5 && memcmp(buf, "HTTP/", 5) == 0) {
        const char *sp = memchr(buf, ' ', n);
        q->http_status = sp ? strtol(sp + 1, NULL, 10) : 0;
    } else if (n > 12 && strncasecmp(buf, "Retry-After:", 12) == 0) {
        q->retry_after_s = strtod(buf + 12, NULL);
    } else if (n <= 2 && !q->headers_seen) { /* the blank line ending the headers */
        q->headers_seen = true;
        if (q->http_status < 300) {
            q->m.headers_s = q->last_byte_t - q->m.t_arrival;
            admit(q->R, q, q->last_byte_t);
        }
    }
    return n;
}

int remote_stream_start(struct remote *R, struct rreq *q, char *err, size_t errlen)
{
    const struct rendpoint *ep = &R->ep[q->ep];
    char url[1024];
    snprintf(url, sizeof url, "%s/%s", ep->base,
             q->embed ? "embeddings" : q->chat ? "chat/completions" : "completions");
    q->easy = curl_easy_init();
    if (!q->easy) {
        snprintf(err, errlen, "remote: curl_easy_init failed");
        return -1;
    }
    sse_reader_init(&q->sse, 0);
    q->errbody.max = REMOTE_ERRBODY_MAX;
    q->http_status = 0;
    q->headers_seen = false;
    q->curl_err[0] = 0;
    curl_easy_setopt(q->easy, CURLOPT_URL, url);
    remote_easy_common(R, q->easy, &q->hdrs, true);
    q->hdrs = curl_slist_append(q->hdrs, q->score || q->embed ? "Accept: application/json"
                                                  : "Accept: text/event-stream");
    curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->hdrs);
    curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(q->easy, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
    curl_easy_setopt(q->easy, CURLOPT_ERRORBUFFER, q->curl_err);
    q->last_byte_t = remote_now(R);
    if (curl_multi_add_handle(R->multi, q->easy) != CURLM_OK) {
        snprintf(err, errlen, "remote: cannot add the transfer to %s", url);
        return -1;
    }
    return 0;
}

static void drop_transfer(struct remote *R, struct rreq *q)
{
    if (!q->easy) return;
    double ct = 0, at = 0, st = 0;
    curl_easy_getinfo(q->easy, CURLINFO_CONNECT_TIME, &ct);
    curl_easy_getinfo(q->easy, CURLINFO_APPCONNECT_TIME, &at);
    curl_easy_getinfo(q->easy, CURLINFO_STARTTRANSFER_TIME, &st);
    if (ct > 0 || at > 0) q->m.connect_s = at > ct ? at : ct;
    if (q->m.headers_s <= 0 && st > 0) q->m.headers_s = st;
    /* Removing an unfinished transfer closes its connection: that is how the
     * server learns the request is cancelled (every server here aborts then). */
    curl_multi_remove_handle(R->multi, q->easy);
    curl_easy_cleanup(q->easy);
    q->easy = NULL;
    curl_slist_free_all(q->hdrs);
    q->hdrs = NULL;
    sse_reader_free(&q->sse);
}

/* Final counts: the server's usage when it sent one, else what was seen. */
static void settle_counts(struct remote *R, struct rreq *q)
{
    struct engine_metrics *m = &q->m;
    if (q->has_usage) {
        m->n_prompt = q->usage.prompt_tokens;
        if (q->usage.cached_tokens > 0 || !q->has_timings) m->n_cached = q->usage.cached_tokens;
        int32_t n = q->usage.completion_tokens;
        /* Tokens the stream batched into fewer events: their times are those
         * of the last event (no finer time is known). */
        while (m->n_generated < n && m->n_generated > 0 &&
               push_token_time(q, m->token_t[m->n_generated - 1]) == 0) {}
        if (n >= 0 && n < m->n_generated) m->n_generated = n;
    } else {
        m->counts_estimated = R->tok == NULL;
        if (q->has_timings) m->n_prompt = m->n_cached + m->n_computed;
    }
    if (m->n_prompt > 0 && !q->has_timings) m->n_computed = m->n_prompt - m->n_cached;
}

void remote_stream_finish(struct remote *R, struct rreq *q, enum engine_status st,
                          const char *msg)
{
    drop_transfer(R, q);
    double t = remote_now(R);
    struct engine_metrics *m = &q->m;
    pthread_mutex_lock(&R->mu); /* remote_requests reads the counts */
    m->status = st;
    m->t_finished = t;
    m->http_status = (int32_t)q->http_status;
    settle_counts(R, q);
    metrics_finalize(m);
    /* Queue and prefill happen on the server: the client cannot time them
     * (response headers may come before or after either). They are the
     * server's own figures when it reported them, else 0 (null in the JSON). */
    m->queue_s = m->server.known ? m->server.queue_s : 0;
    m->prefill_s = m->server.known ? m->server.prefill_s : 0;
    struct engine_event ev = {.type = ENGINE_EV_FINISHED, .t = t, .token = -1, .status = st};
    ev.message = msg ? strdup(msg) : NULL;
    if (st == ENGINE_OK && q->embedding) {
        ev.embedding = q->embedding;
        ev.n_embedding = q->n_embedding;
        q->embedding = NULL;
    }
    ev.metrics = malloc(sizeof *ev.metrics);
    if (ev.metrics) {
        *ev.metrics = *m;
        ev.metrics->token_t = NULL;
        if (m->n_generated > 0) {
            ev.metrics->token_t = malloc((size_t)m->n_generated * sizeof(double));
            if (ev.metrics->token_t)
                memcpy(ev.metrics->token_t, m->token_t, (size_t)m->n_generated * sizeof(double));
            else
                ev.metrics->n_generated = 0;
        }
    }
    metrics_add_request(&R->mx, m);
    struct rendpoint *ep = &R->ep[q->ep];
    ep->pub.outstanding--;
    if (st == ENGINE_ERROR || st == ENGINE_REJECTED) {
        ep->pub.errors++;
        if (msg) snprintf(ep->pub.last_error, sizeof ep->pub.last_error, "%s", msg);
    }
    if (q->admitted) R->n_running--;
    R->n_live--;
    q->finished = true;
    if (q->live_prev) q->live_prev->live_next = q->live_next;
    else R->live = q->live_next;
    if (q->live_next) q->live_next->live_prev = q->live_prev;
    q->live_prev = q->live_next = NULL;
    remote_emit(R, q, &ev);
    remote_req_unref(q);           /* the engine's reference */
    pthread_mutex_unlock(&R->mu);
}

/* The message of an HTTP error: the OpenAI error body's message, else the
 * body's first line. */
static void http_error_message(struct remote *R, struct rreq *q, char *out, size_t n)
{
    char detail[400] = "";
    struct oai_parsed p;
    char err[64];
    if (q->errbody.len &&
        oai_response_parse(q->errbody.p, q->errbody.len, &p, err, sizeof err) == 0) {
        if (p.is_error && p.error_message) snprintf(detail, sizeof detail, "%s", p.error_message);
        oai_parsed_free(&p);
    }
    if (!detail[0] && q->errbody.len) {
        size_t k = 0;
        for (; k < q->errbody.len && k + 1 < sizeof detail; k++) {
            char c = q->errbody.p[k];
            if (c == '\n' || c == '\r') break;
            detail[k] = (c >= 32 && c < 127) ? c : '?'; /* untrusted bytes into a message */
        }
        detail[k] = 0;
    }
    const char *what = q->http_status == 401 ? " (unauthorized: check --api-key / TERN_API_KEY)"
                       : q->http_status == 403 ? " (forbidden)"
                       : q->http_status == 404 ? " (not found: is the URL the API base, e.g. .../v1?)"
                       : q->http_status == 429 ? " (rate limited)"
                       : "";
    int k = snprintf(out, n, "HTTP %ld from %s%s: %s", q->http_status, R->ep[q->ep].base, what,
                     detail[0] ? detail : "(no message)");
    /* Retry-After, unless the server's message already says when to retry */
    if (q->retry_after_s > 0 && k > 0 && (size_t)k < n && !strcasestr(detail, "retry"))
        snprintf(out + k, n - (size_t)k, "; retry after %.0f s", q->retry_after_s);
}

/* A score request's answer: the prompt's entries summed into nll_sum over
 * the positions after score_from (what the local engine scores), usage for
 * the counts. A server that leaves them out is named in the error. */
static void finish_score(struct remote *R, struct rreq *q)
{
    char err[256], msg[700];
    double *lp = malloc((size_t)q->n_ids * sizeof *lp);
    const char *body = q->whole.p ? q->whole.p : "";
    if (!lp || oai_prompt_logprobs_parse(body, q->whole.len, q->ids, q->n_ids, lp, err,
                                         sizeof err) != 0) {
        pthread_mutex_lock(&R->mu);
        const char *kind = R->ep[q->ep].server_kind;
        snprintf(msg, sizeof msg, "%s%s%s%s gave no prompt log-probabilities for scoring (echo + "
                 "logprobs, or vLLM's prompt_logprobs): %s", R->ep[q->ep].base,
                 kind[0] ? " (" : "", kind, kind[0] ? ")" : "", lp ? err : "out of memory");
        pthread_mutex_unlock(&R->mu);
        free(lp);
        remote_stream_finish(R, q, ENGINE_ERROR, msg);
        return;
    }
    struct oai_parsed p;
    if (oai_response_parse(body, q->whole.len, &p, err, sizeof err) == 0) {
        if (p.has_usage) {
            q->has_usage = true;
            q->usage = p.usage;
            q->usage.completion_tokens = 0;
        }
        oai_parsed_free(&p);
    }
    double nll = 0, nll_sq = 0;
    int32_t n = 0, missing = 0;
    for (int32_t i = q->score_from + 1; i < q->n_ids; i++) {
        if (isnan(lp[i])) {
            missing++;
            continue;
        }
        nll -= lp[i];
        nll_sq += lp[i] * lp[i];
        n++;
    }
    free(lp);
    if (missing) {
        snprintf(msg, sizeof msg, "%s left %d of %d scored prompt positions without a "
                 "log-probability", R->ep[q->ep].base, missing, missing + n);
        remote_stream_finish(R, q, ENGINE_ERROR, msg);
        return;
    }
    q->m.nll_sum = nll;
    q->m.nll_sq_sum = nll_sq;
    q->m.n_scored = n;
    remote_stream_finish(R, q, ENGINE_OK, NULL);
}

/* An embeddings answer: data[0].embedding (one input per request), an
 * array of finite numbers, L2-normalised here as the local engine's are (a
 * server may have been started without normalisation: llama-server's
 * --embd-normalize); usage.prompt_tokens for the counts. */
static void finish_embed(struct remote *R, struct rreq *q)
{
    char msg[700];
    const char *why = NULL;
    cJSON *j = cJSON_ParseWithLength(q->whole.p ? q->whole.p : "", q->whole.len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(data, 0), "embedding");
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (!j) why = "the body is not JSON";
    else if (!cJSON_IsArray(data) || cJSON_GetArraySize(data) != 1)
        why = "'data' is not an array of one embedding";
    else if (cJSON_IsString(v)) why = "the embedding is base64, not the floats asked for";
    else if (n <= 0 || n > (1 << 20)) why = "'data[0].embedding' is not an array of numbers";
    float *e = why ? NULL : malloc((size_t)n * sizeof *e);
    if (!why && !e) why = "out of memory";
    double ss = 0;
    for (int i = 0; !why && i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(v, i);
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) why = "a value is not a finite number";
        else {
            e[i] = (float)x->valuedouble;
            ss += x->valuedouble * x->valuedouble;
        }
    }
    if (!why && ss <= 0) why = "the vector is all zeros";
    if (why) {
        free(e);
        cJSON_Delete(j);
        snprintf(msg, sizeof msg, "%s gave no usable embedding: %s", R->ep[q->ep].base, why);
        remote_stream_finish(R, q, ENGINE_ERROR, msg);
        return;
    }
    float inv = (float)(1.0 / sqrt(ss));
    for (int i = 0; i < n; i++) e[i] *= inv;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
    if (cJSON_IsNumber(pt) && pt->valuedouble >= 0 && pt->valuedouble < 1e9) {
        q->has_usage = true;
        q->usage.prompt_tokens = (int32_t)pt->valuedouble;
    }
    cJSON_Delete(j);
    q->embedding = e;
    q->n_embedding = n;
    remote_stream_finish(R, q, ENGINE_OK, NULL);
}

static bool retryable(CURLcode rc)
{
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
}

void remote_stream_done(struct remote *R, struct rreq *q, CURLcode rc)
{
    char msg[700];
    const char *base = R->ep[q->ep].base;
    if (rc != CURLE_OK && retryable(rc) && !q->got_bytes && q->retries < R->max_retries) {
        /* Nothing reached the server: safe to try again, with backoff
         * (0.2 s doubling, capped at 2 s). */
        drop_transfer(R, q);
        double wait = 0.2 * (double)(1 << (q->retries < 8 ? q->retries : 8));
        q->retry_at = remote_now(R) + (wait < 2.0 ? wait : 2.0);
        q->retries++;
        return;
    }
    if (q->failed || (q->has_fin && q->fin_status == ENGINE_ERROR)) {
        q->m.interrupted = q->any_text;
        remote_stream_finish(R, q, ENGINE_ERROR, q->fin_message);
        return;
    }
    if (rc != CURLE_OK) {
        q->m.interrupted = q->any_text;
        snprintf(msg, sizeof msg, "%s: %s%s", base, q->curl_err[0] ? q->curl_err : curl_easy_strerror(rc),
                 q->any_text ? " (stream broken: partial reply kept, marked interrupted)" : "");
        remote_stream_finish(R, q, ENGINE_ERROR, msg);
        return;
    }
    if (q->http_status >= 300) {
        http_error_message(R, q, msg, sizeof msg);
        q->m.retry_after_s = q->retry_after_s;
        remote_stream_finish(R, q, q->http_status == 429 || q->http_status == 503 ? ENGINE_REJECTED
                                                                                 : ENGINE_ERROR, msg);
        return;
    }
    if (q->score) {
        finish_score(R, q);
        return;
    }
    if (q->embed) {
        finish_embed(R, q);
        return;
    }
    if (!q->has_fin && !q->done_seen) {
        q->m.interrupted = true;
        snprintf(msg, sizeof msg, "%s closed the stream before its end%s", base,
                 q->any_text ? " (partial reply kept, marked interrupted)" : "");
        remote_stream_finish(R, q, ENGINE_ERROR, msg);
        return;
    }
    remote_stream_finish(R, q, q->has_fin ? q->fin_status : ENGINE_STOP, q->fin_message);
}
