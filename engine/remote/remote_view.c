/* remote_view: what the remote engine shows of itself: the snapshot (the
 * client's own figures beside the servers' scraped view, merged over the
 * endpoints), the live requests, engine_info, and token counts (the model
 * file's tokenizer, else the server's POST /tokenize, else an estimate that
 * engine_info.token_counts names). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "model.h"
#include "remote_impl.h"
#include "tok.h"

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
        out->server.n_recent = t->server.n_recent;
        memcpy(out->server.recent, t->server.recent, sizeof out->server.recent);
        out->server.n_tenants = t->server.n_tenants;
        memcpy(out->server.tenants, t->server.tenants, sizeof out->server.tenants);
        known_any |= ENGINE_STAT_KV_BLOCKS | ENGINE_STAT_STEPS;
        break;
    }
    out->unknown = ~known_any & (ENGINE_STAT_RUNNING | ENGINE_STAT_WAITING | ENGINE_STAT_KV_BLOCKS |
                                 ENGINE_STAT_KV_USAGE | ENGINE_STAT_PREFIX | ENGINE_STAT_PREEMPT |
                                 ENGINE_STAT_SRV_TTFT | ENGINE_STAT_SRV_ITL | ENGINE_STAT_SRV_E2E |
                                 ENGINE_STAT_SRV_QUEUE | ENGINE_STAT_SRV_GEN | ENGINE_STAT_STEPS);
    out->unknown |= ENGINE_STAT_STEPS & ~known_any; /* only tern serve shows its steps */
}

void remote_snapshot(struct engine *e, struct engine_stats *out)
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
    out->paused = R->paused;
    for (const struct rreq *q = R->inbox_head; q; q = q->inbox_next) out->server.held++;
    pthread_mutex_unlock(&R->mu);
    out->backend.name = "remote";
    snprintf(out->backend.device, sizeof out->backend.device, "%s", R->device);
    out->slo_ttft_s = R->mx.slo_ttft_s;
    out->slo_tpot_s = R->mx.slo_tpot_s;
}

int remote_requests(struct engine *e, struct engine_req_info *out, int max)
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

void remote_info(const struct engine *e, struct engine_info *out)
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
    /* Context fitting (the chat) works from the server's own figure. */
    out->n_ctx = R->ep[0].n_ctx;
    /* The lowest cap of any endpoint: a request may go to any of them. */
    for (int32_t i = 0; i < R->n_ep; i++)
        if (R->ep[i].max_tokens_cap &&
            (!out->max_tokens_cap || R->ep[i].max_tokens_cap < out->max_tokens_cap))
            out->max_tokens_cap = R->ep[i].max_tokens_cap;
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
    out->n_embd = -1;              /* the server's model decides; known from its answers */
    out->pooling = ENGINE_POOL_MODEL;
    out->embd_why = "";
}

/* POST ROOT/tokenize: llama-server {"content"} -> {"tokens": [...]}; vLLM
 * {"model","prompt"} -> {"count", "tokens"}. -1 when the server has none. */
int64_t remote_server_tokenize(const struct remote *R, const char *text, size_t len)
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

int64_t remote_count_tokens(const struct engine *e, const char *text, size_t len,
                                   char *err, size_t errlen)
{
    const struct remote *R = (const struct remote *)e;
    if (R->tok) return tok_encode(R->tok, text, len, TOK_ADD_BOS | TOK_PARSE_SPECIAL, NULL, 0, err,
                                  errlen);
    /* The server's count only where it answered at open (bounded wait). */
    int64_t n = R->server_tokenize ? remote_server_tokenize(R, text, len) : -1;
    if (n >= 0) return n;
    return (int64_t)((len + 3) / 4); /* estimate: engine_info.token_counts says so */
}

/* Token bytes only with a local tokenizer (-m): the server's ids are not seen. */
int remote_token_bytes(const struct engine *e, int32_t id, char *out, size_t cap)
{
    const struct remote *R = (const struct remote *)e;
    if (!R->tok || id < 0 || id >= tok_n_vocab(R->tok)) return -1;
    return (int)tok_decode_token_special(R->tok, id, out, cap);
}

int64_t remote_count_chat_tokens(const struct engine *e, const struct engine_message *msgs,
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

